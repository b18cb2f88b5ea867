/* The virtio-pci modern transport (see virtio.h).  Registers follow
 * struct virtio_pci_common_cfg; every access width the guest may use is
 * handled by assembling the register block into bytes, applying the write,
 * and acting on the fields it touched. */
#include "lib/err.h"
#include "lib/log.h"
#include "virtio.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define CAP_COMMON 1
#define CAP_NOTIFY 2
#define CAP_ISR    3
#define CAP_DEVICE 4
#define CAP_PCI    5

/* Offsets in struct virtio_pci_common_cfg. */
#define C_DFSELECT   0x00
#define C_DF         0x04
#define C_GFSELECT   0x08
#define C_GF         0x0c
#define C_MSIX       0x10
#define C_NUMQ       0x12
#define C_STATUS     0x14
#define C_CFGGEN     0x15
#define C_Q_SELECT   0x16
#define C_Q_SIZE     0x18
#define C_Q_MSIX     0x1a
#define C_Q_ENABLE   0x1c
#define C_Q_NOFF     0x1e
#define C_Q_DESC     0x20
#define C_Q_AVAIL    0x28
#define C_Q_USED     0x30
#define C_SIZE       0x40

static uint8_t status_now(struct virtio_dev *v)
{
	return (uint8_t)(v->status | (atomic_load(&v->needs_reset) ? VIRTIO_STATUS_NEEDS_RESET : 0));
}

static void common_snapshot(struct virtio_dev *v, uint8_t *b)
{
	struct virtio_queue_regs *q = v->queue_sel < v->nq ? &v->qr[v->queue_sel] : NULL;

	memset(b, 0, C_SIZE);
	le32_put(b + C_DFSELECT, v->dev_sel);
	le32_put(b + C_DF, v->dev_sel < 2 ? (uint32_t)(v->host_features >> (32 * v->dev_sel)) : 0);
	le32_put(b + C_GFSELECT, v->drv_sel);
	le32_put(b + C_GF, v->drv_sel < 2 ? (uint32_t)(v->guest_features >> (32 * v->drv_sel)) : 0);
	le16_put(b + C_MSIX, v->config_vector);
	le16_put(b + C_NUMQ, (uint16_t)v->nq);
	b[C_STATUS] = status_now(v);
	b[C_CFGGEN] = v->config_gen;
	le16_put(b + C_Q_SELECT, v->queue_sel);
	if (q) {
		le16_put(b + C_Q_SIZE, q->size);
		le16_put(b + C_Q_MSIX, __atomic_load_n(&q->vector, __ATOMIC_RELAXED));
		le16_put(b + C_Q_ENABLE, q->enable);
		le16_put(b + C_Q_NOFF, v->queue_sel);
		le64_put(b + C_Q_DESC, q->desc);
		le64_put(b + C_Q_AVAIL, q->avail);
		le64_put(b + C_Q_USED, q->used);
	}
}

/* ------------------------------------------- back-end completion eventfds */

static void call_ready(void *opaque, uint32_t events)
{
	struct virtio_queue_regs *q = opaque;
	struct virtio_dev *v = q->dev;
	uint16_t vec;
	uint64_t n;

	(void)events;
	if (read(q->call_fd, &n, sizeof(n)) < 0)
		return;
	/* The back-end already decided (event index) that the driver wants
	 * this one; the vector is read now since the driver may move it. */
	atomic_fetch_or(&v->isr, 1);
	vec = __atomic_load_n(&q->vector, __ATOMIC_RELAXED);
	if (vec != VIRTIO_NO_VECTOR)
		pci_msix_notify(&v->pci, vec);
}

/* (Re)binds q->call_fd to the queue's vector; with the transport lock
 * held, or from start/stop.  A queue without a vector wants no
 * interrupts: the count then just waits in the eventfd. */
static void call_bind(struct virtio_dev *v, struct virtio_queue_regs *q)
{
	uint16_t vec = __atomic_load_n(&q->vector, __ATOMIC_RELAXED);

	if (q->call_relayed)
		return;            /* reads the vector itself each time */
	if (q->call_irqfd && q->call_vec == vec)
		return;
	if (q->call_irqfd) {
		pci_msix_unbind_eventfd(&v->pci, q->call_fd);
		q->call_irqfd = false;
	}
	if (vec == VIRTIO_NO_VECTOR)
		return;
	if (pci_msix_bind_eventfd(&v->pci, vec, q->call_fd) == 0) {
		q->call_irqfd = true;
		q->call_vec = vec;
		log_debug("%s: queue %d completions through KVM irqfd (MSI-X vector %u)", v->name, q->idx, vec);
		return;
	}
	if (evloop_add(v->loop, q->call_fd, EPOLLIN, call_ready, q) == 0) {
		q->call_relayed = true;
		log_debug("%s: queue %d completions relayed by the device thread", v->name, q->idx);
	} else {
		log_warn("%s: queue %d: cannot watch the completion eventfd: %s", v->name, q->idx, strerror(errno));
	}
}

void virtio_set_call_fd(struct virtio_dev *v, int qi, int fd)
{
	struct virtio_queue_regs *q = &v->qr[qi];

	if (q->call_fd >= 0) {
		if (q->call_irqfd)
			pci_msix_unbind_eventfd(&v->pci, q->call_fd);
		if (q->call_relayed)
			evloop_del(v->loop, q->call_fd);
		q->call_irqfd = q->call_relayed = false;
	}
	q->call_fd = fd;
	if (fd >= 0)
		call_bind(v, q);
}

/* ----------------------------------------------------- start, stop, reset */

static void do_start(void *arg)
{
	struct virtio_dev *v = arg;
	bool ev = virtio_has(v, VIRTIO_F_EVENT_IDX), ind = virtio_has(v, VIRTIO_F_INDIRECT_DESC);

	for (int i = 0; i < v->nq; i++) {
		struct virtio_queue_regs *q = &v->qr[i];

		vq_reset(&v->vq[i]);
		if (v->ops->backend_rings)
			continue;
		if (q->enable && vq_setup(&v->vq[i], &v->vm->mem, q->size, q->desc, q->avail, q->used, ev, ind) < 0) {
			virtio_fail(v, "queue %d: rings outside guest RAM", i);
			return;
		}
	}
	v->running = true;
	if (v->ops->start && v->ops->start(v) < 0) {
		v->running = false;
		virtio_fail(v, "device start failed");
		return;
	}
	/* Buffers the driver posted before DRIVER_OK. */
	for (int i = 0; i < v->nq && v->running; i++)
		if (v->vq[i].ready && !v->qr[i].external && v->ops->kick)
			v->ops->kick(v, i);
}

static void do_stop(void *arg)
{
	struct virtio_dev *v = arg;

	if (v->running && v->ops->stop)
		v->ops->stop(v);
	v->running = false;
	for (int i = 0; i < v->nq; i++)
		vq_reset(&v->vq[i]);
}

/* Called with v->lock held. */
static void reset_locked(struct virtio_dev *v)
{
	evloop_call(v->loop, do_stop, v);
	v->status = 0;
	atomic_store(&v->needs_reset, false);
	atomic_store(&v->isr, 0);
	v->guest_features = 0;
	v->dev_sel = v->drv_sel = 0;
	v->config_vector = VIRTIO_NO_VECTOR;
	v->queue_sel = 0;
	for (int i = 0; i < v->nq; i++) {
		struct virtio_queue_regs *q = &v->qr[i];

		q->size = q->max;
		__atomic_store_n(&q->vector, VIRTIO_NO_VECTOR, __ATOMIC_RELAXED);
		q->enable = false;
		q->desc = q->avail = q->used = 0;
	}
}

void virtio_reset(struct virtio_dev *v)
{
	pthread_mutex_lock(&v->lock);
	reset_locked(v);
	pthread_mutex_unlock(&v->lock);
}

static void write_status(struct virtio_dev *v, uint8_t s)
{
	if (!s) {
		reset_locked(v);
		return;
	}
	/* Bits are only ever added; clearing them takes a reset. */
	if ((s & VIRTIO_STATUS_FEATURES_OK) && !(v->status & VIRTIO_STATUS_FEATURES_OK) &&
	    ((v->guest_features & ~v->host_features) || !virtio_has(v, VIRTIO_F_VERSION_1)))
		s &= (uint8_t)~VIRTIO_STATUS_FEATURES_OK;
	if ((s & VIRTIO_STATUS_DRIVER_OK) && !((v->status | s) & VIRTIO_STATUS_FEATURES_OK))
		s &= (uint8_t)~VIRTIO_STATUS_DRIVER_OK;
	s &= (uint8_t)~VIRTIO_STATUS_NEEDS_RESET;
	if ((s & VIRTIO_STATUS_DRIVER_OK) && !(v->status & VIRTIO_STATUS_DRIVER_OK)) {
		v->status |= s;
		evloop_call(v->loop, do_start, v);
		return;
	}
	v->status |= s;
}

static void common_write(struct virtio_dev *v, unsigned off, const uint8_t *data, unsigned len)
{
	uint8_t b[C_SIZE];
	struct virtio_queue_regs *q;
#define TOUCHED(f, n) (off < (f) + (n) && (f) < off + len)

	common_snapshot(v, b);
	memcpy(b + off, data, len);
	if (TOUCHED(C_DFSELECT, 4))
		v->dev_sel = le32_get(b + C_DFSELECT);
	if (TOUCHED(C_GFSELECT, 4))
		v->drv_sel = le32_get(b + C_GFSELECT);
	if (TOUCHED(C_GF, 4) && v->drv_sel < 2 && !(v->status & VIRTIO_STATUS_FEATURES_OK)) {
		uint64_t half = (uint64_t)le32_get(b + C_GF) << (32 * v->drv_sel);

		v->guest_features = (v->guest_features & ~(0xffffffffull << (32 * v->drv_sel))) | half;
	}
	if (TOUCHED(C_MSIX, 2)) {
		uint16_t vec = le16_get(b + C_MSIX);

		v->config_vector = vec < v->pci.msix.n ? vec : VIRTIO_NO_VECTOR;
	}
	if (TOUCHED(C_Q_SELECT, 2))
		v->queue_sel = le16_get(b + C_Q_SELECT);
	q = v->queue_sel < v->nq ? &v->qr[v->queue_sel] : NULL;
	if (q && TOUCHED(C_Q_MSIX, 2)) {
		uint16_t vec = le16_get(b + C_Q_MSIX);

		__atomic_store_n(&q->vector, vec < v->pci.msix.n ? vec : VIRTIO_NO_VECTOR, __ATOMIC_RELAXED);
		if (q->call_fd >= 0)
			call_bind(v, q);
	}
	if (q && !q->enable) {
		if (TOUCHED(C_Q_SIZE, 2)) {
			uint16_t n = le16_get(b + C_Q_SIZE);

			/* Split rings: a power of two up to the maximum. */
			if (n && n <= q->max && !(n & (n - 1)))
				q->size = n;
		}
		if (TOUCHED(C_Q_DESC, 8))
			q->desc = le64_get(b + C_Q_DESC);
		if (TOUCHED(C_Q_AVAIL, 8))
			q->avail = le64_get(b + C_Q_AVAIL);
		if (TOUCHED(C_Q_USED, 8))
			q->used = le64_get(b + C_Q_USED);
		/* Enabling checks the rings now, so a driver reading the
		 * register back sees a refusal instead of a dead queue. */
		if (TOUCHED(C_Q_ENABLE, 2) && le16_get(b + C_Q_ENABLE) == 1 &&
		    !(v->status & VIRTIO_STATUS_DRIVER_OK)) {
			if (vq_addrs_ok(&v->vm->mem, q->size, q->desc, q->avail, q->used))
				q->enable = true;
			else
				log_debug("%s: queue %u rings rejected (size %u, 0x%llx/0x%llx/0x%llx)", v->name,
					  v->queue_sel, q->size, (unsigned long long)q->desc,
					  (unsigned long long)q->avail, (unsigned long long)q->used);
		}
	}
	if (TOUCHED(C_STATUS, 1))
		write_status(v, b[C_STATUS]);
#undef TOUCHED
}

/* ------------------------------------------------------------------ BAR0 */

static void bar_rw(struct virtio_dev *v, uint64_t off, uint8_t *data, unsigned len, bool wr)
{
	if (!wr)
		memset(data, 0, len);
	if (off < VIRTIO_BAR_COMMON + C_SIZE && off + len <= C_SIZE) {
		pthread_mutex_lock(&v->lock);
		if (wr) {
			common_write(v, (unsigned)off, data, len);
		} else {
			uint8_t b[C_SIZE];

			common_snapshot(v, b);
			memcpy(data, b + off, len);
		}
		pthread_mutex_unlock(&v->lock);
	} else if (off == VIRTIO_BAR_ISR) {
		/* Reading clears it (and would lower INTx; there is none). */
		if (!wr)
			data[0] = atomic_exchange(&v->isr, 0);
	} else if (off >= VIRTIO_BAR_DEVICE && off - VIRTIO_BAR_DEVICE < v->cfg_size &&
		   len <= v->cfg_size - (off - VIRTIO_BAR_DEVICE)) {
		if (wr && v->ops->cfg_write)
			v->ops->cfg_write(v, (unsigned)(off - VIRTIO_BAR_DEVICE), data, len);
		else if (!wr && v->ops->cfg_read)
			v->ops->cfg_read(v, (unsigned)(off - VIRTIO_BAR_DEVICE), data, len);
	} else if (off >= VIRTIO_BAR_NOTIFY && off < VIRTIO_BAR_NOTIFY + VIRTIO_NOTIFY_MULT * (uint64_t)v->nq) {
		/* Only reached when KVM did not take it through an ioeventfd
		 * (other width, no KVM): the same eventfd, the same path. */
		uint64_t one = 1;
		int qi = (int)((off - VIRTIO_BAR_NOTIFY) / VIRTIO_NOTIFY_MULT);

		if (!wr)
			return;
		if (!v->exit_notify++)
			log_debug("%s: queue %d notified through a vCPU exit (no ioeventfd for this access)",
				  v->name, qi);
		if (write(v->qr[qi].kick_fd, &one, sizeof(one)) < 0) {
			/* counter overflow is impossible with single increments */
		}
	}
}

static void vbar_read(struct pci_dev *d, int bar, uint64_t off, void *data, unsigned len)
{
	if (bar == 0)
		bar_rw(d->opaque, off, data, len, false);
	else
		memset(data, 0, len);
}

static void vbar_write(struct pci_dev *d, int bar, uint64_t off, const void *data, unsigned len)
{
	if (bar == 0)
		bar_rw(d->opaque, off, (uint8_t *)(uintptr_t)data, len, true);
}

/* The ioeventfds follow BAR0 wherever the guest puts it. */
static void ioeventfds(struct virtio_dev *v, uint64_t base, bool assign)
{
	if (v->vm->vm_fd < 0)
		return;
	for (int i = 0; i < v->nq; i++) {
		struct kvm_ioeventfd e = {
			.addr = base + VIRTIO_BAR_NOTIFY + VIRTIO_NOTIFY_MULT * (uint64_t)i,
			.len = 2,
			.fd = v->qr[i].kick_fd,
			.flags = assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN,
		};

		if (ioctl(v->vm->vm_fd, KVM_IOEVENTFD, &e) < 0 && assign)
			log_debug("%s: KVM_IOEVENTFD queue %d: %s (notifications exit to userspace)", v->name, i,
				  strerror(errno));
	}
	v->ioeventfds = assign;
}

static void vbar_map(struct pci_dev *d, int bar, uint64_t addr, bool mapped)
{
	struct virtio_dev *v = d->opaque;

	if (bar != 0)
		return;
	if (v->ioeventfds)
		ioeventfds(v, v->notify_addr, false);
	v->notify_mapped = mapped;
	v->notify_addr = addr;
	if (mapped)
		ioeventfds(v, addr, true);
}

/* VIRTIO_PCI_CAP_PCI_CFG: a window into BAR0 through config space. */
static unsigned pcicap_off(const struct pci_dev *d)
{
	for (unsigned c = d->cfg[PCI_CAP_PTR], n = 0; c && n < 48; c = d->cfg[c + 1], n++)
		if (d->cfg[c] == PCI_CAP_VENDOR && d->cfg[c + 3] == CAP_PCI)
			return c;
	return 0;
}

static bool window(const struct pci_dev *d, unsigned c, uint32_t *off, unsigned *len)
{
	*off = pci_r32(d, c + 8);
	*len = pci_r32(d, c + 12);
	return d->cfg[c + 4] == 0 && (*len == 1 || *len == 2 || *len == 4) && !(*off & (*len - 1)) &&
	       *off <= VIRTIO_BAR_SIZE - *len;
}

static bool vcfg_read(struct pci_dev *d, unsigned off, unsigned len, uint32_t *val)
{
	unsigned c = pcicap_off(d), wl;
	uint32_t woff;
	uint8_t buf[4] = { 0 };

	if (!c || off + len <= c + 16 || off >= c + 20 || !window(d, c, &woff, &wl))
		return false;
	bar_rw(d->opaque, woff, buf, wl, false);
	for (unsigned i = 0; i < len; i++)
		if (off + i >= c + 16 && off + i < c + 20) {
			*val &= ~(0xffu << (8 * i));
			*val |= (uint32_t)buf[off + i - c - 16] << (8 * i);
		}
	return true;
}

static void vcfg_write(struct pci_dev *d, unsigned off, unsigned len, uint32_t val)
{
	unsigned c = pcicap_off(d), wl;
	uint32_t woff;
	uint8_t buf[4];

	(void)val;
	if (!c || off + len <= c + 16 || off >= c + 20 || !window(d, c, &woff, &wl))
		return;
	memcpy(buf, d->cfg + c + 16, 4);
	bar_rw(d->opaque, woff, buf, wl, true);
}

static const struct pci_dev_ops vpci_ops = {
	.bar_read = vbar_read, .bar_write = vbar_write, .bar_map = vbar_map,
	.cfg_read = vcfg_read, .cfg_write = vcfg_write,
};

/* ---------------------------------------------------- device-thread side */

void virtio_notify(struct virtio_dev *v, int q)
{
	uint16_t vec;

	if (!vq_should_notify(&v->vq[q]))
		return;
	atomic_fetch_or(&v->isr, 1);
	vec = __atomic_load_n(&v->qr[q].vector, __ATOMIC_RELAXED);
	if (vec != VIRTIO_NO_VECTOR)
		pci_msix_notify(&v->pci, vec);
}

void virtio_fail(struct virtio_dev *v, const char *fmt, ...)
{
	char why[160];
	va_list ap;
	uint16_t vec;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (atomic_exchange(&v->needs_reset, true))
		return;
	log_warn("%s: %s; the device needs a reset", v->name, why);
	atomic_fetch_or(&v->isr, 2);
	vec = __atomic_load_n(&v->config_vector, __ATOMIC_RELAXED);
	if (vec != VIRTIO_NO_VECTOR)
		pci_msix_notify(&v->pci, vec);
}

static void kick_ready(void *opaque, uint32_t events)
{
	struct virtio_queue_regs *q = opaque;
	struct virtio_dev *v = q->dev;
	int i = q->idx;
	uint64_t n;

	(void)events;
	if (read(q->kick_fd, &n, sizeof(n)) < 0)
		return;
	if (v->running && !atomic_load(&v->needs_reset) && v->vq[i].ready && !q->external && v->ops->kick)
		v->ops->kick(v, i);
}

void virtio_queue_external(struct virtio_dev *v, int qi, bool on)
{
	struct virtio_queue_regs *q = &v->qr[qi];

	if (v->ops->backend_rings || q->external == on)
		return;
	/* Quiet, not removed: the other server never reads the count, so a
	 * level-triggered watch would spin; nothing is allocated either way. */
	if (evloop_mod(v->loop, q->kick_fd, on ? 0 : EPOLLIN) < 0) {
		log_warn("%s: queue %d: epoll on the kick eventfd: %s", v->name, qi, strerror(errno));
		return;
	}
	q->external = on;
}

/* ------------------------------------------------------------ life cycle */

int virtio_init(struct virtio_dev *v, struct vm *vm, const char *name, unsigned type, int nq,
		const uint16_t *qmax, unsigned cfg_size, uint64_t features, uint32_t class_code,
		const struct virtio_ops *ops, void *opaque, struct verr *err)
{
	struct pci_dev *d = &v->pci;
	unsigned c;

	if (nq < 1 || nq > VIRTIO_MAX_QUEUES || cfg_size > 0x1000)
		return verr_set(err, "%s: bad virtio layout (%d queues)", name, nq);
	memset(v, 0, sizeof(*v));
	v->vm = vm;
	v->name = name;
	v->ops = ops;
	v->opaque = opaque;
	v->nq = nq;
	v->cfg_size = cfg_size;
	v->host_features = features | VIRTIO_BIT(VIRTIO_F_VERSION_1);
	if (!ops->backend_rings)
		v->host_features |= VIRTIO_BIT(VIRTIO_F_EVENT_IDX) | VIRTIO_BIT(VIRTIO_F_INDIRECT_DESC);
	pthread_mutex_init(&v->lock, NULL);
	v->qr = calloc((size_t)nq, sizeof(*v->qr));
	v->vq = calloc((size_t)nq, sizeof(*v->vq));
	if (!v->qr || !v->vq)
		return verr_set(err, "out of memory");
	for (int i = 0; i < nq; i++) {
		v->qr[i].kick_fd = v->qr[i].call_fd = -1;
		v->qr[i].dev = v;
		v->qr[i].idx = i;
	}
	if (!(v->loop = evloop_new(vm, name, err)))
		return -1;
	for (int i = 0; i < nq; i++) {
		v->qr[i].max = qmax[i];
		v->qr[i].kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (v->qr[i].kick_fd < 0)
			return verr_errno(err, "%s: eventfd", name);
	}
	reset_locked(v);

	pci_dev_init(d, vm, name, PCI_VENDOR_REDHAT_QUMRANET, (uint16_t)(0x1040 + type), 1, class_code,
		     PCI_VENDOR_REDHAT_QUMRANET, 0x1100);
	d->ops = &vpci_ops;
	d->opaque = v;
	pci_add_bar(d, 0, VIRTIO_BAR_SIZE, PCI_BAR_64);
	if (pci_add_msix(d, (unsigned)nq + 1, 0, VIRTIO_BAR_MSIX, VIRTIO_BAR_PBA) < 0)
		return verr_set(err, "%s: MSI-X set-up failed", name);
	/* virtio_pci_cap: vndr, next, len, type, bar, id, pad[2], offset, length */
#define VCAP(type_, len_, off_, size_)                                         \
	do {                                                                   \
		c = pci_add_cap(d, PCI_CAP_VENDOR, len_);                      \
		d->cfg[c + 2] = (len_);                                        \
		d->cfg[c + 3] = (type_);                                       \
		pci_w32(d, c + 8, (off_));                                     \
		pci_w32(d, c + 12, (size_));                                   \
	} while (0)
	VCAP(CAP_COMMON, 16, VIRTIO_BAR_COMMON, C_SIZE);
	VCAP(CAP_NOTIFY, 20, VIRTIO_BAR_NOTIFY, VIRTIO_NOTIFY_MULT * (unsigned)nq);
	pci_w32(d, c + 16, VIRTIO_NOTIFY_MULT);
	VCAP(CAP_ISR, 16, VIRTIO_BAR_ISR, 1);
	if (cfg_size)
		VCAP(CAP_DEVICE, 16, VIRTIO_BAR_DEVICE, cfg_size);
	VCAP(CAP_PCI, 20, 0, 0);
	/* bar, offset, length and data of the PCI-cfg window are the driver's. */
	d->wmask[c + 4] = 0xff;
	for (unsigned i = 8; i < 20; i++)
		d->wmask[c + i] = 0xff;
#undef VCAP
	for (int i = 0; i < nq && !ops->backend_rings; i++)
		if (evloop_add(v->loop, v->qr[i].kick_fd, EPOLLIN, kick_ready, &v->qr[i]) < 0)
			return verr_errno(err, "%s: epoll", name);
	return pci_register(vm, d, err);
}

int virtio_start_thread(struct virtio_dev *v, struct verr *err)
{
	return evloop_start(v->loop, err);
}

/* At exit, after the vCPUs stopped: stop the device, its thread, and free. */
void virtio_free(struct virtio_dev *v)
{
	if (!v->vm)
		return;
	if (v->loop) {
		evloop_call(v->loop, do_stop, v);
		evloop_free(v->loop);
		v->loop = NULL;
	}
	if (v->pci.slot > 0) {
		if (v->ioeventfds)
			ioeventfds(v, v->notify_addr, false);
		pci_unregister(&v->pci);
	}
	pci_dev_free(&v->pci);
	for (int i = 0; v->qr && i < v->nq; i++)
		if (v->qr[i].kick_fd >= 0)
			close(v->qr[i].kick_fd);
	free(v->qr);
	free(v->vq);
	v->qr = NULL;
	v->vq = NULL;
	pthread_mutex_destroy(&v->lock);
	v->vm = NULL;
}
