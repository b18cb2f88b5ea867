/* The kernel's virtio-net data path (vhost-net) for one queue pair: an open
 * /dev/vhost-net (the node agent's, or vhpc-hv's own before the sandbox)
 * serving a receive and a transmit ring straight from guest RAM to a tap
 * queue.  Only the ioctls live here; dev_virtio_net.c decides when.
 *
 * What cannot change while the guest runs is done once at set-up
 * (vhn_open: owner, the memory table, the kick and call eventfds), so the
 * seccomp allowlist needs only what a start and a reset do: features,
 * ring number/base/addresses, the backend, and the bases back. */
#ifndef HV_VHOST_NET_H
#define HV_VHOST_NET_H

#include "vm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One ring as the driver set it up: guest-physical addresses. */
struct vhn_ring {
	uint16_t size;
	uint64_t desc, avail, used;
};

struct vhost_net {
	int fd;                    /* -1: no vhost for this pair */
	uint64_t features;         /* what the kernel's vhost-net offers */
	int call[2];               /* eventfds the kernel signals (rx, tx) */
	bool started;              /* the tap is its backend */
	uint32_t last_base[2];     /* where the rings stopped at the last reset */
};

/* Takes fd (an open /dev/vhost-net; closed by vhn_close either way) for
 * the rings whose notifications arrive on kick_rx and kick_tx, with gm as
 * guest RAM.  -1 with the reason in why: the caller falls back to its
 * userspace data path. */
int vhn_open(struct vhost_net *h, int fd, const struct guest_mem *gm, int kick_rx, int kick_tx, char *why,
	     size_t len);
/* The device feature bits vhost decides on (ring layout, event index,
 * mergeable receive buffers) that `have` lacks, from among `offered`:
 * the device must not offer them. */
uint64_t vhn_missing(uint64_t have, uint64_t offered);
/* The part of the driver's features the kernel takes (the offloads are
 * the tap's business, set with TUNSETOFFLOAD). */
uint64_t vhn_features(uint64_t have, uint64_t guest);
/* Ring addresses checked against guest RAM and turned into vhpc-hv's
 * addresses: false when a ring is not wholly inside one RAM region. */
bool vhn_ring_uaddrs(const struct guest_mem *gm, const struct vhn_ring *r, uint64_t ua[3]);
/* Starts both rings on tap_fd (features, sizes, bases, addresses, then
 * the backend): base[] is where each ring's next available entry is, 0
 * after a reset, a snapshot's at a restore.  -1 with the reason in why,
 * and nothing left running. */
int vhn_start(struct vhost_net *h, const struct guest_mem *gm, uint64_t guest_features, const struct vhn_ring r[2],
	      const uint16_t base[2], int tap_fd, char *why, size_t len);
/* For a snapshot of a paused guest: detaches the backend (the kernel's
 * worker is done with the rings) and reads each ring's base into base[].
 * The backend stays detached until vhn_attach: a frame the kernel took in
 * meanwhile would be in the RAM written after, beyond the base saved, and
 * a restore would hand the guest that buffer twice.  -1 with the reason
 * in why if the kernel refuses either step (then tap_fd is attached
 * again). */
int vhn_bases(struct vhost_net *h, int tap_fd, uint16_t base[2], char *why, size_t len);
/* After vhn_bases: tap_fd attached again, the rings going on where they
 * stopped. */
int vhn_attach(struct vhost_net *h, int tap_fd, char *why, size_t len);
/* Detaches the backend (the kernel stops the rings) and reads the bases
 * back.  Safe to call when not started. */
void vhn_stop(struct vhost_net *h);
void vhn_close(struct vhost_net *h);

#endif
