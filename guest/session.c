/*
 * One client connection, served by its own process (forked by main.c).
 *
 * Why a process per connection: the channel API (lib/chan.c) is blocking,
 * and a blocking chan_send is exactly the backpressure we want (a client
 * that reads slowly stops us reading the command's pipes, which stops the
 * command); a session that misbehaves cannot disturb the others; and the
 * session process is the natural child subreaper of its command, so it can
 * reap and account for everything the command leaves behind.  Open MPI
 * starts one orted per guest, so sessions are few and long; a fork per
 * connection costs well under a millisecond.
 *
 * Stopping a command: SIGTERM to its process group, then SIGKILL after the
 * grace period.  The SIGKILL comes from a SIGALRM handler (an interval
 * timer) so that it happens even while the session is blocked sending to a
 * slow client.
 */
#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t g_term;
/* on_term already sent SIGTERM to the group (and armed the SIGKILL timer). */
static volatile sig_atomic_t g_term_sent;
static volatile pid_t g_pgid;
static int g_grace_ms;

static void arm_kill_timer(int ms)
{
	struct itimerval it = { .it_value = { ms / 1000, (ms % 1000) * 1000 } };

	if (ms <= 0)
		it.it_value.tv_usec = 1;
	setitimer(ITIMER_REAL, &it, NULL);
}

static void disarm_kill_timer(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &it, NULL);
}

static void on_term(int sig)
{
	int e = errno;
	pid_t p = g_pgid;

	(void)sig;
	if (!g_term && p > 0) {
		kill(-p, SIGTERM);
		arm_kill_timer(g_grace_ms);
		g_term_sent = 1;
	}
	g_term = 1;
	errno = e;
}

static void on_alarm(int sig)
{
	int e = errno;
	pid_t p = g_pgid;

	(void)sig;
	if (p > 0)
		kill(-p, SIGKILL);
	errno = e;
}

struct sess {
	const struct gd_session_ctx *ctx;
	struct chan c;
	int sfd;                  /* signalfd for SIGCHLD */
	struct gd_child ch;
	bool running, exited, stopping, timed_out;
	int wstatus;
};

static void stop_group(struct sess *S, const char *why)
{
	if (S->stopping || g_pgid <= 0)
		return;
	S->stopping = true;
	log_info("%s: stopping process group %d (%s)", S->ctx->peer, (int)g_pgid, why);
	/* A second SIGTERM would run the command's trap twice. */
	if (g_term_sent)
		return;
	if (kill(-g_pgid, SIGTERM) < 0 && errno == ESRCH)
		return;
	arm_kill_timer(g_grace_ms);
}

/* Reaps every exited child: the command, and (as child subreaper) whatever
 * it left behind. */
static void reap(struct sess *S)
{
	int st;
	pid_t p;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		if (S->running && p == S->ch.pid) {
			S->exited = true;
			S->wstatus = st;
		}
	}
}

static void drain_signalfd(int sfd)
{
	struct signalfd_siginfo si;

	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
}

/* Waits until no process of the command's group is left (SIGKILL comes
 * from the timer armed by stop_group), then forgets the group. */
static void wait_group_gone(struct sess *S)
{
	uint64_t deadline = now_ns() + (uint64_t)(g_grace_ms + 3000) * 1000000ull;

	while (g_pgid > 0) {
		struct pollfd p = { .fd = S->sfd, .events = POLLIN };

		reap(S);
		if (kill(-g_pgid, 0) < 0 && errno == ESRCH)
			break;
		if (now_ns() > deadline) {
			log_warn("%s: process group %d still has members after SIGKILL", S->ctx->peer,
				 (int)g_pgid);
			break;
		}
		if (poll(&p, 1, 20) > 0)
			drain_signalfd(S->sfd);
	}
	disarm_kill_timer();
	g_pgid = 0;
	reap(S);
}

/* Sends and frees text. */
static int send_text(struct sess *S, uint8_t type, char *text)
{
	struct verr e;
	int r;

	if (!text)
		return verr_set(&e, "out of memory"), -1;
	r = chan_send(&S->c, type, text, strlen(text), &e);
	free(text);
	if (r < 0)
		log_info("%s: %s", S->ctx->peer, e.msg);
	return r;
}

static int send_json(struct sess *S, char *text)
{
	return send_text(S, CHAN_JSON, text);
}

static int reply_hello(struct sess *S)
{
	return send_json(S, gd_reply_ok("hello", gd_hello_info(S->ctx->o, S->ctx->started_s,
								 S->ctx->main_pid)));
}

static int reply_shutdown(struct sess *S)
{
	log_info("%s: shutdown requested", S->ctx->peer);
	if (send_json(S, gd_reply_ok("shutdown", NULL)) < 0)
		return -1;
	if (write(S->ctx->shutdown_fd, "x", 1) < 0)
		log_warn("%s: telling guestd to shut down: %s", S->ctx->peer, strerror(errno));
	return 0;
}

/* spawn, status/wait and kill: detached commands (detached.c). */
static int detached(struct sess *S, const struct greq *req)
{
	const char *op = greq_op_name(req->op);
	struct json_object *extra = NULL;
	struct verr e;
	int r;

	switch (req->op) {
	case GREQ_SPAWN:
		r = gd_detached_spawn(S->ctx->o, req, &extra, &e);
		break;
	case GREQ_KILL:
		r = gd_detached_kill(S->ctx->o, req->id, req->sig, &e);
		if (r == 0)
			log_info("%s: signal %d to detached %s", S->ctx->peer, req->sig, req->id);
		break;
	case GREQ_OUTPUT:
		r = gd_detached_output(S->ctx->o, req->id, req->offset, (size_t)req->max, &extra, &e);
		break;
	default:
		r = gd_detached_status(S->ctx->o, req->id, req->op == GREQ_WAIT ? req->wait_ms : 0,
				       &g_term, &extra, &e);
		break;
	}
	if (r < 0) {
		log_warn("%s: %s", S->ctx->peer, e.msg);
		return send_json(S, gd_reply_error(op, e.msg));
	}
	return send_json(S, gd_reply_ok(op, extra));
}

/* A request that arrives while a command runs. */
static int running_frame(struct sess *S, uint8_t type, const char *buf, size_t len)
{
	struct gd_step st;
	int r = 0;

	gd_dispatch(GD_RUNNING, type, buf, len, &st);
	switch (st.act) {
	case GD_ACT_REPLY:
		log_warn("%s: rejected request: %s", S->ctx->peer, st.why.msg);
		r = send_json(S, st.reply);
		st.reply = NULL;
		break;
	case GD_ACT_SIGNAL:
		log_info("%s: signal %d to process group %d", S->ctx->peer, st.req.sig, (int)S->ch.pid);
		if (kill(-S->ch.pid, st.req.sig) < 0 && errno != ESRCH) {
			char msg[128];

			snprintf(msg, sizeof(msg), "signal: %s", strerror(errno));
			r = send_json(S, gd_reply_error("signal", msg));
		} else {
			r = send_json(S, gd_reply_ok("signal", NULL));
		}
		break;
	case GD_ACT_HELLO:
		r = reply_hello(S);
		break;
	case GD_ACT_SHUTDOWN:
		r = reply_shutdown(S);
		break;
	case GD_ACT_EXEC:   /* the dispatcher refuses these while running */
	case GD_ACT_SPAWN:
	case GD_ACT_STATUS:
	case GD_ACT_KILL:
		break;
	}
	gd_step_free(&st);
	return r;
}

/* Relays one chunk of a pipe (closing it at EOF); -1 when the client is gone. */
static int relay(struct sess *S, int *fd, uint8_t type, char *buf)
{
	struct verr e;
	ssize_t n = read(*fd, buf, GD_OUT_CHUNK);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	/* A pty's master reads EIO once no process holds its slave open. */
	if (n < 0 && errno == EIO && S->ch.pty)
		n = 0;
	if (n < 0) {
		log_warn("%s: reading the command's output: %s", S->ctx->peer, strerror(errno));
		n = 0;
	}
	if (n == 0) {
		uint8_t which = type;

		close(*fd);
		*fd = -1;
		return chan_send(&S->c, CHAN_EOF, &which, 1, &e) < 0 ? -1 : 0;
	}
	if (chan_send(&S->c, type, buf, (size_t)n, &e) < 0) {
		log_info("%s: %s", S->ctx->peer, e.msg);
		return -1;
	}
	return 0;
}

/* The command's stdin, as the client sends it (exec with "stdin": true):
 * held here until the command takes it, never more than GD_STDIN_MAX
 * before the session stops reading the client. */
struct stdin_buf {
	bool asked;               /* the exec asked for stdin */
	char *b;
	size_t len;
	bool eof;                 /* the client's EOF came: close once drained */
};

static void stdin_close(struct sess *S, struct stdin_buf *in)
{
	if (S->ch.in_fd >= 0)
		close(S->ch.in_fd);
	S->ch.in_fd = -1;
	free(in->b);
	in->b = NULL;
	in->len = 0;
}

/* Hands what the pipe takes to the command; a command that closed its
 * stdin gets no more (what was left is dropped). */
static void stdin_flush(struct sess *S, struct stdin_buf *in)
{
	while (S->ch.in_fd >= 0 && in->len) {
		ssize_t n = write(S->ch.in_fd, in->b, in->len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			stdin_close(S, in);
			return;
		}
		memmove(in->b, in->b + n, in->len - (size_t)n);
		in->len -= (size_t)n;
	}
	if (in->eof && !in->len)
		stdin_close(S, in);
}

/* A WINSIZE frame for a pty command: the pty takes the size and the
 * kernel tells the foreground group (SIGWINCH).  0 when it was one. */
static int winsize_frame(struct sess *S, uint8_t type, const char *buf, size_t len)
{
	struct winsize ws = { 0 };
	struct verr e;
	int fd = S->ch.in_fd >= 0 ? S->ch.in_fd : S->ch.out_fd;

	if (type != CHAN_WINSIZE || !S->ch.pty)
		return -1;
	if (gd_winsize_parse(buf, len, &ws.ws_row, &ws.ws_col, &e) < 0) {
		log_warn("%s: rejected frame: %s", S->ctx->peer, e.msg);
		return send_json(S, gd_reply_error(NULL, e.msg)) < 0 ? -2 : 0;
	}
	if (fd >= 0 && ioctl(fd, TIOCSWINSZ, &ws) < 0)
		log_warn("%s: setting the pty's size: %s", S->ctx->peer, strerror(errno));
	return 0;
}

/* A STDIN frame, or the EOF of stdin; 0 when it was one of those. */
static int stdin_frame(struct sess *S, struct stdin_buf *in, uint8_t type, const char *buf, size_t len)
{
	if (!in->asked)
		return -1;
	if (type == CHAN_EOF && len == 1 && (uint8_t)buf[0] == CHAN_STDIN) {
		in->eof = true;
		stdin_flush(S, in);
		return 0;
	}
	if (type != CHAN_STDIN)
		return -1;
	if (S->ch.in_fd < 0 || in->eof || !len)
		return 0;   /* the command closed its stdin: dropped */
	char *nb = realloc(in->b, in->len + len);

	if (!nb) {
		stdin_close(S, in);
		return 0;
	}
	in->b = nb;
	memcpy(in->b + in->len, buf, len);
	in->len += len;
	stdin_flush(S, in);
	return 0;
}

static int poll_timeout(uint64_t deadline)
{
	uint64_t now = now_ns();

	if (!deadline)
		return -1;
	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* Runs one exec request to its end.  Returns 0 when the connection can
 * take another request, -1 when it is gone. */
static int run_exec(struct sess *S, struct greq *req)
{
	struct verr e;
	char *buf = NULL;
	uint64_t deadline = 0;
	bool gone = false;
	struct json_object *extra;
	struct stdin_buf in = { 0 };

	if (gd_spawn(req, &S->ch, &e) < 0) {
		log_warn("%s: %s", S->ctx->peer, e.msg);
		return send_json(S, gd_reply_error("exec", e.msg));
	}
	g_pgid = S->ch.pid;
	in.asked = S->ch.in_fd >= 0;
	S->running = true;
	S->exited = S->stopping = S->timed_out = false;
	log_info("%s: exec pid %d%s: %s%s", S->ctx->peer, (int)S->ch.pid, S->ch.pty ? " on a pty" : "",
		 req->argv[0], req->argc > 1 ? " ..." : "");
	extra = json_object_new_object();
	json_object_object_add(extra, "pid", json_object_new_int((int)S->ch.pid));
	if (send_json(S, gd_reply_ok("exec", extra)) < 0)
		gone = true;
	if (req->timeout_ms > 0)
		deadline = now_ns() + (uint64_t)req->timeout_ms * 1000000ull;
	buf = malloc(GD_OUT_CHUNK);
	if (!buf)
		gone = true;
	/* A stdin that stays open is a command that never exits on its EOF:
	 * it goes when the command does. */
	while (!gone && !(S->exited && S->ch.out_fd < 0 && S->ch.err_fd < 0)) {
		struct pollfd p[5];
		int n = 0, i_sock, i_out = -1, i_err = -1, i_in = -1, i_sig, r;

		if (g_term)
			stop_group(S, "guestd is stopping");
		i_sock = n;
		p[n++] = (struct pollfd){ .fd = in.len < GD_STDIN_MAX ? S->c.fd : -1, .events = POLLIN };
		if (S->ch.in_fd >= 0 && in.len) {
			i_in = n;
			p[n++] = (struct pollfd){ .fd = S->ch.in_fd, .events = POLLOUT };
		}
		i_sig = n;
		p[n++] = (struct pollfd){ .fd = S->sfd, .events = POLLIN };
		if (S->ch.out_fd >= 0) {
			i_out = n;
			p[n++] = (struct pollfd){ .fd = S->ch.out_fd, .events = POLLIN };
		}
		if (S->ch.err_fd >= 0) {
			i_err = n;
			p[n++] = (struct pollfd){ .fd = S->ch.err_fd, .events = POLLIN };
		}
		r = poll(p, n, S->timed_out ? -1 : poll_timeout(deadline));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			log_err("%s: poll: %s", S->ctx->peer, strerror(errno));
			gone = true;
			break;
		}
		if (r == 0 && deadline && !S->timed_out) {
			S->timed_out = true;
			stop_group(S, "its timeout expired");
			continue;
		}
		if (p[i_sig].revents) {
			drain_signalfd(S->sfd);
			reap(S);
		}
		if (i_out >= 0 && p[i_out].revents && relay(S, &S->ch.out_fd, CHAN_STDOUT, buf) < 0)
			gone = true;
		if (!gone && i_err >= 0 && p[i_err].revents && relay(S, &S->ch.err_fd, CHAN_STDERR, buf) < 0)
			gone = true;
		if (i_in >= 0 && p[i_in].revents)
			stdin_flush(S, &in);
		if (!gone && p[i_sock].revents) {
			uint8_t type;
			char *fb;
			size_t len;

			r = chan_recv(&S->c, &type, &fb, &len, GD_FRAME_TIMEOUT_MS, &e);
			if (r != 0) {
				log_info("%s: client went away while pid %d runs%s%s", S->ctx->peer,
					 (int)S->ch.pid, r < 0 ? ": " : "", r < 0 ? e.msg : "");
				gone = true;
			} else {
				int w = winsize_frame(S, type, fb, len);

				if (w == -2 || (w == -1 && stdin_frame(S, &in, type, fb, len) < 0 &&
						running_frame(S, type, fb, len) < 0))
					gone = true;
				free(fb);
			}
		}
	}
	free(buf);
	if (gone) {
		stop_group(S, "the client is gone");
	} else {
		char *ex = gd_exit_json(S->wstatus, S->timed_out);

		log_info("%s: pid %d ended: %s", S->ctx->peer, (int)S->ch.pid, ex ? ex : "?");
		if (send_text(S, CHAN_EXIT, ex) < 0)
			gone = true;
		/* Whatever the command left in its group goes too. */
		if (kill(-S->ch.pid, 0) == 0)
			stop_group(S, "the command ended; stopping what it left running");
	}
	stdin_close(S, &in);
	wait_group_gone(S);
	if (S->ch.out_fd >= 0)
		close(S->ch.out_fd);
	if (S->ch.err_fd >= 0)
		close(S->ch.err_fd);
	S->ch.out_fd = S->ch.err_fd = -1;
	S->running = false;
	return gone ? -1 : 0;
}

/* Waits for the next frame; false when the session should end. */
static bool wait_request(struct sess *S, uint64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = S->c.fd, .events = POLLIN },
				       { .fd = S->sfd, .events = POLLIN } };
		int r;

		if (g_term)
			return false;
		r = poll(p, 2, poll_timeout(deadline));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return false;
		if (r == 0) {
			log_warn("%s: no authenticated request within %lld ms; closing", S->ctx->peer,
				 S->ctx->o->handshake_ms);
			return false;
		}
		if (p[1].revents) {
			drain_signalfd(S->sfd);
			reap(S);
		}
		if (p[0].revents)
			return true;
	}
}

static void setup_signals(struct sess *S)
{
	struct sigaction sa = { .sa_handler = on_term };
	sigset_t chld, others;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	S->sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	sigfillset(&others);
	sigdelset(&others, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &others, NULL);
}

void gd_session(int fd, const struct gd_session_ctx *ctx)
{
	struct sess S = { .ctx = ctx, .sfd = -1, .ch = { .out_fd = -1, .err_fd = -1 } };
	struct verr e;
	uint64_t deadline;
	int one = 1, idle = 30, intvl = 10, cnt = 3;

	g_grace_ms = (int)ctx->o->grace_ms;
	setup_signals(&S);
	if (S.sfd < 0) {
		log_err("%s: signalfd: %s", ctx->peer, strerror(errno));
		_exit(1);
	}
	/* Everything the commands leave behind comes back to us to be reaped,
	 * and if guestd itself is killed we stop our command. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != ctx->main_pid)
		_exit(0);
	/* Small frames go out at once; a vanished peer is noticed in ~1 min. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	/* Until its first authenticated frame the peer is a stranger and has
	 * the handshake timeout, all told; afterwards it may stay idle. */
	deadline = now_ns() + (uint64_t)ctx->o->handshake_ms * 1000000ull;
	if (chan_server(&S.c, fd, ctx->key, (int)ctx->o->handshake_ms, &e) < 0) {
		log_warn("%s: %s", ctx->peer, e.msg);
		_exit(0);
	}
	for (;;) {
		struct gd_step st;
		uint8_t type;
		char *buf;
		size_t len;
		int r;

		if (!wait_request(&S, deadline))
			break;
		r = chan_recv(&S.c, &type, &buf, &len, GD_FRAME_TIMEOUT_MS, &e);
		if (r == 1)
			break;
		if (r < 0) {
			log_warn("%s: %s", ctx->peer, e.msg);
			break;
		}
		deadline = 0;
		gd_dispatch(GD_IDLE, type, buf, len, &st);
		free(buf);
		switch (st.act) {
		case GD_ACT_REPLY:
			log_warn("%s: rejected request: %s", ctx->peer, st.why.msg);
			r = send_json(&S, st.reply);
			st.reply = NULL;
			break;
		case GD_ACT_HELLO:
			r = reply_hello(&S);
			break;
		case GD_ACT_SHUTDOWN:
			r = reply_shutdown(&S);
			break;
		case GD_ACT_EXEC:
			r = run_exec(&S, &st.req);
			break;
		case GD_ACT_SPAWN:
		case GD_ACT_STATUS:
		case GD_ACT_KILL:
			r = detached(&S, &st.req);
			break;
		case GD_ACT_SIGNAL:  /* the dispatcher refuses it when idle */
			break;
		}
		gd_step_free(&st);
		if (r < 0)
			break;
	}
	chan_close(&S.c);
	_exit(0);
}
