/*
 * IPv4 addresses and networks, HOST:PORT, and TCP sockets for the cluster's messages.
 */
#include "lib/inet.h"
#include "lib/err.h"
#include "lib/parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ipv4net_parse(const char *s, bool allow_host, struct ipv4net *out)
{
	unsigned a, b, c, d, p;
	char tail;

	if (!s || sscanf(s, "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &p, &tail) != 5)
		return -1;
	if (a > 255 || b > 255 || c > 255 || d > 255 || p > 32)
		return -1;
	/* sscanf accepts "+1" and " 1"; a canonical form must round-trip. */
	{
		char canon[32];

		snprintf(canon, sizeof(canon), "%u.%u.%u.%u/%u", a, b, c, d, p);
		if (strcmp(canon, s))
			return -1;
	}
	out->addr = a << 24 | b << 16 | c << 8 | d;
	out->prefix = (int)p;
	if (!allow_host && p < 32 && (out->addr & (p ? ~0u >> p : ~0u)))
		return -1;
	return 0;
}

const char *ipv4_format(uint32_t addr, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255,
		 (addr >> 8) & 255, addr & 255);
	return buf;
}

int ipv4_parse(const char *s, uint32_t *out)
{
	struct in_addr a;
	char canon[INET_ADDRSTRLEN];

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -1;
	/* inet_pton accepts only dotted quads; insist on the canonical form
	 * so an address names one thing. */
	if (!inet_ntop(AF_INET, &a, canon, sizeof(canon)) || strcmp(canon, s))
		return -1;
	*out = ntohl(a.s_addr);
	return 0;
}

int hostport_parse(const char *s, bool allow_zero, char *host, size_t hlen, int *port)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	long long p;
	size_t n;

	if (!colon)
		return -1;
	n = (size_t)(colon - s);
	if (n >= hlen || memchr(s, ':', n))
		return -1;
	if (parse_ll(colon + 1, allow_zero ? 0 : 1, 65535, &p) < 0)
		return -1;
	memcpy(host, s, n);
	host[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (!((host[i] >= 'a' && host[i] <= 'z') || (host[i] >= 'A' && host[i] <= 'Z') ||
		      (host[i] >= '0' && host[i] <= '9') || host[i] == '.' || host[i] == '-' ||
		      (host[i] == '*' && n == 1)))
			return -1;
	*port = (int)p;
	return 0;
}

int tcp_listen(const char *spec, int *port, struct verr *err)
{
	char host[256];
	int p, fd, one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	uint32_t a = 0;

	if (hostport_parse(spec, true, host, sizeof(host), &p) < 0)
		return verr_set(err, "listen address '%s': expected ADDR:PORT (an IPv4 address, * or nothing, and a port)", spec);
	if (host[0] && strcmp(host, "*") && ipv4_parse(host, &a) < 0)
		return verr_set(err, "listen address '%s': '%s' is not an IPv4 address", spec, host);
	sa.sin_addr.s_addr = htonl(a);
	sa.sin_port = htons((uint16_t)p);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verr_errno(err, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1024) < 0) {
		verr_errno(err, "listen on %s", spec);
		close(fd);
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	if (port)
		*port = ntohs(sa.sin_port);
	return fd;
}

int tcp_connect(const char *hostport, int timeout_ms, struct verr *err)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res;
	char host[256], ps[8];
	int port, r, fd, fl, one = 1, soerr = 0;
	socklen_t sl = sizeof(soerr);
	struct pollfd p;

	if (hostport_parse(hostport, false, host, sizeof(host), &port) < 0)
		return verr_set(err, "'%s' is not HOST:PORT", hostport);
	snprintf(ps, sizeof(ps), "%d", port);
	r = getaddrinfo(host, ps, &hints, &res);
	if (r)
		return verr_set(err, "cannot resolve '%s': %s", host, gai_strerror(r));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return verr_errno(err, "socket");
	}
	fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	r = connect(fd, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (r < 0 && errno != EINPROGRESS) {
		verr_errno(err, "cannot connect to %s", hostport);
		close(fd);
		return -1;
	}
	if (r < 0) {
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		do
			r = poll(&p, 1, timeout_ms > 0 ? timeout_ms : -1);
		while (r < 0 && errno == EINTR);
		if (r == 0)
			errno = ETIMEDOUT;
		if (r <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
			if (r > 0)
				errno = soerr;
			verr_errno(err, "cannot connect to %s", hostport);
			close(fd);
			return -1;
		}
	}
	fcntl(fd, F_SETFL, fl);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}
