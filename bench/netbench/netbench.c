/*
 * vhpc-netbench: TCP in the spirit of netperf's TCP_STREAM, TCP_MAERTS and
 * TCP_RR (tcp.c), between two MPI ranks or, in peer mode (peer.c), between
 * a server and a client that need no MPI: a guest and the host.  In MPI
 * mode MPI is only the rendezvous: the ranks exchange an address and port
 * and agree on each test, then talk over a plain TCP connection, a new one
 * per test as netperf does.
 *
 * Two ranks in one network namespace (native: the host) use loopback; in
 * different namespaces (guests) rank 1 connects to rank 0's own addresses.
 *
 *   mpirun -np 2 vhpc-netbench [-sizes LIST] [-time SECONDS] [-addr A] [stream] [maerts] [rr]
 *   vhpc-netbench -serve ADDR:PORT [-idle SECONDS]
 *   vhpc-netbench -connect ADDR:PORT [-wait SECONDS] [-stop] [-sizes ...] [-time ...] [TEST...]
 *
 * Rank 0 (in peer mode the client) prints one line per measurement, parsed
 * by vhpc bench:
 *   vhpc-bench {"test":"stream","size":N,"value":MBIT_S,"unit":"Mbit/s","bytes":B,"seconds":S}
 *   vhpc-bench {"test":"rr","size":N,"value":USEC,"unit":"usec","transactions":T,"seconds":S}
 */
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/parse.h"
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netbench.h"

#define ME "vhpc-netbench"
#define MAX_ADDRS 16

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mpirun -np 2 " ME " [-sizes LIST] [-time SECONDS] [-addr ADDRESS] [TEST...]\n"
		"       " ME " -serve ADDR:PORT [-idle SECONDS]\n"
		"       " ME " -connect ADDR:PORT [-wait SECONDS] [-stop] [-sizes LIST] [-time SECONDS] [TEST...]\n"
		"tests (default stream rr):\n"
		"  stream  rank 1 (the client) sends SIZE-byte writes for SECONDS: Mbit/s\n"
		"  maerts  the other way: rank 0 (the server) sends: Mbit/s\n"
		"  rr      SIZE-byte request and SIZE-byte response: round trip in usec\n"
		"  -sizes  comma-separated sizes, K/M suffixes (default 1,64,1K,16K,64K)\n"
		"  -time   seconds per test and size (default 1)\n"
		"  -addr   rank 0's IPv4 address for rank 1 (default: loopback within one\n"
		"          network namespace, else rank 0's own addresses in turn)\n"
		"peer mode, without MPI:\n"
		"  -serve    serve tests on ADDR:PORT (0.0.0.0 for every address; port 0: any,\n"
		"            printed), one connection at a time, until a client sends -stop\n"
		"  -idle     the server ends after SECONDS without a connection (default: never)\n"
		"  -connect  run the tests against a server; the client prints the figures\n"
		"  -wait     keep trying to connect for SECONDS, for a server still starting (default 30)\n"
		"  -stop     tell the server to end after the tests\n");
}

static bool rank0_by_env(void)
{
	const char *v = getenv("OMPI_COMM_WORLD_RANK");

	return !v || !strcmp(v, "0");
}

static int parse_addrport(const char *opt, const char *val, bool any_port, uint32_t *addr, uint16_t *port,
			  struct verr *err)
{
	char host[64];
	int p;

	if (hostport_parse(val, any_port, host, sizeof(host), &p) < 0 || ipv4_parse(host, addr) < 0)
		return verr_set(err, "%s: expected IPV4-ADDRESS:PORT (port %s..65535), got '%s'", opt,
				any_port ? "0" : "1", val);
	*port = (uint16_t)p;
	return 0;
}

static int parse_seconds(const char *opt, const char *val, double min, double *out, struct verr *err)
{
	char *end;

	*out = strtod(val, &end);
	if (end == val || *end || !(*out >= min && *out <= 3600))
		return verr_set(err, "%s: expected seconds from %g to 3600, got '%s'", opt, min, val);
	return 0;
}

static int opt_sizes(struct nb_opts *o, const char *val, struct verr *err)
{
	char buf[1024], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", val);
	for (char *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (o->nsizes == NB_MAX_SIZES)
			return verr_set(err, "-sizes: at most %d sizes", NB_MAX_SIZES);
		if (parse_size(s, &v) < 0 || v < 1 || v > NB_MAX_MSG)
			return verr_set(err, "-sizes: expected sizes from 1 to 16M, got '%s'", s);
		o->sizes[o->nsizes++] = (long long)v;
	}
	if (!o->nsizes)
		return verr_set(err, "-sizes: expected SIZE[,SIZE...], got '%s'", val);
	return 0;
}

/* Whether -idle and -wait were given, which their defaults cannot tell. */
struct nb_given {
	bool idle, wait;
};

/* An option A with its value VAL: 1 if A is no such option. */
static int opt_value(struct nb_opts *o, struct nb_given *g, const char *a, const char *val,
		     struct verr *err)
{
	struct in_addr in;

	if (!strcmp(a, "-sizes"))
		return opt_sizes(o, val, err);
	if (!strcmp(a, "-time"))
		return parse_seconds(a, val, 0.001, &o->seconds, err);
	if (!strcmp(a, "-idle")) {
		if (parse_seconds(a, val, 1, &o->idle, err) < 0)
			return -1;
		g->idle = true;
		return 0;
	}
	if (!strcmp(a, "-wait")) {
		if (parse_seconds(a, val, 0, &o->wait, err) < 0)
			return -1;
		g->wait = true;
		return 0;
	}
	if (!strcmp(a, "-addr")) {
		if (inet_pton(AF_INET, val, &in) != 1)
			return verr_set(err, "-addr: expected an IPv4 address, got '%s'", val);
		o->addr = val;
		return 0;
	}
	if (!strcmp(a, "-serve")) {
		if (parse_addrport(a, val, true, &o->serve_addr, &o->serve_port, err) < 0)
			return -1;
		o->serve = true;
		return 0;
	}
	if (!strcmp(a, "-connect")) {
		if (parse_addrport(a, val, false, &o->connect_addr, &o->connect_port, err) < 0)
			return -1;
		o->connect = true;
		return 0;
	}
	return 1;
}

/* Options that each make sense but not together. */
static int check_combination(const struct nb_opts *o, const struct nb_given *g, struct verr *err)
{
	if (o->serve && o->connect)
		return verr_set(err, "-serve and -connect: one program is either the server or the client");
	if (o->serve && (o->ntests || o->nsizes || o->stop || g->wait))
		return verr_set(err, "-serve: the client chooses the tests, sizes and -wait/-stop; give them to -connect");
	if (!o->serve && g->idle)
		return verr_set(err, "-idle is for -serve");
	if (!o->connect && (o->stop || g->wait))
		return verr_set(err, "-wait and -stop are for -connect");
	if ((o->serve || o->connect) && o->addr)
		return verr_set(err, "-addr is for MPI mode; in peer mode -connect names the server");
	return 0;
}

static void default_tests_and_sizes(struct nb_opts *o)
{
	static const long long defaults[] = { 1, 64, 1024, 16384, 65536 };

	if (!o->ntests) {
		o->tests[o->ntests++] = NB_STREAM;
		o->tests[o->ntests++] = NB_RR;
	}
	if (!o->nsizes) {
		memcpy(o->sizes, defaults, sizeof(defaults));
		o->nsizes = sizeof(defaults) / sizeof(defaults[0]);
	}
}

static int parse_args(int argc, char **argv, struct nb_opts *o, struct verr *err)
{
	struct nb_given g = { 0 };

	memset(o, 0, sizeof(*o));
	o->seconds = 1.0;
	o->wait = 30;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int t, r;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			if (rank0_by_env())
				usage(stdout);
			exit(0);
		} else if ((t = nb_test_parse(a)) > 0) {
			if (o->ntests == NB_MAX_TESTS)
				return verr_set(err, "at most %d tests", NB_MAX_TESTS);
			o->tests[o->ntests++] = t;
		} else if (a[0] != '-') {
			return verr_set(err, "unknown test '%s' (stream, maerts, rr)", a);
		} else if (!strcmp(a, "-stop")) {
			o->stop = true;
		} else if (!val) {
			return verr_set(err, "%s needs a value", a);
		} else if ((r = opt_value(o, &g, a, val, err)) > 0) {
			return verr_set(err, "unknown option '%s'", a);
		} else if (r < 0) {
			return -1;
		} else {
			i++;
		}
	}
	if (check_combination(o, &g, err) < 0)
		return -1;
	default_tests_and_sizes(o);
	return 0;
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

/* One test at one size on a fresh connection; rank 1, the client, gets
 * the figures. */
static int one_test(int rank, int lfd, uint32_t addr, uint16_t port, int test, long long size,
		    double seconds, double res[3], struct verr *err)
{
	struct nb_hdr h;
	int fd, rc;

	if (rank == 0) {
		if ((fd = nb_accept(lfd, NB_IO_TIMEOUT_MS, err)) < 0)
			return -1;
		rc = nb_read_hdr(fd, &h, err);
		if (rc == 0 && (h.test != (uint32_t)test || h.size != (uint64_t)size))
			rc = verr_set(err, "rank 1 asked for %s %llu, not %s %lld", nb_test_name((int)h.test) ?: "?",
				      (unsigned long long)h.size, nb_test_name(test), size);
		if (rc == 0)
			rc = nb_serve(fd, &h, err);
	} else {
		if ((fd = nb_connect(addr, port, NB_IO_TIMEOUT_MS, err)) < 0)
			return -1;
		rc = nb_run(fd, test, size, seconds, res, err);
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
	struct nb_opts o;
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
	if (o.serve)
		return nb_peer_serve(&o);
	if (o.connect)
		return nb_peer_connect(&o);
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
		lfd = nb_listen(same_ns && !o.addr ? INADDR_LOOPBACK : INADDR_ANY, 0, &port, &err);
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
			if ((fd = nb_connect(addrs[i], port, 2000, &err)) >= 0)
				addr = addrs[i];
		if (fd < 0)
			rc = -1;
		else
			close(fd);
	} else {
		int fd = nb_accept(lfd, NB_IO_TIMEOUT_MS, &err);

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

	for (int t = 0; t < o.ntests; t++)
		for (int i = 0; i < o.nsizes; i++) {
			double res[3] = { 0, 0, 0 };

			MPI_Barrier(MPI_COMM_WORLD);
			rc = one_test(rank, lfd, addr, port, o.tests[t], o.sizes[i], o.seconds, res, &err);
			if (!all_ok(rc, rank, &err)) {
				rc = -1;
				goto out;
			}
			MPI_Bcast(res, 3, MPI_DOUBLE, 1, MPI_COMM_WORLD);
			if (rank == 0)
				nb_print(o.tests[t], o.sizes[i], res);
		}
	rc = 0;
out:
	if (lfd >= 0)
		close(lfd);
	MPI_Finalize();
	return rc == 0 ? 0 : 1;
}
