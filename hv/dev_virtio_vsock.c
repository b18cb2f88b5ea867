/* virtio-vsock bridged to host unix sockets, the way Firecracker's hybrid
 * vsock does it (the guest agent's control channel):
 *   - host-initiated: connect to the unix socket PATH (uds=), write
 *     "CONNECT <port>\n"; once the guest accepts, vhpc-hv answers
 *     "OK <host port>\n" and the socket carries the stream; a refusal
 *     closes it.
 *   - guest-initiated: a connection to host CID 2, port P, is connected to
 *     the unix socket "PATH_P"; nobody listening there means a reset.
 *     Under --seccomp it is always reset: the allowlist has no socket or
 *     connect (sandbox.c), so a guest that owned vhpc-hv could not reach
 *     other sockets of the host (abstract ones ignore the jail's mount
 *     namespace).  vhpc's guests never connect to the host.
 * Streams only.  Credit-based flow control both ways: the guest may not
 * send more than our per-connection buffer holds (a guest that does is
 * reset), and we read a host socket only while the guest has credit and
 * receive buffers.  All state lives in the device thread.
 *
 *   --vsock cid=N,uds=PATH                (YAML: vsock: {cid: N, uds: PATH}) */
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
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define Q_RX 0
#define Q_TX 1
#define Q_EV 2
#define HOST_CID 2
#define HDR 44
#define TYPE_STREAM 1
#define OP_REQUEST 1
#define OP_RESPONSE 2
#define OP_RST 3
#define OP_SHUTDOWN 4
#define OP_RW 5
#define OP_CREDIT_UPDATE 6
#define OP_CREDIT_REQUEST 7
#define SHUT_RCV_ 1
#define SHUT_SEND_ 2
#define BUF_ALLOC (256u << 10)      /* what we buffer per connection, guest to host */
#define MAX_PKT (64u << 10)
#define MAX_CONNS 256
#define MAX_RSTS 256
#define FIRST_LOCAL_PORT 0x40000000u
/* Resets a restore owes the guest (one per connection it had) on top of
 * the replies to unknown connections. */
#define RST_SLOTS (MAX_RSTS + MAX_CONNS)

struct vsock_cfg {
	long long cid;
	char *uds;
};

static const struct cf_field vsock_fields[] = {
	{ .key = "cid", .kind = CF_INT, .off = offsetof(struct vsock_cfg, cid), .min = 3, .max = 0xfffffffell,
	  .flags = CF_REQUIRED },
	{ .key = "uds", .kind = CF_STR, .off = offsetof(struct vsock_cfg, uds), .flags = CF_REQUIRED },
	{ 0 }
};
static const struct cf_schema vsock_schema = { "vsock", sizeof(struct vsock_cfg), vsock_fields };

static int vsock_check(void *inst, const char *where, struct verr *err)
{
	struct vsock_cfg *c = inst;

	if (!c->cid)
		return verr_set(err, "%s: cid= (3 or more) is required", where);
	if (!c->uds || !c->uds[0])
		return verr_set(err, "%s: uds= (the host unix socket) is required", where);
	/* PATH_4294967295 must still fit a sockaddr_un. */
	if (strlen(c->uds) + 12 > sizeof(((struct sockaddr_un *)0)->sun_path))
		return verr_set(err, "%s: uds=%s is too long for a unix socket path", where, c->uds);
	return 0;
}

static const struct hv_devopt vsock_opt = {
	.name = "vsock", .usage = "cid=N,uds=PATH", .schema = &vsock_schema, .max = 1,
	.check = vsock_check,
};
HV_DEVICE_OPTION(vsock_opt);

enum cstate { C_LINE, C_WAIT_GUEST, C_OPEN };

struct conn {
	struct vvsock *vs;
	int fd;
	enum cstate state;
	uint32_t local_port, peer_port;
	char line[64];
	/* Credit: what the guest told us, and what we sent/forwarded. */
	uint32_t peer_buf_alloc, peer_fwd_cnt, rx_cnt, fwd_cnt, fwd_told;
	uint8_t *txbuf;            /* guest bytes the socket has not taken yet */
	size_t tx_len;
	bool want_request, want_response, want_credit, want_shutdown, want_rst;
	bool guest_shut_send, guest_shut_rcv, host_eof, close_after_flush;
	bool data_ready;           /* socket readable, waiting for rx buffers */
	bool hup;                  /* hung up: out of epoll, drained by rx_pump */
	uint32_t events;
};

struct vvsock {
	struct virtio_dev v;
	uint64_t cid;
	char uds[108];
	int lfd;
	uint8_t cfg[8];
	struct conn *conns[MAX_CONNS];
	uint32_t next_port;
	struct { uint32_t src, dst; } rst[RST_SLOTS];  /* replies for unknown connections */
	int nrst;
	unsigned rr;               /* round robin over connections */
	unsigned long resets_sent, bad_packets;
	unsigned long refused;     /* guest-initiated connections under --seccomp */
};

HV_DEVICE_DECLARE(virtio_vsock);

static void vs_cfg_read(struct virtio_dev *v, unsigned off, void *data, unsigned len)
{
	struct vvsock *s = v->opaque;

	cfg_copy_out(s->cfg, sizeof(s->cfg), off, data, len);
}

/* ----------------------------------------------------------- connections */

static uint32_t credit(const struct conn *c)
{
	uint32_t in_flight = c->rx_cnt - c->peer_fwd_cnt;

	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

static void update_events(struct conn *c)
{
	uint32_t ev = 0;

	/* A hung-up socket stays readable (EOF) without telling epoll. */
	if (c->hup) {
		if (c->state == C_OPEN && !c->host_eof && !c->guest_shut_rcv && credit(c))
			c->data_ready = true;
		return;
	}

	if (c->state == C_LINE)
		ev = EPOLLIN;
	else if (c->state == C_OPEN && !c->host_eof && !c->guest_shut_rcv && !c->data_ready && credit(c))
		ev = EPOLLIN;
	if (c->tx_len)
		ev |= EPOLLOUT;
	if (ev != c->events && evloop_mod(c->vs->v.loop, c->fd, ev) == 0)
		c->events = ev;
}

static void conn_free(struct conn *c)
{
	struct vvsock *s = c->vs;

	for (int i = 0; i < MAX_CONNS; i++)
		if (s->conns[i] == c)
			s->conns[i] = NULL;
	if (!c->hup)
		evloop_del(s->v.loop, c->fd);
	close(c->fd);
	free(c->txbuf);
	free(c);
}

static void conn_ready(void *opaque, uint32_t events);

/* Takes fd (closes it on failure). */
static struct conn *conn_new(struct vvsock *s, int fd, enum cstate st)
{
	struct conn *c;
	int slot = -1;

	for (int i = 0; i < MAX_CONNS && slot < 0; i++)
		if (!s->conns[i])
			slot = i;
	if (slot < 0 || !(c = calloc(1, sizeof(*c)))) {
		close(fd);
		return NULL;
	}
	c->vs = s;
	c->fd = fd;
	c->state = st;
	if (evloop_add(s->v.loop, fd, 0, conn_ready, c) < 0) {
		close(fd);
		free(c);
		return NULL;
	}
	s->conns[slot] = c;
	return c;
}

/* Connections being reset are gone as far as the guest is concerned. */
static struct conn *find(struct vvsock *s, uint32_t local, uint32_t peer)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (s->conns[i] && s->conns[i]->state != C_LINE && !s->conns[i]->want_rst &&
		    s->conns[i]->local_port == local && s->conns[i]->peer_port == peer)
			return s->conns[i];
	return NULL;
}

static void queue_rst(struct vvsock *s, uint32_t src, uint32_t dst)
{
	if (s->nrst < RST_SLOTS) {
		s->rst[s->nrst].src = src;
		s->rst[s->nrst].dst = dst;
		s->nrst++;
	}
}

/* Resets the guest side and drops the connection. */
static void conn_reset(struct conn *c)
{
	struct vvsock *s = c->vs;

	if (c->state != C_LINE)
		queue_rst(s, c->local_port, c->peer_port);
	conn_free(c);
}

/* -------------------------------------------------------------- to guest */

static void put_hdr(uint8_t *h, struct vvsock *s, uint32_t src, uint32_t dst, uint32_t len, uint16_t op,
		    uint32_t flags, const struct conn *c)
{
	memset(h, 0, HDR);
	le64_put(h + 0, HOST_CID);
	le64_put(h + 8, s->cid);
	le32_put(h + 16, src);
	le32_put(h + 20, dst);
	le32_put(h + 24, len);
	le16_put(h + 28, TYPE_STREAM);
	le16_put(h + 30, op);
	le32_put(h + 32, flags);
	le32_put(h + 36, c ? BUF_ALLOC : 0);
	le32_put(h + 40, c ? c->fwd_cnt : 0);
}

static void send_ctl(struct vvsock *s, struct vq_chain *ch, struct conn *c, uint16_t op, uint32_t flags)
{
	uint8_t h[HDR];

	put_hdr(h, s, c->local_port, c->peer_port, 0, op, flags, c);
	c->fwd_told = c->fwd_cnt;
	vq_copy_to(ch, 0, h, HDR);
	vq_push(&s->v.vq[Q_RX], ch->head, HDR);
}

static void host_eof(struct conn *c)
{
	c->host_eof = true;
	c->want_shutdown = true;
}

/* One packet for the guest into chain ch, if anything is due: resets for
 * unknown connections first, then control packets, then data (round
 * robin).  Returns false when there is nothing to send. */
static bool next_packet(struct vvsock *s, struct vq_chain *ch)
{
	if (s->nrst) {
		uint8_t h[HDR];

		s->nrst--;
		put_hdr(h, s, s->rst[s->nrst].src, s->rst[s->nrst].dst, 0, OP_RST, 0, NULL);
		vq_copy_to(ch, 0, h, HDR);
		vq_push(&s->v.vq[Q_RX], ch->head, HDR);
		s->resets_sent++;
		return true;
	}
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = s->conns[i];

		if (!c)
			continue;
		if (c->want_rst) {
			send_ctl(s, ch, c, OP_RST, 0);
			conn_free(c);
			return true;
		}
		if (c->want_request) {
			c->want_request = false;
			send_ctl(s, ch, c, OP_REQUEST, 0);
			return true;
		}
		if (c->want_response) {
			c->want_response = false;
			send_ctl(s, ch, c, OP_RESPONSE, 0);
			update_events(c);
			return true;
		}
		if (c->want_shutdown && !c->data_ready) {
			c->want_shutdown = false;
			send_ctl(s, ch, c, OP_SHUTDOWN, SHUT_SEND_);
			return true;
		}
		if (c->want_credit) {
			c->want_credit = false;
			send_ctl(s, ch, c, OP_CREDIT_UPDATE, 0);
			return true;
		}
	}
	for (unsigned k = 0; k < MAX_CONNS; k++) {
		struct conn *c = s->conns[(s->rr + k) % MAX_CONNS];
		uint32_t cr;
		uint64_t room;
		struct iovec iov[VQ_MAX_CHAIN];
		unsigned n;
		ssize_t r;
		uint8_t h[HDR];

		if (!c || !c->data_ready)
			continue;
		cr = credit(c);
		room = ch->in_len - HDR;
		if (room > cr)
			room = cr;
		if (room > MAX_PKT)
			room = MAX_PKT;
		if (!room) {
			c->data_ready = false;     /* waits for credit */
			update_events(c);
			continue;
		}
		n = vq_iov_slice(ch, true, HDR, room, iov, VQ_MAX_CHAIN);
		r = readv(c->fd, iov, (int)n);
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			c->data_ready = false;
			update_events(c);
			continue;
		}
		if (r <= 0) {
			c->data_ready = false;
			if (r < 0) {
				c->want_rst = true;
			} else {
				host_eof(c);
				update_events(c);
			}
			return next_packet(s, ch);
		}
		put_hdr(h, s, c->local_port, c->peer_port, (uint32_t)r, OP_RW, 0, c);
		c->fwd_told = c->fwd_cnt;
		c->rx_cnt += (uint32_t)r;
		vq_copy_to(ch, 0, h, HDR);
		vq_push(&s->v.vq[Q_RX], ch->head, HDR + (uint32_t)r);
		s->rr = (s->rr + k + 1) % MAX_CONNS;
		return true;
	}
	return false;
}

/* Fills the guest's receive buffers with whatever is due. */
static void rx_pump(struct vvsock *s)
{
	struct virtq *q = &s->v.vq[Q_RX];

	if (!s->v.running || !q->ready)
		return;
	for (int budget = 0; budget < 256; budget++) {
		struct vq_chain ch = { 0 };
		int r = vq_pop(q, &ch);

		if (r < 0) {
			virtio_fail(&s->v, "receive queue index out of range");
			break;
		}
		if (r == 0) {
			if (vq_enable_kicks(q))
				continue;
			break;
		}
		if (ch.nout || ch.in_len < HDR) {
			vq_push(q, ch.head, 0);
			continue;
		}
		if (!next_packet(s, &ch)) {
			vq_unpop(q, 1);
			break;
		}
	}
	virtio_notify(&s->v, Q_RX);        /* also publishes chains vq_pop refused */
}

/* ------------------------------------------------------------ from guest */

static void flush_tx(struct conn *c)
{
	while (c->tx_len) {
		ssize_t w = send(c->fd, c->txbuf, c->tx_len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (w <= 0) {
			c->want_rst = true;
			c->tx_len = 0;
			return;
		}
		memmove(c->txbuf, c->txbuf + w, c->tx_len - (size_t)w);
		c->tx_len -= (size_t)w;
		c->fwd_cnt += (uint32_t)w;
	}
	if (!c->tx_len && c->close_after_flush) {
		c->want_rst = true;
		return;
	}
	if (!c->tx_len && c->guest_shut_send)
		shutdown(c->fd, SHUT_WR);
	/* Tell the guest about freed buffer space before it stalls. */
	if (c->fwd_cnt - c->fwd_told >= BUF_ALLOC / 4 || (!c->tx_len && c->fwd_cnt != c->fwd_told))
		c->want_credit = true;
	update_events(c);
}

/* Guest bytes for the socket: straight from guest memory, the rest into
 * the connection's buffer (bounded by the credit we gave). */
static void rw(struct conn *c, const struct vq_chain *ch, uint32_t len)
{
	struct iovec iov[VQ_MAX_CHAIN];
	unsigned n = vq_iov_slice(ch, false, HDR, len, iov, VQ_MAX_CHAIN);
	size_t done = 0;
	ssize_t w;

	if (c->guest_shut_send || c->tx_len + len > BUF_ALLOC) {
		c->want_rst = true;                /* beyond the credit we gave */
		return;
	}
	if (!c->tx_len) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };

		w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			c->want_rst = true;
			return;
		}
		if (w > 0) {
			done = (size_t)w;
			c->fwd_cnt += (uint32_t)w;
		}
	}
	if (done < len) {
		if (!c->txbuf && !(c->txbuf = malloc(BUF_ALLOC))) {
			c->want_rst = true;
			return;
		}
		/* What the socket did not take waits in our buffer. */
		c->tx_len += vq_copy_from(ch, HDR + done, c->txbuf + c->tx_len, len - done);
	}
	flush_tx(c);
}

static int uds_connect(struct vvsock *s, uint32_t port)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (s->v.vm->cfg && s->v.vm->cfg->seccomp) {
		if (!s->refused++)
			log_warn("vsock: the guest's connection to host port %u reset: under --seccomp vhpc-hv "
				 "makes no connections once the guest runs", port);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", s->uds, port);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

static void packet(struct vvsock *s, const struct vq_chain *ch)
{
	uint8_t h[HDR];
	uint32_t src, dst, len, flags;
	uint16_t type, op;
	struct conn *c;

	if (ch->out_len < HDR || vq_copy_from(ch, 0, h, HDR) != HDR) {
		s->bad_packets++;
		return;
	}
	src = le32_get(h + 16);
	dst = le32_get(h + 20);
	len = le32_get(h + 24);
	type = le16_get(h + 28);
	op = le16_get(h + 30);
	flags = le32_get(h + 32);
	if (le64_get(h) != s->cid || le64_get(h + 8) != HOST_CID || len > MAX_PKT || len > ch->out_len - HDR) {
		s->bad_packets++;
		return;
	}
	c = find(s, dst, src);
	if (type != TYPE_STREAM) {
		if (op != OP_RST)
			queue_rst(s, dst, src);
		return;
	}
	if (c) {
		c->peer_buf_alloc = le32_get(h + 36);
		c->peer_fwd_cnt = le32_get(h + 40);
	}
	switch (op) {
	case OP_REQUEST: {
		int fd;

		if (c) {                       /* a second request on one pair */
			conn_reset(c);
			return;
		}
		fd = uds_connect(s, dst);
		if (fd < 0 || !(c = conn_new(s, fd, C_OPEN))) {
			queue_rst(s, dst, src);
			return;
		}
		c->local_port = dst;
		c->peer_port = src;
		c->peer_buf_alloc = le32_get(h + 36);
		c->peer_fwd_cnt = le32_get(h + 40);
		c->want_response = true;
		return;
	}
	case OP_RESPONSE:
		if (!c || c->state != C_WAIT_GUEST) {
			if (c)
				conn_reset(c);
			else
				queue_rst(s, dst, src);
			return;
		}
		c->state = C_OPEN;
		{
			char ok[32];
			int l = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);

			/* A fresh unix socket takes a short line at once. */
			if (send(c->fd, ok, (size_t)l, MSG_NOSIGNAL | MSG_DONTWAIT) != l) {
				conn_reset(c);
				return;
			}
		}
		update_events(c);
		return;
	case OP_RST:
		if (c)
			conn_free(c);
		return;
	case OP_SHUTDOWN:
		if (!c) {
			queue_rst(s, dst, src);
			return;
		}
		if (flags & SHUT_RCV_)
			c->guest_shut_rcv = true;
		if (flags & SHUT_SEND_)
			c->guest_shut_send = true;
		if (c->guest_shut_rcv && c->guest_shut_send)
			c->close_after_flush = true;   /* the guest waits for our reset */
		flush_tx(c);
		return;
	case OP_RW:
		if (!c || c->state != C_OPEN) {
			if (c)
				conn_reset(c);
			else
				queue_rst(s, dst, src);
			return;
		}
		if (len)
			rw(c, ch, len);
		update_events(c);
		return;
	case OP_CREDIT_UPDATE:
		if (!c)
			queue_rst(s, dst, src);
		else
			update_events(c);      /* more credit may reopen reading */
		return;
	case OP_CREDIT_REQUEST:
		if (!c)
			queue_rst(s, dst, src);
		else
			c->want_credit = true;
		return;
	default:
		if (c)
			conn_reset(c);
		else
			queue_rst(s, dst, src);
	}
}

static void tx(struct vvsock *s)
{
	struct virtq *q = &s->v.vq[Q_TX];
	struct vq_chain ch = { 0 };
	int r;

	do {
		vq_disable_kicks(q);
		while ((r = vq_pop(q, &ch)) > 0) {
			packet(s, &ch);
			vq_push(q, ch.head, 0);
		}
		virtio_notify(&s->v, Q_TX);
		if (r < 0) {
			virtio_fail(&s->v, "transmit queue index out of range");
			return;
		}
	} while (vq_enable_kicks(q));
	rx_pump(s);
}

/* ------------------------------------------------------------ host side */

static uint32_t new_local_port(struct vvsock *s)
{
	for (;;) {
		uint32_t p = s->next_port++;
		bool used = false;

		if (p < FIRST_LOCAL_PORT)
			p = s->next_port = FIRST_LOCAL_PORT + 1;
		for (int i = 0; i < MAX_CONNS; i++)
			used |= s->conns[i] && s->conns[i]->local_port == p;
		if (!used)
			return p;
	}
}

/* "CONNECT <port>\n", read without consuming what follows it.  Returns
 * true while the line is still incomplete. */
static bool read_line(struct conn *c)
{
	struct vvsock *s = c->vs;
	char buf[sizeof(c->line)];
	ssize_t n = recv(c->fd, buf, sizeof(buf) - 1, MSG_PEEK | MSG_DONTWAIT);
	char *nl, *end;
	unsigned long port;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0) {
		conn_free(c);
		return false;
	}
	buf[n] = 0;
	nl = memchr(buf, '\n', (size_t)n);
	if (!nl) {
		if (n < (ssize_t)sizeof(buf) - 1)
			return true;
		conn_free(c);              /* no line of a sane length */
		return false;
	}
	if (recv(c->fd, buf, (size_t)(nl - buf + 1), MSG_DONTWAIT) != nl - buf + 1) {
		conn_free(c);
		return false;
	}
	*nl = 0;
	if (nl > buf && nl[-1] == '\r')
		nl[-1] = 0;
	errno = 0;
	if (strncmp(buf, "CONNECT ", 8) || !buf[8] || (port = strtoul(buf + 8, &end, 10), *end) ||
	    errno || port > 0xffffffffu) {
		log_debug("vsock: bad request line from the host side; closing");
		conn_free(c);
		return false;
	}
	c->local_port = new_local_port(s);
	c->peer_port = (uint32_t)port;
	c->state = C_WAIT_GUEST;
	c->want_request = true;
	update_events(c);
	rx_pump(s);
	return false;
}

static void conn_ready(void *opaque, uint32_t events)
{
	struct conn *c = opaque;
	struct vvsock *s = c->vs;

	if (c->state == C_LINE) {
		/* A client that hangs up before its line is complete is gone. */
		if (read_line(c) && (events & (EPOLLHUP | EPOLLERR)))
			conn_free(c);
		return;
	}
	if (events & (EPOLLHUP | EPOLLERR)) {
		/* epoll reports a hang-up forever: leave epoll, and let
		 * rx_pump drain what is left up to the EOF. */
		evloop_del(s->v.loop, c->fd);
		c->hup = true;
		if (c->state != C_OPEN) {
			conn_reset(c);
			rx_pump(s);
			return;
		}
		c->data_ready = !c->host_eof;
		rx_pump(s);
		return;
	}
	if ((events & EPOLLOUT) && c->tx_len)
		flush_tx(c);
	if ((events & EPOLLIN) && c->state == C_OPEN && !c->data_ready) {
		c->data_ready = true;
		update_events(c);
	}
	rx_pump(s);
}

static void accept_ready(void *opaque, uint32_t events)
{
	struct vvsock *s = opaque;
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	struct conn *c;
	int fd;

	(void)events;
	while ((fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		/* Only root or our own user may reach the guest this way. */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || (cr.uid != 0 && cr.uid != geteuid())) {
			close(fd);
			continue;
		}
		if (!(c = conn_new(s, fd, C_LINE)))
			continue;
		update_events(c);
	}
}

/* -------------------------------------------------------------- device */

static void vs_kick(struct virtio_dev *v, int q)
{
	struct vvsock *s = v->opaque;

	if (q == Q_TX)
		tx(s);
	else if (q == Q_RX)
		rx_pump(s);
	/* Q_EV: buffers for events we never send (no migration). */
}

static int vs_start(struct virtio_dev *v)
{
	struct vvsock *s = v->opaque;

	for (int i = 0; i < MAX_CONNS; i++)
		if (s->conns[i] && s->conns[i]->state == C_WAIT_GUEST)
			s->conns[i]->want_request = true;
	return 0;
}

static void vs_stop(struct virtio_dev *v)
{
	struct vvsock *s = v->opaque;

	/* A reset guest forgets its sockets: so do we. */
	for (int i = 0; i < MAX_CONNS; i++)
		if (s->conns[i] && s->conns[i]->state != C_LINE)
			conn_free(s->conns[i]);
	s->nrst = 0;
}

static const struct virtio_ops vs_ops = {
	.cfg_read = vs_cfg_read, .start = vs_start, .stop = vs_stop, .kick = vs_kick,
};

/* Snapshots.  A connection's host end is this process's socket, which no
 * other process can take over, so a restore resets every connection the
 * guest knew (one RST each on the receive queue, sent once its driver
 * runs) and keeps the listeners, which the command line makes again: the
 * guest may connect anew and the host reach it as before.  Saved: the
 * guest's CID, the next host port, each connection's ports, state and
 * credit counters (what the guest was told and what was lost with it),
 * the resets still owed, then the transport. */
#define SNAP_C_WAIT 1u
#define SNAP_C_OPEN 2u

struct vs_snap_conn {
	uint32_t local, peer, state, peer_buf_alloc, peer_fwd_cnt, rx_cnt, fwd_cnt, tx_len;
};

struct vs_snap {
	uint64_t cid;
	uint32_t next_port, nconns, nrst;
	struct vs_snap_conn c[MAX_CONNS];
	struct { uint32_t src, dst; } rst[RST_SLOTS];
};

/* In the device thread (held: nothing else runs there). */
static void vs_get(void *arg)
{
	struct vvsock *s = ((void **)arg)[0];
	struct vs_snap *t = ((void **)arg)[1];

	t->cid = s->cid;
	t->next_port = s->next_port;
	for (int i = 0; i < MAX_CONNS; i++) {
		const struct conn *c = s->conns[i];

		if (!c || c->state == C_LINE)      /* the guest never heard of it */
			continue;
		t->c[t->nconns++] = (struct vs_snap_conn){
			.local = c->local_port, .peer = c->peer_port,
			.state = c->state == C_OPEN ? SNAP_C_OPEN : SNAP_C_WAIT,
			.peer_buf_alloc = c->peer_buf_alloc, .peer_fwd_cnt = c->peer_fwd_cnt,
			.rx_cnt = c->rx_cnt, .fwd_cnt = c->fwd_cnt, .tx_len = (uint32_t)c->tx_len,
		};
	}
	t->nrst = (uint32_t)s->nrst;
	memcpy(t->rst, s->rst, sizeof(t->rst[0]) * (size_t)s->nrst);
}

static int vs_save(struct vm *vm, struct snap_buf *sb, struct verr *err)
{
	struct vvsock *s = vm_device(vm, &hv_dev_virtio_vsock);
	struct vs_snap *t = calloc(1, sizeof(*t));
	void *arg[2] = { s, t };

	if (!t)
		return verr_set(err, "vsock: out of memory");
	evloop_call(s->v.loop, vs_get, arg);
	sb_u64(sb, t->cid);
	sb_u32(sb, t->next_port);
	sb_u32(sb, t->nconns);
	for (uint32_t i = 0; i < t->nconns; i++) {
		const struct vs_snap_conn *c = &t->c[i];

		sb_u32(sb, c->local);
		sb_u32(sb, c->peer);
		sb_u32(sb, c->state);
		sb_u32(sb, c->peer_buf_alloc);
		sb_u32(sb, c->peer_fwd_cnt);
		sb_u32(sb, c->rx_cnt);
		sb_u32(sb, c->fwd_cnt);
		sb_u32(sb, c->tx_len);
	}
	sb_u32(sb, t->nrst);
	for (uint32_t i = 0; i < t->nrst; i++) {
		sb_u32(sb, t->rst[i].src);
		sb_u32(sb, t->rst[i].dst);
	}
	virtio_save(&s->v, sb);
	free(t);
	return 0;
}

static int vs_parse(struct vvsock *s, struct snap_rd *r, struct vs_snap *t, struct verr *err)
{
	t->cid = rd_u64(r);
	t->next_port = rd_u32(r);
	t->nconns = rd_u32(r);
	if (r->bad)
		return verr_set(err, "vsock: state cut short");
	if (t->cid != s->cid)
		return verr_set(err, "vsock: the snapshot's guest CID is %llu, this one's %llu",
				(unsigned long long)t->cid, (unsigned long long)s->cid);
	if (t->next_port < FIRST_LOCAL_PORT)
		return verr_set(err, "vsock: next host port %u below %u", t->next_port, FIRST_LOCAL_PORT);
	if (t->nconns > MAX_CONNS)
		return verr_set(err, "vsock: %u connections (at most %u)", t->nconns, MAX_CONNS);
	for (uint32_t i = 0; i < t->nconns; i++) {
		struct vs_snap_conn *c = &t->c[i];

		c->local = rd_u32(r);
		c->peer = rd_u32(r);
		c->state = rd_u32(r);
		c->peer_buf_alloc = rd_u32(r);
		c->peer_fwd_cnt = rd_u32(r);
		c->rx_cnt = rd_u32(r);
		c->fwd_cnt = rd_u32(r);
		c->tx_len = rd_u32(r);
		if (r->bad)
			return verr_set(err, "vsock: connection %u: state cut short", i);
		if (c->state != SNAP_C_WAIT && c->state != SNAP_C_OPEN)
			return verr_set(err, "vsock: connection %u: state %u", i, c->state);
		/* We never hold more of the guest's bytes than the credit we give. */
		if (c->tx_len > BUF_ALLOC)
			return verr_set(err, "vsock: connection %u: %u bytes buffered, more than the %u of credit given",
					i, c->tx_len, BUF_ALLOC);
		for (uint32_t j = 0; j < i; j++)
			if (t->c[j].local == c->local && t->c[j].peer == c->peer)
				return verr_set(err, "vsock: connections %u and %u are both host port %u to guest port %u",
						j, i, c->local, c->peer);
	}
	t->nrst = rd_u32(r);
	if (r->bad)
		return verr_set(err, "vsock: state cut short");
	if (t->nrst > RST_SLOTS - t->nconns)
		return verr_set(err, "vsock: %u resets owed beside %u connections (at most %u in all)", t->nrst,
				t->nconns, RST_SLOTS);
	for (uint32_t i = 0; i < t->nrst; i++) {
		t->rst[i].src = rd_u32(r);
		t->rst[i].dst = rd_u32(r);
	}
	if (r->bad)
		return verr_set(err, "vsock: resets cut short");
	return 0;
}

/* In the device thread, after the transport is set: forget whatever this
 * process had, owe the guest a reset per connection it had. */
static void vs_set(void *arg)
{
	struct vvsock *s = ((void **)arg)[0];
	const struct vs_snap *t = ((void **)arg)[1];
	uint64_t lost = 0;

	for (int i = 0; i < MAX_CONNS; i++)
		if (s->conns[i] && s->conns[i]->state != C_LINE)
			conn_free(s->conns[i]);
	s->nrst = 0;
	for (uint32_t i = 0; i < t->nrst; i++)
		queue_rst(s, t->rst[i].src, t->rst[i].dst);
	for (uint32_t i = 0; i < t->nconns; i++) {
		queue_rst(s, t->c[i].local, t->c[i].peer);
		lost += t->c[i].tx_len;
	}
	s->next_port = t->next_port;
	if (t->nconns)
		log_info("vsock: restored: the guest's %u connection(s) reset (host streams do not survive a restore; "
			 "%llu byte(s) it had sent were not delivered)", t->nconns, (unsigned long long)lost);
}

static int vs_load(struct vm *vm, struct snap_rd *r, struct verr *err)
{
	struct vvsock *s = vm_device(vm, &hv_dev_virtio_vsock);
	struct vs_snap *t = calloc(1, sizeof(*t));
	struct snap_rd start = *r;
	void *arg[2] = { s, t };
	int rc = -1;

	if (!t)
		return verr_set(err, "vsock: out of memory");
	/* Everything checked, the transport too, before anything is set. */
	if (vs_parse(s, r, t, err) < 0 || virtio_load(&s->v, r, false, err) < 0)
		goto out;
	if (!rd_done(r)) {
		verr_set(err, "vsock: %zu bytes after its state", r->len - r->off);
		goto out;
	}
	*r = start;
	if (vs_parse(s, r, t, err) < 0 || virtio_load(&s->v, r, true, err) < 0)
		goto out;
	evloop_call(s->v.loop, vs_set, arg);
	rc = 0;
out:
	free(t);
	return rc;
}

static int listen_uds(struct vvsock *s, const char *where, struct verr *err)
{
	s->lfd = uds_listen(s->uds, SOCK_STREAM | SOCK_NONBLOCK, 64, err);
	return s->lfd < 0 ? verr_wrap(err, "%s", where) : 0;
}

static int vs_create(struct vm *vm, struct verr *err)
{
	const struct vsock_cfg *c = hv_dev_get(vm->cfg, &vsock_opt, 0);
	const char *where = hv_dev_where(vm->cfg, &vsock_opt, 0);
	uint16_t qmax[3] = { 256, 256, 16 };
	struct vvsock *s;

	if (!c)
		return 0;
	if (!(s = calloc(1, sizeof(*s))))
		return verr_set(err, "out of memory");
	vm_device_set(vm, &hv_dev_virtio_vsock, s);
	s->lfd = -1;
	s->cid = (uint64_t)c->cid;
	s->next_port = FIRST_LOCAL_PORT;
	snprintf(s->uds, sizeof(s->uds), "%s", c->uds);
	le64_put(s->cfg, s->cid);
	if (virtio_init(&s->v, vm, "vsock", VIRTIO_ID_VSOCK, 3, qmax, sizeof(s->cfg), 0, 0x078000, &vs_ops, s,
			err) < 0)
		return verr_wrap(err, "%s", where);
	if (listen_uds(s, where, err) < 0)
		return -1;
	if (evloop_add(s->v.loop, s->lfd, EPOLLIN, accept_ready, s) < 0)
		return verr_errno(err, "%s: epoll", where);
	log_info("vsock: guest CID %llu, host side %s (guest-initiated: %s_PORT)", (unsigned long long)s->cid,
		 s->uds, s->uds);
	return virtio_start_thread(&s->v, err);
}

static void vs_destroy(struct vm *vm)
{
	struct vvsock *s = vm_device(vm, &hv_dev_virtio_vsock);

	if (!s)
		return;
	virtio_free(&s->v);
	for (int i = 0; i < MAX_CONNS; i++)
		if (s->conns[i]) {
			close(s->conns[i]->fd);
			free(s->conns[i]->txbuf);
			free(s->conns[i]);
		}
	if (s->lfd >= 0) {
		close(s->lfd);
		unlink(s->uds);
	}
	free(s);
}

HV_DEVICE_SNAP(virtio_vsock, vs_create, vs_destroy, vs_save, vs_load);
