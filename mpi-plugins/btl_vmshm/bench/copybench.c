/*
 * vmshm-copybench: the copy limits the vmshm design lives within, measured
 * on this machine in one run, modes interleaved per repetition:
 *
 *   memcpy   one core copying a warm buffer (what every transport pays at
 *            least once per message)
 *   cma      single copy: process_vm_readv from another process on the
 *            other core (what vader does for large messages, and what a
 *            single-copy vmshm path would do between container guests)
 *   ring     two copies, pipelined: the other core copies into a shared
 *            ring in fragments while this one copies out (what vmshm does)
 *   splice   single copy through a pipe: the sender vmsplice()s its
 *            buffer's pages into a pipe (no copy), the receiver read()s
 *            them out (the copy); what a single-copy path between guests
 *            that share neither a PID namespace nor a process could use
 *            (a FIFO in the job's region folder)
 *   cma-bi, ring-bi, splice-bi
 *            the same with both cores sending and receiving at once: the
 *            shape of Sendrecv, where the two copies of the ring design
 *            cannot hide behind each other
 *
 * Bandwidth counts payload bytes delivered per second (both directions
 * summed in the -bi modes, as IMB's Sendrecv does).  Every transfer's last
 * buffer is checked against the pattern the sender wrote, so a broken mode
 * prints an error, not a number.
 *
 * -d instead sweeps one core's memcpy over the distance from source to
 * destination modulo 4 KiB (0-64 bytes, then every 64): where the ring puts
 * a payload against the bytes it is copied from decides which distance its
 * copies have (lib/vmshm/vmshm_ring.h, VMSHM_MATCH_MIN).
 *
 *   vmshm-copybench [-r REPS] [-t SECONDS] [-f FRAGMENT] [-R RING] [SIZE...]
 *   vmshm-copybench -d [-r REPS] [-t SECONDS] [SIZE...]
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE 64
#define MAX_SIZES 16

enum mode { M_MEMCPY, M_CMA, M_RING, M_SPLICE, M_CMA_BI, M_RING_BI, M_SPLICE_BI, M_N };
static const char *const mode_name[M_N] = { "memcpy", "cma", "ring", "splice", "cma-bi", "ring-bi", "splice-bi" };

/* A shared ring between the two workers: slots of one fragment each; the
 * producer owns head, the consumer tail, on lines of their own. */
struct ring {
	_Alignas(LINE) _Atomic uint64_t head;
	_Alignas(LINE) _Atomic uint64_t tail;
	_Alignas(LINE) unsigned char data[];
};

/* What the two workers share: a go/stop handshake per measurement. */
struct ctl {
	_Alignas(LINE) _Atomic long cmd;  /* -1 exit, else seq * M_N + mode */
	_Alignas(LINE) _Atomic int ready; /* workers that finished the command */
	_Alignas(LINE) _Atomic int armed; /* workers with buffers filled */
	_Atomic int fail;
	double t0[2], t1[2];              /* each worker's own start and end */
	size_t size;
	long iters;
	pid_t pid[2];
	unsigned char *buf[2];            /* each worker's own message buffer */
	char err[160];
};

static struct ctl *ctl;
static struct ring *rings[2];         /* rings[i]: worker i produces */
static int pipes[2][2];               /* pipes[i]: worker i vmsplices into [1] */
static size_t pipe_bytes;             /* what F_SETPIPE_SZ gave */
static size_t ring_bytes = 1 << 20, frag = 128 << 10;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s) < 0) {
		perror("vmshm-copybench: sched_setaffinity");
		exit(1);
	}
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 7 + seed);
}

static void fail(const char *fmt, const char *what, long v)
{
	int expect = 0;

	if (atomic_compare_exchange_strong(&ctl->fail, &expect, 1))
		snprintf(ctl->err, sizeof(ctl->err), fmt, what, v);
}

static void check(const unsigned char *b, size_t n, unsigned seed, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)(i * 7 + seed)) {
			fail("%s: wrong byte at offset %ld", what, (long)i);
			return;
		}
}

/* Sends one message of ctl->size through ring r in fragments. */
static void ring_send(struct ring *r, const unsigned char *src, size_t size, uint64_t *head)
{
	size_t nslots = ring_bytes / frag;

	for (size_t off = 0; off < size; off += frag) {
		size_t n = size - off < frag ? size - off : frag;

		while (*head - atomic_load_explicit(&r->tail, memory_order_acquire) >= nslots)
			;
		memcpy(r->data + (*head % nslots) * frag, src + off, n);
		atomic_store_explicit(&r->head, ++*head, memory_order_release);
	}
}

/* One fragment if there is one: how the -bi modes interleave the two
 * directions on one core, as a progress loop does. */
static int ring_recv_one(struct ring *r, unsigned char *dst, size_t size, size_t *off, uint64_t *tail)
{
	size_t nslots = ring_bytes / frag;

	if (atomic_load_explicit(&r->head, memory_order_acquire) == *tail)
		return 0;
	size_t n = size - *off < frag ? size - *off : frag;
	memcpy(dst + *off, r->data + (*tail % nslots) * frag, n);
	atomic_store_explicit(&r->tail, ++*tail, memory_order_release);
	*off += n;
	return 1;
}

static int ring_try_send_one(struct ring *r, const unsigned char *src, size_t size, size_t *off,
			     uint64_t *head)
{
	size_t nslots = ring_bytes / frag;

	if (*head - atomic_load_explicit(&r->tail, memory_order_acquire) >= nslots)
		return 0;
	size_t n = size - *off < frag ? size - *off : frag;
	memcpy(r->data + (*head % nslots) * frag, src + *off, n);
	atomic_store_explicit(&r->head, ++*head, memory_order_release);
	*off += n;
	return 1;
}

static void cma_read(int me, unsigned char *dst, size_t size)
{
	struct iovec l = { dst, size }, rv = { ctl->buf[1 - me], size };
	ssize_t n = process_vm_readv(ctl->pid[1 - me], &l, 1, &rv, 1, 0);

	if (n != (ssize_t)size)
		fail("%s: process_vm_readv returned %ld", n < 0 ? strerror(errno) : "short read",
		     (long)n);
}

/* Up to one pipe's worth of src's remaining bytes into the pipe: the
 * pages are referenced, not copied.  0 when the pipe is full. */
static size_t splice_some(int fd, const unsigned char *src, size_t size, size_t off)
{
	struct iovec v = { (void *)(src + off), size - off < pipe_bytes ? size - off : pipe_bytes };
	ssize_t n = vmsplice(fd, &v, 1, SPLICE_F_NONBLOCK);

	if (n < 0 && errno != EAGAIN) {
		fail("%s: vmsplice returned %ld", strerror(errno), (long)n);
		return size - off;
	}
	return n > 0 ? (size_t)n : 0;
}

static size_t read_some(int fd, unsigned char *dst, size_t size, size_t off)
{
	ssize_t n = read(fd, dst + off, size - off);

	if (n < 0 && errno != EAGAIN) {
		fail("%s: read from the pipe returned %ld", strerror(errno), (long)n);
		return size - off;
	}
	return n > 0 ? (size_t)n : 0;
}

/* Worker i runs on CPU i; worker 0 is the receiver in one-way modes. */
static void worker(int me, size_t cap)
{
	unsigned char *dst = aligned_alloc(4096, cap);
	uint64_t head = 0, tail = 0;
	long last = 0;

	if (!dst) {
		fail("%s: out of memory (%ld bytes)", "worker", (long)cap);
		_exit(1);
	}
	pin(me);
	for (;;) {
		long c;

		while ((c = atomic_load(&ctl->cmd)) == last)
			;
		last = c;
		if (c < 0)
			_exit(0);
		enum mode m = (enum mode)(c % M_N);
		size_t size = ctl->size;
		long it = ctl->iters;
		unsigned char *src = ctl->buf[me];

		/* Both buffers filled before either side starts: CMA reads the
		 * peer's, and filling is not what is timed. */
		fill(src, size, (unsigned)me + 1);
		memset(dst, 0, size);
		head = tail = 0;
		atomic_fetch_add(&ctl->armed, 1);
		while (atomic_load(&ctl->armed) < 2)
			;
		ctl->t0[me] = now();
		switch (m) {
		case M_MEMCPY:
			if (me == 0)
				for (long i = 0; i < it; i++)
					memcpy(dst, src, size);
			if (me == 0)
				check(dst, size, 1, "memcpy");
			break;
		case M_CMA:
			if (me == 0) {
				for (long i = 0; i < it; i++)
					cma_read(0, dst, size);
				check(dst, size, 2, "cma");
			}
			break;
		case M_CMA_BI:
			for (long i = 0; i < it; i++)
				cma_read(me, dst, size);
			check(dst, size, (unsigned)(2 - me), "cma-bi");
			break;
		case M_RING:
			if (me == 1)
				for (long i = 0; i < it; i++)
					ring_send(rings[1], src, size, &head);
			else
				for (long i = 0; i < it; i++)
					for (size_t off = 0; off < size;)
						ring_recv_one(rings[1], dst, size, &off, &tail);
			if (me == 0)
				check(dst, size, 2, "ring");
			break;
		case M_SPLICE:
			/* Busy-polling both ends, as a BTL's progress loop would. */
			for (long i = 0; i < it; i++)
				for (size_t off = 0; off < size;)
					off += me == 1 ? splice_some(pipes[1][1], src, size, off) :
							 read_some(pipes[1][0], dst, size, off);
			if (me == 0)
				check(dst, size, 2, "splice");
			break;
		case M_SPLICE_BI:
			for (long i = 0; i < it; i++) {
				size_t so = 0, ro = 0;

				while (so < size || ro < size) {
					if (so < size)
						so += splice_some(pipes[me][1], src, size, so);
					if (ro < size)
						ro += read_some(pipes[1 - me][0], dst, size, ro);
				}
			}
			check(dst, size, (unsigned)(2 - me), "splice-bi");
			break;
		case M_RING_BI:
			/* Each core: send its message and receive the peer's,
			 * a fragment of each as room and data allow. */
			for (long i = 0; i < it; i++) {
				size_t so = 0, ro = 0;

				while (so < size || ro < size) {
					if (so < size)
						ring_try_send_one(rings[me], src, size, &so, &head);
					if (ro < size)
						ring_recv_one(rings[1 - me], dst, size, &ro, &tail);
				}
			}
			check(dst, size, (unsigned)(2 - me), "ring-bi");
			break;
		default:
			break;
		}
		ctl->t1[me] = now();
		atomic_fetch_add(&ctl->ready, 1);
	}
}

static void *shared(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("vmshm-copybench: mmap");
		exit(1);
	}
	return p;
}

static long parse_size(const char *s)
{
	char *e;
	long v = strtol(s, &e, 10);

	if (e == s || v <= 0)
		return -1;
	if (*e == 'K' || *e == 'k')
		v <<= 10, e++;
	else if (*e == 'M' || *e == 'm')
		v <<= 20, e++;
	return *e || v > (1L << 30) ? -1 : v;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One measurement: both workers run mode m for iters messages of size. */
static double run(enum mode m, size_t size, long iters)
{
	static long seq;
	double t0, t1;

	ctl->size = size;
	ctl->iters = iters;
	atomic_store(&rings[0]->head, 0);
	atomic_store(&rings[0]->tail, 0);
	atomic_store(&rings[1]->head, 0);
	atomic_store(&rings[1]->tail, 0);
	atomic_store(&ctl->ready, 0);
	atomic_store(&ctl->armed, 0);
	atomic_store(&ctl->cmd, ++seq * M_N + (long)m);
	while (atomic_load(&ctl->ready) < 2) {
		usleep(2000);
		/* A worker that died would leave us waiting for ever. */
		for (int w = 0; w < 2; w++) {
			int st;

			if (waitpid(ctl->pid[w], &st, WNOHANG) == ctl->pid[w]) {
				fprintf(stderr, "vmshm-copybench: %s, %zu bytes: worker %d %s %d\n", mode_name[m],
					size, w, WIFSIGNALED(st) ? "killed by signal" : "exited with status",
					WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
				ctl->pid[1 - w] > 0 ? kill(ctl->pid[1 - w], SIGKILL) : 0;
				exit(1);
			}
		}
	}
	/* In one-way modes the idle side's times are empty: the span from
	 * the first start to the last end covers the transfer either way. */
	t0 = ctl->t0[0] < ctl->t0[1] ? ctl->t0[0] : ctl->t0[1];
	t1 = ctl->t1[0] > ctl->t1[1] ? ctl->t1[0] : ctl->t1[1];
	if (atomic_load(&ctl->fail)) {
		fprintf(stderr, "vmshm-copybench: %s, %zu bytes: %s\n", mode_name[m], size, ctl->err);
		return -1;
	}
	return (double)size * (double)iters * (m == M_CMA_BI || m == M_RING_BI || m == M_SPLICE_BI ? 2 : 1) /
	       (t1 - t0);
}

/* One core: memcpy of size bytes to a destination `d` bytes past the
 * source's page offset, best of reps, each about secs long. */
static int distance_sweep(const long *sizes, int ns, long reps, double secs)
{
	long max = 0;

	for (int i = 0; i < ns; i++)
		max = sizes[i] > max ? sizes[i] : max;
	unsigned char *src = aligned_alloc(4096, (size_t)max + 8192);
	unsigned char *dst = aligned_alloc(4096, (size_t)max + 8192);
	if (!src || !dst)
		return perror("vmshm-copybench"), 1;
	memset(dst, 0, (size_t)max + 8192);
	printf("# vmshm-copybench -d: one core's memcpy, destination page offset minus the "
	       "source's; best of %ld, about %.3f s each\n", reps, secs);
	printf("# %-8s %10s %5s %10s\n", "mode", "bytes", "dist", "GB/s");
	for (int si = 0; si < ns; si++) {
		size_t size = (size_t)sizes[si];
		/* The source sits mid-page so that both directions stay inside
		 * the buffers. */
		unsigned char *s = src + 2048;

		fill(s, size, (unsigned)si + 1);
		for (int d = 0; d < 4096; d += d < 64 ? 1 : 64) {
			unsigned char *t = dst + ((2048 + d) & 4095);
			double best = 0;
			long iters = 1;

			for (long k = 0; k <= reps; k++) {
				double t0 = now();
				for (long i = 0; i < iters; i++) {
					memcpy(t, s, size);
					__asm__ volatile("" ::: "memory");
				}
				double dt = now() - t0;
				if (k == 0) {       /* calibration */
					iters = (long)(secs / (dt > 1e-9 ? dt : 1e-9)) + 1;
					continue;
				}
				double gbs = (double)size * (double)iters / dt / 1e9;
				best = gbs > best ? gbs : best;
			}
			if (memcmp(t, s, size)) {
				fprintf(stderr, "vmshm-copybench: memcpy of %zu bytes at distance %d "
					"delivered other bytes\n", size, d);
				return 1;
			}
			printf("  %-8s %10zu %5d %10.2f\n", "distance", size, d, best);
		}
	}
	free(src);
	free(dst);
	return 0;
}

static void usage(const char *why, const char *what)
{
	if (why)
		fprintf(stderr, "vmshm-copybench: %s '%s'\n", why, what);
	fputs("usage: vmshm-copybench [-r REPS] [-t SECONDS] [-f FRAGMENT] [-R RING] [SIZE...]\n"
	      "       vmshm-copybench -d [-r REPS] [-t SECONDS] [SIZE...]\n"
	      "  one line per size and mode: median GB/s over REPS (default 5) and the range;\n"
	      "  each measurement runs about SECONDS (default 0.1); sizes default 64K 1M 4M;\n"
	      "  the ring has RING bytes (default 1M) in FRAGMENT slots (default 128K);\n"
	      "  -d: one core's memcpy against the distance modulo 4 KiB from source to\n"
	      "  destination, best of REPS, one line per distance\n", stderr);
	exit(2);
}

struct opts {
	long sizes[MAX_SIZES], reps;
	double secs;
	int ns;
	bool sweep;
};

/* Exits with the usage on anything it cannot use. */
static void parse_args(struct opts *o, int argc, char **argv)
{
	long v;
	int opt;

	while ((opt = getopt(argc, argv, "dr:t:f:R:h")) != -1) {
		switch (opt) {
		case 'd':
			o->sweep = true;
			break;
		case 'r':
			o->reps = strtol(optarg, NULL, 10);
			if (o->reps < 1 || o->reps > 1000)
				usage("-r: repetitions must be 1..1000, not", optarg);
			break;
		case 't':
			o->secs = strtod(optarg, NULL);
			if (!(o->secs > 0 && o->secs <= 60))
				usage("-t: seconds must be in (0, 60], not", optarg);
			break;
		case 'f':
		case 'R':
			if ((v = parse_size(optarg)) < LINE || (v & (LINE - 1)))
				usage("a size that is a multiple of 64 bytes is needed, not", optarg);
			*(opt == 'f' ? &frag : &ring_bytes) = (size_t)v;
			break;
		default:
			usage(NULL, NULL);
		}
	}
	if (ring_bytes < frag)
		usage("the ring must hold at least one fragment:", "-R < -f");
	for (int i = optind; i < argc; i++)
		if (o->ns == MAX_SIZES || (o->sizes[o->ns++] = parse_size(argv[i])) < 0)
			usage(o->ns > MAX_SIZES ? "too many sizes, at"
						: "not a message size (1..1G, K/M suffixes):", argv[i]);
	if (!o->ns) {
		o->sizes[o->ns++] = 64 << 10;
		o->sizes[o->ns++] = 1 << 20;
		o->sizes[o->ns++] = 4 << 20;
	}
}

/* The rings, pipes and buffers for messages of up to max bytes, and the
 * two workers; -1 (said) if any is missing. */
static int start_workers(long max)
{
	ctl = shared(sizeof(*ctl));
	rings[0] = shared(sizeof(struct ring) + ring_bytes);
	rings[1] = shared(sizeof(struct ring) + ring_bytes);
	/* The largest pipe an unprivileged process may ask for
	 * (/proc/sys/fs/pipe-max-size, 1 MiB by default), non-blocking so a
	 * worker can poll both directions. */
	for (int w = 0; w < 2; w++) {
		int sz = 1 << 20;

		if (pipe2(pipes[w], O_NONBLOCK) < 0)
			return perror("vmshm-copybench: pipe2"), -1;
		while (fcntl(pipes[w][1], F_SETPIPE_SZ, sz) < 0 && sz > 65536)
			sz >>= 1;
		pipe_bytes = (size_t)fcntl(pipes[w][1], F_GETPIPE_SZ);
	}
	/* Private to each worker after the fork (copy-on-write, touched by
	 * fill), at the same address in both: CMA reads the peer's copy. */
	ctl->buf[0] = aligned_alloc(4096, (size_t)max);
	ctl->buf[1] = aligned_alloc(4096, (size_t)max);
	if (!ctl->buf[0] || !ctl->buf[1])
		return perror("vmshm-copybench"), -1;
	for (int w = 0; w < 2; w++) {
		pid_t p = fork();

		if (p < 0)
			return perror("vmshm-copybench: fork"), -1;
		if (p == 0)
			worker(w, (size_t)max);
		ctl->pid[w] = p;
	}
	return 0;
}

/* Every mode at one size, reps times; 1 if a mode failed (said). */
static int measure(const struct opts *o, size_t size)
{
	double gbs[M_N][1000], r;
	long iters = 1;

	/* Calibrate on memcpy so every mode moves the same bytes. */
	r = run(M_MEMCPY, size, 1);
	if (r > 0)
		iters = (long)(o->secs * r / (double)size) + 1;
	for (long k = 0; k < o->reps; k++)
		for (int m = 0; m < M_N; m++) {
			/* Rotate the order so no mode always runs first. */
			int mm = (int)((m + k) % M_N);
			double b = run((enum mode)mm, size, iters);

			if (b < 0)
				return 1;
			gbs[mm][k] = b / 1e9;
		}
	for (int m = 0; m < M_N; m++) {
		qsort(gbs[m], (size_t)o->reps, sizeof(double), cmp);
		printf("  %-8s %10zu %10.2f %10.2f %10.2f\n", mode_name[m], size, gbs[m][o->reps / 2],
		       gbs[m][0], gbs[m][o->reps - 1]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .reps = 5, .secs = 0.1 };
	long max = 0;
	int rc = 0;

	parse_args(&o, argc, argv);
	if (o.sweep)
		return distance_sweep(o.sizes, o.ns, o.reps, o.secs);
	for (int i = 0; i < o.ns; i++)
		max = o.sizes[i] > max ? o.sizes[i] : max;
	if (start_workers(max) < 0)
		return 1;
	printf("# vmshm-copybench: %ld repetitions, about %.2f s each, ring %zu bytes in %zu-byte fragments, "
	       "pipes of %zu bytes\n", o.reps, o.secs, ring_bytes, frag, pipe_bytes);
	printf("# %-8s %10s %10s %10s %10s\n", "mode", "bytes", "GB/s", "min", "max");
	for (int si = 0; si < o.ns && !rc; si++)
		rc = measure(&o, (size_t)o.sizes[si]);
	atomic_store(&ctl->cmd, -1);
	for (int w = 0; w < 2; w++)
		waitpid(ctl->pid[w], NULL, 0);
	return rc;
}
