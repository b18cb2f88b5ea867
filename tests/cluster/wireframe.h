/*
 * Wire frames made outside lib/wire.c (a second implementation of its
 * framing), each part chosen, so that tests can get any of them wrong.
 */
#ifndef VHPC_TESTS_WIREFRAME_H
#define VHPC_TESTS_WIREFRAME_H

#include <stddef.h>
#include <sys/types.h>

struct wireframe {
	const char *body;      /* sealed with the header's key */
	const char *header;    /* NULL: a proper one for body; else the
	                          credential holds this, and no body follows */
	const char *id;        /* the request id of a proper header */
	int ttl;               /* 0: munged's default */
	uid_t to;              /* the recipient: (uid_t)MUNGE_UID_ANY for no one */
	const char *sock;      /* munged's socket; NULL: $VHPC_MUNGE_SOCKET */
};

/* The whole frame (malloc'd), or NULL when munged would not sign it. */
char *wireframe_make(const struct wireframe *f, size_t *len);

#endif
