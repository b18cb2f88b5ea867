/*
 * vmshm-pingpong: IMB-style PingPong and Sendrecv from rank 0 to each other
 * rank in turn, in one job, so that transports are compared side by side:
 * run-bench.sh places rank 1 in rank 0's guest (vader), rank 2 in another
 * guest on the same host (vmshm) and rank 3 in a guest on "another host"
 * (tcp).  Rank 0 runs on CPU 0 and every peer on CPU 1, so each transport
 * is measured on the same pair of cores; peers that are not being measured
 * wait in a sleeping loop so they leave CPU 1 to the one that is.
 *
 *   vmshm-pingpong ROUNDS LABEL1 LABEL2 ... -- SIZE...
 *
 * For each size and round, every peer is measured once, in an order that
 * rotates with the round.  Rank 0 prints one line per measurement:
 *   RESULT <label> <round> <PingPong|Sendrecv> <bytes> <reps> <usec> <MB/s>
 * PingPong: usec = half the round trip, MB/s = bytes / usec.
 * Sendrecv: usec = one exchange (the slower side), MB/s = 2 * bytes / usec,
 * as IMB counts it.  MB = 10^6 bytes.
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG_GO 7001
#define TAG_PP 7002
#define TAG_SR 7003
#define TAG_T  7004

static int reps_for(long n)
{
	if (n <= 4096)
		return 10000;
	if (n <= 65536)
		return 1000;
	if (n <= 1 << 20)
		return 100;
	return 30;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &s);
	if (sched_setaffinity(0, sizeof(s), &s) != 0)
		perror("sched_setaffinity");
}

/* One measurement between rank 0 and `peer`; both sides call it. */
static void measure(int me, int peer, long size, int reps, char *sb, char *rb,
		    double *pp_us, double *sr_us)
{
	int n = (int)size;
	for (int r = 0; r < 10 + reps; r++) {
		double t0 = 0;
		if (r == 10)
			t0 = MPI_Wtime(), *pp_us = -t0;
		if (me == 0) {
			MPI_Send(sb, n, MPI_BYTE, peer, TAG_PP, MPI_COMM_WORLD);
			MPI_Recv(rb, n, MPI_BYTE, peer, TAG_PP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(rb, n, MPI_BYTE, peer, TAG_PP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(sb, n, MPI_BYTE, peer, TAG_PP, MPI_COMM_WORLD);
		}
	}
	*pp_us = (*pp_us + MPI_Wtime()) * 1e6 / reps / 2;
	for (int r = 0; r < 10 + reps; r++) {
		if (r == 10)
			*sr_us = -MPI_Wtime();
		MPI_Sendrecv(sb, n, MPI_BYTE, peer, TAG_SR, rb, n, MPI_BYTE, peer, TAG_SR,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	*sr_us = (*sr_us + MPI_Wtime()) * 1e6 / reps;
}

struct args {
	int rounds, nlabels, nsizes;
	char **labels;
	long sizes[32];
};

/* ROUNDS LABEL... -- SIZE...: one label per rank after 0; aborts the job
 * on anything else. */
static void parse_args(struct args *a, int argc, char **argv, int rank, int np)
{
	if (argc < 4) {
		if (rank == 0)
			fprintf(stderr, "usage: vmshm-pingpong ROUNDS LABEL... -- SIZE...\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	a->rounds = atoi(argv[1]);
	a->labels = argv + 2;
	while (2 + a->nlabels < argc && strcmp(argv[2 + a->nlabels], "--"))
		a->nlabels++;
	for (int i = 3 + a->nlabels; i < argc && a->nsizes < 32; i++)
		a->sizes[a->nsizes++] = atol(argv[i]);
	if (a->nlabels != np - 1 || !a->nsizes) {
		if (rank == 0)
			fprintf(stderr, "vmshm-pingpong: %d ranks need %d labels and some sizes\n",
				np, np - 1);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

/* Rank 0: every size with every peer in turn, then tells them to stop. */
static void lead(const struct args *a, int np, char *sb, char *rb)
{
	for (int s = 0; s < a->nsizes; s++) {
		long size = a->sizes[s];
		int reps = reps_for(size);
		for (int r = 0; r < a->rounds; r++) {
			for (int k = 0; k < np - 1; k++) {
				int peer = 1 + (k + r) % (np - 1);
				long go[2] = { size, reps };
				double pp, sr, sr_peer;
				MPI_Send(go, 2, MPI_LONG, peer, TAG_GO, MPI_COMM_WORLD);
				measure(0, peer, size, reps, sb, rb, &pp, &sr);
				MPI_Recv(&sr_peer, 1, MPI_DOUBLE, peer, TAG_T, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				if (sr_peer > sr)
					sr = sr_peer;
				printf("RESULT %s %d PingPong %ld %d %.3f %.1f\n", a->labels[peer - 1], r,
				       size, reps, pp, size / pp);
				printf("RESULT %s %d Sendrecv %ld %d %.3f %.1f\n", a->labels[peer - 1], r,
				       size, reps, sr, 2.0 * size / sr);
				fflush(stdout);
			}
		}
	}
	long stop[2] = { -1, 0 };
	for (int p = 1; p < np; p++)
		MPI_Send(stop, 2, MPI_LONG, p, TAG_GO, MPI_COMM_WORLD);
}

/* The other ranks: measure against rank 0 whenever it says go. */
static void follow(int rank, char *sb, char *rb)
{
	for (;;) {
		long go[2];
		MPI_Request rq;
		int done = 0;
		double pp, sr;
		/* Sleep between polls: the peer being measured needs CPU 1. */
		MPI_Irecv(go, 2, MPI_LONG, 0, TAG_GO, MPI_COMM_WORLD, &rq);
		while (!done) {
			MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
			if (!done)
				usleep(1000);
		}
		if (go[0] < 0)
			break;
		measure(rank, 0, go[0], (int)go[1], sb, rb, &pp, &sr);
		MPI_Send(&sr, 1, MPI_DOUBLE, 0, TAG_T, MPI_COMM_WORLD);
	}
}

int main(int argc, char **argv)
{
	struct args a = { 0 };
	int rank, np;
	long max = 1;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	parse_args(&a, argc, argv, rank, np);
	for (int i = 0; i < a.nsizes; i++)
		if (a.sizes[i] > max)
			max = a.sizes[i];
	pin(rank == 0 ? 0 : 1);
	char *sb = malloc((size_t)max), *rb = malloc((size_t)max);
	memset(sb, 1, (size_t)max);
	memset(rb, 0, (size_t)max);

	if (rank == 0)
		lead(&a, np, sb, rb);
	else
		follow(rank, sb, rb);
	free(sb);
	free(rb);
	MPI_Finalize();
	return 0;
}
