/*
 * The image store's record of which ids are images (imgstore_rec.c):
 * tagged/<id>.json for every manifest root pushed and tagged, with the
 * names that tag it now.  Every object of the store is named by its
 * sha256, files and manifests alike: this record, not the object, says
 * that an id is an image.  Private to imgstore.c, which holds its lock
 * around every call.
 */
#ifndef VHPC_SCHED_IMGSTORE_REC_H
#define VHPC_SCHED_IMGSTORE_REC_H

#include "lib/err.h"
#include <stdbool.h>

#define IMGSTORE_REC_NAMES 64        /* names one id may have at once */

struct imgstore_rec {
	int n;
	char names[IMGSTORE_REC_NAMES][65];  /* that tag it now, newest first; none: removed */
	char was[65];                        /* the name it was tagged with last */
	bool kvm;                            /* it has the kvm parts */
};

/* id's record from the folder tfd: 1 when it has none, else 0 or -1. */
int imgstore_rec_read(int tfd, const char *id, struct imgstore_rec *r, struct verr *err);
int imgstore_rec_write(int tfd, const char *id, const struct imgstore_rec *r, struct verr *err);
/* name tags id (made an image if it was none). */
int imgstore_rec_add(int tfd, const char *id, const char *name, bool kvm, struct verr *err);
/* Whether the record lists name. */
bool imgstore_rec_has(const struct imgstore_rec *r, const char *name);
/* fn for every record, in no order; a record fn changes is written back
 * (fn returns 1), one it wants gone is removed (2); -1 stops. */
int imgstore_rec_each(int tfd, int (*fn)(const char *id, struct imgstore_rec *r, void *arg), void *arg,
		      struct verr *err);

#endif
