/*
 * connflood: many TCP connections to a daemon at once, for the attacks of
 * tests/security.  It knows nothing of the wire's framing beyond the
 * length word all its versions start with, so it runs against any.
 *
 *   connflood idle|bigframe ADDR:PORT N SECONDS [SRC-ADDR...]
 *
 * Opens N connections at once (bound to the source addresses in turn, so
 * that they come from several peers), prints "connected C" when the
 * connecting is done, then holds them for SECONDS:
 *
 *   idle      sends nothing
 *   bigframe  sends a frame length of 1 MiB (what wire protocol 1 took)
 *             and then 1 MiB - 1 bytes of garbage, as fast as the daemon
 *             reads them, and never the last byte
 *
 * Then one line: how many the daemon closed (and how many of those with
 * a notice first), how many were still open, and how many bytes it took.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/inet.h"

#define FRAME (1u << 20)

struct c {
	int fd;
	size_t sent;       /* bytes of the frame sent (bigframe) */
	bool failed, closed, notice;
};

static int open_one(const struct sockaddr_in *to, const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (src) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		uint32_t a;

		if (ipv4_parse(src, &a) < 0) {
			fprintf(stderr, "connflood: source %s: not an IPv4 address\n", src);
			exit(2);
		}
		sa.sin_addr.s_addr = htonl(a);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			perror("connflood: bind");
			exit(2);
		}
	}
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* What the daemon sent: a notice (the length word's top bit), or the end. */
static void take(struct c *c)
{
	unsigned char b[4096];
	ssize_t r = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);

	if (r > 0 && (b[0] & 0x80))
		c->notice = true;
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
		c->closed = true;
		close(c->fd);
		c->fd = -1;
	}
}

static void push(struct c *c)
{
	static char junk[64 << 10];
	uint32_t w = htonl(FRAME);
	ssize_t r;

	if (c->sent == 0) {
		memset(junk, 'G', sizeof(junk));
		r = send(c->fd, &w, 4, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r == 4)
			c->sent = 4;
		return;
	}
	if (c->sent >= FRAME + 3)
		return;
	r = send(c->fd, junk, FRAME + 3 - c->sent < sizeof(junk) ? FRAME + 3 - c->sent : sizeof(junk),
		 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (r > 0)
		c->sent += (size_t)r;
}

int main(int argc, char **argv)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct rlimit rl = { 0 };
	struct pollfd *p;
	struct c *cs;
	char host[64];
	uint32_t a;
	int port, n, hold, connected = 0, closed = 0, notices = 0, open_ = 0;
	bool big;
	uint64_t end;
	size_t taken = 0;

	if (argc < 5 || (strcmp(argv[1], "idle") && strcmp(argv[1], "bigframe"))) {
		fprintf(stderr, "usage: connflood idle|bigframe ADDR:PORT N SECONDS [SRC-ADDR...]\n");
		return 2;
	}
	big = !strcmp(argv[1], "bigframe");
	if (hostport_parse(argv[2], false, host, sizeof(host), &port) < 0 || ipv4_parse(host, &a) < 0) {
		fprintf(stderr, "connflood: %s: expected IPv4:PORT\n", argv[2]);
		return 2;
	}
	to.sin_addr.s_addr = htonl(a);
	to.sin_port = htons((uint16_t)port);
	n = atoi(argv[3]);
	hold = atoi(argv[4]);
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	cs = calloc((size_t)n, sizeof(*cs));
	p = calloc((size_t)n, sizeof(*p));
	if (!cs || !p || n < 1)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < n; i++) {
		cs[i].fd = open_one(&to, argc > 5 ? argv[5 + i % (argc - 5)] : NULL);
		cs[i].failed = cs[i].fd < 0;
	}
	/* Connected: writable, with no error. */
	end = now_ns() + 5000000000ull;
	for (int i = 0; i < n; i++) {
		struct pollfd q = { .fd = cs[i].fd, .events = POLLOUT };
		int err = 0;
		socklen_t sl = sizeof(err);

		if (cs[i].fd < 0)
			continue;
		if (poll(&q, 1, now_ns() < end ? (int)((end - now_ns()) / 1000000) : 0) == 1 &&
		    getsockopt(cs[i].fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0 && err == 0) {
			connected++;
		} else {
			close(cs[i].fd);
			cs[i].fd = -1;
			cs[i].failed = true;
		}
	}
	printf("connected %d\n", connected);
	end = now_ns() + (uint64_t)hold * 1000000000ull;
	while (now_ns() < end) {
		for (int i = 0; i < n; i++) {
			p[i].fd = cs[i].fd;
			p[i].events = POLLIN | (big && cs[i].sent < FRAME + 3 ? POLLOUT : 0);
			p[i].revents = 0;
		}
		if (poll(p, (nfds_t)n, 100) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
				take(&cs[i]);
			else if (cs[i].fd >= 0 && (p[i].revents & POLLOUT))
				push(&cs[i]);
		}
	}
	for (int i = 0; i < n; i++) {
		if (cs[i].fd >= 0)
			take(&cs[i]);
		closed += cs[i].closed;
		notices += cs[i].notice;
		open_ += cs[i].fd >= 0;
		taken += cs[i].sent;
	}
	printf("closed by the daemon %d (%d with a notice), still open %d, %zu bytes sent\n", closed, notices, open_,
	       taken);
	return 0;
}
