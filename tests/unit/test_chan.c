/* The authenticated channel: frames pass between holders of one key and
 * nothing else does (wrong key, tampering, replay, oversize, garbage). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"

static const uint8_t key_a[CHAN_KEY_LEN] = { 1, 2, 3 };
static const uint8_t key_b[CHAN_KEY_LEN] = { 9, 9, 9 };

/* Runs a client in a child that sends two frames with ckey. */
static pid_t client_child(int fd, const uint8_t *ckey)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct chan c;
		struct verr err;

		if (chan_client(&c, fd, ckey, 2000, &err) < 0)
			_exit(2);
		chan_send(&c, CHAN_JSON, "{\"op\":\"exec\"}", 13, &err);
		chan_send(&c, CHAN_STDOUT, "", 0, &err);
		_exit(0);
	}
	return pid;
}

static void frames_pass_with_the_same_key(void **state)
{
	int sv[2], st;
	struct chan s;
	struct verr err;
	uint8_t type;
	char *buf;
	size_t len;
	pid_t pid;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = client_child(sv[1], key_a);
	close(sv[1]);
	assert_int_equal(chan_server(&s, sv[0], key_a, 2000, &err), 0);
	assert_int_equal(chan_recv(&s, &type, &buf, &len, 2000, &err), 0);
	assert_int_equal(type, CHAN_JSON);
	assert_string_equal(buf, "{\"op\":\"exec\"}");
	free(buf);
	assert_int_equal(chan_recv(&s, &type, &buf, &len, 2000, &err), 0);
	assert_int_equal(type, CHAN_STDOUT);
	assert_int_equal(len, 0);
	free(buf);
	assert_int_equal(chan_recv(&s, &type, &buf, &len, 2000, &err), 1);
	chan_close(&s);
	waitpid(pid, &st, 0);
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void wrong_key_is_rejected(void **state)
{
	int sv[2], st;
	struct chan s;
	struct verr err;
	uint8_t type;
	char *buf;
	size_t len;
	pid_t pid;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = client_child(sv[1], key_b);
	close(sv[1]);
	assert_int_equal(chan_server(&s, sv[0], key_a, 2000, &err), 0);
	assert_int_equal(chan_recv(&s, &type, &buf, &len, 2000, &err), -1);
	assert_non_null(strstr(err.msg, "bad message authentication code"));
	chan_close(&s);
	waitpid(pid, &st, 0);
}

/* Records a client's bytes, then replays them into a new session. */
static void replayed_session_is_rejected(void **state)
{
	int sv[2], sv2[2], st;
	struct chan s;
	struct verr err;
	uint8_t type, rec[4096];
	char *buf;
	size_t len;
	ssize_t n;
	pid_t pid;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = client_child(sv[1], key_a);
	close(sv[1]);
	assert_int_equal(chan_server(&s, sv[0], key_a, 2000, &err), 0);
	waitpid(pid, &st, 0);
	n = read(sv[0], rec, sizeof(rec));
	assert_true(n > 0);
	chan_close(&s);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
	/* The replayer answers the handshake with the recorded client half. */
	assert_int_equal(write(sv2[1], "VHPCCH1\0" "\x11\x22\x33\x44\x55\x66\x77\x88", 16), 16);
	assert_int_equal(write(sv2[1], rec, n), n);
	assert_int_equal(chan_server(&s, sv2[0], key_a, 2000, &err), 0);
	assert_int_equal(chan_recv(&s, &type, &buf, &len, 2000, &err), -1);
	assert_non_null(strstr(err.msg, "bad message authentication code"));
	chan_close(&s);
	close(sv2[1]);
}

static void oversize_and_garbage_are_rejected(void **state)
{
	int sv[2];
	struct chan s;
	struct verr err;
	uint8_t type;
	char *buf;
	size_t len;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[1], "HTTP/1.1 200 OK\r\n", 16), 16);
	assert_int_equal(chan_server(&s, sv[0], key_a, 2000, &err), -1);
	assert_non_null(strstr(err.msg, "does not speak"));
	close(sv[0]);
	close(sv[1]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[1], "VHPCCH1\0" "12345678" "\x7f\xff\xff\xff\x01", 21), 21);
	assert_int_equal(chan_server(&s, sv[0], key_a, 2000, &err), 0);
	assert_int_equal(chan_recv(&s, &type, &buf, &len, 2000, &err), -1);
	assert_non_null(strstr(err.msg, "exceeds"));
	chan_close(&s);
	close(sv[1]);
}

static void silent_peer_times_out(void **state)
{
	int sv[2];
	struct chan s;
	struct verr err;
	uint8_t type;
	char *buf;
	size_t len;
	double t0;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* A peer that sends half a frame header and stalls. */
	assert_int_equal(write(sv[1], "VHPCCH1\0" "12345678" "\0\0", 18), 18);
	assert_int_equal(chan_server(&s, sv[0], key_a, 2000, &err), 0);
	t0 = now_s();
	assert_int_equal(chan_recv(&s, &type, &buf, &len, 300, &err), -1);
	assert_true(now_s() - t0 < 2.0);
	assert_non_null(strstr(err.msg, "timed out"));
	chan_close(&s);
	close(sv[1]);
}

/* chan_close_wait returns once the peer has closed its end, having
 * shut down its own writing first (the peer sees EOF: that is what makes
 * a guest's session end), and gives up at its time-out on a peer that
 * keeps its end open. */
static void close_wait_waits_for_the_peer(void **state)
{
	struct chan c = { .fd = -1 };
	char b;
	int sv[2];
	pid_t pid;
	double t0;
	int st = -1;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The peer: waits for our EOF, writes a little, holds its end
		 * 200 ms more, then exits. */
		close(sv[0]);
		_exit(read(sv[1], &b, 1) == 0 && write(sv[1], "tail", 4) == 4 && usleep(200000) == 0 ? 0 : 1);
	}
	close(sv[1]);
	c.fd = sv[0];
	t0 = now_s();
	assert_int_equal(chan_close_wait(&c, 3000), 0);
	assert_true(now_s() - t0 >= 0.15);
	assert_true(now_s() - t0 < 2.0);
	assert_int_equal(c.fd, -1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* A peer that never closes. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	c.fd = sv[0];
	t0 = now_s();
	assert_int_equal(chan_close_wait(&c, 300), -1);
	assert_true(now_s() - t0 >= 0.29);
	assert_true(now_s() - t0 < 2.0);
	assert_int_equal(c.fd, -1);
	close(sv[1]);
}

static void key_files_must_be_private(void **state)
{
	char path[] = "/tmp/vhpc-key-XXXXXX";
	uint8_t k[CHAN_KEY_LEN], k2[CHAN_KEY_LEN];
	struct verr err;
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(chan_key_create(path, k, &err), 0);
	assert_int_equal(chan_key_load(path, k2, &err), 0);
	assert_memory_equal(k, k2, CHAN_KEY_LEN);
	chmod(path, 0644);
	assert_int_equal(chan_key_load(path, k2, &err), -1);
	assert_non_null(strstr(err.msg, "readable by group or others"));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(frames_pass_with_the_same_key),
		cmocka_unit_test(wrong_key_is_rejected),
		cmocka_unit_test(replayed_session_is_rejected),
		cmocka_unit_test(oversize_and_garbage_are_rejected),
		cmocka_unit_test(silent_peer_times_out),
		cmocka_unit_test(close_wait_waits_for_the_peer),
		cmocka_unit_test(key_files_must_be_private),
	};
	return cmocka_run_group_tests_name("chan", tests, NULL, NULL);
}
