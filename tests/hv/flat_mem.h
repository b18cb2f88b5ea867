/* flat_mem(): guest RAM of SIZE bytes on one node and no host binding, for
 * unit tests that drive a device or a ring against real guest memory but
 * need no VM (unit_virtq.c, unit_vhost_net.c). */
#ifndef VHPC_TESTS_HV_FLAT_MEM_H
#define VHPC_TESTS_HV_FLAT_MEM_H

#include <string.h>

#include "hv/config.h"
#include "hv/vm.h"

static inline int flat_mem(struct guest_mem *m, uint64_t size)
{
	struct hv_plan p;
	struct verr err;

	memset(&p, 0, sizeof(p));
	p.mem = size;
	p.page_size = 4096;
	p.nnodes = 1;
	p.node[0].size = size;
	p.node[0].host_node = -1;
	return mem_create(m, &p, 0, NULL, &err);
}

#endif
