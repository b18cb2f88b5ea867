/* virtio-net from a test guest, with the test on the tap's other side:
 * MAC, MTU and link status from config space; a "go" frame from the test
 * that spans two mergeable receive buffers (num_buffers 2, contents
 * checked); then frames out: a raw reply, a UDP datagram with a bad
 * checksum and no offload flag (the host must drop it), and one whose
 * checksum the host completes (NEEDS_CSUM).  With mq=2: two queue pairs
 * through the control queue, and a frame out of the second pair.  With
 * reset=1: a reset while a frame is in flight, rings the device must
 * refuse (a size that is no power of two, addresses outside RAM), and a
 * fresh start whose frame must come out (vhost's rings start over).
 * Command line: mac=M mtu=N nonce=S [mq=2] [reset=1] */
#include "virtio.h"

#define F_CSUM 0
#define F_MTU 3
#define F_MAC 5
#define F_MRG_RXBUF 15
#define F_STATUS 16
#define F_CTRL_VQ 17
#define F_CTRL_RX 18
#define F_MQ 22
#define ETH_TYPE 0x88b5
#define RXBUF 1024
#define NRX 16

static struct kvdev dev;
static uint8_t mymac[6], peer[6];
static char nonce[32];
static int ctrl_q;

static int hexv(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

static void parse_mac(const char *s, uint8_t *m)
{
	for (int i = 0; i < 6; i++)
		m[i] = (uint8_t)(hexv(s[3 * i]) << 4 | hexv(s[3 * i + 1]));
}

static void post_rx(struct kvq *q, int n)
{
	for (int i = 0; i < n; i++) {
		struct kbuf b = { kalloc(RXBUF, 64), RXBUF, true };

		vq_add(q, &b, 1, false);
	}
	vq_kick(q);
}

/* One received frame (all its buffers) into f from whichever of the nq
 * receive queues has one first; *qi says which.  With two queue pairs the
 * tap picks the queue for a frame the host sends by a hash of it, which
 * the host kernel seeds at random when it boots: the test's frame comes
 * on either pair.  Returns the frame's length, -1 if none came. */
static int recv_frame(struct kvq *const *qs, int nq, uint8_t *f, int *nbufs, int *qi)
{
	uint32_t len;
	int h = vq_wait_any(qs, nq, &len, 700, qi), n, total = 0;
	struct kvq *q;
	uint8_t *b;

	if (h < 0)
		return -1;
	q = qs[*qi];
	b = (uint8_t *)q->desc[h].addr;
	n = b[10] | b[11] << 8;
	*nbufs = n;
	memcpy(f, b + 12, len - 12);
	total = (int)len - 12;
	for (int i = 1; i < n; i++) {
		if ((h = vq_wait(q, &len, 100)) < 0)
			return -1;
		memcpy(f + total, (uint8_t *)q->desc[h].addr, len);
		total += (int)len;
	}
	post_rx(q, n);
	return total;
}

static uint16_t csum16(const uint8_t *p, int n, uint32_t sum)
{
	for (int i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

static void send_frame(struct kvq *q, const uint8_t *hdr, const uint8_t *frame, int len)
{
	uint8_t *h = kalloc(12, 8), *f = kalloc((size_t)len, 8);
	struct kbuf b[2] = { { h, 12, false }, { f, (uint32_t)len, false } };
	uint32_t ul;

	memcpy(h, hdr, 12);
	memcpy(f, frame, (size_t)len);
	vq_add(q, b, 2, false);
	vq_kick(q);
	check(vq_wait(q, &ul, 300) >= 0, "transmit of %d bytes completed on queue %d", len, q->idx);
}

static int eth(uint8_t *f, const char *text)
{
	size_t l = strlen(text);

	memcpy(f, peer, 6);
	memcpy(f + 6, mymac, 6);
	f[12] = ETH_TYPE >> 8;
	f[13] = ETH_TYPE & 0xff;
	memcpy(f + 14, text, l);
	memset(f + 14 + l, 0, 46);            /* padding to the 60-byte minimum */
	return 14 + (int)l < 60 ? 60 : 14 + (int)l;
}

/* UDP 10.99.0.2:5555 -> 10.99.0.1:7777; the checksum field holds only the
 * pseudo-header sum, which is right only if the host completes it. */
static int udp(uint8_t *f, const char *text)
{
	static const uint8_t src[4] = { 10, 99, 0, 2 }, dst[4] = { 10, 99, 0, 1 };
	size_t l = strlen(text);
	uint8_t *ip = f + 14, *u = ip + 20;
	uint16_t ulen = (uint16_t)(8 + l), c;
	uint8_t pseudo[12];

	memcpy(f, peer, 6);
	memcpy(f + 6, mymac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	memset(ip, 0, 20);
	ip[0] = 0x45;
	ip[2] = (uint8_t)((20 + ulen) >> 8);
	ip[3] = (uint8_t)(20 + ulen);
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, src, 4);
	memcpy(ip + 16, dst, 4);
	c = (uint16_t)~csum16(ip, 20, 0);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	u[0] = 5555 >> 8, u[1] = 5555 & 0xff, u[2] = 7777 >> 8, u[3] = 7777 & 0xff;
	u[4] = (uint8_t)(ulen >> 8), u[5] = (uint8_t)ulen;
	memcpy(pseudo, src, 4);
	memcpy(pseudo + 4, dst, 4);
	pseudo[8] = 0, pseudo[9] = 17, pseudo[10] = (uint8_t)(ulen >> 8), pseudo[11] = (uint8_t)ulen;
	c = csum16(pseudo, 12, 0);
	u[6] = (uint8_t)(c >> 8);
	u[7] = (uint8_t)c;
	memcpy(u + 8, text, l);
	return 14 + 20 + ulen;
}

static uint8_t ctrl(uint8_t cls, uint8_t cmd, uint16_t arg)
{
	uint8_t *c = kalloc(4, 4), *ack = kalloc(1, 1);
	struct kbuf b[3] = { { c, 2, false }, { c + 2, 2, false }, { ack, 1, true } };
	uint32_t len;

	c[0] = cls, c[1] = cmd, c[2] = (uint8_t)arg, c[3] = (uint8_t)(arg >> 8);
	*ack = 0xee;
	vq_add(&dev.q[ctrl_q], b, 3, false);
	vq_kick(&dev.q[ctrl_q]);
	if (vq_wait(&dev.q[ctrl_q], &len, 300) < 0)
		return 0xff;
	return *ack;
}

/* Common configuration registers (virtio 1.x, 4.1.4.3). */
#define C_QSEL 0x16
#define C_QSIZE 0x18
#define C_QENABLE 0x1c
#define C_QDESC 0x20
#define C_QAVAIL 0x28
#define C_QUSED 0x30

static void reset_and_restart(uint64_t want, uint8_t *f)
{
	uint8_t hdr[12] = { 0 };
	char text[64];
	int r, len;

	/* A transmit the device may be in the middle of when the reset comes. */
	memcpy(text, "vhpc-inflight-", sizeof("vhpc-inflight-"));
	memcpy(text + 14, nonce, strlen(nonce) + 1);
	len = eth(f, text);
	{
		uint8_t *h = kalloc(12, 8), *b = kalloc((size_t)len, 8);
		struct kbuf kb[2] = { { h, 12, false }, { b, (uint32_t)len, false } };

		memcpy(b, f, (size_t)len);
		vq_add(&dev.q[1], kb, 2, false);
		vq_kick(&dev.q[1]);
	}
	post_rx(&dev.q[0], 4);
	vdev_reset(&dev);
	check(vdev_status(&dev) == 0, "device reset in the middle of traffic");
	r = vdev_open(&dev, 1, 0, want);
	check(r == 0, "features negotiated again after the reset (%d)", r);
	if (r)
		return;
	mmio_write16(dev.common + C_QSEL, 0);
	mmio_write16(dev.common + C_QSIZE, 100);
	check(mmio_read16(dev.common + C_QSIZE) != 100, "queue size 100 (no power of two) refused");
	mmio_write16(dev.common + C_QSIZE, 64);
	mmio_write64(dev.common + C_QDESC, 0x7ff000000000ull);
	mmio_write64(dev.common + C_QAVAIL, 0x7ff000010000ull);
	mmio_write64(dev.common + C_QUSED, 0x7ff000020000ull);
	mmio_write16(dev.common + C_QENABLE, 1);
	check(mmio_read16(dev.common + C_QENABLE) == 0, "rings outside guest RAM refused");
	for (int i = 0; i < dev.nq; i++)
		if (vq_setup_(&dev, i, 64, (uint16_t)(i + 1)) < 0)
			check(false, "queue %d set up again", i);
	post_rx(&dev.q[0], NRX);
	vdev_driver_ok(&dev);
	memcpy(text, "vhpc-again-", sizeof("vhpc-again-"));
	memcpy(text + 11, nonce, strlen(nonce) + 1);
	send_frame(&dev.q[1], hdr, f, eth(f, text));
	check(!(vdev_status(&dev) & 0x40), "no reset needed after the restart");
}

void test_main(void)
{
	char arg[64], text[64];
	static uint8_t f[4096];
	uint8_t hdr[12] = { 0 };
	bool mq = cmdline_get("mq", arg, sizeof(arg)) != 0;
	int r, len = -1, nb = 0, pairs, qi = 0;
	struct kvq *rxq[2];
	uint64_t want = (1ull << F_MAC) | (1ull << F_MTU) | (1ull << F_STATUS) | (1ull << F_MRG_RXBUF) |
			(1ull << F_CSUM) | (1ull << F_CTRL_VQ) | (1ull << F_CTRL_RX) | (1ull << 29) | (1ull << 28);

	cmdline_get("mac", arg, sizeof(arg));
	parse_mac(arg, mymac);
	cmdline_get("nonce", nonce, sizeof(nonce));
	if (mq)
		want |= 1ull << F_MQ;
	msix_handlers_install(8);
	r = vdev_open(&dev, 1, 0, want);
	check(r == 0, "virtio-net found, features negotiated (%d)", r);
	if (r)
		return;
	{
		uint8_t m[6];

		for (int i = 0; i < 6; i++)
			m[i] = vcfg8(&dev, (unsigned)i);
		check(!memcmp(m, mymac, 6), "MAC from config space is %s", arg);
	}
	cmdline_get("mtu", arg, sizeof(arg));
	check(vcfg16(&dev, 10) == parse_u64(arg), "MTU %u from config space", vcfg16(&dev, 10));
	check(vcfg16(&dev, 6) & 1, "link is up");
	pairs = vcfg16(&dev, 8);
	check(pairs == (mq ? 2 : 1), "max queue pairs %d", pairs);
	ctrl_q = 2 * pairs;
	check(dev.nq == 2 * pairs + 1, "%d queues (pairs and control)", dev.nq);
	msix_enable(dev.slot, dev.nq + 1, VIRTIO_VEC_BASE);
	for (int i = 0; i < dev.nq; i++)
		if (vq_setup_(&dev, i, 64, (uint16_t)(i + 1)) < 0)
			check(false, "queue %d set up", i);
	post_rx(&dev.q[0], NRX);
	vdev_driver_ok(&dev);
	if (mq) {
		check(ctrl(4, 0, 2) == 0, "control: two queue pairs accepted");
		check(ctrl(4, 0, 3) == 1, "control: three queue pairs refused");
		post_rx(&dev.q[2], NRX);
	}
	check(ctrl(0, 0, 1) == 0, "control: promiscuous mode accepted");
	check(ctrl(9, 0, 0) == 1, "control: unknown class refused");

	rxq[0] = &dev.q[0];
	rxq[1] = &dev.q[2];
	/* Skip whatever else the host sends until the test's frame. */
	memcpy(text, "vhpc-go-", sizeof("vhpc-go-"));
	memcpy(text + 8, nonce, strlen(nonce) + 1);
	for (int tries = 0; tries < 50; tries++) {
		len = recv_frame(rxq, pairs, f, &nb, &qi);
		if (len < 0 || (len >= 14 && f[12] == (ETH_TYPE >> 8) && f[13] == (ETH_TYPE & 0xff) &&
				!memcmp(f + 14, text, strlen(text))))
			break;
	}
	check(len > 0, "the test's frame arrived (%d bytes)", len);
	if (len <= 0)
		return;
	check(!memcmp(f, mymac, 6), "addressed to our MAC");
	memcpy(peer, f + 6, 6);
	check(nb == 2 && len == 1400, "1400-byte frame in %d mergeable buffers (want 2)", nb);
	{
		bool ok = true;

		for (int i = 14 + (int)strlen(text); i < len; i++)
			ok &= f[i] == pattern_byte((uint64_t)i, 3);
		check(ok, "frame contents intact across the buffers");
	}
	/* Queue i has vector i + 1; pair qi receives on queue 2 * qi. */
	check(msix_hits[2 * qi + 1] > 0, "receive interrupts on the receive queue's vector (pair %d)", qi);

	memcpy(text, "vhpc-reply-", sizeof("vhpc-reply-"));
	memcpy(text + 11, nonce, strlen(nonce) + 1);
	send_frame(&dev.q[1], hdr, f, eth(f, text));
	memcpy(text, "bad-csum-", sizeof("bad-csum-"));
	memcpy(text + 9, nonce, strlen(nonce) + 1);
	send_frame(&dev.q[1], hdr, f, udp(f, text));
	hdr[0] = 1;                           /* NEEDS_CSUM */
	hdr[6] = 34;                          /* csum_start: the UDP header */
	hdr[8] = 6;                           /* csum_offset: its checksum */
	memcpy(text, "csum-offload-", sizeof("csum-offload-"));
	memcpy(text + 13, nonce, strlen(nonce) + 1);
	send_frame(&dev.q[1], hdr, f, udp(f, text));
	if (mq) {
		memset(hdr, 0, sizeof(hdr));
		memcpy(text, "vhpc-q1-", sizeof("vhpc-q1-"));
		memcpy(text + 8, nonce, strlen(nonce) + 1);
		send_frame(&dev.q[3], hdr, f, eth(f, text));
	}
	check(!(vdev_status(&dev) & 0x40), "no reset needed");
	if (cmdline_get("reset", arg, sizeof(arg)))
		reset_and_restart(want, f);
}
