/* The vhost-user front-end codec and transport (hv/vhost_user.c): the
 * byte layout of every request, the reply checks, and the socket side
 * against a peer end of a socketpair that plays the back-end: acks and
 * refusals, descriptors passed in order, a back-end that closes, stops
 * half-way, never answers, stops reading, or sends descriptors with a
 * reply.  SIGPIPE keeps its default action here, so a send without
 * MSG_NOSIGNAL to a closed peer would kill the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "hv/vhost_user.h"

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* The back-end's end: raw bytes in, raw bytes out. */
static void peer_write(int fd, uint32_t req, uint32_t flags, uint32_t size, uint64_t val, size_t len)
{
	uint8_t m[20];

	memcpy(m, &req, 4);
	memcpy(m + 4, &flags, 4);
	memcpy(m + 8, &size, 4);
	memcpy(m + 12, &val, 8);
	assert_int_equal(write(fd, m, len), (ssize_t)len);
}

/* Reads one whole request from the back-end's end; returns its fds. */
static size_t peer_read(int fd, uint8_t *buf, size_t cap, int *fds, int *nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = { buf, cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	ssize_t r = recvmsg(fd, &mh, MSG_DONTWAIT);

	*nfds = 0;
	if (r < 0)
		return 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
				memcpy(&fds[(*nfds)++], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
	return (size_t)r;
}

static int lowest_free_fd(void)
{
	int fd = dup(0);

	close(fd);
	return fd;
}

static void pair(struct vhu_conn *c, int *peer, int timeout_ms)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	vhu_attach(c, sv[0], timeout_ms);
	*peer = sv[1];
}

/* ----------------------------------------------------------- layouts */

static void mem_table_layout(void **state)
{
	struct vhu_region r[2] = {
		{ .gpa = 0, .size = 0xc0000000ull, .uaddr = 0x7f0000000000ull, .mmap_offset = 0, .fd = 11 },
		{ .gpa = 0x100000000ull, .size = 0x20000000ull, .uaddr = 0x7f00c0000000ull,
		  .mmap_offset = 0xc0000000ull, .fd = 12 },
	};
	struct vhu_msg m;
	uint8_t b[400];
	size_t n;

	(void)state;
	assert_int_equal(vhu_msg_mem_table(&m, r, 2), 0);
	n = vhu_encode(&m, b, sizeof(b));
	assert_int_equal(n, 12 + 8 + 64);
	assert_int_equal(rd32(b), 5);
	assert_int_equal(rd32(b + 4), 1);             /* version 1, no flags */
	assert_int_equal(rd32(b + 8), 72);
	assert_int_equal(rd32(b + 12), 2);            /* regions */
	assert_int_equal(rd32(b + 16), 0);            /* padding */
	assert_int_equal(rd64(b + 20), 0);
	assert_int_equal(rd64(b + 28), 0xc0000000ull);
	assert_int_equal(rd64(b + 36), 0x7f0000000000ull);
	assert_int_equal(rd64(b + 44), 0);
	assert_int_equal(rd64(b + 52), 0x100000000ull);
	assert_int_equal(rd64(b + 60), 0x20000000ull);
	assert_int_equal(rd64(b + 68), 0x7f00c0000000ull);
	assert_int_equal(rd64(b + 76), 0xc0000000ull);
	assert_int_equal(m.nfds, 2);
	assert_int_equal(m.fds[0], 11);
	assert_int_equal(m.fds[1], 12);
	assert_int_equal(vhu_msg_mem_table(&m, r, 0), -1);
	assert_int_equal(vhu_msg_mem_table(&m, r, VHU_MAX_REGIONS + 1), -1);
	assert_int_equal(vhu_encode(&m, b, 11), 0);   /* no room for a header */
}

static void ring_layouts(void **state)
{
	struct vhu_msg m;
	uint8_t b[100];

	(void)state;
	/* The address message has used before available. */
	vhu_msg_addr(&m, 1, 0x1000, 0x3000, 0x2000);
	assert_int_equal(vhu_encode(&m, b, sizeof(b)), 12 + 40);
	assert_int_equal(rd32(b), VHU_SET_VRING_ADDR);
	assert_int_equal(rd32(b + 8), 40);
	assert_int_equal(rd32(b + 12), 1);
	assert_int_equal(rd32(b + 16), 0);
	assert_int_equal(rd64(b + 20), 0x1000);
	assert_int_equal(rd64(b + 28), 0x3000);
	assert_int_equal(rd64(b + 36), 0x2000);
	assert_int_equal(rd64(b + 44), 0);
	vhu_msg_state(&m, VHU_SET_VRING_NUM, 3, 256);
	assert_int_equal(vhu_encode(&m, b, sizeof(b)), 20);
	assert_int_equal(rd32(b + 12), 3);
	assert_int_equal(rd32(b + 16), 256);
	vhu_msg_vring_fd(&m, VHU_SET_VRING_KICK, 2, 7);
	assert_int_equal(rd64(m.payload), 2);
	assert_int_equal(m.nfds, 1);
	assert_int_equal(m.fds[0], 7);
	vhu_msg_vring_fd(&m, VHU_SET_VRING_CALL, 5, -1);
	assert_int_equal(rd64(m.payload), 5 | VHU_VRING_NOFD);
	assert_int_equal(m.nfds, 0);
	vhu_msg_plain(&m, VHU_SET_OWNER);
	assert_int_equal(vhu_encode(&m, b, sizeof(b)), 12);
	assert_int_equal(rd32(b + 8), 0);
}

static void reply_checks(void **state)
{
	uint8_t h[12];
	char why[160];
	uint32_t f;

	(void)state;
#define HDR(r, fl, s) (memcpy(h, &(uint32_t){ r }, 4), memcpy(h + 4, &(uint32_t){ fl }, 4), memcpy(h + 8, &(uint32_t){ s }, 4))
	HDR(1, 5, 8);
	assert_int_equal(vhu_check_reply(h, 1, why, sizeof(why)), 0);
	HDR(2, 5, 8);
	assert_int_equal(vhu_check_reply(h, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "answered request 2 (SET_FEATURES)"));
	for (f = 0; f < 4; f++) {
		HDR(1, 4 | f, 8);
		assert_int_equal(vhu_check_reply(h, 1, why, sizeof(why)), f == 1 ? 0 : -1);
	}
	HDR(1, 1, 8);
	assert_int_equal(vhu_check_reply(h, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "sent a request"));
	HDR(1, 5, 0);
	assert_int_equal(vhu_check_reply(h, 1, why, sizeof(why)), -1);
	HDR(1, 5, 9);
	assert_int_equal(vhu_check_reply(h, 1, why, sizeof(why)), -1);
	HDR(1, 5, 0xffffffffu);
	assert_int_equal(vhu_check_reply(h, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "4294967295 bytes"));
#undef HDR
	assert_true(vhu_has_reply(VHU_GET_VRING_BASE));
	assert_false(vhu_has_reply(VHU_SET_VRING_BASE));
}

/* --------------------------------------------------------- transport */

static void get_without_acks(void **state)
{
	struct vhu_conn c;
	uint8_t b[64];
	int peer, fds[8], nfds;
	uint64_t v = 0;

	(void)state;
	pair(&c, &peer, 1000);
	peer_write(peer, VHU_GET_FEATURES, 5, 8, 0x140000000ull, 20);
	assert_int_equal(vhu_get_u64(&c, VHU_GET_FEATURES, &v), 0);
	assert_int_equal(v, 0x140000000ull);
	assert_int_equal(peer_read(peer, b, sizeof(b), fds, &nfds), 12);
	assert_int_equal(rd32(b), VHU_GET_FEATURES);
	assert_int_equal(rd32(b + 4), 1);             /* a GET never asks for an ack */
	/* No REPLY_ACK: a SET is not answered and not waited for. */
	assert_int_equal(vhu_set_u64(&c, VHU_SET_FEATURES, 0x100000000ull), 0);
	assert_int_equal(peer_read(peer, b, sizeof(b), fds, &nfds), 20);
	assert_int_equal(rd32(b + 4), 1);
	assert_int_equal(rd64(b + 12), 0x100000000ull);
	vhu_close(&c);
	close(peer);
}

static void acks_and_refusal(void **state)
{
	struct vhu_conn c;
	uint8_t b[64];
	int peer, fds[8], nfds;

	(void)state;
	pair(&c, &peer, 1000);
	c.protocol = 1ull << VHU_PF_REPLY_ACK;
	peer_write(peer, VHU_SET_OWNER, 5, 8, 0, 20);
	assert_int_equal(vhu_set_state(&c, VHU_SET_OWNER, 0, 0), 0);
	assert_int_equal(peer_read(peer, b, sizeof(b), fds, &nfds), 20);
	assert_int_equal(rd32(b + 4), 1 | VHU_FLAG_NEED_REPLY);
	peer_write(peer, VHU_SET_FEATURES, 5, 8, 1, 20);
	assert_int_equal(vhu_set_u64(&c, VHU_SET_FEATURES, 1), -1);
	assert_string_equal(c.err, "SET_FEATURES: the back-end refused it (status 1)");
	assert_true(c.broken);
	assert_int_equal(peer_read(peer, b, sizeof(b), fds, &nfds), 20);
	/* Broken for good: nothing more is sent. */
	assert_int_equal(vhu_set_u64(&c, VHU_SET_FEATURES, 1), -1);
	assert_int_equal(peer_read(peer, b, sizeof(b), fds, &nfds), 0);
	assert_string_equal(c.err, "SET_FEATURES: the back-end refused it (status 1)");
	vhu_close(&c);
	close(peer);
}

static void fds_go_in_region_order(void **state)
{
	struct vhu_conn c;
	struct vhu_region r[2];
	struct vhu_msg m;
	uint8_t b[400];
	int peer, fds[8], nfds, a = memfd_create("a", 0), z = memfd_create("z", 0);
	struct stat st;

	(void)state;
	assert_true(a >= 0 && z >= 0);
	assert_int_equal(ftruncate(a, 4096), 0);
	assert_int_equal(ftruncate(z, 8192), 0);
	r[0] = (struct vhu_region){ .gpa = 0, .size = 4096, .uaddr = 1, .fd = a };
	r[1] = (struct vhu_region){ .gpa = 1 << 20, .size = 8192, .uaddr = 2, .fd = z };
	pair(&c, &peer, 1000);
	assert_int_equal(vhu_msg_mem_table(&m, r, 2), 0);
	assert_int_equal(vhu_call(&c, &m, NULL), 0);
	assert_int_equal(peer_read(peer, b, sizeof(b), fds, &nfds), 12 + 72);
	assert_int_equal(nfds, 2);
	assert_int_equal(fstat(fds[0], &st), 0);
	assert_int_equal(st.st_size, 4096);
	assert_int_equal(fstat(fds[1], &st), 0);
	assert_int_equal(st.st_size, 8192);
	close(fds[0]);
	close(fds[1]);
	close(a);
	close(z);
	vhu_close(&c);
	close(peer);
}

static void backend_closes(void **state)
{
	struct vhu_conn c;
	int peer;
	uint64_t v;

	(void)state;
	pair(&c, &peer, 1000);
	close(peer);
	assert_int_equal(vhu_get_u64(&c, VHU_GET_FEATURES, &v), -1);
	assert_non_null(strstr(c.err, "closed the connection"));
	vhu_close(&c);

	/* Sending to a closed peer: EPIPE, no SIGPIPE. */
	pair(&c, &peer, 1000);
	close(peer);
	assert_int_equal(vhu_set_u64(&c, VHU_SET_FEATURES, 0), -1);
	assert_string_equal(c.err, "SET_FEATURES: the back-end closed the connection");
	vhu_close(&c);

	/* Half a reply, then the end of the stream (the request itself
	 * still goes out: only the peer's sending side is shut). */
	pair(&c, &peer, 1000);
	peer_write(peer, VHU_GET_FEATURES, 5, 8, 0, 5);
	shutdown(peer, SHUT_WR);
	assert_int_equal(vhu_get_u64(&c, VHU_GET_FEATURES, &v), -1);
	assert_string_equal(c.err, "GET_FEATURES: the back-end closed the connection in the middle of its reply (5 of 20 bytes)");
	vhu_close(&c);
	close(peer);

	/* The header complete, the payload not. */
	pair(&c, &peer, 1000);
	peer_write(peer, VHU_GET_FEATURES, 5, 8, 0, 15);
	shutdown(peer, SHUT_WR);
	assert_int_equal(vhu_get_u64(&c, VHU_GET_FEATURES, &v), -1);
	assert_string_equal(c.err, "GET_FEATURES: the back-end closed the connection in the middle of its reply (15 of 20 bytes)");
	vhu_close(&c);
	close(peer);

	/* Nothing at all, then the end of the stream. */
	pair(&c, &peer, 1000);
	shutdown(peer, SHUT_WR);
	assert_int_equal(vhu_get_u64(&c, VHU_GET_FEATURES, &v), -1);
	assert_string_equal(c.err, "GET_FEATURES: the back-end closed the connection");
	vhu_close(&c);
	close(peer);
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void backend_silent_or_slow(void **state)
{
	struct vhu_conn c;
	struct timespec t0;
	int peer;
	uint64_t v;
	long ms;

	(void)state;
	pair(&c, &peer, 100);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(vhu_get_u64(&c, VHU_GET_FEATURES, &v), -1);
	ms = ms_since(&t0);
	assert_string_equal(c.err, "GET_FEATURES: no reply within 100 ms");
	assert_true(ms >= 95 && ms < 2000);
	vhu_close(&c);
	close(peer);

	pair(&c, &peer, 100);
	peer_write(peer, VHU_GET_QUEUE_NUM, 5, 8, 0, 15);
	assert_int_equal(vhu_get_u64(&c, VHU_GET_QUEUE_NUM, &v), -1);
	assert_string_equal(c.err, "GET_QUEUE_NUM: reply cut short (15 of 20 bytes within 100 ms)");
	vhu_close(&c);
	close(peer);

	/* A back-end that stops reading: the socket fills, the send times
	 * out instead of blocking. */
	pair(&c, &peer, 100);
	{
		int sz = 4096;
		char junk[4096] = { 0 };

		setsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		while (send(c.fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
			;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(vhu_set_u64(&c, VHU_SET_FEATURES, 0), -1);
	assert_true(ms_since(&t0) >= 95);
	assert_non_null(strstr(c.err, "SET_FEATURES: the back-end stopped reading"));
	vhu_close(&c);
	close(peer);
}

static void stray_fds_are_closed(void **state)
{
	struct vhu_conn c;
	int peer, before, extra = memfd_create("stray", 0);
	uint64_t v = 0;
	uint8_t m[20];
	char ctl[CMSG_SPACE(sizeof(int) * 2)];
	struct iovec iov = { m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *h;
	int two[2];

	(void)state;
	pair(&c, &peer, 1000);
	two[0] = extra;
	two[1] = extra;
	memcpy(m, &(uint32_t){ VHU_GET_FEATURES }, 4);
	memcpy(m + 4, &(uint32_t){ 5 }, 4);
	memcpy(m + 8, &(uint32_t){ 8 }, 4);
	memcpy(m + 12, &(uint64_t){ 42 }, 8);
	memset(ctl, 0, sizeof(ctl));
	h = CMSG_FIRSTHDR(&mh);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(two));
	memcpy(CMSG_DATA(h), two, sizeof(two));
	assert_int_equal(sendmsg(peer, &mh, 0), 20);
	close(extra);
	before = lowest_free_fd();
	assert_int_equal(vhu_get_u64(&c, VHU_GET_FEATURES, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(c.stray_fds, 2);
	assert_int_equal(lowest_free_fd(), before);
	vhu_close(&c);
	close(peer);
}

static void vring_base_must_name_the_ring(void **state)
{
	struct vhu_conn c;
	int peer;
	uint32_t base = 0;

	(void)state;
	pair(&c, &peer, 1000);
	peer_write(peer, VHU_GET_VRING_BASE, 5, 8, 1 | 17ull << 32, 20);
	assert_int_equal(vhu_get_vring_base(&c, 1, &base), 0);
	assert_int_equal(base, 17);
	peer_write(peer, VHU_GET_VRING_BASE, 5, 8, 3, 20);
	assert_int_equal(vhu_get_vring_base(&c, 1, &base), -1);
	assert_string_equal(c.err, "GET_VRING_BASE: the reply names ring 3, not 1");
	vhu_close(&c);
	close(peer);
}

static void connect_paths_and_fds(void **state)
{
	struct vhu_conn c;
	char p[64], dir[64], path[128];
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int sv[2], lfd, file;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	snprintf(p, sizeof(p), "/dev/fd/%d", sv[0]);
	assert_int_equal(vhu_connect(&c, p, 100), 0);
	assert_true(c.fd >= 0 && c.fd != sv[0]);    /* a duplicate of its own */
	vhu_close(&c);
	close(sv[0]);
	close(sv[1]);

	assert_int_equal(vhu_connect(&c, "/dev/fd/999", 100), -1);
	assert_string_equal(c.err, "/dev/fd/999: Bad file descriptor");
	file = memfd_create("notasocket", 0);
	snprintf(p, sizeof(p), "/dev/fd/%d", file);
	assert_int_equal(vhu_connect(&c, p, 100), -1);
	assert_non_null(strstr(c.err, "is not a unix stream socket"));
	close(file);

	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "vhu-unit"), 0);
	snprintf(path, sizeof(path), "%s/l.sock", dir);
	memcpy(a.sun_path, path, strlen(path) + 1);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	snprintf(p, sizeof(p), "/dev/fd/%d", lfd);
	assert_int_equal(vhu_connect(&c, p, 100), -1);
	assert_non_null(strstr(c.err, "is a listening socket"));
	assert_int_equal(vhu_connect(&c, path, 100), 0);   /* by path: connects */
	vhu_close(&c);
	close(lfd);
	unlink(path);
	assert_int_equal(vhu_connect(&c, path, 100), -1);
	assert_non_null(strstr(c.err, "No such file or directory"));
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(p, sizeof(p), "/dev/fd/%d", lfd);
	assert_int_equal(vhu_connect(&c, p, 100), -1);
	assert_non_null(strstr(c.err, "is not connected"));
	close(lfd);
	fx_rmdir(dir);
	memset(path, 'x', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = 0;
	assert_int_equal(vhu_connect(&c, path, 100), -1);
	assert_non_null(strstr(c.err, "longer than"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mem_table_layout),
		cmocka_unit_test(ring_layouts),
		cmocka_unit_test(reply_checks),
		cmocka_unit_test(get_without_acks),
		cmocka_unit_test(acks_and_refusal),
		cmocka_unit_test(fds_go_in_region_order),
		cmocka_unit_test(backend_closes),
		cmocka_unit_test(backend_silent_or_slow),
		cmocka_unit_test(stray_fds_are_closed),
		cmocka_unit_test(vring_base_must_name_the_ring),
		cmocka_unit_test(connect_paths_and_fds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
