/*
 * MPI workloads for the vmshm BTL tests (tests/mpi-plugins/vmshm.t).  Every
 * byte received is checked against the pattern its sender wrote; any
 * mismatch aborts the job with a message naming the message and offset.
 *
 *   vmshm-test sizes       0..4 MiB, contiguous and strided, echoed back
 *   vmshm-test many2one    every rank floods rank 0; per-source order checked
 *   vmshm-test wrap N      N unacknowledged messages of odd sizes 0 -> 1
 *   vmshm-test order       eager and rendezvous messages interleaved, same tag
 *   vmshm-test alltoall    every pair exchanges 1 B .. 1 MiB
 *   vmshm-test lazy        rank 1 hears from rank 0 before it ever sends
 *   vmshm-test threads     MPI_THREAD_MULTIPLE: 4 threads per rank exchange at once
 *   vmshm-test onesided    MPI_Put/MPI_Get/MPI_Accumulate between all ranks
 *   vmshm-test killmid     rank 0 dies (SIGKILL) in the middle of a 256 MiB send
 *   vmshm-test corrupt WHAT  rank 0 has $VMSHM_SCRIBBLE damage the region
 *                          while messages sit in it (WHAT: reclen|rectype|tail)
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "vmshm-test rank %d: FAILED: ", rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	MPI_Abort(MPI_COMM_WORLD, 3);
	exit(3);
}

static unsigned char pat(int src, uint64_t seq, size_t i)
{
	return (unsigned char)((i * 131u) ^ (seq * 17u) ^ ((unsigned)src * 73u) ^ (i >> 8));
}

static void fill(unsigned char *b, size_t n, int src, uint64_t seq)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(src, seq, i);
}

static void check(const unsigned char *b, size_t n, int src, uint64_t seq, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(src, seq, i))
			die("%s: message %llu from rank %d (%zu bytes): byte %zu is 0x%02x, "
			    "expected 0x%02x", what, (unsigned long long)seq, src, n, i, b[i],
			    pat(src, seq, i));
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

/* 0..4 MiB: every power of two and its neighbours, both ways. */
static void t_sizes(void)
{
	const size_t max = 4u << 20;
	unsigned char *buf = xmalloc(max + 1), *back = xmalloc(max + 1);
	uint64_t seq = 0, bytes = 0;
	int peer = rank ^ 1;

	if (nranks != 2)
		die("sizes needs 2 ranks");
	for (size_t p = 1; p <= max; p <<= 1) {
		size_t cand[3] = { p - 1, p, p + 1 };
		for (int k = 0; k < 3; k++) {
			size_t n = cand[k];
			if (n > max)
				continue;
			seq++;
			if (rank == 0) {
				fill(buf, n, 0, seq);
				MPI_Send(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
				MPI_Recv(back, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check(back, n, 1, seq, "sizes echo");
			} else {
				MPI_Status st;
				int cnt;
				MPI_Recv(buf, (int)max + 1, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_BYTE, &cnt);
				if ((size_t)cnt != n)
					die("sizes: got %d bytes, expected %zu", cnt, n);
				check(buf, n, 0, seq, "sizes");
				fill(back, n, 1, seq);
				MPI_Send(back, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
			}
			bytes += 2 * n;
		}
	}
	/* Strided data goes through the BTL's packing path, not in place. */
	MPI_Datatype vec;
	MPI_Type_vector(1 << 16, 3, 4, MPI_BYTE, &vec);
	MPI_Type_commit(&vec);
	seq++;
	if (rank == 0) {
		fill(buf, 4u << 16, 0, seq);
		MPI_Send(buf, 1, vec, peer, 3, MPI_COMM_WORLD);
	} else {
		memset(buf, 0, 4u << 16);
		MPI_Recv(buf, 1, vec, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		for (size_t i = 0; i < (4u << 16); i++)
			if ((i % 4) < 3 && buf[i] != pat(0, seq, i))
				die("strided: byte %zu is 0x%02x, expected 0x%02x", i, buf[i],
				    pat(0, seq, i));
	}
	MPI_Type_free(&vec);
	if (rank == 0)
		printf("OK sizes: %llu messages, %llu bytes verified\n",
		       (unsigned long long)seq, (unsigned long long)bytes);
	free(buf);
	free(back);
}

/* Sizes that straddle vmshm's eager limit and fragment size. */
static size_t m2o_size(uint64_t i)
{
	static const size_t s[] = { 0, 1, 17, 100, 4000, 8192, 9000, 33000, 70000, 300000 };
	return s[i % (sizeof(s) / sizeof(s[0]))];
}

static void t_many2one(void)
{
	const int per = 200;
	unsigned char *buf = xmalloc(300000 + 8);

	if (rank == 0) {
		uint64_t *next = calloc((size_t)nranks, sizeof(*next));
		for (int k = 0; k < per * (nranks - 1); k++) {
			MPI_Status st;
			int cnt;
			MPI_Recv(buf, 300000 + 8, MPI_BYTE, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			int src = st.MPI_SOURCE;
			uint64_t seq = next[src]++;
			if ((size_t)cnt != m2o_size(seq) + 8)
				die("many2one: message %llu from %d has %d bytes, expected %zu "
				    "(out of order?)", (unsigned long long)seq, src, cnt,
				    m2o_size(seq) + 8);
			uint64_t got;
			memcpy(&got, buf, 8);
			if (got != seq)
				die("many2one: from %d expected message %llu, got %llu", src,
				    (unsigned long long)seq, (unsigned long long)got);
			check(buf + 8, m2o_size(seq), src, seq, "many2one");
		}
		printf("OK many2one: %d messages from %d ranks in order\n", per * (nranks - 1),
		       nranks - 1);
		free(next);
	} else {
		MPI_Request *rq = xmalloc(sizeof(*rq) * (size_t)per);
		unsigned char **bufs = xmalloc(sizeof(*bufs) * (size_t)per);
		for (int k = 0; k < per; k++) {
			size_t n = m2o_size((uint64_t)k);
			uint64_t seq = (uint64_t)k;
			bufs[k] = xmalloc(n + 8);
			memcpy(bufs[k], &seq, 8);
			fill(bufs[k] + 8, n, rank, seq);
			MPI_Isend(bufs[k], (int)(n + 8), MPI_BYTE, 0, 5, MPI_COMM_WORLD, &rq[k]);
		}
		MPI_Waitall(per, rq, MPI_STATUSES_IGNORE);
		for (int k = 0; k < per; k++)
			free(bufs[k]);
		free(bufs);
		free(rq);
	}
	free(buf);
}

/* Many more records than a ring holds, sent faster than they are read. */
static void t_wrap(int n)
{
	const int window = 64;
	unsigned char *buf = xmalloc(8192);
	uint64_t bytes = 0;

	if (rank == 0) {
		unsigned char *w = xmalloc((size_t)window * 8192);
		MPI_Request rq[64];
		for (int k = 0; k < n; k += window) {
			int m = n - k < window ? n - k : window;
			for (int j = 0; j < m; j++) {
				uint64_t seq = (uint64_t)(k + j);
				size_t len = 8 + (seq * 997) % 5000;
				unsigned char *b = w + (size_t)j * 8192;
				memcpy(b, &seq, 8);
				fill(b + 8, len - 8, 0, seq);
				MPI_Isend(b, (int)len, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &rq[j]);
				bytes += len;
			}
			MPI_Waitall(m, rq, MPI_STATUSES_IGNORE);
		}
		free(w);
		MPI_Recv(&bytes, 1, MPI_UINT64_T, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		printf("OK wrap: %d messages, %llu bytes in order\n", n, (unsigned long long)bytes);
	} else if (rank == 1) {
		for (int k = 0; k < n; k++) {
			MPI_Status st;
			int cnt;
			uint64_t seq;
			/* Fall behind now and then so the ring fills up. */
			if (k % 2000 == 1000)
				usleep(20000);
			MPI_Recv(buf, 8192, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			memcpy(&seq, buf, 8);
			if (seq != (uint64_t)k || (size_t)cnt != 8 + (seq * 997) % 5000)
				die("wrap: message %d arrived as %llu with %d bytes", k,
				    (unsigned long long)seq, cnt);
			check(buf + 8, (size_t)cnt - 8, 0, seq, "wrap");
			bytes += (uint64_t)cnt;
		}
		MPI_Send(&bytes, 1, MPI_UINT64_T, 0, 8, MPI_COMM_WORLD);
	}
	free(buf);
}

/* Eager, rendezvous and fragmented messages, all on one tag: the receiver
 * must see them in the order they were sent. */
static void t_order(void)
{
	static const size_t sz[] = { 1, 200000, 5, 40000, 0, 9000, 1 << 20, 3, 70000, 100 };
	const int n = 200;
	const size_t nsz = sizeof(sz) / sizeof(sz[0]);

	if (rank == 0) {
		MPI_Request *rq = xmalloc(sizeof(*rq) * (size_t)n);
		unsigned char **b = xmalloc(sizeof(*b) * (size_t)n);
		for (int k = 0; k < n; k++) {
			size_t len = sz[(size_t)k % nsz] + 8;
			uint64_t seq = (uint64_t)k;
			b[k] = xmalloc(len);
			memcpy(b[k], &seq, 8);
			fill(b[k] + 8, len - 8, 0, seq);
			MPI_Isend(b[k], (int)len, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &rq[k]);
		}
		MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
		for (int k = 0; k < n; k++)
			free(b[k]);
		free(b);
		free(rq);
		MPI_Barrier(MPI_COMM_WORLD);
		printf("OK order: %d mixed-size messages in order\n", n);
	} else if (rank == 1) {
		unsigned char *buf = xmalloc((1 << 20) + 8);
		for (int k = 0; k < n; k++) {
			MPI_Status st;
			int cnt;
			uint64_t seq;
			MPI_Recv(buf, (1 << 20) + 8, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			memcpy(&seq, buf, 8);
			if (seq != (uint64_t)k || (size_t)cnt != sz[(size_t)k % nsz] + 8)
				die("order: receive %d got message %llu (%d bytes)", k,
				    (unsigned long long)seq, cnt);
			check(buf + 8, (size_t)cnt - 8, 0, seq, "order");
		}
		free(buf);
		MPI_Barrier(MPI_COMM_WORLD);
	} else {
		MPI_Barrier(MPI_COMM_WORLD);
	}
}

static void t_alltoall(void)
{
	static const size_t sz[] = { 1, 1000, 5000, 65536, 1 << 20 };
	unsigned char *out = xmalloc((1 << 20)), *in = xmalloc(1 << 20);
	int pairs = 0;

	for (int step = 1; step < nranks; step++) {
		int to = (rank + step) % nranks, from = (rank - step + nranks) % nranks;
		for (size_t k = 0; k < sizeof(sz) / sizeof(sz[0]); k++) {
			uint64_t seq = (uint64_t)(step * 10 + (int)k);
			fill(out, sz[k], rank, seq);
			MPI_Sendrecv(out, (int)sz[k], MPI_BYTE, to, 11, in, (int)sz[k], MPI_BYTE,
				     from, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(in, sz[k], from, seq, "alltoall");
		}
		pairs++;
	}
	MPI_Allreduce(MPI_IN_PLACE, &pairs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("OK alltoall: %d ranks, %d directed pairs verified\n", nranks, pairs);
	free(out);
	free(in);
}

/* Rank 1 receives first: its side learns of rank 0 from the ring, and only
 * its reply makes Open MPI add rank 0 to it. */
static void t_lazy(void)
{
	unsigned char b[64];
	if (rank == 0) {
		fill(b, sizeof(b), 0, 1);
		MPI_Send(b, sizeof(b), MPI_BYTE, 1, 12, MPI_COMM_WORLD);
		MPI_Recv(b, sizeof(b), MPI_BYTE, 1, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		check(b, sizeof(b), 1, 2, "lazy reply");
		printf("OK lazy: first contact by receive, reply verified\n");
	} else if (rank == 1) {
		MPI_Recv(b, sizeof(b), MPI_BYTE, 0, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		check(b, sizeof(b), 0, 1, "lazy");
		fill(b, sizeof(b), 1, 2);
		MPI_Send(b, sizeof(b), MPI_BYTE, 0, 13, MPI_COMM_WORLD);
	}
}

struct thr {
	int id;
	uint64_t bytes;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	static const size_t sz[] = { 1, 3000, 20000, 200000 };
	unsigned char *out = xmalloc(200000), *in = xmalloc(200000);
	int peer = rank ^ 1, tag = 100 + t->id;

	for (int k = 0; k < 400; k++) {
		size_t n = sz[(size_t)(k + t->id) % 4];
		uint64_t seq = (uint64_t)t->id << 32 | (uint64_t)k;
		fill(out, n, rank, seq);
		MPI_Sendrecv(out, (int)n, MPI_BYTE, peer, tag, in, (int)n, MPI_BYTE, peer, tag,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		check(in, n, peer, seq, "threads");
		t->bytes += n;
	}
	free(out);
	free(in);
	return NULL;
}

static void t_threads(void)
{
	pthread_t th[4];
	struct thr t[4];

	if (nranks != 2)
		die("threads needs 2 ranks");
	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){ .id = i };
		if (pthread_create(&th[i], NULL, thr_main, &t[i]))
			die("pthread_create");
	}
	uint64_t total = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		total += t[i].bytes;
	}
	if (rank == 0)
		printf("OK threads: 4 threads x 400 exchanges, %llu bytes each way verified\n",
		       (unsigned long long)total);
}

/* One-sided communication rides on the PML (osc pt2pt) across guests. */
static void t_onesided(void)
{
	const int n = 4096;
	int *win_buf = xmalloc(sizeof(int) * (size_t)n * (size_t)nranks);
	int *mine = xmalloc(sizeof(int) * (size_t)n), *got = xmalloc(sizeof(int) * (size_t)n);
	MPI_Win w;

	for (int i = 0; i < n * nranks; i++)
		win_buf[i] = -1;
	MPI_Win_create(win_buf, (MPI_Aint)(sizeof(int) * (size_t)n * (size_t)nranks),
		       sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w);
	for (int i = 0; i < n; i++)
		mine[i] = rank * 1000000 + i;
	MPI_Win_fence(0, w);
	for (int t = 0; t < nranks; t++)
		MPI_Put(mine, n, MPI_INT, t, (MPI_Aint)rank * n, n, MPI_INT, w);
	MPI_Win_fence(0, w);
	for (int t = 0; t < nranks; t++)
		MPI_Accumulate(mine, n, MPI_INT, t, (MPI_Aint)rank * n, n, MPI_INT, MPI_SUM, w);
	MPI_Win_fence(0, w);
	for (int s = 0; s < nranks; s++)
		for (int i = 0; i < n; i++)
			if (win_buf[s * n + i] != 2 * (s * 1000000 + i))
				die("onesided: element %d from rank %d is %d, expected %d", i, s,
				    win_buf[s * n + i], 2 * (s * 1000000 + i));
	int peer = (rank + 1) % nranks;
	MPI_Get(got, n, MPI_INT, peer, (MPI_Aint)peer * n, n, MPI_INT, w);
	MPI_Win_fence(0, w);
	for (int i = 0; i < n; i++)
		if (got[i] != 2 * (peer * 1000000 + i))
			die("onesided: get from rank %d: element %d is %d", peer, i, got[i]);
	MPI_Win_free(&w);
	if (rank == 0)
		printf("OK onesided: put, accumulate and get between %d ranks verified\n", nranks);
	free(win_buf);
	free(mine);
	free(got);
}

static void t_killmid(void)
{
	const size_t n = 256u << 20;
	unsigned char *b = xmalloc(n);
	memset(b, 0x5a, n);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Request rq;
		int done = 0;
		MPI_Isend(b, (int)n, MPI_BYTE, 1, 14, MPI_COMM_WORLD, &rq);
		/* Let the transfer start (a few milliseconds: a fraction of 256 MiB),
		 * then die with the rest unsent. */
		double t0 = MPI_Wtime();
		while (!done && MPI_Wtime() - t0 < 0.003)
			MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
		fprintf(stderr, "vmshm-test: rank 0 killing itself mid-message (done=%d)\n", done);
		if (done)
			die("killmid: 256 MiB went out before the kill; nothing was tested");
		raise(SIGKILL);
	} else if (rank == 1) {
		MPI_Recv(b, (int)n, MPI_BYTE, 0, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		die("killmid: the whole message arrived although its sender died");
	}
	free(b);
}

static void scribble(const char *what, int producer, int consumer)
{
	const char *tool = getenv("VMSHM_SCRIBBLE"), *region = getenv("VMSHM_REGION");
	char cmd[1024];
	if (!tool || !region)
		die("corrupt: set VMSHM_SCRIBBLE and VMSHM_REGION");
	snprintf(cmd, sizeof(cmd), "%s %s %s %d %d", tool, region, what, producer, consumer);
	if (system(cmd) != 0)
		die("corrupt: '%s' failed", cmd);
	fprintf(stderr, "vmshm-test: scribbled %s on ring %d -> %d\n", what, producer, consumer);
}

static void t_corrupt(const char *what)
{
	unsigned char b[8192];
	int tail = !strcmp(what, "tail");

	memset(b, 1, sizeof(b));
	/* Warm up both directions so both rings exist. */
	for (int i = 0; i < 3; i++) {
		if (rank == 0) {
			MPI_Send(b, 100, MPI_BYTE, 1, 15, MPI_COMM_WORLD);
			MPI_Recv(b, 100, MPI_BYTE, 1, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			MPI_Recv(b, 100, MPI_BYTE, 0, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(b, 100, MPI_BYTE, 0, 15, MPI_COMM_WORLD);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (!tail) {
		/* A record waits in ring 0 -> 1 while rank 1 is away; rank 0 damages
		 * it; rank 1 comes back and must refuse it. */
		if (rank == 0) {
			/* Rank 1 may still be polling inside the barrier: wait until
			 * it sleeps, or it takes the record before the damage. */
			sleep(1);
			MPI_Send(b, 64, MPI_BYTE, 1, 16, MPI_COMM_WORLD);
			scribble(what, 0, 1);
		} else if (rank == 1) {
			sleep(3);
			MPI_Recv(b, 64, MPI_BYTE, 0, 16, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			die("corrupt %s: the damaged record was delivered", what);
		}
	} else {
		/* Rank 0 claims an impossible tail for ring 1 -> 0 and stays away;
		 * rank 1 fills the ring and must notice when it re-reads the tail. */
		if (rank == 0) {
			/* After our last receive: our own next publish would repair it. */
			MPI_Barrier(MPI_COMM_WORLD);
			scribble(what, 1, 0);
			sleep(5);
		} else if (rank == 1) {
			/* More than the largest ring holds. */
			MPI_Request rq[400];
			MPI_Barrier(MPI_COMM_WORLD);
			sleep(1);
			for (int i = 0; i < 400; i++)
				MPI_Isend(b, 8000, MPI_BYTE, 0, 19, MPI_COMM_WORLD, &rq[i]);
			MPI_Waitall(400, rq, MPI_STATUSES_IGNORE);
			die("corrupt %s: the impossible tail went unnoticed", what);
		}
	}
	/* The side that is not meant to notice waits to be ended by the abort. */
	MPI_Recv(b, 1, MPI_BYTE, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	die("corrupt %s: unexpected message", what);
}

int main(int argc, char **argv)
{
	int provided;
	int threads = argc > 1 && !strcmp(argv[1], "threads");
	MPI_Init_thread(&argc, &argv, threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE,
			&provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (threads && provided != MPI_THREAD_MULTIPLE)
		die("MPI_THREAD_MULTIPLE not provided (%d)", provided);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc < 2)
		die("usage: vmshm-test sizes|many2one|wrap N|order|alltoall|lazy|threads|onesided|killmid|corrupt WHAT");
	const char *m = argv[1];
	if (!strcmp(m, "sizes"))
		t_sizes();
	else if (!strcmp(m, "many2one"))
		t_many2one();
	else if (!strcmp(m, "wrap"))
		t_wrap(argc > 2 ? atoi(argv[2]) : 20000);
	else if (!strcmp(m, "order"))
		t_order();
	else if (!strcmp(m, "alltoall"))
		t_alltoall();
	else if (!strcmp(m, "lazy"))
		t_lazy();
	else if (!strcmp(m, "threads"))
		t_threads();
	else if (!strcmp(m, "onesided"))
		t_onesided();
	else if (!strcmp(m, "killmid"))
		t_killmid();
	else if (!strcmp(m, "corrupt") && argc > 2)
		t_corrupt(argv[2]);
	else
		die("unknown mode %s", m);
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
