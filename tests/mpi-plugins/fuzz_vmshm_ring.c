/*
 * Hostile region contents for the vmshm consumer and producer: the input
 * is a program of operations that a guest with write access to the region
 * could perform between our reads (forge a correctly stamped header with
 * any length/type, scribble bytes, move the consumer's published tail)
 * interleaved with our own peeks, pops, reserves and commits.  The ring is
 * malloc'ed to its exact size, so ASan reports any read or write outside
 * it; every payload handed out is also checked to lie inside the ring.
 * A header snapshot from the input goes through vmshm_geom_check too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/vmshm/vmshm_region.h"
#include "lib/vmshm/vmshm_ring.h"

struct input {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct input *in, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++) {
		v |= (uint64_t)(in->n ? *in->p : 0) << (8 * i);
		if (in->n) {
			in->p++;
			in->n--;
		}
	}
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	char err[256];

	/* The header validator sees arbitrary headers and mapped sizes. */
	if (size >= sizeof(struct vmshm_region_hdr) + 8) {
		struct vmshm_region_hdr h;
		struct vmshm_geom g;
		memcpy(&h, data, sizeof(h));
		uint64_t mapped;
		memcpy(&mapped, data + sizeof(h), 8);
		if (vmshm_geom_check(&h, mapped, &g, err, sizeof(err)) == 0) {
			if (g.nslots < 2 || g.nslots > VMSHM_MAX_SLOTS ||
			    vmshm_region_size_for(g.nslots, g.ring_size) > mapped)
				abort();
		}
	}

	uint32_t shift = 12 + (uint32_t)(take(&in, 1) % 5);   /* 4 KiB .. 64 KiB */
	uint32_t rsize = 1u << shift;
	uint64_t key = take(&in, 8);
	uint64_t tail = 0;
	uint8_t *ring = malloc(rsize);
	if (!ring)
		return 0;
	memset(ring, (int)take(&in, 1), rsize);
	struct vmshm_cons c;
	struct vmshm_prod p;
	vmshm_cons_init(&c, &tail, ring, rsize, shift, key);
	vmshm_prod_init(&p, &tail, ring, rsize, shift, key);
	/* Rings here are small: give some of them a hot window anyway. */
	if (take(&in, 1) & 1)
		p.hot = rsize / 4;

	for (int steps = 0; in.n && steps < 4096; steps++) {
		switch (take(&in, 1) % 6) {
		case 0: { /* forge a header the consumer will accept as stamped */
			uint64_t pos = (c.tail & ~(uint64_t)(VMSHM_REC_ALIGN - 1)) +
				       VMSHM_REC_ALIGN * (take(&in, 1) % 8);
			struct vmshm_rec *r = (void *)(ring + (pos & (rsize - 1)));
			r->stamp = vmshm_stamp(key, pos, shift);
			r->len = (uint32_t)take(&in, 4);
			r->type = (take(&in, 1) & 1) ? VMSHM_REC_DATA : VMSHM_REC_PAD;
			if (take(&in, 1) & 1)
				r->type = (uint8_t)take(&in, 1);
			r->tag = (uint8_t)take(&in, 1);
			if (take(&in, 1) & 1)
				r->skew = (uint16_t)take(&in, 2);
			if (take(&in, 1) & 1) {
				/* a short record: length and tag in its last bytes */
				r->stamp ^= VMSHM_SHORT_BIT;
				((uint8_t *)r)[VMSHM_REC_ALIGN - 2] = (uint8_t)take(&in, 1);
			}
			break;
		}
		case 1: { /* scribble */
			uint32_t off = (uint32_t)take(&in, 4) & (rsize - 1);
			uint32_t n = (uint32_t)take(&in, 1) % 32;
			for (uint32_t i = 0; i < n && off + i < rsize; i++)
				ring[off + i] = (uint8_t)take(&in, 1);
			break;
		}
		case 2: { /* consume */
			struct vmshm_msg m;
			int rc = vmshm_cons_peek(&c, &m, err, sizeof(err));
			if (rc == 1) {
				const uint8_t *b = m.payload;
				if (b < ring || b > ring + rsize || m.len > (size_t)(ring + rsize - b))
					abort();
				volatile uint8_t sink = 0;
				for (uint32_t i = 0; i < m.len; i += 61)
					sink ^= b[i];
				if (m.len)
					sink ^= b[m.len - 1];
				(void)sink;
				vmshm_cons_pop(&c);
			}
			break;
		}
		case 3:
			vmshm_cons_publish(&c);
			break;
		case 4: /* the hostile side moves the published tail */
			tail = take(&in, 1) & 1 ? take(&in, 8) :
			       p.head - (take(&in, 2) & ~(uint64_t)(VMSHM_REC_ALIGN - 1));
			break;
		case 5: { /* produce */
			void *dst;
			uint32_t len = (uint32_t)take(&in, 3) % (rsize + 64);
			uint32_t off = take(&in, 1) & 1 ? (uint32_t)take(&in, 2) % VMSHM_PAGE :
				       VMSHM_NO_MATCH;
			if (vmshm_prod_reserve_at(&p, len, off, &dst) == 0) {
				uint8_t *d = dst;
				if (d < ring || d + len > ring + rsize)
					abort();
				memset(d, 0x3c, len);
				vmshm_prod_commit(&p, len, 1);
			}
			break;
		}
		}
	}
	free(ring);
	return 0;
}
