/*
 * wirerelay: a man in the middle of the cluster's wire protocol, for the
 * attacks of tests/security.  It knows nothing of the protocol's framing
 * (it moves bytes), so the same attack runs against any version of it.
 *
 *   wirerelay LISTEN UPSTREAM DIR ACTION...
 *
 * Listens on LISTEN (ADDR:PORT) and treats the i-th connection it accepts
 * as the i-th ACTION says; then, once every action is done, it waits to
 * be killed (stalled connections stay open until then):
 *
 *   pass    relays both ways; the bytes each way go to DIR/<i>.req and
 *           DIR/<i>.rep
 *   keep    relays the request to UPSTREAM and keeps the whole reply in
 *           DIR/<i>.rep, but closes the client's connection without it
 *   replay  answers the request with the reply the last "keep" kept,
 *           without asking UPSTREAM
 *   stall   relays the request with a receive buffer of 1 KiB and never
 *           reads the reply: a client that stops reading; the client's
 *           own connection is closed
 *   passall as pass, for this connection and every one after it (a
 *           listener on the path of a whole exchange, e.g. an image push)
 *
 * A request is what the client sends until it pauses for 100 ms (every
 * client sends its whole request at once, then waits).  One line per
 * connection on stdout says what happened.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/inet.h"

#define REQ_MAX (8u << 20)

static const char *upstream, *dir;
static char *kept;
static size_t kept_len;

static void die(const char *what)
{
	fprintf(stderr, "wirerelay: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* What fd sends until it pauses for idle_ms (or closes). */
static char *read_until_idle(int fd, int idle_ms, size_t *len)
{
	char *buf = malloc(REQ_MAX);
	size_t n = 0;

	if (!buf)
		die("malloc");
	while (n < REQ_MAX) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, idle_ms) <= 0)
			break;
		r = read(fd, buf + n, REQ_MAX - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return buf;
}

static void save(int i, const char *ext, const char *buf, size_t len)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%d.%s", dir, i, ext);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_full(fd, buf, len) < 0)
		die(path);
	close(fd);
}

static int up(int rcvbuf)
{
	struct verr e;
	int fd;

	if (rcvbuf) {
		/* The buffer must be set before the connection exists. */
		struct sockaddr_in sa = { .sin_family = AF_INET };
		char host[256];
		uint32_t a;
		int port;

		if (hostport_parse(upstream, false, host, sizeof(host), &port) < 0 || ipv4_parse(host, &a) < 0) {
			fprintf(stderr, "wirerelay: upstream %s: expected IPv4:PORT\n", upstream);
			exit(2);
		}
		sa.sin_addr.s_addr = htonl(a);
		sa.sin_port = htons((uint16_t)port);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			die("connect upstream");
		return fd;
	}
	fd = tcp_connect(upstream, 5000, &e);
	if (fd < 0) {
		fprintf(stderr, "wirerelay: %s\n", e.msg);
		exit(2);
	}
	return fd;
}

static void act(int i, const char *action, int c)
{
	size_t qlen, plen;
	char *q = read_until_idle(c, 100, &qlen), *p;
	int u;

	if (!strcmp(action, "replay")) {
		if (!kept) {
			fprintf(stderr, "wirerelay: replay before any keep\n");
			exit(2);
		}
		if (write_full(c, kept, kept_len) < 0)
			die("replay");
		printf("%d replay: took a request of %zu bytes, answered with the kept reply of %zu bytes\n", i, qlen,
		       kept_len);
		close(c);
		free(q);
		return;
	}
	u = up(!strcmp(action, "stall") ? 1024 : 0);
	if (write_full(u, q, qlen) < 0)
		die("relay the request");
	if (!strcmp(action, "stall")) {
		/* Left open, never read, until this process ends. */
		printf("%d stall: relayed a request of %zu bytes, reading nothing back\n", i, qlen);
		close(c);
		free(q);
		return;
	}
	p = read_until_idle(u, 30000, &plen);
	close(u);
	save(i, "req", q, qlen);
	save(i, "rep", p, plen);
	if (!strcmp(action, "keep")) {
		free(kept);
		kept = p;
		kept_len = plen;
		printf("%d keep: relayed a request of %zu bytes, kept the reply of %zu bytes\n", i, qlen, plen);
	} else {
		if (write_full(c, p, plen) < 0)
			die("relay the reply");
		printf("%d pass: relayed a request of %zu bytes and its reply of %zu bytes\n", i, qlen, plen);
		free(p);
	}
	close(c);
	free(q);
}

int main(int argc, char **argv)
{
	struct verr e;
	int l;

	if (argc < 5) {
		fprintf(stderr, "usage: wirerelay LISTEN UPSTREAM DIR pass|keep|replay|stall|passall...\n");
		return 2;
	}
	upstream = argv[2];
	dir = argv[3];
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	l = tcp_listen(argv[1], NULL, &e);
	if (l < 0) {
		fprintf(stderr, "wirerelay: %s\n", e.msg);
		return 2;
	}
	printf("listening\n");
	for (int i = 4; i < argc; i++) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0)
			die("accept");
		if (!strcmp(argv[i], "passall")) {
			for (int k = i - 3;; k++) {
				act(k, "pass", c);
				if ((c = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
					die("accept");
			}
		}
		act(i - 3, argv[i], c);
	}
	for (;;)
		pause();
}
