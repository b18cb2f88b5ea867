/* Snapshots of the virtio-pci transport and its split queues (virtio.h).
 * A snapshot is as hostile as a guest: every value is checked the way the
 * guest's register write would be (and more: indexes against the ring),
 * before anything is set. */
#include "lib/err.h"
#include "snapshot.h"
#include "virtio.h"

#include <string.h>
#include <unistd.h>

#define F_NEEDS_RESET 1u
#define F_RUNNING     2u
#define Q_READY  1u
#define Q_BROKEN 2u
#define Q_SIGNALLED_VALID 4u
#define STATUS_BITS (VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK | \
		     VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_FAILED)

struct qstate {
	uint32_t size, vector, enable, flags, last_avail, used_idx, signalled_used;
	uint64_t desc, avail, used;
};

struct vstate {
	uint64_t host_features, guest_features;
	uint32_t dev_sel, drv_sel, config_vector, queue_sel, status, config_gen, flags, isr, nq;
	struct qstate q[VIRTIO_MAX_QUEUES];
};

/* In the device thread: the queues are its own. */
static void get_state(void *arg)
{
	struct virtio_dev *v = ((void **)arg)[0];
	struct vstate *s = ((void **)arg)[1];

	s->host_features = v->host_features;
	s->guest_features = v->guest_features;
	s->dev_sel = v->dev_sel;
	s->drv_sel = v->drv_sel;
	s->config_vector = v->config_vector;
	s->queue_sel = v->queue_sel;
	s->status = v->status;
	s->config_gen = v->config_gen;
	s->flags = (atomic_load(&v->needs_reset) ? F_NEEDS_RESET : 0) | (v->running ? F_RUNNING : 0);
	s->isr = atomic_load(&v->isr);
	s->nq = (uint32_t)v->nq;
	for (int i = 0; i < v->nq; i++) {
		const struct virtio_queue_regs *r = &v->qr[i];
		const struct virtq *q = &v->vq[i];

		s->q[i] = (struct qstate){
			.size = r->size, .vector = __atomic_load_n(&r->vector, __ATOMIC_RELAXED),
			.enable = r->enable, .desc = r->desc, .avail = r->avail, .used = r->used,
			.flags = (q->ready ? Q_READY : 0) | (q->broken ? Q_BROKEN : 0) |
				 (q->signalled_valid ? Q_SIGNALLED_VALID : 0),
			.last_avail = q->last_avail, .used_idx = q->used_idx, .signalled_used = q->signalled_used,
		};
	}
}

void virtio_save(struct virtio_dev *v, struct snap_buf *b)
{
	struct vstate s;
	void *arg[2] = { v, &s };

	pthread_mutex_lock(&v->lock);
	evloop_call(v->loop, get_state, arg);
	pthread_mutex_unlock(&v->lock);
	sb_u64(b, s.host_features);
	sb_u64(b, s.guest_features);
	sb_u32(b, s.dev_sel);
	sb_u32(b, s.drv_sel);
	sb_u32(b, s.config_vector);
	sb_u32(b, s.queue_sel);
	sb_u32(b, s.status);
	sb_u32(b, s.config_gen);
	sb_u32(b, s.flags);
	sb_u32(b, s.isr);
	sb_u32(b, s.nq);
	for (uint32_t i = 0; i < s.nq; i++) {
		const struct qstate *q = &s.q[i];

		sb_u32(b, q->size);
		sb_u32(b, q->vector);
		sb_u32(b, q->enable);
		sb_u64(b, q->desc);
		sb_u64(b, q->avail);
		sb_u64(b, q->used);
		sb_u32(b, q->flags);
		sb_u32(b, q->last_avail);
		sb_u32(b, q->used_idx);
		sb_u32(b, q->signalled_used);
	}
}

static bool vector_ok(const struct virtio_dev *v, uint32_t vec)
{
	return vec == VIRTIO_NO_VECTOR || vec < v->pci.msix.n;
}

static int check_queue(const struct virtio_dev *v, int i, const struct qstate *q, bool running, struct verr *err)
{
	const struct virtio_queue_regs *r = &v->qr[i];

	if (!q->size || q->size > r->max || (q->size & (q->size - 1)))
		return verr_set(err, "%s: queue %d: size %u (a power of two up to %u)", v->name, i, q->size, r->max);
	if (!vector_ok(v, q->vector))
		return verr_set(err, "%s: queue %d: MSI-X vector %u outside the table of %u", v->name, i, q->vector,
				v->pci.msix.n);
	if (q->enable > 1 || (q->flags & ~(Q_READY | Q_BROKEN | Q_SIGNALLED_VALID)))
		return verr_set(err, "%s: queue %d: enable %u, flags 0x%x", v->name, i, q->enable, q->flags);
	if (q->enable && !vq_addrs_ok(&v->vm->mem, (uint16_t)q->size, q->desc, q->avail, q->used))
		return verr_set(err, "%s: queue %d: rings 0x%llx/0x%llx/0x%llx of %u entries outside guest RAM or "
			       "misaligned", v->name, i, (unsigned long long)q->desc, (unsigned long long)q->avail,
			       (unsigned long long)q->used, q->size);
	if (q->last_avail > 0xffff || q->used_idx > 0xffff || q->signalled_used > 0xffff)
		return verr_set(err, "%s: queue %d: an index above 65535", v->name, i);
	if (!(q->flags & Q_READY)) {
		if (q->flags || q->last_avail || q->used_idx || q->signalled_used)
			return verr_set(err, "%s: queue %d: indexes on a queue that is not running", v->name, i);
		return 0;
	}
	if (!q->enable || !running || v->ops->backend_rings)
		return verr_set(err, "%s: queue %d: running, but %s", v->name, i,
				!q->enable ? "not enabled" : !running ? "the device is not" : "its rings are a back-end's");
	/* Chains taken from the ring and not yet given back: at most a ring. */
	if ((uint16_t)(q->last_avail - q->used_idx) > q->size)
		return verr_set(err, "%s: queue %d: %u chains in flight in a ring of %u", v->name, i,
				(uint16_t)(q->last_avail - q->used_idx), q->size);
	return 0;
}

struct load_arg {
	struct virtio_dev *v;
	const struct vstate *s;
};

/* In the device thread, as a reset and a start would. */
static void set_state(void *arg)
{
	struct load_arg *a = arg;
	struct virtio_dev *v = a->v;
	const struct vstate *s = a->s;
	bool ev, ind;

	if (v->running && v->ops->stop)
		v->ops->stop(v);
	v->running = false;
	v->guest_features = s->guest_features;
	v->dev_sel = s->dev_sel;
	v->drv_sel = s->drv_sel;
	v->config_vector = (uint16_t)s->config_vector;
	v->queue_sel = (uint16_t)s->queue_sel;
	v->status = (uint8_t)s->status;
	v->config_gen = (uint8_t)s->config_gen;
	atomic_store(&v->needs_reset, !!(s->flags & F_NEEDS_RESET));
	atomic_store(&v->isr, (unsigned char)s->isr);
	ev = virtio_has(v, VIRTIO_F_EVENT_IDX);
	ind = virtio_has(v, VIRTIO_F_INDIRECT_DESC);
	for (int i = 0; i < v->nq; i++) {
		const struct qstate *q = &s->q[i];
		struct virtio_queue_regs *r = &v->qr[i];
		struct virtq *vq = &v->vq[i];

		r->size = (uint16_t)q->size;
		__atomic_store_n(&r->vector, (uint16_t)q->vector, __ATOMIC_RELAXED);
		r->enable = q->enable;
		r->desc = q->desc;
		r->avail = q->avail;
		r->used = q->used;
		vq_reset(vq);
		if (!(q->flags & Q_READY))
			continue;
		if (vq_setup(vq, &v->vm->mem, r->size, r->desc, r->avail, r->used, ev, ind) < 0)
			continue;          /* checked before: cannot happen */
		vq->broken = q->flags & Q_BROKEN;
		vq->signalled_valid = q->flags & Q_SIGNALLED_VALID;
		vq->last_avail = (uint16_t)q->last_avail;
		vq->used_idx = (uint16_t)q->used_idx;
		vq->signalled_used = (uint16_t)q->signalled_used;
	}
	if (!(s->flags & F_RUNNING))
		return;
	v->running = true;
	if (v->ops->start && v->ops->start(v) < 0) {
		v->running = false;
		virtio_fail(v, "device start failed after a restore");
		return;
	}
	for (int i = 0; i < v->nq; i++) {
		uint64_t one = 1;

		if (v->vq[i].ready && write(v->qr[i].kick_fd, &one, sizeof(one)) < 0) {
			/* an eventfd write fails only on overflow */
		}
	}
}

int virtio_load(struct virtio_dev *v, struct snap_rd *r, bool apply, struct verr *err)
{
	struct vstate s;
	bool running;

	memset(&s, 0, sizeof(s));
	s.host_features = rd_u64(r);
	s.guest_features = rd_u64(r);
	s.dev_sel = rd_u32(r);
	s.drv_sel = rd_u32(r);
	s.config_vector = rd_u32(r);
	s.queue_sel = rd_u32(r);
	s.status = rd_u32(r);
	s.config_gen = rd_u32(r);
	s.flags = rd_u32(r);
	s.isr = rd_u32(r);
	s.nq = rd_u32(r);
	if (r->bad)
		return verr_set(err, "%s: transport state cut short", v->name);
	if (s.nq != (uint32_t)v->nq)
		return verr_set(err, "%s: %u queues, this device has %d", v->name, s.nq, v->nq);
	if (s.host_features != v->host_features)
		return verr_set(err, "%s: offered features 0x%llx, this device offers 0x%llx", v->name,
				(unsigned long long)s.host_features, (unsigned long long)v->host_features);
	if ((s.status & ~(uint32_t)STATUS_BITS) ||
	    ((s.status & VIRTIO_STATUS_DRIVER_OK) && !(s.status & VIRTIO_STATUS_FEATURES_OK)))
		return verr_set(err, "%s: device status 0x%x no driver can reach", v->name, s.status);
	if ((s.status & VIRTIO_STATUS_FEATURES_OK) &&
	    ((s.guest_features & ~s.host_features) || !(s.guest_features & VIRTIO_BIT(VIRTIO_F_VERSION_1))))
		return verr_set(err, "%s: accepted features 0x%llx beyond those offered", v->name,
				(unsigned long long)s.guest_features);
	if (!vector_ok(v, s.config_vector) || s.queue_sel > 0xffff || s.config_gen > 0xff || s.isr > 3 ||
	    (s.flags & ~(F_NEEDS_RESET | F_RUNNING)))
		return verr_set(err, "%s: configuration vector %u, queue select %u, generation %u, ISR %u or flags "
			       "0x%x out of range", v->name, s.config_vector, s.queue_sel, s.config_gen, s.isr, s.flags);
	running = s.flags & F_RUNNING;
	if (running && !(s.status & VIRTIO_STATUS_DRIVER_OK))
		return verr_set(err, "%s: running before the driver said DRIVER_OK", v->name);
	for (int i = 0; i < v->nq; i++) {
		struct qstate *q = &s.q[i];

		q->size = rd_u32(r);
		q->vector = rd_u32(r);
		q->enable = rd_u32(r);
		q->desc = rd_u64(r);
		q->avail = rd_u64(r);
		q->used = rd_u64(r);
		q->flags = rd_u32(r);
		q->last_avail = rd_u32(r);
		q->used_idx = rd_u32(r);
		q->signalled_used = rd_u32(r);
		if (r->bad)
			return verr_set(err, "%s: queue %d: state cut short", v->name, i);
		if (check_queue(v, i, q, running, err) < 0)
			return -1;
	}
	if (apply) {
		struct load_arg a = { v, &s };

		pthread_mutex_lock(&v->lock);
		evloop_call(v->loop, set_state, &a);
		pthread_mutex_unlock(&v->lock);
	}
	return 0;
}
