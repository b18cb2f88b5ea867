/* vhost-net for one queue pair (see vhost_net.h).  The kernel checks what
 * it is given (ring addresses against the memory table when the backend
 * is set, every descriptor on use), but vhpc-hv still hands it only ring
 * addresses inside guest RAM: the memory table describes guest RAM alone,
 * and a user address outside it would be vhpc-hv's own memory. */
#include "vhost_net.h"

#include <errno.h>
#include <linux/vhost.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define RX 0
#define TX 1
/* The bit numbers (virtio.h's, which cannot be included beside
 * linux/vhost.h: both define the ring structures). */
#define F_MRG_RXBUF 15
#define F_INDIRECT_DESC 28
#define F_EVENT_IDX 29
#define F_VERSION_1 32
#define BIT(b) (1ull << (b))

/* The device features whose work vhost does instead of vhpc-hv. */
#define VHN_DECIDES (BIT(F_INDIRECT_DESC) | BIT(F_EVENT_IDX) | BIT(F_VERSION_1) | BIT(F_MRG_RXBUF))

static int fail(char *why, size_t len, const char *what)
{
	snprintf(why, len, "%s: %s", what, strerror(errno));
	return -1;
}

uint64_t vhn_missing(uint64_t have, uint64_t offered)
{
	return offered & VHN_DECIDES & ~have;
}

uint64_t vhn_features(uint64_t have, uint64_t guest)
{
	return guest & have;
}

bool vhn_ring_uaddrs(const struct guest_mem *gm, const struct vhn_ring *r, uint64_t ua[3])
{
	/* The split ring's sizes, with the event-index words. */
	void *d = gm_ptr(gm, r->desc, 16ull * r->size), *a = gm_ptr(gm, r->avail, 6 + 2ull * r->size),
	     *u = gm_ptr(gm, r->used, 6 + 8ull * r->size);

	if (!r->size || (r->size & (r->size - 1)) || !d || !a || !u)
		return false;
	ua[0] = (uint64_t)(uintptr_t)d;
	ua[1] = (uint64_t)(uintptr_t)a;
	ua[2] = (uint64_t)(uintptr_t)u;
	return true;
}

int vhn_open(struct vhost_net *h, int fd, const struct guest_mem *gm, int kick_rx, int kick_tx, char *why,
	     size_t len)
{
	struct vhost_memory *mt;
	const int kick[2] = { kick_rx, kick_tx };

	h->fd = fd;
	h->call[RX] = h->call[TX] = -1;
	h->started = false;
	if (ioctl(fd, VHOST_SET_OWNER) < 0)
		return fail(why, len, "VHOST_SET_OWNER");
	if (ioctl(fd, VHOST_GET_FEATURES, &h->features) < 0)
		return fail(why, len, "VHOST_GET_FEATURES");
	if (!(h->features & BIT(F_VERSION_1))) {
		snprintf(why, len, "the kernel's vhost-net lacks VIRTIO_F_VERSION_1 (features 0x%llx)",
			 (unsigned long long)h->features);
		return -1;
	}
	/* Guest RAM never moves: one table for the guest's life. */
	mt = calloc(1, sizeof(*mt) + (size_t)gm->nslots * sizeof(mt->regions[0]));
	if (!mt) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	mt->nregions = (uint32_t)gm->nslots;
	for (int i = 0; i < gm->nslots; i++) {
		mt->regions[i].guest_phys_addr = gm->slot[i].gpa;
		mt->regions[i].memory_size = gm->slot[i].size;
		mt->regions[i].userspace_addr = (uint64_t)(uintptr_t)(gm->host + gm->slot[i].ram_off);
	}
	if (ioctl(fd, VHOST_SET_MEM_TABLE, mt) < 0) {
		free(mt);
		return fail(why, len, "VHOST_SET_MEM_TABLE");
	}
	free(mt);
	/* The transport's notify eventfds (KVM ioeventfds) and our own call
	 * eventfds are fixed for the guest's life too.  Without a backend the
	 * kernel ignores kicks, so setting them now starts nothing. */
	for (unsigned r = RX; r <= TX; r++) {
		struct vhost_vring_file k = { .index = r, .fd = kick[r] }, c = { .index = r };

		h->call[r] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (h->call[r] < 0)
			return fail(why, len, "eventfd");
		c.fd = h->call[r];
		if (ioctl(fd, VHOST_SET_VRING_KICK, &k) < 0)
			return fail(why, len, "VHOST_SET_VRING_KICK");
		if (ioctl(fd, VHOST_SET_VRING_CALL, &c) < 0)
			return fail(why, len, "VHOST_SET_VRING_CALL");
	}
	return 0;
}

static int set_backend(struct vhost_net *h, unsigned r, int fd)
{
	struct vhost_vring_file b = { .index = r, .fd = fd };

	return ioctl(h->fd, VHOST_NET_SET_BACKEND, &b);
}

int vhn_start(struct vhost_net *h, const struct guest_mem *gm, uint64_t guest_features, const struct vhn_ring r[2],
	      const uint16_t base[2], int tap_fd, char *why, size_t len)
{
	uint64_t f = vhn_features(h->features, guest_features);
	uint64_t ua[2][3];

	if (h->fd < 0) {
		snprintf(why, len, "no vhost-net descriptor");
		return -1;
	}
	for (unsigned i = RX; i <= TX; i++)
		if (!vhn_ring_uaddrs(gm, &r[i], ua[i])) {
			snprintf(why, len, "%s ring outside guest RAM or of size %u", i == RX ? "receive" : "transmit",
				 r[i].size);
			errno = EINVAL;
			return -1;
		}
	if (ioctl(h->fd, VHOST_SET_FEATURES, &f) < 0)
		return fail(why, len, "VHOST_SET_FEATURES");
	for (unsigned i = RX; i <= TX; i++) {
		struct vhost_vring_state num = { .index = i, .num = r[i].size }, vb = { .index = i, .num = base[i] };
		struct vhost_vring_addr a = { .index = i, .desc_user_addr = ua[i][0], .avail_user_addr = ua[i][1],
					      .used_user_addr = ua[i][2] };

		/* A driver starts its rings from scratch after every reset; a
		 * restore where the snapshot's kernel stopped. */
		if (ioctl(h->fd, VHOST_SET_VRING_NUM, &num) < 0)
			return fail(why, len, "VHOST_SET_VRING_NUM");
		if (ioctl(h->fd, VHOST_SET_VRING_BASE, &vb) < 0)
			return fail(why, len, "VHOST_SET_VRING_BASE");
		if (ioctl(h->fd, VHOST_SET_VRING_ADDR, &a) < 0)
			return fail(why, len, "VHOST_SET_VRING_ADDR");
	}
	for (unsigned i = RX; i <= TX; i++)
		if (set_backend(h, i, tap_fd) < 0) {
			int e = errno;

			if (i == TX)
				set_backend(h, RX, -1);
			errno = e;
			return fail(why, len, "VHOST_NET_SET_BACKEND");
		}
	h->started = true;
	return 0;
}

void vhn_stop(struct vhost_net *h)
{
	if (h->fd < 0 || !h->started)
		return;
	for (unsigned i = RX; i <= TX; i++) {
		struct vhost_vring_state s = { .index = i };

		/* Detaching the backend stops the ring and waits for the
		 * kernel's worker to be done with it. */
		set_backend(h, i, -1);
		if (ioctl(h->fd, VHOST_GET_VRING_BASE, &s) == 0)
			h->last_base[i] = s.num;
	}
	h->started = false;
}

int vhn_bases(struct vhost_net *h, int tap_fd, uint16_t base[2], char *why, size_t len)
{
	if (h->fd < 0 || !h->started) {
		snprintf(why, len, "vhost-net is not running");
		return -1;
	}
	for (unsigned i = RX; i <= TX; i++) {
		struct vhost_vring_state s = { .index = i };

		/* The worker may be between taking a chain and using it:
		 * only a stopped ring's base is the kernel's last word. */
		if (set_backend(h, i, -1) < 0 || ioctl(h->fd, VHOST_GET_VRING_BASE, &s) < 0) {
			int e = errno;

			/* The guest must be able to go on: the tap back on both. */
			set_backend(h, RX, tap_fd);
			set_backend(h, TX, tap_fd);
			errno = e;
			return fail(why, len, "stopping the rings for their bases");
		}
		base[i] = (uint16_t)s.num;
	}
	return 0;
}

int vhn_attach(struct vhost_net *h, int tap_fd, char *why, size_t len)
{
	if (h->fd < 0 || !h->started)
		return 0;
	for (unsigned i = RX; i <= TX; i++)
		if (set_backend(h, i, tap_fd) < 0)
			return fail(why, len, "VHOST_NET_SET_BACKEND (attaching the tap again)");
	return 0;
}

void vhn_close(struct vhost_net *h)
{
	vhn_stop(h);
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	for (unsigned r = RX; r <= TX; r++) {
		if (h->call[r] >= 0)
			close(h->call[r]);
		h->call[r] = -1;
	}
}
