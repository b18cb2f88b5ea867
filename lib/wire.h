/*
 * Munge-authenticated JSON messages between daemons and clients.
 */
#ifndef VHPC_LIB_WIRE_H
#define VHPC_LIB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "lib/err.h"

/*
 * Messages between daemons and clients (vhpc <-> vhpc-ctld <-> vhpcd),
 * one request and its reply per connection (scheduler/PROTOCOL.md):
 *
 *   u32 big-endian length | munge credential (at most WIRE_MAX_CRED bytes)
 *   | body (the JSON message, sealed) [| data]
 *
 * The credential is all a receiver reads before munged has vouched for the
 * sender, so a peer without one costs it WIRE_MAX_CRED bytes (on the
 * stack), never a body's worth.  It carries a small header: the body's
 * length, a fresh key that seals the body (libsodium secretbox: only the
 * credential's recipient can read it, and any change to it is refused),
 * and the request id.  munge restricts the credential to its recipient's
 * uid (MUNGE_OPT_UID_RESTRICTION): requests to root (the daemons), replies
 * to the uid that sent the request; a receiver refuses a credential
 * restricted to anyone else, or to nobody.  A reply names the id of the
 * request it answers, and wire_call takes no other: a reply cannot be
 * replayed to another request.  munged gives the sender's uid and gid and
 * refuses forged, replayed and expired credentials.  Every body has "v"
 * (WIRE_VERSION, added by wire_send) and "type".  $VHPC_MUNGE_SOCKET
 * selects munged's socket.
 *
 * A daemon that cannot take a request (over its connection limits, or a
 * frame it refuses before knowing who sent it) answers with a notice
 * instead: u32 (WIRE_NOTICE | length) | text.  It is not authenticated: a
 * client treats it as a failure whose reason it shows, nothing more.
 */
#define WIRE_VERSION      3
#define WIRE_MAX_CRED     1024
#define WIRE_MAX_PAYLOAD  (512u << 10)
#define WIRE_NOTICE       0x80000000u
#define WIRE_MAX_NOTICE   512
/* A request id: 16 random bytes in hex. */
#define WIRE_ID_HEX       32

/*
 * Bulk bytes (image files) ride after a message's body rather than inside
 * it: the sender gives them as the message's WIRE_DATA string
 * (json_object_new_string_len), wire_send replaces it by "data_len" and
 * "data_sha256", which the sealed body carries, and sends the bytes after
 * the body, sealed with the body's key; the receiver reads exactly that
 * many, opens them, refuses them unless they hash to the digest, and gives
 * them back as WIRE_DATA.  So the bytes are as private and authenticated
 * as the JSON, and cost a sha256 and a secretbox rather than JSON's
 * escaping.  A payload naming WIRE_DATA itself is refused, and so is data
 * from a sender other than root (admins push images, daemons serve them):
 * a user's message costs its receiver at most WIRE_MAX_PAYLOAD.
 */
#define WIRE_DATA         "_data"
#define WIRE_MAX_DATA     (4u << 20)

struct json_object;
/* Who sent a message (from munged), and the id of the request it is. */
struct wire_peer { uid_t uid; gid_t gid; char id[WIRE_ID_HEX + 1]; };
/* Where a message goes: uid is the recipient's (the credential is
 * restricted to it); id is the request's own, or, for a reply, the id
 * of the request it answers. */
struct wire_to { uid_t uid; bool reply; char id[WIRE_ID_HEX + 1]; };

/* Sends msg (its WIRE_DATA, if any, after the body: msg is changed),
 * within timeout_ms (0: no limit) however slowly the peer reads. */
int wire_send(int fd, struct json_object *msg, const struct wire_to *to, int timeout_ms,
	      struct verr *err);
/* Receives a request (answers NULL: its id goes to peer->id) or the reply
 * to request id answers.  0: a message; 1: clean EOF; -1: error (bad
 * credential, replay, expiry, another recipient, another request's reply,
 * malformed JSON, wrong version, oversize, timeout, a notice). */
int wire_recv(int fd, struct json_object **msg, struct wire_peer *peer, const char *answers,
	      int timeout_ms, struct verr *err);
/* A notice (text cut to WIRE_MAX_NOTICE), sent without waiting: the
 * connection is about to close. */
void wire_notice(int fd, const char *text);
const char *wire_type(struct json_object *msg);
/* {"type":"error","error":"..."} */
struct json_object *wire_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A daemon's accept loop (never returns): each connection gets a thread
 * that receives one message, calls the handler, and sends what it returns
 * (NULL: "unhandled message") as the reply.  A message that fails to
 * decode gets a notice and no handler call.  who names the peer for logs,
 * ctx is wire_serve's (the daemon's state); stack 0 keeps the default
 * thread stack size.  Limits (lib/wire_serve.c,
 * from the environment, so every daemon takes them the same way):
 * VHPC_WIRE_MAX_CONNS connections at once (default 1024),
 * VHPC_WIRE_MAX_CONNS_PER_ADDR from one peer address (256), and
 * VHPC_WIRE_TIMEOUT_MS for a peer to send its request, and again to take
 * the reply (10000).  A connection over a limit gets a notice and is
 * closed at once. */
typedef struct json_object *(*wire_handler)(struct json_object *msg, const struct wire_peer *peer,
					    const char *who, void *ctx);
void wire_serve(int lfd, size_t stack, wire_handler handle, void *ctx) __attribute__((noreturn));

/* From within a handler: once its reply is sent, the connection goes to
 * fn (in the connection's thread, which then holds it and its slot of the
 * limits for as long as fn runs) instead of being closed; fn must not
 * close fd.  A reply that could not be sent calls fn with fd -1, so that
 * it frees arg.  For streams a request opens (lib/wirepipe.h). */
typedef void (*wire_takeover_fn)(int fd, void *arg);
void wire_serve_takeover(wire_takeover_fn fn, void *arg);

/* One request to a daemon (root) and its reply on a fresh connection.
 * A reply of type "error" is returned as such (rc 0): the caller decides. */
int wire_call(const char *hostport, struct json_object *req, struct json_object **reply,
	      struct wire_peer *peer, int timeout_ms, struct verr *err);
/* wire_call that keeps the connection for what follows the reply: *fd
 * gets it when the reply is not an error (else it is closed, *fd -1). */
int wire_call_open(const char *hostport, struct json_object *req, struct json_object **reply,
		   struct wire_peer *peer, int timeout_ms, int *fd, struct verr *err);
/* The reply's "error" text, or NULL when it is not an error reply. */
const char *wire_error_text(struct json_object *reply);
/* An error reply's "code" (its class, for a program to act on), or NULL
 * when it has none or is not an error reply. */
const char *wire_error_code(struct json_object *reply);
/* vhpcd's one code (scheduler/PROTOCOL.md, "Rules for every message"):
 * its part of the checkpoint a job_prepare restores from is damaged, so
 * no later attempt of that restart can succeed. */
#define WIRE_CODE_CKPT_DAMAGED "ckpt_damaged"

#endif
