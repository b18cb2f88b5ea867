/*
 * A byte stream through the cluster's relays, sealed end to end.
 */
#ifndef VHPC_LIB_WIREPIPE_H
#define VHPC_LIB_WIREPIPE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * After a munge-sealed request and reply (lib/wire.h) have opened it, a
 * connection can carry a stream (vhpc exec: the CLI <-> vhpc-ctld <->
 * vhpcd <-> a guest's agent).  The wire's sealing covers only the
 * messages, so the stream is sealed by its two ends with a key the
 * messages carried (WPIPE_KEY_LEN bytes, made for that stream alone):
 * libsodium's secretstream (XChaCha20-Poly1305), one per direction under
 * its own subkey, so that nothing on the way can read, change, reorder,
 * reflect or cut it unnoticed (a stream that ends without its final
 * message is an error, not an end).  The relays in between only copy.
 *
 * Sealed framing, per direction: a 24-byte secretstream header, then
 * messages u32 big-endian length (WPIPE_ABYTES..WPIPE_CHUNK+WPIPE_ABYTES)
 * | ciphertext; the last carries the FINAL tag and no data.
 */
#define WPIPE_KEY_LEN 32
#define WPIPE_CHUNK   (64u << 10)
#define WPIPE_ABYTES  17u

/* Relays until both directions have ended: what plain_fd gives goes
 * sealed to sealed_fd, what sealed_fd gives goes opened to plain_fd.  The
 * two ends of a stream pass opposite `initiator`.  Each end's EOF is
 * passed on as a half-close (shutdown SHUT_WR); a failure (a bad or cut
 * message, a reset) shuts both sockets down.  Returns 0 when both
 * directions ended cleanly, -1 otherwise.  Closes neither descriptor. */
int wpipe_relay(int plain_fd, int sealed_fd, const uint8_t key[WPIPE_KEY_LEN], bool initiator);
/* Copies bytes both ways between a and b (a relay in the middle, which
 * holds no key), with half-closes passed on; returns once both ended. */
void wpipe_splice(int a, int b);

#endif
