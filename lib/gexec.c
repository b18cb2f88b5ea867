/*
 * Client of vhpc-guestd (guest/PROTOCOL.md).  Everything the guest sends is
 * checked: a guest is hostile until proven otherwise, even one that holds
 * the job key.
 */
#include "lib/gexec.h"
#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define GEXEC_PROTO 1
/* exec with a pty (guest/PROTOCOL.md): asked for only then, so that
 * everything else still works with a guestd of protocol 1 */
#define GEXEC_PROTO_PTY 2
/* Once a frame's first byte arrived, the rest must follow within this. */
#define FRAME_TIMEOUT_MS 30000
/* After the guest's own timeout handling should have ended a command, how
 * long the client still waits before it gives up on the guest. */
#define BACKSTOP_MS 60000
/* Stdin goes in frames a unix socket that polls writable always takes. */
#define STDIN_CHUNK 4096
/* The most a frame from the guest may hold, checked before anything is
 * allocated for it: guestd sends output in frames of 64 KiB
 * (guest/PROTOCOL.md), and its JSON replies are far smaller.  Only an
 * output reply is bigger: base64 of what was asked, plus its fields. */
#define MAX_GUEST_FRAME (64u << 10)
#define OUTPUT_REPLY_MAX(max) (sodium_base64_ENCODED_LEN(max, sodium_base64_VARIANT_ORIGINAL) + 4096)
#define GONE_GRACE_TICKS 100   /* x 100 ms: a guest resetting under the nested lab took seconds */

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = now_ns();

	if (!deadline)
		return 0;
	if (now >= deadline)
		return -1;
	return (int)((deadline - now + 999999) / 1000000);
}

/* connect() bounded by a deadline (0 = none). */
static int connect_deadline(int fd, const struct sockaddr *sa, socklen_t len, uint64_t deadline)
{
	int fl = fcntl(fd, F_GETFL), soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (!deadline)
		return connect(fd, sa, len);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	if (connect(fd, sa, len) < 0) {
		if (errno != EINPROGRESS && errno != EAGAIN)
			return -1;
		if (fd_wait(fd, POLLOUT, deadline) < 0)
			return -1;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			return -1;
		if (soerr) {
			errno = soerr;
			return -1;
		}
	}
	fcntl(fd, F_SETFL, fl);
	return 0;
}

static int handshake(struct chan *c, int fd, const uint8_t key[CHAN_KEY_LEN],
		     uint64_t deadline, const char *what, struct verr *err)
{
	int ms = remaining_ms(deadline);

	if (ms < 0) {
		close(fd);
		return verr_set(err, "%s: timed out before the handshake", what);
	}
	if (chan_client(c, fd, key, ms, err) < 0) {
		close(fd);
		return verr_wrap(err, "%s", what);
	}
	return 0;
}

int gexec_connect_tcp(struct chan *c, const char *host, int port,
		      const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	char portstr[8];
	bool unreachable = false;
	int r;

	if (port <= 0 || port > 65535)
		return verr_set(err, "guest port %d is outside 1..65535", port);
	snprintf(portstr, sizeof(portstr), "%d", port);
	r = getaddrinfo(host, portstr, &hints, &res);
	if (r)
		return verr_set(err, "cannot resolve guest '%s': %s", host,
				r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
	verr_set(err, "cannot reach %s:%d: no address", host, port);
again:
	for (ai = res; ai; ai = ai->ai_next) {
		char addr[NI_MAXHOST] = "?", what[NI_MAXHOST + 300];
		int fd, one = 1;

		getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr), NULL, 0, NI_NUMERICHOST);
		snprintf(what, sizeof(what), "guest %s:%d (%s)", host, port, addr);
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			verr_errno(err, "%s: socket", what);
			continue;
		}
		if (connect_deadline(fd, ai->ai_addr, ai->ai_addrlen, deadline) < 0) {
			unreachable |= errno == EHOSTUNREACH || errno == ENETUNREACH || errno == ECONNREFUSED;
			verr_errno(err, "cannot connect to %s", what);
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		if (handshake(c, fd, key, deadline, what, err) == 0) {
			freeaddrinfo(res);
			return 0;
		}
	}
	/* A job network that is still coming up (ARP unanswered while a
	 * WireGuard handshake completes, a guest whose agent is not yet
	 * listening) refuses for a moment what it takes a second later; one
	 * failed look would end the job.  Tried again until the deadline. */
	if (unreachable && deadline && remaining_ms(deadline) > CONNECT_RETRY_MS) {
		unreachable = false;
		usleep(CONNECT_RETRY_MS * 1000);
		goto again;
	}
	freeaddrinfo(res);
	return -1;
}

/* Connects to the unix socket at path without following a symlink there:
 * the socket may sit in a directory the guest can write, where it could plant
 * a link to any socket of the host.  The final name is opened O_PATH and
 * checked to be a socket; the connect goes through the descriptor. */
int gexec_unix_open(const char *path, uint64_t deadline, const char *what, struct verr *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, pfd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return verr_set(err, "%s: the path is too long", what);
	pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return verr_errno(err, "cannot connect to %s", what);
	if (fstat(pfd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(pfd);
		return verr_set(err, "cannot connect to %s: not a socket (a symlink or file in its place)", what);
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", pfd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		close(pfd);
		return verr_errno(err, "%s: socket", what);
	}
	if (connect_deadline(fd, (struct sockaddr *)&sa, sizeof(sa), deadline) < 0) {
		verr_errno(err, "cannot connect to %s", what);
		close(fd);
		close(pfd);
		return -1;
	}
	close(pfd);
	return fd;
}

int gexec_connect_unix(struct chan *c, const char *path,
		       const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err)
{
	uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	char what[160];
	int fd;

	snprintf(what, sizeof(what), "guest socket %s", path);
	fd = gexec_unix_open(path, deadline, what, err);
	if (fd < 0)
		return -1;
	return handshake(c, fd, key, deadline, what, err);
}

/* The VMM's answer to "CONNECT <port>\n": "OK <host port>\n".  Read a byte
 * at a time: the guest's first channel bytes may follow in the same
 * segment and belong to the handshake. */
static int vsock_answer(int fd, uint64_t deadline, const char *what, struct verr *err)
{
	char line[64];
	size_t n = 0;
	long long hp;

	for (;;) {
		bool eof = false;

		if (n == sizeof(line) - 1)
			return verr_set(err, "%s: the VMM's answer to CONNECT is longer than %zu bytes", what, n);
		if (read_full_deadline(fd, line + n, 1, deadline, &eof) < 0) {
			if (eof)
				return verr_set(err, "%s: refused (nothing listens on that vsock port in the guest yet, "
						"or the guest reset the connection)", what);
			if (errno == ETIMEDOUT)
				return verr_set(err, "%s: no answer to CONNECT in time (the guest's vsock driver is not up yet?)", what);
			return verr_errno(err, "%s: reading the answer to CONNECT", what);
		}
		if (line[n] == '\n')
			break;
		n++;
	}
	line[n] = 0;
	if (strncmp(line, "OK ", 3) || parse_ll(line + 3, 0, 0xffffffffLL, &hp) < 0) {
		for (char *p = line; *p; p++)
			if (*p < ' ' || *p > '~')
				*p = '?';
		return verr_set(err, "%s: unexpected answer to CONNECT: '%s'", what, line);
	}
	return 0;
}

/* The stream to guestd, connected but before the handshake. */
static int open_vsock(const char *uds, unsigned port, uint64_t deadline, const char *what, struct verr *err)
{
	char req[32];
	int fd;

	if (port < 1 || port > 0xfffffffeu)
		return verr_set(err, "%s: the port must be 1..4294967294", what);
	fd = gexec_unix_open(uds, deadline, what, err);
	if (fd < 0)
		return -1;
	snprintf(req, sizeof(req), "CONNECT %u\n", port);
	if (send_full(fd, req, strlen(req)) < 0) {
		verr_errno(err, "%s: sending CONNECT", what);
		close(fd);
		return -1;
	}
	if (vsock_answer(fd, deadline, what, err) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int gexec_open_stream(const char *sock, unsigned vsock_port, int timeout_ms, struct verr *err)
{
	uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	char what[600];

	if (vsock_port) {
		snprintf(what, sizeof(what), "guest vsock port %u through %s", vsock_port, sock);
		return open_vsock(sock, vsock_port, deadline, what, err);
	}
	snprintf(what, sizeof(what), "guest socket %s", sock);
	return gexec_unix_open(sock, deadline, what, err);
}

int gexec_connect_vsock(struct chan *c, const char *uds, unsigned port,
			const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err)
{
	uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	char what[200];
	int fd;

	snprintf(what, sizeof(what), "guest vsock port %u through %s", port, uds);
	fd = open_vsock(uds, port, deadline, what, err);
	if (fd < 0)
		return -1;
	return handshake(c, fd, key, deadline, what, err);
}

static int send_obj(struct chan *c, struct json_object *o, struct verr *err)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	int r = chan_send(c, CHAN_JSON, s, strlen(s), err);

	json_object_put(o);
	return r;
}

static struct json_object *new_req(const char *op)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "v", json_object_new_int(GEXEC_PROTO));
	json_object_object_add(o, "op", json_object_new_string(op));
	return o;
}

/* A JSON object from the guest, or NULL with err set. */
static struct json_object *parse_obj(const char *buf, size_t len, const char *what, struct verr *err)
{
	struct json_tokener *tok = json_tokener_new_ex(16);
	struct json_object *o;

	if (!tok) {
		verr_set(err, "out of memory");
		return NULL;
	}
	o = json_tokener_parse_ex(tok, buf, (int)len);
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    !json_object_is_type(o, json_type_object)) {
		verr_set(err, "the guest sent a malformed %s (%zu bytes of JSON)", what, len);
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static bool obj_ok(struct json_object *o)
{
	struct json_object *v;

	return json_object_object_get_ex(o, "ok", &v) && json_object_is_type(v, json_type_boolean) &&
	       json_object_get_boolean(v);
}

static const char *obj_error(struct json_object *o)
{
	struct json_object *v;

	if (json_object_object_get_ex(o, "error", &v) && json_object_is_type(v, json_type_string))
		return json_object_get_string(v);
	return "(no reason given)";
}

static int closed_error(bool replied, struct verr *err)
{
	if (!replied)
		return verr_set(err, "the guest closed the connection without replying "
				"(wrong job key, or guestd refused the connection)");
	/* Through vhpcd the node may be the one that closed it. */
	return verr_set(err, "the connection closed before the command finished (the guest stopped, or its "
			"node closed the job's sessions for a checkpoint: vhpc checkpoint --close-sessions, or a "
			"node drain --checkpoint)");
}

/* Receives the reply to a simple request (no output frames expected), of
 * at most max bytes. */
static int simple_reply_max(struct chan *c, const char *op, int timeout_ms, size_t max, char **text,
			    struct verr *err)
{
	uint8_t type;
	char *buf;
	size_t len;
	struct json_object *o;
	int r = chan_recv_max(c, &type, &buf, &len, max, timeout_ms, err);

	if (r == 1)
		return closed_error(false, err);
	if (r < 0)
		return verr_wrap(err, "%s", op);
	if (type != CHAN_JSON) {
		free(buf);
		return verr_set(err, "%s: the guest answered with a frame of type %u instead of a reply", op, type);
	}
	o = parse_obj(buf, len, "reply", err);
	if (!o) {
		free(buf);
		return -1;
	}
	if (!obj_ok(o)) {
		verr_set(err, "%s: the guest refused: %s", op, obj_error(o));
		json_object_put(o);
		free(buf);
		return -1;
	}
	json_object_put(o);
	if (text)
		*text = buf;
	else
		free(buf);
	return 0;
}

static int simple_reply(struct chan *c, const char *op, int timeout_ms, char **text, struct verr *err)
{
	return simple_reply_max(c, op, timeout_ms, MAX_GUEST_FRAME, text, err);
}

int gexec_hello(struct chan *c, char **info_json, int timeout_ms, struct verr *err)
{
	if (send_obj(c, new_req("hello"), err) < 0)
		return verr_wrap(err, "hello");
	return simple_reply(c, "hello", timeout_ms, info_json, err);
}

int gexec_shutdown(struct chan *c, struct verr *err)
{
	if (send_obj(c, new_req("shutdown"), err) < 0)
		return verr_wrap(err, "shutdown");
	return simple_reply(c, "shutdown", 10000, NULL, err);
}

static struct json_object *strv(const char *const *v)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; v && v[i]; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}

/* Status from a CHAN_EXIT payload: {"status":N} or {"signal":N}. */
static int exit_status(const char *buf, size_t len, int *status, bool *timed_out, struct verr *err)
{
	struct json_object *o = parse_obj(buf, len, "exit status", err), *v;
	int ret = 0;

	if (!o)
		return -1;
	*timed_out = json_object_object_get_ex(o, "timeout", &v) && json_object_get_boolean(v);
	if (json_object_object_get_ex(o, "status", &v) && json_object_is_type(v, json_type_int) &&
	    json_object_get_int64(v) >= 0 && json_object_get_int64(v) <= 255)
		*status = (int)json_object_get_int64(v);
	else if (json_object_object_get_ex(o, "signal", &v) && json_object_is_type(v, json_type_int) &&
		 json_object_get_int64(v) >= 1 && json_object_get_int64(v) <= 127)
		*status = 128 + (int)json_object_get_int64(v);
	else
		ret = verr_set(err, "the guest sent an exit report without a valid status or signal");
	json_object_put(o);
	return ret;
}

static int write_out(int fd, const char *buf, size_t len, const char *which, struct verr *err)
{
	if (fd < 0 || len == 0)
		return 0;
	if (write_full(fd, buf, len) < 0)
		return verr_errno(err, "writing the command's %s", which);
	return 0;
}

static int send_signal(struct chan *c, int sig, struct verr *err)
{
	struct json_object *o = new_req("signal");

	json_object_object_add(o, "signal", json_object_new_int(sig));
	return send_obj(c, o, err);
}

/* One chunk of stdin, sent when the socket has room for it now (else
 * *full: wait until it has); at the end of in_fd, the EOF frame. */
static int send_stdin_chunk(struct chan *c, int in_fd, bool *open, bool *full, struct verr *err)
{
	struct pollfd w = { .fd = c->fd, .events = POLLOUT };
	char buf[STDIN_CHUNK];
	uint8_t which = CHAN_STDIN;
	ssize_t n;

	if (poll(&w, 1, 0) != 1 || !(w.revents & POLLOUT)) {
		*full = true;
		return 0;
	}
	do
		n = read(in_fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n > 0)
		return chan_send(c, CHAN_STDIN, buf, (size_t)n, err) < 0 ? verr_wrap(err, "sending stdin") : 0;
	*open = false;
	return chan_send(c, CHAN_EOF, &which, 1, err) < 0 ? verr_wrap(err, "sending the end of stdin") : 0;
}

static int send_winsize(struct chan *c, int tty_fd, struct verr *err)
{
	struct winsize ws;
	uint8_t b[4];

	if (ioctl(tty_fd, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return 0;
	b[0] = (uint8_t)(ws.ws_row >> 8);
	b[1] = (uint8_t)ws.ws_row;
	b[2] = (uint8_t)(ws.ws_col >> 8);
	b[3] = (uint8_t)ws.ws_col;
	return chan_send(c, CHAN_WINSIZE, b, sizeof(b), err) < 0 ? verr_wrap(err, "sending the window size") : 0;
}

int gexec_run(struct chan *c, const struct gexec_req *r, int *status, struct verr *err)
{
	struct json_object *o = new_req("exec");
	uint64_t backstop = 0;
	bool send_in = r->send_stdin || r->pty;
	bool started = false, in_open = send_in && r->in_fd >= 0, in_full = false;
	char why[512];

	if (!r->argv || !r->argv[0])
		return verr_set(err, "exec: empty command");
	json_object_object_add(o, "argv", strv(r->argv));
	if (r->env && r->env[0])
		json_object_object_add(o, "env", strv(r->env));
	if (r->cwd)
		json_object_object_add(o, "cwd", json_object_new_string(r->cwd));
	if (r->timeout_ms > 0) {
		json_object_object_add(o, "timeout_ms", json_object_new_int(r->timeout_ms));
		backstop = now_ns() + ((uint64_t)r->timeout_ms + BACKSTOP_MS) * 1000000ull;
	}
	if (r->pty) {
		struct json_object *p = json_object_new_object();

		json_object_object_add(o, "v", json_object_new_int(GEXEC_PROTO_PTY));
		json_object_object_add(p, "rows", json_object_new_int(r->rows ? r->rows : 24));
		json_object_object_add(p, "cols", json_object_new_int(r->cols ? r->cols : 80));
		if (r->term)
			json_object_object_add(p, "term", json_object_new_string(r->term));
		json_object_object_add(o, "pty", p);
	} else if (r->send_stdin) {
		json_object_object_add(o, "stdin", json_object_new_boolean(1));
	}
	if (send_obj(c, o, err) < 0)
		return verr_wrap(err, "exec");
	for (;;) {
		struct pollfd p[2] = { { .fd = c->fd, .events = POLLIN }, { .fd = -1, .events = POLLIN } };
		uint8_t type;
		char *buf;
		size_t len;
		int rc, ms = remaining_ms(backstop);

		if (started && r->pty && r->resized && *r->resized) {
			*r->resized = 0;
			if (send_winsize(c, r->tty_fd, err) < 0)
				return -1;
		}
		if (started && r->cancel && *r->cancel) {
			int sig = *r->cancel;

			*r->cancel = 0;
			if (send_signal(c, sig, err) < 0)
				return verr_wrap(err, "forwarding signal %d", sig);
		}
		if (r->gone && r->gone(r->gone_arg, why, sizeof(why)))
			return verr_set(err, "%s", why);
		if (ms < 0)
			return verr_set(err, "the guest did not end the command %d s after its timeout",
					BACKSTOP_MS / 1000);
		/* Stdin goes only while the socket takes it without blocking:
		 * a guest whose command does not read stops reading us, and a
		 * blocked send here would stop us reading its output too. */
		if (in_open && started) {
			if (in_full)
				p[0].events |= POLLOUT;
			else
				p[1].fd = r->in_fd;
		}
		/* The tick bounds how late a cancel set by a signal handler
		 * between the check above and poll() is noticed. */
		rc = poll(p, 2, ms == 0 || ms > 100 ? 100 : ms);
		if (rc < 0 && errno != EINTR)
			return verr_errno(err, "exec: poll");
		if (rc <= 0)
			continue;
		if (p[0].revents & POLLOUT)
			in_full = false;
		if (p[1].revents && send_stdin_chunk(c, r->in_fd, &in_open, &in_full, err) < 0)
			return -1;
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		rc = chan_recv_max(c, &type, &buf, &len, MAX_GUEST_FRAME, FRAME_TIMEOUT_MS, err);
		/* A guest that ended closes the channel a moment before its end
		 * can be seen: the reason beats "closed". */
		for (int i = 0; rc != 0 && r->gone && i < GONE_GRACE_TICKS; i++) {
			if (r->gone(r->gone_arg, why, sizeof(why)))
				return verr_set(err, "%s", why);
			usleep(100000);
		}
		if (rc == 1)
			return closed_error(started, err);
		if (rc < 0)
			return -1;
		switch (type) {
		case CHAN_JSON: {
			struct json_object *rep = parse_obj(buf, len, "reply", err);

			if (!rep) {
				free(buf);
				return -1;
			}
			if (!started && !obj_ok(rep)) {
				verr_set(err, "the guest refused to run '%s': %s", r->argv[0], obj_error(rep));
				json_object_put(rep);
				free(buf);
				return -1;
			}
			if (started && !obj_ok(rep))
				log_warn("guest: %s", obj_error(rep));
			started = true;
			json_object_put(rep);
			break;
		}
		case CHAN_STDOUT:
		case CHAN_STDERR:
			if (!started) {
				free(buf);
				return verr_set(err, "the guest sent output before accepting the command");
			}
			if (write_out(type == CHAN_STDOUT ? r->out_fd : r->err_fd, buf, len,
				      type == CHAN_STDOUT ? "stdout" : "stderr", err) < 0) {
				free(buf);
				return -1;
			}
			break;
		case CHAN_EOF:
			break;
		case CHAN_EXIT: {
			bool timed_out = false;
			int ret = started ? exit_status(buf, len, status, &timed_out, err)
					  : verr_set(err, "the guest sent an exit status before accepting the command");

			free(buf);
			if (ret < 0)
				return -1;
			return timed_out ? GEXEC_TIMEOUT : 0;
		}
		default:
			free(buf);
			return verr_set(err, "the guest sent a frame of unknown type %u", type);
		}
		free(buf);
	}
}

/* ------------------------------------------------------ detached commands */

int gexec_spawn(struct chan *c, const struct gexec_req *r, const char *id, pid_t *pid,
		struct verr *err)
{
	struct json_object *o = new_req("spawn"), *rep, *v;
	char *text;

	if (!r->argv || !r->argv[0]) {
		json_object_put(o);
		return verr_set(err, "spawn: empty command");
	}
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "argv", strv(r->argv));
	if (r->env && r->env[0])
		json_object_object_add(o, "env", strv(r->env));
	if (r->cwd)
		json_object_object_add(o, "cwd", json_object_new_string(r->cwd));
	if (r->timeout_ms > 0)
		json_object_object_add(o, "timeout_ms", json_object_new_int(r->timeout_ms));
	if (send_obj(c, o, err) < 0)
		return verr_wrap(err, "spawn");
	if (simple_reply(c, "spawn", 30000, &text, err) < 0)
		return -1;
	rep = parse_obj(text, strlen(text), "reply", err);
	free(text);
	if (!rep)
		return -1;
	if (!json_object_object_get_ex(rep, "pid", &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 1 || json_object_get_int64(v) > (1 << 30)) {
		json_object_put(rep);
		return verr_set(err, "spawn: the guest's reply has no valid pid");
	}
	*pid = (pid_t)json_object_get_int64(v);
	json_object_put(rep);
	return 0;
}

int gexec_state(struct chan *c, const char *id, int wait_ms, struct gexec_state *st,
		struct verr *err)
{
	struct json_object *o = new_req(wait_ms > 0 ? "wait" : "status"), *rep, *v;
	const char *op = wait_ms > 0 ? "wait" : "status", *state;
	char *text;
	int ret = 0;

	memset(st, 0, sizeof(*st));
	json_object_object_add(o, "id", json_object_new_string(id));
	if (wait_ms > 0)
		json_object_object_add(o, "timeout_ms", json_object_new_int(wait_ms));
	if (send_obj(c, o, err) < 0)
		return verr_wrap(err, "%s", op);
	if (simple_reply(c, op, wait_ms + 30000, &text, err) < 0)
		return -1;
	rep = parse_obj(text, strlen(text), "reply", err);
	free(text);
	if (!rep)
		return -1;
	if (!json_object_object_get_ex(rep, "state", &v) || !json_object_is_type(v, json_type_string)) {
		json_object_put(rep);
		return verr_set(err, "%s: the guest's reply has no state", op);
	}
	state = json_object_get_string(v);
	if (json_object_object_get_ex(rep, "pid", &v) && json_object_is_type(v, json_type_int))
		st->pid = (pid_t)json_object_get_int64(v);
	if (json_object_object_get_ex(rep, "output_bytes", &v) && json_object_is_type(v, json_type_int) &&
	    json_object_get_int64(v) >= 0)
		st->output_bytes = json_object_get_int64(v);
	if (!strcmp(state, "exited")) {
		char *ex = strdup(json_object_to_json_string(rep));

		st->exited = true;
		ret = ex ? exit_status(ex, strlen(ex), &st->status, &st->timed_out, err)
			 : verr_set(err, "out of memory");
		free(ex);
	} else if (!strcmp(state, "lost")) {
		st->exited = st->lost = true;
		st->status = 255;
	} else if (strcmp(state, "running")) {
		ret = verr_set(err, "%s: the guest reports an unknown state '%.40s'", op, state);
	}
	json_object_put(rep);
	return ret;
}

int gexec_kill(struct chan *c, const char *id, int sig, struct verr *err)
{
	struct json_object *o = new_req("kill");

	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "signal", json_object_new_int(sig));
	if (send_obj(c, o, err) < 0)
		return verr_wrap(err, "kill");
	return simple_reply(c, "kill", 10000, NULL, err);
}

int gexec_output(struct chan *c, const char *id, long long offset, size_t max, void *buf, size_t *n,
		 long long *size, struct verr *err)
{
	struct json_object *o = new_req("output"), *rep, *v;
	const char *b64;
	char *text;
	size_t got = 0;
	int ret = 0;

	*n = 0;
	*size = 0;
	if (max > GEXEC_MAX_OUTPUT)
		max = GEXEC_MAX_OUTPUT;
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "offset", json_object_new_int64(offset));
	json_object_object_add(o, "max", json_object_new_int64((int64_t)max));
	if (send_obj(c, o, err) < 0)
		return verr_wrap(err, "output");
	if (simple_reply_max(c, "output", 30000, OUTPUT_REPLY_MAX(max), &text, err) < 0)
		return -1;
	rep = parse_obj(text, strlen(text), "reply", err);
	free(text);
	if (!rep)
		return -1;
	/* The guest is not trusted: what it sends back must be what was
	 * asked for, and no more. */
	if (!json_object_object_get_ex(rep, "offset", &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) != offset)
		ret = verr_set(err, "output: the guest's reply is for another offset");
	else if (!json_object_object_get_ex(rep, "size", &v) || !json_object_is_type(v, json_type_int) ||
		 json_object_get_int64(v) < 0)
		ret = verr_set(err, "output: the guest's reply has no size");
	else if (!json_object_object_get_ex(rep, "data", &v) || !json_object_is_type(v, json_type_string))
		ret = verr_set(err, "output: the guest's reply has no data");
	if (ret == 0) {
		json_object_object_get_ex(rep, "size", &v);
		*size = json_object_get_int64(v);
		json_object_object_get_ex(rep, "data", &v);
		b64 = json_object_get_string(v);
		if (sodium_base642bin(buf, max, b64, strlen(b64), NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) < 0)
			ret = verr_set(err, "output: the guest sent more than %zu bytes, or not base64", max);
		else
			*n = got;
	}
	json_object_put(rep);
	return ret;
}
