/* Split virtqueues (virtio 1.x, section 2.7) as the device sees them.
 * Everything in a ring is written by a hostile guest: ring addresses are
 * checked once when the queue is enabled, every descriptor (direct or in
 * an indirect table) is copied before it is looked at and its buffer is
 * checked against guest RAM, chains are bounded (no loops, no nested
 * indirect tables), and a ring whose index runs ahead of its size stops the
 * queue instead of being believed. */
#ifndef HV_VIRTQ_H
#define HV_VIRTQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vm.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "virtio rings are little-endian; this code assumes a little-endian host"
#endif

#define VQ_MAX_SIZE   1024      /* largest queue a device offers */
#define VQ_MAX_CHAIN  1024      /* descriptors in one chain, indirect ones included (IOV_MAX) */

#define VRING_DESC_F_NEXT     1
#define VRING_DESC_F_WRITE    2
#define VRING_DESC_F_INDIRECT 4
#define VRING_USED_F_NO_NOTIFY 1
#define VRING_AVAIL_F_NO_INTERRUPT 1

struct vring_desc { uint64_t addr; uint32_t len; uint16_t flags, next; };
struct vring_used_elem { uint32_t id, len; };

/* One descriptor chain: device-readable buffers first (iov[0..nout)), then
 * device-writable ones (iov[nout..nout+nin)), as host pointers into guest
 * RAM that were bounds-checked. */
struct vq_chain {
	uint16_t head;
	unsigned nout, nin;
	uint64_t out_len, in_len;
	/* Set by the caller before vq_pop, or left NULL for the queue's own
	 * array (valid until the next pop).  A chain with more buffers than
	 * max is malformed. */
	struct iovec *iov;
	unsigned max;
};

struct virtq {
	const struct guest_mem *mem;
	uint16_t size;
	bool ready, broken;
	bool event_idx, indirect;
	struct vring_desc *desc;
	uint16_t *avail;           /* flags, idx, ring[size], used_event */
	uint16_t *used;            /* flags, idx, then elems; avail_event after them */
	uint16_t last_avail, used_idx, signalled_used;
	bool signalled_valid;
	struct iovec iov[VQ_MAX_CHAIN];
	unsigned long bad_chains;  /* malformed chains returned with length 0 */
};

/* Maps the three ring areas (checked: inside RAM, aligned).  -1 if not. */
int vq_setup(struct virtq *q, const struct guest_mem *mem, uint16_t size, uint64_t desc,
	     uint64_t avail, uint64_t used, bool event_idx, bool indirect);
void vq_reset(struct virtq *q);
/* The checks vq_setup makes, without setting anything up. */
bool vq_addrs_ok(const struct guest_mem *mem, uint16_t size, uint64_t desc, uint64_t avail, uint64_t used);
/* 1: c holds the next chain; 0: none available; -1: the ring is broken
 * (q->broken set; the device should ask for a reset).  Malformed chains
 * are completed with length 0 here and skipped. */
int vq_pop(struct virtq *q, struct vq_chain *c);
/* Gives back the last n popped chains (not yet pushed). */
void vq_unpop(struct virtq *q, uint16_t n);
/* Completes a chain: len bytes were written into its writable part.  The
 * driver sees completions once vq_publish (or virtio_notify) runs, so a
 * batch costs one index update. */
void vq_push(struct virtq *q, uint16_t head, uint32_t len);
void vq_publish(struct virtq *q);
/* Whether the driver wants an interrupt for what was pushed since the last
 * call (event index or NO_INTERRUPT). */
bool vq_should_notify(struct virtq *q);
/* Kick suppression while the device works through the ring; enabling
 * returns true when more buffers arrived meanwhile (process them). */
void vq_disable_kicks(struct virtq *q);
bool vq_enable_kicks(struct virtq *q);
/* Asks for a kick when the driver adds anything beyond what is available
 * now (the device holds buffers back and waits for more); returns true if
 * more arrived meanwhile. */
bool vq_kick_on_more(struct virtq *q);
bool vq_has_avail(struct virtq *q);
/* Whether every entry of the ring is the device's (the driver cannot add). */
bool vq_full(struct virtq *q);

/* Copies between a chain's buffers and plain memory, from byte `skip` of
 * the readable (out) or writable (in) part; returns bytes copied. */
size_t vq_copy_from(const struct vq_chain *c, size_t skip, void *dst, size_t len);
size_t vq_copy_to(const struct vq_chain *c, size_t skip, const void *src, size_t len);
/* iovecs for [skip, skip+len) of the out (or in) part into dst[max];
 * returns the count. */
unsigned vq_iov_slice(const struct vq_chain *c, bool in, size_t skip, size_t len,
		      struct iovec *dst, unsigned max);

#endif
