/*
 * gexec_connect_vsock against a bridge that speaks vhpc-hv's hybrid vsock
 * protocol (hv/hv.h): "CONNECT <port>\n" -> "OK <host port>\n" and then the
 * stream, whose first bytes may arrive in the same segment as the OK line.
 * Refusals, garbage, silence and planted symlinks are errors that say so.
 */
#include <pthread.h>
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

#include "tests/fixture.h"

#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/gexec.h"

enum mode { M_OK, M_REFUSE, M_GARBAGE, M_SILENT, M_LONG };

struct bridge {
	int lfd;
	enum mode mode;
	uint8_t key[CHAN_KEY_LEN];
	char got[64];
	int served;             /* 1: the channel carried a frame both ways */
};

static char dir[64], sock[128];

static void *bridge_main(void *arg)
{
	struct bridge *b = arg;
	int fd = accept(b->lfd, NULL, NULL);
	size_t n = 0;

	if (fd < 0)
		return NULL;
	while (n < sizeof(b->got) - 1 && read(fd, b->got + n, 1) == 1 && b->got[n] != '\n')
		n++;
	b->got[n] = 0;
	switch (b->mode) {
	case M_OK: {
		struct chan c;
		struct verr e;
		uint8_t type;
		char *buf;
		size_t len;

		/* The OK line, and the server's first handshake bytes right
		 * behind it in one write: the client must not swallow them. */
		if (write(fd, "OK 1073741824\n", 14) != 14)
			break;
		if (chan_server(&c, fd, b->key, 5000, &e) == 0 &&
		    chan_recv(&c, &type, &buf, &len, 5000, &e) == 0) {
			if (len == 4 && !memcmp(buf, "ping", 4) && chan_send(&c, CHAN_JSON, "pong", 4, &e) == 0)
				b->served = 1;
			free(buf);
		}
		chan_close(&c);
		return NULL;
	}
	case M_REFUSE:
		break;
	case M_GARBAGE:
		if (write(fd, "ERR\x01 no\n", 8) != 8)
			break;
		break;
	case M_LONG: {
		char junk[100];

		memset(junk, 'A', sizeof(junk));
		if (write(fd, junk, sizeof(junk)) != (ssize_t)sizeof(junk))
			break;
		break;
	}
	case M_SILENT:
		usleep(800000);
		break;
	}
	close(fd);
	return NULL;
}

static int start(struct bridge *b, enum mode m, pthread_t *t)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memset(b, 0, sizeof(*b));
	b->mode = m;
	memset(b->key, 7, sizeof(b->key));
	unlink(sock);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	b->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (bind(b->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(b->lfd, 4) < 0)
		return -1;
	return pthread_create(t, NULL, bridge_main, b);
}

static void stop(struct bridge *b, pthread_t t)
{
	shutdown(b->lfd, SHUT_RDWR);
	pthread_join(t, NULL);
	close(b->lfd);
	unlink(sock);
}

static int setup(void **state)
{
	(void)state;
	if (fx_tmpdir(dir, sizeof(dir), "vsockc") < 0)
		return -1;
	snprintf(sock, sizeof(sock), "%s/g0.vsock", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(dir);
}

static void connects_through_the_bridge(void **state)
{
	struct bridge b;
	pthread_t t;
	struct chan c;
	struct verr e;
	uint8_t type;
	char *buf;
	size_t len;

	(void)state;
	assert_int_equal(start(&b, M_OK, &t), 0);
	assert_int_equal(gexec_connect_vsock(&c, sock, 7707, b.key, 5000, &e), 0);
	assert_int_equal(chan_send(&c, CHAN_JSON, "ping", 4, &e), 0);
	assert_int_equal(chan_recv(&c, &type, &buf, &len, 5000, &e), 0);
	assert_int_equal(len, 4);
	assert_memory_equal(buf, "pong", 4);
	free(buf);
	chan_close(&c);
	stop(&b, t);
	assert_string_equal(b.got, "CONNECT 7707");
	assert_int_equal(b.served, 1);
}

static void failures_say_why(void **state)
{
	struct bridge b;
	pthread_t t;
	struct chan c;
	struct verr e;
	uint8_t other[CHAN_KEY_LEN] = { 1 };

	(void)state;
	assert_int_equal(start(&b, M_REFUSE, &t), 0);
	assert_int_equal(gexec_connect_vsock(&c, sock, 7707, b.key, 2000, &e), -1);
	assert_non_null(strstr(e.msg, "guest vsock port 7707 through"));
	assert_non_null(strstr(e.msg, "refused"));
	stop(&b, t);

	assert_int_equal(start(&b, M_GARBAGE, &t), 0);
	assert_int_equal(gexec_connect_vsock(&c, sock, 7707, b.key, 2000, &e), -1);
	assert_non_null(strstr(e.msg, "unexpected answer to CONNECT: 'ERR? no'"));
	stop(&b, t);

	assert_int_equal(start(&b, M_LONG, &t), 0);
	assert_int_equal(gexec_connect_vsock(&c, sock, 7707, b.key, 2000, &e), -1);
	assert_non_null(strstr(e.msg, "longer than 63 bytes"));
	stop(&b, t);

	assert_int_equal(start(&b, M_SILENT, &t), 0);
	double t0 = now_s();
	assert_int_equal(gexec_connect_vsock(&c, sock, 7707, b.key, 300, &e), -1);
	assert_true(now_s() - t0 < 1.5);
	assert_non_null(strstr(e.msg, "no answer to CONNECT in time"));
	stop(&b, t);

	/* The OK comes, but the guest holds another job's key: the first
	 * frame fails its MAC and the guest hangs up. */
	assert_int_equal(start(&b, M_OK, &t), 0);
	assert_int_equal(gexec_connect_vsock(&c, sock, 7707, other, 2000, &e), 0);
	assert_int_equal(chan_send(&c, CHAN_JSON, "ping", 4, &e), 0);
	{
		uint8_t type;
		char *buf = NULL;
		size_t len;

		assert_int_not_equal(chan_recv(&c, &type, &buf, &len, 2000, &e), 0);
		free(buf);
	}
	chan_close(&c);
	stop(&b, t);
	assert_int_equal(b.served, 0);

	assert_int_equal(gexec_connect_vsock(&c, sock, 0, b.key, 200, &e), -1);
	assert_non_null(strstr(e.msg, "the port must be 1..4294967294"));
	assert_int_equal(gexec_connect_vsock(&c, "/nonexistent/g0.vsock", 7707, b.key, 200, &e), -1);
	assert_non_null(strstr(e.msg, "cannot connect to guest vsock port 7707 through /nonexistent/g0.vsock"));
}

static void planted_symlink_is_not_followed(void **state)
{
	struct bridge b;
	pthread_t t;
	struct chan c;
	struct verr e;
	char link[160];

	(void)state;
	assert_int_equal(start(&b, M_REFUSE, &t), 0);
	snprintf(link, sizeof(link), "%s/g1.vsock", dir);
	assert_int_equal(symlink(sock, link), 0);
	assert_int_equal(gexec_connect_vsock(&c, link, 7707, b.key, 500, &e), -1);
	assert_non_null(strstr(e.msg, "not a socket"));
	unlink(link);
	/* Nothing reached the bridge. */
	assert_int_equal(wait_readable(b.lfd, 50), 1);
	stop(&b, t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(connects_through_the_bridge, setup, teardown),
		cmocka_unit_test_setup_teardown(failures_say_why, setup, teardown),
		cmocka_unit_test_setup_teardown(planted_symlink_is_not_followed, setup, teardown),
	};
	return cmocka_run_group_tests_name("vsock-client", tests, NULL, NULL);
}
