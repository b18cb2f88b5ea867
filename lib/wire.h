/*
 * Munge-authenticated JSON messages between daemons and clients.
 */
#ifndef VHPC_LIB_WIRE_H
#define VHPC_LIB_WIRE_H

#include <sys/types.h>
#include <stddef.h>
#include "lib/err.h"

/*
 * Messages between daemons and clients (vhpc <-> vhpc-ctld <-> vhpcd): a JSON
 * object inside a munge credential, so the receiver learns the sender's uid
 * from munged and the message cannot be forged, altered or replayed.  Every
 * payload has "v" (WIRE_VERSION, added by wire_send) and "type".
 * $VHPC_MUNGE_SOCKET selects munged's socket.
 */
#define WIRE_VERSION      1
#define WIRE_MAX_PAYLOAD  (512u << 10)
#define WIRE_MAX_FRAME    (1u << 20)

/*
 * Bulk bytes (image files) ride after a message's credential rather than
 * inside it: the sender gives them as the message's WIRE_DATA string
 * (json_object_new_string_len), wire_send replaces it by "data_len" and
 * "data_sha256", which the credential signs, and sends the bytes after
 * the frame; the receiver reads exactly that many, refuses them unless
 * they hash to the signed digest, and gives them back as WIRE_DATA.  So
 * the bytes are as authenticated as the JSON, and cost a sha256 rather
 * than munge's base64, encryption and JSON escaping.  A payload naming
 * WIRE_DATA itself is refused.
 */
#define WIRE_DATA         "_data"
#define WIRE_MAX_DATA     (4u << 20)

struct json_object;
struct wire_peer { uid_t uid; gid_t gid; };

/* Sends msg (its WIRE_DATA, if any, after the frame: msg is changed). */
int wire_send(int fd, struct json_object *msg, struct verr *err);
/* 0: a message; 1: clean EOF; -1: error (bad credential, replay, expiry,
 * malformed JSON, wrong version, oversize, timeout). */
int wire_recv(int fd, struct json_object **msg, struct wire_peer *peer,
	      int timeout_ms, struct verr *err);
int wire_decode(const char *cred, struct json_object **msg, struct wire_peer *peer,
		struct verr *err);
const char *wire_type(struct json_object *msg);
/* Sends r, frees it, and logs (naming peer) when the peer is gone. */
void wire_reply(int fd, struct json_object *r, const char *peer);
/* {"type":"error","error":"..."} */
struct json_object *wire_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A daemon's accept loop (never returns): each connection gets a thread
 * that receives one message, calls the handler, and sends what it returns
 * (NULL: "unhandled message").  A message that fails to decode gets an error
 * with "code":"rejected" and no handler call.  who names the peer for logs;
 * stack 0 keeps the default thread stack size. */
typedef struct json_object *(*wire_handler)(struct json_object *msg, const struct wire_peer *peer,
					    const char *who);
void wire_serve(int lfd, size_t stack, wire_handler handle) __attribute__((noreturn));

/* One request and its reply on a fresh connection.  A reply of type
 * "error" is returned as such (rc 0): the caller decides. */
int wire_call(const char *hostport, struct json_object *req, struct json_object **reply,
	      struct wire_peer *peer, int timeout_ms, struct verr *err);
/* The reply's "error" text, or NULL when it is not an error reply. */
const char *wire_error_text(struct json_object *reply);

#endif
