/*
 * Image objects on the wire (scheduler/PROTOCOL.md: image_have, image_put,
 * image_get and their answers): lists of sha256 names, and parts of
 * objects, {object, size, offset, len}, whose bytes follow one another in
 * the message's data (WIRE_DATA, lib/wire.h: after the credential, which
 * signs their digest).  Shared by vhpc-ctld,
 * vhpcd and the CLI; every field is checked (fuzzed with the cluster's
 * messages).
 */
#ifndef VHPC_LIB_IMGWIRE_H
#define VHPC_LIB_IMGWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/err.h"

struct json_object;

#define IMGWIRE_OBJECT_MAX (1ull << 40)   /* bytes of one object */
#define IMGWIRE_CHUNK      (4u << 20)     /* bytes of object data per message (WIRE_MAX_DATA) */
#define IMGWIRE_MAX_NAMES  4096           /* objects named by one image_have */
#define IMGWIRE_MAX_GET    256            /* objects named by one image_get */
#define IMGWIRE_MAX_PARTS  64             /* parts of one image_put */

/* Bytes of one object (a file named by its sha256). */
struct image_chunk {
	char object[65];
	uint64_t size;          /* the whole object's size, as the sender holds it */
	uint64_t offset;        /* of data in it */
	uint8_t *data;          /* malloc'd */
	size_t len;
};
void image_chunks_free(struct image_chunk *c, int n);

/* o[key]: an array of at most max sha256 names (64 lowercase hex digits);
 * *out malloc'd (n may be 0 when not required and absent). */
int imgwire_shas(struct json_object *o, const char *key, bool required, int max, char (**out)[65], int *n,
		 struct verr *err);
/* o[key]: an array of 1..max_parts parts, each within its object's size,
 * whose lengths add up to the message's data (at most max_bytes): each
 * chunk gets its slice. */
int imgwire_parts(struct json_object *o, const char *key, int max_parts, size_t max_bytes,
		  struct image_chunk **out, int *n, struct verr *err);
/* One part as JSON (its bytes go into the message's data, in order). */
struct json_object *imgwire_part(const char *object, uint64_t size, uint64_t offset, size_t len);
/* An array of the names. */
struct json_object *imgwire_sha_array(const char *const *v, int n);

#endif
