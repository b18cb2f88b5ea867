/* vhost-user front-end: codec and transport (see vhost_user.h).  All
 * numbers are in the host's byte order, as the protocol says; the layouts
 * are written out byte by byte rather than as packed structs so that the
 * wire format is visible here and nothing depends on a compiler's idea of
 * padding. */
#include "vhost_user.h"
#include "fdpath.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

const char *vhu_req_name(uint32_t req)
{
	switch (req) {
	case VHU_GET_FEATURES: return "GET_FEATURES";
	case VHU_SET_FEATURES: return "SET_FEATURES";
	case VHU_SET_OWNER: return "SET_OWNER";
	case VHU_SET_MEM_TABLE: return "SET_MEM_TABLE";
	case VHU_SET_VRING_NUM: return "SET_VRING_NUM";
	case VHU_SET_VRING_ADDR: return "SET_VRING_ADDR";
	case VHU_SET_VRING_BASE: return "SET_VRING_BASE";
	case VHU_GET_VRING_BASE: return "GET_VRING_BASE";
	case VHU_SET_VRING_KICK: return "SET_VRING_KICK";
	case VHU_SET_VRING_CALL: return "SET_VRING_CALL";
	case VHU_GET_PROTOCOL_FEATURES: return "GET_PROTOCOL_FEATURES";
	case VHU_SET_PROTOCOL_FEATURES: return "SET_PROTOCOL_FEATURES";
	case VHU_GET_QUEUE_NUM: return "GET_QUEUE_NUM";
	case VHU_SET_VRING_ENABLE: return "SET_VRING_ENABLE";
	default: return "request ?";
	}
}

bool vhu_has_reply(uint32_t req)
{
	return req == VHU_GET_FEATURES || req == VHU_GET_PROTOCOL_FEATURES || req == VHU_GET_QUEUE_NUM ||
	       req == VHU_GET_VRING_BASE;
}

/* ------------------------------------------------------------- encoding */

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

void vhu_msg_plain(struct vhu_msg *m, uint32_t req)
{
	memset(m, 0, sizeof(*m));
	m->req = req;
	m->flags = VHU_VERSION;
}

void vhu_msg_u64(struct vhu_msg *m, uint32_t req, uint64_t v)
{
	vhu_msg_plain(m, req);
	put64(m->payload, v);
	m->size = 8;
}

void vhu_msg_state(struct vhu_msg *m, uint32_t req, uint32_t index, uint32_t num)
{
	vhu_msg_plain(m, req);
	put32(m->payload, index);
	put32(m->payload + 4, num);
	m->size = 8;
}

void vhu_msg_addr(struct vhu_msg *m, uint32_t index, uint64_t desc, uint64_t used, uint64_t avail)
{
	/* index, flags (no logging), descriptor, used, available, log */
	vhu_msg_plain(m, VHU_SET_VRING_ADDR);
	put32(m->payload, index);
	put32(m->payload + 4, 0);
	put64(m->payload + 8, desc);
	put64(m->payload + 16, used);
	put64(m->payload + 24, avail);
	put64(m->payload + 32, 0);
	m->size = 40;
}

void vhu_msg_vring_fd(struct vhu_msg *m, uint32_t req, uint32_t index, int fd)
{
	vhu_msg_u64(m, req, (index & VHU_VRING_IDX_MASK) | (fd < 0 ? VHU_VRING_NOFD : 0));
	if (fd >= 0) {
		m->fds[0] = fd;
		m->nfds = 1;
	}
}

int vhu_msg_mem_table(struct vhu_msg *m, const struct vhu_region *r, unsigned n)
{
	vhu_msg_plain(m, VHU_SET_MEM_TABLE);
	if (!n || n > VHU_MAX_REGIONS)
		return -1;
	put32(m->payload, n);
	put32(m->payload + 4, 0);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *p = m->payload + 8 + 32 * i;

		put64(p, r[i].gpa);
		put64(p + 8, r[i].size);
		put64(p + 16, r[i].uaddr);
		put64(p + 24, r[i].mmap_offset);
		/* One descriptor per region, in region order, even when every
		 * region is the same file: that is how back-ends pair them. */
		m->fds[i] = r[i].fd;
	}
	m->nfds = n;
	m->size = 8 + 32 * n;
	return 0;
}

size_t vhu_encode(const struct vhu_msg *m, uint8_t *buf, size_t cap)
{
	if (m->size > VHU_MAX_PAYLOAD || cap < VHU_HDR_SIZE + (size_t)m->size)
		return 0;
	put32(buf, m->req);
	put32(buf + 4, m->flags);
	put32(buf + 8, m->size);
	memcpy(buf + VHU_HDR_SIZE, m->payload, m->size);
	return VHU_HDR_SIZE + m->size;
}

int vhu_check_reply(const uint8_t *hdr, uint32_t req, char *why, size_t whylen)
{
	uint32_t r = get32(hdr), flags = get32(hdr + 4), size = get32(hdr + 8);

	if (r != req) {
		snprintf(why, whylen, "the back-end answered request %u (%s) instead", r, vhu_req_name(r));
		return -1;
	}
	if ((flags & VHU_VERSION_MASK) != VHU_VERSION) {
		snprintf(why, whylen, "reply in protocol version %u (flags 0x%x), not %u", flags & VHU_VERSION_MASK,
			 flags, VHU_VERSION);
		return -1;
	}
	if (!(flags & VHU_FLAG_REPLY)) {
		snprintf(why, whylen, "the back-end sent a request (flags 0x%x) where a reply was due", flags);
		return -1;
	}
	if (size != VHU_REPLY_SIZE) {
		snprintf(why, whylen, "reply payload of %u bytes, expected %u", size, VHU_REPLY_SIZE);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ transport */

static int fail(struct vhu_conn *c, uint32_t req, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct vhu_conn *c, uint32_t req, const char *fmt, ...)
{
	char why[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(c->err, sizeof(c->err), "%s: %s", vhu_req_name(req), why);
	c->broken = true;
	return -1;
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* 1: fd is ready (or has an error or hang-up the next call will report),
 * 0: the deadline passed. */
static int wait_for(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		struct pollfd p = { .fd = fd, .events = events };
		int r;

		if (left < 0)
			left = 0;
		r = poll(&p, 1, (int)left);
		if (r > 0)
			return 1;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return 1;
	}
}

void vhu_attach(struct vhu_conn *c, int fd, int timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->timeout_ms = timeout_ms;
}

void vhu_close(struct vhu_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

int vhu_connect(struct vhu_conn *c, const char *path, int timeout_ms)
{
	int fd, type = 0, domain = 0, listening = 0;
	socklen_t l;

	vhu_attach(c, -1, timeout_ms);
	if (!strncmp(path, "/dev/fd/", 8)) {
		struct sockaddr_un peer;

		fd = hv_open(path, O_RDWR, 0);
		if (fd < 0) {
			snprintf(c->err, sizeof(c->err), "%s: %s", path, strerror(errno));
			return -1;
		}
		l = sizeof(type);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM ||
		    (l = sizeof(domain), getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l)) < 0 || domain != AF_UNIX) {
			snprintf(c->err, sizeof(c->err), "%s is not a unix stream socket", path);
			close(fd);
			return -1;
		}
		l = sizeof(listening);
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l) == 0 && listening) {
			snprintf(c->err, sizeof(c->err),
				 "%s is a listening socket; pass one connected to the back-end", path);
			close(fd);
			return -1;
		}
		l = sizeof(peer);
		if (getpeername(fd, (struct sockaddr *)&peer, &l) < 0) {
			snprintf(c->err, sizeof(c->err), "%s is not connected to a back-end: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
	} else {
		struct sockaddr_un a = { .sun_family = AF_UNIX };

		if (strlen(path) >= sizeof(a.sun_path)) {
			snprintf(c->err, sizeof(c->err), "socket path %s is longer than %zu bytes", path,
				 sizeof(a.sun_path) - 1);
			return -1;
		}
		memcpy(a.sun_path, path, strlen(path) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			snprintf(c->err, sizeof(c->err), "socket: %s", strerror(errno));
			return -1;
		}
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			snprintf(c->err, sizeof(c->err), "connecting to %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
	}
	c->fd = fd;
	return 0;
}

static int send_by(struct vhu_conn *c, const struct vhu_msg *m, int64_t deadline)
{
	uint8_t buf[VHU_HDR_SIZE + VHU_MAX_PAYLOAD];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * VHU_MAX_REGIONS)];
	} ctl;
	size_t len = vhu_encode(m, buf, sizeof(buf)), done = 0;

	if (c->broken)
		return -1;
	if (c->fd < 0)
		return fail(c, m->req, "no connection to the back-end");
	if (!len || m->nfds > VHU_MAX_REGIONS)
		return fail(c, m->req, "malformed request (size %u, %u fds)", m->size, m->nfds);
	while (done < len) {
		struct iovec iov = { .iov_base = buf + done, .iov_len = len - done };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t r;

		/* The descriptors ride on the first byte; a partial send has
		 * delivered them already. */
		if (!done && m->nfds) {
			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.b;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * m->nfds);
			ctl.h.cmsg_level = SOL_SOCKET;
			ctl.h.cmsg_type = SCM_RIGHTS;
			ctl.h.cmsg_len = CMSG_LEN(sizeof(int) * m->nfds);
			memcpy(CMSG_DATA(&ctl.h), m->fds, sizeof(int) * m->nfds);
		}
		r = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!wait_for(c->fd, POLLOUT, deadline))
				return fail(c, m->req, "the back-end stopped reading (%zu of %zu bytes sent within %d ms)",
					    done, len, c->timeout_ms);
			continue;
		}
		if (r < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN))
			return fail(c, m->req, "the back-end closed the connection");
		return fail(c, m->req, "sendmsg: %s", r < 0 ? strerror(errno) : "sent nothing");
	}
	return 0;
}

/* Exactly n bytes, or a failure naming what arrived. */
static int recv_by(struct vhu_conn *c, uint32_t req, uint8_t *buf, size_t n, size_t before, size_t total,
		   int64_t deadline)
{
	size_t got = 0;

	while (got < n) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int) * VHU_MAX_REGIONS)];
		} ctl;
		struct iovec iov = { .iov_base = buf + got, .iov_len = n - got };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
				     .msg_controllen = sizeof(ctl.b) };
		ssize_t r = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (r >= 0) {
			/* Replies carry no descriptors: close what came anyway,
			 * so a back-end cannot make us run out. */
			for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
				if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
				    h->cmsg_len >= CMSG_LEN(0)) {
					size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);

					for (size_t i = 0; i < k; i++) {
						int fd;

						memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
						close(fd);
						c->stray_fds++;
					}
				}
		}
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0) {
			if (!before && !got)
				return fail(c, req, "the back-end closed the connection");
			return fail(c, req, "the back-end closed the connection in the middle of its reply (%zu of %zu bytes)",
				    before + got, total);
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if (!wait_for(c->fd, POLLIN, deadline)) {
				if (!before && !got)
					return fail(c, req, "no reply within %d ms", c->timeout_ms);
				return fail(c, req, "reply cut short (%zu of %zu bytes within %d ms)", before + got, total,
					    c->timeout_ms);
			}
			continue;
		}
		if (errno == ECONNRESET)
			return fail(c, req, "the back-end closed the connection");
		return fail(c, req, "recvmsg: %s", strerror(errno));
	}
	return 0;
}

static int recv_reply_by(struct vhu_conn *c, uint32_t req, uint64_t *payload, int64_t deadline)
{
	uint8_t hdr[VHU_HDR_SIZE], p[VHU_REPLY_SIZE];
	char why[160];

	if (c->broken)
		return -1;
	if (c->fd < 0)
		return fail(c, req, "no connection to the back-end");
	if (recv_by(c, req, hdr, sizeof(hdr), 0, sizeof(hdr) + sizeof(p), deadline) < 0)
		return -1;
	if (vhu_check_reply(hdr, req, why, sizeof(why)) < 0)
		return fail(c, req, "%s", why);
	if (recv_by(c, req, p, sizeof(p), sizeof(hdr), sizeof(hdr) + sizeof(p), deadline) < 0)
		return -1;
	memcpy(payload, p, sizeof(*payload));
	return 0;
}

int vhu_send(struct vhu_conn *c, const struct vhu_msg *m)
{
	return send_by(c, m, now_ms() + c->timeout_ms);
}

int vhu_recv_reply(struct vhu_conn *c, uint32_t req, uint64_t *payload)
{
	return recv_reply_by(c, req, payload, now_ms() + c->timeout_ms);
}

int vhu_call(struct vhu_conn *c, struct vhu_msg *m, uint64_t *reply)
{
	int64_t deadline = now_ms() + c->timeout_ms;
	bool own = vhu_has_reply(m->req);
	bool ack = !own && (c->protocol & (1ull << VHU_PF_REPLY_ACK));
	uint64_t v = 0;

	if (ack)
		m->flags |= VHU_FLAG_NEED_REPLY;
	if (send_by(c, m, deadline) < 0)
		return -1;
	if (!own && !ack)
		return 0;
	if (recv_reply_by(c, m->req, &v, deadline) < 0)
		return -1;
	if (ack && v)
		return fail(c, m->req, "the back-end refused it (status %llu)", (unsigned long long)v);
	if (reply)
		*reply = v;
	return 0;
}

int vhu_get_u64(struct vhu_conn *c, uint32_t req, uint64_t *v)
{
	struct vhu_msg m;

	vhu_msg_plain(&m, req);
	return vhu_call(c, &m, v);
}

int vhu_set_u64(struct vhu_conn *c, uint32_t req, uint64_t v)
{
	struct vhu_msg m;

	vhu_msg_u64(&m, req, v);
	return vhu_call(c, &m, NULL);
}

int vhu_set_state(struct vhu_conn *c, uint32_t req, uint32_t index, uint32_t num)
{
	struct vhu_msg m;

	vhu_msg_state(&m, req, index, num);
	return vhu_call(c, &m, NULL);
}

int vhu_get_vring_base(struct vhu_conn *c, uint32_t index, uint32_t *base)
{
	struct vhu_msg m;
	uint64_t v;
	uint8_t p[8];

	vhu_msg_state(&m, VHU_GET_VRING_BASE, index, 0);
	if (vhu_call(c, &m, &v) < 0)
		return -1;
	memcpy(p, &v, 8);
	if (get32(p) != index)
		return fail(c, VHU_GET_VRING_BASE, "the reply names ring %u, not %u", get32(p), index);
	*base = get32(p + 4);
	return 0;
}
