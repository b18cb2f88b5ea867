/* virtio-console: one port (no multiport), the guest's hvc0.  Output goes
 * to stdout, a file or nowhere; input comes from stdin when the console is
 * on stdio and COM1 is not (one reader per terminal).  Emergency writes
 * through the config space are supported too.
 *
 *   --console [stdio|none|file:PATH]      (YAML: console: "file:/x" or {to: ...}) */
#include "lib/config.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "snapshot.h"
#include "virtio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define VIRTIO_CONSOLE_F_EMERG_WRITE 2
#define Q_RX 0
#define Q_TX 1

struct cons_cfg {
	char *to;
};

static const struct cf_field cons_fields[] = {
	{ .key = "to", .kind = CF_STR, .off = offsetof(struct cons_cfg, to) },
	{ 0 }
};
static const struct cf_schema cons_schema = { "console", sizeof(struct cons_cfg), cons_fields };

static int cons_check(void *inst, const char *where, struct verr *err)
{
	const char *to = ((struct cons_cfg *)inst)->to;

	if (to && strcmp(to, "stdio") && strcmp(to, "none") && (strncmp(to, "file:", 5) || !to[5]))
		return verr_set(err, "%s: '%s' is not stdio, none or file:PATH", where, to);
	return 0;
}

static const struct hv_devopt cons_opt = {
	.name = "console", .usage = "[stdio|none|file:PATH]", .schema = &cons_schema, .max = 1,
	.positional = "to", .arg_optional = true, .check = cons_check,
};
HV_DEVICE_OPTION(cons_opt);

struct vcons {
	struct virtio_dev v;
	int out_fd, in_fd;
	bool own_out, in_watched, in_on;
	pthread_mutex_t out_lock;      /* emergency writes come from vCPUs */
	uint8_t cfg[12];
};

HV_DEVICE_DECLARE(virtio_console);

static void out(struct vcons *c, const struct iovec *iov, int n)
{
	pthread_mutex_lock(&c->out_lock);
	if (c->out_fd >= 0) {
		for (int i = 0; i < n; i++)
			if (write_full(c->out_fd, iov[i].iov_base, iov[i].iov_len) < 0) {
				log_warn("virtio-console output failed: %s; dropping further output", strerror(errno));
				if (c->own_out)
					close(c->out_fd);
				c->out_fd = -1;
				break;
			}
	}
	pthread_mutex_unlock(&c->out_lock);
}

static void cons_cfg_read(struct virtio_dev *v, unsigned off, void *data, unsigned len)
{
	struct vcons *c = v->opaque;

	cfg_copy_out(c->cfg, sizeof(c->cfg), off, data, len);
}

static void cons_cfg_write(struct virtio_dev *v, unsigned off, const void *data, unsigned len)
{
	struct vcons *c = v->opaque;
	struct iovec iov = { (void *)(uintptr_t)data, 1 };

	/* emerg_wr (offset 8): one character, before the queues work. */
	if (off == 8 && len >= 1 && (v->guest_features & VIRTIO_BIT(VIRTIO_CONSOLE_F_EMERG_WRITE)))
		out(c, &iov, 1);
}

static void set_input(struct vcons *c, bool on)
{
	if (c->in_watched && c->in_on != on && evloop_mod(c->v.loop, c->in_fd, on ? EPOLLIN : 0) == 0)
		c->in_on = on;
}

/* Input goes into the guest's receive buffers; with none posted, stdin is
 * left unread until the guest posts more (the receive queue's kick). */
static void rx(struct vcons *c)
{
	struct virtq *q = &c->v.vq[Q_RX];
	struct vq_chain ch = { 0 };

	if (!c->in_watched)
		return;
	for (;;) {
		int r = vq_pop(q, &ch);
		ssize_t n;

		if (r < 0) {
			virtio_fail(&c->v, "receive queue index out of range");
			return;
		}
		if (r == 0) {
			set_input(c, false);
			if (!vq_enable_kicks(q))
				break;
			continue;
		}
		if (!ch.nin) {
			vq_push(q, ch.head, 0);
			continue;
		}
		n = readv(c->in_fd, ch.iov + ch.nout, (int)(ch.nin > 1024 ? 1024 : ch.nin));
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			vq_unpop(q, 1);
			set_input(c, true);
			break;
		}
		if (n <= 0) {              /* EOF or error: no more input */
			vq_unpop(q, 1);
			evloop_del(c->v.loop, c->in_fd);
			c->in_watched = false;
			break;
		}
		vq_push(q, ch.head, (uint32_t)n);
	}
	virtio_notify(&c->v, Q_RX);        /* also publishes chains vq_pop refused */
}

static void in_ready(void *opaque, uint32_t events)
{
	struct vcons *c = opaque;

	(void)events;
	if (c->v.running && c->v.vq[Q_RX].ready)
		rx(c);
	else
		set_input(c, false);
}

static void tx(struct vcons *c)
{
	struct virtq *q = &c->v.vq[Q_TX];
	struct vq_chain ch = { 0 };
	int r;

	do {
		vq_disable_kicks(q);
		while ((r = vq_pop(q, &ch)) > 0) {
			out(c, ch.iov, (int)ch.nout);
			vq_push(q, ch.head, 0);
		}
		virtio_notify(&c->v, Q_TX);
		if (r < 0) {
			virtio_fail(&c->v, "transmit queue index out of range");
			return;
		}
	} while (vq_enable_kicks(q));
}

static void cons_kick(struct virtio_dev *v, int q)
{
	struct vcons *c = v->opaque;

	if (q == Q_TX)
		tx(c);
	else if (q == Q_RX)
		rx(c);
}

static void cons_stop(struct virtio_dev *v)
{
	set_input(v->opaque, false);
}

static const struct virtio_ops cons_ops = {
	.cfg_read = cons_cfg_read, .cfg_write = cons_cfg_write, .kick = cons_kick, .stop = cons_stop,
};

static int cons_create(struct vm *vm, struct verr *err)
{
	const struct cons_cfg *cc = hv_dev_get(vm->cfg, &cons_opt, 0);
	const char *to = cc && cc->to ? cc->to : "stdio";
	const char *serial = vm->cfg->serial ? vm->cfg->serial : "stdio";
	uint16_t qmax[2] = { 64, 64 };
	struct vcons *c;

	if (!cc)
		return 0;
	if (!(c = calloc(1, sizeof(*c))))
		return verr_set(err, "out of memory");
	vm_device_set(vm, &hv_dev_virtio_console, c);
	pthread_mutex_init(&c->out_lock, NULL);
	c->out_fd = c->in_fd = -1;
	if (!strcmp(to, "stdio")) {
		c->out_fd = STDOUT_FILENO;
		if (strcmp(serial, "stdio"))
			c->in_fd = STDIN_FILENO;
	} else if (!strncmp(to, "file:", 5)) {
		c->out_fd = open(to + 5, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
		if (c->out_fd < 0)
			return verr_errno(err, "%s: opening %s", hv_dev_where(vm->cfg, &cons_opt, 0), to + 5);
		c->own_out = true;
	}
	le32_put(c->cfg + 4, 1);           /* max_nr_ports */
	if (virtio_init(&c->v, vm, "vcons", VIRTIO_ID_CONSOLE, 2, qmax, sizeof(c->cfg),
			VIRTIO_BIT(VIRTIO_CONSOLE_F_EMERG_WRITE), 0x078000, &cons_ops, c, err) < 0)
		return verr_wrap(err, "%s", hv_dev_where(vm->cfg, &cons_opt, 0));
	if (c->in_fd >= 0) {
		int fl = fcntl(c->in_fd, F_GETFL);

		/* stdin is ours alone here (COM1 is not on stdio); a file or
		 * /dev/null cannot be polled and gives no input. */
		if (fl >= 0 && fcntl(c->in_fd, F_SETFL, fl | O_NONBLOCK) == 0 &&
		    evloop_add(c->v.loop, c->in_fd, 0, in_ready, c) == 0)
			c->in_watched = true;
	}
	return virtio_start_thread(&c->v, err);
}

static void cons_destroy(struct vm *vm)
{
	struct vcons *c = vm_device(vm, &hv_dev_virtio_console);

	if (!c)
		return;
	virtio_free(&c->v);
	if (c->own_out && c->out_fd >= 0)
		close(c->out_fd);
	pthread_mutex_destroy(&c->out_lock);
	free(c);
}

/* Snapshots: the transport only.  Output chains are written out before a
 * pause returns; input waiting on stdin is read after the restore, when
 * the receive queue's kick turns its watch back on. */
static int cons_save(struct vm *vm, struct snap_buf *sb, struct verr *err)
{
	(void)err;
	virtio_save(&((struct vcons *)vm_device(vm, &hv_dev_virtio_console))->v, sb);
	return 0;
}

static int cons_load(struct vm *vm, struct snap_rd *r, struct verr *err)
{
	struct vcons *c = vm_device(vm, &hv_dev_virtio_console);
	struct snap_rd start = *r;

	if (virtio_load(&c->v, r, false, err) < 0)
		return -1;
	if (!rd_done(r))
		return verr_set(err, "%zu bytes after the transport's state", r->len - r->off);
	*r = start;
	return virtio_load(&c->v, r, true, err);
}

HV_DEVICE_SNAP(virtio_console, cons_create, cons_destroy, cons_save, cons_load);
