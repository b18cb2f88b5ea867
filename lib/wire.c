/*
 * Messages between vhpc daemons and clients: a JSON object carried inside a
 * munge credential, so every message says who sent it (uid/gid from munged,
 * not from the sender) and cannot be altered, replayed or used after its TTL.
 *
 * Frame: u32 big-endian length | munge credential (ASCII) [| data_len bytes].
 * Payload: {"v": WIRE_VERSION, "type": "...", ..., ["data_len", "data_sha256"]}.
 */
#include "lib/wire.h"
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <munge.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static munge_ctx_t make_ctx(struct verr *err)
{
	munge_ctx_t ctx = munge_ctx_create();
	const char *sock = getenv("VHPC_MUNGE_SOCKET");

	if (!ctx) {
		verr_set(err, "munge: cannot create a context");
		return NULL;
	}
	if (sock && *sock && munge_ctx_set(ctx, MUNGE_OPT_SOCKET, sock) != EMUNGE_SUCCESS) {
		verr_set(err, "munge: cannot use socket %s", sock);
		munge_ctx_destroy(ctx);
		return NULL;
	}
	return ctx;
}

/* The message's bytes out of its JSON, their length and digest in. */
static int take_data(struct json_object *msg, struct json_object **data, struct verr *err)
{
	unsigned char d[32];
	char hex[65];
	const char *b;
	size_t len;

	*data = NULL;
	if (!json_object_object_get_ex(msg, WIRE_DATA, data))
		return 0;
	if (!json_object_is_type(*data, json_type_string))
		return verr_set(err, "internal: %s is not a string", WIRE_DATA);
	json_object_get(*data);
	json_object_object_del(msg, WIRE_DATA);
	b = json_object_get_string(*data);
	len = (size_t)json_object_get_string_len(*data);
	if (len > WIRE_MAX_DATA) {
		json_object_put(*data);
		*data = NULL;
		return verr_set(err, "%zu bytes of data exceed the %u-byte limit", len, WIRE_MAX_DATA);
	}
	crypto_hash_sha256(d, (const unsigned char *)b, len);
	hex_encode(d, 32, hex);
	json_object_object_add(msg, "data_len", json_object_new_int64((int64_t)len));
	json_object_object_add(msg, "data_sha256", json_object_new_string(hex));
	return 0;
}

int wire_send(int fd, struct json_object *msg, struct verr *err)
{
	const char *payload;
	char *cred = NULL;
	munge_ctx_t ctx;
	munge_err_t e;
	uint32_t nlen;
	size_t plen, clen;
	struct json_object *data;
	int rc = 0;

	if (!json_object_object_get_ex(msg, "v", NULL))
		json_object_object_add(msg, "v", json_object_new_int(WIRE_VERSION));
	if (take_data(msg, &data, err) < 0)
		return -1;
	payload = json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN);
	plen = strlen(payload);
	if (plen > WIRE_MAX_PAYLOAD) {
		json_object_put(data);
		return verr_set(err, "message of %zu bytes exceeds the %u-byte limit", plen, WIRE_MAX_PAYLOAD);
	}
	if (!(ctx = make_ctx(err))) {
		json_object_put(data);
		return -1;
	}
	e = munge_encode(&cred, ctx, payload, (int)plen);
	if (e != EMUNGE_SUCCESS) {
		verr_set(err, "munge: cannot sign a message: %s (is munged running%s%s?)",
			 munge_ctx_strerror(ctx) ? munge_ctx_strerror(ctx) : munge_strerror(e),
			 getenv("VHPC_MUNGE_SOCKET") ? " on " : "",
			 getenv("VHPC_MUNGE_SOCKET") ? getenv("VHPC_MUNGE_SOCKET") : "");
		munge_ctx_destroy(ctx);
		json_object_put(data);
		return -1;
	}
	munge_ctx_destroy(ctx);
	clen = strlen(cred);
	nlen = htonl((uint32_t)clen);
	if (send_full(fd, &nlen, 4) < 0 || send_full(fd, cred, clen) < 0 ||
	    (data && send_full(fd, json_object_get_string(data), (size_t)json_object_get_string_len(data)) < 0))
		rc = verr_errno(err, "sending a message");
	free(cred);
	json_object_put(data);
	return rc;
}

int wire_decode(const char *cred, struct json_object **msg, struct wire_peer *peer,
		struct verr *err)
{
	void *payload = NULL;
	int plen = 0;
	uid_t uid;
	gid_t gid;
	munge_ctx_t ctx;
	munge_err_t e;
	struct json_object *o;
	struct json_object *v, *t;
	struct json_tokener *tok;

	if (!(ctx = make_ctx(err)))
		return -1;
	e = munge_decode(cred, ctx, &payload, &plen, &uid, &gid);
	munge_ctx_destroy(ctx);
	/* Replayed and expired credentials still yield a uid: only success
	 * counts. */
	if (e != EMUNGE_SUCCESS) {
		free(payload);
		return verr_set(err, "rejected message: munge credential %s", munge_strerror(e));
	}
	if (!payload || plen <= 0 || plen > (int)WIRE_MAX_PAYLOAD) {
		free(payload);
		return verr_set(err, "rejected message: empty or oversized payload");
	}
	tok = json_tokener_new_ex(32);
	o = tok ? json_tokener_parse_ex(tok, payload, plen) : NULL;
	if (o && json_tokener_get_parse_end(tok) != (size_t)plen) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	free(payload);
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return verr_set(err, "rejected message: not a JSON object");
	}
	if (!json_object_object_get_ex(o, "v", &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int(v) != WIRE_VERSION) {
		json_object_put(o);
		return verr_set(err, "rejected message: unsupported version (this side speaks %d)", WIRE_VERSION);
	}
	if (!json_object_object_get_ex(o, "type", &t) || !json_object_is_type(t, json_type_string) ||
	    !ident_ok(json_object_get_string(t), 64)) {
		json_object_put(o);
		return verr_set(err, "rejected message: no valid \"type\"");
	}
	/* Only wire_recv puts the bytes after a frame there. */
	if (json_object_object_get_ex(o, WIRE_DATA, NULL)) {
		json_object_put(o);
		return verr_set(err, "rejected message: \"%s\" is the wire's own", WIRE_DATA);
	}
	peer->uid = uid;
	peer->gid = gid;
	*msg = o;
	return 0;
}

/* The bytes after the frame, when the (verified) message announces some:
 * exactly data_len of them, hashing to data_sha256, as WIRE_DATA. */
static int recv_data(int fd, struct json_object *msg, uint64_t deadline, struct verr *err)
{
	struct json_object *l, *h;
	unsigned char d[32];
	char hex[65];
	int64_t len;
	char *buf;
	bool eof;

	if (!json_object_object_get_ex(msg, "data_len", &l))
		return json_object_object_get_ex(msg, "data_sha256", NULL)
			? verr_set(err, "rejected message: data_sha256 without data_len") : 0;
	if (!json_object_is_type(l, json_type_int) || (len = json_object_get_int64(l)) < 0 || len > WIRE_MAX_DATA ||
	    !json_object_object_get_ex(msg, "data_sha256", &h) || !json_object_is_type(h, json_type_string) ||
	    json_object_get_string_len(h) != 64)
		return verr_set(err, "rejected message: data_len (0..%u) and data_sha256 (64 hex digits) do not fit",
				WIRE_MAX_DATA);
	if (!(buf = malloc((size_t)len + 1)))
		return verr_set(err, "out of memory");
	if (len && read_full_deadline(fd, buf, (size_t)len, deadline, &eof) < 0) {
		free(buf);
		return verr_errno(err, "receiving a message's data: truncated");
	}
	crypto_hash_sha256(d, (const unsigned char *)buf, (size_t)len);
	hex_encode(d, 32, hex);
	if (strcmp(hex, json_object_get_string(h))) {
		free(buf);
		return verr_set(err, "rejected message: its data does not hash to the digest its credential signs");
	}
	json_object_object_add(msg, WIRE_DATA, json_object_new_string_len(buf, (int)len));
	json_object_object_del(msg, "data_len");
	json_object_object_del(msg, "data_sha256");
	free(buf);
	return 0;
}

int wire_recv(int fd, struct json_object **msg, struct wire_peer *peer, int timeout_ms,
	      struct verr *err)
{
	uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	uint32_t nlen;
	char *cred;
	bool eof;
	int r;

	if (read_full_deadline(fd, &nlen, 4, deadline, &eof) < 0) {
		if (eof)
			return 1;
		return verr_errno(err, "receiving a message");
	}
	nlen = ntohl(nlen);
	if (nlen == 0 || nlen > WIRE_MAX_FRAME)
		return verr_set(err, "rejected message: frame of %u bytes (limit %u)", nlen, WIRE_MAX_FRAME);
	cred = malloc(nlen + 1);
	if (!cred)
		return verr_set(err, "out of memory");
	if (read_full_deadline(fd, cred, nlen, deadline, &eof) < 0) {
		free(cred);
		return verr_errno(err, "receiving a message: truncated");
	}
	cred[nlen] = 0;
	if (strlen(cred) != nlen) {
		free(cred);
		return verr_set(err, "rejected message: NUL byte inside the credential");
	}
	r = wire_decode(cred, msg, peer, err);
	free(cred);
	if (r == 0 && (r = recv_data(fd, *msg, deadline, err)) < 0) {
		json_object_put(*msg);
		*msg = NULL;
	}
	return r;
}

const char *wire_type(struct json_object *msg)
{
	struct json_object *t;

	return json_object_object_get_ex(msg, "type", &t) ? json_object_get_string(t) : "";
}

struct json_object *wire_error(const char *fmt, ...)
{
	struct json_object *o = json_object_new_object();
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_object_object_add(o, "type", json_object_new_string("error"));
	json_object_object_add(o, "error", json_object_new_string(buf));
	return o;
}

void wire_reply(int fd, struct json_object *r, const char *peer)
{
	struct verr e;

	if (wire_send(fd, r, &e) < 0)
		log_info("%s: reply: %s", peer, e.msg);
	json_object_put(r);
}
