/* libFuzzer target for the PCI bus and the virtio device models: the input
 * is a program of operations a hostile guest (and the far ends of the
 * backends) could perform against a VM without KVM that has virtio-blk,
 * -net, -console, -vsock, ivshmem and vhost-user-fs (its back-end a thread
 * here that acks every request and signals each call eventfd once, so the
 * transport's relay of back-end completions runs):
 *   writes into guest RAM (rings, descriptors, indirect tables, buffers),
 *   config-space reads/writes (ECAM and 0xCF8), BAR reads/writes (common
 *   config, notify, ISR, device config, MSI-X table/PBA), a well-formed
 *   driver start of one device (so the fuzzer reaches DRIVER_OK often),
 *   queue notifications, frames from the tap's side, host-side vsock
 *   connections and bytes, and running the device loops.
 * Anything outside guest RAM, a loop, or a crash is a bug; the sanitizers
 * and libFuzzer's timeout catch them. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <pthread.h>
#include <unistd.h>

#include "hv/pci.h"
#include "hv/virtio.h"

#define WIN 0x10000ull            /* guest RAM the fuzzer writes rings into */
#define WIN_SIZE 0x10000ull

static struct vm vm;
static struct hv_config cfg;
static struct hv_plan plan;
static int net_peer = -1, vsock_client = -1, vsock_listen = -1, vsock_peer[8];
static char dir[64], uds[96];
static uint64_t bar0[PCI_MAX_SLOTS];

/* A vhost-user back-end that agrees to everything (hv/vhost_user.c's
 * hostile side is fuzz-vhost-user's job). */
static void *fs_backend(void *arg)
{
	int fd = (int)(intptr_t)arg;

	for (;;) {
		uint8_t h[12], p[512];
		char ctl[CMSG_SPACE(sizeof(int) * 8)];
		struct iovec iov = { h, sizeof(h) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		uint32_t req, flags, size, rf = 5, rs = 8;
		uint64_t val = 0;
		uint8_t r[20];

		if (recvmsg(fd, &mh, MSG_WAITALL) != sizeof(h))
			return NULL;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			for (size_t i = 0; c->cmsg_type == SCM_RIGHTS && i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int f;
				uint64_t one = 1;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (!memcmp(h, &(uint32_t){ 13 }, 4) && write(f, &one, sizeof(one)) < 0) {
					/* a call eventfd: one completion signal */
				}
				close(f);
			}
		memcpy(&req, h, 4);
		memcpy(&flags, h + 4, 4);
		memcpy(&size, h + 8, 4);
		if (size > sizeof(p) || (size && recv(fd, p, size, MSG_WAITALL) != (ssize_t)size))
			return NULL;
		if (req == 1)
			val = 1ull << 32 | 1ull << 30 | 1ull << 29 | 1ull << 28;
		else if (req == 15)
			val = 1ull << 3 | 1ull << 0;
		else if (req == 17)
			val = 2;
		else if (req == 11)
			memcpy(&val, p, 4);
		else if (!(flags & 8))
			continue;
		memcpy(r, &req, 4);
		memcpy(r + 4, &rf, 4);
		memcpy(r + 8, &rs, 4);
		memcpy(r + 12, &val, 8);
		if (send(fd, r, sizeof(r), MSG_NOSIGNAL) != sizeof(r))
			return NULL;
	}
}

/* libFuzzer ends with exit(): the sockets' directory goes then. */
static void cleanup(void)
{
	struct verr e;

	rm_rf(dir, &e);
}

static void setup(void)
{
	struct verr err;
	int sp[2], fsp[2], img, shm;
	char a_net[64], a_blk[96], a_vsock[160], a_shm[96], a_fs[96];
	pthread_t be;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	vlog_init("fuzz-virtio");
	vlog_set_level(VLOG_ERR);
	snprintf(dir, sizeof(dir), "/tmp/fuzz-virtio.XXXXXX");
	if (!mkdtemp(dir) || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sp) < 0)
		abort();
	atexit(cleanup);
	net_peer = sp[1];
	img = memfd_create("fuzz-img", 0);
	shm = memfd_create("fuzz-shm", 0);
	if (img < 0 || shm < 0 || ftruncate(img, 1 << 20) < 0 || ftruncate(shm, 65536) < 0)
		abort();
	snprintf(a_net, sizeof(a_net), "fd=%d,mac=52:54:00:00:00:01,mtu=1500", sp[0]);
	snprintf(a_blk, sizeof(a_blk), "path=/proc/self/fd/%d,serial=fuzz", img);
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	snprintf(a_vsock, sizeof(a_vsock), "cid=3,uds=%s", uds);
	snprintf(a_shm, sizeof(a_shm), "path=/proc/self/fd/%d", shm);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fsp) < 0 ||
	    pthread_create(&be, NULL, fs_backend, (void *)(intptr_t)fsp[1]) != 0)
		abort();
	snprintf(a_fs, sizeof(a_fs), "tag=fuzz,socket=/dev/fd/%d,timeout=2000,queue-size=8", fsp[0]);
	char *argv[] = { "fuzz", "--kernel", "/dev/null", "--vcpus", "1", "--mem", "16M", "--no-prefault",
			 "--serial", "none", "--net", a_net, "--blk", a_blk, "--console", "none",
			 "--vsock", a_vsock, "--shm", a_shm, "--fs", a_fs, NULL };
	if (vm_nokvm_init(&vm, &cfg, &plan, (int)(sizeof(argv) / sizeof(argv[0])) - 1, argv, true, &err) < 0) {
		fprintf(stderr, "fuzz-virtio: %s\n", err.msg);
		abort();
	}
	/* A host listener for guest-initiated vsock connections to port 1. */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_1", uds);
	vsock_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (vsock_listen < 0 || bind(vsock_listen, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(vsock_listen, 16) < 0)
		abort();
	for (int i = 0; i < 8; i++)
		vsock_peer[i] = -1;
	for (int s = 0; s < PCI_MAX_SLOTS; s++)
		if (pci_slot(&vm, s))
			bar0[s] = pci_bar_addr(pci_slot(&vm, s), 0);
}

static void cfg_rw(unsigned slot, unsigned off, unsigned len, uint32_t v, bool write, bool cf8)
{
	if (!cf8) {
		pci_cfg_access(&vm, slot << 3, off, &v, len, write);
		return;
	}
	uint32_t a = 0x80000000u | slot << 11 | (off & 0xfc);

	io_dispatch(&vm.pio, 0xcf8, &a, 4, true);
	io_dispatch(&vm.pio, 0xcfc + (off & 3), &v, len, write);
}

static void bar_rw(unsigned slot, int bar, uint64_t off, unsigned len, uint64_t v, bool write)
{
	struct pci_dev *d = pci_slot(&vm, (int)slot);

	if (!d || !d->bar[bar].size)
		return;
	io_dispatch(&vm.mmio, pci_bar_addr(d, bar) + off, &v, len, write);
}

/* What a correct driver does, with rings in the fuzz window. */
static void driver_start(unsigned slot)
{
	struct pci_dev *d = pci_slot(&vm, (int)slot);
	struct virtio_dev *v;

	if (!d || pci_r16(d, PCI_VENDOR_ID) != 0x1af4 || pci_r16(d, PCI_DEVICE_ID) < 0x1040 ||
	    pci_r16(d, PCI_DEVICE_ID) >= 0x1080)
		return;
	v = d->opaque;
	cfg_rw(slot, PCI_COMMAND, 2, PCI_CMD_MEM | PCI_CMD_MASTER, true, false);
	cfg_rw(slot, d->msix.cap + 2, 2, 0x8000, true, false);
	for (unsigned i = 0; i < d->msix.n; i++) {
		bar_rw(slot, 0, VIRTIO_BAR_MSIX + 16 * i, 4, 0xfee00000u, true);
		bar_rw(slot, 0, VIRTIO_BAR_MSIX + 16 * i + 8, 4, 0x40 + i, true);
		bar_rw(slot, 0, VIRTIO_BAR_MSIX + 16 * i + 12, 4, 0, true);
	}
	bar_rw(slot, 0, 0x14, 1, 0, true);
	bar_rw(slot, 0, 0x14, 1, 3, true);
	for (uint32_t sel = 0; sel < 2; sel++) {
		uint32_t f = 0;

		bar_rw(slot, 0, 0x00, 4, sel, true);
		io_dispatch(&vm.mmio, pci_bar_addr(d, 0) + 0x04, &f, 4, false);
		bar_rw(slot, 0, 0x08, 4, sel, true);
		bar_rw(slot, 0, 0x0c, 4, f, true);
	}
	bar_rw(slot, 0, 0x14, 1, 11, true);
	for (int q = 0; q < v->nq && q < 16; q++) {
		uint64_t base = WIN + (uint64_t)q * 0x1000;

		bar_rw(slot, 0, 0x16, 2, (uint64_t)q, true);
		bar_rw(slot, 0, 0x18, 2, 8, true);
		bar_rw(slot, 0, 0x1a, 2, (uint64_t)q + 1, true);
		bar_rw(slot, 0, 0x20, 8, base, true);
		bar_rw(slot, 0, 0x28, 8, base + 0x100, true);
		bar_rw(slot, 0, 0x30, 8, base + 0x200, true);
		bar_rw(slot, 0, 0x1c, 2, 1, true);
	}
	bar_rw(slot, 0, 0x14, 1, 15, true);
}

static void run_loops(void)
{
	char buf[70000];
	int fd;

	for (int i = 0; i < 8 && evloop_run_all(&vm); i++)
		;
	/* The far ends: drain the tap side, serve vsock peers. */
	while (recv(net_peer, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
	while ((fd = accept4(vsock_listen, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
		int k;

		for (k = 0; k < 8 && vsock_peer[k] >= 0; k++)
			;
		if (k == 8)
			close(fd);
		else
			vsock_peer[k] = fd;
	}
	for (int k = 0; k < 8; k++)
		if (vsock_peer[k] >= 0) {
			ssize_t n = recv(vsock_peer[k], buf, sizeof(buf), MSG_DONTWAIT);

			if (n > 0 && send(vsock_peer[k], buf, (size_t)(n > 512 ? 512 : n), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				/* a full socket: the guest side reads slowly */
			}
		}
	while (recv(vsock_client, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
	for (int i = 0; i < 8 && evloop_run_all(&vm); i++)
		;
}

/* Puts every device back where setup left it. */
static void reset_all(void)
{
	for (int s = 1; s < PCI_MAX_SLOTS; s++) {
		struct pci_dev *d = pci_slot(&vm, s);

		if (!d)
			continue;
		cfg_rw((unsigned)s, PCI_COMMAND, 2, 0, true, false);
		cfg_rw((unsigned)s, PCI_BAR0, 4, (uint32_t)bar0[s], true, false);
		cfg_rw((unsigned)s, PCI_BAR0 + 4, 4, (uint32_t)(bar0[s] >> 32), true, false);
		cfg_rw((unsigned)s, PCI_COMMAND, 2, PCI_CMD_MEM, true, false);
		if (pci_r16(d, PCI_DEVICE_ID) >= 0x1040 && pci_r16(d, PCI_DEVICE_ID) < 0x1080)
			bar_rw((unsigned)s, 0, 0x14, 1, 0, true);
	}
	if (vsock_client >= 0)
		close(vsock_client);
	vsock_client = -1;
	for (int k = 0; k < 8; k++)
		if (vsock_peer[k] >= 0) {
			close(vsock_peer[k]);
			vsock_peer[k] = -1;
		}
	run_loops();
	memset(gm_ptr(&vm.mem, WIN, WIN_SIZE), 0, WIN_SIZE);
}

struct in { const uint8_t *p; size_t n; };

static uint64_t take(struct in *in, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes && in->n; i++, in->p++, in->n--)
		v |= (uint64_t)in->p[0] << (8 * i);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	struct in in = { data, size };

	if (!init) {
		setup();
		init = true;
	}
	reset_all();
	while (in.n) {
		unsigned op = (unsigned)take(&in, 1) % 10;

		switch (op) {
		case 0: {                  /* guest RAM write in the window */
			uint64_t off = take(&in, 2) % WIN_SIZE, len = take(&in, 1);

			len = len > in.n ? in.n : len;
			if (off + len > WIN_SIZE)
				len = WIN_SIZE - off;
			gm_write(&vm.mem, WIN + off, in.p, len);
			in.p += len;
			in.n -= len;
			break;
		}
		case 1:
		case 2: {                  /* config space write / read */
			unsigned slot = (unsigned)take(&in, 1) % 8, off = (unsigned)take(&in, 2) % PCI_CFG_SIZE;
			unsigned len = 1u << (take(&in, 1) % 3), cf8 = op == 1 && (off & 0x800);
			uint32_t v = (uint32_t)take(&in, 4);

			cfg_rw(slot, cf8 ? off & 0xff : off, len, v, op == 1, cf8);
			break;
		}
		case 3:
		case 4: {                  /* BAR write / read */
			unsigned slot = (unsigned)take(&in, 1) % 8, bar = (unsigned)take(&in, 1) % 3;
			uint64_t off = take(&in, 2), v;
			unsigned len = 1u << (take(&in, 1) % 4);

			v = take(&in, 8);
			bar_rw(slot, (int)bar, off, len, v, op == 3);
			break;
		}
		case 5:
			run_loops();
			break;
		case 6:
			driver_start((unsigned)take(&in, 1) % 8);
			break;
		case 7: {                  /* queue notification */
			unsigned slot = (unsigned)take(&in, 1) % 8, q = (unsigned)take(&in, 1) % 20;

			bar_rw(slot, 0, VIRTIO_BAR_NOTIFY + VIRTIO_NOTIFY_MULT * q, 2, q, true);
			run_loops();
			break;
		}
		case 8: {                  /* a frame from the tap's side */
			unsigned len = (unsigned)take(&in, 2) % 2048;

			len = len > in.n ? (unsigned)in.n : len;
			if (send(net_peer, in.p, len, MSG_DONTWAIT) < 0) {
				/* the device has not read the earlier ones */
			}
			in.p += len;
			in.n -= len;
			break;
		}
		case 9: {                  /* host side of vsock: connect, bytes */
			unsigned flags = (unsigned)take(&in, 1), len = (unsigned)take(&in, 1);
			bool fresh = vsock_client < 0;

			if (vsock_client < 0) {
				struct sockaddr_un sa = { .sun_family = AF_UNIX };

				snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", uds);
				vsock_client = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
				if (vsock_client >= 0 && connect(vsock_client, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
					close(vsock_client);
					vsock_client = -1;
				}
			}
			if (fresh && vsock_client >= 0 && (flags & 1)) {
				/* Most host connections start with a proper line. */
				char line[32];
				int l = snprintf(line, sizeof(line), "CONNECT %u\n", flags >> 1);

				if (send(vsock_client, line, (size_t)l, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
					/* the listener's backlog is full */
				}
			}
			len = len > in.n ? (unsigned)in.n : len;
			if (vsock_client >= 0 && send(vsock_client, in.p, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				/* full */
			}
			in.p += len;
			in.n -= len;
			break;
		}
		}
	}
	run_loops();
	return 0;
}
