/*
 * vmshm-bcastloop: IMB-MPI1's Bcast loop (MPI_Bcast from rank 0, timed
 * alone, then one MPI_Barrier, as IMB does with its default -sync 1),
 * timed three ways on every rank: the Bcast, the barrier after it, and
 * the whole iteration.  IMB reports only the first, the slowest rank's;
 * with two ranks the non-root's Bcast starts when its barrier ends, so
 * time a transport saves in the barrier shows up as a longer Bcast
 * (btl_vmshm README, "IMB's Bcast, timed whole").
 *
 *   vmshm-bcastloop [ITERATIONS [BYTES [PASSES]]]    (200000 4 2)
 *
 * Each pass runs ITERATIONS iterations after a barrier; the last pass is
 * printed, one line per rank, times in microseconds per iteration:
 *   RESULT rank <r> bytes <n> iterations <n> bcast <us> barrier <us> iteration <us>
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_BYTES (1 << 20)

static int rank;   /* only rank 0 complains: every rank parses the same arguments */

static int arg(const char *s, const char *what, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		if (rank == 0)
				fprintf(stderr, "vmshm-bcastloop: %s: expected a whole number from %ld to %ld, got '%s'\n",
				what, lo, hi, s);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	int iters = 200000, bytes = 4, passes = 2;
	double bcast = 0, barrier = 0, whole = 0;
	char *buf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (argc > 4 || (argc > 1 && arg(argv[1], "ITERATIONS", 1, INT_MAX, &iters) < 0) ||
	    (argc > 2 && arg(argv[2], "BYTES", 0, MAX_BYTES, &bytes) < 0) ||
	    (argc > 3 && arg(argv[3], "PASSES", 1, 1000, &passes) < 0)) {
		if (argc > 4 && rank == 0)
			fprintf(stderr, "usage: vmshm-bcastloop [ITERATIONS [BYTES [PASSES]]]\n");
		MPI_Finalize();
		return 2;
	}
	if (!(buf = calloc(1, (size_t)bytes + 1))) {
		fprintf(stderr, "vmshm-bcastloop: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int p = 0; p < passes; p++) {
		double t0, t1, t2, t3;

		bcast = barrier = 0;
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int i = 0; i < iters; i++) {
			t1 = MPI_Wtime();
			MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
			t2 = MPI_Wtime();
			MPI_Barrier(MPI_COMM_WORLD);
			t3 = MPI_Wtime();
			bcast += t2 - t1;
			barrier += t3 - t2;
		}
		whole = MPI_Wtime() - t0;
	}
	printf("RESULT rank %d bytes %d iterations %d bcast %.4f barrier %.4f iteration %.4f\n", rank, bytes,
	       iters, bcast / iters * 1e6, barrier / iters * 1e6, whole / iters * 1e6);
	free(buf);
	MPI_Finalize();
	return 0;
}
