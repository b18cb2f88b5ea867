/*
 * wireprobe: a client of the cluster's wire protocol that can also
 * misbehave, for the cluster and security tests.  It builds its frames
 * itself (a second implementation of lib/wire.c's framing), so each part
 * of one can be wrong on purpose.
 *
 *   wireprobe send HOST:PORT JSON       a proper request; prints the reply
 *   wireprobe replay HOST:PORT JSON     the same frame on two connections
 *   wireprobe tamper HOST:PORT JSON     one character of the credential changed
 *   wireprobe expired HOST:PORT JSON    a credential with a 1 s TTL, sent after 3 s
 *   wireprobe payload HOST:PORT TEXT    a valid credential around a body of any TEXT
 *   wireprobe header HOST:PORT TEXT     TEXT as the credential's header
 *   wireprobe forged HOST:PORT JSON     a credential of the munged at $WIREPROBE_FORGE_SOCKET
 *                                       (another key); the reply is checked with ours
 *   wireprobe foruid HOST:PORT UID JSON a credential restricted to UID, not to the daemon
 *   wireprobe anyuid HOST:PORT JSON     a credential restricted to no one
 *   wireprobe raw HOST:PORT TEXT        TEXT as the frame's credential (not munge)
 *   wireprobe huge HOST:PORT            a frame header announcing 2 GiB
 *   wireprobe garbage HOST:PORT         HTTP instead of a frame
 *
 * Each answer is printed as "reply(uid N): JSON", "no reply: REASON" (a
 * daemon's notice: "no reply: refused: TEXT") or "closed".
 */
#include <arpa/inet.h>
#include <json-c/json.h>
#include <munge.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/inet.h"
#include "lib/parse.h"
#include "lib/wire.h"
#include "tests/cluster/wireframe.h"

static const char *target;
/* This request's id: the reply must name it. */
static char rid[WIRE_ID_HEX + 1];

static int conn(void)
{
	struct verr e;
	int fd = tcp_connect(target, 5000, &e);

	if (fd < 0) {
		fprintf(stderr, "wireprobe: %s\n", e.msg);
		exit(2);
	}
	return fd;
}

static void print_reply(int fd)
{
	struct json_object *r;
	struct wire_peer p;
	struct verr e;
	/* Longer than a node's longest own wait (a pause that closes a
	 * session waits 10 s for it: checkpoint.t). */
	int rc = wire_recv(fd, &r, &p, rid, 30000, &e);

	if (rc == 1) {
		printf("closed\n");
	} else if (rc < 0) {
		printf("no reply: %s\n", e.msg);
	} else {
		printf("reply(uid %u): %s\n", (unsigned)p.uid, json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN));
		json_object_put(r);
	}
	fflush(stdout);
}

static void send_raw(int fd, const void *buf, size_t len)
{
	if (write_full(fd, buf, len) < 0)
		printf("send failed\n");
}

static void send_text_frame(int fd, const char *text)
{
	uint32_t n = htonl((uint32_t)strlen(text));

	send_raw(fd, &n, 4);
	send_raw(fd, text, strlen(text));
}

/* send: through lib/wire.c, as every client does. */
static int do_send(const char *json)
{
	struct json_object *o = json_tokener_parse(json);
	struct wire_to to = { .uid = 0 };
	struct verr e;
	int fd;

	if (!o) {
		fprintf(stderr, "wireprobe: not JSON: %s\n", json);
		return 2;
	}
	snprintf(to.id, sizeof(to.id), "%s", rid);
	fd = conn();
	if (wire_send(fd, o, &to, 10000, &e) < 0)
		printf("send failed: %s\n", e.msg);
	print_reply(fd);
	close(fd);
	json_object_put(o);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 2 ? argv[1] : "";
	const char *arg = argc > 3 ? argv[3] : "";
	struct wireframe how = { .to = 0, .id = rid };
	uint8_t id[WIRE_ID_HEX / 2];
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: wireprobe send|replay|tamper|expired|payload|header|forged|foruid|anyuid|raw|"
			"huge|garbage HOST:PORT [ARG]\n");
		return 2;
	}
	target = argv[2];
	random_bytes(id, sizeof(id));
	hex_encode(id, sizeof(id), rid);
	if (!strcmp(cmd, "send"))
		return do_send(arg);
	if (!strcmp(cmd, "foruid")) {
		long long u;

		if (argc < 5 || parse_ll(argv[3], 0, 0xfffffffe, &u) < 0) {
			fprintf(stderr, "wireprobe: foruid HOST:PORT UID JSON\n");
			return 2;
		}
		how.to = (uid_t)u;
		arg = argv[4];
	}
	if (!strcmp(cmd, "replay") || !strcmp(cmd, "tamper") || !strcmp(cmd, "expired") || !strcmp(cmd, "payload") ||
	    !strcmp(cmd, "header") || !strcmp(cmd, "forged") || !strcmp(cmd, "foruid") || !strcmp(cmd, "anyuid")) {
		int times = !strcmp(cmd, "replay") ? 2 : 1;
		size_t len;
		char *f;

		how.ttl = !strcmp(cmd, "expired") ? 1 : 0;
		if (!strcmp(cmd, "forged"))
			how.sock = getenv("WIREPROBE_FORGE_SOCKET");
		if (!strcmp(cmd, "anyuid"))
			how.to = (uid_t)MUNGE_UID_ANY;
		if (!strcmp(cmd, "header"))
			how.header = arg;
		how.body = arg;
		if (!(f = wireframe_make(&how, &len))) {
			fprintf(stderr, "wireprobe: munged would not sign it\n");
			return 2;
		}
		if (!strcmp(cmd, "tamper"))
			f[4 + 40] = f[4 + 40] == 'A' ? 'B' : 'A';
		if (!strcmp(cmd, "expired"))
			sleep(3);
		for (int i = 0; i < times; i++) {
			fd = conn();
			send_raw(fd, f, len);
			print_reply(fd);
			close(fd);
		}
		free(f);
	} else if (!strcmp(cmd, "raw")) {
		fd = conn();
		send_text_frame(fd, arg);
		print_reply(fd);
		close(fd);
	} else if (!strcmp(cmd, "huge")) {
		uint32_t n = htonl(0x80000000u);

		fd = conn();
		send_raw(fd, &n, 4);
		print_reply(fd);
		close(fd);
	} else if (!strcmp(cmd, "garbage")) {
		static const char junk[] = "GET / HTTP/1.0\r\n\r\n";

		fd = conn();
		send_raw(fd, junk, sizeof(junk) - 1);
		print_reply(fd);
		close(fd);
	} else {
		fprintf(stderr, "wireprobe: unknown command '%s'\n", cmd);
		return 2;
	}
	return 0;
}
