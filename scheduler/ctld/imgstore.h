/*
 * The cluster's image store, kept by vhpc-ctld in <state>/images: every
 * file of every pushed image once, by its sha256 (objects/<2 hex>/<sha>;
 * an image's manifest is the object named by the image's id), names
 * (refs/<name>.json) pointing at ids, and the record of which ids are
 * images (tagged/<id>.json).  Uploads are checked against their sha256
 * before they become objects.  Thread-safe; no other vhpc-ctld state is
 * touched here, so it is unit-tested on its own.
 */
#ifndef VHPC_SCHED_IMGSTORE_H
#define VHPC_SCHED_IMGSTORE_H

#include "lib/err.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define IMGSTORE_HISTORY    8                /* earlier ids a name remembers */

struct imgstore;

struct imgstore_ref {
	char name[65];
	char id[65];
	int64_t pushed;           /* unix time */
	uid_t uid;                /* who pushed it */
	uint64_t bytes;           /* of its files */
	long files;
	char format[12];          /* tree, squashfs, erofs */
	bool kvm;
	char kernel_release[128];
	int nprev;
	char prev[IMGSTORE_HISTORY][65];  /* ids the name had before, newest first */
};

int imgstore_open(struct imgstore **out, const char *dir, struct verr *err);
void imgstore_close(struct imgstore *s);

/* missing[i] for objs[i] not in the store.  All of them belong to a push
 * from now until it tags them (or an hour passes): a collection leaves
 * them alone meanwhile. */
int imgstore_missing(struct imgstore *s, const char *const *objs, int n, bool *missing, struct verr *err);
/* Appends data at offset to an upload of object (size bytes in all); *next
 * is how much of it the store holds afterwards (size once it is an object:
 * the bytes hashed to its name).  An offset other than *next writes
 * nothing.  Bytes that hash to something else are refused and dropped. */
int imgstore_put(struct imgstore *s, const char *object, uint64_t size, uint64_t offset,
		 const uint8_t *data, size_t len, uint64_t *next, struct verr *err);
/* Up to max bytes of object from offset; *size is its whole size. */
int imgstore_read(struct imgstore *s, const char *object, uint64_t offset, uint8_t *buf, size_t max,
		  size_t *len, uint64_t *size, struct verr *err);
/* Names id (whose manifest and every file are in the store) as name. */
int imgstore_tag(struct imgstore *s, const char *name, const char *id, uid_t uid, int64_t now,
		 struct imgstore_ref *out, struct verr *err);
/* The ref of a name; -1 with "no image named" when there is none. */
int imgstore_lookup(struct imgstore *s, const char *name, struct imgstore_ref *out, struct verr *err);
/*
 * Which ids are images: every object is named by its sha256, a file of an
 * image as its manifest is, so the store keeps a record (tagged/) of the
 * ids root tagged, with the names that tag them.  An id is an image from
 * its first tag until every name it had is removed (imgstore_untag), or
 * until a collection takes its manifest (an earlier version no job held).
 */
struct imgstore_image {
	char name[65];            /* the name the job runs it as */
	bool kvm;
};
/* Whether a new job may name image id: an image, not removed, its
 * manifest here; name (or NULL) must be one of its names.  The error
 * names the id and why not. */
int imgstore_image(struct imgstore *s, const char *id, const char *name, struct imgstore_image *out,
		   struct verr *err);
/* Whether id is an image of the store's, removed or not (jobs that held
 * it keep it), whose manifest is here: what a node may pull as one. */
bool imgstore_is_image(struct imgstore *s, const char *id);
/* Removes a name, and with it every id it named from those a new job may
 * name (queued jobs keep theirs); *id gets what it named. */
int imgstore_untag(struct imgstore *s, const char *name, char id[65], struct verr *err);
/* Retires one earlier version of a name: the id among those the name had
 * before (ref.prev) that is, or starts with, version (at least 12 hex
 * digits).  A new job may no longer name it by the name (queued jobs keep
 * it; with no name left it is removed, as after imgstore_untag), and the
 * name's history forgets it.  The version the name has now is refused:
 * removing that is imgstore_untag's.  *id gets the whole id. */
int imgstore_retire(struct imgstore *s, const char *name, const char *version, char id[65], struct verr *err);
/* Every ref, by name; *out malloc'd. */
int imgstore_refs(struct imgstore *s, struct imgstore_ref **out, size_t *n, struct verr *err);
/* Removes the objects no name and no image in held[] needs, except those
 * of pushes under way (imgstore_missing), and uploads left for a day.
 * -1, removing nothing, when a ref or a needed manifest cannot be read. */
int imgstore_gc(struct imgstore *s, const char *const *held, int nheld, long *removed, uint64_t *freed,
		struct verr *err);
/* The signatures of image id (images/sign.c; none: an empty set), kept in
 * signatures/<id>; and more of them, each checked against id with its
 * own key first (whether a node trusts the key is the node's to say).
 * *total: how many the image has now. */
struct image_sigs;
int imgstore_sigs(struct imgstore *s, const char *id, struct image_sigs *out, struct verr *err);
int imgstore_sign(struct imgstore *s, const char *id, const struct image_sigs *add, int *total, struct verr *err);
/* Bytes and objects the store holds. */
void imgstore_usage(struct imgstore *s, uint64_t *bytes, long *objects);

#endif
