/*
 * The benchmark kernels, each as IMB-MPI1 defines it:
 *   PingPong   rank 0 sends, rank 1 receives and sends back; t = half the round trip
 *   PingPing   both ranks MPI_Isend to each other, MPI_Recv, MPI_Wait
 *   Sendrecv   ring: MPI_Sendrecv to the right neighbour, from the left one
 *   Exchange   MPI_Isend to left and right, MPI_Recv from left and right
 *   Allreduce  MPI_FLOAT, MPI_SUM, size/4 elements
 *   Bcast      from rank 0
 *   Barrier    MPI_Barrier
 * The point-to-point kernels and Barrier time the whole loop.  Allreduce and
 * Bcast time each call alone and follow it with an MPI_Barrier outside the
 * time (-sync 1, IMB's default; src_c/IMB_allreduce.c, IMB_bcast.c): a
 * back-to-back loop would let the root run ahead into later calls, and with
 * ranks sharing cores its time depends on how the scheduler interleaves
 * them (4 ranks in 2 guests on this 2-core VM: Bcast 4 KiB took 15 to 38 us
 * from one repetition to the next).
 * In check mode each repetition fills the send buffer with a pattern of
 * (sender, size, repetition) and verifies every byte it receives; that work
 * is inside the timed loop, so check-mode times are not performance numbers.
 */
#include <stdio.h>
#include <string.h>

#include "mpibench.h"

#define TAG 1

struct sample {
	struct mb_ctx *c;
	enum mb_bench b;
	MPI_Comm comm;
	int rank, n;
	long long size;
	int count;          /* size as an MPI count */
	bool check;
	bool injected;
	double timed;       /* collectives: seconds inside the calls themselves */
};

/* IMB's collective step: the call alone is timed, then the ranks line up
 * (-sync 1) so that the next call starts together. */
#define TIMED_COLLECTIVE(s, call)                                   \
	do {                                                        \
		double t_ = MPI_Wtime();                            \
		call;                                               \
		(s)->timed += MPI_Wtime() - t_;                     \
		if ((s)->c->o->sync)                                \
			MPI_Barrier((s)->comm);                     \
	} while (0)

/* Test-only: simulate a byte corrupted in transit, once per sample. */
static void inject(struct sample *s, void *buf, long long rep)
{
	const struct mb_ctx *c = s->c;

	if (c->corrupt_rank != c->wrank || rep != 0 || s->size == 0 || s->injected)
		return;
	if (c->corrupt_bench >= 0 && c->corrupt_bench != (int)s->b)
		return;
	((unsigned char *)buf)[s->size / 2] ^= 0xff;
	s->injected = true;
}

static void report(struct sample *s, long long bad, long long rep, const char *from,
		   long long first, unsigned want, unsigned got)
{
	struct mb_ctx *c = s->c;

	c->defects += bad;
	if (c->reports >= 5) {
		return;
	}
	c->reports++;
	fprintf(stderr,
		"vhpc-mpibench: check failed: rank %d, %s with %d processes, %lld bytes, repetition %lld: "
		"%lld wrong byte(s) in the data from %s, first at offset %lld: expected 0x%02x, got 0x%02x%s\n",
		c->wrank, mb_bench_names[s->b], s->n, s->size, rep, bad, from, first, want, got,
		c->reports == 5 ? " (further errors of this rank not shown)" : "");
}

static void check_len(struct sample *s, const MPI_Status *st, int src, long long rep)
{
	int got = -1;

	MPI_Get_count(st, MPI_BYTE, &got);
	if (got != s->count) {
		char from[32];

		snprintf(from, sizeof(from), "rank %d", src);
		/* A short message: every missing byte counts as wrong. */
		report(s, s->size - (got < 0 ? 0 : got), rep, from, got < 0 ? 0 : got, 0, 0);
	}
}

static void check_bytes(struct sample *s, void *buf, int src, long long rep)
{
	long long first = 0, bad;
	unsigned want = 0, got = 0;

	inject(s, buf, rep);
	bad = mb_verify(buf, s->size, src, s->size, rep, &first, &want, &got);
	if (bad) {
		char from[32];

		snprintf(from, sizeof(from), "rank %d", src);
		report(s, bad, rep, from, first, want, got);
	}
}

static void k_pingpong(struct sample *s, long long first, long long n)
{
	char *sb = s->c->sbuf, *rb = s->c->rbuf;
	MPI_Status st;

	if (s->rank == 0) {
		for (long long i = first; i < first + n; i++) {
			if (s->check)
				mb_fill(sb, s->size, 0, s->size, i);
			MPI_Send(sb, s->count, MPI_BYTE, 1, TAG, s->comm);
			MPI_Recv(rb, s->count, MPI_BYTE, 1, TAG, s->comm, &st);
			if (s->check) {
				check_len(s, &st, 1, i);
				check_bytes(s, rb, 1, i);
			}
		}
	} else if (s->rank == 1) {
		for (long long i = first; i < first + n; i++) {
			MPI_Recv(rb, s->count, MPI_BYTE, 0, TAG, s->comm, &st);
			if (s->check) {
				check_len(s, &st, 0, i);
				check_bytes(s, rb, 0, i);
				mb_fill(sb, s->size, 1, s->size, i);
			}
			MPI_Send(sb, s->count, MPI_BYTE, 0, TAG, s->comm);
		}
	}
}

static void k_pingping(struct sample *s, long long first, long long n)
{
	char *sb = s->c->sbuf, *rb = s->c->rbuf;
	int peer = 1 - s->rank;
	MPI_Request req;
	MPI_Status st;

	for (long long i = first; i < first + n; i++) {
		if (s->check)
			mb_fill(sb, s->size, s->rank, s->size, i);
		MPI_Isend(sb, s->count, MPI_BYTE, peer, TAG, s->comm, &req);
		MPI_Recv(rb, s->count, MPI_BYTE, peer, TAG, s->comm, &st);
		MPI_Wait(&req, MPI_STATUS_IGNORE);
		if (s->check) {
			check_len(s, &st, peer, i);
			check_bytes(s, rb, peer, i);
		}
	}
}

static void k_sendrecv(struct sample *s, long long first, long long n)
{
	char *sb = s->c->sbuf, *rb = s->c->rbuf;
	int right = (s->rank + 1) % s->n, left = (s->rank + s->n - 1) % s->n;
	MPI_Status st;

	for (long long i = first; i < first + n; i++) {
		if (s->check)
			mb_fill(sb, s->size, s->rank, s->size, i);
		MPI_Sendrecv(sb, s->count, MPI_BYTE, right, TAG, rb, s->count, MPI_BYTE, left, TAG,
			     s->comm, &st);
		if (s->check) {
			check_len(s, &st, left, i);
			check_bytes(s, rb, left, i);
		}
	}
}

static void k_exchange(struct sample *s, long long first, long long n)
{
	char *sb = s->c->sbuf, *rb = s->c->rbuf;
	int right = (s->rank + 1) % s->n, left = (s->rank + s->n - 1) % s->n;
	MPI_Request req[2];
	MPI_Status st[2];

	for (long long i = first; i < first + n; i++) {
		if (s->check)
			mb_fill(sb, s->size, s->rank, s->size, i);
		MPI_Isend(sb, s->count, MPI_BYTE, left, TAG, s->comm, &req[0]);
		MPI_Isend(sb, s->count, MPI_BYTE, right, TAG, s->comm, &req[1]);
		MPI_Recv(rb, s->count, MPI_BYTE, left, TAG, s->comm, &st[0]);
		MPI_Recv(rb + s->size, s->count, MPI_BYTE, right, TAG, s->comm, &st[1]);
		MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
		if (s->check) {
			check_len(s, &st[0], left, i);
			check_len(s, &st[1], right, i);
			check_bytes(s, rb, left, i);
			check_bytes(s, rb + s->size, right, i);
		}
	}
}

static void k_allreduce(struct sample *s, long long first, long long n)
{
	struct mb_ctx *c = s->c;
	float *sb = (float *)(void *)c->sbuf, *rb = (float *)(void *)c->rbuf;
	int count = s->count / (int)sizeof(float);

	if (s->check && c->red_n != s->n) {
		mb_red_sums(s->n, c->red_sums);
		c->red_n = s->n;
	}
	for (long long i = first; i < first + n; i++) {
		if (s->check)
			mb_red_fill(sb, count, s->rank, s->size, i);
		TIMED_COLLECTIVE(s, MPI_Allreduce(sb, rb, count, MPI_FLOAT, MPI_SUM, s->comm));
		if (s->check) {
			long long off = 0, bad;
			unsigned want = 0, got = 0;

			inject(s, rb, i);
			bad = mb_red_verify(rb, count, c->red_sums, s->size, i, &off, &want, &got);
			if (bad)
				report(s, bad, i, "the reduction", off, want, got);
		}
	}
}

static void k_bcast(struct sample *s, long long first, long long n)
{
	char *sb = s->c->sbuf, *rb = s->c->rbuf;

	for (long long i = first; i < first + n; i++) {
		if (s->rank == 0) {
			if (s->check)
				mb_fill(sb, s->size, 0, s->size, i);
			TIMED_COLLECTIVE(s, MPI_Bcast(sb, s->count, MPI_BYTE, 0, s->comm));
		} else {
			TIMED_COLLECTIVE(s, MPI_Bcast(rb, s->count, MPI_BYTE, 0, s->comm));
			if (s->check)
				check_bytes(s, rb, 0, i);
		}
	}
}

static void k_barrier(struct sample *s, long long first, long long n)
{
	(void)first;
	for (long long i = 0; i < n; i++)
		MPI_Barrier(s->comm);
}

typedef void (*kernel_fn)(struct sample *s, long long first, long long n);
static const kernel_fn kernels[MB_NBENCH] = {
	[MB_PINGPONG] = k_pingpong, [MB_PINGPING] = k_pingping, [MB_SENDRECV] = k_sendrecv,
	[MB_EXCHANGE] = k_exchange, [MB_ALLREDUCE] = k_allreduce, [MB_BCAST] = k_bcast,
	[MB_BARRIER] = k_barrier,
};

double mb_measure(struct mb_ctx *c, enum mb_bench b, MPI_Comm comm, long long size,
		  long long reps)
{
	struct sample s = { .c = c, .b = b, .comm = comm, .size = size, .count = (int)size,
			    .check = c->o->check };
	double t0, t;

	MPI_Comm_rank(comm, &s.rank);
	MPI_Comm_size(comm, &s.n);
	/* Warm-up repetitions are numbered after the timed ones so that their
	 * patterns differ from every timed repetition's. */
	kernels[b](&s, reps, mb_warmup_reps(reps));
	for (int i = 0; i < 2; i++)
		MPI_Barrier(comm);
	s.timed = 0;
	t0 = MPI_Wtime();
	kernels[b](&s, 0, reps);
	t = MPI_Wtime() - t0;
	if (b == MB_ALLREDUCE || b == MB_BCAST)
		t = s.timed;
	t = t / (double)reps * 1e6;
	return b == MB_PINGPONG ? t / 2 : t;
}
