/* SPSC record ring: set-up (the per-fragment paths are inline in vmshm_ring.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vmshm_ring.h"

void vmshm_ring_reset(void *ctrl)
{
	__atomic_store_n((uint64_t *)ctrl, 0, __ATOMIC_RELEASE);
}

void vmshm_prod_init(struct vmshm_prod *p, void *ctrl, void *data,
		     uint32_t size, uint32_t shift, uint64_t key)
{
	memset(p, 0, sizeof(*p));
	p->data = data;
	p->tail = ctrl;
	p->size = size;
	p->shift = shift;
	p->key = key;
	/* Start where the consumer stands: a fresh slot says 0; a slot whose
	 * previous producer finished says where that one stopped. */
	p->head = __atomic_load_n(p->tail, __ATOMIC_ACQUIRE);
	p->head = VMSHM_ALIGN_UP(p->head, VMSHM_REC_ALIGN);
	p->tail_seen = p->head;
	p->hot = size >= 4 * VMSHM_HOT_WINDOW ? VMSHM_HOT_WINDOW : 0;
	p->hot_lap = UINT64_MAX;
}

void vmshm_cons_init(struct vmshm_cons *c, void *ctrl, const void *data,
		     uint32_t size, uint32_t shift, uint64_t key)
{
	memset(c, 0, sizeof(*c));
	c->data = data;
	c->tail_pub = ctrl;
	c->size = size;
	c->shift = shift;
	c->key = key;
}
