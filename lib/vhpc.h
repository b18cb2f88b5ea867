/*
 * libvhpc: the code every vhpc program shares.  This header is the whole
 * public surface of lib/; other components include nothing else from here.
 *
 *   - errors:  struct verr carries one human-readable message up the stack,
 *              so the place that detects a problem names it and the place
 *              that reports it does not have to guess.
 *   - logging: one line per event on stderr, with program name and level.
 *   - config:  YAML (libyaml) bound to C structs through a schema table;
 *              every error names file:line:column and what was expected.
 *   - channel: length-prefixed frames authenticated with a per-session
 *              HMAC (libsodium), used between processes that share a key.
 *   - util:    small file, path and number helpers.
 */
#ifndef VHPC_LIB_H
#define VHPC_LIB_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define VHPC_VERSION "0.1.0"

/* ------------------------------------------------------------------ errors */

struct verr {
	char msg[1024];
};

/* Sets the message and returns -1 so callers can `return verr_set(...)`. */
int verr_set(struct verr *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Same, appending ": strerror(errno)". */
int verr_errno(struct verr *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prefixes an existing message ("context: old message"). */
int verr_wrap(struct verr *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ----------------------------------------------------------------- logging */

enum vlog_level { VLOG_ERR = 0, VLOG_WARN, VLOG_INFO, VLOG_DEBUG };

/* Level from $VHPC_LOG (err|warn|info|debug), default info. */
void vlog_init(const char *prog);
void vlog_set_level(enum vlog_level lvl);
enum vlog_level vlog_get_level(void);
void vlog(enum vlog_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vlogv(enum vlog_level lvl, const char *fmt, va_list ap);

#define log_err(...)   vlog(VLOG_ERR, __VA_ARGS__)
#define log_warn(...)  vlog(VLOG_WARN, __VA_ARGS__)
#define log_info(...)  vlog(VLOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (vlog_get_level() >= VLOG_DEBUG) vlog(VLOG_DEBUG, __VA_ARGS__); } while (0)

/* ------------------------------------------------------------------ config */

/*
 * A loaded YAML document.  Nodes are only valid while the document lives.
 * Documents are capped in size and in the number of nodes a bind may visit,
 * so hostile files (alias bombs, recursive anchors) fail with an error.
 */
typedef struct cf_doc cf_doc;
typedef struct cf_node cf_node;

#define CF_MAX_FILE (4u << 20)

int cf_load_file(cf_doc **out, const char *path, struct verr *err);
int cf_load_string(cf_doc **out, const char *name, const char *buf,
		   size_t len, struct verr *err);
void cf_free_doc(cf_doc *d);
const cf_node *cf_root(const cf_doc *d);

enum cf_kind {
	CF_STR = 1,   /* char *            any scalar */
	CF_INT,       /* long long         integer within [min,max] */
	CF_BOOL,      /* bool              true/false/yes/no/on/off */
	CF_SIZE,      /* uint64_t          "512M", "2GiB", "4096" within [min,max] */
	CF_ENUM,      /* int               index into names[] */
	CF_STRLIST,   /* struct cf_strlist sequence of scalars */
	CF_STRMAP,    /* struct cf_strmap  mapping of scalar -> scalar */
	CF_STRUCT,    /* nested struct described by sub */
	CF_LIST,      /* struct cf_list    sequence of sub structs */
	CF_CUSTOM,    /* parse() decides; it gets the node */
};

#define CF_REQUIRED 1u

struct cf_strlist { char **v; size_t n; };
struct cf_strmap  { char **key; char **val; size_t n; };
struct cf_list    { void *v; size_t n; };

struct cf_schema;
struct cf_field {
	const char *key;
	enum cf_kind kind;
	size_t off;
	unsigned flags;
	long long min, max;          /* CF_INT, CF_SIZE: both 0 means unbounded */
	const char *const *names;    /* CF_ENUM, NULL-terminated */
	const struct cf_schema *sub; /* CF_STRUCT, CF_LIST */
	int (*parse)(const cf_doc *d, const cf_node *n, void *dst, struct verr *err);
	void (*release)(void *dst);  /* CF_CUSTOM: frees what parse made */
	const char *what;            /* words for "expected ..." in errors */
};

struct cf_schema {
	const char *name;            /* for messages: "cluster", "job" */
	size_t size;                 /* sizeof the bound struct */
	const struct cf_field *fields; /* terminated by a field with key == NULL */
};

/* Binds a mapping node to dst (zeroed by the caller or holding defaults).
 * Unknown keys, wrong types and missing required keys are errors. */
int cf_bind(const cf_doc *d, const cf_node *n, const struct cf_schema *s,
	    void *dst, struct verr *err);
/* Loads a file and binds its root. */
int cf_bind_file(const char *path, const struct cf_schema *s, void *dst,
		 struct verr *err);
/* Frees what cf_bind allocated inside dst (not dst itself). */
void cf_release(const struct cf_schema *s, void *dst);

/* Node access for CF_CUSTOM parsers.  Each *_as function fails with a
 * message that names file:line:column of the node. */
enum cf_node_type { CF_NODE_SCALAR = 1, CF_NODE_SEQ, CF_NODE_MAP };
enum cf_node_type cf_node_type(const cf_node *n);
const char *cf_scalar(const cf_node *n);          /* NULL unless scalar */
size_t cf_seq_len(const cf_doc *d, const cf_node *n);
const cf_node *cf_seq_at(const cf_doc *d, const cf_node *n, size_t i);
const cf_node *cf_map_get(const cf_doc *d, const cf_node *n, const char *key);
/* "file:line:col" of the node, into buf. */
const char *cf_where(const cf_doc *d, const cf_node *n, char *buf, size_t len);
/* Sets err to "file:line:col: <fmt>" and returns -1. */
int cf_error(const cf_doc *d, const cf_node *n, struct verr *err,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ----------------------------------------------------------------- channel */

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
void chan_close(struct chan *c);

/* Runs argv (PATH lookup, no shell, stdin /dev/null) and captures up to max
 * bytes of stdout into *out (malloc'd, NUL-terminated; out may be NULL).
 * Returns the exit status (err set when non-zero, quoting the program's
 * stderr), or -1 when it could not run, was killed, or timed out. */
int run_capture(const char *const *argv, char **out, size_t *out_len,
		size_t max, int timeout_ms, struct verr *err);

/* IPv4 networks, host byte order. */
struct ipv4net { uint32_t addr; int prefix; };
/* "10.213.0.0/16"; host bits must be zero unless allow_host. */
int ipv4net_parse(const char *s, bool allow_host, struct ipv4net *out);
const char *ipv4_format(uint32_t addr, char *buf, size_t len);


/* ---------------------------------------------------------- shared configs */

/*
 * Tuning profile (configs/tuning/NAME.yaml): what the job network and each
 * guest's network stack get.  Only per-network-namespace sysctls (net.*)
 * are allowed, because a guest must never change its host.
 */
struct tuning {
	char *name;
	long long mtu;
	struct { bool tso, gso, gro, sg, tx_csum, rx_csum; } offload;
	struct cf_strmap sysctl;
};
extern const struct cf_schema tuning_schema;
/* NAME (looked up in <config dir>/tuning/NAME.yaml) or a path ending .yaml */
int tuning_load(const char *name_or_path, struct tuning *t, struct verr *err);
void tuning_free(struct tuning *t);
/* Writes each sysctl under /proc/sys/net for the caller's network
 * namespace and reads it back; names every key it could not set. */
int tuning_apply_sysctls(const struct tuning *t, struct verr *err);

enum vhpc_driver { DRIVER_AUTO = 0, DRIVER_CONTAINER, DRIVER_KVM };
extern const char *const vhpc_driver_names[];
enum vhpc_map_by { MAP_BY_NODE = 0, MAP_BY_SLOT };
extern const char *const vhpc_map_by_names[];

/* A job: from `vhpc run` flags or a job YAML (configs/jobs/). */
struct job_spec {
	char *name;
	long long guests;        /* -N */
	long long ranks;         /* -n */
	long long vcpus;         /* per guest; 0 = ranks per guest, or what fits */
	uint64_t mem;            /* per guest */
	char *image;
	char *tuning;
	int driver;              /* enum vhpc_driver */
	long long timeout;       /* seconds, whole job */
	bool oversubscribe;      /* guests may share host cores */
	int map_by;              /* enum vhpc_map_by: rank order across guests */
	bool vmshm;              /* shared-memory BTL between co-located guests */
	uint64_t scratch;        /* per guest: an empty writable /scratch of this size; 0 = none */
	struct cf_strlist command;
	struct cf_strmap env;
};
extern const struct cf_schema job_spec_schema;
#define JOB_SCRATCH_MIN (16ull << 20)
#define JOB_SCRATCH_MAX (1ull << 46)
/* Fills the defaults that the cluster file does not override. */
void job_spec_defaults(struct job_spec *j);
int job_spec_load(const char *path, struct job_spec *j, struct verr *err);
/* Checks relations between fields (ranks >= guests, ...). */
int job_spec_check(const struct job_spec *j, struct verr *err);
void job_spec_free(struct job_spec *j);
/* The /etc/hosts (guest i named g<i> at addrs[i], after localhost) and the
 * Open MPI hostfile (g<i> slots=ranks[i] max_slots=ranks[i]) of a job's n
 * guests; malloc'd, NULL when out of memory. */
char *job_hosts_text(const uint32_t *addrs, int n);
char *job_hostfile_text(const int *ranks, int n);

/* The cluster (configs/cluster.yaml). */
struct cluster_cfg {
	char *name;
	char *controller;        /* "host:port" of vhpc-ctld; NULL = embedded */
	struct ipv4net job_pool; /* job subnets are carved from here */
	long long job_prefix;    /* each job gets a /job_prefix */
	long long guest_port;    /* vhpc-guestd's TCP port on the job network */
	char *default_image;
	char *default_tuning;
	int default_driver;
	uint64_t default_mem;
	long long default_timeout;
};
extern const struct cf_schema cluster_schema;
/* path NULL: $VHPC_CLUSTER, else <config dir>/cluster.yaml. */
int cluster_load(const char *path, struct cluster_cfg *c, struct verr *err);
void cluster_free(struct cluster_cfg *c);

/* ------------------------------------------------------------------ wire */

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

struct json_object;
struct wire_peer { uid_t uid; gid_t gid; };

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

/* ------------------------------------------------------------ hardware */

/* Whether /dev/kvm has hardware virtualization behind it (VT-x/AMD-V) or is
 * a software KVM such as kvm_pvm; why says which, in words for users. */
struct hwvirt {
	bool kvm;          /* /dev/kvm opens and speaks the KVM API */
	bool hw;           /* hardware virtualization */
	char module[32];   /* kvm_intel, kvm_amd, kvm_pvm, ... */
	char why[256];
};
int hwvirt_detect(struct hwvirt *h);

/* -------------------------------------------------------------- guest exec */

/*
 * Client side of the protocol vhpc-guestd serves (guest/PROTOCOL.md): over
 * an authenticated channel (per-job key), "hello" reports the guest's state
 * and "exec" runs a command with stdin from /dev/null, relaying stdout,
 * stderr and the exit status.  Used by the node agent (control socket) and by
 * vhpc-rsh (TCP on the job network).  One request at a time per channel;
 * a channel can carry several requests in turn.
 */
#define GUEST_PORT_DEFAULT 7707
/* Where guests find the job key (vhpc-guestd --key, vhpc-rsh $VHPC_JOB_KEY). */
#define GUEST_KEY_PATH_DEFAULT "/vhpc/job.key"

/* Connect (each address getaddrinfo gives, in turn, within timeout_ms) and
 * run the channel handshake.  Errors say which host/address and why. */
int gexec_connect_tcp(struct chan *c, const char *host, int port,
		      const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err);
int gexec_connect_unix(struct chan *c, const char *path,
		       const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err);
/* Through a VMM's vsock bridge (Firecracker-style hybrid vsock, hv/hv.h):
 * connects to the unix socket uds, asks for the guest's vsock port with
 * "CONNECT <port>\n", expects "OK <host port>\n", then runs the handshake.
 * A refused port (nothing listening in the guest yet) and a VMM that does not
 * answer within timeout_ms are errors that say so; callers retry. */
int gexec_connect_vsock(struct chan *c, const char *uds, unsigned port,
			const uint8_t key[CHAN_KEY_LEN], int timeout_ms, struct verr *err);
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
	int timeout_ms;            /* 0 = none; on expiry the guest stops the command
	                              (SIGTERM to its process group, SIGKILL after grace) */
	volatile int *cancel;      /* set to a signal number (e.g. from a signal
	                              handler) to forward it to the command's process
	                              group; gexec_run resets it to 0 once sent */
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

/* ------------------------------------------------ cluster messages (TCP) */

/*
 * What vhpc-ctld, vhpcd and the vhpc CLI share about talking over TCP with
 * wire messages (scheduler/PROTOCOL.md): addresses, one-request calls, and
 * validated access to a received message's fields.  Every jf_* getter
 * fails with a message naming the field and what was expected.
 */
/* "a.b.c.d" to host byte order. */
int ipv4_parse(const char *s, uint32_t *out);
/* "HOST:PORT" (HOST a name or an IPv4 address, PORT 1..65535; with
 * allow_zero also 0). */
int hostport_parse(const char *s, bool allow_zero, char *host, size_t hlen, int *port);
/* A listening TCP socket on "ADDR:PORT" (ADDR may be empty or *: every
 * address); the port it got (useful with 0) in *port. */
int tcp_listen(const char *spec, int *port, struct verr *err);
int tcp_connect(const char *hostport, int timeout_ms, struct verr *err);
/* One request and its reply on a fresh connection.  A reply of type
 * "error" is returned as such (rc 0): the caller decides. */
int wire_call(const char *hostport, struct json_object *req, struct json_object **reply,
	      struct wire_peer *peer, int timeout_ms, struct verr *err);
/* The reply's "error" text, or NULL when it is not an error reply. */
const char *wire_error_text(struct json_object *reply);

/* Fields: absent optional ones leave *out untouched and return 0. */
int jf_int(struct json_object *o, const char *key, bool required, long long min, long long max,
	   long long *out, struct verr *err);
int jf_bool(struct json_object *o, const char *key, bool required, bool *out, struct verr *err);
/* A string of at most max bytes without NULs. */
int jf_str(struct json_object *o, const char *key, bool required, size_t max, const char **out,
	   struct verr *err);
/* A string that passes ident_ok(s, max). */
int jf_ident(struct json_object *o, const char *key, bool required, size_t max, const char **out,
	     struct verr *err);
/* An array of at most max entries / an object. */
int jf_array(struct json_object *o, const char *key, bool required, size_t max,
	     struct json_object **out, struct verr *err);
int jf_object(struct json_object *o, const char *key, bool required, struct json_object **out,
	      struct verr *err);
/* Fails on a key not in allowed (NULL-terminated); "v" and "type" are always allowed. */
int jf_only(struct json_object *o, const char *what, const char *const *allowed, struct verr *err);
/* A NULL-terminated vector of strdup'd strings from an array of strings
 * (at most max entries of at most maxlen bytes each); free with jf_strv_free. */
int jf_strv(struct json_object *o, const char *key, bool required, size_t max, size_t maxlen,
	    char ***out, size_t *n, struct verr *err);
void jf_strv_free(char **v);

/* ------------------------------------------------------------------- util */

/* Whole-file helpers; read_file NUL-terminates and caps at max bytes. */
int read_file(const char *path, char **buf, size_t *len, size_t max,
	      struct verr *err);
int write_file(const char *path, const void *buf, size_t len, mode_t mode,
	       struct verr *err);
/* Writes to path.tmp then renames, so readers never see half a file. */
int write_file_atomic(const char *path, const void *buf, size_t len,
		      mode_t mode, struct verr *err);
int mkdir_p(const char *path, mode_t mode, struct verr *err);
/* rm -rf that does not cross mount points and refuses "/" and "". */
int rm_rf(const char *path, struct verr *err);
/* Writes a string to a sysfs/procfs/cgroup file. */
int write_str(const char *path, const char *s, struct verr *err);

/* "4096", "64K", "512M", "2G", "1GiB", "1T" -> bytes.  Rejects overflow. */
int parse_size(const char *s, uint64_t *out);
/* Decimal integer within [min,max], whole string. */
int parse_ll(const char *s, long long min, long long max, long long *out);
/* Formats bytes as "1.5 GiB". */
const char *fmt_size(uint64_t bytes, char *buf, size_t len);

/* Linux cpulist "0-3,8,10-11" <-> array of ids (sorted, unique). */
int cpulist_parse(const char *s, int *ids, size_t max, size_t *n);
const char *cpulist_format(const int *ids, size_t n, char *buf, size_t len);

/* Monotonic clock in seconds / nanoseconds. */
double now_s(void);
uint64_t now_ns(void);

/* Directory of the running executable (for finding sibling programs). */
const char *self_dir(void);
/* Where vhpc keeps things; each honours an environment override:
 *   configs  $VHPC_CONFIG_DIR, else <self>/../../configs, else /etc/vhpc
 *   state    $VHPC_STATE_DIR,  else /var/lib/vhpc   (images, spool)
 *   runtime  $VHPC_RUN_DIR,    else /run/vhpc        (jobs, sockets)   */
const char *vhpc_config_dir(void);
const char *vhpc_state_dir(void);
const char *vhpc_run_dir(void);
/* Full path of a vhpc program: <self_dir>/<name> if it exists, else name. */
const char *vhpc_prog(const char *name, char *buf, size_t len);

/* Random bytes from the kernel (libsodium). */
void random_bytes(void *buf, size_t len);
/* Lowercase hex of len bytes into out (2*len+1). */
void hex_encode(const void *buf, size_t len, char *out);
int hex_decode(const char *hex, void *buf, size_t len);

/* Reads/writes exactly len bytes, retrying on EINTR and short I/O.
 * read_full returns 0 on success, 1 on EOF before any byte, -1 otherwise. */
int read_full(int fd, void *buf, size_t len);
int write_full(int fd, const void *buf, size_t len);
/* write_full for sockets: a peer that hung up costs EPIPE, not SIGPIPE. */
int send_full(int fd, const void *buf, size_t len);
/* read_full bounded by a CLOCK_MONOTONIC deadline in ns (0 = none);
 * ETIMEDOUT when it passes; *eof_at_start when the peer closed cleanly. */
int read_full_deadline(int fd, void *buf, size_t len, uint64_t deadline, bool *eof_at_start);
/* Waits until fd is readable; 0 ready, 1 timeout, -1 error. */
int wait_readable(int fd, int timeout_ms);

/* Safe identifier check: [A-Za-z0-9][A-Za-z0-9._-]{0,max-1}. */
bool ident_ok(const char *s, size_t max);

#endif
