/*
 * vmshm region: the layout of the shared-memory region that co-located
 * guests of one job map (a tmpfs/hugetlbfs file bind-mounted into
 * containers, or an ivshmem BAR), and the code that formats, validates and
 * hands out slots in it.  This is the public header of mpi-plugins/btl_vmshm:
 * the node agent may use it to create and check regions; the BTL builds on it.
 *
 * No Open MPI here, so it is unit-tested and fuzzed on its own.
 *
 * Every guest that maps the region can write all of it, so nothing read
 * from the region is trusted: the header is copied once and validated into
 * a local struct vmshm_geom, and only that copy is used to compute offsets.
 *
 *   offset 0        header (4 KiB): magic, version, sizes, uuid
 *   offset 4 KiB    slot table: VMSHM_MAX_SLOTS x 128 bytes
 *                     owner  - 0 free, else the process name holding it
 *                     epoch  - bumped at every claim (diagnostics)
 *                     active - bitmap of producers that opened a ring to it
 *   VMSHM_RINGS_OFF rings, grouped by consumer: ring (p -> c) is at
 *                     rings_off + (c * nslots + p) * ring_stride
 *                     each ring: 4 KiB control page (consumer's tail)
 *                     followed by ring_size bytes of records
 */
#ifndef VHPC_VMSHM_REGION_H
#define VHPC_VMSHM_REGION_H

#include <stddef.h>
#include <stdint.h>

#define VMSHM_MAGIC        0x314d485343504856ull /* "VHPCSHM1" little-endian */
#define VMSHM_FORMATTING   0x2e2e2e2e43504856ull /* "VHPC...." while formatting */
#define VMSHM_VERSION      1u
#define VMSHM_HDR_SIZE     4096u
#define VMSHM_MAX_SLOTS    256u
#define VMSHM_SLOT_SIZE    128u
#define VMSHM_SLOTS_OFF    VMSHM_HDR_SIZE
#define VMSHM_RINGS_OFF    (VMSHM_SLOTS_OFF + VMSHM_MAX_SLOTS * VMSHM_SLOT_SIZE)
#define VMSHM_RING_CTRL    4096u
#define VMSHM_RING_MIN     4096u
#define VMSHM_RING_MAX     (1u << 30)
#define VMSHM_RING_PLAN_MIN (16u << 10)  /* the formatter shrinks rings to this */
#define VMSHM_OWNER_CLAIMING UINT64_MAX

struct vmshm_region_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;
	uint64_t region_size;
	uint32_t nslots;
	uint32_t ring_size;
	uint64_t slots_off;
	uint64_t rings_off;
	uint64_t ring_stride;
	uint8_t uuid[16];
};

struct vmshm_slot {
	uint64_t owner;
	uint64_t epoch;
	uint64_t active[VMSHM_MAX_SLOTS / 64];
};

/* The trusted, validated copy of the geometry. */
struct vmshm_geom {
	uint64_t region_size;
	uint32_t nslots;
	uint32_t ring_size;
	uint32_t ring_shift;   /* log2(ring_size) */
	uint64_t ring_stride;
	uint8_t uuid[16];
};

/* Geometry the formatter picks for a region of `size` bytes with rings of
 * `ring_size` bytes (a power of two): with max_slots > 0, exactly that many
 * slots, halving the rings (down to VMSHM_RING_PLAN_MIN) until they fit;
 * with 0, as many slots as fit.  0, or -1 with a message in err. */
int vmshm_geom_plan(uint64_t size, uint32_t ring_size, uint32_t max_slots,
		    struct vmshm_geom *g, char *err, size_t errlen);

/* Validates a header snapshot against the mapped size; fills g.
 * 0, or -1 with a message in err naming the bad field. */
int vmshm_geom_check(const struct vmshm_region_hdr *h, uint64_t mapped_size,
		     struct vmshm_geom *g, char *err, size_t errlen);

/* Smallest region size that holds `nslots` slots of `ring_size` rings. */
uint64_t vmshm_region_size_for(uint32_t nslots, uint32_t ring_size);

struct vmshm_attach_opts {
	uint32_t ring_size;   /* used only if this caller formats */
	uint32_t max_slots;   /* ditto; 0 = as many as fit */
	int timeout_ms;       /* how long to wait for another formatter */
};

/* Attaches to a mapped region: formats it if it is all zero (the first
 * caller wins a compare-and-swap on the magic; the others wait for it),
 * otherwise validates the header.  0, or -1 with a message in err. */
int vmshm_region_attach(void *base, uint64_t size,
			const struct vmshm_attach_opts *o,
			struct vmshm_geom *g, char *err, size_t errlen);

/* Claims a free slot for `owner` (non-zero, not VMSHM_OWNER_CLAIMING):
 * bumps its epoch, clears its producer bitmap and empties every ring that
 * delivers into it.  0 with *slot and *epoch set, or -1 when all slots are taken. */
int vmshm_slot_claim(void *base, const struct vmshm_geom *g, uint64_t owner,
		     uint32_t *slot, uint32_t *epoch);
/* Gives the slot back if `owner` still holds it. */
void vmshm_slot_release(void *base, const struct vmshm_geom *g, uint32_t slot,
			uint64_t owner);

/* Addresses inside the region; slot and ring indices must be < nslots
 * (callers check; these assert nothing so they stay cheap). */
struct vmshm_slot *vmshm_slot_at(void *base, uint32_t slot);
void *vmshm_ring_ctrl(void *base, const struct vmshm_geom *g,
		      uint32_t producer, uint32_t consumer);
void *vmshm_ring_data(void *base, const struct vmshm_geom *g,
		      uint32_t producer, uint32_t consumer);

/* Random bytes for uuids and ring keys (non-blocking; need not be secret). */
void vmshm_random(void *buf, size_t n);

/* Producer side of the "who is sending to me" bitmap. */
void vmshm_slot_mark_active(void *base, uint32_t consumer, uint32_t producer);
/* Consumer side: the bits set in word w, limited to valid slots, and the
 * mask of valid slots in word w. */
uint64_t vmshm_slot_active_word(void *base, const struct vmshm_geom *g,
				uint32_t consumer, uint32_t w);
uint64_t vmshm_slot_active_word_mask(const struct vmshm_geom *g, uint32_t w);

#endif
