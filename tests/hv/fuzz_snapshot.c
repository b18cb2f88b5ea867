/* libFuzzer target: a snapshot file is hostile input to the vhpc-hv that
 * restores it.  The whole reader runs (hv/snap_load.c: header and host
 * type, sections and checksums, fingerprint, vCPU and irqchip parse, RAM
 * extents into guest memory, each device's loader), on a VM without KVM,
 * then the devices are driven through their ports and the virtio devices'
 * loops (a console, a disk, a NIC on a socket pair and a vsock with a
 * host connection the guest was asked to accept) run, with an ivshmem region loaded too, so state a
 * loader let in is used.  The first byte picks the input's form:
 *   0: the rest is the file itself
 *   1: the rest is patches (u32 offset, u8 value), 5 bytes each, to a
 *      valid snapshot built here, so mutations reach past the checksums
 *      only when the patch also fixes them up (byte 0x80 set: the
 *      sections' crcs are recomputed after patching). */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/log.h"
#include "hv/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct vm vm;
static struct hv_config cfg;
static struct hv_plan plan;
static struct snap_host host = { .vendor = "GenuineIntel", .kvm_api = KVM_API_VERSION, .xsave_size = 4096,
				 .nmsrs = 4, .msr = { 0x10, 0x174, 0xc0000081, 0xc0000102 } };
static struct snap_buf valid;
static int sfd = -1;

static void sec(struct snap_buf *f, uint32_t tag, uint32_t idx, const struct snap_buf *b)
{
	uint32_t crc = crc32c(0, b->p, b->len), zero = 0;
	uint64_t len = b->len;

	sb_u32(f, tag);
	sb_u32(f, idx);
	sb_u64(f, len);
	sb_u32(f, crc);
	sb_u32(f, zero);
	sb_put(f, b->p, b->len);
}

/* A snapshot this VM accepts: the layout of hv/snap_save.c. */
static void build_valid(void)
{
	uint8_t hdr[SNAP_HEADER_SIZE] = { 0 };
	struct snap_buf b = { 0 };
	uint32_t v, crc;
	char *fp = snap_fingerprint(&vm);
	size_t nd;
	const struct hv_device *devs = devices_list(&nd);
	struct snap_vcpu cpu;
	struct kvm_irqchip chip;
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;

	memcpy(hdr, SNAP_MAGIC, 8);
	v = SNAP_VERSION;
	memcpy(hdr + 8, &v, 4);
	v = SNAP_HEADER_SIZE;
	memcpy(hdr + 12, &v, 4);
	snprintf((char *)hdr + 16, 32, "%s", VHPC_VERSION);
	memcpy(hdr + 48, host.vendor, 12);
	memcpy(hdr + 60, &host.kvm_api, 4);
	memcpy(hdr + 64, &host.xsave_size, 4);
	memcpy(hdr + 68, &host.cpuid_crc, 4);
	memcpy(hdr + 72, &host.nmsrs, 4);
	memcpy(hdr + 76, &host.msrs_crc, 4);
	memcpy(hdr + 80, &vm.mem.size, 8);
	crc = crc32c(0, hdr, SNAP_HEADER_SIZE - 4);
	memcpy(hdr + SNAP_HEADER_SIZE - 4, &crc, 4);
	sb_put(&valid, hdr, sizeof(hdr));

	sb_put(&b, fp, strlen(fp));
	free(fp);
	sec(&valid, SNAP_CONF, 0, &b);
	b.len = 0;
	for (uint32_t c = 0; c < 3; c++) {
		memset(&chip, 0, sizeof(chip));
		chip.chip_id = c;
		sb_put(&b, &chip, sizeof(chip));
	}
	memset(&pit, 0, sizeof(pit));
	memset(&clock, 0, sizeof(clock));
	sb_put(&b, &pit, sizeof(pit));
	sb_put(&b, &clock, sizeof(clock));
	sec(&valid, SNAP_VMST, 0, &b);
	for (int i = 0; i < vm.nvcpus; i++) {
		uint8_t xs[4096] = { 0 };

		memset(&cpu, 0, sizeof(cpu));
		b.len = 0;
		sb_put(&b, &cpu.regs, sizeof(cpu.regs));
		sb_put(&b, &cpu.sregs, sizeof(cpu.sregs));
		sb_put(&b, &cpu.xcrs, sizeof(cpu.xcrs));
		sb_put(&b, &cpu.lapic, sizeof(cpu.lapic));
		sb_put(&b, &cpu.events, sizeof(cpu.events));
		sb_put(&b, &cpu.debugregs, sizeof(cpu.debugregs));
		sb_put(&b, &cpu.mp, sizeof(cpu.mp));
		sb_u32(&b, 4096);
		sb_put(&b, xs, sizeof(xs));
		sb_u32(&b, 2);
		sb_u32(&b, 0x10);
		sb_u64(&b, 12345);
		sb_u32(&b, 0x174);
		sb_u64(&b, 8);
		sec(&valid, SNAP_VCPU, (uint32_t)i, &b);
	}
	for (size_t i = 0; i < nd; i++) {
		char name[32] = { 0 };
		struct verr err;

		if (!vm.dev[i])
			continue;
		b.len = 0;
		snprintf(name, sizeof(name), "%s", devs[i].name);
		sb_put(&b, name, sizeof(name));
		if (!devs[i].save || devs[i].save(&vm, &b, &err) < 0) {
			fprintf(stderr, "fuzz-hv-snapshot: device %s saves no state\n", devs[i].name);
			abort();
		}
		sec(&valid, SNAP_DEV, (uint32_t)i, &b);
	}
	b.len = 0;
	for (uint64_t a = 0x100000; a < 0x104000; a += 0x2000) {
		uint8_t page[8192];

		memset(page, (int)(a >> 12), sizeof(page));
		sb_u64(&b, a);
		sb_u64(&b, sizeof(page));
		sb_put(&b, page, sizeof(page));
	}
	sec(&valid, SNAP_RAM, 0, &b);
	b.len = 0;
	sec(&valid, SNAP_END, 0, &b);
	sb_free(&b);
	if (valid.oom)
		abort();
}

static void setup(void)
{
	struct verr err;
	/* A disk of 64 sectors the virtio-blk loader checks its size against
	 * (unlinked once open). */
	static char disk[] = "/tmp/fuzz-hv-snapshot.XXXXXX", blk[64], region[] = "/tmp/fuzz-hv-snapshot.XXXXXX",
		    shm[64], vsdir[] = "/tmp/fuzz-hv-snapshot.XXXXXX", vsock[128],
		    net[64];
	static char *argv[] = { "fuzz", "--kernel", "/dev/null", "--vcpus", "2", "--mem", "32M",
				"--serial", "none", "--debug-exit", "--console", "none", "--blk", blk,
				"--shm", shm, "--vsock", vsock, "--net", net, NULL };
	int dfd = mkstemp(disk), rfd = mkstemp(region), cfd, sp[2];
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	if (dfd < 0 || ftruncate(dfd, 64 * 512) < 0 || rfd < 0 || ftruncate(rfd, 4096) < 0)
		abort();
	close(dfd);
	close(rfd);
	snprintf(blk, sizeof(blk), "path=%s", disk);
	snprintf(shm, sizeof(shm), "path=%s", region);
	if (!mkdtemp(vsdir))
		abort();
	snprintf(vsock, sizeof(vsock), "cid=3,uds=%s/v", vsdir);
	/* The NIC's "tap": frames the restored rings send go to the other end,
	 * which is never read (a full socket drops them, as a tap would). */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	snprintf(net, sizeof(net), "fd=%d,mac=52:54:00:00:00:01", sp[0]);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/v", vsdir);

	vlog_init("fuzz-hv-snapshot");
	vlog_set_level(VLOG_ERR);
	if (vm_nokvm_init(&vm, &cfg, &plan, 20, argv, true, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		abort();
	}
	unlink(disk);
	unlink(region);
	/* A host connection the guest is asked to accept: the valid
	 * snapshot then holds a connection for the loader to reset. */
	cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0 || write(cfd, "CONNECT 9\n", 10) != 10)
		abort();
	evloop_run_all(&vm);
	evloop_run_all(&vm);
	unlink(a.sun_path);
	rmdir(vsdir);
	host.msrs_crc = crc32c(0, host.msr, host.nmsrs * sizeof(uint32_t));
	vm.snaph = &host;
	sfd = memfd_create("fuzz-snapshot", MFD_CLOEXEC);
	if (sfd < 0)
		abort();
	build_valid();
}

/* Recomputes every section's crc (walking the lengths as the reader does). */
static void fix_crcs(uint8_t *p, size_t n)
{
	size_t off = SNAP_HEADER_SIZE;
	uint32_t crc;

	if (n < SNAP_HEADER_SIZE)
		return;
	crc = crc32c(0, p, SNAP_HEADER_SIZE - 4);
	memcpy(p + SNAP_HEADER_SIZE - 4, &crc, 4);
	while (n - off >= SNAP_SECTION_HDR) {
		uint64_t len;

		memcpy(&len, p + off + 8, 8);
		if (len > n - off - SNAP_SECTION_HDR)
			return;
		crc = crc32c(0, p + off + SNAP_SECTION_HDR, len);
		memcpy(p + off + 16, &crc, 4);
		off += SNAP_SECTION_HDR + len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct snap_state st;
	struct verr err;
	uint8_t *file = NULL;
	size_t n;

	if (!ready) {
		setup();
		ready = true;
	}
	if (!size)
		return 0;
	if ((data[0] & 0x7f) == 0) {
		file = malloc(size);
		memcpy(file, data + 1, size - 1);
		n = size - 1;
	} else {
		file = malloc(valid.len);
		memcpy(file, valid.p, valid.len);
		n = valid.len;
		for (size_t i = 1; i + 5 <= size; i += 5) {
			uint32_t off;

			memcpy(&off, data + i, 4);
			file[off % n] = data[i + 4];
		}
		/* A patch past the end truncates the file instead. */
		if ((size - 1) % 5 == 4)
			n = n * data[size - 1] / 256 + 1;
	}
	if (data[0] & 0x80)
		fix_crcs(file, n);
	if (ftruncate(sfd, 0) < 0 || pwrite(sfd, file, n, 0) != (ssize_t)n)
		abort();
	free(file);
	err.msg[0] = 0;
	if (snap_load(&vm, sfd, &st, &err) == 0) {
		uint8_t v;

		snap_state_free(&st);
		/* The loaded devices in use: every UART and GED register. */
		for (uint16_t port = 0x3f8; port < 0x400; port++) {
			io_dispatch(&vm.pio, port, &v, 1, false);
			io_dispatch(&vm.pio, port, &v, 1, true);
		}
		io_dispatch(&vm.pio, 0x64, &v, 1, false);
		/* Loaded virtio queues served: their kicks pop chains from
		 * the rings the snapshot's RAM holds, at its indexes. */
		evloop_run_all(&vm);
	} else if (!err.msg[0]) {
		abort();    /* every refusal says why */
	}
	return 0;
}
