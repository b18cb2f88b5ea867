/* vhost-user, front-end side: the message codec and the socket transport
 * (the protocol of QEMU's docs/interop/vhost-user.rst, version 1).
 *
 * The back-end is another process, so everything it sends is hostile.  A
 * reply is taken only when its header names the request that was sent,
 * says "reply" and version 1, and carries exactly the payload that
 * request's reply has (8 bytes for every request used here); descriptors
 * that arrive with a reply are closed.  A back-end that closes the socket,
 * stops half-way through a message or does not answer within the
 * connection's timeout fails the call, and the connection is then broken
 * for good: after one bad reply the byte stream cannot be trusted to be in
 * step, and the spec's answer to a wrong reply is to close.
 *
 * Only what vhpc-hv's devices use is here: features, protocol features
 * (REPLY_ACK, MQ), owner, the memory table, and per-ring number, base,
 * addresses, kick/call eventfds and enable. */
#ifndef HV_VHOST_USER_H
#define HV_VHOST_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum vhu_request {
	VHU_GET_FEATURES = 1,
	VHU_SET_FEATURES = 2,
	VHU_SET_OWNER = 3,
	VHU_SET_MEM_TABLE = 5,
	VHU_SET_VRING_NUM = 8,
	VHU_SET_VRING_ADDR = 9,
	VHU_SET_VRING_BASE = 10,
	VHU_GET_VRING_BASE = 11,
	VHU_SET_VRING_KICK = 12,
	VHU_SET_VRING_CALL = 13,
	VHU_GET_PROTOCOL_FEATURES = 15,
	VHU_SET_PROTOCOL_FEATURES = 16,
	VHU_GET_QUEUE_NUM = 17,
	VHU_SET_VRING_ENABLE = 18,
};

/* A virtio feature bit the virtio spec leaves unused; vhost-user took it
 * to say "protocol features are negotiable".  Never offered to a guest. */
#define VHU_F_PROTOCOL_FEATURES 30
#define VHU_PF_MQ               0
#define VHU_PF_REPLY_ACK        3

#define VHU_HDR_SIZE        12
#define VHU_VERSION         1u
#define VHU_VERSION_MASK    3u
#define VHU_FLAG_REPLY      (1u << 2)
#define VHU_FLAG_NEED_REPLY (1u << 3)
#define VHU_MAX_REGIONS     8                      /* SET_MEM_TABLE's fixed array */
#define VHU_MAX_PAYLOAD     (8 + 32 * VHU_MAX_REGIONS)
#define VHU_VRING_IDX_MASK  0xffull
#define VHU_VRING_NOFD      (1ull << 8)
#define VHU_REPLY_SIZE      8                      /* u64, ack or vring state */

struct vhu_msg {
	uint32_t req, flags, size;
	uint8_t payload[VHU_MAX_PAYLOAD];
	int fds[VHU_MAX_REGIONS];
	unsigned nfds;
};

/* One guest RAM region as SET_MEM_TABLE describes it: guest-physical
 * address, size, where the front-end has it mapped, and the offset of that
 * mapping in fd. */
struct vhu_region {
	uint64_t gpa, size, uaddr, mmap_offset;
	int fd;
};

const char *vhu_req_name(uint32_t req);
/* Whether the back-end answers req with a payload of its own (GET_*);
 * every other request is answered only with an ack, and only when
 * REPLY_ACK was negotiated and NEED_REPLY set. */
bool vhu_has_reply(uint32_t req);

/* Requests: each fills m completely (flags version 1). */
void vhu_msg_plain(struct vhu_msg *m, uint32_t req);
void vhu_msg_u64(struct vhu_msg *m, uint32_t req, uint64_t v);
void vhu_msg_state(struct vhu_msg *m, uint32_t req, uint32_t index, uint32_t num);
/* SET_VRING_ADDR: the ring parts as user addresses (the front-end's). */
void vhu_msg_addr(struct vhu_msg *m, uint32_t index, uint64_t desc, uint64_t used, uint64_t avail);
/* SET_VRING_KICK / SET_VRING_CALL: fd < 0 sends the "no fd" flag. */
void vhu_msg_vring_fd(struct vhu_msg *m, uint32_t req, uint32_t index, int fd);
/* -1 when n is 0 or more than VHU_MAX_REGIONS. */
int vhu_msg_mem_table(struct vhu_msg *m, const struct vhu_region *r, unsigned n);
/* Header and payload as they go on the wire; 0 if cap is too small. */
size_t vhu_encode(const struct vhu_msg *m, uint8_t *buf, size_t cap);

/* Checks the 12-byte header of what came back for request req.  0, or -1
 * with the reason in why. */
int vhu_check_reply(const uint8_t *hdr, uint32_t req, char *why, size_t whylen);

struct vhu_conn {
	int fd;                    /* -1: never connected or closed */
	int timeout_ms;            /* per call, for sending and for the reply */
	uint64_t protocol;         /* negotiated protocol features */
	bool broken;               /* a call failed; err says how */
	char err[256];
	/* Descriptors that arrived with replies (and were closed): a
	 * back-end has no business sending any. */
	unsigned long stray_fds;
};

/* path: a unix socket to connect to, or /dev/fd/N, a socket already
 * connected (the descriptor is duplicated).  -1 with err set. */
int vhu_connect(struct vhu_conn *c, const char *path, int timeout_ms);
/* Wraps an fd that is already a connected stream socket (tests). */
void vhu_attach(struct vhu_conn *c, int fd, int timeout_ms);
void vhu_close(struct vhu_conn *c);

/* Sends m (its fds as SCM_RIGHTS) in full within the timeout. */
int vhu_send(struct vhu_conn *c, const struct vhu_msg *m);
/* Reads the reply to req: header checked, exactly 8 payload bytes. */
int vhu_recv_reply(struct vhu_conn *c, uint32_t req, uint64_t *payload);
/* One request: sent with NEED_REPLY when it has no reply of its own and
 * REPLY_ACK is negotiated, then its reply (GET_*) or ack is awaited; a
 * non-zero ack is a refusal.  reply may be NULL.  On failure c is broken
 * and c->err reads "REQUEST: what went wrong". */
int vhu_call(struct vhu_conn *c, struct vhu_msg *m, uint64_t *reply);

/* The front-end's common steps. */
int vhu_get_u64(struct vhu_conn *c, uint32_t req, uint64_t *v);
int vhu_set_u64(struct vhu_conn *c, uint32_t req, uint64_t v);
int vhu_set_state(struct vhu_conn *c, uint32_t req, uint32_t index, uint32_t num);
/* GET_VRING_BASE: stops the ring; the reply must name the same ring. */
int vhu_get_vring_base(struct vhu_conn *c, uint32_t index, uint32_t *base);

#endif
