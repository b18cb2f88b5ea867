/*
 * wireprobe: a client of the cluster's wire protocol that can also
 * misbehave, for the cluster tests (tests/cluster).
 *
 *   wireprobe send HOST:PORT JSON       a proper message; prints the reply
 *   wireprobe replay HOST:PORT JSON     the same credential on two connections
 *   wireprobe tamper HOST:PORT JSON     one character of the credential changed
 *   wireprobe expired HOST:PORT JSON    a credential with a 1 s TTL, sent after 3 s
 *   wireprobe payload HOST:PORT TEXT    a valid credential around any TEXT
 *   wireprobe forged HOST:PORT JSON     a credential of the munged at $WIREPROBE_FORGE_SOCKET
 *                                       (another key); the reply is checked with ours
 *   wireprobe raw HOST:PORT TEXT        TEXT as the frame's credential (not munge)
 *   wireprobe unsigned HOST:PORT JSON   JSON as the frame's payload, no credential
 *   wireprobe huge HOST:PORT            a frame header announcing 2 GiB
 *   wireprobe garbage HOST:PORT         HTTP instead of a frame
 *
 * Each reply is printed as "reply: JSON" or "closed"/"no reply".
 */
#include <arpa/inet.h>
#include <json-c/json.h>
#include <munge.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/inet.h"
#include "lib/wire.h"

static const char *target;

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
	int rc = wire_recv(fd, &r, &p, 10000, &e);

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

static char *encode(const char *payload, int ttl, const char *sock)
{
	munge_ctx_t ctx = munge_ctx_create();
	char *cred = NULL;

	if (sock)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, sock);
	if (ttl)
		munge_ctx_set(ctx, MUNGE_OPT_TTL, ttl);
	if (munge_encode(&cred, ctx, payload, (int)strlen(payload)) != EMUNGE_SUCCESS) {
		fprintf(stderr, "wireprobe: munge_encode failed\n");
		exit(2);
	}
	munge_ctx_destroy(ctx);
	return cred;
}

static void send_frame(int fd, const char *text, size_t len)
{
	uint32_t n = htonl((uint32_t)len);

	if (write_full(fd, &n, 4) < 0 || write_full(fd, text, len) < 0)
		printf("send failed\n");
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 2 ? argv[1] : "";
	const char *arg = argc > 3 ? argv[3] : "";
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: wireprobe send|replay|tamper|expired|raw|unsigned|huge|garbage HOST:PORT [ARG]\n");
		return 2;
	}
	target = argv[2];
	if (!strcmp(cmd, "send")) {
		struct json_object *o = json_tokener_parse(arg);

		if (!o) {
			fprintf(stderr, "wireprobe: not JSON: %s\n", arg);
			return 2;
		}
		fd = conn();
		{
			struct verr e;

			if (wire_send(fd, o, &e) < 0)
				printf("send failed: %s\n", e.msg);
		}
		print_reply(fd);
		close(fd);
		json_object_put(o);
	} else if (!strcmp(cmd, "replay") || !strcmp(cmd, "tamper") || !strcmp(cmd, "expired") ||
		   !strcmp(cmd, "payload") || !strcmp(cmd, "forged")) {
		char *cred = encode(arg, !strcmp(cmd, "expired") ? 1 : 0,
				    getenv(!strcmp(cmd, "forged") ? "WIREPROBE_FORGE_SOCKET" : "VHPC_MUNGE_SOCKET"));
		int times = !strcmp(cmd, "replay") ? 2 : 1;

		if (!strcmp(cmd, "tamper"))
			cred[strlen(cred) / 2] = cred[strlen(cred) / 2] == 'A' ? 'B' : 'A';
		if (!strcmp(cmd, "expired"))
			sleep(3);
		for (int i = 0; i < times; i++) {
			fd = conn();
			send_frame(fd, cred, strlen(cred));
			print_reply(fd);
			close(fd);
		}
		free(cred);
	} else if (!strcmp(cmd, "raw") || !strcmp(cmd, "unsigned")) {
		fd = conn();
		send_frame(fd, arg, strlen(arg));
		print_reply(fd);
		close(fd);
	} else if (!strcmp(cmd, "huge")) {
		uint32_t n = htonl(0x80000000u);

		fd = conn();
		if (write_full(fd, &n, 4) < 0)
			printf("send failed\n");
		print_reply(fd);
		close(fd);
	} else if (!strcmp(cmd, "garbage")) {
		static const char junk[] = "GET / HTTP/1.0\r\n\r\n";

		fd = conn();
		if (write_full(fd, junk, sizeof(junk) - 1) < 0)
			printf("send failed\n");
		print_reply(fd);
		close(fd);
	} else {
		fprintf(stderr, "wireprobe: unknown command '%s'\n", cmd);
		return 2;
	}
	return 0;
}
