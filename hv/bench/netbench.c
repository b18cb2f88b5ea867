/* vhpc-hv-netbench: virtio-net backend throughput measured from the host
 * side, against a plain read/write loop on the same tap in the same run
 * (that loop is the limit; results are ratios).
 *
 * The device model runs as in vhpc-hv (its own thread, ioeventfd-style
 * kicks through the queue's eventfd), on a VM without KVM; a synthetic
 * driver thread (this program's main thread) fills the rings in guest
 * memory the way Linux's virtio-net does (one descriptor for small frames,
 * an indirect table of 4 KiB pieces for 64 KiB TSO frames; mergeable 4 KiB
 * receive buffers) and reaps the used ring by polling.
 *   TX: frames from the guest rings into the tap   vs  write(tap) in a loop
 *   RX: frames pushed through the tap into the guest rings  vs  read(tap)
 *       (64 B, 1500 B: an AF_PACKET sender; 64 KiB TSO: a TCP stream over
 *       lo mirrored into the tap by tc, since only the host's own TCP
 *       makes GSO frames a tap passes on whole)
 * Sizes: 64 B, 1500 B and 64 KiB TSO (TCPv4 GSO, MSS 1448) frames.
 * The tap lives in a private network namespace of this process.
 *
 * Usage: vhpc-hv-netbench [--seconds S] [--reps N] [--hv-log]   (root) */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "../virtio.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <linux/if.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define TAP "vbench0"
#define MAC "52:54:00:be:9c:01"
#define HDR 12
#define QSIZE 1024
#define RXBUF 4096
#define GPA_RINGS 0x1000000ull     /* 16 MiB: rings */
#define GPA_BUFS  0x2000000ull     /* 32 MiB: buffers */
#define TSO_FRAME 65536

static double secs = 1.0;
static int reps = 2;

struct frame { const char *name; size_t len; bool tso; };
struct result { unsigned long frames; uint64_t bytes; };
static const struct frame frames[] = { { "64 B", 64, false }, { "1500 B", 1514, false }, { "64 KiB TSO", TSO_FRAME, true } };

/* ------------------------------------------------------------ the frames */

static void build_frame(uint8_t *hdr, uint8_t *f, const struct frame *fr)
{
	memset(hdr, 0, HDR);
	memset(f, 0, fr->len);
	memcpy(f, "\x52\x54\x00\xbe\x9c\x02", 6);  /* not the tap: dropped early by the host stack */
	memcpy(f + 6, "\x52\x54\x00\xbe\x9c\x01", 6);
	f[12] = 0x08;
	f[13] = 0x00;
	if (fr->len >= 54) {
		uint16_t ipl = (uint16_t)(fr->len - 14 > 65535 ? 65535 : fr->len - 14);

		f[14] = 0x45;
		f[16] = (uint8_t)(ipl >> 8);
		f[17] = (uint8_t)ipl;
		f[22] = 64;
		f[23] = 6;                 /* TCP */
		memcpy(f + 26, "\x0a\x58\x00\x02\x0a\x58\x00\x01", 8);
		f[34] = 0x30, f[35] = 0x39, f[36] = 0x1f, f[37] = 0x90;
		f[46] = 0x50;              /* data offset 5 */
		f[47] = 0x10;              /* ACK */
	}
	for (size_t i = 54; i < fr->len; i++)
		f[i] = (uint8_t)i;
	if (fr->tso) {
		hdr[0] = 1;                /* NEEDS_CSUM */
		hdr[1] = 1;                /* GSO_TCPV4 */
		hdr[2] = 54;               /* hdr_len */
		hdr[4] = 1448 & 0xff, hdr[5] = 1448 >> 8;
		hdr[6] = 34;               /* csum_start */
		hdr[8] = 16;               /* csum_offset */
	}
}

/* ------------------------------------------------------------- the tap */

static int tap_open(unsigned offload)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	int hs = HDR, fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", TAP);
	if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETVNETHDRSZ, &hs) < 0 ||
	    ioctl(fd, TUNSETOFFLOAD, offload) < 0) {
		perror("vhpc-hv-netbench: tap");
		exit(1);
	}
	return fd;
}

static void tap_create(void)
{
	int fd = tap_open(0), s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq ifr = { 0 };

	if (ioctl(fd, TUNSETPERSIST, 1) < 0) {
		perror("vhpc-hv-netbench: TUNSETPERSIST");
		exit(1);
	}
	close(fd);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", TAP);
	ifr.ifr_mtu = 65535 - 14;
	ioctl(s, SIOCSIFMTU, &ifr);
	ifr.ifr_flags = IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) {
		perror("vhpc-hv-netbench: bringing the tap up");
		exit(1);
	}
	close(s);
}

/* ------------------------------------------------------ kernel-side sender */

struct sender { pthread_t t, t2; const struct frame *fr; atomic_bool stop; unsigned long sent; int lfd, cfd; };

static void *send_thread(void *arg)
{
	struct sender *s = arg;
	struct sockaddr_ll sa = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)), one = 1;
	static uint8_t buf[10 + TSO_FRAME];
	uint8_t hdr[HDR];

	{
		struct ifreq ifr = { 0 };

		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", TAP);
		if (fd >= 0 && ioctl(fd, SIOCGIFINDEX, &ifr) == 0)
			sa.sll_ifindex = ifr.ifr_ifindex;
	}
	if (fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("vhpc-hv-netbench: packet socket");
		exit(1);
	}
	build_frame(hdr, buf + 10, s->fr);
	memcpy(buf, hdr, 10);             /* PACKET_VNET_HDR takes the 10-byte header */
	while (!atomic_load(&s->stop))
		if (send(fd, buf, 10 + s->fr->len, 0) > 0)
			s->sent++;
	close(fd);
	return NULL;
}

/* 64 KiB TSO frames into the tap: a packet socket's GSO frames are
 * "dodgy" and the kernel segments them before a tap, so the host's own
 * TCP stack makes them: a TCP stream over lo, mirrored into the tap by a
 * tc action (the mirrored copies keep their 64 KiB GSO shape). */
static void *tcp_recv_thread(void *arg)
{
	struct sender *s = arg;
	static char buf[1 << 20];
	int c = accept(s->lfd, NULL, NULL);

	while (c >= 0 && !atomic_load(&s->stop) && read(c, buf, sizeof(buf)) > 0)
		;
	if (c >= 0)
		close(c);
	return NULL;
}

static void *tcp_send_thread(void *arg)
{
	struct sender *s = arg;
	static char buf[1 << 20];

	while (!atomic_load(&s->stop))
		if (write(s->cfd, buf, sizeof(buf)) > 0)
			s->sent++;
	return NULL;
}

static void sender_start(struct sender *s)
{
	if (!s->fr->tso) {
		pthread_create(&s->t, NULL, send_thread, s);
		return;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(5001), .sin_addr.s_addr = htonl(0x7f000001) };
	int one = 1;

	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 1) < 0) {
		perror("vhpc-hv-netbench: TCP listener on lo");
		exit(1);
	}
	pthread_create(&s->t2, NULL, tcp_recv_thread, s);
	s->cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s->cfd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("vhpc-hv-netbench: TCP over lo");
		exit(1);
	}
	pthread_create(&s->t, NULL, tcp_send_thread, s);
}

static void sender_stop(struct sender *s)
{
	atomic_store(&s->stop, true);
	if (s->fr->tso) {
		shutdown(s->cfd, SHUT_RDWR);
		shutdown(s->lfd, SHUT_RDWR);
		pthread_join(s->t, NULL);
		pthread_join(s->t2, NULL);
		close(s->cfd);
		close(s->lfd);
		return;
	}
	pthread_join(s->t, NULL);
}

/* A received frame counts when it is the one sent (TSO: a whole 64 KiB
 * super-frame, whatever its exact length). */
static bool counts(const struct frame *fr, size_t len)
{
	return fr->tso ? len >= 60000 : len == fr->len;
}

/* ------------------------------------------------------- the plain loops */

static double plain_tx(const struct frame *fr, struct result *res)
{
	int fd = tap_open(0);
	static uint8_t buf[HDR + TSO_FRAME];
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(secs * 1e9), t;

	build_frame(buf, buf + HDR, fr);
	memset(res, 0, sizeof(*res));
	do {
		for (int i = 0; i < 64; i++)
			if (write(fd, buf, HDR + fr->len) > 0)
				res->frames++;
	} while ((t = now_ns()) < end);
	res->bytes = res->frames * fr->len;
	close(fd);
	return (t - t0) / 1e9;
}

static double plain_rx(const struct frame *fr, struct result *res)
{
	int fd = tap_open(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6);
	static uint8_t buf[HDR + TSO_FRAME + 64];
	struct sender s = { .fr = fr };
	uint64_t t0, end, t;
	unsigned long other = 0;
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	sender_start(&s);
	usleep(50000);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	memset(res, 0, sizeof(*res));
	t0 = now_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	do {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r > HDR && counts(fr, (size_t)r - HDR)) {
			res->frames++;
			res->bytes += (uint64_t)r - HDR;
		} else if (r > 0) {
			other++;
		} else if (r < 0 && errno == EAGAIN) {
			struct pollfd p = { fd, POLLIN, 0 };

			poll(&p, 1, 10);       /* wait like a blocking reader would */
		}
	} while ((t = now_ns()) < end);
	sender_stop(&s);
	if (getenv("NETBENCH_DEBUG"))
		fprintf(stderr, "plain rx: sender %lu, other sizes %lu\n", s.sent, other);
	close(fd);
	return (t - t0) / 1e9;
}

/* --------------------------------------------- the device and its driver */

struct drv {
	struct vm vm;
	struct hv_config cfg;
	struct hv_plan plan;
	struct virtio_dev *v;
	uint64_t bar;
};

struct kring {
	struct vring_desc *desc;
	uint16_t *avail, *used;
	uint64_t gdesc, gavail, gused;
	uint16_t avail_idx, last_used;
	int kick_fd;
};

static void wr(struct drv *d, uint64_t off, uint64_t v, unsigned len)
{
	io_dispatch(&d->vm.mmio, d->bar + off, &v, len, true);
}

static uint64_t rd(struct drv *d, uint64_t off, unsigned len)
{
	uint64_t v = 0;

	io_dispatch(&d->vm.mmio, d->bar + off, &v, len, false);
	return v;
}

static void drv_up(struct drv *d)
{
	char *argv[] = { "bench", "--kernel", "/dev/null", "--vcpus", "1", "--mem", "256M", "--no-prefault",
			 "--serial", "none", "--net", "tap=" TAP ",mac=" MAC, NULL };
	struct verr err;
	uint64_t want = VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_F_EVENT_IDX) |
			VIRTIO_BIT(VIRTIO_F_INDIRECT_DESC) | VIRTIO_BIT(0) | VIRTIO_BIT(1) | VIRTIO_BIT(5) |
			VIRTIO_BIT(7) | VIRTIO_BIT(11) | VIRTIO_BIT(15) | VIRTIO_BIT(16);
	struct pci_dev *p;

	memset(d, 0, sizeof(*d));
	if (vm_nokvm_init(&d->vm, &d->cfg, &d->plan, 12, argv, false, &err) < 0) {
		fprintf(stderr, "vhpc-hv-netbench: %s\n", err.msg);
		exit(1);
	}
	p = pci_slot(&d->vm, 1);
	d->v = p->opaque;
	d->bar = pci_bar_addr(p, 0);
	wr(d, 0x14, 0, 1);
	wr(d, 0x14, 3, 1);
	for (unsigned sel = 0; sel < 2; sel++) {
		wr(d, 0x00, sel, 4);
		wr(d, 0x08, sel, 4);
		wr(d, 0x0c, (uint32_t)((rd(d, 0x04, 4) & (want >> (32 * sel)))), 4);
	}
	wr(d, 0x14, 11, 1);
	if (!(rd(d, 0x14, 1) & 8)) {
		fprintf(stderr, "vhpc-hv-netbench: features refused\n");
		exit(1);
	}
}

static void ring_setup(struct drv *d, struct kring *r, int q)
{
	uint64_t base = GPA_RINGS + (uint64_t)q * 0x10000;

	r->gdesc = base;
	r->gavail = base + 0x4000;
	r->gused = base + 0x8000;
	r->desc = gm_ptr(&d->vm.mem, r->gdesc, 16 * QSIZE);
	r->avail = gm_ptr(&d->vm.mem, r->gavail, 6 + 2 * QSIZE);
	r->used = gm_ptr(&d->vm.mem, r->gused, 6 + 8 * QSIZE);
	memset(r->desc, 0, 16 * QSIZE);
	memset(r->avail, 0, 6 + 2 * QSIZE);
	memset(r->used, 0, 6 + 8 * QSIZE);
	r->avail_idx = r->last_used = 0;
	r->kick_fd = d->v->qr[q].kick_fd;
	wr(d, 0x16, (uint64_t)q, 2);
	wr(d, 0x18, QSIZE, 2);
	wr(d, 0x20, r->gdesc, 8);
	wr(d, 0x28, r->gavail, 8);
	wr(d, 0x30, r->gused, 8);
	wr(d, 0x1c, 1, 2);
}

static void drv_down(struct drv *d)
{
	wr(d, 0x14, 0, 1);
	vm_nokvm_free(&d->vm, &d->cfg);
}

/* Publishes new avail entries; kicks the way Linux does (event index). */
static void publish(struct kring *r, uint16_t old)
{
	uint16_t ev;
	uint64_t one = 1;

	__atomic_store_n(&r->avail[1], r->avail_idx, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ev = __atomic_load_n(&r->used[2 + 4 * QSIZE], __ATOMIC_ACQUIRE);
	if ((uint16_t)(r->avail_idx - ev - 1) < (uint16_t)(r->avail_idx - old))
		if (write(r->kick_fd, &one, sizeof(one)) < 0)
			perror("kick");
}

static double dev_tx(const struct frame *fr, struct result *res)
{
	struct drv d;
	struct kring r;
	uint64_t t0, end, t, bufs = GPA_BUFS;
	unsigned long done = 0;

	drv_up(&d);
	ring_setup(&d, &r, 1);
	wr(&d, 0x14, 15, 1);
	/* Every slot sends the same frame buffer, as the plain loop does (one
	 * hot buffer: what is compared is the path, not the cache).  Small
	 * frames take one descriptor (header and frame together), TSO frames
	 * an indirect table of the headers plus 4 KiB pieces, as Linux does. */
	build_frame(gm_ptr(&d.vm.mem, bufs, HDR + fr->len), gm_ptr(&d.vm.mem, bufs + HDR, fr->len), fr);
	for (int i = 0; i < QSIZE; i++) {
		uint64_t g = bufs;

		if (!fr->tso) {
			r.desc[i] = (struct vring_desc){ g, (uint32_t)(HDR + fr->len), 0, 0 };
		} else {
			uint64_t tg = g + HDR + TSO_FRAME + (uint64_t)i * 512;
			struct vring_desc *tab = gm_ptr(&d.vm.mem, tg, 20 * 16);
			uint32_t k = 0, off = HDR + 54;

			tab[k++] = (struct vring_desc){ g, off, VRING_DESC_F_NEXT, 1 };
			while (off < HDR + fr->len) {
				uint32_t l = HDR + (uint32_t)fr->len - off < 4096 ? HDR + (uint32_t)fr->len - off : 4096;

				tab[k] = (struct vring_desc){ g + off, l, VRING_DESC_F_NEXT, (uint16_t)(k + 1) };
				off += l;
				k++;
			}
			tab[k - 1].flags = 0;
			r.desc[i] = (struct vring_desc){ tg, k * 16, VRING_DESC_F_INDIRECT, 0 };
		}
	}
	t0 = now_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	do {
		uint16_t old = r.avail_idx, used = __atomic_load_n(&r.used[1], __ATOMIC_ACQUIRE);

		done += (uint16_t)(used - r.last_used);
		r.last_used = used;
		/* used_event: no interrupts wanted (there are none here anyway) */
		r.avail[2 + QSIZE] = (uint16_t)(r.last_used - 1);
		/* Like a driver under load: refill in batches, else sleep. */
		if ((uint16_t)(r.avail_idx - r.last_used) > QSIZE / 2) {
			usleep(50);
			continue;
		}
		while ((uint16_t)(r.avail_idx - r.last_used) < QSIZE) {
			r.avail[2 + r.avail_idx % QSIZE] = r.avail_idx % QSIZE;
			r.avail_idx++;
		}
		publish(&r, old);
	} while ((t = now_ns()) < end);
	res->frames = done;
	res->bytes = done * fr->len;
	drv_down(&d);
	return (t - t0) / 1e9;
}

static double dev_rx(const struct frame *fr, struct result *res)
{
	struct drv d;
	struct kring r;
	struct sender s = { .fr = fr };
	uint64_t t0 = 0, end = 0, t;
	unsigned long other = 0;
	bool counting = false;

	drv_up(&d);
	ring_setup(&d, &r, 0);
	for (int i = 0; i < QSIZE; i++) {
		r.desc[i] = (struct vring_desc){ GPA_BUFS + (uint64_t)i * RXBUF, RXBUF, VRING_DESC_F_WRITE, 0 };
		r.avail[2 + i] = (uint16_t)i;
	}
	r.avail_idx = QSIZE;
	__atomic_store_n(&r.avail[1], r.avail_idx, __ATOMIC_RELEASE);
	wr(&d, 0x14, 15, 1);
	memset(res, 0, sizeof(*res));
	sender_start(&s);
	t = now_ns();
	end = t + 50000000ull;               /* 50 ms to get going, then count */
	for (;;) {
		uint16_t used = __atomic_load_n(&r.used[1], __ATOMIC_ACQUIRE), old = r.avail_idx;

		while (r.last_used != used) {
			struct vring_used_elem *e = (struct vring_used_elem *)(r.used + 2) + r.last_used % QSIZE;
			uint8_t *b = gm_ptr(&d.vm.mem, GPA_BUFS + (uint64_t)e->id * RXBUF, RXBUF);
			uint16_t nb = (uint16_t)(b[10] | b[11] << 8);
			uint64_t bytes = 0;

			/* The first buffer of a frame says how many it took;
			 * give them all back. */
			for (uint16_t k = 0; k < nb && r.last_used != used; k++) {
				e = (struct vring_used_elem *)(r.used + 2) + r.last_used % QSIZE;
				bytes += e->len;
				r.avail[2 + r.avail_idx % QSIZE] = (uint16_t)e->id;
				r.avail_idx++;
				r.last_used++;
			}
			if (counting && bytes > HDR && counts(fr, bytes - HDR)) {
				res->frames++;
				res->bytes += bytes - HDR;
			} else if (counting) {
				other++;
			}
		}
		if (r.avail_idx != old)
			publish(&r, old);
		r.avail[2 + QSIZE] = (uint16_t)(r.last_used - 1);
		t = now_ns();
		if (!counting && t >= end) {
			counting = true;
			t0 = t;
			end = t0 + (uint64_t)(secs * 1e9);
		} else if (counting && t >= end) {
			break;
		}
		if (used == r.last_used)
			usleep(50);
	}
	sender_stop(&s);
	if (getenv("NETBENCH_DEBUG"))
		fprintf(stderr, "rx: sender %lu, other sizes %lu\n", s.sent, other);
	drv_down(&d);
	return (t - t0) / 1e9;
}

/* --------------------------------------------------------------- report */

static void row(const char *dir, const struct frame *fr, double (*plain)(const struct frame *, struct result *),
		double (*dev)(const struct frame *, struct result *))
{
	double pp = 0, pb = 0, dp = 0, db = 0;

	for (int i = 0; i < reps; i++) {
		struct result r;
		double t = plain(fr, &r);

		if (r.frames / t > pp)
			pp = r.frames / t, pb = r.bytes / t;
		t = dev(fr, &r);
		if (r.frames / t > dp)
			dp = r.frames / t, db = r.bytes / t;
	}
	printf("| %s | %s | %.0f | %.2f | %.0f | %.2f | %.2f |\n", dir, fr->name, pp, pb * 8 / 1e9, dp, db * 8 / 1e9,
	       pp > 0 ? dp / pp : 0);
	fflush(stdout);
}

static void lo_mirror(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq ifr = { .ifr_name = "lo", .ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING };

	if (s < 0 || ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ||
	    system("tc qdisc add dev lo clsact && tc filter add dev lo egress u32 match u32 0 0 "
		   "action mirred egress mirror dev " TAP " >/dev/null 2>&1") != 0)
		fprintf(stderr, "vhpc-hv-netbench: tc mirred from lo to the tap failed; the RX TSO row is empty\n");
	if (s >= 0)
		close(s);
}

int main(int argc, char **argv)
{
	int o;

	vlog_init("vhpc-hv-netbench");
	vlog_set_level(VLOG_WARN);
	while ((o = getopt(argc, argv, "s:r:v")) != -1) {
		if (o == 's')
			secs = atof(optarg);
		else if (o == 'r')
			reps = atoi(optarg);
		else if (o == 'v')
			vlog_set_level(VLOG_DEBUG);
		else {
			fprintf(stderr, "usage: vhpc-hv-netbench [-s SECONDS] [-r REPS] [-v]\n");
			return 2;
		}
	}
	if (secs <= 0 || reps < 1 || unshare(CLONE_NEWNET) < 0) {
		perror("vhpc-hv-netbench: a private network namespace (needs root)");
		return 1;
	}
	tap_create();
	lo_mirror();
	printf("virtio-net backend vs a plain loop on the same tap (%s, %.1f s per run, best of %d)\n\n", TAP, secs,
	       reps);
	printf("| direction | frame | plain loop pkt/s | Gbit/s | vhpc-hv pkt/s | Gbit/s | ratio |\n");
	printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
	for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++)
		row("guest->tap (TX)", &frames[i], plain_tx, dev_tx);
	for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++)
		row("tap->guest (RX)", &frames[i], plain_rx, dev_rx);
	return 0;
}
