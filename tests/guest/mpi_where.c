/*
 * mpi-where: each rank reports where it runs (hostname, network namespace
 * inode), rank 0 prints every report after a round of messages through
 * the BTL, so the output proves which guest each rank ran in and that the
 * ranks could talk.  "mpi-where fail R N": rank R exits with status N after
 * MPI_Finalize, to check that mpirun reports a failing rank.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char mine[256], host[64] = "?";
	struct stat st;
	int rank, size, fail_rank = -1, fail_status = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc == 4 && !strcmp(argv[1], "fail")) {
		fail_rank = atoi(argv[2]);
		fail_status = atoi(argv[3]);
	}
	gethostname(host, sizeof(host) - 1);
	if (stat("/proc/self/ns/net", &st) != 0)
		st.st_ino = 0;
	snprintf(mine, sizeof(mine), "rank %d of %d host %s netns %lu pid %d", rank, size, host,
		 (unsigned long)st.st_ino, (int)getpid());
	if (rank == 0) {
		printf("%s\n", mine);
		for (int r = 1; r < size; r++) {
			char theirs[256];

			MPI_Recv(theirs, sizeof(theirs), MPI_CHAR, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			/* Echo it back so every pair does a round trip. */
			MPI_Send(theirs, sizeof(theirs), MPI_CHAR, r, 2, MPI_COMM_WORLD);
			printf("%s\n", theirs);
		}
		fflush(stdout);
	} else {
		char back[256];

		MPI_Send(mine, sizeof(mine), MPI_CHAR, 0, 1, MPI_COMM_WORLD);
		MPI_Recv(back, sizeof(back), MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (strcmp(back, mine) != 0) {
			fprintf(stderr, "rank %d: echo differs\n", rank);
			MPI_Abort(MPI_COMM_WORLD, 9);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return rank == fail_rank ? fail_status : 0;
}
