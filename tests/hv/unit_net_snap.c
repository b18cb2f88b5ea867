/* Unit tests of virtio-net's snapshot state (hv/dev_virtio_net.c), its
 * userspace data path, on a VM without KVM: the NIC's "tap" is one end of
 * a SOCK_SEQPACKET pair (a frame per packet, as a tap gives).  A driver
 * set up through the registers sends and receives frames; the device is
 * saved, goes on, and is loaded back: it serves the rings from the
 * snapshot's indexes again, both ways, on the new "tap" the command line
 * holds.  A hostile state (another MAC, other configuration, queue pairs
 * in use beyond the device's, bytes cut or added) is refused naming what
 * is wrong, with the device left as it was.  (vhost-net's half, the
 * kernel's ring bases, needs /dev/vhost-net and a tap: tests/hv's lab
 * tests.) */
#include "lib/err.h"
#include "lib/log.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/hv/virtio_drive.h"

#define QS 8
#define RXBUF 0x40000ull
#define TXBUF 0x60000ull
#define HDR 12
#define FRAME 60

/* Offsets in the saved state: config space, pairs, pairs in use. */
#define O_MAC 0
#define O_MTU 10
#define O_PAIRS 12
#define O_ACTIVE 16

static struct vm vm;
static struct hv_config cfg;
static struct hv_plan plan;
static const struct hv_device *netdev;
static struct virtio_dev *v;
static struct snap_buf saved;
static int peer = -1;
static uint16_t rx_posted, tx_next;

static uint8_t *gpa(uint64_t a)
{
	return vm.mem.host + a;
}

static uint16_t used_idx(int q)
{
	return ((uint16_t *)gpa(VD_RING(q) + 0x2000))[1];
}

static void post_rx(uint16_t upto)
{
	struct vring_desc *d = (struct vring_desc *)gpa(VD_RING(0));
	uint16_t *avail = (uint16_t *)gpa(VD_RING(0) + 0x1000);

	for (; rx_posted != upto; rx_posted++) {
		uint16_t i = rx_posted % QS;

		d[i] = (struct vring_desc){ RXBUF + i * 0x1000ull, 0x1000, VRING_DESC_F_WRITE, 0 };
		avail[2 + i] = i;
	}
	avail[1] = upto;
	vd_kick(&vm, v, 0);
}

/* Frame number k from the guest: header then FRAME bytes of k. */
static void tx_frame(uint8_t k)
{
	struct vring_desc *d = (struct vring_desc *)gpa(VD_RING(1));
	uint16_t *avail = (uint16_t *)gpa(VD_RING(1) + 0x1000);
	uint16_t i = tx_next % QS;
	uint8_t *b = gpa(TXBUF + i * 0x1000ull);

	memset(b, 0, HDR);
	memset(b + HDR, k, FRAME);
	d[i] = (struct vring_desc){ TXBUF + i * 0x1000ull, HDR + FRAME, 0, 0 };
	avail[2 + i] = i;
	avail[1] = ++tx_next;
	vd_kick(&vm, v, 1);
}

static void peer_expect(uint8_t k)
{
	uint8_t buf[256];
	ssize_t n = recv(peer, buf, sizeof(buf), MSG_DONTWAIT);

	assert_int_equal(n, HDR + FRAME);
	assert_int_equal(buf[HDR], k);
	assert_int_equal(buf[HDR + FRAME - 1], k);
}

static void peer_send(uint8_t k)
{
	uint8_t buf[HDR + FRAME];

	memset(buf, 0, HDR);
	memset(buf + HDR, k, FRAME);
	assert_int_equal(send(peer, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	evloop_run_all(&vm);
	evloop_run_all(&vm);
}

/* The frame in rx used entry n. */
static uint8_t rx_got(uint16_t n)
{
	uint32_t id;

	memcpy(&id, gpa(VD_RING(0) + 0x2000 + 4 + 8 * (n % QS)), 4);
	return *gpa(RXBUF + id * 0x1000ull + HDR);
}

static int setup(void **state)
{
	struct verr err;
	static char opt[96];
	char *argv[] = { "unit", "--kernel", "/dev/null", "--vcpus", "1", "--mem", "16M", "--no-prefault",
			 "--serial", "none", "--net", opt, NULL };
	int sp[2];

	(void)state;
	vlog_init("unit-hv-net-snap");
	vlog_set_level(VLOG_ERR);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	peer = sp[1];
	snprintf(opt, sizeof(opt), "fd=%d,mac=52:54:00:00:00:07,mtu=1500", sp[0]);
	if (vm_nokvm_init(&vm, &cfg, &plan, 12, argv, true, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	close(sp[0]);                  /* the device has its own copy */
	netdev = vd_device("virtio_net");
	v = vd_function(&vm, "vnet0");
	if (!netdev || !v)
		return -1;
	vd_driver_up(&vm, v, (unsigned)v->nq, QS, VIRTIO_NO_VECTOR);
	post_rx(QS);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sb_free(&saved);
	if (peer >= 0)
		close(peer);
	return 0;
}

static int load(const struct snap_buf *b, struct verr *err)
{
	return vd_load(netdev, &vm, b, err);
}

static void test_round_trip(void **state)
{
	struct verr err;

	(void)state;
	assert_non_null(netdev->save);
	tx_frame(1);
	peer_expect(1);
	peer_send(2);
	assert_int_equal(used_idx(0), 1);
	assert_int_equal(rx_got(0), 2);
	assert_int_equal(netdev->save(&vm, &saved, &err), 0);
	assert_memory_equal(saved.p + O_MAC, "\x52\x54\x00\x00\x00\x07", 6);

	/* The guest goes on after the save... */
	tx_frame(3);
	peer_expect(3);
	peer_send(4);
	assert_int_equal(used_idx(0), 2);
	assert_int_equal(v->vq[1].last_avail, 2);

	/* ...and is restored to it: RAM as the snapshot had it (the rings'
	 * indexes), the device's indexes from the snapshot. */
	tx_next = 1;
	((uint16_t *)gpa(VD_RING(1) + 0x1000))[1] = 1;
	((uint16_t *)gpa(VD_RING(1) + 0x2000))[1] = 1;
	((uint16_t *)gpa(VD_RING(0) + 0x2000))[1] = 1;
	assert_int_equal(load(&saved, &err), 0);
	evloop_run_all(&vm);
	assert_int_equal(v->vq[1].last_avail, 1);
	assert_int_equal(v->vq[0].last_avail, 1);
	/* Frames both ways go on from there. */
	tx_frame(5);
	peer_expect(5);
	assert_int_equal(used_idx(1), 2);
	peer_send(6);
	assert_int_equal(used_idx(0), 2);
	assert_int_equal(rx_got(1), 6);
	assert_int_equal(recv(peer, (char[8]){ 0 }, 8, MSG_DONTWAIT), -1);   /* nothing else sent */
}

/* Each patch to a copy of the saved state must be refused with msg. */
static void refused(size_t off, const void *val, size_t n, const char *msg)
{
	vd_refused(netdev, &vm, &saved, off, val, n, msg);
}

static void test_hostile(void **state)
{
	struct verr err;
	uint8_t mac = 0x08;
	uint16_t mtu = 9000;

	(void)state;
	refused(O_MAC + 5, &mac, 1, "the snapshot's MAC is 52:54:00:00:00:08, this one's 52:54:00:00:00:07");
	refused(O_MTU, &mtu, 2, "configuration (status, queue pairs, MTU) is not this device's");
	refused(O_PAIRS, &(uint32_t){ 2 }, 4, "1 of 2 queue pairs in use, this device has 1");
	refused(O_ACTIVE, &(uint32_t){ 3 }, 4, "3 of 1 queue pairs");
	refused(O_ACTIVE, &(uint32_t){ 2 }, 4, "2 of 1 queue pairs");
	refused(O_ACTIVE + 2, NULL, 0, "cut short");
	refused(saved.len - 3, NULL, 0, "cut short");
	{
		struct snap_buf b = { 0 };

		sb_put(&b, saved.p, saved.len);
		sb_u32(&b, 0);
		assert_int_equal(load(&b, &err), -1);
		assert_non_null(strstr(err.msg, "4 bytes after the last NIC's state"));
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
