/* Split virtqueues, device side (see virtq.h for the rules on hostile
 * rings).  Ring indexes are shared with vCPUs running the guest driver, so
 * they are read and written with acquire/release atomics and the fences
 * the virtio memory model asks for. */
#include "virtq.h"

#include <string.h>

static inline uint16_t ld16(const uint16_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void st16(uint16_t *p, uint16_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline void mb(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

#define AVAIL_FLAGS(q)  (&(q)->avail[0])
#define AVAIL_IDX(q)    (&(q)->avail[1])
#define AVAIL_RING(q, i) (&(q)->avail[2 + (i)])
#define USED_EVENT(q)   (&(q)->avail[2 + (q)->size])
#define USED_FLAGS(q)   (&(q)->used[0])
#define USED_IDX(q)     (&(q)->used[1])
#define USED_ELEM(q, i) ((struct vring_used_elem *)((q)->used + 2) + (i))
#define AVAIL_EVENT(q)  ((uint16_t *)USED_ELEM(q, (q)->size))

bool vq_addrs_ok(const struct guest_mem *mem, uint16_t size, uint64_t desc, uint64_t avail, uint64_t used)
{
	if (!size || size > VQ_MAX_SIZE || (size & (size - 1)))
		return false;
	/* Alignment from the spec (16/2/4) also keeps the atomics aligned. */
	if ((desc & 15) || (avail & 1) || (used & 3))
		return false;
	return gm_ptr(mem, desc, 16ull * size) && gm_ptr(mem, avail, 6 + 2ull * size) &&
	       gm_ptr(mem, used, 6 + 8ull * size);
}

int vq_setup(struct virtq *q, const struct guest_mem *mem, uint16_t size, uint64_t desc,
	     uint64_t avail, uint64_t used, bool event_idx, bool indirect)
{
	vq_reset(q);
	if (!vq_addrs_ok(mem, size, desc, avail, used))
		return -1;
	q->desc = gm_ptr(mem, desc, 16ull * size);
	q->avail = gm_ptr(mem, avail, 6 + 2ull * size);
	q->used = gm_ptr(mem, used, 6 + 8ull * size);
	if (!q->desc || !q->avail || !q->used) {
		vq_reset(q);
		return -1;
	}
	q->mem = mem;
	q->size = size;
	q->event_idx = event_idx;
	q->indirect = indirect;
	/* The driver zeroes the used ring; start from what it holds, so a
	 * device started late stays in step. */
	q->used_idx = ld16(USED_IDX(q));
	q->last_avail = q->used_idx;
	q->signalled_used = q->used_idx;
	q->signalled_valid = true;
	q->ready = true;
	return 0;
}

void vq_reset(struct virtq *q)
{
	q->mem = NULL;
	q->desc = NULL;
	q->avail = q->used = NULL;
	q->size = 0;
	q->ready = q->broken = false;
	q->last_avail = q->used_idx = q->signalled_used = 0;
	q->signalled_valid = false;
	q->bad_chains = 0;
}

bool vq_has_avail(struct virtq *q)
{
	return q->ready && !q->broken && ld16(AVAIL_IDX(q)) != q->last_avail;
}

bool vq_full(struct virtq *q)
{
	return q->ready && (uint16_t)(ld16(AVAIL_IDX(q)) - q->used_idx) >= q->size;
}

/* Walks one chain into c; false if it is malformed. */
static bool walk(struct virtq *q, uint16_t head, struct vq_chain *c)
{
	const struct vring_desc *table = q->desc;
	unsigned tsize = q->size, n = 0, direct = 0;
	uint16_t i = head;
	bool in_indirect = false;

	c->nout = c->nin = 0;
	c->out_len = c->in_len = 0;
	for (;;) {
		struct vring_desc d;

		/* Copied once: the guest may rewrite the table meanwhile. */
		memcpy(&d, &table[i], sizeof(d));
		if (++n > VQ_MAX_CHAIN)
			return false;
		if (!in_indirect && ++direct > q->size)
			return false;              /* a loop in the ring's table */
		if (d.flags & VRING_DESC_F_INDIRECT) {
			if (in_indirect || !q->indirect || (d.flags & VRING_DESC_F_NEXT) ||
			    !d.len || d.len % sizeof(struct vring_desc) ||
			    d.len / sizeof(struct vring_desc) > VQ_MAX_CHAIN)
				return false;
			if (!(table = gm_ptr(q->mem, d.addr, d.len)))
				return false;
			tsize = d.len / sizeof(struct vring_desc);
			in_indirect = true;
			i = 0;
			continue;
		}
		if (d.len) {
			void *p = gm_ptr(q->mem, d.addr, d.len);
			unsigned k = c->nout + c->nin;

			if (!p || k >= c->max)
				return false;
			if (d.flags & VRING_DESC_F_WRITE) {
				c->nin++;
				c->in_len += d.len;
			} else {
				if (c->nin)
					return false;  /* readable after writable */
				c->nout++;
				c->out_len += d.len;
			}
			c->iov[k].iov_base = p;
			c->iov[k].iov_len = d.len;
		}
		if (!(d.flags & VRING_DESC_F_NEXT))
			return true;
		i = d.next;
		if (i >= tsize)
			return false;
	}
}

int vq_pop(struct virtq *q, struct vq_chain *c)
{
	if (!c->iov || !c->max) {
		c->iov = q->iov;
		c->max = VQ_MAX_CHAIN;
	}
	for (;;) {
		uint16_t avail_idx, head;

		if (!q->ready || q->broken)
			return q->broken ? -1 : 0;
		avail_idx = ld16(AVAIL_IDX(q));
		if (avail_idx == q->last_avail)
			return 0;
		if ((uint16_t)(avail_idx - q->last_avail) > q->size) {
			q->broken = true;          /* the driver claims more than the ring holds */
			return -1;
		}
		/* The ring entry is read after the index (acquire above). */
		head = ld16(AVAIL_RING(q, q->last_avail % q->size));
		if (head >= q->size) {
			q->broken = true;
			return -1;
		}
		q->last_avail++;
		c->head = head;
		if (walk(q, head, c))
			return 1;
		q->bad_chains++;
		c->nout = c->nin = 0;
		c->out_len = c->in_len = 0;
		vq_push(q, head, 0);
	}
}

void vq_unpop(struct virtq *q, uint16_t n)
{
	q->last_avail = (uint16_t)(q->last_avail - n);
}

void vq_push(struct virtq *q, uint16_t head, uint32_t len)
{
	struct vring_used_elem *e;

	if (!q->ready)
		return;
	e = USED_ELEM(q, q->used_idx % q->size);
	__atomic_store_n(&e->id, head, __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, len, __ATOMIC_RELAXED);
	q->used_idx++;
}

void vq_publish(struct virtq *q)
{
	/* Release: the elements (and the data written before) are visible
	 * before the index moves. */
	if (q->ready)
		st16(USED_IDX(q), q->used_idx);
}

bool vq_should_notify(struct virtq *q)
{
	uint16_t old, new_idx, ev;
	bool v;

	if (!q->ready)
		return false;
	vq_publish(q);
	/* The used index store must be ordered before reading the driver's
	 * suppression fields. */
	mb();
	new_idx = q->used_idx;
	old = q->signalled_used;
	v = q->signalled_valid;
	q->signalled_used = new_idx;
	q->signalled_valid = true;
	if (new_idx == old && v)
		return false;              /* nothing completed since the last interrupt */
	if (!q->event_idx)
		return !(ld16(AVAIL_FLAGS(q)) & VRING_AVAIL_F_NO_INTERRUPT);
	if (!v)
		return true;
	ev = ld16(USED_EVENT(q));
	/* vring_need_event: did new_idx pass used_event since old? */
	return (uint16_t)(new_idx - ev - 1) < (uint16_t)(new_idx - old);
}

void vq_disable_kicks(struct virtq *q)
{
	if (!q->ready || q->event_idx)
		return;                    /* with event index the old avail_event suppresses */
	st16(USED_FLAGS(q), VRING_USED_F_NO_NOTIFY);
}

bool vq_enable_kicks(struct virtq *q)
{
	if (!q->ready || q->broken)
		return false;
	if (q->event_idx)
		st16(AVAIL_EVENT(q), q->last_avail);
	else
		st16(USED_FLAGS(q), 0);
	/* Re-check after publishing, or a kick between the last pop and the
	 * store above would be lost. */
	mb();
	return ld16(AVAIL_IDX(q)) != q->last_avail;
}

bool vq_kick_on_more(struct virtq *q)
{
	uint16_t idx;

	if (!q->ready || q->broken)
		return false;
	idx = ld16(AVAIL_IDX(q));
	if (q->event_idx)
		st16(AVAIL_EVENT(q), idx);
	else
		st16(USED_FLAGS(q), 0);
	mb();
	return ld16(AVAIL_IDX(q)) != idx;
}

static size_t copy_iov(const struct vq_chain *c, bool in, size_t skip, void *buf, size_t len, bool to_chain)
{
	unsigned first = in ? c->nout : 0, n = in ? c->nin : c->nout;
	size_t done = 0;

	for (unsigned i = first; i < first + n && done < len; i++) {
		size_t l = c->iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > len - done)
			l = len - done;
		if (to_chain)
			memcpy((uint8_t *)c->iov[i].iov_base + skip, (const uint8_t *)buf + done, l);
		else
			memcpy((uint8_t *)buf + done, (const uint8_t *)c->iov[i].iov_base + skip, l);
		done += l;
		skip = 0;
	}
	return done;
}

size_t vq_copy_from(const struct vq_chain *c, size_t skip, void *dst, size_t len)
{
	return copy_iov(c, false, skip, dst, len, false);
}

size_t vq_copy_to(const struct vq_chain *c, size_t skip, const void *src, size_t len)
{
	return copy_iov(c, true, skip, (void *)(uintptr_t)src, len, true);
}

unsigned vq_iov_slice(const struct vq_chain *c, bool in, size_t skip, size_t len, struct iovec *dst, unsigned max)
{
	unsigned first = in ? c->nout : 0, n = in ? c->nin : c->nout, k = 0;

	for (unsigned i = first; i < first + n && len && k < max; i++) {
		size_t l = c->iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > len)
			l = len;
		dst[k].iov_base = (uint8_t *)c->iov[i].iov_base + skip;
		dst[k].iov_len = l;
		k++;
		len -= l;
		skip = 0;
	}
	return k;
}
