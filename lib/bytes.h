/*
 * Random bytes and hex.
 */
#ifndef VHPC_LIB_BYTES_H
#define VHPC_LIB_BYTES_H

#include <stddef.h>

/* Random bytes from the kernel (libsodium). */
void random_bytes(void *buf, size_t len);
/* Lowercase hex of len bytes into out (2*len+1). */
void hex_encode(const void *buf, size_t len, char *out);
int hex_decode(const char *hex, void *buf, size_t len);

#endif
