/*
 * The credential that opens every wire message: a small JSON header,
 *
 *   {"v": 3, "id"|"re": <request id, hex>, "len": <body bytes>, "key": <hex>}
 *
 * in a munge credential restricted to the recipient's uid.  "id" names a
 * request; "re" the request a reply answers.  It is all a receiver reads
 * before munged has checked the sender, so it is small (WIRE_MAX_CRED).
 */
#include "lib/wire_cred.h"
#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/jf.h"

#include <json-c/json.h>
#include <munge.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int wire_cred_encode(const struct wire_hdr *h, uid_t to, char **cred, struct verr *err)
{
	char key[2 * sizeof(h->key) + 1], text[256];
	const char *sock = getenv("VHPC_MUNGE_SOCKET");
	munge_ctx_t ctx;
	munge_err_t e;
	int n;

	hex_encode(h->key, sizeof(h->key), key);
	n = snprintf(text, sizeof(text), "{\"v\":%d,\"%s\":\"%s\",\"len\":%u,\"key\":\"%s\"}", WIRE_VERSION,
		     h->reply ? "re" : "id", h->id, (unsigned)h->len, key);
	sodium_memzero(key, sizeof(key));
	if (!(ctx = make_ctx(err))) {
		sodium_memzero(text, sizeof(text));
		return -1;
	}
	*cred = NULL;
	e = munge_ctx_set(ctx, MUNGE_OPT_UID_RESTRICTION, to);
	if (e == EMUNGE_SUCCESS)
		e = munge_encode(cred, ctx, text, n);
	sodium_memzero(text, sizeof(text));
	if (e != EMUNGE_SUCCESS) {
		verr_set(err, "munge: cannot sign a message: %s (is munged running%s%s?)",
			 munge_ctx_strerror(ctx) ? munge_ctx_strerror(ctx) : munge_strerror(e),
			 sock ? " on " : "", sock ? sock : "");
		munge_ctx_destroy(ctx);
		free(*cred);
		*cred = NULL;
		return -1;
	}
	munge_ctx_destroy(ctx);
	return 0;
}

/* A request id: exactly WIRE_ID_HEX hex digits. */
static bool id_ok(const char *s)
{
	uint8_t b[WIRE_ID_HEX / 2];

	return s && hex_decode(s, b, sizeof(b)) == 0;
}

struct json_object *wire_json_object(const char *text, size_t len, int depth)
{
	struct json_tokener *tok = json_tokener_new_ex(depth);
	struct json_object *o = tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL;

	if (o && (json_tokener_get_parse_end(tok) != len || !json_object_is_type(o, json_type_object))) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

/* The header's fields, each checked; nothing else may be there. */
static int parse_hdr(const char *text, int len, struct wire_hdr *h, struct verr *err)
{
	static const char *const fields[] = { "len", "key", "id", "re", NULL };
	struct json_object *o = wire_json_object(text, (size_t)len, 2), *v;
	const char *id = NULL, *re = NULL, *key = NULL;
	long long n;
	int rc = 0;

	if (!o)
		return verr_set(err, "rejected message: its credential does not hold a header");
	if (!json_object_object_get_ex(o, "v", &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int(v) != WIRE_VERSION)
		rc = verr_set(err, "rejected message: unsupported version (this side speaks %d)", WIRE_VERSION);
	else if (jf_only(o, "header", fields, err) < 0 || jf_int(o, "len", true, 1, WIRE_MAX_PAYLOAD, &n, err) < 0 ||
		 jf_str(o, "key", true, 2 * sizeof(h->key), &key, err) < 0 ||
		 jf_str(o, "id", false, WIRE_ID_HEX, &id, err) < 0 || jf_str(o, "re", false, WIRE_ID_HEX, &re, err) < 0)
		rc = verr_wrap(err, "rejected message: its header");
	else if (hex_decode(key, h->key, sizeof(h->key)) < 0)
		rc = verr_set(err, "rejected message: its header's key is not %zu hex digits", 2 * sizeof(h->key));
	else if (!id == !re || !id_ok(id ? id : re))
		rc = verr_set(err, "rejected message: its header needs one request id (\"id\" or \"re\", %d hex digits)",
			      WIRE_ID_HEX);
	else {
		h->reply = !id;
		snprintf(h->id, sizeof(h->id), "%s", id ? id : re);
		h->len = (uint32_t)n;
	}
	json_object_put(o);
	return rc;
}

int wire_cred_decode(const char *cred, struct wire_hdr *h, struct wire_peer *peer,
		     struct verr *err)
{
	void *payload = NULL;
	int plen = 0, rc;
	uid_t uid, to = (uid_t)MUNGE_UID_ANY;
	gid_t gid;
	munge_ctx_t ctx;
	munge_err_t e;

	if (!(ctx = make_ctx(err)))
		return -1;
	e = munge_decode(cred, ctx, &payload, &plen, &uid, &gid);
	if (e == EMUNGE_SUCCESS)
		munge_ctx_get(ctx, MUNGE_OPT_UID_RESTRICTION, &to);
	munge_ctx_destroy(ctx);
	/* Replayed and expired credentials still yield a uid: only success
	 * counts. */
	if (e != EMUNGE_SUCCESS) {
		free(payload);
		return verr_set(err, "rejected message: munge credential %s", munge_strerror(e));
	}
	/* munged refuses a credential restricted to another uid (unless it
	 * lets root read all); one restricted to nobody was not meant for
	 * this protocol's receivers. */
	if (to == (uid_t)MUNGE_UID_ANY)
		rc = verr_set(err, "rejected message: its credential (from uid %u) is not restricted to its recipient",
			      (unsigned)uid);
	else if (to != geteuid())
		rc = verr_set(err, "rejected message: its credential is for uid %u, not this uid %u", (unsigned)to,
			      (unsigned)geteuid());
	else if (!payload || plen <= 0)
		rc = verr_set(err, "rejected message: its credential does not hold a header");
	else
		rc = parse_hdr(payload, plen, h, err);
	if (payload)
		sodium_memzero(payload, (size_t)plen);
	free(payload);
	if (rc < 0)
		return -1;
	peer->uid = uid;
	peer->gid = gid;
	return 0;
}
