/* The virtio-pci modern transport (virtio 1.x, section 4.1) for device
 * models.  A device model fills in virtio_ops and calls virtio_init; the
 * transport gives it a PCI function with the common/notify/ISR/device/
 * PCI-cfg capabilities in BAR0, MSI-X (one vector per queue plus config),
 * an ioeventfd per queue and a device thread.
 *
 * Threads: start, stop and kick run in the device's own thread (evloop),
 * so queue state and backend state are only touched there.  cfg_read and
 * cfg_write run in a vCPU thread. */
#ifndef HV_VIRTIO_H
#define HV_VIRTIO_H

#include "lib/err.h"
#include "pci.h"
#include "virtq.h"

#define VIRTIO_F_INDIRECT_DESC  28
#define VIRTIO_F_EVENT_IDX      29
#define VIRTIO_F_VERSION_1      32
#define VIRTIO_BIT(b)           (1ull << (b))

#define VIRTIO_STATUS_ACK         1
#define VIRTIO_STATUS_DRIVER      2
#define VIRTIO_STATUS_DRIVER_OK   4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 0x40
#define VIRTIO_STATUS_FAILED      0x80

#define VIRTIO_NO_VECTOR 0xffff

/* Virtio device types. */
#define VIRTIO_ID_NET     1
#define VIRTIO_ID_BLOCK   2
#define VIRTIO_ID_CONSOLE 3
#define VIRTIO_ID_VSOCK   19
#define VIRTIO_ID_FS      26

/* BAR0 layout. */
#define VIRTIO_BAR_COMMON  0x0000
#define VIRTIO_BAR_ISR     0x1000
#define VIRTIO_BAR_DEVICE  0x2000
#define VIRTIO_BAR_NOTIFY  0x3000
#define VIRTIO_NOTIFY_MULT 4
#define VIRTIO_BAR_MSIX    0x4000
#define VIRTIO_BAR_PBA     0x5000
#define VIRTIO_BAR_SIZE    0x8000
#define VIRTIO_MAX_QUEUES  64

struct virtio_dev;

struct virtio_ops {
	/* Device-specific configuration (offset within cfg_size). */
	void (*cfg_read)(struct virtio_dev *v, unsigned off, void *data, unsigned len);
	void (*cfg_write)(struct virtio_dev *v, unsigned off, const void *data, unsigned len);
	/* DRIVER_OK: features are final and the enabled queues are set up.
	 * Returning -1 makes the device ask for a reset. */
	int (*start)(struct virtio_dev *v);
	/* Reset: after this, nothing may touch the queues or guest memory. */
	void (*stop)(struct virtio_dev *v);
	/* The driver notified queue q (or start found buffers waiting). */
	void (*kick)(struct virtio_dev *v, int q);
	/* The rings are served by another process (vhost-user): the
	 * transport neither polls the kick eventfds (the back-end gets them)
	 * nor maps the rings, and offers no ring features of its own (the
	 * device offers what the back-end has). */
	bool backend_rings;
};

struct virtio_queue_regs {
	struct virtio_dev *dev;
	int idx;
	uint16_t size, max, vector;
	bool enable;
	uint64_t desc, avail, used;
	int kick_fd;               /* eventfd: KVM ioeventfd target */
	/* Set by virtio_set_call_fd: a back-end's completion eventfd, bound
	 * to the queue's vector with KVM_IRQFD, or read here (relayed). */
	int call_fd;
	bool call_irqfd, call_relayed;
	uint16_t call_vec;         /* the vector call_fd is bound to */
	bool external;             /* virtio_queue_external: kicks not polled */
};

struct virtio_dev {
	struct pci_dev pci;
	struct vm *vm;
	const char *name;
	const struct virtio_ops *ops;
	void *opaque;
	struct evloop *loop;
	pthread_mutex_t lock;      /* transport registers (vCPU side) */
	uint64_t host_features, guest_features;
	uint32_t dev_sel, drv_sel;
	uint16_t config_vector, queue_sel;
	uint8_t status, config_gen;
	atomic_bool needs_reset;   /* set by the device thread, read into status */
	atomic_uchar isr;
	bool running;              /* device thread: started and not reset */
	int nq;
	struct virtq *vq;
	struct virtio_queue_regs *qr;
	unsigned cfg_size;
	bool notify_mapped;
	uint64_t notify_addr;
	bool ioeventfds;           /* registered with KVM */
	unsigned long exit_notify; /* notifications that took a vCPU exit */
};

/* Sets up the PCI function, BAR, capabilities, MSI-X, kick eventfds and
 * the device thread; the device then appears on the bus. */
int virtio_init(struct virtio_dev *v, struct vm *vm, const char *name, unsigned type, int nq,
		const uint16_t *qmax, unsigned cfg_size, uint64_t features, uint32_t class_code,
		const struct virtio_ops *ops, void *opaque, struct verr *err);
/* Starts the device thread (after the model's own fds are added). */
int virtio_start_thread(struct virtio_dev *v, struct verr *err);
void virtio_free(struct virtio_dev *v);
/* Device thread: interrupt the driver for queue q if it wants one. */
void virtio_notify(struct virtio_dev *v, int q);
/* Device thread, from the device's start or stop (the transport's lock is
 * held for them by the vCPU that asked): queue q's completions are
 * signalled by another process on eventfd fd.  With KVM it becomes a
 * second irqfd of the queue's MSI-X vector (and follows the vector if the
 * driver changes it); without, the device thread reads it and interrupts.
 * fd -1 undoes it. */
void virtio_set_call_fd(struct virtio_dev *v, int q, int fd);
/* Device thread, from the device's start or stop: queue q is served by
 * someone else (the kernel's vhost) from now on, so the device thread
 * stops polling its kick eventfd, which that server gets; off gives the
 * queue back.  Unlike backend_rings, per queue: a device may serve some
 * of its queues itself (virtio-net's control queue). */
void virtio_queue_external(struct virtio_dev *v, int q, bool on);
/* Device thread: the guest broke the protocol; ask for a reset. */
void virtio_fail(struct virtio_dev *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline bool virtio_has(const struct virtio_dev *v, unsigned bit)
{
	return v->guest_features & VIRTIO_BIT(bit);
}
/* Snapshots (hv/README.md, "Snapshots"), with the guest paused and so
 * the device thread held: the transport's registers and each queue's
 * ring addresses and indexes.  virtio_load reads one device's record at r
 * and checks it against this device (the features it offers, queue
 * sizes, rings inside RAM, indexes within the ring, vectors inside the
 * MSI-X table); with apply it then sets it in the device thread: rings
 * mapped, the device started if the driver had started it, and each
 * ready queue's kick eventfd written, so what its ring holds is served
 * once the thread is released (after RAM is back). */
struct snap_buf;
struct snap_rd;
void virtio_save(struct virtio_dev *v, struct snap_buf *b);
int virtio_load(struct virtio_dev *v, struct snap_rd *r, bool apply, struct verr *err);
/* Fuzzer and tests: reset the device as a driver writing status 0 would. */
void virtio_reset(struct virtio_dev *v);

/* virtio-net's data path and userspace frame counters for the control
 * socket's status (dev_virtio_net.c): the k-th --net device in command-line
 * order; false when there is none. */
struct vnet_status {
	const char *name;
	bool vhost;                /* this start (or the next) runs on vhost-net */
	unsigned long rx_frames, tx_frames, rx_drops, tx_drops, vhost_starts, vhost_refused;
};
bool virtio_net_status(struct vm *vm, int k, struct vnet_status *st);

/* Little-endian field helpers for device config structs. */
static inline void le16_put(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void le32_put(uint8_t *p, uint32_t v) { le16_put(p, (uint16_t)v); le16_put(p + 2, (uint16_t)(v >> 16)); }
static inline void le64_put(uint8_t *p, uint64_t v) { le32_put(p, (uint32_t)v); le32_put(p + 4, (uint32_t)(v >> 32)); }
static inline uint16_t le16_get(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t le32_get(const uint8_t *p) { return le16_get(p) | (uint32_t)le16_get(p + 2) << 16; }
static inline uint64_t le64_get(const uint8_t *p) { return le32_get(p) | (uint64_t)le32_get(p + 4) << 32; }
/* Copies [off, off+len) of a config struct of size n, zeros past its end. */
static inline void cfg_copy_out(const uint8_t *cfg, size_t n, unsigned off, void *data, unsigned len)
{
	for (unsigned i = 0; i < len; i++)
		((uint8_t *)data)[i] = off + i < n ? cfg[off + i] : 0;
}

#endif
