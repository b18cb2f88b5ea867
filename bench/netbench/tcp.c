#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/inet.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

#define HDR_MAGIC 0x76686e62u   /* "vhnb" */

static const char *const names[] = { [NB_STREAM] = "stream", [NB_RR] = "rr", [NB_MAERTS] = "maerts" };

const char *nb_test_name(int test)
{
	return test >= NB_STREAM && test <= NB_MAERTS ? names[test] : NULL;
}

int nb_test_parse(const char *s)
{
	for (int t = NB_STREAM; t <= NB_MAERTS; t++)
		if (!strcmp(s, names[t]))
			return t;
	return -1;
}

static void io_timeouts(int fd)
{
	struct timeval tv = { NB_IO_TIMEOUT_MS / 1000, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int nb_listen(uint32_t addr, uint16_t port, uint16_t *bound, struct verr *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr) };
	socklen_t sl = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char ip[32];

	if (fd < 0)
		return verr_errno(err, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		verr_errno(err, "listen on %s:%u", ipv4_format(addr, ip, sizeof(ip)), port);
		close(fd);
		return -1;
	}
	*bound = ntohs(sa.sin_port);
	return fd;
}

int nb_accept(int lfd, int timeout_ms, struct verr *err)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	int r = poll(&p, 1, timeout_ms), fd;

	if (r <= 0)
		return r == 0 ? verr_set(err, "nobody connected within %d s", timeout_ms / 1000)
			      : verr_errno(err, "poll");
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "accept");
	io_timeouts(fd);
	return fd;
}

int nb_connect(uint32_t addr, uint16_t port, int timeout_ms, struct verr *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), soerr = 0;
	socklen_t sl = sizeof(soerr);
	char ip[32];

	if (fd < 0)
		return verr_errno(err, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		goto fail;
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	if (poll(&p, 1, timeout_ms) != 1) {
		errno = ETIMEDOUT;
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
		errno = soerr ? soerr : errno;
		goto fail;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	io_timeouts(fd);
	return fd;
fail:
	verr_errno(err, "connect to %s:%u", ipv4_format(addr, ip, sizeof(ip)), port);
	close(fd);
	return -1;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int nb_read_hdr(int fd, struct nb_hdr *h, struct verr *err)
{
	int r;

	errno = 0;
	r = read_full(fd, h, sizeof(*h));
	if (r == 1)
		return verr_set(err, "the connection closed before its test header");
	if (r != 0)
		return errno != EPIPE ? verr_errno(err, "reading the test header")
				      : verr_set(err, "the test header was cut short (%zu bytes expected)", sizeof(*h));
	if (h->magic != HDR_MAGIC)
		return verr_set(err, "not a vhpc-netbench test header (magic 0x%08x)", h->magic);
	if (h->test == NB_STOP)
		return 0;
	if (!nb_test_name((int)h->test))
		return verr_set(err, "unknown test %u in the header", h->test);
	if (h->size < 1 || h->size > NB_MAX_MSG)
		return verr_set(err, "%s: size %llu is outside 1..16M", nb_test_name((int)h->test),
				(unsigned long long)h->size);
	return 0;
}

/* Receives until EOF and reports the byte count, so the client's time
 * covers every byte arriving. */
static int stream_server(int fd, struct verr *err)
{
	static char buf[1 << 18];
	uint64_t total = 0;
	ssize_t r;

	while ((r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return verr_errno(err, "stream: read");
		}
		total += (uint64_t)r;
	}
	if (write_full(fd, &total, sizeof(total)) < 0)
		return verr_errno(err, "stream: reply");
	return 0;
}

static int stream_client(int fd, long long size, double seconds, double res[3], struct verr *err)
{
	char *buf = calloc(1, (size_t)size);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), got = 0;
	unsigned long n = 0;

	if (!buf)
		return verr_set(err, "stream: out of memory");
	do {
		if (write_full(fd, buf, (size_t)size) < 0) {
			free(buf);
			return verr_errno(err, "stream: write");
		}
		n++;
	} while (now_ns() < end);
	free(buf);
	shutdown(fd, SHUT_WR);
	if (read_full(fd, &got, sizeof(got)) != 0)
		return verr_errno(err, "stream: no byte count from the receiver");
	double s = (now_ns() - t0) / 1e9;

	if (got != (uint64_t)n * (uint64_t)size)
		return verr_set(err, "stream: the receiver got %llu bytes of %llu sent",
				(unsigned long long)got, (unsigned long long)n * (unsigned long long)size);
	res[0] = got * 8.0 / s / 1e6;
	res[1] = (double)got;
	res[2] = s;
	return 0;
}

/* Sends until the client hangs up, which is how a maerts test ends. */
static int maerts_server(int fd, long long size, struct verr *err)
{
	char *buf = calloc(1, (size_t)size);
	int rc = 0;

	if (!buf)
		return verr_set(err, "maerts: out of memory");
	for (;;) {
		ssize_t w = send(fd, buf, (size_t)size, MSG_NOSIGNAL);

		if (w >= 0 || errno == EINTR)
			continue;
		if (errno != EPIPE && errno != ECONNRESET)
			rc = verr_errno(err, "maerts: write");
		break;
	}
	free(buf);
	return rc;
}

static int maerts_client(int fd, long long size, double seconds, double res[3], struct verr *err)
{
	char *buf = malloc((size_t)size);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), t1, got = 0;

	if (!buf)
		return verr_set(err, "maerts: out of memory");
	do {
		ssize_t r = read(fd, buf, (size_t)size);

		if (r <= 0 && !(r < 0 && errno == EINTR)) {
			free(buf);
			return r == 0 ? verr_set(err, "maerts: the sender closed after %llu bytes",
						 (unsigned long long)got)
				      : verr_errno(err, "maerts: read");
		}
		if (r > 0)
			got += (uint64_t)r;
	} while ((t1 = now_ns()) < end);
	free(buf);
	res[0] = got * 8.0 / ((t1 - t0) / 1e9) / 1e6;
	res[1] = (double)got;
	res[2] = (t1 - t0) / 1e9;
	return 0;
}

static int rr_server(int fd, long long size, struct verr *err)
{
	char *buf = malloc((size_t)size);
	int r;

	if (!buf)
		return verr_set(err, "rr: out of memory");
	while ((r = read_full(fd, buf, (size_t)size)) == 0)
		if (write_full(fd, buf, (size_t)size) < 0)
			break;
	free(buf);
	return r == 1 ? 0 : verr_errno(err, "rr: server");
}

static int rr_client(int fd, long long size, double seconds, double res[3], struct verr *err)
{
	char *buf = calloc(1, (size_t)size);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), t1;
	unsigned long n = 0;

	if (!buf)
		return verr_set(err, "rr: out of memory");
	do {
		if (write_full(fd, buf, (size_t)size) < 0 || read_full(fd, buf, (size_t)size) != 0) {
			free(buf);
			return verr_errno(err, "rr: transaction %lu", n + 1);
		}
		n++;
	} while ((t1 = now_ns()) < end);
	free(buf);
	res[0] = (t1 - t0) / 1e3 / (double)n;
	res[1] = (double)n;
	res[2] = (t1 - t0) / 1e9;
	return 0;
}

int nb_serve(int fd, const struct nb_hdr *h, struct verr *err)
{
	switch (h->test) {
	case NB_STREAM:
		return stream_server(fd, err);
	case NB_MAERTS:
		return maerts_server(fd, (long long)h->size, err);
	case NB_RR:
		nodelay(fd);
		return rr_server(fd, (long long)h->size, err);
	}
	return verr_set(err, "unknown test %u", h->test);
}

int nb_run(int fd, int test, long long size, double seconds, double res[3], struct verr *err)
{
	struct nb_hdr h = { HDR_MAGIC, (uint32_t)test, (uint64_t)size };

	if (test == NB_RR)
		nodelay(fd);
	if (write_full(fd, &h, sizeof(h)) < 0)
		return verr_errno(err, "sending the test header");
	switch (test) {
	case NB_STREAM:
		return stream_client(fd, size, seconds, res, err);
	case NB_MAERTS:
		return maerts_client(fd, size, seconds, res, err);
	case NB_RR:
		return rr_client(fd, size, seconds, res, err);
	case NB_STOP:
		return 0;
	}
	return verr_set(err, "unknown test %d", test);
}

void nb_print(int test, long long size, const double res[3])
{
	if (test == NB_RR)
		printf("vhpc-bench {\"test\":\"rr\",\"size\":%lld,\"value\":%.4f,\"unit\":\"usec\","
		       "\"transactions\":%.0f,\"seconds\":%.6f}\n", size, res[0], res[1], res[2]);
	else
		printf("vhpc-bench {\"test\":\"%s\",\"size\":%lld,\"value\":%.4f,\"unit\":\"Mbit/s\","
		       "\"bytes\":%.0f,\"seconds\":%.6f}\n", nb_test_name(test), size, res[0], res[1], res[2]);
	fflush(stdout);
}
