/*
 * vmshm-pingpong: IMB-style PingPong and Sendrecv between two ranks, for
 * comparing BTLs (run-bench.sh runs it once per transport, interleaved).
 *
 *   vmshm-pingpong [SIZE...]      default sizes: 1 1024 65536 1048576 4194304
 *
 * Prints one line per benchmark and size from rank 0:
 *   RESULT <PingPong|Sendrecv> <bytes> <reps> <usec> <MB/s>
 * PingPong: usec = half the round trip, MB/s = bytes / usec.
 * Sendrecv: usec = one exchange (slower rank), MB/s = 2 * bytes / usec,
 * as IMB counts it.  MB = 10^6 bytes.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reps_for(size_t n)
{
	if (n <= 4096)
		return 20000;
	if (n <= 65536)
		return 2000;
	if (n <= 1 << 20)
		return 200;
	return 50;
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = { 1, 1024, 65536, 1 << 20, 4 << 20 };
	size_t sizes[32], nsizes = 0, max = 0;
	int rank, n;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (n != 2) {
		if (rank == 0)
			fprintf(stderr, "vmshm-pingpong: run with exactly 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (int i = 1; i < argc && nsizes < 32; i++)
		sizes[nsizes++] = (size_t)strtoull(argv[i], NULL, 10);
	if (!nsizes)
		for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
			sizes[nsizes++] = defaults[i];
	for (size_t i = 0; i < nsizes; i++)
		if (sizes[i] > max)
			max = sizes[i];
	char *sb = malloc(max ? max : 1), *rb = malloc(max ? max : 1);
	memset(sb, 1, max ? max : 1);
	memset(rb, 0, max ? max : 1);
	int peer = rank ^ 1;

	for (size_t i = 0; i < nsizes; i++) {
		int sz = (int)sizes[i], reps = reps_for(sizes[i]);
		/* warm-up: first-touch, lazy connection setup */
		for (int r = 0; r < 10; r++) {
			if (rank == 0) {
				MPI_Send(sb, sz, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
				MPI_Recv(rb, sz, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(rb, sz, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(sb, sz, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
			}
		}
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int r = 0; r < reps; r++) {
			if (rank == 0) {
				MPI_Send(sb, sz, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
				MPI_Recv(rb, sz, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(rb, sz, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(sb, sz, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
			}
		}
		double us = (MPI_Wtime() - t0) * 1e6 / reps / 2;
		if (rank == 0)
			printf("RESULT PingPong %d %d %.3f %.1f\n", sz, reps, us, sz / us);

		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int r = 0; r < reps; r++)
			MPI_Sendrecv(sb, sz, MPI_BYTE, peer, 2, rb, sz, MPI_BYTE, peer, 2,
				     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		us = (MPI_Wtime() - t0) * 1e6 / reps;
		double worst;
		MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0)
			printf("RESULT Sendrecv %d %d %.3f %.1f\n", sz, reps, worst, 2.0 * sz / worst);
		fflush(stdout);
	}
	free(sb);
	free(rb);
	MPI_Finalize();
	return 0;
}
