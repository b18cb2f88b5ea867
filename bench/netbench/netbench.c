/*
 * vhpc-netbench: TCP between two MPI ranks, in the spirit of netperf's
 * TCP_STREAM (throughput for a send size) and TCP_RR (request/response
 * round trips of a message size).  MPI is only the rendezvous: the ranks
 * exchange an address and port and agree on each test, then talk over a
 * plain TCP connection, a new one per test as netperf does.
 *
 * Two ranks in one network namespace (native: the host) use loopback; in
 * different namespaces (guests) rank 1 connects to rank 0's own addresses.
 *
 *   mpirun -np 2 vhpc-netbench [-sizes LIST] [-time SECONDS] [-addr A] [stream] [rr]
 *
 * Rank 0 prints one line per measurement (parsed by vhpc bench):
 *   vhpc-bench {"test":"stream","size":N,"value":MBIT_S,"unit":"Mbit/s","bytes":B,"seconds":S}
 *   vhpc-bench {"test":"rr","size":N,"value":USEC,"unit":"usec","transactions":T,"seconds":S}
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vhpc.h"

#define ME "vhpc-netbench"
#define MAX_SIZES 64
#define MAX_MSG (16u << 20)
#define MAX_ADDRS 16
#define IO_TIMEOUT_MS 30000
#define HDR_MAGIC 0x76686e62u   /* "vhnb" */

enum { TEST_STREAM = 1, TEST_RR = 2 };

struct opts {
	long long sizes[MAX_SIZES];
	int nsizes;
	double seconds;
	bool stream, rr;
	const char *addr;
};

struct hdr { uint32_t magic, test; uint64_t size; };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mpirun -np 2 " ME " [-sizes LIST] [-time SECONDS] [-addr ADDRESS] [stream] [rr]\n"
		"  stream  rank 1 sends SIZE-byte writes to rank 0 for SECONDS: Mbit/s\n"
		"  rr      SIZE-byte request and SIZE-byte response: round trip in usec\n"
		"  -sizes  comma-separated sizes, K/M suffixes (default 1,64,1K,16K,64K)\n"
		"  -time   seconds per test and size (default 1)\n"
		"  -addr   rank 0's IPv4 address for rank 1 (default: loopback within one\n"
		"          network namespace, else rank 0's own addresses in turn)\n");
}

static bool rank0_by_env(void)
{
	const char *v = getenv("OMPI_COMM_WORLD_RANK");

	return !v || !strcmp(v, "0");
}

static int parse_args(int argc, char **argv, struct opts *o, struct verr *err)
{
	static const long long defaults[] = { 1, 64, 1024, 16384, 65536 };

	memset(o, 0, sizeof(*o));
	o->seconds = 1.0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			if (rank0_by_env())
				usage(stdout);
			exit(0);
		} else if (!strcmp(a, "stream")) {
			o->stream = true;
		} else if (!strcmp(a, "rr")) {
			o->rr = true;
		} else if (a[0] != '-') {
			return verr_set(err, "unknown test '%s' (stream, rr)", a);
		} else if (!val) {
			return verr_set(err, "%s needs a value", a);
		} else if (!strcmp(a, "-sizes")) {
			char buf[1024], *save = NULL;

			i++;
			snprintf(buf, sizeof(buf), "%s", val);
			for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				uint64_t s;

				if (o->nsizes == MAX_SIZES)
					return verr_set(err, "-sizes: at most %d sizes", MAX_SIZES);
				if (parse_size(t, &s) < 0 || s < 1 || s > MAX_MSG)
					return verr_set(err, "-sizes: expected sizes from 1 to 16M, got '%s'", t);
				o->sizes[o->nsizes++] = (long long)s;
			}
			if (!o->nsizes)
				return verr_set(err, "-sizes: expected SIZE[,SIZE...], got '%s'", val);
		} else if (!strcmp(a, "-time")) {
			char *end;

			i++;
			o->seconds = strtod(val, &end);
			if (end == val || *end || !(o->seconds >= 0.001 && o->seconds <= 3600))
				return verr_set(err, "-time: expected seconds from 0.001 to 3600, got '%s'", val);
		} else if (!strcmp(a, "-addr")) {
			struct in_addr in;

			i++;
			if (inet_pton(AF_INET, val, &in) != 1)
				return verr_set(err, "-addr: expected an IPv4 address, got '%s'", val);
			o->addr = val;
		} else {
			return verr_set(err, "unknown option '%s'", a);
		}
	}
	if (!o->stream && !o->rr)
		o->stream = o->rr = true;
	if (!o->nsizes) {
		memcpy(o->sizes, defaults, sizeof(defaults));
		o->nsizes = sizeof(defaults) / sizeof(defaults[0]);
	}
	return 0;
}

/* ---------------------------------------------------------------- sockets */

static void io_timeouts(int fd)
{
	struct timeval tv = { IO_TIMEOUT_MS / 1000, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int listen_any(uint32_t bind_addr, uint16_t *port, struct verr *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(bind_addr) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return verr_errno(err, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		verr_errno(err, "listen");
		close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

static int accept_timeout(int lfd, struct verr *err)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	int r = poll(&p, 1, IO_TIMEOUT_MS), fd;

	if (r <= 0)
		return r == 0 ? verr_set(err, "rank 1 did not connect within %d s", IO_TIMEOUT_MS / 1000)
			      : verr_errno(err, "poll");
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "accept");
	io_timeouts(fd);
	return fd;
}

static int connect_timeout(uint32_t addr, uint16_t port, int timeout_ms, struct verr *err)
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

/* Rank 0's IPv4 addresses apart from loopback, for rank 1 to try. */
static int own_addrs(uint32_t *out, int max)
{
	struct ifaddrs *ifa, *i;
	int n = 0;

	if (getifaddrs(&ifa) < 0)
		return 0;
	for (i = ifa; i && n < max; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
		    !(i->ifa_flags & IFF_LOOPBACK))
			out[n++] = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
	freeifaddrs(ifa);
	return n;
}

/* Which network namespace this rank is in, across machines: the
 * namespace's inode number alone repeats between kernels (two VMs' initial
 * namespaces have the same one), so the kernel's boot id goes into it. */
static uint64_t netns_id(void)
{
	struct stat st;
	char boot[64] = "";
	uint64_t h = 1469598103934665603ull;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = 0;
		fclose(f);
	}
	for (const char *p = boot; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	if (stat("/proc/self/ns/net", &st) < 0)
		return 0;
	return (h ^ (uint64_t)st.st_ino) | 1;
}

/* ------------------------------------------------------------------ tests */

/* Rank 0: receives until EOF and reports the byte count. */
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

/* Rank 1: writes for `seconds`, then waits for rank 0's count, so the time
 * covers every byte arriving. */
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
		return verr_errno(err, "stream: no count from rank 0");
	double s = (now_ns() - t0) / 1e9;

	if (got != (uint64_t)n * (uint64_t)size)
		return verr_set(err, "stream: rank 0 received %llu bytes of %llu sent",
				(unsigned long long)got, (unsigned long long)n * (unsigned long long)size);
	res[0] = got * 8.0 / s / 1e6;
	res[1] = (double)got;
	res[2] = s;
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

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* One test at one size on a fresh connection; rank 0 gets the numbers. */
static int one_test(int rank, int lfd, uint32_t addr, uint16_t port, int test, long long size,
		    double seconds, double res[3], struct verr *err)
{
	struct hdr h = { HDR_MAGIC, (uint32_t)test, (uint64_t)size };
	int fd, rc = 0;

	if (rank == 0) {
		struct hdr got;

		if ((fd = accept_timeout(lfd, err)) < 0)
			return -1;
		if (read_full(fd, &got, sizeof(got)) != 0 || memcmp(&got, &h, sizeof(h))) {
			close(fd);
			return verr_set(err, "connection without the expected test header");
		}
		if (test == TEST_RR)
			nodelay(fd);
		rc = test == TEST_STREAM ? stream_server(fd, err) : rr_server(fd, size, err);
	} else {
		if ((fd = connect_timeout(addr, port, IO_TIMEOUT_MS, err)) < 0)
			return -1;
		if (test == TEST_RR)
			nodelay(fd);
		if (write_full(fd, &h, sizeof(h)) < 0)
			rc = verr_errno(err, "header");
		else
			rc = test == TEST_STREAM ? stream_client(fd, size, seconds, res, err)
						 : rr_client(fd, size, seconds, res, err);
	}
	close(fd);
	return rc;
}

/* Agrees on success across both ranks; a failing rank's message is printed
 * where it happened. */
static bool all_ok(int rc, int rank, const struct verr *err)
{
	int mine = rc == 0, all = 0;

	if (!mine)
		fprintf(stderr, ME ": rank %d: %s\n", rank, err->msg);
	MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	return all;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct verr err = { "" };
	int rank, size, lfd = -1, rc = 0;
	uint64_t ns[2], me;
	uint32_t addrs[MAX_ADDRS], addr = 0;
	int naddrs = 0;
	uint16_t port = 0;

	if (parse_args(argc, argv, &o, &err) < 0) {
		if (rank0_by_env()) {
			fprintf(stderr, ME ": %s\n", err.msg);
			usage(stderr);
		}
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, ME ": needs exactly 2 processes, got %d\n", size);
		MPI_Finalize();
		return 2;
	}
	me = netns_id();
	MPI_Allgather(&me, 1, MPI_UINT64_T, ns, 1, MPI_UINT64_T, MPI_COMM_WORLD);
	bool same_ns = ns[0] == ns[1] && ns[0] != 0;

	/* Rank 0 listens and tells rank 1 where. */
	if (rank == 0) {
		struct in_addr in;

		if (o.addr) {
			inet_pton(AF_INET, o.addr, &in);
			addrs[0] = ntohl(in.s_addr);
			naddrs = 1;
		} else if (same_ns) {
			addrs[0] = INADDR_LOOPBACK;
			naddrs = 1;
		} else {
			naddrs = own_addrs(addrs, MAX_ADDRS);
		}
		lfd = listen_any(same_ns && !o.addr ? INADDR_LOOPBACK : INADDR_ANY, &port, &err);
		if (lfd < 0)
			rc = -1;
		else if (naddrs == 0)
			rc = verr_set(&err, "rank 0 has no IPv4 address apart from loopback");
	}
	if (!all_ok(rc, rank, &err)) {
		rc = -1;
		goto out;
	}
	MPI_Bcast(&naddrs, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Bcast(addrs, naddrs, MPI_UINT32_T, 0, MPI_COMM_WORLD);
	MPI_Bcast(&port, 1, MPI_UINT16_T, 0, MPI_COMM_WORLD);

	/* Rank 1 finds an address that answers; rank 0 accepts that probe. */
	if (rank == 1) {
		int fd = -1;

		for (int i = 0; i < naddrs && fd < 0; i++)
			if ((fd = connect_timeout(addrs[i], port, 2000, &err)) >= 0)
				addr = addrs[i];
		if (fd < 0)
			rc = -1;
		else
			close(fd);
	} else {
		int fd = accept_timeout(lfd, &err);

		if (fd < 0)
			rc = -1;
		else
			close(fd);
	}
	if (!all_ok(rc, rank, &err)) {
		rc = -1;
		goto out;
	}
	MPI_Bcast(&addr, 1, MPI_UINT32_T, 1, MPI_COMM_WORLD);
	if (rank == 0) {
		char ip[32];

		printf("# " ME ": rank 1 -> rank 0 at %s:%u (%s), %.3f s per test\n",
		       ipv4_format(addr, ip, sizeof(ip)), port,
		       same_ns ? "one network namespace" : "two network namespaces", o.seconds);
		fflush(stdout);
	}

	for (int test = TEST_STREAM; test <= TEST_RR; test++) {
		if ((test == TEST_STREAM && !o.stream) || (test == TEST_RR && !o.rr))
			continue;
		for (int i = 0; i < o.nsizes; i++) {
			double res[3] = { 0, 0, 0 };

			MPI_Barrier(MPI_COMM_WORLD);
			rc = one_test(rank, lfd, addr, port, test, o.sizes[i], o.seconds, res, &err);
			if (!all_ok(rc, rank, &err)) {
				rc = -1;
				goto out;
			}
			MPI_Bcast(res, 3, MPI_DOUBLE, 1, MPI_COMM_WORLD);
			if (rank == 0) {
				if (test == TEST_STREAM)
					printf("vhpc-bench {\"test\":\"stream\",\"size\":%lld,\"value\":%.4f,\"unit\":\"Mbit/s\","
					       "\"bytes\":%.0f,\"seconds\":%.6f}\n", o.sizes[i], res[0], res[1], res[2]);
				else
					printf("vhpc-bench {\"test\":\"rr\",\"size\":%lld,\"value\":%.4f,\"unit\":\"usec\","
					       "\"transactions\":%.0f,\"seconds\":%.6f}\n", o.sizes[i], res[0], res[1], res[2]);
				fflush(stdout);
			}
		}
	}
	rc = 0;
out:
	if (lfd >= 0)
		close(lfd);
	MPI_Finalize();
	return rc == 0 ? 0 : 1;
}
