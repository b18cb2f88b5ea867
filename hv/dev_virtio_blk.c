/* virtio-blk on a raw image file: read, write, flush, get-id, and a
 * read-only mode.  Requests run synchronously in the device thread with
 * preadv/pwritev straight from and into guest buffers; every sector range
 * is checked against the image size (overflow-safe), and a malformed
 * request gets an error status, never a partial guess.  The image is
 * locked (flock) so two guests cannot write one image by mistake.
 *
 *   --blk path=FILE[,ro][,serial=STR]      (YAML: blk: [{path:, ro:, serial:}]) */
#include "fdpath.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/log.h"
#include "snapshot.h"
#include "virtio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLK_MAX 8
#define SECTOR 512ull
#define SEG_MAX 126

#define VIRTIO_BLK_F_SIZE_MAX 1
#define VIRTIO_BLK_F_SEG_MAX  2
#define VIRTIO_BLK_F_RO       5
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH    9

#define T_IN     0
#define T_OUT    1
#define T_FLUSH  4
#define T_GET_ID 8

#define S_OK     0
#define S_IOERR  1
#define S_UNSUPP 2

struct blk_cfg {
	char *path;
	bool ro;
	char *serial;
};

static const struct cf_field blk_fields[] = {
	{ .key = "path", .kind = CF_STR, .off = offsetof(struct blk_cfg, path), .flags = CF_REQUIRED },
	{ .key = "ro", .kind = CF_BOOL, .off = offsetof(struct blk_cfg, ro) },
	{ .key = "serial", .kind = CF_STR, .off = offsetof(struct blk_cfg, serial) },
	{ 0 }
};
static const struct cf_schema blk_schema = { "blk", sizeof(struct blk_cfg), blk_fields };

static int blk_check(void *inst, const char *where, struct verr *err)
{
	struct blk_cfg *c = inst;

	if (!c->path || !c->path[0])
		return verr_set(err, "%s: path= (the image file) is required", where);
	if (c->serial && strlen(c->serial) > 20)
		return verr_set(err, "%s: serial= is at most 20 characters", where);
	return 0;
}

static const struct hv_devopt blk_opt = {
	.name = "blk", .usage = "path=FILE[,ro][,serial=STR]", .schema = &blk_schema,
	.max = BLK_MAX, .positional = "path", .check = blk_check,
};
HV_DEVICE_OPTION(blk_opt);

struct vblk {
	struct virtio_dev v;
	char name[16];
	int fd;
	bool ro;
	uint64_t sectors;
	char serial[20];
	uint8_t cfg[36];
	unsigned long reqs, errors;
	struct vblk *prev;         /* created before it; the VM's slot holds the newest */
};

HV_DEVICE_DECLARE(virtio_blk);

static void blk_cfg_read(struct virtio_dev *v, unsigned off, void *data, unsigned len)
{
	struct vblk *b = v->opaque;

	cfg_copy_out(b->cfg, sizeof(b->cfg), off, data, len);
}

/* One request; returns the bytes written into the chain's writable part. */
static uint32_t request(struct vblk *b, const struct vq_chain *c)
{
	uint8_t hdr[16], status = S_OK;
	struct iovec iov[VQ_MAX_CHAIN];
	uint64_t sector, len, data_in = 0;
	uint32_t type;
	unsigned n;

	/* Header (16 readable bytes) first, status (1 writable byte) last. */
	if (c->in_len < 1)
		return 0;
	if (c->out_len < sizeof(hdr) || vq_copy_from(c, 0, hdr, sizeof(hdr)) != sizeof(hdr)) {
		status = S_IOERR;
		goto done;
	}
	type = le32_get(hdr);
	sector = le64_get(hdr + 8);
	switch (type) {
	case T_IN:
	case T_OUT:
		len = type == T_IN ? c->in_len - 1 : c->out_len - sizeof(hdr);
		if (len % SECTOR || sector > b->sectors || len / SECTOR > b->sectors - sector ||
		    (type == T_OUT && b->ro) || (type == T_OUT && c->in_len != 1)) {
			status = S_IOERR;
			break;
		}
		n = type == T_IN ? vq_iov_slice(c, true, 0, len, iov, VQ_MAX_CHAIN)
				 : vq_iov_slice(c, false, sizeof(hdr), len, iov, VQ_MAX_CHAIN);
		for (uint64_t done = 0, off = sector * SECTOR; done < len;) {
			ssize_t r = type == T_IN ? preadv(b->fd, iov, (int)n, (off_t)off)
						 : pwritev(b->fd, iov, (int)n, (off_t)off);
			unsigned k = 0;

			if (r <= 0) {
				if (r < 0 && errno == EINTR)
					continue;
				status = S_IOERR;
				break;
			}
			done += (uint64_t)r;
			off += (uint64_t)r;
			/* Drop what was transferred from the front of iov. */
			while (k < n && (size_t)r >= iov[k].iov_len)
				r -= (ssize_t)iov[k++].iov_len;
			if (k < n) {
				iov[k].iov_base = (uint8_t *)iov[k].iov_base + r;
				iov[k].iov_len -= (size_t)r;
			}
			memmove(iov, iov + k, (n - k) * sizeof(iov[0]));
			n -= k;
		}
		if (type == T_IN && status == S_OK)
			data_in = len;
		break;
	case T_FLUSH:
		if (!b->ro && fdatasync(b->fd) < 0)
			status = S_IOERR;
		break;
	case T_GET_ID: {
		uint64_t l = c->in_len - 1 < sizeof(b->serial) ? c->in_len - 1 : sizeof(b->serial);

		data_in = vq_copy_to(c, 0, b->serial, l);
		break;
	}
	default:
		status = S_UNSUPP;
	}
done:
	if (status != S_OK)
		b->errors++;
	vq_copy_to(c, c->in_len - 1, &status, 1);
	return (uint32_t)(data_in + 1);
}

static void blk_kick(struct virtio_dev *v, int qi)
{
	struct vblk *b = v->opaque;
	struct virtq *q = &v->vq[qi];
	struct vq_chain c = { 0 };
	int r;

	do {
		vq_disable_kicks(q);
		while ((r = vq_pop(q, &c)) > 0) {
			b->reqs++;
			vq_push(q, c.head, request(b, &c));
		}
		virtio_notify(v, qi);
		if (r < 0) {
			virtio_fail(v, "request queue index out of range");
			return;
		}
	} while (vq_enable_kicks(q));
}

static const struct virtio_ops blk_ops = { .cfg_read = blk_cfg_read, .kick = blk_kick };

static int blk_open(struct vblk *b, const struct blk_cfg *c, const char *where, struct verr *err)
{
	struct stat st;

	b->fd = hv_open(c->path, c->ro ? O_RDONLY : O_RDWR, 0);
	if (b->fd < 0)
		return verr_errno(err, "%s: opening %s", where, c->path);
	if (fstat(b->fd, &st) < 0)
		return verr_errno(err, "%s: %s", where, c->path);
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return verr_set(err, "%s: %s is not a file or block device", where, c->path);
	if (flock(b->fd, (c->ro ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0)
		return verr_set(err, "%s: %s is in use by another process (flock: %s)", where, c->path,
				strerror(errno));
	if (S_ISBLK(st.st_mode)) {
		off_t end = lseek(b->fd, 0, SEEK_END);

		if (end < 0)
			return verr_errno(err, "%s: %s", where, c->path);
		st.st_size = end;
	}
	b->sectors = (uint64_t)st.st_size / SECTOR;
	if ((uint64_t)st.st_size % SECTOR)
		log_warn("%s: %s is not a whole number of sectors; the last %llu bytes are not visible", where,
			 c->path, (unsigned long long)((uint64_t)st.st_size % SECTOR));
	return 0;
}

static int blk_create(struct vm *vm, struct verr *err)
{
	size_t n = hv_dev_count(vm->cfg, &blk_opt);

	for (size_t i = 0; i < n; i++) {
		const struct blk_cfg *c = hv_dev_get(vm->cfg, &blk_opt, i);
		const char *where = hv_dev_where(vm->cfg, &blk_opt, i);
		struct vblk *b = calloc(1, sizeof(*b));
		uint16_t qmax = 256;
		uint64_t f = VIRTIO_BIT(VIRTIO_BLK_F_SEG_MAX) | VIRTIO_BIT(VIRTIO_BLK_F_BLK_SIZE) |
			     VIRTIO_BIT(VIRTIO_BLK_F_FLUSH);

		if (!b)
			return verr_set(err, "out of memory");
		b->prev = vm_device(vm, &hv_dev_virtio_blk);
		vm_device_set(vm, &hv_dev_virtio_blk, b);
		b->fd = -1;
		snprintf(b->name, sizeof(b->name), "vblk%zu", i);
		if (blk_open(b, c, where, err) < 0)
			return -1;
		b->ro = c->ro;
		if (c->ro)
			f |= VIRTIO_BIT(VIRTIO_BLK_F_RO);
		if (c->serial)
			memcpy(b->serial, c->serial, strlen(c->serial));
		le64_put(b->cfg + 0, b->sectors);
		le32_put(b->cfg + 12, SEG_MAX);
		le32_put(b->cfg + 20, SECTOR);
		if (virtio_init(&b->v, vm, b->name, VIRTIO_ID_BLOCK, 1, &qmax, sizeof(b->cfg), f, 0x010000,
				&blk_ops, b, err) < 0 ||
		    virtio_start_thread(&b->v, err) < 0)
			return verr_wrap(err, "%s", where);
		log_info("%s: %s, %llu sectors%s", b->name, c->path, (unsigned long long)b->sectors,
			 c->ro ? ", read-only" : "");
	}
	return 0;
}

/* Newest first, like the devices themselves. */
static void blk_destroy(struct vm *vm)
{
	for (struct vblk *b = vm_device(vm, &hv_dev_virtio_blk), *prev; b; b = prev) {
		prev = b->prev;
		virtio_free(&b->v);
		if (b->fd >= 0)
			close(b->fd);
		free(b);
	}
}

/* Snapshots: each disk's size and its transport, newest first.  Requests
 * complete in the device thread before a pause returns (the thread is
 * held between two kicks), so a queue holds no request half done; what
 * the guest posted and was not yet taken is served after the restore.
 * The image's contents are not saved: it is the caller's to keep as it
 * was (hv.h). */
static int blk_save(struct vm *vm, struct snap_buf *sb, struct verr *err)
{
	(void)err;
	for (struct vblk *b = vm_device(vm, &hv_dev_virtio_blk); b; b = b->prev) {
		sb_u64(sb, b->sectors);
		virtio_save(&b->v, sb);
	}
	return 0;
}

static int blk_load(struct vm *vm, struct snap_rd *r, struct verr *err)
{
	struct snap_rd start = *r;

	/* Every disk checked before any is set. */
	for (int pass = 0; pass < 2; pass++) {
		*r = start;
		for (struct vblk *b = vm_device(vm, &hv_dev_virtio_blk); b; b = b->prev) {
			uint64_t sectors = rd_u64(r);

			if (r->bad)
				return verr_set(err, "%s: state cut short", b->name);
			if (sectors != b->sectors)
				return verr_set(err, "%s: the snapshot's disk has %llu sectors, this one %llu", b->name,
						(unsigned long long)sectors, (unsigned long long)b->sectors);
			if (virtio_load(&b->v, r, pass == 1, err) < 0)
				return -1;
		}
		if (!rd_done(r))
			return verr_set(err, "%zu bytes after the last disk's state", r->len - r->off);
	}
	return 0;
}

HV_DEVICE_SNAP(virtio_blk, blk_create, blk_destroy, blk_save, blk_load);
