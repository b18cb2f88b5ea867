/*
 * The authenticated channel between processes that share a key.
 */
#ifndef VHPC_LIB_CHAN_H
#define VHPC_LIB_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/err.h"

/*
 * An authenticated, framed byte channel over a stream socket.
 *
 * Both ends share a 32-byte key.  The server sends a random nonce first;
 * every frame after that carries HMAC-SHA256(key, nonce || direction ||
 * sequence || type || payload), so frames cannot be forged, replayed from
 * another session, reordered or reflected.  Frames are capped at
 * CHAN_MAX_FRAME; a peer that sends more, or a bad MAC, ends the session.
 */
#define CHAN_KEY_LEN   32
#define CHAN_MAX_FRAME (1u << 20)

struct chan {
	int fd;
	bool server;
	uint8_t key[CHAN_KEY_LEN];
	uint8_t nonce[16];
	uint64_t tx_seq, rx_seq;
};

/* Frame types; payload formats are the user's business. */
enum chan_type {
	CHAN_JSON   = 1,  /* a JSON object (request, reply, event) */
	CHAN_STDOUT = 2,
	CHAN_STDERR = 3,
	CHAN_STDIN  = 4,
	CHAN_EOF    = 5,  /* payload: one byte, the stream type that ended */
	CHAN_EXIT   = 6,  /* payload: JSON {"status":N} or {"signal":N} */
	CHAN_WINSIZE = 7, /* a pty's new size: u16 rows, u16 columns (big-endian) */
};

int chan_key_load(const char *path, uint8_t key[CHAN_KEY_LEN], struct verr *err);
int chan_key_create(const char *path, uint8_t key[CHAN_KEY_LEN], struct verr *err);
/* Handshake; timeouts in milliseconds (0 = none). */
int chan_server(struct chan *c, int fd, const uint8_t key[CHAN_KEY_LEN],
		int timeout_ms, struct verr *err);
int chan_client(struct chan *c, int fd, const uint8_t key[CHAN_KEY_LEN],
		int timeout_ms, struct verr *err);
int chan_send(struct chan *c, uint8_t type, const void *buf, size_t len,
	      struct verr *err);
/* Receives one frame into a malloc'd buffer (NUL-terminated for convenience).
 * Returns 0 on a frame, 1 on clean EOF before a frame, -1 on error. */
int chan_recv(struct chan *c, uint8_t *type, char **buf, size_t *len,
	      int timeout_ms, struct verr *err);
/* chan_recv refusing, before it allocates or reads it, a frame longer than
 * max: holding the key does not make a peer's lengths trustworthy. */
int chan_recv_max(struct chan *c, uint8_t *type, char **buf, size_t *len, size_t max,
		  int timeout_ms, struct verr *err);
void chan_close(struct chan *c);
/* chan_close once the peer has closed its end too: this end shuts down
 * its writing, then reads (and drops) until the peer's EOF, at most
 * timeout_ms.  0 when the EOF came, -1 when it did not.  For a peer that
 * must be gone before the caller goes on (a guest frozen for CRIU must
 * hold no socket of the node agent's). */
int chan_close_wait(struct chan *c, int timeout_ms);

#endif
