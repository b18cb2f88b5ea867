/* virtio-net over a tap device.  The tap carries the same 12-byte vnet
 * header as virtio 1.x (IFF_VNET_HDR), so frames go between guest buffers
 * and the tap with readv/writev and no copy: checksum and TSO offloads
 * pass through (TUNSETOFFLOAD follows what the driver accepted), received
 * frames may span several buffers (mergeable RX buffers), and with
 * queues=N the tap is opened multi-queue and queue pair i serves tap queue
 * i (pairs the driver has not enabled are detached from the tap).  A
 * control queue takes RX-mode, MAC-table and queue-pair commands.
 *
 * Received frames are read only when the ring holds room for the largest
 * frame the tap may deliver; a too-big frame (or a ring that can never
 * hold one) costs that frame, never memory outside the buffers.
 *
 * With vhost (vhostfd=N[:N...], descriptors of /dev/vhost-net the starter
 * opened, one per queue pair; or vhost=on, vhpc-hv opens them at set-up)
 * the kernel moves the frames: at DRIVER_OK each pair's rings go to its
 * vhost-net with the tap queue as backend, kicks reach the kernel through
 * the same KVM ioeventfds and completions the guest through irqfds on the
 * queues' MSI-X vectors; a reset takes them back.  The control queue, the
 * offloads and the tap queues stay here.  Where vhost cannot be had (no
 * device, a kernel without VERSION_1, not a tap) or refuses a start, the
 * userspace data path serves the same device.
 *
 *   --net tap=NAME|fd=N[,mac=MAC][,mtu=N][,queues=N][,vhost=on|off][,vhostfd=N[:N...]]
 *   YAML: net: [{tap: NAME, mac: MAC, mtu: N, queues: N, vhost: BOOL, vhostfd: "N:N"}] */
#include "lib/bytes.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/log.h"
#include "snapshot.h"
#include "vhost_net.h"
#include "virtio.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define NET_MAX 8
#define MAX_PAIRS 8
#define HDR_LEN 12                  /* struct virtio_net_hdr_mrg_rxbuf */
#define MAX_FRAME 65550             /* 64 KiB of GSO payload + Ethernet header */
#define RX_BUDGET 64
#define TX_BUDGET 256
#define RX_MAX_BUFS 64

#define F_CSUM 0
#define F_GUEST_CSUM 1
#define F_MTU 3
#define F_MAC 5
#define F_GUEST_TSO4 7
#define F_GUEST_TSO6 8
#define F_GUEST_ECN 9
#define F_HOST_TSO4 11
#define F_HOST_TSO6 12
#define F_HOST_ECN 13
#define F_MRG_RXBUF 15
#define F_STATUS 16
#define F_CTRL_VQ 17
#define F_CTRL_RX 18
#define F_MQ 22

#define HDR_F_NEEDS_CSUM 1
#define GSO_NONE 0
#define GSO_TCPV4 1
#define GSO_UDP 3
#define GSO_TCPV6 4
#define GSO_ECN 0x80

struct net_cfg {
	char *tap, *mac, *vhostfd;
	long long fd, mtu, queues;
	bool vhost;
	uint8_t macb[6];
	int nvfd, vfd[MAX_PAIRS];
};

static const struct cf_field net_fields[] = {
	{ .key = "tap", .kind = CF_STR, .off = offsetof(struct net_cfg, tap) },
	{ .key = "fd", .kind = CF_INT, .off = offsetof(struct net_cfg, fd), .min = 3, .max = 65535 },
	{ .key = "mac", .kind = CF_STR, .off = offsetof(struct net_cfg, mac) },
	{ .key = "mtu", .kind = CF_INT, .off = offsetof(struct net_cfg, mtu), .min = 68, .max = 65535 },
	{ .key = "queues", .kind = CF_INT, .off = offsetof(struct net_cfg, queues), .min = 1, .max = MAX_PAIRS },
	{ .key = "vhost", .kind = CF_BOOL, .off = offsetof(struct net_cfg, vhost) },
	{ .key = "vhostfd", .kind = CF_STR, .off = offsetof(struct net_cfg, vhostfd) },
	{ 0 }
};
static const struct cf_schema net_schema = { "net", sizeof(struct net_cfg), net_fields };

static int net_check(void *inst, const char *where, struct verr *err)
{
	struct net_cfg *c = inst;
	unsigned m[6];
	char tail;

	if (!c->tap == !c->fd)
		return verr_set(err, "%s: give tap=NAME or fd=N (an open tap), not both or neither", where);
	if (c->tap && (!c->tap[0] || strlen(c->tap) >= IFNAMSIZ || strchr(c->tap, '/')))
		return verr_set(err, "%s: tap=%s is not an interface name (1-%d characters)", where, c->tap,
				IFNAMSIZ - 1);
	if (!c->queues)
		c->queues = 1;
	if (c->fd && c->queues > 1)
		return verr_set(err, "%s: queues=%lld needs tap=NAME (one fd is one queue)", where, c->queues);
	if (c->vhostfd) {
		const char *s = c->vhostfd;

		/* N[:N...]: one /dev/vhost-net descriptor per queue pair. */
		c->nvfd = 0;
		while (*s) {
			char *end;
			long v = strtol(s, &end, 10);

			if (end == s || v < 3 || v > 65535 || (*end && *end != ':') || c->nvfd == MAX_PAIRS)
				return verr_set(err, "%s: vhostfd=%s is not a list of descriptors N[:N...] (3-65535, at most %d)",
						where, c->vhostfd, MAX_PAIRS);
			c->vfd[c->nvfd++] = (int)v;
			s = *end ? end + 1 : end;
		}
		if (c->nvfd != c->queues)
			return verr_set(err, "%s: vhostfd=%s names %d descriptor(s) for %lld queue pair(s): one per pair",
					where, c->vhostfd, c->nvfd, c->queues);
		c->vhost = true;
	}
	if (c->mac) {
		if (sscanf(c->mac, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5],
			   &tail) != 6)
			return verr_set(err, "%s: mac=%s is not a MAC address (xx:xx:xx:xx:xx:xx)", where, c->mac);
		for (int i = 0; i < 6; i++)
			c->macb[i] = (uint8_t)m[i];
		if (c->macb[0] & 1)
			return verr_set(err, "%s: mac=%s is a multicast address", where, c->mac);
	} else {
		/* Locally administered, random: unique enough on one job network. */
		random_bytes(c->macb, 6);
		c->macb[0] = (uint8_t)((c->macb[0] & 0xfc) | 0x02);
	}
	return 0;
}

static const struct hv_devopt net_opt = {
	.name = "net", .usage = "tap=NAME|fd=N[,mac=MAC][,mtu=N][,queues=N][,vhost=on|off][,vhostfd=N[:N...]]", .schema = &net_schema,
	.max = NET_MAX, .positional = "tap", .check = net_check,
};
HV_DEVICE_OPTION(net_opt);

struct vnet;
struct pair {
	struct vnet *n;
	int idx;
	int fd;
	bool attached, rx_on, tx_wait;
};

struct vnet {
	struct virtio_dev v;
	char name[16];
	const struct net_cfg *cfg;
	bool is_tap;
	char ifname[IFNAMSIZ];
	int tap_mtu;           /* read at set-up: a running guest makes no inet socket */
	int npairs, active;
	struct pair p[MAX_PAIRS];
	uint8_t config[12];
	bool mrg;
	size_t need;               /* room a received frame may need */
	struct iovec rx_iov[VQ_MAX_CHAIN];
	struct { uint16_t head; unsigned first, n; uint64_t cap; } rx_bufs[RX_MAX_BUFS];
	unsigned long rx_frames, tx_frames, rx_drops, tx_drops;
	/* vhost: set up for every pair (vh[i].fd >= 0), and whether the
	 * current start runs on it; otherwise why not, for the log. */
	bool vhost, vhost_on;
	struct vhost_net vh[MAX_PAIRS];
	char vhost_why[160];
	unsigned long vhost_starts, vhost_refused;
	/* A restore's start: vhost reads the rings when its backend is set,
	 * so it waits for RAM (the first callback once the thread is
	 * released), and the driver's queue pairs come back then too. */
	bool loading, restoring, vhost_pending;
	int restore_pairs;
	struct vnet *prev;         /* created before it; the VM's slot holds the newest */
};

HV_DEVICE_DECLARE(virtio_net);
static void restore_go(struct vnet *n);

static void net_cfg_read(struct virtio_dev *v, unsigned off, void *data, unsigned len)
{
	struct vnet *n = v->opaque;

	cfg_copy_out(n->config, sizeof(n->config), off, data, len);
}

static void set_rx(struct vnet *n, int i, bool on)
{
	struct pair *p = &n->p[i];

	if (p->rx_on == on || (on && n->vhost_on))
		return;
	if (evloop_mod(n->v.loop, p->fd, (on ? EPOLLIN : 0) | (p->tx_wait ? EPOLLOUT : 0)) == 0)
		p->rx_on = on;
}

static void set_tx_wait(struct vnet *n, int i, bool on)
{
	struct pair *p = &n->p[i];

	if (p->tx_wait == on)
		return;
	if (evloop_mod(n->v.loop, p->fd, (p->rx_on ? EPOLLIN : 0) | (on ? EPOLLOUT : 0)) == 0)
		p->tx_wait = on;
}

/* ------------------------------------------------------------------ RX */

/* Room for one frame: a chain (or, with mergeable buffers, several) of
 * device-writable buffers.  Returns the number of chains popped; *cap is
 * their total size.  0: the ring is empty; -1: with mergeable buffers, the
 * ring holds less than the largest frame and the driver can still add
 * more (not full, fewer buffers than we take at once): wait for them. */
static int rx_gather(struct vnet *n, struct virtq *q, unsigned *niov, uint64_t *cap)
{
	int k = 0, r = 1;
	unsigned used = 0;

	*cap = 0;
	while (k < RX_MAX_BUFS && used < VQ_MAX_CHAIN && (*cap < n->need || !k) && (n->mrg || !k)) {
		struct vq_chain c = { .iov = n->rx_iov + used, .max = VQ_MAX_CHAIN - used };

		r = vq_pop(q, &c);
		if (r <= 0) {
			if (r < 0)
				virtio_fail(&n->v, "receive queue index out of range");
			break;
		}
		/* Receive buffers are device-writable, with room for the header. */
		if (c.nout || c.in_len < HDR_LEN) {
			vq_push(q, c.head, 0);
			continue;
		}
		n->rx_bufs[k].head = c.head;
		n->rx_bufs[k].first = used;
		n->rx_bufs[k].n = c.nin;
		n->rx_bufs[k].cap = c.in_len;
		used += c.nin;
		*cap += c.in_len;
		k++;
	}
	*niov = used;
	if (k && n->mrg && *cap < n->need && r == 0 && !vq_full(q)) {
		vq_unpop(q, (uint16_t)k);
		return -1;
	}
	return k;
}

static void rx(struct vnet *n, int i)
{
	struct virtq *q = &n->v.vq[2 * i];
	struct pair *p = &n->p[i];

	if (!q->ready || i >= n->active || n->vhost_on)
		return;
	for (int budget = 0; budget < RX_BUDGET; budget++) {
		unsigned niov;
		uint64_t cap, left;
		int k = rx_gather(n, q, &niov, &cap), nb = 0;
		ssize_t len;

		if (k <= 0) {
			/* Wait for buffers: the next one the driver adds kicks us. */
			set_rx(n, i, false);
			if ((k == 0 ? vq_enable_kicks(q) : vq_kick_on_more(q)) && budget < RX_BUDGET - 1)
				continue;
			break;
		}
		len = readv(p->fd, n->rx_iov, (int)niov);
		if (len < 0 && (errno == EAGAIN || errno == EINTR)) {
			vq_unpop(q, (uint16_t)k);
			set_rx(n, i, true);
			break;
		}
		if (len < HDR_LEN || (uint64_t)len > cap) {
			/* Truncated (frame larger than the buffers) or an error:
			 * the frame is lost, the buffers stay the guest's. */
			vq_unpop(q, (uint16_t)k);
			n->rx_drops++;
			if (len < 0 && errno != EAGAIN)
				log_debug("%s: tap read: %s", n->name, strerror(errno));
			continue;
		}
		left = (uint64_t)len;
		while (left && nb < k) {
			uint64_t l = left < n->rx_bufs[nb].cap ? left : n->rx_bufs[nb].cap;

			left -= l;
			nb++;
		}
		{
			/* num_buffers (1 without mergeable buffers), and no
			 * checksum flags for a driver that did not ask for them. */
			uint8_t num[2] = { (uint8_t)nb, (uint8_t)(nb >> 8) }, zero = 0;
			struct vq_chain c0 = { .head = n->rx_bufs[0].head, .nin = n->rx_bufs[0].n,
					       .iov = n->rx_iov, .in_len = n->rx_bufs[0].cap };

			vq_copy_to(&c0, 10, num, 2);
			if (!virtio_has(&n->v, F_GUEST_CSUM))
				vq_copy_to(&c0, 0, &zero, 1);
		}
		/* Unused chains go back; the used ones complete in order. */
		vq_unpop(q, (uint16_t)(k - nb));
		left = (uint64_t)len;
		for (int b = 0; b < nb; b++) {
			uint64_t l = left < n->rx_bufs[b].cap ? left : n->rx_bufs[b].cap;

			vq_push(q, n->rx_bufs[b].head, (uint32_t)l);
			left -= l;
		}
		n->rx_frames++;
		if (budget == RX_BUDGET - 1)
			set_rx(n, i, true);    /* more may wait: epoll brings us back */
	}
	virtio_notify(&n->v, 2 * i);       /* also publishes chains vq_pop refused */
}

/* ------------------------------------------------------------------ TX */

/* The guest's header, copied and checked before the tap sees it. */
static bool hdr_ok(struct vnet *n, const uint8_t *h, uint64_t frame)
{
	uint8_t flags = h[0], gso = h[1] & (uint8_t)~GSO_ECN;
	uint16_t gso_size = le16_get(h + 4), cstart = le16_get(h + 6), coff = le16_get(h + 8);

	if (flags & ~HDR_F_NEEDS_CSUM)
		return false;
	if ((flags & HDR_F_NEEDS_CSUM) &&
	    (!virtio_has(&n->v, F_CSUM) || (uint64_t)cstart + coff + 2 > frame))
		return false;
	if (gso == GSO_NONE)
		return !(h[1] & GSO_ECN);
	if ((h[1] & GSO_ECN) && !virtio_has(&n->v, F_HOST_ECN))
		return false;
	if (!gso_size || !(flags & HDR_F_NEEDS_CSUM))
		return false;
	return (gso == GSO_TCPV4 && virtio_has(&n->v, F_HOST_TSO4)) ||
	       (gso == GSO_TCPV6 && virtio_has(&n->v, F_HOST_TSO6));
}

static void tx(struct vnet *n, int i)
{
	struct virtq *q = &n->v.vq[2 * i + 1];
	struct pair *p = &n->p[i];
	struct vq_chain c = { 0 };
	struct iovec iov[VQ_MAX_CHAIN];
	uint8_t hdr[HDR_LEN];
	int r = 0, done = 0;

	if (!q->ready || n->vhost_on)
		return;
	do {
		vq_disable_kicks(q);
		while (done < TX_BUDGET && (r = vq_pop(q, &c)) > 0) {
			uint64_t frame = c.out_len - HDR_LEN;
			unsigned k;
			ssize_t w;

			done++;
			if (c.out_len < HDR_LEN + 14 || frame > MAX_FRAME ||
			    vq_copy_from(&c, 0, hdr, HDR_LEN) != HDR_LEN || !hdr_ok(n, hdr, frame)) {
				n->tx_drops++;
				vq_push(q, c.head, 0);
				continue;
			}
			iov[0].iov_base = hdr;
			iov[0].iov_len = HDR_LEN;
			k = 1 + vq_iov_slice(&c, false, HDR_LEN, frame, iov + 1, VQ_MAX_CHAIN - 1);
			w = writev(p->fd, iov, (int)k);
			if (w < 0 && errno == EAGAIN) {
				/* The tap's queue is full: retry when it drains. */
				vq_unpop(q, 1);
				set_tx_wait(n, i, true);
				virtio_notify(&n->v, 2 * i + 1);
				return;
			}
			if (w < 0) {
				n->tx_drops++;
				if (n->tx_drops < 10 || !(n->tx_drops & 1023))
					log_debug("%s: tap write: %s (%lu dropped)", n->name, strerror(errno),
						  n->tx_drops);
			} else {
				n->tx_frames++;
			}
			vq_push(q, c.head, 0);
		}
		virtio_notify(&n->v, 2 * i + 1);
		if (r < 0) {
			virtio_fail(&n->v, "transmit queue index out of range");
			return;
		}
		if (done >= TX_BUDGET) {
			/* Let the receive side and other queues run; come back. */
			uint64_t one = 1;

			if (write(n->v.qr[2 * i + 1].kick_fd, &one, sizeof(one)) < 0) {
				/* cannot overflow */
			}
			return;
		}
	} while (vq_enable_kicks(q));
}

static void tap_ready(void *opaque, uint32_t events)
{
	struct pair *p = opaque;
	struct vnet *n = p->n;
	int i = p->idx;

	restore_go(n);
	if (!n->v.running || n->vhost_on) {
		set_rx(n, i, false);
		set_tx_wait(n, i, false);
		return;
	}
	if (events & EPOLLOUT) {
		set_tx_wait(n, i, false);
		tx(n, i);
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		rx(n, i);
}

/* ------------------------------------------------------------- control */

static void attach(struct vnet *n, int i, bool on)
{
	struct ifreq ifr;

	if (!n->is_tap || n->npairs == 1 || n->p[i].attached == on)
		return;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = on ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE;
	if (ioctl(n->p[i].fd, TUNSETQUEUE, &ifr) < 0)
		log_warn("%s: %s tap queue %d: %s", n->name, on ? "attaching" : "detaching", i, strerror(errno));
	else
		n->p[i].attached = on;
}

/* Attaches the tap queues of the first `pairs` pairs and detaches the
 * rest; a running device then looks for frames on the new ones. */
static void set_pairs(struct vnet *n, int pairs, bool poll)
{
	for (int i = 0; i < n->npairs; i++)
		if (i < pairs)
			attach(n, i, true);
	for (int i = pairs; i < n->npairs; i++) {
		set_rx(n, i, false);
		attach(n, i, false);
	}
	n->active = pairs;
	for (int i = 0; poll && i < pairs; i++)
		rx(n, i);
}

static uint8_t ctrl_cmd(struct vnet *n, const struct vq_chain *c)
{
	uint8_t cmd[2], data[2];

	if (vq_copy_from(c, 0, cmd, 2) != 2)
		return 1;
	switch (cmd[0]) {
	case 0:                        /* RX mode: a tap sees every frame anyway */
		return cmd[1] <= 5 && c->out_len >= 3 ? 0 : 1;
	case 1:                        /* MAC table: accepted, no filtering */
		return cmd[1] == 0 ? 0 : 1;
	case 4:                        /* MQ: VQ_PAIRS_SET */
		if (cmd[1] != 0 || !virtio_has(&n->v, F_MQ) || vq_copy_from(c, 2, data, 2) != 2)
			return 1;
		if (le16_get(data) < 1 || le16_get(data) > n->npairs)
			return 1;
		set_pairs(n, le16_get(data), true);
		return 0;
	default:
		return 1;
	}
}

static void ctrl(struct vnet *n)
{
	int qi = 2 * n->npairs;
	struct virtq *q = &n->v.vq[qi];
	struct vq_chain c = { 0 };
	int r;

	do {
		while ((r = vq_pop(q, &c)) > 0) {
			uint8_t ack;

			if (!c.nin) {
				vq_push(q, c.head, 0);
				continue;
			}
			ack = ctrl_cmd(n, &c);
			vq_copy_to(&c, c.in_len - 1, &ack, 1);
			vq_push(q, c.head, 1);
		}
		virtio_notify(&n->v, qi);
		if (r < 0) {
			virtio_fail(&n->v, "control queue index out of range");
			return;
		}
	} while (vq_enable_kicks(q));
}

static void net_kick(struct virtio_dev *v, int q)
{
	struct vnet *n = v->opaque;

	restore_go(n);
	if (n->vhost_on && q < 2 * n->npairs)
		return;                /* the kick of a ring vhost took at restore_go */
	if (q == 2 * n->npairs)
		ctrl(n);
	else if (q & 1)
		tx(n, q / 2);
	else
		rx(n, q / 2);
}

/* ----------------------------------------------------------- start, stop */

static void offloads(struct vnet *n, unsigned flags)
{
	for (int i = 0; n->is_tap && i < n->npairs; i++)
		if (ioctl(n->p[i].fd, TUNSETOFFLOAD, flags) < 0)
			log_warn("%s: TUNSETOFFLOAD 0x%x: %s", n->name, flags, strerror(errno));
}

/* Gives pair i's rings back to the device thread (nothing runs there
 * until userspace takes over at the next start). */
static void vhost_pair_stop(struct vnet *n, int i)
{
	struct vhost_net *h = &n->vh[i];

	if (!h->started)
		return;
	vhn_stop(h);
	for (int r = 0; r < 2; r++) {
		virtio_set_call_fd(&n->v, 2 * i + r, -1);
		virtio_queue_external(&n->v, 2 * i + r, false);
	}
	log_debug("%s: pair %d: vhost-net stopped at receive %u, transmit %u", n->name, i, h->last_base[0],
		  h->last_base[1]);
}

/* Hands every pair whose rings the driver enabled to its vhost-net;
 * false (nothing handed over) when the kernel refuses one. */
static bool vhost_start(struct vnet *n)
{
	struct virtio_dev *v = &n->v;
	int started = 0;

	for (int i = 0; i < n->npairs; i++) {
		const struct virtio_queue_regs *q = &v->qr[2 * i];
		struct vhn_ring r[2] = {
			{ .size = q[0].size, .desc = q[0].desc, .avail = q[0].avail, .used = q[0].used },
			{ .size = q[1].size, .desc = q[1].desc, .avail = q[1].avail, .used = q[1].used },
		};
		/* 0 after a reset; a snapshot's indexes after a restore. */
		const uint16_t base[2] = { v->vq[2 * i].last_avail, v->vq[2 * i + 1].last_avail };
		char why[128];

		if (!q[0].enable || !q[1].enable)
			continue;
		/* The completions reach the guest from the first one on (a
		 * count waits in the eventfd while a vector is masked). */
		for (int k = 0; k < 2; k++) {
			virtio_set_call_fd(v, 2 * i + k, n->vh[i].call[k]);
			virtio_queue_external(v, 2 * i + k, true);
		}
		if (vhn_start(&n->vh[i], &v->vm->mem, v->guest_features, r, base, n->p[i].fd, why, sizeof(why)) < 0) {
			for (int k = 0; k < 2; k++) {
				virtio_set_call_fd(v, 2 * i + k, -1);
				virtio_queue_external(v, 2 * i + k, false);
			}
			for (int j = 0; j < i; j++)
				vhost_pair_stop(n, j);
			n->vhost_refused++;
			log_warn("%s: pair %d: vhost-net refused the rings (%s); this start runs in userspace", n->name, i,
				 why);
			return false;
		}
		started++;
	}
	for (int i = 0; i < n->npairs; i++)
		for (int k = 0; k < 2 && n->vh[i].started; k++) {
			/* Buffers posted before DRIVER_OK: the kernel looks at a
			 * ring when its kick eventfd is written. */
			uint64_t one = 1;

			if (write(v->qr[2 * i + k].kick_fd, &one, sizeof(one)) < 0) {
				/* cannot overflow */
			}
		}
	n->vhost_starts++;
	log_debug("%s: %d queue pair(s) on vhost-net, features 0x%llx", n->name, started,
		  (unsigned long long)vhn_features(n->vh[0].features, v->guest_features));
	return true;
}

static int net_start(struct virtio_dev *v)
{
	struct vnet *n = v->opaque;
	unsigned fl = 0;
	int mtu = n->cfg->mtu ? (int)n->cfg->mtu : 1500;

	if (virtio_has(v, F_GUEST_CSUM)) {
		fl |= TUN_F_CSUM;
		if (virtio_has(v, F_GUEST_TSO4))
			fl |= TUN_F_TSO4;
		if (virtio_has(v, F_GUEST_TSO6))
			fl |= TUN_F_TSO6;
		if ((fl & (TUN_F_TSO4 | TUN_F_TSO6)) && virtio_has(v, F_GUEST_ECN))
			fl |= TUN_F_TSO_ECN;
	}
	offloads(n, fl);
	if (n->is_tap && n->tap_mtu > mtu)
		mtu = n->tap_mtu;
	n->mrg = virtio_has(v, F_MRG_RXBUF);
	n->need = HDR_LEN + ((fl & (TUN_F_TSO4 | TUN_F_TSO6)) ? MAX_FRAME : (size_t)mtu + 18);
	if (n->restoring) {
		n->vhost_pending = n->vhost;
		n->vhost_on = false;
		set_pairs(n, n->restore_pairs ? n->restore_pairs : 1, false);
		return 0;              /* restore_go, once RAM is back */
	}
	n->vhost_on = n->vhost && vhost_start(n);
	set_pairs(n, 1, !n->vhost_on);
	set_rx(n, 0, true);
	return 0;
}

/* The first callback after a restore (the device thread is released once
 * RAM is loaded): the data path starts on the snapshot's indexes. */
static void restore_go(struct vnet *n)
{
	if (!n->restoring)
		return;
	n->restoring = false;
	if (!n->v.running)
		return;
	n->vhost_on = n->vhost_pending && vhost_start(n);
	n->vhost_pending = false;
	set_pairs(n, n->active, !n->vhost_on);
	for (int i = 0; i < n->active; i++)
		set_rx(n, i, true);
}

static void net_stop(struct virtio_dev *v)
{
	struct vnet *n = v->opaque;

	for (int i = 0; i < n->npairs; i++) {
		set_rx(n, i, false);
		set_tx_wait(n, i, false);
		vhost_pair_stop(n, i);
	}
	n->vhost_on = false;
	n->vhost_pending = false;
	n->restoring = n->loading;         /* a load stops before it starts */
	offloads(n, 0);
	set_pairs(n, 1, false);            /* a stopping device touches no queue */
}

static const struct virtio_ops net_ops = {
	.cfg_read = net_cfg_read, .start = net_start, .stop = net_stop, .kick = net_kick,
};

/* ------------------------------------------------------------- set-up */

static void read_tap_mtu(struct vnet *n)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", n->ifname);
	if (s >= 0 && ioctl(s, SIOCGIFMTU, &ifr) == 0)
		n->tap_mtu = ifr.ifr_mtu;
	if (s >= 0)
		close(s);
}

static int open_tap(struct vnet *n, const struct net_cfg *c, const char *where, struct verr *err)
{
	unsigned feat = 0;

	for (int i = 0; i < n->npairs; i++) {
		struct ifreq ifr;
		int hs = HDR_LEN;
		int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);

		if (fd < 0)
			return verr_errno(err, "%s: opening /dev/net/tun", where);
		n->p[i].fd = fd;
		if (i == 0 && ioctl(fd, TUNGETFEATURES, &feat) == 0 &&
		    (!(feat & IFF_VNET_HDR) || (n->npairs > 1 && !(feat & IFF_MULTI_QUEUE))))
			return verr_set(err, "%s: this kernel's tap lacks vnet headers or multiqueue", where);
		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", c->tap);
		ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | (n->npairs > 1 ? IFF_MULTI_QUEUE : 0);
		if (ioctl(fd, TUNSETIFF, &ifr) < 0)
			return verr_errno(err, "%s: attaching to tap %s%s", where, c->tap,
					  n->npairs > 1 ? " (queue flags must match a persistent tap's)" : "");
		if (ioctl(fd, TUNSETVNETHDRSZ, &hs) < 0)
			return verr_errno(err, "%s: TUNSETVNETHDRSZ", where);
		snprintf(n->ifname, sizeof(n->ifname), "%s", ifr.ifr_name);
		n->p[i].attached = true;
	}
	n->is_tap = true;
	/* Until the driver enables more pairs the tap steers every frame to
	 * queue 0, where it waits for the driver.  Attached, the other queues
	 * would take their share of what arrives before the driver starts, and
	 * the kernel drops a queue's frames when it is detached at start. */
	for (int i = 1; i < n->npairs; i++)
		attach(n, i, false);
	if (c->mtu) {
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		struct ifreq ifr;

		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", n->ifname);
		ifr.ifr_mtu = (int)c->mtu;
		if (s < 0 || ioctl(s, SIOCSIFMTU, &ifr) < 0)
			log_warn("%s: setting the MTU of %s to %lld: %s", where, n->ifname, c->mtu, strerror(errno));
		if (s >= 0)
			close(s);
	}
	read_tap_mtu(n);
	return 0;
}

/* fd=N: an open tap (vnet header size is set here), or any socket that
 * carries one frame with its 12-byte vnet header per message (tests). */
static int use_fd(struct vnet *n, const struct net_cfg *c, const char *where, struct verr *err)
{
	struct ifreq ifr;
	int hs = HDR_LEN, fd = fcntl((int)c->fd, F_DUPFD_CLOEXEC, 3);

	if (fd < 0)
		return verr_errno(err, "%s: fd %lld", where, c->fd);
	n->p[0].fd = fd;
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		return verr_errno(err, "%s: fd %lld", where, c->fd);
	memset(&ifr, 0, sizeof(ifr));
	if (ioctl(fd, TUNGETIFF, &ifr) == 0) {
		if (!(ifr.ifr_flags & IFF_VNET_HDR) || !(ifr.ifr_flags & IFF_TAP))
			return verr_set(err, "%s: fd %lld is a tun device without IFF_TAP|IFF_VNET_HDR", where, c->fd);
		if (ioctl(fd, TUNSETVNETHDRSZ, &hs) < 0)
			return verr_errno(err, "%s: TUNSETVNETHDRSZ", where);
		snprintf(n->ifname, sizeof(n->ifname), "%s", ifr.ifr_name);
		n->is_tap = true;
		read_tap_mtu(n);
	}
	n->p[0].attached = true;
	return 0;
}

/* Set-up (before the sandbox): a vhost-net per queue pair, or the reason
 * there is none in n->vhost_why.  The device then offers only the ring
 * features the kernel has. */
static void vhost_setup(struct vnet *n, const struct net_cfg *c, struct vm *vm)
{
	int hs = 0, taken = 0;

	if (!n->is_tap) {
		snprintf(n->vhost_why, sizeof(n->vhost_why), "fd=%lld is not a tap", c->fd);
		goto none;
	}
	/* The kernel strips and adds the 12-byte virtio 1.x header on the
	 * tap's side: the tap must carry exactly that. */
	if (ioctl(n->p[0].fd, TUNGETVNETHDRSZ, &hs) < 0 || hs != HDR_LEN) {
		snprintf(n->vhost_why, sizeof(n->vhost_why), "the tap's vnet header is %d bytes, not %d", hs, HDR_LEN);
		goto none;
	}
	for (int i = 0; i < n->npairs; i++) {
		int fd;
		char why[128];

		if (c->nvfd) {
			fd = c->vfd[i];
			taken = i + 1;     /* vhn_close closes it from here on */
			if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
				snprintf(n->vhost_why, sizeof(n->vhost_why), "vhostfd %d: %s", fd, strerror(errno));
				goto none;
			}
		} else if ((fd = open("/dev/vhost-net", O_RDWR | O_CLOEXEC)) < 0) {
			snprintf(n->vhost_why, sizeof(n->vhost_why), "/dev/vhost-net: %s", strerror(errno));
			goto none;
		}
		if (vhn_open(&n->vh[i], fd, &vm->mem, n->v.qr[2 * i].kick_fd, n->v.qr[2 * i + 1].kick_fd, why,
			     sizeof(why)) < 0) {
			snprintf(n->vhost_why, sizeof(n->vhost_why), "pair %d: %s", i, why);
			goto none;
		}
	}
	n->v.host_features &= ~vhn_missing(n->vh[0].features, n->v.host_features);
	n->vhost = true;
	return;
none:
	for (int i = 0; i < MAX_PAIRS; i++)
		vhn_close(&n->vh[i]);
	/* Descriptors we were given and did not take go too. */
	for (int i = taken; i < c->nvfd; i++)
		close(c->vfd[i]);
	n->vhost = false;
}

static int net_create(struct vm *vm, struct verr *err)
{
	size_t cnt = hv_dev_count(vm->cfg, &net_opt);

	for (size_t k = 0; k < cnt; k++) {
		const struct net_cfg *c = hv_dev_get(vm->cfg, &net_opt, k);
		const char *where = hv_dev_where(vm->cfg, &net_opt, k);
		struct vnet *n = calloc(1, sizeof(*n));
		uint16_t qmax[2 * MAX_PAIRS + 1];
		uint64_t f;
		int nq;

		if (!n)
			return verr_set(err, "out of memory");
		n->prev = vm_device(vm, &hv_dev_virtio_net);
		vm_device_set(vm, &hv_dev_virtio_net, n);
		n->cfg = c;
		n->npairs = (int)c->queues;
		for (int i = 0; i < MAX_PAIRS; i++) {
			n->p[i].fd = -1;
			n->p[i].n = n;
			n->p[i].idx = i;
			n->vh[i].fd = n->vh[i].call[0] = n->vh[i].call[1] = -1;
		}
		snprintf(n->name, sizeof(n->name), "vnet%zu", k);
		if ((c->tap ? open_tap(n, c, where, err) : use_fd(n, c, where, err)) < 0)
			return -1;
		memcpy(n->config, c->macb, 6);
		le16_put(n->config + 6, 1);             /* link up */
		le16_put(n->config + 8, (uint16_t)n->npairs);
		le16_put(n->config + 10, (uint16_t)(c->mtu ? c->mtu : 1500));
		f = VIRTIO_BIT(F_MAC) | VIRTIO_BIT(F_STATUS) | VIRTIO_BIT(F_MRG_RXBUF) | VIRTIO_BIT(F_CTRL_VQ) |
		    VIRTIO_BIT(F_CTRL_RX) | VIRTIO_BIT(F_CSUM) | VIRTIO_BIT(F_HOST_TSO4) |
		    VIRTIO_BIT(F_HOST_TSO6) | VIRTIO_BIT(F_HOST_ECN);
		if (n->is_tap)             /* the tap can hand us offloaded frames */
			f |= VIRTIO_BIT(F_GUEST_CSUM) | VIRTIO_BIT(F_GUEST_TSO4) | VIRTIO_BIT(F_GUEST_TSO6) |
			     VIRTIO_BIT(F_GUEST_ECN);
		if (c->mtu)
			f |= VIRTIO_BIT(F_MTU);
		if (n->npairs > 1)
			f |= VIRTIO_BIT(F_MQ);
		nq = 2 * n->npairs + 1;
		for (int i = 0; i < nq; i++)
			qmax[i] = i == nq - 1 ? 64 : 1024;
		if (virtio_init(&n->v, vm, n->name, VIRTIO_ID_NET, nq, qmax, sizeof(n->config), f, 0x020000,
				&net_ops, n, err) < 0)
			return verr_wrap(err, "%s", where);
		for (int i = 0; i < n->npairs; i++)
			if (evloop_add(n->v.loop, n->p[i].fd, 0, tap_ready, &n->p[i]) < 0)
				return verr_errno(err, "%s: epoll on the tap", where);
		if (c->vhost)
			vhost_setup(n, c, vm);
		if (virtio_start_thread(&n->v, err) < 0)
			return -1;
		log_info("%s: %s%s, MAC %02x:%02x:%02x:%02x:%02x:%02x, %d queue pair(s)%s", n->name,
			 n->is_tap ? "tap " : "fd ", n->is_tap ? n->ifname : "", c->macb[0], c->macb[1],
			 c->macb[2], c->macb[3], c->macb[4], c->macb[5], n->npairs, c->mtu ? ", MTU set" : "");
		if (n->vhost)
			log_info("%s: data path vhost-net (the kernel's), %d queue pair(s)", n->name, n->npairs);
		else
			log_info("%s: data path userspace%s%s%s", n->name, c->vhost ? " (vhost-net: " : "",
				 c->vhost ? n->vhost_why : "", c->vhost ? ")" : "");
	}
	return 0;
}

bool virtio_net_status(struct vm *vm, int k, struct vnet_status *st)
{
	int total = 0;
	struct vnet *n = vm_device(vm, &hv_dev_virtio_net);

	for (struct vnet *m = n; m; m = m->prev)
		total++;
	if (k < 0 || k >= total)
		return false;
	/* The list is newest first. */
	for (int i = total - 1; i > k; i--)
		n = n->prev;
	st->name = n->name;
	st->vhost = n->vhost && (__atomic_load_n(&n->vhost_on, __ATOMIC_RELAXED) || !n->v.running);
	st->rx_frames = __atomic_load_n(&n->rx_frames, __ATOMIC_RELAXED);
	st->tx_frames = __atomic_load_n(&n->tx_frames, __ATOMIC_RELAXED);
	st->rx_drops = __atomic_load_n(&n->rx_drops, __ATOMIC_RELAXED);
	st->tx_drops = __atomic_load_n(&n->tx_drops, __ATOMIC_RELAXED);
	st->vhost_starts = __atomic_load_n(&n->vhost_starts, __ATOMIC_RELAXED);
	st->vhost_refused = __atomic_load_n(&n->vhost_refused, __ATOMIC_RELAXED);
	return true;
}

/* Newest first, like the devices themselves. */
static void net_destroy(struct vm *vm)
{
	for (struct vnet *n = vm_device(vm, &hv_dev_virtio_net), *prev; n; n = prev) {
		prev = n->prev;
		virtio_free(&n->v);
		log_info("%s: userspace data path: %lu frames received (%lu dropped), %lu sent (%lu dropped); "
			 "vhost-net starts %lu, refused %lu", n->name, n->rx_frames, n->rx_drops, n->tx_frames,
			 n->tx_drops, n->vhost_starts, n->vhost_refused);
		for (int i = 0; i < MAX_PAIRS; i++)
			vhn_close(&n->vh[i]);
		for (int i = 0; i < MAX_PAIRS; i++)
			if (n->p[i].fd >= 0)
				close(n->p[i].fd);
		free(n);
	}
}

/* Snapshots: per device its config space (MAC, status, pairs, MTU), its
 * queue pairs and how many the driver uses, then the transport.  Under
 * vhost the kernel's worker owns the rings' indexes, so the save stops
 * each pair's backend and reads where its rings stopped into the
 * transport's queues (the used index is the one the kernel wrote into the
 * ring); the tap is attached again only once RAM is written (net_saved):
 * a frame the kernel took in between would be in the saved RAM beyond the
 * saved base, and the restored kernel would hand the guest that buffer
 * again ("input.0:id 110 is not a head!", the device then broken: a
 * clean-clone run's restarted job stood still so, 2026-12-06).  The
 * guest, paused all along, goes on either way.  The indexes are then the
 * same whichever path runs after a restore.  Frames on the tap and in the kernel are not saved: lost, as
 * on a wire (TCP sends again).  The tap is the restoring command line's
 * (a new job network's), the MAC must be the same. */
struct net_sync {
	struct vnet *n;
	int rc;
	char why[160];
};

static void net_sync(void *arg)
{
	struct net_sync *a = arg;
	struct vnet *n = a->n;

	for (int i = 0; i < n->npairs && !a->rc; i++) {
		uint16_t base[2];

		if (!n->vh[i].started)
			continue;
		if (vhn_bases(&n->vh[i], n->p[i].fd, base, a->why, sizeof(a->why)) < 0) {
			a->rc = -1;
			return;
		}
		for (int k = 0; k < 2; k++) {
			struct virtq *q = &n->v.vq[2 * i + k];

			q->last_avail = base[k];
			q->used_idx = __atomic_load_n(&q->used[1], __ATOMIC_ACQUIRE);
			q->signalled_used = q->used_idx;
			q->signalled_valid = false;
		}
	}
}

static int net_save(struct vm *vm, struct snap_buf *sb, struct verr *err)
{
	for (struct vnet *n = vm_device(vm, &hv_dev_virtio_net); n; n = n->prev) {
		struct net_sync a = { .n = n };

		pthread_mutex_lock(&n->v.lock);
		evloop_call(n->v.loop, net_sync, &a);
		pthread_mutex_unlock(&n->v.lock);
		if (a.rc < 0)
			return verr_set(err, "%s: vhost-net: %s", n->name, a.why);
		sb_put(sb, n->config, sizeof(n->config));
		sb_u32(sb, (uint32_t)n->npairs);
		sb_u32(sb, (uint32_t)n->active);
		virtio_save(&n->v, sb);
	}
	return 0;
}

static void net_attach(void *arg)
{
	struct vnet *n = arg;
	char why[160];

	for (int i = 0; i < n->npairs; i++)
		if (n->vh[i].started && vhn_attach(&n->vh[i], n->p[i].fd, why, sizeof(why)) < 0)
			log_err("%s: vhost-net after a snapshot: %s", n->name, why);
}

static void net_saved(struct vm *vm)
{
	for (struct vnet *n = vm_device(vm, &hv_dev_virtio_net); n; n = n->prev) {
		pthread_mutex_lock(&n->v.lock);
		evloop_call(n->v.loop, net_attach, n);
		pthread_mutex_unlock(&n->v.lock);
	}
}

static void net_restoring(void *arg)
{
	struct vnet *n = arg;

	n->loading = n->restoring = true;
}

static void net_restored(void *arg)
{
	struct vnet *n = arg;

	n->loading = false;
	if (!n->v.running)
		n->restoring = false;
}

static int net_load(struct vm *vm, struct snap_rd *r, struct verr *err)
{
	struct snap_rd start = *r;

	for (int pass = 0; pass < 2; pass++) {
		*r = start;
		for (struct vnet *n = vm_device(vm, &hv_dev_virtio_net); n; n = n->prev) {
			uint8_t config[sizeof(n->config)];
			uint32_t pairs, active;

			rd_get(r, config, sizeof(config));
			pairs = rd_u32(r);
			active = rd_u32(r);
			if (r->bad)
				return verr_set(err, "%s: state cut short", n->name);
			if (memcmp(config, n->config, 6))
				return verr_set(err, "%s: the snapshot's MAC is %02x:%02x:%02x:%02x:%02x:%02x, this one's "
					       "%02x:%02x:%02x:%02x:%02x:%02x", n->name, config[0], config[1], config[2],
					       config[3], config[4], config[5], n->config[0], n->config[1], n->config[2],
					       n->config[3], n->config[4], n->config[5]);
			if (memcmp(config, n->config, sizeof(config)))
				return verr_set(err, "%s: the snapshot's configuration (status, queue pairs, MTU) is not "
					       "this device's", n->name);
			/* 0 before the driver first started the device. */
			if (pairs != (uint32_t)n->npairs || active > pairs)
				return verr_set(err, "%s: %u of %u queue pairs in use, this device has %d", n->name, active,
						pairs, n->npairs);
			if (pass == 1) {
				pthread_mutex_lock(&n->v.lock);
				n->restore_pairs = (int)active;
				evloop_call(n->v.loop, net_restoring, n);
				pthread_mutex_unlock(&n->v.lock);
			}
			if (virtio_load(&n->v, r, pass == 1, err) < 0)
				return -1;
			if (pass == 1)
				evloop_call(n->v.loop, net_restored, n);
		}
		if (!rd_done(r))
			return verr_set(err, "%zu bytes after the last NIC's state", r->len - r->off);
	}
	return 0;
}

HV_DEVICE_SNAP_HELD(virtio_net, net_create, net_destroy, net_save, net_load, net_saved);
