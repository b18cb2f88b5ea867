/*
 * -show-hosts: where each rank runs.  The hostname and the network and UTS
 * namespace inodes tell guests apart (two guests on one host share nothing
 * of those), the CPU list shows the placement the rank got.  Printed as
 * comment lines so IMB parsers skip them.
 */
#include "lib/parse.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mpibench.h"

struct host_info {
	char host[64];
	unsigned long long netns, utsns;
	int cpu, pid;
	char cpus[256];
};

static unsigned long long ns_inode(const char *which)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/self/ns/%s", which);
	return stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

static void allowed_cpus(char *buf, size_t len)
{
	cpu_set_t set;
	int ids[CPU_SETSIZE];
	size_t n = 0;

	snprintf(buf, len, "?");
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			ids[n++] = i;
	cpulist_format(ids, n, buf, len);
}

void mb_show_hosts(MPI_Comm comm)
{
	struct host_info me, *all = NULL;
	int rank, size;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	memset(&me, 0, sizeof(me));
	if (gethostname(me.host, sizeof(me.host) - 1) < 0)
		snprintf(me.host, sizeof(me.host), "?");
	me.netns = ns_inode("net");
	me.utsns = ns_inode("uts");
	me.cpu = sched_getcpu();
	me.pid = (int)getpid();
	allowed_cpus(me.cpus, sizeof(me.cpus));
	if (rank == 0) {
		all = calloc((size_t)size, sizeof(*all));
		if (!all) {
			fprintf(stderr, "vhpc-mpibench: out of memory for -show-hosts\n");
			MPI_Abort(comm, 1);
		}
	}
	MPI_Gather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, 0, comm);
	if (rank == 0) {
		printf("\n# Hosts of the ranks (-show-hosts): hostname, network and UTS namespace\n"
		       "# inodes, CPU at start, CPUs allowed, pid\n");
		for (int r = 0; r < size; r++)
			printf("# rank %d: host=%s netns=%llu utsns=%llu cpu=%d cpus=%s pid=%d\n", r,
			       all[r].host, all[r].netns, all[r].utsns, all[r].cpu, all[r].cpus,
			       all[r].pid);
		fflush(stdout);
		free(all);
	}
}
