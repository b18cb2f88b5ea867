/*
 * Where a job's guests are (slurm.h, vs_layout): the same answer on every
 * node from the job's CPUs per node, which each node's prolog has.
 */
#include "slurm/slurm.h"

#include <stdio.h>

int vs_layout(const int *cpus, int nnodes, int vcpus, int node, int *first, int *count, int *total, char *why,
	      size_t len)
{
	long long sum = 0;

	if (vcpus < 1 || node < 0 || node >= nnodes) {
		snprintf(why, len, "node %d of %d, %d vCPUs per guest", node, nnodes, vcpus);
		return -1;
	}
	for (int i = 0; i < nnodes; i++) {
		int g = cpus[i] / vcpus;

		if (g < 1) {
			snprintf(why, len, "node %d of the job has %d CPU%s, fewer than --vhpc-vcpus=%d", i, cpus[i],
				 cpus[i] == 1 ? "" : "s", vcpus);
			return -1;
		}
		if (g > VS_MAX_GUESTS)
			g = VS_MAX_GUESTS;
		if (i == node) {
			*first = (int)sum;
			*count = g;
		}
		sum += g;
	}
	if (sum > 1 << 20) {
		snprintf(why, len, "%lld guests: too many", sum);
		return -1;
	}
	*total = (int)sum;
	return 0;
}

int vs_guest_nodes(const int *cpus, int nnodes, int vcpus, const uint32_t *node_addr, uint32_t *out, int total)
{
	int g = 0;

	if (vcpus < 1)
		return -1;
	for (int i = 0; i < nnodes; i++) {
		int n = cpus[i] / vcpus;

		if (n > VS_MAX_GUESTS)
			n = VS_MAX_GUESTS;
		if (n < 1 || n > total - g)
			return -1;
		for (int k = 0; k < n; k++)
			out[g++] = node_addr[i];
	}
	return g == total ? 0 : -1;
}
