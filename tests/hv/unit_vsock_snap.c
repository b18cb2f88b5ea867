/* Unit tests of virtio-vsock's snapshot state (hv/dev_virtio_vsock.c) on a
 * VM without KVM.  A driver set up through the registers accepts a
 * connection from the host's unix socket and sends on it; the device is
 * saved and loaded back: the host end is closed, the guest gets a reset
 * for the connection on its receive queue, and the listener still takes
 * a new connection, whose host port follows the saved one.  A hostile
 * state (another CID, a state no connection has, more buffered bytes than
 * the credit given, a pair twice, too many connections or resets, a
 * host port below the range, bytes cut or added) is refused naming what
 * is wrong, with the device left as it was. */
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
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/hv/virtio_drive.h"

#define QS 8
#define RXBUF 0x40000ull
#define TXBUF 0x60000ull
#define HDR 44
#define CID 5
#define OP_REQUEST 1
#define OP_RESPONSE 2
#define OP_RST 3
#define OP_RW 5

/* Offsets in the saved state: CID, next port, connection count, the
 * first connection's fields (hv/dev_virtio_vsock.c's order). */
#define O_CID 0
#define O_NEXT 8
#define O_NCONN 12
#define O_C0 16
#define O_C0STATE (O_C0 + 8)
#define O_C0TXLEN (O_C0 + 28)
#define O_NRST (O_C0 + 32)

static struct vm vm;
static struct hv_config cfg;
static struct hv_plan plan;
static const struct hv_device *vsdev;
static struct virtio_dev *v;
static struct snap_buf saved;
static char dir[] = "/tmp/unit-vsock-snap.XXXXXX";
static char uds[128];
static uint16_t rx_seen, tx_next;
static int host1 = -1;
static uint32_t port1;

static uint8_t *gpa(uint64_t a)
{
	return vm.mem.host + a;
}

/* Receive buffers: one 4 KiB chain per slot, all posted. */
static void post_rx(uint16_t upto)
{
	struct vring_desc *d = (struct vring_desc *)gpa(VD_RING(0));
	uint16_t *avail = (uint16_t *)gpa(VD_RING(0) + 0x1000);

	for (uint16_t n = avail[1]; n != upto; n++) {
		uint16_t i = n % QS;

		d[i] = (struct vring_desc){ RXBUF + i * 0x1000ull, 0x1000, VRING_DESC_F_WRITE, 0 };
		avail[2 + i] = i;
	}
	avail[1] = upto;
	vd_kick(&vm, v, 0);
}

/* The next packet the device put on the receive queue, or false. */
static bool rx_next(uint8_t h[HDR])
{
	uint16_t *used = (uint16_t *)gpa(VD_RING(0) + 0x2000);
	uint32_t id;

	if (used[1] == rx_seen)
		return false;
	memcpy(&id, gpa(VD_RING(0) + 0x2000 + 4 + 8 * (rx_seen % QS)), 4);
	memcpy(h, gpa(RXBUF + id * 0x1000ull), HDR);
	rx_seen++;
	post_rx((uint16_t)(rx_seen + QS));
	return true;
}

static void put32(uint8_t *p, uint32_t x) { memcpy(p, &x, 4); }
static uint32_t get32(const uint8_t *p) { uint32_t x; memcpy(&x, p, 4); return x; }
static uint16_t get16(const uint8_t *p) { uint16_t x; memcpy(&x, p, 2); return x; }

/* One packet from the guest on the transmit queue. */
static void tx_send(uint32_t src, uint32_t dst, uint16_t op, const char *data)
{
	struct vring_desc *d = (struct vring_desc *)gpa(VD_RING(1));
	uint16_t *avail = (uint16_t *)gpa(VD_RING(1) + 0x1000);
	uint16_t i = tx_next % QS;
	uint8_t *h = gpa(TXBUF + i * 0x1000ull);
	uint32_t len = data ? (uint32_t)strlen(data) : 0;
	uint64_t cid = CID, host = 2;

	memset(h, 0, HDR);
	memcpy(h, &cid, 8);
	memcpy(h + 8, &host, 8);
	put32(h + 16, src);
	put32(h + 20, dst);
	put32(h + 24, len);
	h[28] = 1;                       /* stream */
	memcpy(h + 30, &op, 2);
	put32(h + 36, 65536);            /* buf_alloc */
	if (len)
		memcpy(h + HDR, data, len);
	d[i] = (struct vring_desc){ TXBUF + i * 0x1000ull, HDR + len, 0, 0 };
	avail[2 + i] = i;
	avail[1] = ++tx_next;
	vd_kick(&vm, v, 1);
}

/* A host-side client: connects, asks for guest port gport, and returns
 * the host port of the guest's REQUEST (the guest has not answered). */
static int host_connect(uint32_t gport, uint32_t *local)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char line[32];
	uint8_t h[HDR];

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", uds);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	snprintf(line, sizeof(line), "CONNECT %u\n", gport);
	assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	evloop_run_all(&vm);
	evloop_run_all(&vm);
	assert_true(rx_next(h));
	assert_int_equal(get16(h + 30), OP_REQUEST);
	assert_int_equal(get32(h + 20), gport);
	*local = get32(h + 16);
	return fd;
}

static void expect_line(int fd, const char *want)
{
	char buf[64] = { 0 };
	size_t n = strlen(want), got = 0;

	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);

		assert_true(r > 0);
		got += (size_t)r;
	}
	assert_string_equal(buf, want);
}

static int setup(void **state)
{
	struct verr err;
	static char opt[160];
	char *argv[] = { "unit", "--kernel", "/dev/null", "--vcpus", "1", "--mem", "16M", "--no-prefault",
			 "--serial", "none", "--vsock", opt, NULL };

	(void)state;
	vlog_init("unit-hv-vsock-snap");
	vlog_set_level(VLOG_ERR);
	if (!mkdtemp(dir))
		return -1;
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	snprintf(opt, sizeof(opt), "cid=%d,uds=%s", CID, uds);
	if (vm_nokvm_init(&vm, &cfg, &plan, 12, argv, true, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	vsdev = vd_device("virtio_vsock");
	v = vd_function(&vm, "vsock");
	if (!vsdev || !v)
		return -1;
	vd_driver_up(&vm, v, 3, QS, VIRTIO_NO_VECTOR);
	post_rx(QS);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sb_free(&saved);
	if (host1 >= 0)
		close(host1);
	unlink(uds);
	rmdir(dir);
	return 0;
}

static int load(const struct snap_buf *b, struct verr *err)
{
	return vd_load(vsdev, &vm, b, err);
}

/* An open connection saved and loaded: reset toward the guest, the host
 * end closed, the listener still there. */
static void test_round_trip(void **state)
{
	struct snap_buf again = { 0 };
	struct verr err;
	uint8_t h[HDR];
	uint32_t port2;
	char c;
	int host2;

	(void)state;
	assert_non_null(vsdev->save);
	host1 = host_connect(1234, &port1);
	tx_send(1234, port1, OP_RESPONSE, NULL);
	expect_line(host1, "OK ");
	tx_send(1234, port1, OP_RW, "hello");
	{
		char buf[64] = { 0 };
		ssize_t n;
		size_t got = 0;

		/* "<port>\nhello" */
		while (!strstr(buf, "hello") && (n = read(host1, buf + got, sizeof(buf) - 1 - got)) > 0)
			got += (size_t)n;
		assert_non_null(strstr(buf, "hello"));
	}
	evloop_run_all(&vm);
	/* The credit the guest regains for them. */
	assert_true(rx_next(h));
	assert_int_equal(get16(h + 30), 6);
	assert_false(rx_next(h));
	assert_int_equal(vsdev->save(&vm, &saved, &err), 0);
	assert_int_equal(get32(saved.p + O_NCONN), 1);
	assert_int_equal(get32(saved.p + O_C0), port1);
	assert_int_equal(get32(saved.p + O_C0 + 4), 1234);
	assert_int_equal(get32(saved.p + O_C0STATE), 2);
	assert_int_equal(get32(saved.p + O_C0 + 24), 5);   /* fwd_cnt: the 5 bytes forwarded */

	assert_int_equal(load(&saved, &err), 0);
	evloop_run_all(&vm);
	/* The guest hears its connection reset. */
	assert_true(rx_next(h));
	assert_int_equal(get16(h + 30), OP_RST);
	assert_int_equal(get32(h + 16), port1);
	assert_int_equal(get32(h + 20), 1234);
	assert_false(rx_next(h));
	/* This process's end of it is gone. */
	assert_int_equal(read(host1, &c, 1), 0);
	/* Data for the old connection now meets a reset too. */
	tx_send(1234, port1, OP_RW, "late");
	assert_true(rx_next(h));
	assert_int_equal(get16(h + 30), OP_RST);

	/* The listener takes a new connection, its port after the saved one. */
	host2 = host_connect(1235, &port2);
	assert_int_equal(port2, get32(saved.p + O_NEXT));
	tx_send(1235, port2, OP_RESPONSE, NULL);
	expect_line(host2, "OK ");
	assert_int_equal(write(host2, "x\n", 2), 2);
	{
		char buf[16];

		snprintf(buf, sizeof(buf), "%u\n", port2);
		expect_line(host2, buf);
	}
	evloop_run_all(&vm);
	evloop_run_all(&vm);
	assert_true(rx_next(h));
	assert_int_equal(get16(h + 30), OP_RW);
	assert_int_equal(get32(h + 24), 2);
	assert_memory_equal(gpa(RXBUF + ((rx_seen - 1) % QS) * 0x1000ull) + HDR, "x\n", 2);

	/* Saved again and loaded, the state is the same again. */
	assert_int_equal(load(&saved, &err), 0);
	evloop_run_all(&vm);
	while (rx_next(h))
		;
	assert_int_equal(vsdev->save(&vm, &again, &err), 0);
	assert_int_equal(get32(again.p + O_NCONN), 0);
	assert_int_equal(get32(again.p + O_NEXT), get32(saved.p + O_NEXT));
	sb_free(&again);
	close(host2);
}

/* Each patch to a copy of the saved state must be refused with msg. */
static void refused(size_t off, const void *val, size_t n, const char *msg)
{
	vd_refused(vsdev, &vm, &saved, off, val, n, msg);
}

static void test_hostile(void **state)
{
	struct verr err;
	uint64_t cid = 6;
	uint32_t seven = 7, big = (256u << 10) + 1, low = 5, many = 257, rsts = 600;

	(void)state;
	refused(O_CID, &cid, 8, "the snapshot's guest CID is 6, this one's 5");
	refused(O_NEXT, &low, 4, "next host port 5 below");
	refused(O_NCONN, &many, 4, "257 connections");
	refused(O_C0STATE, &seven, 4, "connection 0: state 7");
	refused(O_C0TXLEN, &big, 4, "262145 bytes buffered");
	refused(O_NRST, &rsts, 4, "600 resets owed");
	refused(saved.len - 2, NULL, 4, "cut short");
	refused(O_NRST - 2, NULL, 4, "cut short");
	{
		/* The same pair twice. */
		struct snap_buf b = { 0 };

		sb_put(&b, saved.p, O_C0);
		memcpy(b.p + O_NCONN, &(uint32_t){ 2 }, 4);
		sb_put(&b, saved.p + O_C0, 32);
		sb_put(&b, saved.p + O_C0, saved.len - O_C0);
		assert_int_equal(load(&b, &err), -1);
		assert_non_null(strstr(err.msg, "connections 0 and 1 are both host port"));
		b.len = 0;
		sb_put(&b, saved.p, saved.len);
		sb_u32(&b, 0);
		assert_int_equal(load(&b, &err), -1);
		assert_non_null(strstr(err.msg, "4 bytes after its state"));
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
