/* Munge-signed messages: the receiver gets the sender's uid from munged,
 * and forged, replayed, expired, malformed or oversized messages are
 * rejected with a reason.  A private munged runs for the duration. */
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
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/err.h"
#include "lib/wire.h"

static char dir[] = "/tmp/vhpc-munge-XXXXXX";

static int start_munged(void **state)
{
	char cmd[1024], key[300];

	(void)state;
	if (!mkdtemp(dir))
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
	snprintf(cmd, sizeof(cmd), "munged -S %s/sock -s >/dev/null 2>&1; rm -rf %s", dir, dir);
	return system(cmd) == 0 ? 0 : 0;
}

static struct json_object *msg(const char *type)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "job", json_object_new_int(42));
	return o;
}

static void roundtrip_carries_sender_uid(void **state)
{
	int sv[2];
	struct json_object *m = msg("submit"), *got, *j;
	struct wire_peer peer;
	struct verr err;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(wire_send(sv[0], m, &err), 0);
	assert_int_equal(wire_recv(sv[1], &got, &peer, 2000, &err), 0);
	assert_string_equal(wire_type(got), "submit");
	assert_true(json_object_object_get_ex(got, "job", &j));
	assert_int_equal(json_object_get_int(j), 42);
	assert_int_equal(peer.uid, getuid());
	json_object_put(m);
	json_object_put(got);
	close(sv[0]);
	assert_int_equal(wire_recv(sv[1], &got, &peer, 2000, &err), 1);
	close(sv[1]);
}

static void another_uid_is_reported_as_itself(void **state)
{
	int sv[2], st;
	struct json_object *got;
	struct wire_peer peer;
	struct verr err;
	pid_t pid;

	(void)state;
	if (getuid() != 0)
		skip();
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	if (pid == 0) {
		struct json_object *m = msg("cancel");

		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(3);
		_exit(wire_send(sv[0], m, &err) == 0 ? 0 : 4);
	}
	assert_int_equal(wire_recv(sv[1], &got, &peer, 5000, &err), 0);
	assert_int_equal(peer.uid, 65534);
	json_object_put(got);
	waitpid(pid, &st, 0);
	assert_int_equal(WEXITSTATUS(st), 0);
	close(sv[0]);
	close(sv[1]);
}

/* Captures what wire_send writes, to replay or tamper with it. */
static char *capture(struct json_object *m, size_t *len)
{
	int sv[2];
	struct verr err;
	char *buf = malloc(1 << 20);
	ssize_t n;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(wire_send(sv[0], m, &err), 0);
	close(sv[0]);
	n = read(sv[1], buf, 1 << 20);
	assert_true(n > 4);
	close(sv[1]);
	*len = n;
	return buf;
}

static int deliver(const char *buf, size_t len, struct json_object **got, struct verr *err)
{
	int sv[2], r;
	struct wire_peer peer;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[0], buf, len), (ssize_t)len);
	close(sv[0]);
	r = wire_recv(sv[1], got, &peer, 2000, err);
	close(sv[1]);
	return r;
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

	(void)state;
	buf[len / 2] = buf[len / 2] == 'A' ? 'B' : 'A';
	assert_int_equal(deliver(buf, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "rejected message: munge credential"));
	free(buf);
	json_object_put(m);
}

/* Bytes after the frame: signed by their digest, checked, given back. */
static void data_rides_signed(void **state)
{
	struct json_object *m = msg("image_data"), *got, *d;
	struct verr err;
	size_t len;
	char *buf, bin[300];
	int sv[2];
	struct wire_peer peer;

	(void)state;
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (char)i;
	json_object_object_add(m, WIRE_DATA, json_object_new_string_len(bin, sizeof(bin)));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(wire_send(sv[0], m, &err), 0);
	assert_int_equal(wire_recv(sv[1], &got, &peer, 2000, &err), 0);
	assert_true(json_object_object_get_ex(got, WIRE_DATA, &d));
	assert_int_equal(json_object_get_string_len(d), sizeof(bin));
	assert_memory_equal(json_object_get_string(d), bin, sizeof(bin));
	assert_false(json_object_object_get_ex(got, "data_len", NULL));
	json_object_put(got);
	close(sv[0]);
	close(sv[1]);
	json_object_put(m);

	/* a byte of the data changed on the way: refused */
	m = msg("image_data");
	json_object_object_add(m, WIRE_DATA, json_object_new_string_len(bin, sizeof(bin)));
	buf = capture(m, &len);
	buf[len - 10] ^= 1;
	assert_int_equal(deliver(buf, len, &got, &err), -1);
	assert_non_null(strstr(err.msg, "does not hash to the digest its credential signs"));
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
	assert_int_equal(wire_send(sv[0], m, &err), -1);
	assert_non_null(strstr(err.msg, "exceed"));
	close(sv[0]);
	close(sv[1]);
	json_object_put(m);
}

static void expired_message_is_rejected(void **state)
{
	munge_ctx_t ctx = munge_ctx_create();
	char *cred = NULL;
	const char *payload = "{\"v\":1,\"type\":\"cancel\"}";
	struct json_object *got;
	struct wire_peer peer;
	struct verr err;

	(void)state;
	munge_ctx_set(ctx, MUNGE_OPT_SOCKET, getenv("VHPC_MUNGE_SOCKET"));
	munge_ctx_set(ctx, MUNGE_OPT_TTL, 1);
	assert_int_equal(munge_encode(&cred, ctx, payload, strlen(payload)), EMUNGE_SUCCESS);
	munge_ctx_destroy(ctx);
	sleep(3);
	assert_int_equal(wire_decode(cred, &got, &peer, &err), -1);
	assert_non_null(strstr(err.msg, "xpired"));
	free(cred);
}

static void forged_and_malformed_are_rejected(void **state)
{
	struct json_object *got;
	struct verr err;
	char buf[64];
	uint32_t n;
	struct wire_peer peer;
	munge_ctx_t ctx = munge_ctx_create();
	char *cred;

	(void)state;
	/* Not a credential at all. */
	n = htonl(5);
	memcpy(buf, &n, 4);
	memcpy(buf + 4, "hello", 5);
	assert_int_equal(deliver(buf, 9, &got, &err), -1);
	assert_non_null(strstr(err.msg, "munge credential"));
	/* Oversized frame header. */
	n = htonl(0x7fffffff);
	memcpy(buf, &n, 4);
	assert_int_equal(deliver(buf, 4, &got, &err), -1);
	assert_non_null(strstr(err.msg, "frame of"));
	/* Valid credentials around bad payloads. */
	munge_ctx_set(ctx, MUNGE_OPT_SOCKET, getenv("VHPC_MUNGE_SOCKET"));
	static const char *const bad[][2] = {
		{ "not json", "not a JSON object" },
		{ "[1,2]", "not a JSON object" },
		{ "{\"type\":\"x\"}", "unsupported version" },
		{ "{\"v\":99,\"type\":\"x\"}", "unsupported version" },
		{ "{\"v\":1}", "no valid \"type\"" },
		{ "{\"v\":1,\"type\":\"../x\"}", "no valid \"type\"" },
		{ "{\"v\":1,\"type\":\"x\"} trailing", "not a JSON object" },
		{ "{\"v\":1,\"type\":\"x\",\"_data\":\"forged\"}", "is the wire's own" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(munge_encode(&cred, ctx, bad[i][0], strlen(bad[i][0])), EMUNGE_SUCCESS);
		if (wire_decode(cred, &got, &peer, &err) != -1 || !strstr(err.msg, bad[i][1]))
			fail_msg("payload %s: %s", bad[i][0], err.msg);
		free(cred);
	}
	munge_ctx_destroy(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(roundtrip_carries_sender_uid),
		cmocka_unit_test(another_uid_is_reported_as_itself),
		cmocka_unit_test(replayed_message_is_rejected),
		cmocka_unit_test(tampered_message_is_rejected),
		cmocka_unit_test(data_rides_signed),
		cmocka_unit_test(expired_message_is_rejected),
		cmocka_unit_test(forged_and_malformed_are_rejected),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("wire", tests, start_munged, stop_munged);
}
