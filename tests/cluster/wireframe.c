/*
 * Wire frames made outside lib/wire.c: length, credential, sealed body.
 */
#include "tests/cluster/wireframe.h"
#include "lib/bytes.h"
#include "lib/wire.h"

#include <arpa/inet.h>
#include <munge.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *encode(const char *payload, const struct wireframe *f)
{
	munge_ctx_t ctx = munge_ctx_create();
	const char *sock = f->sock ? f->sock : getenv("VHPC_MUNGE_SOCKET");
	char *cred = NULL;

	if (!ctx)
		return NULL;
	if (sock)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, sock);
	if (f->ttl)
		munge_ctx_set(ctx, MUNGE_OPT_TTL, f->ttl);
	if (f->to != (uid_t)MUNGE_UID_ANY)
		munge_ctx_set(ctx, MUNGE_OPT_UID_RESTRICTION, f->to);
	if (munge_encode(&cred, ctx, payload, (int)strlen(payload)) != EMUNGE_SUCCESS) {
		free(cred);
		cred = NULL;
	}
	munge_ctx_destroy(ctx);
	return cred;
}

char *wireframe_make(const struct wireframe *f, size_t *len)
{
	uint8_t key[crypto_secretbox_KEYBYTES], nonce[crypto_secretbox_NONCEBYTES] = { 0 };
	char khex[2 * sizeof(key) + 1], hdr[512], *cred, *buf;
	size_t blen = f->header ? 0 : strlen(f->body), clen;
	uint32_t n;

	random_bytes(key, sizeof(key));
	hex_encode(key, sizeof(key), khex);
	snprintf(hdr, sizeof(hdr), "{\"v\":%d,\"id\":\"%s\",\"len\":%zu,\"key\":\"%s\"}", WIRE_VERSION, f->id, blen, khex);
	if (!(cred = encode(f->header ? f->header : hdr, f)))
		return NULL;
	clen = strlen(cred);
	buf = malloc(4 + clen + blen + crypto_secretbox_MACBYTES);
	if (!buf) {
		free(cred);
		return NULL;
	}
	n = htonl((uint32_t)clen);
	memcpy(buf, &n, 4);
	memcpy(buf + 4, cred, clen);
	*len = 4 + clen;
	if (!f->header) {
		crypto_secretbox_easy((unsigned char *)buf + *len, (const unsigned char *)f->body, blen, nonce, key);
		*len += blen + crypto_secretbox_MACBYTES;
	}
	free(cred);
	return buf;
}
