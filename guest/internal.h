/*
 * vhpc-guestd internals (private to guest/).  Others talk to guestd only
 * through its wire protocol (guest/PROTOCOL.md) and lib's gexec_* client.
 *
 *   opts.c     command line and kernel command line (vhpc.*=) options
 *   proto.c    request parsing/validation, replies, the per-frame dispatcher
 *   info.c     what "hello" reports
 *   spawn.c    starting a command in its own session/process group
 *   session.c  one authenticated connection (runs in its own process)
 *   main.c     listeners, session processes, init duties, shutdown
 */
#ifndef VHPC_GUEST_INTERNAL_H
#define VHPC_GUEST_INTERNAL_H

#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>

#include "lib/err.h"
#include "lib/gexec.h"

/* Requests say which version they speak; 2 added exec's pty and the
 * WINSIZE frame, so a version-1 request is still served as before. */
#define GD_PROTO_VERSION   2
#define GD_PROTO_MIN       1
/* A pty's rows and columns (and TERM's length) */
#define GD_PTY_MAX_DIM     4096
#define GD_TERM_MAX        64
#define GD_MAX_LISTEN      8
/* argv + env entries of one exec, and their bytes (like a small ARG_MAX) */
#define GD_MAX_ARGS        4096
#define GD_MAX_ARG_BYTES   (256u * 1024)
/* A request frame; the channel itself caps every frame at CHAN_MAX_FRAME. */
#define GD_MAX_REQUEST     (512u * 1024)
/* Requests are flat: object -> array -> string. */
#define GD_JSON_DEPTH      4
/* Output is relayed in frames of at most this much. */
#define GD_OUT_CHUNK       (64u * 1024)
/* Stdin a session holds for a command that does not read it yet; past
 * this it stops reading the client's frames (the client then stops
 * sending: gexec_run sends only while the socket takes it). */
#define GD_STDIN_MAX       (1u << 20)
/* Once a frame's first byte arrived, the rest must follow within this. */
#define GD_FRAME_TIMEOUT_MS 10000
#define GD_MAX_TIMEOUT_MS  (366LL * 24 * 3600 * 1000)

/* ----------------------------------------------------------------- opts */

enum gd_listen_kind { GD_LISTEN_TCP = 1, GD_LISTEN_VSOCK };

struct gd_listen {
	enum gd_listen_kind kind;
	char host[64];            /* TCP: numeric or name; "" = any */
	char port[8];             /* TCP: "0" picks a free port */
	unsigned vsock_port;
	char spec[96];            /* as given, for messages */
};

struct gd_opts {
	char name[64];
	struct gd_listen listen[GD_MAX_LISTEN];
	int nlisten;
	char control[108];        /* unix socket path ("" = none) */
	char key[256];
	char log[256];
	char stdio[256];          /* stdout+stderr file, opened by guestd ("" = as inherited) */
	bool init;
	long long max_sessions;
	long long handshake_ms;
	long long grace_ms;
	char spool[256];          /* detached commands' output and state ("" = none) */
};

void gd_opts_defaults(struct gd_opts *o);
/* Returns 0, 1 when --help/--version was printed (exit 0), -1 on error. */
int gd_opts_parse(struct gd_opts *o, int argc, char **argv, struct verr *err);
/* Applies vhpc.NAME=VALUE words of a kernel command line; other words are
 * ignored, unknown vhpc.* keys are an error naming them. */
int gd_opts_apply_cmdline(struct gd_opts *o, const char *text, const char *where,
			  struct verr *err);
int gd_listen_parse(const char *spec, struct gd_listen *l, struct verr *err);
/* After parsing: defaults for what was not given, relations between options. */
int gd_opts_finish(struct gd_opts *o, struct verr *err);
void gd_usage(FILE *f);

/* ---------------------------------------------------------------- proto */

enum greq_op { GREQ_HELLO = 1, GREQ_EXEC, GREQ_SIGNAL, GREQ_SHUTDOWN,
	       /* detached commands (detached.c) */
	       GREQ_SPAWN, GREQ_STATUS, GREQ_WAIT, GREQ_KILL, GREQ_OUTPUT, GREQ_MAX = GREQ_OUTPUT };
/* A detached command's id: a file name in the spool dir. */
#define GD_ID_MAX          32
/* The longest a wait request may block. */
#define GD_MAX_WAIT_MS     60000
/* The most an output request returns at once (base64 in one frame). */
#define GD_MAX_OUTPUT      GEXEC_MAX_OUTPUT

struct greq {
	enum greq_op op;
	char **argv;              /* NULL-terminated */
	size_t argc;
	char **env;               /* NULL-terminated NAME=VALUE */
	size_t envc;
	char *cwd;                /* NULL = $HOME, else / */
	long long timeout_ms;     /* 0 = none */
	bool stdin_pipe;          /* exec: the command's stdin comes in STDIN frames */
	bool pty;                 /* exec (v2): stdin, stdout and stderr are a pty's */
	unsigned short rows, cols;
	char term[GD_TERM_MAX + 1]; /* TERM for the command ("" = guestd's) */
	int sig;
	char id[GD_ID_MAX + 1];   /* spawn, status, wait, kill, output */
	long long wait_ms;        /* wait */
	long long offset, max;    /* output */
};

const char *greq_op_name(enum greq_op op);
/* Parses and validates one request frame; the error names the field. */
int greq_parse(const char *buf, size_t len, struct greq *r, struct verr *err);
void greq_free(struct greq *r);

/* Reply texts (malloc'd JSON).  op may be NULL when it is unknown. */
char *gd_reply_error(const char *op, const char *msg);
/* Consumes extra (may be NULL): its members are added to the reply. */
char *gd_reply_ok(const char *op, struct json_object *extra);
/* A WINSIZE frame's payload: exactly 4 bytes, both 1..GD_PTY_MAX_DIM. */
int gd_winsize_parse(const char *buf, size_t len, unsigned short *rows, unsigned short *cols,
		     struct verr *err);
/* CHAN_EXIT payload from a wait status. */
char *gd_exit_json(int wstatus, bool timed_out);

enum gd_state { GD_IDLE, GD_RUNNING };
enum gd_action {
	GD_ACT_REPLY = 1,         /* send reply (an error), nothing else */
	GD_ACT_HELLO,
	GD_ACT_EXEC,
	GD_ACT_SIGNAL,
	GD_ACT_SHUTDOWN,
	GD_ACT_SPAWN,
	GD_ACT_STATUS,            /* status and wait */
	GD_ACT_KILL,
};
struct gd_step {
	enum gd_action act;
	char *reply;              /* GD_ACT_REPLY */
	struct verr why;          /* GD_ACT_REPLY: the problem, for the log */
	struct greq req;          /* the other actions */
};
/* What the session does with one frame from the client in state st.
 * Pure: no I/O, so it can be unit tested and fuzzed. */
void gd_dispatch(enum gd_state st, uint8_t type, const char *buf, size_t len,
		 struct gd_step *out);
void gd_step_free(struct gd_step *s);

/* ----------------------------------------------------------------- info */

/* Members of the hello reply. */
struct json_object *gd_hello_info(const struct gd_opts *o, double started_s, pid_t main_pid);

/* ---------------------------------------------------------------- spawn */

struct gd_child {
	pid_t pid;                /* also the process group and session id */
	int out_fd, err_fd;       /* read ends, non-blocking */
	int in_fd;                /* write end of its stdin (stdin_pipe), non-blocking; else -1 */
	bool pty;                 /* out_fd is the pty's master (and in_fd a copy of it) */
};
/* Starts r->argv in a new session with stdin /dev/null (or a pipe, or a pty
 * that is its controlling terminal, as r asks); fails (and reaps)
 * when the cwd or the program cannot be used, naming which. */
int gd_spawn(const struct greq *r, struct gd_child *c, struct verr *err);
/* base overridden/extended by add (NAME=VALUE); malloc'd array of pointers
 * into base/add, NULL-terminated. */
char **gd_merge_env(char *const *base, char *const *add);

/* ------------------------------------------------------------- detached */

/*
 * Detached commands (spawn): each runs under a keeper process that outlives
 * the connection that started it, writes the command's stdout+stderr to
 * <spool>/<id>.out and its state to <spool>/<id>.state (JSON, replaced
 * atomically), and stops it on timeout or SIGTERM.
 */
int gd_spawn_fd(const struct greq *r, int out_fd, pid_t *pid, struct verr *err);
/* Starts r (op spawn); on success the reply's members (id, pid). */
int gd_detached_spawn(const struct gd_opts *o, const struct greq *r,
		      struct json_object **reply, struct verr *err);
/* The state as reply members; wait_ms > 0 blocks until it exited or the
 * time passed (stop, when set, cuts the wait short). */
int gd_detached_status(const struct gd_opts *o, const char *id, long long wait_ms,
		       volatile sig_atomic_t *stop, struct json_object **reply, struct verr *err);
int gd_detached_kill(const struct gd_opts *o, const char *id, int sig, struct verr *err);
/* Up to max bytes of its output from offset on, as reply members: "offset",
 * "data" (base64; empty at the end so far), "size" (the output's bytes now). */
int gd_detached_output(const struct gd_opts *o, const char *id, long long offset, size_t max,
		       struct json_object **reply, struct verr *err);
/* guestd is stopping: every keeper stops its command (TERM, grace, KILL);
 * waits for them, with a hard limit. */
void gd_detached_stop_all(const struct gd_opts *o);

/* -------------------------------------------------------------- session */

struct gd_session_ctx {
	const struct gd_opts *o;
	const uint8_t *key;
	int shutdown_fd;          /* write a byte here to stop guestd */
	const char *peer;         /* for log lines */
	double started_s;
	pid_t main_pid;
};
/* Serves one connection until it ends; never returns. */
void gd_session(int fd, const struct gd_session_ctx *s) __attribute__((noreturn));

#endif
