/*
 * gprobe: a test client for vhpc-guestd that can also misbehave.
 *
 *   gprobe (--tcp HOST:PORT | --unix PATH) --key FILE COMMAND...
 *     hello                  print the hello reply
 *     shutdown               ask guestd to stop
 *     exec [--env K=V]... [--cwd DIR] [--timeout MS] [--stdin] -- ARGV...
 *                            run ARGV via gexec_run (--stdin: with ours as
 *                            its stdin); exit with its status,
 *                            print "gprobe: timeout" on stderr when stopped by
 *                            the timeout; 255 on errors
 *     send TYPE:PAYLOAD...   send each frame (TYPE a number, PAYLOAD text)
 *                            and print the reply ("reply: JSON") or "closed"
 *     big N                  send one JSON frame of N bytes ('{"v":1,...' padded)
 *     replay MARKER          record a session that runs `touch MARKER`, then
 *                            replay its bytes in a new session and in the same
 *                            session; print what guestd did with each
 *     idle                   handshake, then wait for guestd to close; print
 *                            the milliseconds it took
 *     garbage                send bytes that are not the channel protocol
 *     spawn ID [--env K=V]... [--timeout MS] -- ARGV...
 *                            start a detached command; print its pid
 *     state ID [WAIT_MS]     print "running|exited STATUS|lost bytes=N [timeout]"
 *     kill ID SIGNAL         signal a detached command
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/bytes.h"
#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/gexec.h"
#include "lib/log.h"
#include "lib/parse.h"

static const char *tcp_host, *unix_path;
static int tcp_port;
static uint8_t key[CHAN_KEY_LEN];

static void die(const char *what, const struct verr *e)
{
	fprintf(stderr, "gprobe: %s: %s\n", what, e ? e->msg : strerror(errno));
	exit(255);
}

static void open_chan(struct chan *c)
{
	struct verr e;
	int r = unix_path ? gexec_connect_unix(c, unix_path, key, 5000, &e)
			  : gexec_connect_tcp(c, tcp_host, tcp_port, key, 5000, &e);

	if (r < 0)
		die("connect", &e);
}

/* A plain connected socket, without the channel handshake. */
static int raw_socket(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char port[8];
	int fd;

	if (unix_path) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", unix_path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			die("connect", NULL);
		return fd;
	}
	snprintf(port, sizeof(port), "%d", tcp_port);
	if (getaddrinfo(tcp_host, port, &hints, &ai))
		die("getaddrinfo", NULL);
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("connect", NULL);
	freeaddrinfo(ai);
	return fd;
}

/* Prints the next reply frame; returns false when the connection closed. */
static bool print_reply(struct chan *c)
{
	struct verr e;
	uint8_t type;
	char *buf;
	size_t len;
	int r = chan_recv(c, &type, &buf, &len, 5000, &e);

	if (r != 0) {
		printf("closed%s%s\n", r < 0 ? ": " : "", r < 0 ? e.msg : "");
		return false;
	}
	printf("reply(type %u): %s\n", type, buf);
	free(buf);
	return true;
}

static int cmd_send(int argc, char **argv)
{
	struct chan c;
	struct verr e;

	open_chan(&c);
	for (int i = 0; i < argc; i++) {
		char *colon = strchr(argv[i], ':');
		long long type;

		if (!colon)
			die("send: expected TYPE:PAYLOAD", NULL);
		*colon = 0;
		if (parse_ll(argv[i], 0, 255, &type) < 0)
			die("send: bad type", NULL);
		if (chan_send(&c, (uint8_t)type, colon + 1, strlen(colon + 1), &e) < 0) {
			printf("closed: %s\n", e.msg);
			return 0;
		}
		if (!print_reply(&c))
			return 0;
	}
	chan_close(&c);
	return 0;
}

static int cmd_big(long long n)
{
	struct chan c;
	struct verr e;
	char *buf = malloc((size_t)n + 1);

	if (!buf || n < 20)
		die("big", NULL);
	memset(buf, ' ', (size_t)n);
	memcpy(buf, "{\"v\":1,\"op\":\"hello\"}", 20);
	open_chan(&c);
	if (chan_send(&c, CHAN_JSON, buf, (size_t)n, &e) < 0)
		printf("send failed: %s\n", e.msg);
	print_reply(&c);
	free(buf);
	return 0;
}

static int cmd_exec(int argc, char **argv)
{
	const char *env[64], *cwd = NULL;
	int nenv = 0, timeout = 0, status = 255, r, i;
	struct gexec_req req = { .out_fd = 1, .err_fd = 2 };
	struct verr e;
	struct chan c;

	for (i = 0; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--env") && i + 1 < argc && nenv < 63)
			env[nenv++] = argv[++i];
		else if (!strcmp(argv[i], "--cwd") && i + 1 < argc)
			cwd = argv[++i];
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--stdin"))
			req.send_stdin = true;
		else
			die("exec: bad option", NULL);
	}
	if (i >= argc - 1)
		die("exec: no command", NULL);
	env[nenv] = NULL;
	req.argv = (const char *const *)argv + i + 1;
	req.env = env;
	req.cwd = cwd;
	req.timeout_ms = timeout;
	open_chan(&c);
	r = gexec_run(&c, &req, &status, &e);
	if (r < 0)
		die("exec", &e);
	if (r == GEXEC_TIMEOUT)
		fprintf(stderr, "gprobe: timeout\n");
	chan_close(&c);
	return status;
}

/* All bytes waiting on fd (non-blocking), appended to *buf. */
static size_t drain(int fd, char **buf, size_t len)
{
	char tmp[65536];
	ssize_t n;

	while ((n = read(fd, tmp, sizeof(tmp))) > 0) {
		*buf = realloc(*buf, len + (size_t)n);
		memcpy(*buf + len, tmp, (size_t)n);
		len += (size_t)n;
	}
	return len;
}

/* Waits for a reply; "closed" when guestd hangs up without one. */
static const char *outcome(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b[256];

	if (poll(&p, 1, 3000) <= 0)
		return "no answer";
	return read(fd, b, sizeof(b)) > 0 ? "answered" : "closed";
}

static int cmd_replay(const char *marker)
{
	struct chan c;
	struct verr e;
	struct json_object *o = json_object_new_object(), *argv = json_object_new_array();
	const char *req;
	char *rec = NULL, hs[16], theirs[16];
	size_t reclen;
	int sp[2], fd, real;

	json_object_array_add(argv, json_object_new_string("touch"));
	json_object_array_add(argv, json_object_new_string(marker));
	json_object_object_add(o, "v", json_object_new_int(1));
	json_object_object_add(o, "op", json_object_new_string("exec"));
	json_object_object_add(o, "argv", argv);
	req = json_object_to_json_string(o);

	/* Session 1, recorded: the frame goes through a socketpair first. */
	open_chan(&c);
	real = c.fd;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
		die("socketpair", NULL);
	fcntl(sp[1], F_SETFL, O_NONBLOCK);
	c.fd = sp[0];
	if (chan_send(&c, CHAN_JSON, req, strlen(req), &e) < 0)
		die("record", &e);
	c.fd = real;
	reclen = drain(sp[1], &rec, 0);
	if (write_full(real, rec, reclen) < 0)
		die("write", NULL);
	for (;;) {
		uint8_t type;
		char *buf;
		size_t len;

		if (chan_recv(&c, &type, &buf, &len, 5000, &e) != 0)
			die("session 1", &e);
		free(buf);
		if (type == CHAN_EXIT)
			break;
	}
	printf("session 1: marker %s\n", access(marker, F_OK) == 0 ? "created" : "missing");
	unlink(marker);

	/* The same bytes again in the same session: the sequence number moved on. */
	if (write_full(real, rec, reclen) < 0)
		die("write", NULL);
	printf("same session: %s\n", outcome(real));
	usleep(200000);
	printf("same session: marker %s\n", access(marker, F_OK) == 0 ? "created" : "missing");
	chan_close(&c);

	/* A new session with its own nonces, then the recorded bytes. */
	fd = raw_socket();
	memcpy(hs, "VHPCCH1\0", 8);
	random_bytes(hs + 8, 8);
	if (write_full(fd, hs, 16) < 0 || read_full(fd, theirs, 16) != 0)
		die("handshake", NULL);
	if (write_full(fd, rec, reclen) < 0)
		die("write", NULL);
	printf("new session: %s\n", outcome(fd));
	usleep(200000);
	printf("new session: marker %s\n", access(marker, F_OK) == 0 ? "created" : "missing");
	close(fd);
	close(sp[0]);
	close(sp[1]);
	free(rec);
	json_object_put(o);
	return 0;
}

static int cmd_idle(void)
{
	struct chan c;
	uint64_t t0;
	char b;

	open_chan(&c);
	t0 = now_ns();
	while (read(c.fd, &b, 1) > 0)
		;
	printf("%llu\n", (unsigned long long)((now_ns() - t0) / 1000000));
	return 0;
}

static int cmd_garbage(void)
{
	int fd = raw_socket();
	static const char junk[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
	size_t total = 0;

	if (write_full(fd, junk, sizeof(junk) - 1) < 0)
		die("write", NULL);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char b[256];
		ssize_t n;

		if (poll(&p, 1, 3000) <= 0) {
			printf("no answer after %zu bytes\n", total);
			break;
		}
		n = read(fd, b, sizeof(b));
		if (n <= 0) {
			printf("closed after %zu bytes\n", total);
			break;
		}
		total += (size_t)n;
	}
	close(fd);
	return 0;
}

static int cmd_spawn(int argc, char **argv)
{
	const char *env[64];
	int nenv = 0, timeout = 0, i;
	struct gexec_req req = { .out_fd = -1, .err_fd = -1 };
	struct verr e;
	struct chan c;
	pid_t pid;

	if (argc < 1)
		die("spawn: no id", NULL);
	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--env") && i + 1 < argc && nenv < 63)
			env[nenv++] = argv[++i];
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = atoi(argv[++i]);
		else
			die("spawn: bad option", NULL);
	}
	if (i >= argc - 1)
		die("spawn: no command", NULL);
	env[nenv] = NULL;
	req.argv = (const char *const *)argv + i + 1;
	req.env = env;
	req.timeout_ms = timeout;
	open_chan(&c);
	if (gexec_spawn(&c, &req, argv[0], &pid, &e) < 0)
		die("spawn", &e);
	printf("%d\n", (int)pid);
	chan_close(&c);
	return 0;
}

static int cmd_state(const char *id, int wait_ms)
{
	struct gexec_state st;
	struct verr e;
	struct chan c;

	open_chan(&c);
	if (gexec_state(&c, id, wait_ms, &st, &e) < 0)
		die("state", &e);
	if (st.lost)
		printf("lost");
	else if (st.exited)
		printf("exited %d", st.status);
	else
		printf("running");
	printf(" bytes=%lld%s\n", st.output_bytes, st.timed_out ? " timeout" : "");
	chan_close(&c);
	return 0;
}

/* output ID OFFSET MAX: the bytes on stdout, "size=N" on stderr. */
static int cmd_output(const char *id, long long off, size_t max)
{
	static char buf[GEXEC_MAX_OUTPUT];
	long long size;
	struct verr e;
	struct chan c;
	size_t n;

	open_chan(&c);
	if (gexec_output(&c, id, off, max, buf, &n, &size, &e) < 0)
		die("output", &e);
	fwrite(buf, 1, n, stdout);
	fprintf(stderr, "size=%lld\n", size);
	chan_close(&c);
	return 0;
}

/* --tcp, --unix and --key before the command: the index of the command,
 * or -1 after the usage. */
static int parse_args(int argc, char **argv, const char **keyfile)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--tcp") && i + 1 < argc) {
			static char host[256];
			char *colon;

			snprintf(host, sizeof(host), "%s", argv[++i]);
			colon = strrchr(host, ':');
			if (!colon)
				die("--tcp HOST:PORT", NULL);
			*colon = 0;
			tcp_host = host;
			tcp_port = atoi(colon + 1);
		} else if (!strcmp(argv[i], "--unix") && i + 1 < argc) {
			unix_path = argv[++i];
		} else if (!strcmp(argv[i], "--key") && i + 1 < argc) {
			*keyfile = argv[++i];
		} else {
			break;
		}
	}
	if (!*keyfile || (!tcp_host && !unix_path) || i >= argc) {
		fprintf(stderr, "usage: gprobe (--tcp HOST:PORT | --unix PATH) --key FILE COMMAND...\n");
		return -1;
	}
	return i;
}

static int cmd_hello(void)
{
	struct chan c;
	struct verr e;
	char *info;

	open_chan(&c);
	if (gexec_hello(&c, &info, 5000, &e) < 0)
		die("hello", &e);
	printf("%s\n", info);
	free(info);
	return 0;
}

static int cmd_shutdown(void)
{
	struct chan c;
	struct verr e;

	open_chan(&c);
	if (gexec_shutdown(&c, &e) < 0)
		die("shutdown", &e);
	return 0;
}

static int cmd_kill(const char *id, int sig)
{
	struct chan c;
	struct verr e;

	open_chan(&c);
	if (gexec_kill(&c, id, sig, &e) < 0)
		die("kill", &e);
	return 0;
}

int main(int argc, char **argv)
{
	const char *keyfile = NULL;
	struct verr e;
	int i;

	vlog_init("gprobe");
	signal(SIGPIPE, SIG_IGN);
	if ((i = parse_args(argc, argv, &keyfile)) < 0)
		return 255;
	if (chan_key_load(keyfile, key, &e) < 0)
		die("key", &e);
	if (!strcmp(argv[i], "hello"))
		return cmd_hello();
	if (!strcmp(argv[i], "shutdown"))
		return cmd_shutdown();
	if (!strcmp(argv[i], "exec"))
		return cmd_exec(argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "send"))
		return cmd_send(argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "big") && i + 1 < argc)
		return cmd_big(atoll(argv[i + 1]));
	if (!strcmp(argv[i], "replay") && i + 1 < argc)
		return cmd_replay(argv[i + 1]);
	if (!strcmp(argv[i], "idle"))
		return cmd_idle();
	if (!strcmp(argv[i], "garbage"))
		return cmd_garbage();
	if (!strcmp(argv[i], "spawn"))
		return cmd_spawn(argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "state") && i + 1 < argc)
		return cmd_state(argv[i + 1], i + 2 < argc ? atoi(argv[i + 2]) : 0);
	if (!strcmp(argv[i], "output") && i + 3 < argc)
		return cmd_output(argv[i + 1], atoll(argv[i + 2]), (size_t)atoll(argv[i + 3]));
	if (!strcmp(argv[i], "kill") && i + 2 < argc)
		return cmd_kill(argv[i + 1], atoi(argv[i + 2]));
	fprintf(stderr, "gprobe: unknown command '%s'\n", argv[i]);
	return 255;
}
