/*
 * vmshm-scribble: plays the hostile (or broken) guest for the vmshm tests
 * by damaging a live region the way a guest with write access could.
 *
 *   vmshm-scribble REGION format               format it now (as a rank would)
 *   vmshm-scribble REGION magic                overwrite the header magic
 *   vmshm-scribble REGION nslots               claim 4096 slots in the header
 *   vmshm-scribble REGION reclen  P C          the record ring P->C is about to
 *   vmshm-scribble REGION rectype P C            deliver gets a huge length /
 *                                                an unknown type
 *   vmshm-scribble REGION tail    P C          ring P->C's consumer tail jumps
 *                                                far ahead of its producer
 * P and C are MPI ranks; their slots are found through the slot table.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/vmshm/vmshm_region.h"
#include "lib/vmshm/vmshm_ring.h"

static int slot_of_rank(void *base, const struct vmshm_geom *g, unsigned rank)
{
	for (uint32_t s = 0; s < g->nslots; s++) {
		uint64_t o = vmshm_slot_at(base, s)->owner;
		if (o && o != VMSHM_OWNER_CLAIMING && (o & 0xffffffffu) == rank)
			return (int)s;
	}
	return -1;
}

int main(int argc, char **argv)
{
	char err[256];
	struct stat st;
	struct vmshm_geom g;

	if (argc < 3) {
		fprintf(stderr, "usage: vmshm-scribble REGION format|magic|nslots|reclen|rectype|tail [P C]\n");
		return 2;
	}
	int fd = open(argv[1], O_RDWR);
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[1]);
		return 1;
	}
	void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	struct vmshm_region_hdr *h = base;
	const char *what = argv[2];
	if (!strcmp(what, "format")) {
		struct vmshm_attach_opts o = { .ring_size = 256u << 10, .timeout_ms = 1000 };
		if (vmshm_region_attach(base, (uint64_t)st.st_size, &o, &g, err, sizeof(err))) {
			fprintf(stderr, "vmshm-scribble: %s\n", err);
			return 1;
		}
		printf("%u slots, %u-byte rings\n", g.nslots, g.ring_size);
		return 0;
	}
	if (!strcmp(what, "magic")) {
		h->magic = 0x6b6361682d656c69ull;
		return 0;
	}
	if (!strcmp(what, "nslots")) {
		h->nslots = 4096;
		return 0;
	}
	if (vmshm_geom_check(h, (uint64_t)st.st_size, &g, err, sizeof(err))) {
		fprintf(stderr, "vmshm-scribble: %s\n", err);
		return 1;
	}
	if (argc < 5) {
		fprintf(stderr, "vmshm-scribble: %s needs producer and consumer ranks\n", what);
		return 2;
	}
	int p = slot_of_rank(base, &g, (unsigned)atoi(argv[3]));
	int c = slot_of_rank(base, &g, (unsigned)atoi(argv[4]));
	if (p < 0 || c < 0) {
		fprintf(stderr, "vmshm-scribble: rank %s or %s holds no slot\n", argv[3], argv[4]);
		return 1;
	}
	uint64_t *tail = vmshm_ring_ctrl(base, &g, (uint32_t)p, (uint32_t)c);
	uint8_t *data = vmshm_ring_data(base, &g, (uint32_t)p, (uint32_t)c);
	struct vmshm_rec *r = (struct vmshm_rec *)(data + (*tail & (g.ring_size - 1)));
	if (!strcmp(what, "reclen"))
		r->len = 0xfffffff0u;
	else if (!strcmp(what, "rectype"))
		r->type = 0x42;
	else if (!strcmp(what, "tail"))
		*tail += 1ull << 40;
	else {
		fprintf(stderr, "vmshm-scribble: unknown damage '%s'\n", what);
		return 2;
	}
	return 0;
}
