/*
 * Random bytes and hex.
 */
#ifndef VHPC_LIB_BYTES_H
#define VHPC_LIB_BYTES_H

#include <stdbool.h>
#include <stddef.h>

/* Random bytes from the kernel (libsodium). */
void random_bytes(void *buf, size_t len);
/* Lowercase hex of len bytes into out (2*len+1). */
void hex_encode(const void *buf, size_t len, char *out);
int hex_decode(const char *hex, void *buf, size_t len);
/* A sha256 as vhpc writes one: 64 lowercase hex digits (image ids, objects). */
bool sha256_hex_ok(const char *s);

#endif
