/* virtio-vsock from a test guest, against host unix sockets:
 *  1. guest-initiated: connect to host port 1234 (the test listens on
 *     UDS_1234), send a line and 64 KiB, get the reply line, close (the
 *     host answers our shutdown with a reset);
 *  2. a connection to host port 4321, where nobody listens: reset;
 *  3. host-initiated: the test connects to UDS with "CONNECT 5000"; we
 *     accept, take a line and 64 KiB while advertising only 16 KiB of
 *     buffer (the host must wait for our credit updates), and answer;
 *  4. the test's "CONNECT 5999": nobody listens here, we reset it.
 * Under --seccomp (seccomp=1) vhpc-hv makes no connections once the guest
 * runs: step 1's request is answered with a reset instead.
 * Command line: cid=N nonce=S [seccomp=1] */
#include "virtio.h"

#define HDR 44
#define OP_REQUEST 1
#define OP_RESPONSE 2
#define OP_RST 3
#define OP_SHUTDOWN 4
#define OP_RW 5
#define OP_CREDIT_UPDATE 6
#define BUFSZ 4096
#define NRX 16
#define RX_ALLOC (16u << 10)       /* our receive buffer for host-initiated data */

struct hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));

static struct kvdev dev;
static uint64_t cid;
static char nonce[32];
static bool seccomp;                /* vhpc-hv runs under its allowlist */
static struct hdr *pend_req;        /* a host REQUEST that came early */
static struct hdr pend_store;

static void post_rx(int n)
{
	for (int i = 0; i < n; i++) {
		struct kbuf b = { kalloc(HDR + BUFSZ, 8), HDR + BUFSZ, true };

		vq_add(&dev.q[0], &b, 1, false);
	}
	vq_kick(&dev.q[0]);
}

static void send_pkt(uint32_t sport, uint32_t dport, uint16_t op, uint32_t flags, uint32_t buf_alloc,
		     uint32_t fwd, const void *data, uint32_t len)
{
	struct hdr *h = kalloc(sizeof(*h), 8);
	struct kbuf b[2] = { { h, HDR, false }, { (void *)data, len, false } };
	uint32_t ul;

	*h = (struct hdr){ cid, 2, sport, dport, len, 1, op, flags, buf_alloc, fwd };
	vq_add(&dev.q[1], b, len ? 2 : 1, false);
	vq_kick(&dev.q[1]);
	vq_wait(&dev.q[1], &ul, 300);
}

/* Next packet from the host: header into h, payload into data (up to
 * BUFSZ).  Early host REQUESTs are kept for step 3.  -1 on timeout. */
static int recv_pkt(struct hdr *h, uint8_t *data)
{
	for (;;) {
		uint32_t len;
		int head = vq_wait(&dev.q[0], &len, 600);
		uint8_t *b;

		if (head < 0)
			return -1;
		b = (uint8_t *)dev.q[0].desc[head].addr;
		memcpy(h, b, HDR);
		if (h->len > BUFSZ || len != HDR + h->len) {
			printf("GUEST not ok - malformed packet from the device (len %u, used %u)\n", h->len, len);
			post_rx(1);
			return -1;
		}
		if (data)
			memcpy(data, b + HDR, h->len);
		post_rx(1);
		if (h->op == OP_REQUEST && h->dst_port != 5999 && !pend_req) {
			pend_store = *h;
			pend_req = &pend_store;
			continue;
		}
		if (h->op == OP_REQUEST && h->dst_port == 5999) {
			/* Nobody listens here. */
			send_pkt(h->dst_port, h->src_port, OP_RST, 0, 0, 0, 0, 0);
			continue;
		}
		return 0;
	}
}

static void guest_initiated(void)
{
	static uint8_t data[BUFSZ];
	struct hdr h;
	char line[64];
	size_t l;
	uint32_t fwd = 0;
	int r;

	send_pkt(5001, 1234, OP_REQUEST, 0, 65536, 0, 0, 0);
	r = recv_pkt(&h, data);
	if (seccomp) {
		check(r == 0 && h.op == OP_RST && h.dst_port == 5001,
		      "guest to host port 1234 under --seccomp: reset (op %u)", h.op);
		goto unheard;
	}
	check(r == 0 && h.op == OP_RESPONSE && h.src_port == 1234 && h.dst_port == 5001,
	      "guest to host port 1234: response (op %u)", h.op);
	check(h.src_cid == 2 && h.dst_cid == cid, "from CID 2 to our CID %lu", cid);
	check(h.buf_alloc >= 65536 + 64, "host buffer %u bytes", h.buf_alloc);
	memcpy(line, "hello host ", 11);
	memcpy(line + 11, nonce, strlen(nonce));
	l = 11 + strlen(nonce);
	line[l++] = '\n';
	send_pkt(5001, 1234, OP_RW, 0, 65536, 0, line, (uint32_t)l);
	for (uint32_t off = 0; off < 65536; off += BUFSZ) {
		uint8_t *p = kalloc(BUFSZ, 8);

		for (uint32_t i = 0; i < BUFSZ; i++)
			p[i] = pattern_byte(off + i, 5);
		send_pkt(5001, 1234, OP_RW, 0, 65536, 0, p, BUFSZ);
	}
	/* The reply line (credit updates may come first). */
	do {
		if (recv_pkt(&h, data) < 0)
			break;
	} while (h.op == OP_CREDIT_UPDATE);
	data[h.len < BUFSZ ? h.len : BUFSZ - 1] = 0;
	check(h.op == OP_RW && !memcmp(data, "re: hello host ", 15) && strstr_((char *)data, nonce),
	      "reply from the host: %s", (char *)data);
	fwd += h.len;
	send_pkt(5001, 1234, OP_SHUTDOWN, 3, 65536, fwd, 0, 0);
	do {
		if (recv_pkt(&h, 0) < 0)
			break;
	} while (h.op != OP_RST);
	check(h.op == OP_RST, "our shutdown answered with a reset");
unheard:
	send_pkt(5002, 4321, OP_REQUEST, 0, 65536, 0, 0, 0);
	r = recv_pkt(&h, 0);
	check(r == 0 && h.op == OP_RST && h.dst_port == 5002,
	      "host port 4321 (nobody listening): reset (op %u)", h.op);
}

static void host_initiated(void)
{
	static uint8_t data[BUFSZ];
	struct hdr h;
	uint32_t port, got = 0, fwd = 0, peak = 0, told = 0;
	bool line_ok = false, pat_ok = true, stalled = false;
	char reply[32];

	while (!pend_req)
		if (recv_pkt(&h, data) < 0)
			break;
	check(pend_req && pend_req->dst_port == 5000 && pend_req->src_cid == 2,
	      "host-initiated connection request to port 5000");
	if (!pend_req)
		return;
	port = pend_req->src_port;
	check(port >= 0x40000000u, "host side uses a high local port (%u)", port);
	send_pkt(5000, port, OP_RESPONSE, 0, RX_ALLOC, 0, 0, 0);
	/* "ping\n" then 64 KiB, within the 16 KiB we advertise. */
	while (got < 5 + 65536) {
		if (got - told >= RX_ALLOC) {
			/* Our buffer is full as far as the host knows: nothing
			 * may come until we say we consumed it. */
			if (!stalled) {
				uint32_t l;

				stalled = true;
				check(vq_wait(&dev.q[0], &l, 5) < 0, "the host stops at our %u-byte credit", RX_ALLOC);
			}
			send_pkt(5000, port, OP_CREDIT_UPDATE, 0, RX_ALLOC, got, 0, 0);
			told = got;
		}
		if (recv_pkt(&h, data) < 0 || h.op != OP_RW)
			break;
		for (uint32_t i = 0; i < h.len; i++) {
			uint32_t o = got + i;

			if (o < 5)
				line_ok = (o || data[i] == 'p');
			else
				pat_ok &= data[i] == pattern_byte(o - 5, 6);
		}
		got += h.len;
		fwd = got;
		if (got - told > peak)
			peak = got - told;
	}
	check(stalled, "the transfer needed credit updates");
	check(got == 5 + 65536 && line_ok && pat_ok, "64 KiB from the host arrived intact (%u bytes)", got);
	check(peak <= RX_ALLOC, "the host never exceeded our credit (at most %u bytes outstanding)", peak);
	memcpy(reply, "pong ", 5);
	memcpy(reply + 5, nonce, strlen(nonce));
	reply[5 + strlen(nonce)] = '\n';
	send_pkt(5000, port, OP_RW, 0, RX_ALLOC, fwd, reply, (uint32_t)(6 + strlen(nonce)));
	/* The test closes its end: shutdown, then we reset. */
	do {
		if (recv_pkt(&h, 0) < 0)
			break;
	} while (h.op != OP_SHUTDOWN);
	check(h.op == OP_SHUTDOWN, "the host's close arrived as a shutdown");
	send_pkt(5000, port, OP_RST, 0, 0, 0, 0, 0);
}

void test_main(void)
{
	char arg[32];
	int r;

	cid = parse_u64(cmdline_get("cid", arg, sizeof(arg)) ? arg : "0");
	cmdline_get("nonce", nonce, sizeof(nonce));
	seccomp = cmdline_get("seccomp", arg, sizeof(arg)) && arg[0] == '1';
	msix_handlers_install(4);
	r = vdev_open(&dev, 19, 0, (1ull << 29) | (1ull << 28));
	check(r == 0, "virtio-vsock found (%d)", r);
	if (r)
		return;
	check(vcfg64(&dev, 0) == cid, "guest CID %lu from config space", vcfg64(&dev, 0));
	msix_enable(dev.slot, 4, VIRTIO_VEC_BASE);
	for (int i = 0; i < 3; i++)
		vq_setup_(&dev, i, 64, (uint16_t)(i + 1));
	post_rx(NRX);
	{
		struct kbuf b = { kalloc(8, 8), 8, true };

		vq_add(&dev.q[2], &b, 1, false);
	}
	vdev_driver_ok(&dev);
	guest_initiated();
	host_initiated();
	check(!(vdev_status(&dev) & 0x40), "no reset needed");
}
