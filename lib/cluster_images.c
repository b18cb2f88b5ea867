/*
 * The cluster file's `images:` section (lib/cluster.h): the keys trusted
 * to sign images and whether guests need a signed image.  A key is
 * checked where it is written, so a typo names its line rather than
 * leaving a node that refuses every image for no reason it can say.
 */
#include "lib/bytes.h"
#include "lib/cluster.h"
#include "lib/config.h"
#include "lib/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_PREFIX "ed25519:"

int cluster_key_parse(const char *s, uint8_t pk[32])
{
	const char *h = s + strlen(KEY_PREFIX);

	if (strncmp(s, KEY_PREFIX, strlen(KEY_PREFIX)) || strlen(h) != 64 || strspn(h, "0123456789abcdef") != 64)
		return -1;
	return hex_decode(h, pk, 32) < 0 ? -1 : 0;
}

void cluster_key_format(const uint8_t pk[32], char out[CLUSTER_KEY_TEXT])
{
	memcpy(out, KEY_PREFIX, strlen(KEY_PREFIX));
	hex_encode(pk, 32, out + strlen(KEY_PREFIX));
}

static int parse_keys(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	struct cluster_images *im = dst;
	size_t len;

	if (cf_node_type(n) != CF_NODE_SEQ)
		return cf_error(d, n, err, "images.trusted_keys: expected a list of public keys such as [ed25519:<64 hex digits>]");
	len = cf_seq_len(d, n);
	if (len > CLUSTER_KEYS_MAX)
		return cf_error(d, n, err, "images.trusted_keys: %zu keys, at most %d", len, CLUSTER_KEYS_MAX);
	if (len && !(im->keys = calloc(len, sizeof(*im->keys))))
		return verr_set(err, "out of memory");
	for (size_t i = 0; i < len; i++) {
		const cf_node *e = cf_seq_at(d, n, i);
		const char *s = cf_scalar(e);

		if (!s || cluster_key_parse(s, im->keys[i]) < 0)
			return cf_error(d, e, err, "images.trusted_keys: expected a public key 'ed25519:<64 lowercase hex digits>' "
					"(the .pub file of `vhpc image keygen`), got '%.80s'", s ? s : "a list or mapping");
		for (size_t k = 0; k < i; k++)
			if (!memcmp(im->keys[k], im->keys[i], 32))
				return cf_error(d, e, err, "images.trusted_keys: '%.80s' is listed twice", s);
		im->nkeys = i + 1;
	}
	return 0;
}

static void release_keys(void *dst)
{
	struct cluster_images *im = dst;

	free(im->keys);
	im->keys = NULL;
	im->nkeys = 0;
}

#define IF(f) offsetof(struct cluster_images, f)
static const struct cf_field images_fields[] = {
	{ .key = "require_signed", .kind = CF_BOOL, .off = IF(require_signed) },
	{ .key = "trusted_keys", .kind = CF_CUSTOM, .off = 0, .parse = parse_keys, .release = release_keys },
	{ 0 }
};
const struct cf_schema cluster_images_schema = { "images", sizeof(struct cluster_images), images_fields };
