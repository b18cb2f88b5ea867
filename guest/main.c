/*
 * vhpc-guestd: the guest agent.  The main process only listens, forks one
 * session process per connection (session.c says why), reaps, and shuts
 * down; it never parses anything a client sends.  With --init it is also a
 * container's PID 1: it adopts and reaps orphans, and SIGTERM stops every
 * session's command (TERM, grace, KILL) before it exits 0.
 */
#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FDS (GD_MAX_LISTEN * 2 + 1)

struct listener {
	int fd;
	bool control;
	char desc[128];
};

static struct listener lst[MAX_FDS];
static int nlst;
static pid_t *sessions;
static int nsessions;

static const char *sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;

		inet_ntop(AF_INET, &s->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(s->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)sa;

		inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(s->sin6_port));
	} else if (sa->sa_family == AF_VSOCK) {
		const struct sockaddr_vm *s = (const void *)sa;

		snprintf(buf, len, "vsock:%u:%u", s->svm_cid, s->svm_port);
	} else {
		snprintf(buf, len, "family %d", sa->sa_family);
	}
	return buf;
}

static int add_listener(int fd, bool control, const char *desc, struct verr *err)
{
	if (nlst >= MAX_FDS) {
		close(fd);
		return verr_set(err, "too many listening sockets");
	}
	if (listen(fd, 128) < 0) {
		verr_errno(err, "listen on %s", desc);
		close(fd);
		return -1;
	}
	lst[nlst].fd = fd;
	lst[nlst].control = control;
	snprintf(lst[nlst].desc, sizeof(lst[nlst].desc), "%s", desc);
	nlst++;
	return 0;
}

static int open_tcp(const struct gd_listen *l, struct verr *err)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	int r, opened = 0;
	struct verr last = { "" };

	r = getaddrinfo(l->host[0] ? l->host : NULL, l->port, &hints, &res);
	if (r)
		return verr_set(err, "--listen %s: %s", l->spec, gai_strerror(r));
	for (ai = res; ai; ai = ai->ai_next) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char desc[128], a[96];
		int fd, one = 1;

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			verr_errno(&last, "--listen %s: socket", l->spec);
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			verr_errno(&last, "--listen %s: bind %s", l->spec, sockaddr_str(ai->ai_addr, a, sizeof(a)));
			close(fd);
			continue;
		}
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		snprintf(desc, sizeof(desc), "tcp %s", sockaddr_str((struct sockaddr *)&ss, a, sizeof(a)));
		if (add_listener(fd, false, desc, err) < 0) {
			freeaddrinfo(res);
			return -1;
		}
		opened++;
	}
	freeaddrinfo(res);
	if (!opened) {
		*err = last;
		if (!err->msg[0])
			verr_set(err, "--listen %s: no usable address", l->spec);
		return -1;
	}
	return 0;
}

static int open_vsock(const struct gd_listen *l, struct verr *err)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY,
				  .svm_port = l->vsock_port };
	char desc[64];
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return verr_errno(err, "--listen %s: socket(AF_VSOCK)", l->spec);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		verr_errno(err, "--listen %s: bind", l->spec);
		close(fd);
		return -1;
	}
	snprintf(desc, sizeof(desc), "vsock port %u", l->vsock_port);
	return add_listener(fd, false, desc, err);
}

static int open_control(const char *path, struct verr *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	char desc[160];
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return verr_set(err, "--control %s: path is longer than %zu bytes", path, sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path));
	if (lstat(path, &st) == 0) {
		int probe;

		if (!S_ISSOCK(st.st_mode))
			return verr_set(err, "--control %s: exists and is not a socket", path);
		/* A socket nobody answers on is left over from a dead guestd. */
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			return verr_set(err, "--control %s: another process is listening there", path);
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verr_errno(err, "--control %s: socket", path);
	old = umask(077);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		umask(old);
		verr_errno(err, "--control %s: bind", path);
		close(fd);
		return -1;
	}
	umask(old);
	chmod(path, 0600);
	snprintf(desc, sizeof(desc), "control %s", path);
	return add_listener(fd, true, desc, err);
}

static void close_listeners(const struct gd_opts *o)
{
	for (int i = 0; i < nlst; i++) {
		if (lst[i].fd >= 0)
			close(lst[i].fd);
		lst[i].fd = -1;
	}
	if (o->control[0])
		unlink(o->control);
}

static void forget_session(pid_t pid)
{
	for (int i = 0; i < nsessions; i++)
		if (sessions[i] == pid) {
			sessions[i] = sessions[--nsessions];
			return;
		}
}

static void reap_all(void)
{
	int st;
	pid_t p;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		forget_session(p);
		if (WIFSIGNALED(st) && WTERMSIG(st) != SIGTERM && WTERMSIG(st) != SIGKILL)
			log_warn("process %d died of signal %d", (int)p, WTERMSIG(st));
	}
}

static void peer_desc(int fd, const struct listener *l, const struct sockaddr *sa,
		      char *buf, size_t len)
{
	char a[96];

	if (l->control) {
		struct ucred cr;
		socklen_t cl = sizeof(cr);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0)
			snprintf(buf, len, "control(pid %d uid %d)", (int)cr.pid, (int)cr.uid);
		else
			snprintf(buf, len, "control");
	} else {
		snprintf(buf, len, "%s", sockaddr_str(sa, a, sizeof(a)));
	}
}

static void accept_one(const struct listener *l, int sfd, int shut_r,
		       const struct gd_session_ctx *base)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct gd_session_ctx ctx = *base;
	char peer[128];
	pid_t pid;
	int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
			log_err("accept on %s: %s; pausing", l->desc, strerror(errno));
			poll(NULL, 0, 100);
		}
		return;
	}
	peer_desc(fd, l, (struct sockaddr *)&ss, peer, sizeof(peer));
	ctx.peer = peer;
	pid = fork();
	if (pid < 0) {
		log_err("%s: fork: %s", peer, strerror(errno));
		close(fd);
		return;
	}
	if (pid == 0) {
		for (int i = 0; i < nlst; i++)
			close(lst[i].fd);
		close(sfd);
		close(shut_r);
		gd_session(fd, &ctx);
	}
	close(fd);
	sessions[nsessions++] = pid;
	log_debug("%s: session process %d", peer, (int)pid);
}

/* Stops every session (each stops its command: TERM, grace, KILL) and
 * waits for them, with a hard limit. */
static void stop_sessions(const struct gd_opts *o, int sfd)
{
	uint64_t deadline = now_ns() + (uint64_t)(o->grace_ms + 3000) * 1000000ull;

	for (int i = 0; i < nsessions; i++)
		kill(sessions[i], SIGTERM);
	while (nsessions > 0 && now_ns() < deadline) {
		struct pollfd p = { .fd = sfd, .events = POLLIN };
		struct signalfd_siginfo si;

		if (poll(&p, 1, 50) > 0)
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				;
		reap_all();
	}
	/* Only the sessions: orphans that outlive them must not keep a PID 1
	 * from exiting (its exit ends the namespace and them with it). */
	for (int i = 0; i < nsessions; i++) {
		log_warn("session process %d did not stop in time; killing it", (int)sessions[i]);
		kill(sessions[i], SIGKILL);
		while (waitpid(sessions[i], NULL, 0) < 0 && errno == EINTR)
			;
	}
	nsessions = 0;
}

static int setup_log(const char *path, struct verr *err)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return verr_errno(err, "--log %s", path);
	if (dup2(fd, STDERR_FILENO) < 0) {
		close(fd);
		return verr_errno(err, "--log %s: dup2", path);
	}
	close(fd);
	return 0;
}

/* A container guest's output, opened from inside the guest: CRIU saves an
 * open file by its path in one of the process's mounts, so what the node
 * agent opened on the host (on none of the guest's mounts) could not be
 * checkpointed (nodeagent/README.md, "the guest's stdout").  Every process
 * guestd starts without a redirection inherits these. */
static int setup_stdio(const char *path, struct verr *err)
{
	int out = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int rc = 0;

	if (out < 0 || in < 0)
		rc = verr_errno(err, "--stdio %s: open %s", path, out < 0 ? path : "/dev/null");
	else if (dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0)
		rc = verr_errno(err, "--stdio %s: dup2", path);
	if (out >= 0)
		close(out);
	if (in >= 0)
		close(in);
	return rc;
}

int main(int argc, char **argv)
{
	static uint8_t key[CHAN_KEY_LEN];
	struct gd_opts o;
	struct gd_session_ctx ctx;
	struct verr err;
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigset_t mask;
	int sfd, shut[2], r;
	bool stopping = false;

	vlog_init(argv[0]);
	gd_opts_defaults(&o);
	r = gd_opts_parse(&o, argc, argv, &err);
	if (r > 0)
		return 0;
	if (r < 0 || gd_opts_finish(&o, &err) < 0) {
		fprintf(stderr, "vhpc-guestd: %s\n", err.msg);
		return 2;
	}
	if (o.stdio[0] && setup_stdio(o.stdio, &err) < 0) {
		fprintf(stderr, "vhpc-guestd: %s\n", err.msg);
		return 1;
	}
	if (o.log[0] && setup_log(o.log, &err) < 0) {
		fprintf(stderr, "vhpc-guestd: %s\n", err.msg);
		return 1;
	}
	if (chan_key_load(o.key, key, &err) < 0) {
		log_err("%s", err.msg);
		return 1;
	}
	/* A kvm guest's spool lives in its own /run, made here; a container's
	 * is a folder of the host's bound there. */
	if (o.spool[0] && mkdir_p(o.spool, 0700, &err) < 0) {
		log_err("--spool: %s", err.msg);
		return 1;
	}
	sessions = calloc((size_t)o.max_sessions, sizeof(*sessions));
	if (!sessions) {
		log_err("out of memory");
		return 1;
	}
	sigaction(SIGPIPE, &sa, NULL);
	/* SIGCHLD ignored by whoever started us would make children vanish
	 * unreaped; we want them. */
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	/* Blocked signals are queued even for a PID 1 without handlers. */
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0 || pipe2(shut, O_CLOEXEC) < 0) {
		log_err("signalfd/pipe: %s", strerror(errno));
		return 1;
	}
	fcntl(shut[0], F_SETFL, O_NONBLOCK);
	if (o.init && getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		log_warn("--init: cannot become a child subreaper: %s", strerror(errno));
	for (int i = 0; i < o.nlisten; i++) {
		r = o.listen[i].kind == GD_LISTEN_VSOCK ? open_vsock(&o.listen[i], &err)
							 : open_tcp(&o.listen[i], &err);
		if (r < 0)
			break;
	}
	if (r == 0 && o.control[0])
		r = open_control(o.control, &err);
	if (r < 0) {
		log_err("%s", err.msg);
		close_listeners(&o);
		return 1;
	}
	ctx = (struct gd_session_ctx){ .o = &o, .key = key, .shutdown_fd = shut[1],
				       .started_s = now_s(), .main_pid = getpid() };
	for (int i = 0; i < nlst; i++)
		log_info("%s: listening on %s", o.name, lst[i].desc);
	log_info("%s: ready (pid %d%s)", o.name, (int)getpid(), o.init ? ", init" : "");

	while (!stopping) {
		struct pollfd p[MAX_FDS + 2];
		int n = 0, i_sig, i_shut;
		bool room = nsessions < o.max_sessions;

		i_sig = n;
		p[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		i_shut = n;
		p[n++] = (struct pollfd){ .fd = shut[0], .events = POLLIN };
		/* At the limit, new connections wait in the listen backlog. */
		for (int i = 0; i < nlst; i++)
			p[n++] = (struct pollfd){ .fd = lst[i].fd, .events = room ? POLLIN : 0 };
		if (poll(p, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll: %s", strerror(errno));
			break;
		}
		if (p[i_sig].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
					log_info("%s: signal %u: stopping", o.name, si.ssi_signo);
					stopping = true;
				} else if (si.ssi_signo == SIGHUP) {
					log_info("%s: SIGHUP ignored", o.name);
				}
			}
			reap_all();
		}
		if (p[i_shut].revents) {
			log_info("%s: stopping on request", o.name);
			stopping = true;
		}
		for (int i = 0; i < nlst && !stopping; i++)
			if (p[i + 2].revents & POLLIN && nsessions < o.max_sessions)
				accept_one(&lst[i], sfd, shut[0], &ctx);
	}
	close_listeners(&o);
	stop_sessions(&o, sfd);
	gd_detached_stop_all(&o);
	log_info("%s: stopped", o.name);
	return 0;
}
