/*
 * vhpc-sysbench: small loops in the spirit of UnixBench (System Call
 * Overhead, Pipe Throughput, Pipe-based Context Switching, Process
 * Creation) with 1 or more parallel copies, and a memory touch (malloc +
 * memset) timed in the process.  `vhpc bench --suite sys|mem` runs it
 * natively and in guests and compares; it needs no MPI, so the same binary
 * runs directly on the host and under mpirun in a guest.
 *
 * Output, one line per measurement (parsed by vhpc bench; anything else it
 * prints starts with '#'):
 *   vhpc-bench {"test":"syscall","copies":2,"value":...,"unit":"loops/s","seconds":...}
 *   vhpc-bench {"test":"memtouch","size":N,"ms":...,"t_start":NS,"t_done":NS}
 * t_start/t_done are CLOCK_MONOTONIC nanoseconds: container guests share the
 * host's clock, so the harness can time a guest from its own start.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/parse.h"

#define ME "vhpc-sysbench"
#define MAX_COPIES 1024
#define PIPE_CHUNK 512   /* UnixBench's pipe throughput block */

enum test { T_SYSCALL = 0, T_PIPE, T_CTXSW, T_SPAWN, T_MEMTOUCH, T_N };
static const char *const test_names[T_N] = { "syscall", "pipe", "ctxsw", "spawn", "memtouch" };
/* Iterations between clock reads: small against the loop's own cost. */
static const unsigned test_batch[T_N] = { 256, 256, 16, 1, 1 };

struct opts {
	bool run[T_N];
	int copies[16];
	int ncopies;
	int cpus;            /* 0: every CPU this process may use */
	double seconds;
	uint64_t size;
};

static uint64_t t_start;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " ME " [-cpus N] [-copies N[,N...]] [-time SECONDS] [-size SIZE] TEST...\n"
		"  tests: syscall  close(dup), getpid, getuid, umask per loop (UnixBench syscall mix)\n"
		"         pipe     write and read back 512 bytes through one pipe\n"
		"         ctxsw    two processes pass a counter through two pipes\n"
		"         spawn    fork, child exits, parent waits\n"
		"         memtouch malloc SIZE and memset it (once per run)\n"
		"  -cpus N     run on the first N CPUs this process may use (a guest's own)\n"
		"  -copies L   parallel copies of each loop test (default 1)\n"
		"  -time S     seconds per loop test (default 1)\n"
		"  -size SIZE  memtouch size (default 256M)\n");
}

static int opt_copies(struct opts *o, const char *val, struct verr *err)
{
	char buf[256], *save = NULL;
	long long v;

	snprintf(buf, sizeof(buf), "%s", val);
	o->ncopies = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (o->ncopies == (int)(sizeof(o->copies) / sizeof(o->copies[0])))
			return verr_set(err, "-copies: at most 16 counts");
		if (parse_ll(t, 1, MAX_COPIES, &v) < 0)
			return verr_set(err, "-copies: expected counts in 1..%d, got '%s'", MAX_COPIES, t);
		o->copies[o->ncopies++] = (int)v;
	}
	if (!o->ncopies)
		return verr_set(err, "-copies: expected N[,N...], got '%s'", val);
	return 0;
}

/* Every option takes a value. */
static int opt_value(struct opts *o, const char *a, const char *val, struct verr *err)
{
	long long v;
	char *end;

	if (!strcmp(a, "-cpus")) {
		if (parse_ll(val, 1, CPU_SETSIZE, &v) < 0)
			return verr_set(err, "-cpus: expected 1..%d, got '%s'", CPU_SETSIZE, val);
		o->cpus = (int)v;
	} else if (!strcmp(a, "-copies")) {
		return opt_copies(o, val, err);
	} else if (!strcmp(a, "-time")) {
		o->seconds = strtod(val, &end);
		if (end == val || *end || !(o->seconds >= 0.001 && o->seconds <= 3600))
			return verr_set(err, "-time: expected seconds from 0.001 to 3600, got '%s'", val);
	} else if (!strcmp(a, "-size")) {
		if (parse_size(val, &o->size) < 0 || o->size < 4096 || o->size > (1ull << 40))
			return verr_set(err, "-size: expected a size from 4K to 1T, got '%s'", val);
	} else {
		return verr_set(err, "unknown option '%s'", a);
	}
	return 0;
}

static int add_test(struct opts *o, const char *a, struct verr *err)
{
	int t;

	for (t = 0; t < T_N; t++)
		if (!strcmp(a, test_names[t]))
			break;
	if (t == T_N)
		return verr_set(err, "unknown test '%s' (syscall, pipe, ctxsw, spawn, memtouch)", a);
	o->run[t] = true;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o, struct verr *err)
{
	bool any = false;

	memset(o, 0, sizeof(*o));
	o->copies[0] = 1;
	o->ncopies = 1;
	o->seconds = 1.0;
	o->size = 256ull << 20;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (a[0] != '-') {
			if (add_test(o, a, err) < 0)
				return -1;
			any = true;
		} else if (i + 1 == argc) {
			return verr_set(err, "%s needs a value", a);
		} else if (opt_value(o, a, argv[++i], err) < 0) {
			return -1;
		}
	}
	if (!any)
		return verr_set(err, "no test named (syscall, pipe, ctxsw, spawn, memtouch)");
	return 0;
}

/* Every CPU the kernel lets this process have (in a container: its cpuset,
 * even if a launcher bound it to one core), then the first n of them. */
static int pick_cpus(int n, struct verr *err)
{
	cpu_set_t all, got, use;
	int k = 0;

	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	/* The kernel intersects the request with the cpuset; an error here
	 * only means we keep the mask we were given. */
	(void)sched_setaffinity(0, sizeof(all), &all);
	if (sched_getaffinity(0, sizeof(got), &got) < 0)
		return verr_errno(err, "sched_getaffinity");
	if (n == 0)
		return 0;
	CPU_ZERO(&use);
	for (int c = 0; c < CPU_SETSIZE && k < n; c++)
		if (CPU_ISSET(c, &got)) {
			CPU_SET(c, &use);
			k++;
		}
	if (k < n)
		return verr_set(err, "-cpus %d: only %d CPUs are available to this process", n, k);
	if (sched_setaffinity(0, sizeof(use), &use) < 0)
		return verr_errno(err, "sched_setaffinity");
	return 0;
}

/* -------------------------------------------------------------- the loops */

struct loop_state {
	int devnull;
	int p[2];            /* pipe: pipe test; ctxsw: to partner */
	int q[2];            /* ctxsw: from partner */
	pid_t partner;
	char buf[PIPE_CHUNK];
};

static int loop_setup(enum test t, struct loop_state *s)
{
	memset(s, 0, sizeof(*s));
	s->devnull = s->p[0] = s->p[1] = s->q[0] = s->q[1] = -1;
	s->partner = -1;
	switch (t) {
	case T_SYSCALL:
		s->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return s->devnull < 0 ? -1 : 0;
	case T_PIPE:
		return pipe(s->p);
	case T_CTXSW: {
		if (pipe(s->p) < 0 || pipe(s->q) < 0)
			return -1;
		s->partner = fork();
		if (s->partner < 0)
			return -1;
		if (s->partner == 0) {
			/* Echo each counter back until the other end closes. */
			unsigned long v;

			close(s->p[1]);
			close(s->q[0]);
			while (read_full(s->p[0], &v, sizeof(v)) == 0) {
				v++;
				if (write_full(s->q[1], &v, sizeof(v)) < 0)
					_exit(1);
			}
			_exit(0);
		}
		close(s->p[0]);
		close(s->q[1]);
		s->p[0] = s->q[1] = -1;
		return 0;
	}
	default:
		return 0;
	}
}

static void loop_teardown(struct loop_state *s)
{
	int fds[] = { s->devnull, s->p[0], s->p[1], s->q[0], s->q[1] };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (s->partner > 0)
		waitpid(s->partner, NULL, 0);
}

/* One iteration; 0 on success. */
static int loop_once(enum test t, struct loop_state *s, unsigned long *ctr)
{
	switch (t) {
	case T_SYSCALL: {
		int fd = (int)syscall(SYS_dup, s->devnull);

		if (fd < 0)
			return -1;
		syscall(SYS_close, fd);
		syscall(SYS_getpid);
		syscall(SYS_getuid);
		syscall(SYS_umask, 022);
		return 0;
	}
	case T_PIPE:
		if (write(s->p[1], s->buf, PIPE_CHUNK) != PIPE_CHUNK)
			return -1;
		return read_full(s->p[0], s->buf, PIPE_CHUNK) == 0 ? 0 : -1;
	case T_CTXSW: {
		unsigned long v = *ctr, back;

		if (write_full(s->p[1], &v, sizeof(v)) < 0 || read_full(s->q[0], &back, sizeof(back)) != 0)
			return -1;
		/* The partner really ran: it saw our value. */
		return back == v + 1 ? 0 : -1;
	}
	case T_SPAWN: {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			return -1;
		if (pid == 0)
			_exit(0);
		return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? 0 : -1;
	}
	default:
		return -1;
	}
}

struct copy_result { double loops, seconds; int err; };

/* A copy: wait for the start signal, loop for `seconds`, report. */
static void run_copy(enum test t, double seconds, int go, int res)
{
	struct copy_result r = { 0, 0, 0 };
	struct loop_state s;
	unsigned long n = 0;
	char c;
	uint64_t t0, end, now;

	if (loop_setup(t, &s) < 0)
		r.err = errno ? errno : EIO;
	/* EOF on the go pipe starts every copy at once. */
	while (read(go, &c, 1) < 0 && errno == EINTR)
		;
	t0 = now_ns();
	end = t0 + (uint64_t)(seconds * 1e9);
	now = t0;
	while (!r.err && now < end) {
		for (unsigned i = 0; i < test_batch[t]; i++, n++)
			if (loop_once(t, &s, &n) < 0) {
				r.err = errno ? errno : EIO;
				break;
			}
		now = now_ns();
	}
	r.loops = (double)n;
	r.seconds = (now - t0) / 1e9;
	loop_teardown(&s);
	if (write_full(res, &r, sizeof(r)) < 0)
		_exit(1);
	_exit(0);
}

static int run_loops(enum test t, int copies, double seconds, double *rate, struct verr *err)
{
	int go[2], res[2], failed = 0;
	pid_t pids[MAX_COPIES];
	int started = 0;

	*rate = 0;
	if (pipe(go) < 0 || pipe(res) < 0)
		return verr_errno(err, "pipe");
	for (; started < copies; started++) {
		pids[started] = fork();
		if (pids[started] < 0) {
			verr_errno(err, "fork of copy %d", started + 1);
			failed = 1;
			break;
		}
		if (pids[started] == 0) {
			close(go[1]);
			close(res[0]);
			run_copy(t, seconds, go[0], res[1]);
		}
	}
	close(go[0]);
	close(go[1]);
	close(res[1]);
	for (int i = 0; i < started; i++) {
		struct copy_result r;

		if (read_full(res[0], &r, sizeof(r)) != 0) {
			if (!failed)
				verr_set(err, "%s: a copy ended without a result", test_names[t]);
			failed = 1;
			break;
		}
		if (r.err) {
			if (!failed)
				verr_set(err, "%s: a copy failed: %s", test_names[t], strerror(r.err));
			failed = 1;
		} else if (r.seconds > 0) {
			*rate += r.loops / r.seconds;
		}
	}
	close(res[0]);
	for (int i = 0; i < started; i++)
		waitpid(pids[i], NULL, 0);
	return failed ? -1 : 0;
}

static int memtouch(uint64_t size, struct verr *err)
{
	uint64_t t0 = now_ns(), t1;
	char *p = malloc(size);

	if (!p)
		return verr_set(err, "memtouch: cannot allocate %llu bytes", (unsigned long long)size);
	memset(p, 1, size);
	/* Keep the stores: the compiler may not drop a memset it can see freed. */
	__asm__ volatile("" : : "r"(p) : "memory");
	t1 = now_ns();
	free(p);
	printf("vhpc-bench {\"test\":\"memtouch\",\"size\":%llu,\"ms\":%.6f,\"t_start\":%llu,\"t_done\":%llu}\n",
	       (unsigned long long)size, (t1 - t0) / 1e6, (unsigned long long)t_start,
	       (unsigned long long)t1);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct verr err;
	char host[256] = "?";

	t_start = now_ns();
	if (parse_args(argc, argv, &o, &err) < 0) {
		fprintf(stderr, ME ": %s\n", err.msg);
		usage(stderr);
		return 2;
	}
	if (pick_cpus(o.cpus, &err) < 0) {
		fprintf(stderr, ME ": %s\n", err.msg);
		return 1;
	}
	/* A partner or copy that dies must not kill us through a pipe. */
	signal(SIGPIPE, SIG_IGN);
	gethostname(host, sizeof(host) - 1);
	{
		cpu_set_t set;
		char list[256] = "?";
		int ids[CPU_SETSIZE];
		size_t n = 0;

		if (sched_getaffinity(0, sizeof(set), &set) == 0) {
			for (int c = 0; c < CPU_SETSIZE; c++)
				if (CPU_ISSET(c, &set))
					ids[n++] = c;
			cpulist_format(ids, n, list, sizeof(list));
		}
		printf("# " ME ": host %s, CPUs %s\n", host, list);
	}
	fflush(stdout);
	if (o.run[T_MEMTOUCH] && memtouch(o.size, &err) < 0) {
		fprintf(stderr, ME ": %s\n", err.msg);
		return 1;
	}
	for (int t = 0; t < T_MEMTOUCH; t++) {
		if (!o.run[t])
			continue;
		for (int k = 0; k < o.ncopies; k++) {
			double rate;

			if (run_loops(t, o.copies[k], o.seconds, &rate, &err) < 0) {
				fprintf(stderr, ME ": %s\n", err.msg);
				return 1;
			}
			printf("vhpc-bench {\"test\":\"%s\",\"copies\":%d,\"value\":%.3f,\"unit\":\"loops/s\",\"seconds\":%.3f}\n",
			       test_names[t], o.copies[k], rate, o.seconds);
			fflush(stdout);
		}
	}
	return 0;
}
