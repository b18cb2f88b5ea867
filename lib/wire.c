/*
 * Messages between vhpc daemons and clients (lib/wire.h):
 *
 *   u32 big-endian length | credential (lib/wire_cred.c)
 *   | body: secretbox(JSON, the header's key, nonce 0)
 *   [| data: secretbox(bytes, the same key, nonce 1)]
 *
 * The receiver reads the credential (at most WIRE_MAX_CRED bytes, on its
 * stack), has munged check it, and only then reads and opens the body the
 * credential announced.  The key is fresh for every message, so each
 * nonce is used once with it.  Data is sealed as the body is: image files
 * cross the underlay, and a user's image is theirs to keep from others.
 */
#include "lib/wire.h"
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/parse.h"
#include "lib/wire_cred.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const uint8_t zero_nonce[crypto_secretbox_NONCEBYTES];
static const uint8_t data_nonce[crypto_secretbox_NONCEBYTES] = { 1 };

static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
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

/* Length word, credential, sealed body and sealed data (if any) in one
 * buffer (one send). */
static int frame(struct json_object *msg, struct json_object *data, const struct wire_to *to, char **out,
		 size_t *outlen, struct verr *err)
{
	const char *payload = json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN);
	size_t plen = strlen(payload), clen, dlen = data ? (size_t)json_object_get_string_len(data) : 0, body, total;
	struct wire_hdr h = { .reply = to->reply };
	char *cred, *buf;
	uint32_t nlen;

	if (plen > WIRE_MAX_PAYLOAD)
		return verr_set(err, "message of %zu bytes exceeds the %u-byte limit", plen, WIRE_MAX_PAYLOAD);
	snprintf(h.id, sizeof(h.id), "%s", to->id);
	h.len = (uint32_t)plen;
	random_bytes(h.key, sizeof(h.key));
	if (wire_cred_encode(&h, to->uid, &cred, err) < 0) {
		sodium_memzero(h.key, sizeof(h.key));
		return -1;
	}
	clen = strlen(cred);
	body = 4 + clen + plen + crypto_secretbox_MACBYTES;
	total = body + (data ? dlen + crypto_secretbox_MACBYTES : 0);
	buf = malloc(total);
	if (!buf || clen > WIRE_MAX_CRED) {
		free(buf);
		free(cred);
		sodium_memzero(h.key, sizeof(h.key));
		return verr_set(err, buf ? "munge made a credential of %zu bytes (the limit is %u)" : "out of memory",
				clen, WIRE_MAX_CRED);
	}
	nlen = htonl((uint32_t)clen);
	memcpy(buf, &nlen, 4);
	memcpy(buf + 4, cred, clen);
	crypto_secretbox_easy((unsigned char *)buf + 4 + clen, (const unsigned char *)payload, plen, zero_nonce,
			      h.key);
	if (data)
		crypto_secretbox_easy((unsigned char *)buf + body, (const unsigned char *)json_object_get_string(data),
				      dlen, data_nonce, h.key);
	sodium_memzero(h.key, sizeof(h.key));
	free(cred);
	*out = buf;
	*outlen = total;
	return 0;
}

int wire_send(int fd, struct json_object *msg, const struct wire_to *to, int timeout_ms,
	      struct verr *err)
{
	uint64_t deadline = deadline_of(timeout_ms);
	struct json_object *data;
	size_t len = 0;
	char *buf = NULL;
	int rc = 0;

	if (!json_object_object_get_ex(msg, "v", NULL))
		json_object_object_add(msg, "v", json_object_new_int(WIRE_VERSION));
	if (take_data(msg, &data, err) < 0)
		return -1;
	if (frame(msg, data, to, &buf, &len, err) < 0) {
		json_object_put(data);
		return -1;
	}
	if (send_full_deadline(fd, buf, len, deadline) < 0)
		rc = errno == ETIMEDOUT ? verr_set(err, "sending a message: the peer did not take it within %d ms",
						   timeout_ms)
					: verr_errno(err, "sending a message");
	free(buf);
	json_object_put(data);
	return rc;
}

void wire_notice(int fd, const char *text)
{
	char buf[4 + WIRE_MAX_NOTICE];
	size_t n = strlen(text) > WIRE_MAX_NOTICE ? WIRE_MAX_NOTICE : strlen(text);
	uint32_t w = htonl(WIRE_NOTICE | (uint32_t)n);

	memcpy(buf, &w, 4);
	memcpy(buf + 4, text, n);
	/* Best effort: the socket's buffer takes it, or the peer goes without. */
	if (send(fd, buf, 4 + n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return;
}

/* A daemon's notice, shown (printable bytes only) as the error. */
static int recv_notice(int fd, uint32_t n, uint64_t deadline, struct verr *err)
{
	char text[WIRE_MAX_NOTICE + 1];
	bool eof;

	if (n > WIRE_MAX_NOTICE)
		return verr_set(err, "rejected reply: a notice of %u bytes (limit %u)", n, WIRE_MAX_NOTICE);
	if (read_full_deadline(fd, text, n, deadline, &eof) < 0)
		return verr_errno(err, "receiving a notice: truncated");
	text[n] = 0;
	for (char *p = text; *p; p++)
		if (*p < ' ' || *p > '~')
			*p = '?';
	return verr_set(err, "refused: %s", text);
}

/* The JSON inside a body that opened: an object with our version, a
 * valid type, and nothing that only the wire may put there. */
static int parse_body(const char *text, size_t len, struct json_object **msg, struct verr *err)
{
	struct json_object *o = wire_json_object(text, len, 32), *v, *t;

	if (!o)
		return verr_set(err, "rejected message: not a JSON object");
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
	*msg = o;
	return 0;
}

/* The body the credential announced: read only now that munged has
 * vouched for its sender, and opened with the credential's key. */
static int recv_body(int fd, struct wire_hdr *h, uint64_t deadline, struct json_object **msg,
		     struct verr *err)
{
	size_t clen = h->len + crypto_secretbox_MACBYTES;
	unsigned char *buf = malloc(clen);
	bool eof;
	int rc;

	if (!buf)
		return verr_set(err, "out of memory");
	if (read_full_deadline(fd, buf, clen, deadline, &eof) < 0) {
		free(buf);
		return verr_errno(err, "receiving a message: truncated");
	}
	/* In place: the plaintext is the ciphertext less its MAC. */
	if (crypto_secretbox_open_easy(buf, buf, clen, zero_nonce, h->key) < 0)
		rc = verr_set(err, "rejected message: its body is not the one its credential seals");
	else
		rc = parse_body((const char *)buf, h->len, msg, err);
	sodium_memzero(buf, clen);
	free(buf);
	return rc;
}

/* The bytes after the body, when the (verified) message announces some:
 * exactly data_len of them, sealed with the credential's key, hashing to
 * data_sha256, as WIRE_DATA. */
static int recv_data(int fd, struct json_object *msg, uid_t from, const uint8_t *key, uint64_t deadline,
		     struct verr *err)
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
	if (from != 0)
		return verr_set(err, "rejected message: bulk data comes from root only (admins and daemons), not uid %u",
				(unsigned)from);
	if (!json_object_is_type(l, json_type_int) || (len = json_object_get_int64(l)) < 0 || len > WIRE_MAX_DATA ||
	    !json_object_object_get_ex(msg, "data_sha256", &h) || !json_object_is_type(h, json_type_string) ||
	    json_object_get_string_len(h) != 64)
		return verr_set(err, "rejected message: data_len (0..%u) and data_sha256 (64 hex digits) do not fit",
				WIRE_MAX_DATA);
	if (!(buf = malloc((size_t)len + crypto_secretbox_MACBYTES)))
		return verr_set(err, "out of memory");
	if (read_full_deadline(fd, buf, (size_t)len + crypto_secretbox_MACBYTES, deadline, &eof) < 0) {
		free(buf);
		return verr_errno(err, "receiving a message's data: truncated");
	}
	if (crypto_secretbox_open_easy((unsigned char *)buf, (unsigned char *)buf, (size_t)len + crypto_secretbox_MACBYTES,
				       data_nonce, key) < 0) {
		free(buf);
		return verr_set(err, "rejected message: its data is not what its credential seals");
	}
	crypto_hash_sha256(d, (const unsigned char *)buf, (size_t)len);
	hex_encode(d, 32, hex);
	if (strcmp(hex, json_object_get_string(h))) {
		free(buf);
		return verr_set(err, "rejected message: its data does not hash to the digest its body signs");
	}
	json_object_object_add(msg, WIRE_DATA, json_object_new_string_len(buf, (int)len));
	json_object_object_del(msg, "data_len");
	json_object_object_del(msg, "data_sha256");
	free(buf);
	return 0;
}

/* A request where one is expected, the reply to request answers where
 * that is. */
static int check_route(const struct wire_hdr *h, const char *answers, struct verr *err)
{
	if (!answers)
		return h->reply ? verr_set(err, "rejected message: a reply where a request was expected") : 0;
	if (!h->reply)
		return verr_set(err, "rejected reply: a request where a reply was expected");
	if (strcmp(h->id, answers))
		return verr_set(err, "rejected reply: it answers another request (a replayed or misrouted reply)");
	return 0;
}

int wire_recv(int fd, struct json_object **msg, struct wire_peer *peer, const char *answers,
	      int timeout_ms, struct verr *err)
{
	uint64_t deadline = deadline_of(timeout_ms);
	char cred[WIRE_MAX_CRED + 1];
	struct wire_hdr h;
	uint32_t nlen;
	bool eof;
	int r;

	*msg = NULL;
	if (read_full_deadline(fd, &nlen, 4, deadline, &eof) < 0) {
		if (eof)
			return 1;
		return verr_errno(err, "receiving a message");
	}
	nlen = ntohl(nlen);
	if (answers && (nlen & WIRE_NOTICE))
		return recv_notice(fd, nlen & ~WIRE_NOTICE, deadline, err);
	/* Nothing bigger than a credential before munged has seen it. */
	if (nlen == 0 || nlen > WIRE_MAX_CRED)
		return verr_set(err, "rejected message: frame of %u bytes (a credential is at most %u: not this "
				"protocol, or another version of it)", nlen, WIRE_MAX_CRED);
	if (read_full_deadline(fd, cred, nlen, deadline, &eof) < 0)
		return verr_errno(err, "receiving a message: truncated");
	cred[nlen] = 0;
	if (strlen(cred) != nlen)
		return verr_set(err, "rejected message: NUL byte inside the credential");
	if (wire_cred_decode(cred, &h, peer, err) < 0)
		return -1;
	r = check_route(&h, answers, err);
	if (r == 0)
		r = recv_body(fd, &h, deadline, msg, err);
	if (r == 0 && recv_data(fd, *msg, peer->uid, h.key, deadline, err) < 0) {
		json_object_put(*msg);
		*msg = NULL;
		r = -1;
	}
	sodium_memzero(h.key, sizeof(h.key));
	if (r < 0)
		return -1;
	snprintf(peer->id, sizeof(peer->id), "%s", h.id);
	return 0;
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
