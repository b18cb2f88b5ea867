/* Munge-signed messages: the receiver gets the sender's uid from munged;
 * forged, replayed, expired, malformed or oversized messages, credentials
 * for another recipient and replies to another request are rejected with a
 * reason; a daemon's limits hold.  A private munged runs for the duration. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <json-c/json.h>
#include <munge.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/wire.h"
#include "tests/cluster/wireframe.h"

static char dir[64];
static const char rid[] = "00112233445566778899aabbccddeeff";

static int start_munged(void **state)
{
	char cmd[1024], key[300];

	(void)state;
	if (fx_tmpdir(dir, sizeof(dir), "munge") < 0)
		return -1;
	snprintf(key, sizeof(key), "%s/key", dir);
	snprintf(cmd, sizeof(cmd),
		 "chmod 755 %s && head -c 1024 /dev/urandom > %s && chmod 600 %s && "
		 "munged -f -S %s/sock --key-file=%s --pid-file=%s/pid --log-file=%s/log --seed-file=%s/seed",
		 dir, key, key, dir, key, dir, dir, dir);
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s/sock", dir);
	setenv("VHPC_MUNGE_SOCKET", cmd, 1);
	return 0;
}

static int stop_munged(void **state)
{
	char cmd[600];

	(void)state;
	/* Stopped before its folder goes; a munged already gone is fine. */
	snprintf(cmd, sizeof(cmd), "munged -S %s/sock -s >/dev/null 2>&1", dir);
	if (system(cmd) < 0)
		return -1;
	return fx_rmdir(dir);
}

static struct json_object *msg(const char *type)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "job", json_object_new_int(42));
	return o;
}

/* A request to this process's uid, with id rid. */
static const struct wire_to *to_me(void)
{
	static struct wire_to to;

	to.uid = geteuid();
	to.reply = false;
	snprintf(to.id, sizeof(to.id), "%s", rid);
	return &to;
}

static void roundtrip_carries_sender_uid(void **state)
{
	int sv[2];
	struct json_object *m = msg("submit"), *got, *j;
	struct wire_peer peer;
	struct verr err;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(wire_send(sv[0], m, to_me(), 2000, &err), 0);
	assert_int_equal(wire_recv(sv[1], &got, &peer, NULL, 2000, &err), 0);
	assert_string_equal(wire_type(got), "submit");
	assert_true(json_object_object_get_ex(got, "job", &j));
	assert_int_equal(json_object_get_int(j), 42);
	assert_int_equal(peer.uid, getuid());
	assert_string_equal(peer.id, rid);
	json_object_put(m);
	json_object_put(got);
	close(sv[0]);
	assert_int_equal(wire_recv(sv[1], &got, &peer, NULL, 2000, &err), 1);
	close(sv[1]);
}

/* uid 65534 sends m to root over fd, in a child (reaped by the caller). */
static pid_t send_as_nobody(int fd, struct json_object *m)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct wire_to to = { .uid = 0 };
		struct verr err;

		snprintf(to.id, sizeof(to.id), "%s", rid);
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(3);
		_exit(wire_send(fd, m, &to, 2000, &err) == 0 ? 0 : 4);
	}
	return pid;
}

static void another_uid_is_reported_as_itself(void **state)
{
	int sv[2], st;
	struct json_object *got, *m;
	struct wire_peer peer;
	struct verr err;
	pid_t pid;

	(void)state;
	if (getuid() != 0)
		skip();
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	m = msg("cancel");
	pid = send_as_nobody(sv[0], m);
	assert_int_equal(wire_recv(sv[1], &got, &peer, NULL, 5000, &err), 0);
	assert_int_equal(peer.uid, 65534);
	json_object_put(got);
	json_object_put(m);
	waitpid(pid, &st, 0);
	assert_int_equal(WEXITSTATUS(st), 0);
	close(sv[0]);
	close(sv[1]);
}

/* Captures what wire_send writes, to replay or tamper with it. */
static char *capture_to(struct json_object *m, const struct wire_to *to, size_t *len)
{
	int sv[2];
	struct verr err;
	char *buf = malloc(1 << 20);
	size_t n = 0;
	ssize_t r;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(wire_send(sv[0], m, to, 2000, &err), 0);
	close(sv[0]);
	while ((r = read(sv[1], buf + n, (1 << 20) - n)) > 0)
		n += (size_t)r;
	assert_true(n > 4);
	close(sv[1]);
	*len = n;
	return buf;
}

static char *capture(struct json_object *m, size_t *len)
{
	return capture_to(m, to_me(), len);
}

/* What wire_recv makes of buf, as a daemon (answers NULL) or as the
 * client of request answers. */
static int deliver_as(const char *buf, size_t len, const char *answers, struct json_object **got,
		      struct verr *err)
{
	int sv[2], r;
	struct wire_peer peer;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[0], buf, len), (ssize_t)len);
	close(sv[0]);
	r = wire_recv(sv[1], got, &peer, answers, 2000, err);
	close(sv[1]);
	return r;
}

static int deliver(const char *buf, size_t len, struct json_object **got, struct verr *err)
{
	return deliver_as(buf, len, NULL, got, err);
}

static void replayed_message_is_rejected(void **state)
{
	struct json_object *m = msg("cancel"), *got;
	struct verr err;
	size_t len;
	char *buf = capture(m, &len);

	(void)state;
	assert_int_equal(deliver(buf, len, &got, &err), 0);
	json_object_put(got);
	assert_int_equal(deliver(buf, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "Replayed"));
	free(buf);
	json_object_put(m);
}

static void tampered_message_is_rejected(void **state)
{
	struct json_object *m = msg("cancel"), *got;
	struct verr err;
	size_t len;
	char *buf = capture(m, &len);
	uint32_t clen;

	(void)state;
	memcpy(&clen, buf, 4);
	clen = ntohl(clen);
	/* the credential */
	buf[4 + clen / 2] = buf[4 + clen / 2] == 'A' ? 'B' : 'A';
	assert_int_equal(deliver(buf, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "rejected message: munge credential"));
	free(buf);
	/* a bit of the sealed body */
	buf = capture(m, &len);
	buf[len - 5] ^= 1;
	assert_int_equal(deliver(buf, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "its body is not the one its credential seals"));
	free(buf);
	json_object_put(m);
}

/* Bytes after the frame: sealed, signed by their digest, checked, given
 * back; nothing of them is in clear on the way. */
static void data_rides_sealed(void **state)
{
	struct json_object *m = msg("image_data"), *got, *d;
	struct verr err;
	size_t len;
	char *buf, bin[300];
	int sv[2];
	struct wire_peer peer;

	(void)state;
	if (geteuid() != 0)
		skip();
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (char)i;
	json_object_object_add(m, WIRE_DATA, json_object_new_string_len(bin, sizeof(bin)));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(wire_send(sv[0], m, to_me(), 2000, &err), 0);
	assert_int_equal(wire_recv(sv[1], &got, &peer, NULL, 2000, &err), 0);
	assert_true(json_object_object_get_ex(got, WIRE_DATA, &d));
	assert_int_equal(json_object_get_string_len(d), sizeof(bin));
	assert_memory_equal(json_object_get_string(d), bin, sizeof(bin));
	assert_false(json_object_object_get_ex(got, "data_len", NULL));
	json_object_put(got);
	close(sv[0]);
	close(sv[1]);
	json_object_put(m);

	/* what crosses the wire holds no run of 16 of the data's bytes */
	m = msg("image_data");
	json_object_object_add(m, WIRE_DATA, json_object_new_string_len(bin, sizeof(bin)));
	buf = capture(m, &len);
	assert_true(len >= sizeof(bin));
	for (size_t i = 0; i + 16 <= sizeof(bin); i += 16)
		assert_null(memmem(buf, len, bin + i, 16));
	/* a byte of the data changed on the way: refused */
	buf[len - 10] ^= 1;
	assert_int_equal(deliver(buf, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "its data is not what its credential seals"));
	free(buf);
	json_object_put(m);
	/* cut short (a credential of its own: the first one is spent): refused */
	m = msg("image_data");
	json_object_object_add(m, WIRE_DATA, json_object_new_string_len(bin, sizeof(bin)));
	buf = capture(m, &len);
	assert_int_equal(deliver(buf, len - 1, &got, &err), -1);
	assert_non_null(strstr(err.msg, "truncated"));
	free(buf);
	json_object_put(m);
	/* over the limit: not sent */
	m = msg("image_data");
	{
		char *big = calloc(1, WIRE_MAX_DATA + 1);

		json_object_object_add(m, WIRE_DATA, json_object_new_string_len(big, WIRE_MAX_DATA + 1));
		free(big);
	}
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(wire_send(sv[0], m, to_me(), 2000, &err), -1);
	assert_non_null(strstr(err.msg, "exceed"));
	close(sv[0]);
	close(sv[1]);
	json_object_put(m);
}

/* Bulk data from a user is refused before it is read: a user's message
 * costs a daemon at most WIRE_MAX_PAYLOAD. */
static void data_from_a_user_is_refused(void **state)
{
	int sv[2], st;
	struct json_object *got, *m;
	char *big;
	struct wire_peer peer;
	struct verr err;
	pid_t pid;

	(void)state;
	if (getuid() != 0)
		skip();
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	m = msg("image_put");
	big = calloc(1, 1 << 20);
	json_object_object_add(m, WIRE_DATA, json_object_new_string_len(big, 1 << 20));
	free(big);
	pid = send_as_nobody(sv[0], m);
	assert_int_equal(wire_recv(sv[1], &got, &peer, NULL, 5000, &err), -1);
	assert_non_null(strstr(err.msg, "bulk data comes from root only"));
	close(sv[1]);
	waitpid(pid, &st, 0);
	close(sv[0]);
	json_object_put(m);
}

/* A frame made outside lib/wire.c (tests/cluster/wireframe.c): header
 * (NULL: a proper one for body) in a credential for uid to, then body
 * sealed with its key. */
static char *make_frame(const char *header, const char *body, int ttl, uid_t to, size_t *len)
{
	struct wireframe f = { .header = header, .body = body, .id = rid, .ttl = ttl, .to = to };
	char *buf = wireframe_make(&f, len);

	assert_non_null(buf);
	return buf;
}

static void expired_message_is_rejected(void **state)
{
	struct json_object *got;
	struct verr err;
	size_t len;
	char *f = make_frame(NULL, "{\"v\":3,\"type\":\"cancel\"}", 1, geteuid(), &len);

	(void)state;
	sleep(3);
	assert_int_equal(deliver(f, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "xpired"));
	free(f);
}

static void forged_and_malformed_are_rejected(void **state)
{
	struct json_object *got;
	struct verr err;
	char buf[64], *f;
	size_t len;
	uint32_t n;
	int rc;
	static const char good_key[] = "0000000000000000000000000000000000000000000000000000000000000000";

	(void)state;
	/* Not a credential at all. */
	n = htonl(5);
	memcpy(buf, &n, 4);
	memcpy(buf + 4, "hello", 5);
	assert_int_equal(deliver(buf, 9, &got, &err), -1);
	assert_non_null(strstr(err.msg, "munge credential"));
	/* A length bigger than a credential: refused before reading on. */
	n = htonl(WIRE_MAX_CRED + 1);
	memcpy(buf, &n, 4);
	assert_int_equal(deliver(buf, 4, &got, &err), -1);
	assert_non_null(strstr(err.msg, "frame of 1025 bytes"));
	/* A notice is no request. */
	n = htonl(WIRE_NOTICE | 3);
	memcpy(buf, &n, 4);
	memcpy(buf + 4, "hey", 3);
	assert_int_equal(deliver(buf, 7, &got, &err), -1);
	assert_non_null(strstr(err.msg, "frame of 2147483651 bytes"));
	/* Valid credentials around bad headers. */
	static const char *const badhdr[][2] = {
		{ "not json", "does not hold a header" },
		{ "{\"v\":1,\"type\":\"queue\"}", "unsupported version" },
		{ "{\"v\":3,\"id\":\"00112233445566778899aabbccddeeff\",\"key\":\"%s\"}", "missing \"len\"" },
		{ "{\"v\":3,\"id\":\"00112233445566778899aabbccddeeff\",\"len\":600000,\"key\":\"%s\"}", "600000 is outside 1..524288" },
		{ "{\"v\":3,\"id\":\"00112233445566778899aabbccddeeff\",\"len\":5,\"key\":\"00\"}", "key is not 64 hex" },
		{ "{\"v\":3,\"len\":5,\"key\":\"%s\"}", "needs one request id" },
		{ "{\"v\":3,\"id\":\"0011\",\"len\":5,\"key\":\"%s\"}", "needs one request id" },
		{ "{\"v\":3,\"id\":\"00112233445566778899aabbccddeeff\",\"re\":\"00112233445566778899aabbccddeeff\","
		  "\"len\":5,\"key\":\"%s\"}", "needs one request id" },
		{ "{\"v\":3,\"id\":\"00112233445566778899aabbccddeeff\",\"len\":5,\"key\":\"%s\",\"uid\":0}",
		  "unknown field" },
	};
	for (size_t i = 0; i < sizeof(badhdr) / sizeof(badhdr[0]); i++) {
		char h[512];

		snprintf(h, sizeof(h), badhdr[i][0], good_key);
		f = make_frame(h, "hello", 0, geteuid(), &len);
		rc = deliver(f, len, &got, &err);
		free(f);
		if (rc != -1 || !strstr(err.msg, badhdr[i][1]))
			fail_msg("header %s: %s", h, err.msg);
	}
	/* Proper headers around bad bodies. */
	static const char *const badbody[][2] = {
		{ "not json", "not a JSON object" },
		{ "[1,2]", "not a JSON object" },
		{ "{\"type\":\"x\"}", "unsupported version" },
		{ "{\"v\":1,\"type\":\"x\"}", "unsupported version" },
		{ "{\"v\":3}", "no valid \"type\"" },
		{ "{\"v\":3,\"type\":\"../x\"}", "no valid \"type\"" },
		{ "{\"v\":3,\"type\":\"x\"} trailing", "not a JSON object" },
		{ "{\"v\":3,\"type\":\"x\",\"_data\":\"forged\"}", "is the wire's own" },
	};
	for (size_t i = 0; i < sizeof(badbody) / sizeof(badbody[0]); i++) {
		f = make_frame(NULL, badbody[i][0], 0, geteuid(), &len);
		rc = deliver(f, len, &got, &err);
		free(f);
		if (rc != -1 || !strstr(err.msg, badbody[i][1]))
			fail_msg("body %s: %s", badbody[i][0], err.msg);
	}
}

/* A credential names its recipient: one for another uid, or for no one,
 * is refused; and another uid cannot read a message sent to this one. */
static void credential_for_another_recipient_is_refused(void **state)
{
	struct json_object *got, *m;
	struct verr err;
	size_t len;
	char *f;
	int sv[2], st;
	pid_t pid;

	(void)state;
	f = make_frame(NULL, "{\"v\":3,\"type\":\"queue\"}", 0, geteuid() + 1000, &len);
	assert_int_equal(deliver(f, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "Unauthorized credential"));
	free(f);
	f = make_frame(NULL, "{\"v\":3,\"type\":\"queue\"}", 0, (uid_t)MUNGE_UID_ANY, &len);
	assert_int_equal(deliver(f, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "not restricted to its recipient"));
	free(f);
	if (getuid() != 0)
		return;
	/* uid 65534 reading a message for root (as one caught on the way) */
	m = msg("job");
	json_object_object_add(m, "secret", json_object_new_string("job key"));
	f = capture(m, &len);
	json_object_put(m);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	if (pid == 0) {
		struct wire_peer peer;

		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(3);
		if (wire_recv(sv[1], &got, &peer, NULL, 2000, &err) == 0)
			_exit(1);
		_exit(strstr(err.msg, "Unauthorized credential") ? 0 : 2);
	}
	assert_int_equal(write(sv[0], f, len), (ssize_t)len);
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	free(f);
	close(sv[0]);
	close(sv[1]);
}

/* A reply names its request: taken only by that request's client. */
static void reply_is_bound_to_its_request(void **state)
{
	struct json_object *m = msg("jobs"), *got;
	struct wire_to to = { .uid = geteuid(), .reply = true };
	struct verr err;
	size_t len;
	char *f;

	(void)state;
	snprintf(to.id, sizeof(to.id), "%s", rid);
	f = capture_to(m, &to, &len);
	assert_int_equal(deliver_as(f, len, "ffeeddccbbaa99887766554433221100", &got, &err), -1);
	assert_non_null(strstr(err.msg, "answers another request"));
	free(f);
	/* ... nor by a daemon as a request */
	f = capture_to(m, &to, &len);
	assert_int_equal(deliver(f, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "a reply where a request was expected"));
	free(f);
	/* a request is no reply */
	f = capture(m, &len);
	assert_int_equal(deliver_as(f, len, rid, &got, &err), -1);
	assert_non_null(strstr(err.msg, "a request where a reply was expected"));
	free(f);
	/* the right one passes */
	f = capture_to(m, &to, &len);
	assert_int_equal(deliver_as(f, len, rid, &got, &err), 0);
	json_object_put(got);
	free(f);
	json_object_put(m);
}

/* A notice reaches a client as the reason of a failure. */
static void notice_is_a_failure_with_its_reason(void **state)
{
	struct json_object *got;
	struct verr err;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	wire_notice(sv[0], "busy: 3 connections\n at once");
	close(sv[0]);
	assert_int_equal(wire_recv(sv[1], &got, &(struct wire_peer){ 0 }, rid, 2000, &err), -1);
	assert_string_equal(err.msg, "refused: busy: 3 connections? at once");
	close(sv[1]);
}

/* A peer that takes nothing costs a sender its deadline, no more. */
static void send_is_bounded_by_its_deadline(void **state)
{
	struct json_object *m = msg("jobs");
	char *big = malloc(400 << 10);
	struct verr err;
	uint64_t t0;
	int sv[2], small = 4096;

	(void)state;
	memset(big, 'x', 400 << 10);
	big[(400 << 10) - 1] = 0;
	json_object_object_add(m, "pad", json_object_new_string(big));
	free(big);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	t0 = now_ns();
	assert_int_equal(wire_send(sv[0], m, to_me(), 300, &err), -1);
	assert_non_null(strstr(err.msg, "within 300 ms"));
	assert_true(now_ns() - t0 < 2000000000ull);
	close(sv[0]);
	close(sv[1]);
	json_object_put(m);
}

/* ------------------------------------------------------- wire_serve */

static int serve_port;

static struct json_object *handle_big(struct json_object *msg, const struct wire_peer *peer, const char *who,
				      void *ctx)
{
	struct json_object *r = json_object_new_object();
	char *big = malloc(300 << 10);

	(void)msg;
	(void)peer;
	(void)who;
	(void)ctx;
	memset(big, 'y', 300 << 10);
	big[(300 << 10) - 1] = 0;
	json_object_object_add(r, "type", json_object_new_string("big"));
	json_object_object_add(r, "pad", json_object_new_string(big));
	free(big);
	return r;
}

static void *serve_thread(void *arg)
{
	wire_serve((int)(intptr_t)arg, 0, handle_big, NULL);
}

/* The daemon's side in a network namespace of its own whose TCP send
 * buffers stay at 16 KiB, so that a reply of a few hundred KiB fills them
 * (by default the kernel takes up to 4 MiB before a send blocks: many
 * slow readers then fill the kernel's memory before they block threads).
 * Needs root; without it the serve tests skip. */
static int small_buffers_netns(void)
{
	FILE *f;

	if (geteuid() != 0)
		return 0;
	if (unshare(CLONE_NEWNET) < 0 || system("ip link set lo up") != 0)
		return -1;
	f = fopen("/proc/sys/net/ipv4/tcp_wmem", "w");
	if (!f || fputs("4096 16384 16384\n", f) < 0 || fclose(f) != 0)
		return -1;
	return 0;
}

static int start_server(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	pthread_t th;
	int l;

	(void)state;
	if (small_buffers_netns() < 0)
		return -1;
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (start_munged(state) < 0 || l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 64) < 0 ||
	    getsockname(l, (struct sockaddr *)&sa, &sl) < 0)
		return -1;
	serve_port = ntohs(sa.sin_port);
	setenv("VHPC_WIRE_MAX_CONNS", "4", 1);
	setenv("VHPC_WIRE_MAX_CONNS_PER_ADDR", "2", 1);
	setenv("VHPC_WIRE_TIMEOUT_MS", "700", 1);
	return pthread_create(&th, NULL, serve_thread, (void *)(intptr_t)l);
}

static int dial(int rcvbuf)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				  .sin_port = htons((uint16_t)serve_port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (rcvbuf)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void call_ok(void)
{
	char hp[32];
	struct json_object *req = msg("hi"), *rep;
	struct verr err;

	snprintf(hp, sizeof(hp), "127.0.0.1:%d", serve_port);
	if (wire_call(hp, req, &rep, NULL, 3000, &err) < 0)
		fail_msg("call: %s", err.msg);
	assert_string_equal(wire_type(rep), "big");
	json_object_put(rep);
	json_object_put(req);
}

static void daemon_refuses_over_its_limits(void **state)
{
	struct json_object *got;
	struct wire_peer peer;
	struct verr err;
	int a, b, c;

	(void)state;
	if (geteuid() != 0)
		skip();
	call_ok();
	/* Two idle connections from 127.0.0.1, the per-address limit. */
	a = dial(0);
	b = dial(0);
	usleep(100000);
	c = dial(0);
	assert_int_equal(wire_recv(c, &got, &peer, rid, 2000, &err), -1);
	assert_non_null(strstr(err.msg, "refused: busy: 2 connections from this address"));
	close(c);
	/* Their time to send a request passes: closed, with the reason. */
	assert_int_equal(wire_recv(a, &got, &peer, rid, 3000, &err), -1);
	assert_non_null(strstr(err.msg, "refused: receiving a message: Connection timed out"));
	close(a);
	close(b);
	usleep(100000);
	call_ok();
}

/* A client that never reads its reply holds its thread for the deadline,
 * not for ever, and others are answered meanwhile. */
static void slow_reader_is_dropped(void **state)
{
	struct json_object *req = msg("hi");
	struct wire_to to = { .uid = 0 };
	struct verr err;
	char buf[4096];
	size_t got = 0;
	ssize_t r;
	int fd;

	(void)state;
	if (geteuid() != 0)
		skip();
	snprintf(to.id, sizeof(to.id), "%s", rid);
	fd = dial(2048);
	assert_int_equal(wire_send(fd, req, &to, 2000, &err), 0);
	json_object_put(req);
	call_ok();
	sleep(2);
	/* The daemon gave up on it: what it had sent, then a reset. */
	while ((r = recv(fd, buf, sizeof(buf), 0)) > 0)
		got += (size_t)r;
	assert_int_equal(r, -1);
	assert_int_equal(errno, ECONNRESET);
	assert_true(got < (300 << 10));
	close(fd);
	call_ok();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(roundtrip_carries_sender_uid),
		cmocka_unit_test(another_uid_is_reported_as_itself),
		cmocka_unit_test(replayed_message_is_rejected),
		cmocka_unit_test(tampered_message_is_rejected),
		cmocka_unit_test(data_rides_sealed),
		cmocka_unit_test(data_from_a_user_is_refused),
		cmocka_unit_test(expired_message_is_rejected),
		cmocka_unit_test(forged_and_malformed_are_rejected),
		cmocka_unit_test(credential_for_another_recipient_is_refused),
		cmocka_unit_test(reply_is_bound_to_its_request),
		cmocka_unit_test(notice_is_a_failure_with_its_reason),
		cmocka_unit_test(send_is_bounded_by_its_deadline),
	};
	const struct CMUnitTest serve[] = {
		cmocka_unit_test(daemon_refuses_over_its_limits),
		cmocka_unit_test(slow_reader_is_dropped),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("wire", tests, start_munged, stop_munged) |
	       cmocka_run_group_tests_name("wire_serve", serve, start_server, stop_munged);
}
