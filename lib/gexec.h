/*
 * The client side of vhpc-guestd's protocol (guest/PROTOCOL.md).
 */
#ifndef VHPC_LIB_GEXEC_H
#define VHPC_LIB_GEXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "lib/chan.h"

/*
 * Client side of the protocol vhpc-guestd serves (guest/PROTOCOL.md): over
 * an authenticated channel (per-job key), "hello" reports the guest's state
 * and "exec" runs a command with stdin from /dev/null, relaying stdout,
 * stderr and the exit status.  Used by the node agent (control socket) and by
 * vhpc-rsh (TCP on the job network).  One request at a time per channel;
 * a channel can carry several requests in turn.
 */
#define GUEST_PORT_DEFAULT 7707
/* The pause between two connects to a guest that refused or was unreachable. */
#define CONNECT_RETRY_MS 200
/* Where guests find the job key (vhpc-guestd --key, vhpc-rsh $VHPC_JOB_KEY). */
#define GUEST_KEY_PATH_DEFAULT "/vhpc/job.key"

/* Connect (each address getaddrinfo gives, in turn, within timeout_ms) and
 * run the channel handshake.  A refused or unreachable guest is tried
 * again every CONNECT_RETRY_MS until timeout_ms is over (a job network
 * may still be coming up).  Errors say which host/address and why. */
int gexec_connect_tcp(struct chan *c, const char *host, int port,
		      const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err);
int gexec_connect_unix(struct chan *c, const char *path,
		       const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err);
/* The connected socket of the unix socket at path, reached through an
 * O_PATH|O_NOFOLLOW descriptor of it: a symlink planted in its place (the
 * folder may be a guest's or a user's) is refused, never followed.
 * deadline in CLOCK_MONOTONIC ns (0 = none); what names it in errors. */
int gexec_unix_open(const char *path, uint64_t deadline, const char *what, struct verr *err);
/* Through a VMM's vsock bridge (Firecracker-style hybrid vsock, hv/hv.h):
 * connects to the unix socket uds, asks for the guest's vsock port with
 * "CONNECT <port>\n", expects "OK <host port>\n", then runs the handshake.
 * A refused port (nothing listening in the guest yet) and a VMM that does not
 * answer within timeout_ms are errors that say so; callers retry. */
int gexec_connect_vsock(struct chan *c, const char *uds, unsigned port,
			const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err);
/* The stream to a guest's agent before the channel's handshake, for a
 * relay whose client runs the channel itself (vhpc exec): the unix socket
 * sock (no symlink followed), or with vsock_port, that port through the
 * VMM's vsock bridge at sock. */
int gexec_open_stream(const char *sock, unsigned vsock_port, int timeout_ms, struct verr *err);
/* The guest's report as JSON text (malloc'd): name, hostname, pid, pidns,
 * netns (inode numbers), cpus, mems, cpuset_mems, addrs, uptime, ready... */
int gexec_hello(struct chan *c, char **info_json, int timeout_ms, struct verr *err);

struct gexec_req {
	const char *const *argv;   /* run as given (no shell), PATH searched */
	const char *const *env;    /* NAME=VALUE added to the guest's environment */
	const char *cwd;           /* NULL = the guest's $HOME if it is a directory, else / */
	int out_fd, err_fd;        /* where the command's output goes (-1: discard);
	                              a closed pipe raises SIGPIPE unless the caller
	                              ignores it (then gexec_run fails with EPIPE) */
	bool send_stdin;           /* gexec_run: in_fd is the command's stdin, sent as
	                              the guest takes it, then its end; else the
	                              command's stdin is /dev/null */
	int in_fd;
	int timeout_ms;            /* 0 = none; on expiry the guest stops the command
	                              (SIGTERM to its process group, SIGKILL after grace) */
	volatile int *cancel;      /* set to a signal number (e.g. from a signal
	                              handler) to forward it to the command's process
	                              group; gexec_run resets it to 0 once sent */
	/* A pty (guest/PROTOCOL.md, protocol 2): the command's stdin, stdout
	 * and stderr are a terminal of rows x cols in the guest, whose output
	 * comes back as stdout; send_stdin is implied.  When *resized is set
	 * (SIGWINCH), gexec_run sends tty_fd's size now and resets it. */
	bool pty;
	unsigned short rows, cols;
	const char *term;          /* TERM in the guest; NULL: guestd's */
	volatile int *resized;
	int tty_fd;
	/* Asked every 100 ms, and when the channel closes: true ends the wait
	 * with *why as the error (a guest the command needs has stopped). */
	bool (*gone)(void *arg, char *why, size_t len);
	void *gone_arg;
};
#define GEXEC_TIMEOUT 1
/* Returns 0 when the command ended, GEXEC_TIMEOUT when it was stopped
 * because timeout_ms expired, -1 when it could not be run or the channel
 * failed (wrong key, guest gone; the error says which).
 * *status: exit status, or 128 + signal number when killed by a signal. */
int gexec_run(struct chan *c, const struct gexec_req *r, int *status, struct verr *err);
/* Asks guestd to stop (it stops every running command first). */
int gexec_shutdown(struct chan *c, struct verr *err);

/* ------------------------------------------- detached commands (cluster) */

/*
 * Detached commands (guest/PROTOCOL.md: spawn, status, wait, kill): the
 * command outlives the connection that started it; its stdout and stderr
 * go to <guestd's --spool>/<id>.out.  Used by vhpcd for a job's mpirun, so
 * a restarted vhpcd re-attaches instead of losing the job.
 */
struct gexec_state {
	bool exited;               /* false: still running */
	bool lost;                 /* its keeper died without recording the end */
	pid_t pid;                 /* in the guest's pid namespace */
	int status;                /* exited: exit status, or 128 + signal */
	bool timed_out;            /* stopped because its timeout expired */
	long long output_bytes;    /* size of <id>.out */
};
/* Starts r->argv (env, cwd, timeout_ms as for gexec_run; out_fd, err_fd and
 * cancel are not used) as detached command id. */
int gexec_spawn(struct chan *c, const struct gexec_req *r, const char *id, pid_t *pid,
		struct verr *err);
/* wait_ms 0: the state now; > 0 (at most 60000): returns once it exited
 * or the time passed.  Fails when guestd knows no command id. */
int gexec_state(struct chan *c, const char *id, int wait_ms, struct gexec_state *st,
		struct verr *err);
int gexec_kill(struct chan *c, const char *id, int sig, struct verr *err);
/* Up to max bytes (at most GEXEC_MAX_OUTPUT) of detached command id's
 * output from offset on into buf; *n gets how many (0: none past offset
 * yet), *size the output's length in the guest now.  The output never
 * needs a folder the host can read, so every driver's guests serve it. */
#define GEXEC_MAX_OUTPUT (256u << 10)
int gexec_output(struct chan *c, const char *id, long long offset, size_t max, void *buf, size_t *n,
		 long long *size, struct verr *err);

#endif
