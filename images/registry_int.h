/* Internal to images/: pulls from a registry (registry*.c). */
#ifndef VHPC_IMAGES_REGISTRY_INT_H
#define VHPC_IMAGES_REGISTRY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/err.h"

/* What a registry may make us fetch: more is refused before a byte of a
 * layer comes (a hostile registry's manifest says what it will send, and
 * skopeo checks every blob against it). */
#define IMAGE_REG_MAX_MANIFEST (4u << 20)       /* as containers/image's own cap */
#define IMAGE_REG_MAX_LAYERS   256u
#define IMAGE_REG_MAX_BLOB     (16ull << 30)    /* one layer or config */
#define IMAGE_REG_MAX_TOTAL    (64ull << 30)    /* all layers of an image */
#define IMAGE_REG_MAX_INDEX    1024u            /* entries of an image index */

/* docker://REGISTRY/REPO:TAG or docker://REGISTRY/REPO@sha256:HEX. */
struct image_reg_ref {
	char registry[256];     /* host[:port]; named, never docker.io implied */
	char repo[256];         /* path of lowercase components */
	char tag[129];          /* "" when pinned by digest */
	char digest[72];        /* "sha256:<64 hex>" or "" */
};
int image_reg_ref_parse(const char *src, struct image_reg_ref *r, struct verr *err);
/* docker://REGISTRY/REPO@DIGEST, what is copied once the digest is known. */
void image_reg_ref_pinned(const struct image_reg_ref *r, const char *digest, char *out, size_t len);

struct image_reg_blob {
	char digest[72];        /* sha256:<64 hex> */
	uint64_t size;
};
/* A manifest as the registry sent it: an image's (config and layers), or
 * an index (a manifest list), whose entry for this host's platform is
 * what skopeo copies. */
struct image_reg_manifest {
	bool index;
	struct image_reg_blob instance; /* index: linux/<arch>'s manifest */
	struct image_reg_blob config;
	struct image_reg_blob *layers;
	size_t nlayers;
	uint64_t total;                 /* of the layers */
	uint64_t largest;               /* blob: layer or config */
};
/* Every field checked and bounded (IMAGE_REG_MAX_*); arch is the OCI name
 * of this host's ("amd64", "arm64").  Fuzzed: fuzz-image-registry. */
int image_reg_manifest_parse(const char *text, size_t len, const char *arch, struct image_reg_manifest *m,
			     struct verr *err);
void image_reg_manifest_free(struct image_reg_manifest *m);
/* "sha256:" and 64 lowercase hex digits. */
bool image_reg_digest_ok(const char *d);

/* The layer cache (registry_cache.c): <store>/.layer-cache/sha256/<hex>,
 * what skopeo's --dest-shared-blob-dir writes (only whole blobs whose
 * digest it checked), owned by the importing user and private to it. */
int image_reg_cache_dir(char *dir, size_t len, struct verr *err);
bool image_reg_cache_has(const char *dir, const char *digest);
/* Links the layout's blobs (index.json's manifest, its config and layers)
 * from the cache into <layout>/blobs/sha256 for umoci, and marks them used. */
int image_reg_cache_link(const char *dir, const char *layout, struct verr *err);
/* Removes the least recently used blobs until the cache holds at most
 * max bytes. */
int image_reg_cache_trim(const char *dir, uint64_t max, struct verr *err);

struct image_registry_opts;
/* What a pull did: the digest it pinned, and the bytes of layers (and
 * config) it fetched against those the layer cache had. */
struct image_registry_pull {
	char digest[72];
	size_t layers, cached_layers;
	uint64_t fetched, cached;
	double seconds;         /* skopeo's copy */
};
/* Copies src (docker://...) into <stage>/.oci:vhpc, its blobs linked from
 * the layer cache; policy: skopeo's signature policy file. */
int image_registry_fetch(const char *src, const struct image_registry_opts *o, const char *stage,
			 const char *policy, struct image_registry_pull *out, struct verr *err);

/* skopeo's error text as a first line saying which failure it is (say,
 * or one found from the text when NULL), its own words kept after it. */
void image_reg_explain(const struct image_reg_ref *r, const char *what, const char *say, struct verr *err);

#endif
