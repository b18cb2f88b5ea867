/*
 * The credential that opens every wire message (lib/wire.h).
 */
#ifndef VHPC_LIB_WIRE_CRED_H
#define VHPC_LIB_WIRE_CRED_H

#include <sodium.h>
#include <stdint.h>
#include "lib/err.h"
#include "lib/wire.h"

/* What the credential signs: which request this is (or answers), and the
 * length and key of the sealed body that follows. */
struct wire_hdr {
	bool reply;
	char id[WIRE_ID_HEX + 1];
	uint32_t len;
	uint8_t key[crypto_secretbox_KEYBYTES];
};

/* The JSON object that is exactly text[0..len) (at most depth levels
 * deep), or NULL. */
struct json_object *wire_json_object(const char *text, size_t len, int depth);

/* A munge credential (malloc'd) of h, restricted to uid to. */
int wire_cred_encode(const struct wire_hdr *h, uid_t to, char **cred, struct verr *err);
/* Checks cred with munged (valid, and restricted to this process's uid)
 * and fills h and the sender's uid and gid. */
int wire_cred_decode(const char *cred, struct wire_hdr *h, struct wire_peer *peer,
		     struct verr *err);

#endif
