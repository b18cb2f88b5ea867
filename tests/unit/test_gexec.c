/* The node agent connects to guest agents through sockets in directories
 * the guests can write; a symlink planted there must not redirect it.  And
 * a guest is hostile even with the job key: a length it reports is no
 * reason for vhpcd to allocate that much. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/gexec.h"

static void planted_symlink_is_not_followed(void **state)
{
	char dir[64], real[128], link[128];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint8_t key[CHAN_KEY_LEN] = { 1 };
	struct chan c;
	struct verr err;
	int l;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "gexec"), 0);
	snprintf(real, sizeof(real), "%s/host.sock", dir);
	snprintf(link, sizeof(link), "%s/ctl.sock", dir);
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", real);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 4), 0);
	assert_int_equal(symlink(real, link), 0);
	assert_int_equal(gexec_connect_unix(&c, link, key, 500, &err), -1);
	assert_non_null(strstr(err.msg, "not a socket"));
	/* Nothing reached the host socket. */
	assert_int_equal(wait_readable(l, 50), 1);
	/* The real socket is connectable (the handshake then times out). */
	assert_int_equal(gexec_connect_unix(&c, real, key, 300, &err), -1);
	assert_int_equal(wait_readable(l, 50), 0);
	unlink(link);
	unlink(real);
	close(l);
	fx_rmdir(dir);
}

/* A guest whose agent starts listening only after the first connect
 * (a job network coming up) is reached: refused at first, then tried
 * again until the timeout.  Once, a refused connect ended the job. */
static void refused_guest_is_tried_again_until_the_timeout(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	uint8_t key[CHAN_KEY_LEN] = { 1 };
	uint64_t t0;
	struct chan c;
	struct verr err;
	int s, st;
	pid_t pid;

	(void)state;
	s = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	close(s);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int one = 1, a;

		usleep(500 * 1000);
		s = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 4) < 0 || wait_readable(s, 3000) != 0)
			_exit(1);
		a = accept(s, NULL, NULL);
		usleep(1500 * 1000);
		_exit(a >= 0 ? 0 : 1);
	}
	/* The agent never answers the handshake, so this still fails, but
	 * only after it connected. */
	assert_int_equal(gexec_connect_tcp(&c, "127.0.0.1", ntohs(sa.sin_port), key, 1500, &err), -1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* Nothing listens: refused for the whole timeout, then the error. */
	t0 = now_ns();
	assert_int_equal(gexec_connect_tcp(&c, "127.0.0.1", ntohs(sa.sin_port), key, 600, &err), -1);
	assert_true(now_ns() - t0 >= 300 * 1000000ull);
	assert_non_null(strstr(err.msg, "Connection refused"));
}

/* A guest that holds the key (the fake one here) answers the first request
 * with a frame announcing len bytes of type; whole (sent with a valid MAC)
 * or only its length word. */
static pid_t fake_guest(int fd, int other, const uint8_t *key, uint8_t type, size_t len, bool whole)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct chan c;
		struct verr err;
		uint8_t t, hdr[5];
		char *buf;
		size_t n;
		uint32_t nl = htonl((uint32_t)len);

		close(other);
		if (chan_server(&c, fd, key, 2000, &err) < 0 || chan_recv(&c, &t, &buf, &n, 2000, &err) < 0)
			_exit(2);
		free(buf);
		if (whole) {
			/* A JSON reply that is all padding: {"ok":true,"pad":"xxx..."} */
			char *big = malloc(len + 1);

			memset(big, 'x', len);
			memcpy(big, "{\"ok\":true,\"v\":1,\"pad\":\"", 24);
			memcpy(big + len - 2, "\"}", 2);
			big[len] = 0;
			chan_send(&c, type, big, len, &err);
		} else {
			memcpy(hdr, &nl, 4);
			hdr[4] = type;
			if (write(fd, hdr, 5) != 5)
				_exit(3);
		}
		/* Held open until the client gives up. */
		while (read(fd, hdr, 1) > 0)
			;
		_exit(0);
	}
	return pid;
}

static void connect_fake(struct chan *c, int sv[2], const uint8_t *key, uint8_t type, size_t len, bool whole,
			 pid_t *pid)
{
	struct verr err;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	*pid = fake_guest(sv[1], sv[0], key, type, len, whole);
	close(sv[1]);
	assert_int_equal(chan_client(c, sv[0], key, 2000, &err), 0);
}

static void huge_frame_from_a_guest_is_refused_unread(void **state)
{
	uint8_t key[CHAN_KEY_LEN] = { 7 };
	struct chan c;
	struct verr err;
	char *info = NULL, out[1024];
	uint64_t t0;
	size_t n;
	long long size;
	int sv[2], st;
	pid_t pid;

	(void)state;
	/* 1 MiB announced, never sent: refused at once, not after reading
	 * (or waiting for) it. */
	connect_fake(&c, sv, key, CHAN_JSON, 1u << 20, false, &pid);
	t0 = now_ns();
	assert_int_equal(gexec_hello(&c, &info, 5000, &err), -1);
	assert_true(now_ns() - t0 < 1000000000ull);
	assert_non_null(strstr(err.msg, "frame of 1048576 bytes exceeds the 65536-byte limit"));
	chan_close(&c);
	waitpid(pid, &st, 0);
	/* A whole 900 KiB reply, MAC and all: refused as well. */
	connect_fake(&c, sv, key, CHAN_JSON, 900u << 10, true, &pid);
	assert_int_equal(gexec_hello(&c, &info, 5000, &err), -1);
	assert_null(info);
	assert_non_null(strstr(err.msg, "exceeds the 65536-byte limit"));
	chan_close(&c);
	waitpid(pid, &st, 0);
	/* Output: no more than what was asked for, in base64, plus its fields. */
	connect_fake(&c, sv, key, CHAN_JSON, 1u << 20, false, &pid);
	assert_int_equal(gexec_output(&c, "job", 0, sizeof(out), out, &n, &size, &err), -1);
	assert_non_null(strstr(err.msg, "frame of 1048576 bytes exceeds the 5465-byte limit"));
	chan_close(&c);
	waitpid(pid, &st, 0);
	/* A command's output frame: 64 KiB at most, as guestd sends them. */
	{
		const char *argv[] = { "true", NULL };
		struct gexec_req r = { .argv = argv, .out_fd = -1, .err_fd = -1 };
		int status;

		connect_fake(&c, sv, key, CHAN_STDOUT, 1u << 20, false, &pid);
		assert_int_equal(gexec_run(&c, &r, &status, &err), -1);
		assert_non_null(strstr(err.msg, "frame of 1048576 bytes exceeds the 65536-byte limit"));
		chan_close(&c);
		waitpid(pid, &st, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(planted_symlink_is_not_followed),
		cmocka_unit_test(refused_guest_is_tried_again_until_the_timeout),
		cmocka_unit_test(huge_frame_from_a_guest_is_refused_unread),
	};
	return cmocka_run_group_tests_name("gexec", tests, NULL, NULL);
}
