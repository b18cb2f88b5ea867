/* Unit tests of the virtio transport's snapshot state (hv/virtio_snap.c)
 * on a VM without KVM: a virtio-blk disk set up through its registers as a
 * driver would, with requests served, is saved and loaded back with its
 * ring indexes, and a hostile snapshot (rings outside RAM, a size no
 * driver can set, a vector beyond the MSI-X table, indexes beyond the
 * ring or 16 bits, a status no driver reaches, running queues on a
 * stopped device, another disk size, bytes cut or added) is refused
 * naming what is wrong, with the device left as it was. */
#include "lib/err.h"
#include "lib/log.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/hv/virtio_drive.h"

#define QS 8
#define DESC VD_RING(0)
#define AVAIL (VD_RING(0) + 0x1000)
#define USED (VD_RING(0) + 0x2000)
#define BUF 0x20000ull

/* Offsets in virtio-blk's saved state: the disk's sectors, the transport,
 * then queue 0 (hv/virtio_snap.c's order). */
#define O_SECTORS 0
#define O_STATUS 40
#define O_FLAGS 48
#define O_NQ 56
#define O_Q0 60
#define O_QSIZE (O_Q0 + 0)
#define O_QVEC (O_Q0 + 4)
#define O_QDESC (O_Q0 + 12)
#define O_QFLAGS (O_Q0 + 36)
#define O_QLAST (O_Q0 + 40)
#define O_QUSED (O_Q0 + 44)
#define STATE_LEN (O_Q0 + 52)

static struct vm vm;
static struct hv_config cfg;
static struct hv_plan plan;
static const struct hv_device *blkdev;
static struct virtio_dev *v;
static struct snap_buf saved;
static char disk[] = "/tmp/unit-virtio-snap.XXXXXX";

static void reg(unsigned off, uint64_t val, unsigned len)
{
	vd_reg(v, off, val, len);
}

/* One read request of sector 0 at the ring's next slot. */
static void request(uint16_t n)
{
	uint8_t *m = vm.mem.host;
	struct vring_desc d[3] = {
		{ BUF, 16, VRING_DESC_F_NEXT, 1 },
		{ BUF + 512, 512, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2 },
		{ BUF + 16, 1, VRING_DESC_F_WRITE, 0 },
	};
	uint16_t *avail = (uint16_t *)(m + AVAIL);

	memset(m + BUF, 0, 16);
	memcpy(m + DESC, d, sizeof(d));
	avail[2 + n % QS] = 0;
	avail[1] = (uint16_t)(n + 1);
	reg(VIRTIO_BAR_NOTIFY, 0, 2);
	evloop_run_all(&vm);
}

static uint16_t used_idx(void)
{
	return ((uint16_t *)(vm.mem.host + USED))[1];
}

static int setup(void **state)
{
	struct verr err;
	static char blk[64];
	char *argv[] = { "unit", "--kernel", "/dev/null", "--vcpus", "1", "--mem", "16M", "--no-prefault",
			 "--serial", "none", "--blk", blk, NULL };
	int fd = mkstemp(disk);

	(void)state;
	vlog_init("unit-hv-virtio-snap");
	vlog_set_level(VLOG_ERR);
	if (fd < 0 || ftruncate(fd, 64 * 512) < 0)
		return -1;
	close(fd);
	snprintf(blk, sizeof(blk), "path=%s", disk);
	if (vm_nokvm_init(&vm, &cfg, &plan, 12, argv, true, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	blkdev = vd_device("virtio_blk");
	v = vd_function(&vm, "vblk0");
	if (!blkdev || !v)
		return -1;
	/* Queue 0 on vector 1. */
	vd_driver_up(&vm, v, 1, QS, 1);
	for (uint16_t n = 0; n < 3; n++)
		request(n);
	if (used_idx() != 3 || !v->running)
		return -1;
	return blkdev->save(&vm, &saved, &err);
}

static int teardown(void **state)
{
	(void)state;
	sb_free(&saved);
	unlink(disk);
	return 0;
}

static int load(const struct snap_buf *b, struct verr *err)
{
	return vd_load(blkdev, &vm, b, err);
}

static void test_round_trip(void **state)
{
	struct snap_buf again = { 0 };
	struct verr err;
	uint32_t last;

	(void)state;
	assert_int_equal(saved.len, STATE_LEN);
	memcpy(&last, saved.p + O_QLAST, 4);
	assert_int_equal(last, 3);
	assert_int_equal(load(&saved, &err), 0);
	assert_int_equal(blkdev->save(&vm, &again, &err), 0);
	assert_memory_equal(again.p, saved.p, saved.len);
	sb_free(&again);
	/* The loaded queue serves the next request from its index on. */
	request(3);
	assert_int_equal(used_idx(), 4);
	assert_int_equal(v->vq[0].last_avail, 4);
	assert_int_equal(load(&saved, &err), 0);
	assert_int_equal(v->vq[0].last_avail, 3);
}

/* Each patch to a copy of the saved state must be refused with msg. */
static void refused(size_t off, const void *val, size_t n, const char *msg)
{
	vd_refused(blkdev, &vm, &saved, off, val, n, msg);
}

static void test_hostile(void **state)
{
	struct verr err;
	uint64_t far = 0xfff00000000ull, sectors = 128;
	uint32_t three = 3, vec = 99, big = 70000, ok_st = 0x0f, drv_ok = 0x07, zero = 0, two = 2;

	(void)state;
	assert_int_equal(load(&saved, &err), 0);
	refused(O_QDESC, &far, 8, "outside guest RAM");
	refused(O_QSIZE, &three, 4, "size 3");
	refused(O_QVEC, &vec, 4, "MSI-X vector 99 outside the table");
	refused(O_QLAST, &big, 4, "above 65535");
	refused(O_QLAST, &(uint32_t){ 3 + QS + 1 }, 4, "9 chains in flight");
	refused(O_STATUS, &drv_ok, 4, "status 0x7");
	refused(O_STATUS, &(uint32_t){ 0x40 | ok_st }, 4, "status 0x4f");
	refused(O_FLAGS, &zero, 4, "the device is not");
	refused(O_QFLAGS, &two, 4, "indexes on a queue that is not running");
	refused(O_Q0 + 8, &zero, 4, "running, but not enabled");
	refused(O_NQ, &two, 4, "2 queues, this device has 1");
	refused(O_SECTORS, &sectors, 8, "the snapshot's disk has 128 sectors, this one 64");
	refused(STATE_LEN - 2, NULL, 4, "cut short");
	{
		struct snap_buf b = { 0 };

		sb_put(&b, saved.p, saved.len);
		sb_u32(&b, 0);
		assert_int_equal(load(&b, &err), -1);
		assert_non_null(strstr(err.msg, "4 bytes after the last disk's state"));
		sb_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_hostile),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
