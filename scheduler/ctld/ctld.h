/*
 * vhpc-ctld internals (private to scheduler/ctld_*.c).
 *
 *   ctld_main.c   start-up, the TCP listener, one thread per connection
 *   ctld_opts.c   the command line: one table of options, --help made from it
 *   ctld_msg.c    every message a peer can send, parsed and validated (pure; fuzzed)
 *   ctld_state.c  nodes and jobs in memory, recovery from the store, commits
 *   ctld_req.c    request handlers (users and nodes)
 *   ctld_sched.c  the scheduler thread: passes, time limits, heartbeats, retries
 *   ctld_fabric.c the fabric and PCI functions as resources: VLAN/pkey, subnet, functions
 *   ctld_rpc.c    talking to vhpcds: start (prepare, launch) and stop a job
 *   ctld_image.c  the image store's requests (imgstore.c keeps its files)
 *   ctld_spool.c  job output on disk: capped, and cut rather than filling the disk
 *   ctld_room.c   room on disk for the database: a reserve, and refusing new jobs
 *   ctld_metrics.c      --metrics: counters, the snapshot, the Prometheus text
 *   ctld_metrics_http.c --metrics: its HTTP server (libmicrohttpd), bounds, token
 *   ctld_usage.c        a node's report of what a job's guests used (pure; fuzzed)
 *   ctld_history.c      accounting: recording that report, and `history` for users
 *   ctld_ckpt.c         vhpc checkpoint: pause every node, save, resume or stop; the list, rm
 *   ctld_drain.c        vhpc node drain [--checkpoint]: no new jobs; its jobs checkpointed, requeued
 *
 * The controller's state is one struct ctld, made by main and passed to
 * every function that reads or changes it, first (ctl); threads get it as
 * their argument.
 *
 * Locking: one mutex (ctl->mu) guards all of struct ctld's nodes and jobs.
 * Every change of a job's or node's state is committed to the store under
 * it before anything acts on the change; RPCs to nodes run without it.
 */
#ifndef VHPC_SCHED_CTLD_H
#define VHPC_SCHED_CTLD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/chan.h"
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/imgwire.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/wire.h"
#include "lib/jobpaths.h"
#include "imgstore.h"
#include "sched.h"
#include "store.h"

#define CTLD_MAX_NODES     8192
#define CTLD_MAX_RDMA      64
#define CTLD_MAX_NODEJOBS  4096
#define CTLD_OUTPUT_CHUNK  (256u * 1024)   /* decoded bytes per output message */
#define CTLD_MAX_ATTEMPTS  3               /* starts of a job before it fails */
/* Where a node goes on from in a job's output once it was cut: the
 * largest offset job_output and job_exit take (2^50), past any end a
 * job's output reaches, so the node reads and sends nothing more of it. */
#define CTLD_OUTPUT_PAST   (1ll << 50)

/* ------------------------------------------------------------ messages */

enum cmsg_type {
	CM_SUBMIT = 1, CM_QUEUE, CM_JOB, CM_WAIT, CM_CANCEL, CM_OUTPUT, CM_NODES,
	CM_REGISTER, CM_HEARTBEAT, CM_JOB_OUTPUT, CM_JOB_EXIT,
	CM_IMAGE_HAVE, CM_IMAGE_PUT, CM_IMAGE_TAG, CM_IMAGE_GET, CM_IMAGE_LIST, CM_IMAGE_RM,
	CM_EXEC,
	CM_HISTORY,
	CM_CHECKPOINT, CM_CHECKPOINTS, CM_CHECKPOINT_RM, CM_RESTART,
	CM_NODE_DRAIN,
};
/* Whether a message type may come from a node agent only (uid 0). */
bool ctld_msg_node_only(enum cmsg_type t);

enum nodejob_state { NJ_PREPARING = 0, NJ_READY, NJ_RUNNING, NJ_EXITED, NJ_FAILED, NJ_MAX };
extern const char *const ctld_nodejob_state_names[];

struct cmsg_nodejob {
	int64_t job;
	enum nodejob_state state;
	char error[256];
};

struct cmsg_numa {
	int os_index, cores;
	uint64_t mem, huge2m;
};

#define CTLD_MAX_CACHED 256                /* images a node reports in its cache */

/* An image in a node's cache, as it reports it. */
struct cmsg_cached {
	char id[65];
	char name[65];
	uint64_t bytes;
	int64_t used;                  /* unix time a job last started from it */
	bool in_use;
};

/* A PCI function a node offers for passthrough, as it reports it. */
struct cmsg_pci {
	char addr[PCI_ADDR_LEN + 1];
	char cls[FABRIC_CLASS_MAX + 1];
	int numa;                      /* -1: the node does not know */
};

struct cmsg {
	enum cmsg_type type;
	/* user requests */
	struct job_spec spec;          /* submit (owned) */
	bool have_spec;
	int64_t id;                    /* job, wait, cancel, output, exec */
	int guest;                     /* exec */
	int64_t offset;                /* output, job_output */
	int max;                       /* output */
	int timeout_ms;                /* wait */
	bool all;                      /* queue */
	int64_t hist_uid;              /* history: whose jobs (-1: not given) */
	int64_t since;                 /* history: ended at or after (unix time) */
	int64_t before;                /* history: ids below this */
	bool stop;                     /* checkpoint: --stop */
	bool close_sessions;           /* checkpoint: --close-sessions (a drain's always) */
	char ckpt[65];                 /* checkpoint_rm, restart: its name */
	bool drain, checkpoint;        /* node_drain: drain (else undrain), checkpoint its jobs */
	/* node messages */
	char node[65];
	char addr[64];                 /* register: host:port of the node's vhpcd */
	uint32_t underlay;             /* register */
	int nnuma;
	struct cmsg_numa numa[SCHED_MAX_NUMA];
	struct json_object *rdma;      /* register: validated array (a reference) */
	char fabric_link[16];          /* register: its fabric netdev ("": no fabric) */
	struct cmsg_pci pci[NODE_PCI_MAX]; /* register: its functions for passthrough */
	int npci;
	bool simulated;
	struct cmsg_nodejob *jobs;     /* register, heartbeat (owned) */
	int njobs;
	uint8_t *data;                 /* job_output (owned, decoded) */
	size_t len;
	int64_t size;                  /* job_exit: bytes of output in all */
	int status;                    /* job_exit */
	bool timed_out, lost;          /* job_exit */
	struct cmsg_cached *cache;     /* register, heartbeat: the node's images (owned) */
	int ncache;
	bool have_cache;
	/* images */
	char name[65];                 /* image_tag, image_rm */
	char image_id[65];             /* image_tag; image_rm: an earlier version
	                                  (hex digits of its id) to retire, or "" */
	char (*objects)[65];           /* image_have, image_get (owned) */
	int nobjects;
	bool manifest;                 /* image_get: objects[0] asked for as an image's manifest */
	struct image_chunk *parts;     /* image_put (owned, decoded) */
	int nparts;
	char *signatures;              /* image_tag: the image's signatures file's
	                                  text (owned; images/sign.c), or NULL */
};
#define CMSG_SIGS_MAX 4096        /* > IMAGE_SIG_TEXT_MAX: its parser says what is wrong */

/* Parses and validates msg (its "type" and every field); err names what is
 * wrong.  On success free with ctld_msg_free. */
int ctld_msg_parse(struct json_object *msg, struct cmsg *m, struct verr *err);
void ctld_msg_free(struct cmsg *m);

/* --------------------------------------------------------------- state */

struct cnode {
	char name[65];
	int64_t id;                    /* store's stable number: part of local job ids */
	char addr[64];
	uint32_t underlay;
	bool up;
	bool have_info;                /* registered since it was first known */
	bool simulated;
	int64_t last_seen_ms;          /* monotonic */
	int nnuma;
	struct cmsg_numa numa[SCHED_MAX_NUMA];
	char *info_json;               /* as stored: topology, rdma */
	char fabric_link[16];          /* "": no fabric here */
	struct cmsg_pci pci[NODE_PCI_MAX];
	int npci;
	struct cmsg_cached *cache;     /* its image cache, as last reported (not stored) */
	int ncache;
	bool drained;                  /* vhpc node drain: no new jobs go there */
};

struct cjob {
	int64_t id;
	uid_t uid;
	char name[65];
	enum job_state state;
	struct job_spec spec;
	char *spec_json;
	/* resolved request */
	int nguests, vcpus, ranks;
	uint64_t mem;
	int64_t limit;                 /* seconds */
	char image[65], tuning[65];
	char image_id[65];             /* what image named at submit ("" for jobs from before) */
	struct job_paths paths;        /* binds, working directory, home */
	char paths_err[300];           /* why paths could not be planned, or "" */
	/* allocation (STARTING on) */
	int nalloc;
	struct sched_guest *alloc;     /* node = index into ctl->nodes */
	uint32_t vni;
	struct ipv4net subnet;
	char key_hex[2 * CHAN_KEY_LEN + 1];
	/* the fabric and devices (ctld_fabric.c): what it asks for, and once
	 * started what it holds */
	int rdma_want;                 /* enum job_rdma */
	int ndev;
	struct sched_devreq dev[JOB_DEVICES_MAX];
	bool rdma;                     /* its guests are on the fabric */
	int tag;                       /* its VLAN (RoCE) or partition key (IB); 0 = none */
	struct ipv4net fsubnet;        /* its fabric subnet */
	struct cjob_pci {
		int guest;
		char addr[PCI_ADDR_LEN + 1];
	} *pci;                        /* the functions its guests hold */
	int npci;
	/* bookkeeping */
	int64_t submitted, started, ended;
	int exit_status;
	char reason[256];
	int attempts;
	int64_t retry_ms;              /* after a failed start: not before (monotonic) */
	bool *cleanup;                 /* per node index: job_stop still owed (NULL: none) */
	int ncleanup;
	bool broken;                   /* its stored row could not be read back */
	bool worker;                   /* a start/launch thread runs for it */
	bool stopping;                 /* a stop thread runs for it */
	int64_t stop_retry_ms;
	int64_t out_size;              /* bytes in its spool file */
	bool out_cut;                  /* its output was cut (ctld_spool.c): the rest is dropped */
	int64_t exit_held_ms;          /* a failed exit first reported (monotonic; 0: none) */
	bool exit_hold_logged;
	bool ckpt_busy;                /* a checkpoint of it is under way (ctld_ckpt.c) */
	char restart[65];              /* the checkpoint it restarts from ("": a fresh start) */
};

/* The database's room on disk (ctld_room.c). */
struct ctld_room {
	int state_fd;                  /* the state folder */
	uint64_t reserve;              /* the reserve's size: 16 MiB, less on small filesystems */
	uint64_t spool_keep;           /* what the spool keeps free */
	bool have_reserve;
};

struct ctld {
	pthread_mutex_t mu;
	pthread_cond_t changed;        /* any job changed state */
	pthread_cond_t kick;           /* wake the scheduler */
	bool kicked;
	struct store *st;
	char state_dir[512];
	char spool_dir[600];
	struct cluster_cfg cl;
	int hb_interval_ms, hb_misses;
	int sched_depth;
	int rpc_timeout_ms;
	int start_retry_ms;            /* a failed start's pause, per attempt so far */
	struct imgstore *images;       /* the cluster's image store (<state>/images) */
	bool img_gc_pending;           /* an image was removed while jobs held it */
	struct cnode *nodes;
	int nnodes;
	struct cjob **jobs;            /* jobs not ended, and those ended in the last keep_ended s, by id */
	int njobs;
	size_t capjobs;
	pthread_mutex_t spool_mu;      /* appends to the spool, one at a time (taken before ctl->mu) */
	int spool_fd;                  /* the spool folder, locked (ctld_spool.c) */
	struct ctld_room room;
	bool db_full;                  /* the state folder is nearly full: new jobs are refused */
	struct ctld_metrics *metrics;  /* --metrics (ctld_metrics.c); NULL: not served, nothing counted */
	volatile int stop;
};

int64_t ctld_mono_ms(void);
int64_t ctld_wall_s(void);

/* A controller with nothing in it yet; NULL: out of memory. */
struct ctld *ctld_new(void);
int ctld_state_load(struct ctld *ctl, struct verr *err);
struct cjob *ctld_job_new(void);
void ctld_job_free(struct cjob *j);
/* A job as the store has it, for a look at an ended job that has left
 * memory (not added to ctl->jobs; ctld_job_free it).  NULL: out of memory. */
struct cjob *ctld_job_from_row(struct ctld *ctl, struct job_row *r);
/* Ended jobs whose keep_ended has passed leave memory (the store keeps
 * them).  Holds ctl->mu. */
void ctld_forget_ended(struct ctld *ctl);
/* Fills the resolved request (defaults from the cluster file) from spec. */
void ctld_job_resolve(struct ctld *ctl, struct cjob *j);
int ctld_job_add(struct ctld *ctl, struct cjob *j);
/* Marks a job as owing a job_stop on node n. */
void ctld_job_owe_stop(struct cjob *j, int n);
bool ctld_job_owes_stop(const struct cjob *j, int n);
struct cjob *ctld_job_find(struct ctld *ctl, int64_t id);
struct cnode *ctld_node_find(struct ctld *ctl, const char *name);
int ctld_node_index(struct ctld *ctl, const struct cnode *n);
bool ctld_job_active(const struct cjob *j);
/* Whether uid may see / act on the job. */
bool ctld_job_visible(const struct cjob *j, uid_t uid);
/* Per-node job id (vhpcd.h): <job base36>x<node base36>. */
void ctld_job_local_id(const struct cjob *j, const struct cnode *n, char *buf, size_t len);
/* Whether any guest of j's allocation is on node index `node`. */
bool ctld_job_uses(const struct cjob *j, int node);
/* Node index of guest 0 (the launcher). */
int ctld_job_launcher(const struct cjob *j);
/* Commits j's state, times, reason, allocation and cleanup set, then wakes
 * waiters.  Callers hold ctl->mu. */
int ctld_job_commit(struct ctld *ctl, struct cjob *j, bool with_alloc, struct verr *err);
/* Ends an active job: final state, reason, cleanup on every up node of its
 * allocation; commits; starts the stop thread.  Holds ctl->mu. */
void ctld_job_end(struct ctld *ctl, struct cjob *j, enum job_state st, int exit_status, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Back to the queue after a failed start (or fails it after
 * CTLD_MAX_ATTEMPTS); commits and starts the stop thread.  Holds ctl->mu. */
void ctld_job_requeue(struct ctld *ctl, struct cjob *j, const char *why);
int ctld_node_commit(struct ctld *ctl, struct cnode *n, struct verr *err);
/* Marks a node down and ends its jobs with NODE_FAIL.  Holds ctl->mu. */
void ctld_node_down(struct ctld *ctl, struct cnode *n, const char *why);
/* The node's jobs as it reported them vs ours: jobs it must stop (ids into
 * stop, *nstop), and jobs of ours that it failed or lost.  Holds ctl->mu. */
void ctld_node_reconcile(struct ctld *ctl, struct cnode *n, const struct cmsg_nodejob *jobs, int njobs,
		    int64_t *stop, int *nstop);
/* JSON views for replies.  Hold ctl->mu. */
struct json_object *ctld_job_json(struct ctld *ctl, const struct cjob *j);
struct json_object *ctld_node_json(struct ctld *ctl, const struct cnode *n);
/* Usage per node from jobs that hold resources (active, or still owed a
 * job_stop there). */
void ctld_nodes_usage(struct ctld *ctl, struct sched_node *sn);

/* ------------------------------------------------------------- fabric */

/* The job's fabric and device request from its spec (ctld_job_resolve). */
void ctld_fabric_resolve(struct cjob *j);
/* What the scheduler weighs for nguests of j's guests. */
struct sched_req ctld_job_req(const struct cjob *j, int nguests);
/* The node's fabric and its functions by class, for the scheduler. */
void ctld_fabric_caps(struct ctld *ctl, const struct cnode *n, struct sched_node *sn);
/* Why a job that the up nodes cannot hold even idle waits, when its
 * fabric or devices are the reason (else false). */
bool ctld_fabric_why(struct ctld *ctl, const struct sched_node *sn, const struct sched_req *r, char *why, size_t len);
/* Whether a --rdma job could get a VLAN or pkey now: -1 and why when every
 * one is held (it then stays out of the pass, so it takes no nodes there
 * that others could use).  Holds ctl->mu. */
int ctld_fabric_room(struct ctld *ctl, const struct cjob *j, char *why, size_t len);
/* At start, on the allocation j->alloc: whether it uses the fabric, its
 * VLAN or pkey and fabric subnet, and the functions of each guest.  -1
 * and why when a pool is exhausted (the job waits).  Holds ctl->mu. */
int ctld_fabric_pick(struct ctld *ctl, struct cjob *j, char *why, size_t len);
/* What it picked, into and from the job's stored net object. */
void ctld_fabric_to_json(const struct ctld *ctl, const struct cjob *j, struct json_object *net);
void ctld_fabric_from_json(struct cjob *j, struct json_object *net);
/* job_prepare's fabric and pci for node index `node`. */
void ctld_fabric_prepare(struct ctld *ctl, const struct cjob *j, int node, struct json_object *msg);
/* Views: the job's fabric and devices; the node's fabric, functions and
 * which job holds each. */
void ctld_fabric_job_json(struct ctld *ctl, const struct cjob *j, struct json_object *o);
void ctld_fabric_node_json(struct ctld *ctl, const struct cnode *n, struct json_object *o);
/* A node's fabric and functions from its register message. */
void ctld_fabric_node_take(struct cnode *n, const struct cmsg *m);

/* ------------------------------------------------------- command line */

/* What the command line says that struct ctld does not keep (NULL: not
 * given). */
struct ctld_opts {
	const char *listen, *cluster, *log, *spool;
	const char *metrics, *metrics_token;
};
/* ctld_opts_parse: go on (anything else is the status to exit with). */
#define CTLD_OPTS_RUN (-1)
/* Sets ctl's settings (state folder, heartbeats, scheduling depth, RPC
 * timeout) and o from the defaults and argv.  --help, --version and
 * mistakes are printed here. */
int ctld_opts_parse(struct ctld *ctl, struct ctld_opts *o, int argc, char **argv);

/* ------------------------------------------------------------- threads */

/* Wakes the scheduler thread.  Holds ctl->mu. */
void ctld_kick(struct ctld *ctl);
/* The prefix of a job's subnet: the cluster's, or shorter for big jobs. */
int ctld_sched_job_prefix(struct ctld *ctl, int nguests);
void *ctld_sched_thread(void *arg);
/* Worker threads; they take ctl->mu themselves.  Callers hold ctl->mu and set
 * the job's worker/stopping flag through these. */
/* Prepare on all nodes, then launch (a restart: job_resume everywhere). */
void ctld_rpc_start_job(struct ctld *ctl, struct cjob *j);
/* One call to a node's vhpcd; rc 0: replied without error, else err. */
struct ctld_call {
	char node[65];
	char addr[64];
	struct json_object *req;
	struct json_object *reply;
	struct verr err;
	int rc;
};
/* Makes every call, many at once; no lock held. */
void ctld_fan_out(struct ctld_call *c, int n, int timeout_ms);
/* Puts each call's request and reply, and frees c. */
void ctld_calls_free(struct ctld_call *c, int n);
/* The distinct node indexes of a job, in the order of its guests: *out
 * has room for j->nalloc. */
int ctld_job_nodes(const struct cjob *j, int *out);
/* Whether co-located guests of the job share memory (vmshm). */
bool ctld_job_vmshm(const struct cjob *j);
/* RUNNING after a restart: launch again (idempotent). */
void ctld_rpc_relaunch_job(struct ctld *ctl, struct cjob *j);
/* job_stop to every node in j->cleanup. */
void ctld_rpc_stop_job(struct ctld *ctl, struct cjob *j);

/* ------------------------------------------------------------ requests */

/* The job uid asks about, as job, cancel and exec see it (ctld_req.c):
 * NULL and the error reply (not_found, denied: only its owner and root)
 * otherwise; *owned: a copy from the store, for ctld_job_free.  ctl->mu held. */
struct cjob *ctld_user_job(struct ctld *ctl, int64_t id, uid_t uid, bool *owned, struct json_object **err);
/* ctld_exec.c: exec, a stream to one of a running job's guests for its
 * owner or root (vhpc exec, vhpc shell); takes ctl->mu itself. */
struct json_object *ctld_exec(struct ctld *ctl, const struct cmsg *m, const struct wire_peer *peer);

/* Replies: {"type": type}, and an error with its code (PROTOCOL.md). */
struct json_object *ctld_reply(const char *type);
struct json_object *ctld_error(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* -------------------------------------------------------------- images */

/* The image store's requests (ctld_image.c): image_have, image_put,
 * image_tag, image_get, image_rm from root, image_list from anyone.  Called
 * without ctl->mu: they take it only to read jobs and nodes. */
struct json_object *ctld_image_handle(struct ctld *ctl, const struct cmsg *m, const struct wire_peer *peer);
/* At submit: the job's image name to the id it names now, into the spec
 * (image_id); an id the submitter gave must be an image of the store's
 * (pushed and tagged, not removed), and the name of it goes into the spec
 * too.  Holds ctl->mu. */
int ctld_image_resolve(struct ctld *ctl, struct json_object *spec, const struct job_spec *js, struct verr *err);
/* Removes the store's objects that neither a name nor an active job needs
 * (after image_rm, once the jobs that held the image end).  Takes ctl->mu. */
void ctld_image_gc(struct ctld *ctl);
/* A node's cache as its register or heartbeat reports it.  Holds ctl->mu. */
void ctld_image_cache_update(struct cnode *n, const struct cmsg *m);

/* ------------------------------------------------------- accounting */

/* The `usage` of node index node's `stopped` reply for a job whose guest g
 * is on node index guest_node[g] (nguests of them): into out (nguests
 * entries at most; node names left ""), *n of them; 0 also when there is
 * none.  -1 and err naming what is wrong: a guest not on that node, twice,
 * a number out of range, a field the protocol lacks. */
int ctld_usage_parse(struct json_object *reply, const int *guest_node, int nguests, int node,
		     struct store_usage *out, int *n, struct verr *err);
/* Records what node index `node` reported of j's guests there, in its
 * reply to a job_stop sent once j had ended.  Holds ctl->mu. */
void ctld_usage_take(struct ctld *ctl, struct cjob *j, int node, struct json_object *reply);
/* `history` from uid: ended jobs with their usage, from the store.
 * Called without ctl->mu. */
struct json_object *ctld_history_handle(struct ctld *ctl, const struct cmsg *m, uid_t uid);

/* ------------------------------------------------------ checkpoints */

/* checkpoint, checkpoints, checkpoint_rm, restart (ctld_ckpt.c): called
 * without ctl->mu (a checkpoint waits for its nodes). */
struct json_object *ctld_ckpt_handle(struct ctld *ctl, const struct cmsg *m, const struct wire_peer *peer);
/* At start, after ctld_state_load: checkpoints a dead controller left
 * under way: the job's guests resumed (or the job stopped, when every
 * part was saved with --stop), a partial checkpoint removed. */
void ctld_ckpt_recover(struct ctld *ctl);
/* A node refused to restore from checkpoint name, its part there damaged:
 * `checkpoints` says so from now on ("damaged": "node N: why").  Holds
 * ctl->mu. */
void ctld_ckpt_mark_damaged(struct ctld *ctl, const char *name, const char *node, const char *why);
/* What a restart from a checkpoint keeps of the job it saved (its record). */
struct ctld_ckpt_part {
	char node[65];                 /* the node that saved it */
	int nguests;
	int *guests;                   /* job-wide indexes */
};
struct ctld_ckpt_plan {
	struct ipv4net subnet;
	char key_hex[2 * CHAN_KEY_LEN + 1];
	long long guest_port;
	int vcpus;
	bool shared;                   /* checkpoints.shared when it was saved */
	int nparts;
	struct ctld_ckpt_part *parts;
};
/* The plan of checkpoint name (a saved one), refused when its guests'
 * agents listen on another port than the cluster's guest_port now.
 * Holds ctl->mu. */
int ctld_ckpt_plan(struct ctld *ctl, const char *name, int nguests, struct ctld_ckpt_plan *out, struct verr *err);
void ctld_ckpt_plan_free(struct ctld_ckpt_plan *p);
/* Where a pending restart job's guests may go, for the scheduling pass
 * (sched_fit_parts): each part of its checkpoint on a node of its own, the
 * part's guests together; on the node that saved it, or with shared
 * checkpoints any; j->vcpus set to the guests' saved cores.  -1 and why
 * (the checkpoint is gone or damaged: the job cannot ever start).  Holds
 * ctl->mu. */
int ctld_ckpt_parts(struct ctld *ctl, struct cjob *j, struct sched_parts *out, struct verr *err);
void ctld_ckpt_parts_free(struct sched_parts *p);
/* Why a restart whose parts fit nowhere now waits, into why.  Holds
 * ctl->mu. */
void ctld_ckpt_parts_why(struct ctld *ctl, const struct cjob *j, const struct sched_parts *p, char *why, size_t len);
/* node_drain (root; ctld_drain.c): the node takes no new guests, or again;
 * with checkpoint, each job running there is checkpointed with stop and
 * restarted.  Without ctl->mu. */
struct json_object *ctld_drain_handle(struct ctld *ctl, const struct cmsg *m);

/* Handles one validated message from peer; the reply (never NULL). */
struct json_object *ctld_handle(struct ctld *ctl, const struct cmsg *m, const struct wire_peer *peer);

/* ------------------------------------------------------------ metrics */

/* Why a start failed, as the metrics count it: a fixed set, so a label
 * never carries text a user or a node wrote. */
enum ctld_start_fail {
	CTLD_SF_NODE_UNREACHABLE,      /* a node's job_prepare got no answer */
	CTLD_SF_NODE_REFUSED,          /* a node answered job_prepare with an error */
	CTLD_SF_LAUNCH,                /* job_launch on guest 0's node failed */
	CTLD_SF_PATHS,                 /* its binds or folders cannot be planned any more */
	CTLD_SF_IMAGE,                 /* its image left the store before it started */
	CTLD_SF_INTERNAL,              /* its launch could not be made (out of memory) */
	CTLD_SF_MAX
};

/* --metrics ADDR:PORT: binds, reads the token file (NULL: none) and starts
 * the HTTP server's thread; from then on the hooks below count.  Before
 * ctld_state_load is fine (a scrape then sees an empty cluster). */
int ctld_metrics_start(struct ctld *ctl, const char *addr, const char *token_file, struct verr *err);
/* Hooks; each does nothing without --metrics.  Callers may hold ctl->mu. */
void ctld_metrics_start_failed(struct ctld *ctl, enum ctld_start_fail why);
/* j became RUNNING: its wait since submit goes into the histogram. */
void ctld_metrics_job_running(struct ctld *ctl, const struct cjob *j);
void ctld_metrics_job_ended(struct ctld *ctl, enum job_state st);
/* An image_data reply of bytes; pull: it answers the first request of a
 * node's pull (an image's manifest from offset 0). */
void ctld_metrics_image_sent(struct ctld *ctl, bool pull, uint64_t bytes);
/* The page (ctld_metrics.c): a snapshot under ctl->mu, formatted after it
 * is released.  Malloc'ed, *len bytes; NULL: out of memory. */
char *ctld_metrics_text(struct ctld *ctl, size_t *len);
/* The HTTP server on listening socket fd (ctld_metrics_http.c). */
int ctld_metrics_http_start(struct ctld *ctl, int fd, const char *token_file, struct verr *err);

/* ---------------------------------------------------------- disk room */

/* The spool (ctld_spool.c), ctl->spool_dir: created, locked against a second
 * controller; output files of an older layout (<state>/spool) moved in. */
int ctld_spool_open(struct ctld *ctl, struct verr *err);
dev_t ctld_spool_dev(struct ctld *ctl);
/* 0 when the spool takes new jobs, else -1 and why (naming the folder). */
int ctld_spool_room(struct ctld *ctl, char *why, size_t len);
/* Removes a file a new job's id finds (left by an earlier database). */
void ctld_spool_forget(struct ctld *ctl, int64_t id);
/* Appends len bytes at size (the file's length) within the job's limit
 * and the spool's room; what does not fit is cut (*cut, and the file ends
 * with a line saying so).  The file's new length.  Under ctl->spool_mu. */
int64_t ctld_spool_append(struct ctld *ctl, int64_t id, int64_t size, const uint8_t *data, size_t len, bool *cut);
/* A job's spool file: its length and whether it was cut. */
void ctld_spool_scan(struct ctld *ctl, int64_t id, int64_t *size, bool *cut);
ssize_t ctld_spool_read(struct ctld *ctl, int64_t id, void *buf, size_t len, int64_t off);

/* The database's room (ctld_room.c), after ctld_spool_open, before the store
 * opens. */
int ctld_room_open(struct ctld *ctl, struct verr *err);
/* What the spool keeps free: more when it shares the database's filesystem. */
uint64_t ctld_room_spool_keep(struct ctld *ctl);
/* Gives up or remakes the reserve as the free space says; sets ctl->db_full. */
void ctld_room_check(struct ctld *ctl);
/* A commit met a full disk: gives up the reserve; false if it was gone. */
bool ctld_room_release(struct ctld *ctl);
/* 0 when new jobs can be taken (the database's folder and the spool have
 * room), else -1 and why.  Holds ctl->mu. */
int ctld_room_for_jobs(struct ctld *ctl, char *why, size_t len);

#endif
