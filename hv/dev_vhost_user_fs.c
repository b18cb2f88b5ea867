/* vhost-user-fs: a virtio-fs device (virtio ID 26) whose queues a
 * vhost-user back-end serves, e.g. virtiofsd sharing a host directory.
 * vhpc-hv is the front-end: it owns the PCI function, the config space
 * (tag, number of request queues) and the feature negotiation with the
 * guest, and hands the back-end guest RAM (the memfd, by SCM_RIGHTS), the
 * ring addresses and two eventfds per queue.  From then on the back-end
 * and the guest talk without vhpc-hv: a notify write goes to the back-end
 * through KVM's ioeventfd, a completion to the guest through KVM's irqfd
 * on the queue's MSI-X vector.
 *
 * The back-end is another process and may misbehave or die: every reply
 * is checked (hv/vhost_user.c), every call has a time limit, and a socket
 * that closes or says something unasked is noticed by the device thread.
 * At set-up that is a start-up error; once the guest runs, the device asks
 * for a reset (DEVICE_NEEDS_RESET) and stays that way, since there is no
 * reconnection: the connection is closed on the first error.
 *
 *   --fs tag=TAG,socket=PATH[,queues=N][,queue-size=N][,timeout=MS]
 *   (YAML: fs: [{tag:, socket:, queues:, queue_size:, timeout:}])
 *
 * PATH is the back-end's listening unix socket, or /dev/fd/N, a socket
 * the starter already connected.  queues= is the number of request queues
 * (the hiprio queue comes on top); timeout= bounds each exchange with the
 * back-end. */
#include "lib/config.h"
#include "lib/err.h"
#include "lib/log.h"
#include "vhost_user.h"
#include "virtio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define FS_MAX         8
#define FS_TAG_MAX     36          /* virtio_fs_config.tag: not NUL-terminated when full */
#define FS_MAX_REQ_Q   8
#define FS_MAX_Q       (1 + FS_MAX_REQ_Q)
#define FS_CFG_SIZE    40          /* tag[36], le32 num_request_queues */
/* Long enough for a back-end that is swapping or traced, short enough
 * that a vCPU resetting the device is not stuck for good. */
#define FS_TIMEOUT_MS  10000

struct fs_cfg {
	char *tag, *socket;
	long long queues, queue_size, timeout;
};

static const struct cf_field fs_fields[] = {
	{ .key = "tag", .kind = CF_STR, .off = offsetof(struct fs_cfg, tag), .flags = CF_REQUIRED },
	{ .key = "socket", .kind = CF_STR, .off = offsetof(struct fs_cfg, socket), .flags = CF_REQUIRED },
	{ .key = "queues", .kind = CF_INT, .off = offsetof(struct fs_cfg, queues), .min = 1, .max = FS_MAX_REQ_Q },
	{ .key = "queue_size", .kind = CF_INT, .off = offsetof(struct fs_cfg, queue_size), .min = 2, .max = VQ_MAX_SIZE },
	{ .key = "timeout", .kind = CF_INT, .off = offsetof(struct fs_cfg, timeout), .min = 100, .max = 600000 },
	{ 0 }
};
static const struct cf_schema fs_schema = { "fs", sizeof(struct fs_cfg), fs_fields };

static int fs_check(void *inst, const char *where, struct verr *err)
{
	struct fs_cfg *c = inst;

	if (!c->tag || !c->tag[0])
		return verr_set(err, "%s: tag= (the name the guest mounts) is required", where);
	if (strlen(c->tag) > FS_TAG_MAX)
		return verr_set(err, "%s: tag= is at most %d bytes (virtio-fs config space), '%s' has %zu", where,
				FS_TAG_MAX, c->tag, strlen(c->tag));
	if (!c->socket || !c->socket[0])
		return verr_set(err, "%s: socket= (the vhost-user back-end's socket) is required", where);
	if (!c->queues)
		c->queues = 1;
	if (!c->queue_size)
		c->queue_size = VQ_MAX_SIZE;
	if (!c->timeout)
		c->timeout = FS_TIMEOUT_MS;
	if (c->queue_size & (c->queue_size - 1))
		return verr_set(err, "%s: queue-size=%lld is not a power of two", where, c->queue_size);
	return 0;
}

static const struct hv_devopt fs_opt = {
	.name = "fs", .usage = "tag=TAG,socket=PATH|/dev/fd/N[,queues=N][,queue-size=N][,timeout=MS]", .schema = &fs_schema,
	.max = FS_MAX, .check = fs_check,
};
HV_DEVICE_OPTION(fs_opt);

struct vfs {
	struct virtio_dev v;
	char name[16];
	struct vhu_conn c;
	bool watched;              /* c.fd is in the device's event loop */
	uint64_t backend_features;
	int nq;
	int call_fd[FS_MAX_Q];
	bool started[FS_MAX_Q];
	uint8_t cfg[FS_CFG_SIZE];
	struct vfs *prev;          /* created before it; the VM's slot holds the newest */
};

HV_DEVICE_DECLARE(vhost_user_fs);

/* Ring features pass through from the back-end; device feature bits of
 * virtio-fs (notification queue) need a back-end and guest support that
 * this device does not wire up. */
#define FS_PASS_FEATURES (VIRTIO_BIT(VIRTIO_F_INDIRECT_DESC) | VIRTIO_BIT(VIRTIO_F_EVENT_IDX))

static void fs_cfg_read(struct virtio_dev *v, unsigned off, void *data, unsigned len)
{
	struct vfs *f = v->opaque;

	cfg_copy_out(f->cfg, sizeof(f->cfg), off, data, len);
}

/* Device thread: the connection is gone for good. */
static void fs_drop(struct vfs *f)
{
	if (f->watched) {
		evloop_del(f->v.loop, f->c.fd);
		f->watched = false;
	}
	vhu_close(&f->c);
}

static void fs_lost(struct vfs *f)
{
	log_err("%s: vhost-user back-end lost (%s); connection closed, the device stays broken", f->name, f->c.err);
	fs_drop(f);
	virtio_fail(&f->v, "vhost-user back-end lost");
}

/* The back-end never speaks unasked (no back-end channel is set up), so
 * the socket being readable outside a call means it closed or broke the
 * protocol. */
static void fs_sock_event(void *opaque, uint32_t events)
{
	struct vfs *f = opaque;
	uint8_t b;
	ssize_t r;

	if (f->c.fd < 0)
		return;
	r = recv(f->c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EINTR) && !(events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
		return;
	snprintf(f->c.err, sizeof(f->c.err), "%s",
		 r > 0 ? "the back-end sent a message nobody asked for" : "the back-end closed the connection");
	f->c.broken = true;
	fs_lost(f);
}

static void fs_unbind_calls(struct vfs *f)
{
	for (int i = 0; i < f->nq; i++)
		if (f->started[i]) {
			virtio_set_call_fd(&f->v, i, -1);
			f->started[i] = false;
		}
}

static int fs_start(struct virtio_dev *v)
{
	struct vfs *f = v->opaque;
	struct vhu_region r[2];
	struct vhu_msg m;
	bool pf = f->backend_features & VIRTIO_BIT(VHU_F_PROTOCOL_FEATURES);
	int n = 0;

	if (f->c.fd < 0) {
		virtio_fail(v, "the vhost-user back-end is gone (%s)", f->c.err[0] ? f->c.err : "closed");
		return -1;
	}
	/* The features the driver took, plus vhost-user's own bit: without
	 * it the back-end would not expect SET_VRING_ENABLE. */
	if (vhu_set_u64(&f->c, VHU_SET_FEATURES, v->guest_features | (pf ? VIRTIO_BIT(VHU_F_PROTOCOL_FEATURES) : 0)) < 0)
		goto lost;
	for (int i = 0; i < v->vm->mem.nslots; i++) {
		const struct mem_slot *s = &v->vm->mem.slot[i];

		r[n++] = (struct vhu_region){ .gpa = s->gpa, .size = s->size,
					      .uaddr = (uint64_t)(uintptr_t)(v->vm->mem.host + s->ram_off),
					      .mmap_offset = s->ram_off, .fd = v->vm->mem.fd };
	}
	if (vhu_msg_mem_table(&m, r, (unsigned)n) < 0 || vhu_call(&f->c, &m, NULL) < 0)
		goto lost;
	for (int i = 0; i < f->nq; i++) {
		const struct virtio_queue_regs *q = &v->qr[i];
		const struct guest_mem *gm = &v->vm->mem;
		void *d, *a, *u;

		if (!q->enable)
			continue;
		/* Checked when the driver enabled the queue; user addresses
		 * are what the back-end translates with the table above. */
		d = gm_ptr(gm, q->desc, 16ull * q->size);
		a = gm_ptr(gm, q->avail, 6 + 2ull * q->size);
		u = gm_ptr(gm, q->used, 6 + 8ull * q->size);
		if (!d || !a || !u) {
			fs_unbind_calls(f);
			virtio_fail(v, "queue %d: rings outside guest RAM", i);
			return -1;
		}
		/* Bound before the back-end has the fd, so nothing it signals
		 * is lost (the count waits in the eventfd). */
		virtio_set_call_fd(v, i, f->call_fd[i]);
		f->started[i] = true;
		vhu_msg_addr(&m, (uint32_t)i, (uint64_t)(uintptr_t)d, (uint64_t)(uintptr_t)u, (uint64_t)(uintptr_t)a);
		if (vhu_set_state(&f->c, VHU_SET_VRING_NUM, (uint32_t)i, q->size) < 0 ||
		    vhu_set_state(&f->c, VHU_SET_VRING_BASE, (uint32_t)i, 0) < 0 || vhu_call(&f->c, &m, NULL) < 0)
			goto lost;
		vhu_msg_vring_fd(&m, VHU_SET_VRING_CALL, (uint32_t)i, f->call_fd[i]);
		if (vhu_call(&f->c, &m, NULL) < 0)
			goto lost;
		/* The kick fd last: receiving it starts the ring. */
		vhu_msg_vring_fd(&m, VHU_SET_VRING_KICK, (uint32_t)i, q->kick_fd);
		if (vhu_call(&f->c, &m, NULL) < 0)
			goto lost;
	}
	for (int i = 0; pf && i < f->nq; i++)
		if (f->started[i] && vhu_set_state(&f->c, VHU_SET_VRING_ENABLE, (uint32_t)i, 1) < 0)
			goto lost;
	log_debug("%s: started: features 0x%llx, %d ring(s) handed to the back-end", f->name,
		  (unsigned long long)v->guest_features, f->nq);
	return 0;
lost:
	fs_unbind_calls(f);
	fs_lost(f);
	return -1;
}

static void fs_stop(struct virtio_dev *v)
{
	struct vfs *f = v->opaque;
	bool exiting = atomic_load(&v->vm->exit_status) >= 0;

	/* GET_VRING_BASE stops each ring; the base itself is of no use, since
	 * the driver starts from scratch after a reset.  When vhpc-hv is
	 * ending, closing the socket stops the back-end's rings anyway. */
	for (int i = 0; i < f->nq && f->c.fd >= 0 && !exiting; i++) {
		uint32_t base;

		if (!f->started[i])
			continue;
		if (vhu_get_vring_base(&f->c, (uint32_t)i, &base) < 0) {
			fs_lost(f);
			break;
		}
		log_debug("%s: ring %d stopped at %u", f->name, i, base);
	}
	fs_unbind_calls(f);
}

static const struct virtio_ops fs_ops = {
	.cfg_read = fs_cfg_read, .start = fs_start, .stop = fs_stop, .backend_rings = true,
};

/* Set-up: the handshake that needs no guest.  Any failure is a start-up
 * error of vhpc-hv. */
static int fs_handshake(struct vfs *f, const struct fs_cfg *c, const char *where, uint64_t *protocol,
			uint64_t *maxq, struct verr *err)
{
	uint64_t want = 0, pf = 0;

	*maxq = 0;
	if (vhu_connect(&f->c, c->socket, (int)c->timeout) < 0)
		return verr_set(err, "%s: %s", where, f->c.err);
	if (vhu_get_u64(&f->c, VHU_GET_FEATURES, &f->backend_features) < 0)
		goto bad;
	if (!(f->backend_features & VIRTIO_BIT(VIRTIO_F_VERSION_1)))
		return verr_set(err, "%s: the vhost-user back-end does not offer VIRTIO_F_VERSION_1 (features 0x%llx)",
				where, (unsigned long long)f->backend_features);
	if (f->backend_features & VIRTIO_BIT(VHU_F_PROTOCOL_FEATURES)) {
		if (vhu_get_u64(&f->c, VHU_GET_PROTOCOL_FEATURES, &pf) < 0)
			goto bad;
		want = pf & ((1ull << VHU_PF_REPLY_ACK) | (1ull << VHU_PF_MQ));
		if (vhu_set_u64(&f->c, VHU_SET_PROTOCOL_FEATURES, want) < 0)
			goto bad;
		/* Acks from here on: each step's failure is seen at that step. */
		f->c.protocol = want;
	}
	if (want & (1ull << VHU_PF_MQ)) {
		if (vhu_get_u64(&f->c, VHU_GET_QUEUE_NUM, maxq) < 0)
			goto bad;
		if (*maxq < (uint64_t)f->nq)
			return verr_set(err, "%s: the vhost-user back-end serves at most %llu queues; queues=%lld needs %d "
					"(one hiprio queue and %lld request queue%s)", where, (unsigned long long)*maxq,
					c->queues, f->nq, c->queues, c->queues == 1 ? "" : "s");
	}
	{
		struct vhu_msg m;

		vhu_msg_plain(&m, VHU_SET_OWNER);
		if (vhu_call(&f->c, &m, NULL) < 0)
			goto bad;
	}
	*protocol = want;
	return 0;
bad:
	return verr_set(err, "%s: vhost-user %s", where, f->c.err);
}

static int fs_create(struct vm *vm, struct verr *err)
{
	size_t n = hv_dev_count(vm->cfg, &fs_opt);

	for (size_t i = 0; i < n; i++) {
		const struct fs_cfg *c = hv_dev_get(vm->cfg, &fs_opt, i);
		const char *where = hv_dev_where(vm->cfg, &fs_opt, i);
		struct vfs *f = calloc(1, sizeof(*f));
		uint16_t qmax[FS_MAX_Q];
		uint64_t protocol = 0, maxq = 0;

		if (!f)
			return verr_set(err, "out of memory");
		f->prev = vm_device(vm, &hv_dev_vhost_user_fs);
		vm_device_set(vm, &hv_dev_vhost_user_fs, f);
		f->c.fd = -1;
		for (int q = 0; q < FS_MAX_Q; q++)
			f->call_fd[q] = -1;
		snprintf(f->name, sizeof(f->name), "vfs%zu", i);
		f->nq = 1 + (int)c->queues;
		if (fs_handshake(f, c, where, &protocol, &maxq, err) < 0)
			return -1;
		for (int q = 0; q < f->nq; q++) {
			qmax[q] = (uint16_t)c->queue_size;
			f->call_fd[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (f->call_fd[q] < 0)
				return verr_errno(err, "%s: eventfd", where);
		}
		memcpy(f->cfg, c->tag, strlen(c->tag));
		le32_put(f->cfg + FS_TAG_MAX, (uint32_t)c->queues);
		if (virtio_init(&f->v, vm, f->name, VIRTIO_ID_FS, f->nq, qmax, sizeof(f->cfg),
				f->backend_features & FS_PASS_FEATURES, 0x018000, &fs_ops, f, err) < 0)
			return verr_wrap(err, "%s", where);
		if (evloop_add(f->v.loop, f->c.fd, EPOLLIN | EPOLLRDHUP, fs_sock_event, f) < 0)
			return verr_errno(err, "%s: epoll", where);
		f->watched = true;
		if (virtio_start_thread(&f->v, err) < 0)
			return verr_wrap(err, "%s", where);
		{
			char mq[48] = "";

			if (maxq)
				snprintf(mq, sizeof(mq), ", back-end serves %llu queues", (unsigned long long)maxq);
			log_info("%s: tag '%s', vhost-user back-end %s: features 0x%llx, protocol features 0x%llx "
				 "(%s%s), %lld request queue%s of %lld", f->name, c->tag, c->socket,
				 (unsigned long long)f->backend_features, (unsigned long long)protocol,
				 protocol & (1ull << VHU_PF_REPLY_ACK) ? "acks" : "no acks", mq, c->queues,
				 c->queues == 1 ? "" : "s", c->queue_size);
		}
	}
	return 0;
}

/* Newest first, like the devices themselves. */
static void fs_destroy(struct vm *vm)
{
	for (struct vfs *f = vm_device(vm, &hv_dev_vhost_user_fs), *prev; f; f = prev) {
		prev = f->prev;
		/* Stops the device in its thread (fs_stop), then the thread. */
		virtio_free(&f->v);
		f->watched = false;
		vhu_close(&f->c);
		for (int q = 0; q < FS_MAX_Q; q++)
			if (f->call_fd[q] >= 0)
				close(f->call_fd[q]);
		free(f);
	}
}

HV_DEVICE(vhost_user_fs, fs_create, fs_destroy);
