/* A user's own MPI program (tests/integration/binds.t, tests/cluster/binds.t):
 * each rank writes out.<rank> in its working directory, saying where it ran. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int r, n;
	char host[64], name[64], cwd[512];
	FILE *f;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	gethostname(host, sizeof(host));
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	snprintf(name, sizeof(name), "out.%d", r);
	if (!(f = fopen(name, "w"))) {
		perror(name);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	fprintf(f, "rank %d of %d on %s in %s\n", r, n, host, cwd);
	fclose(f);
	printf("hello from rank %d of %d on %s\n", r, n, host);
	MPI_Finalize();
	return 0;
}
