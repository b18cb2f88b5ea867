/*
 * vhpc-ctld's durable state in SQLite (WAL, synchronous=FULL): a job is on
 * disk before its submitter hears "accepted", and every state change is
 * committed before it is acted on, so kill -9 at any moment loses nothing.
 * A store that fails SQLite's quick_check, or that SQLite cannot put in
 * WAL mode, is refused at open with an error naming the file.
 */
#ifndef VHPC_SCHED_STORE_H
#define VHPC_SCHED_STORE_H

#include "lib/err.h"
#include <sys/types.h>
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

struct store;

enum job_state {
	JOB_PENDING = 0, JOB_STARTING, JOB_RUNNING, JOB_COMPLETED, JOB_FAILED,
	JOB_CANCELLED, JOB_TIMEOUT, JOB_NODE_FAIL,
	JOB_CHECKPOINTED,        /* checkpointed and stopped (vhpc checkpoint --stop) */
	JOB_STATE_MAX
};
extern const char *const store_job_state_names[];
bool store_job_state_final(enum job_state s);

struct job_row {
	int64_t id;
	uid_t uid;
	char name[65];
	enum job_state state;
	char *spec_json;         /* the job_spec as submitted */
	char *alloc_json;        /* nodes, guests, cpus: set when starting */
	char *net_json;          /* VNI, subnet, addresses */
	int64_t submitted, started, ended;
	int exit_status;
	char reason[256];        /* why it waits, failed or was cancelled */
	char *cleanup_json;      /* nodes still to tear the job down on (NULL: keep) */
	int attempts;            /* starts that failed */
	char restart[65];        /* the checkpoint it restarts from ("": a fresh start) */
};

struct node_row {
	int64_t id;              /* stable number of the node (output only) */
	char name[65];
	char addr[64];           /* where its vhpcd listens, host:port */
	bool up;
	int64_t last_seen;
	char *info_json;         /* topology, capacity, RDMA devices */
	bool drained;            /* an admin drained it: no new jobs go there */
};

/* What the functions below return when the disk is full (SQLITE_FULL);
 * other failures return -1.  Both set err. */
#define STORE_FULL (-2)

int store_open(struct store **out, const char *path, struct verr *err);
void store_close(struct store *s);

int store_job_add(struct store *s, uid_t uid, const char *name, const char *spec_json,
		  int64_t now, int64_t *id, struct verr *err);
/* The same for a job that restarts from checkpoint `restart` (NULL: none). */
int store_job_add_restart(struct store *s, uid_t uid, const char *name, const char *spec_json,
			  int64_t now, const char *restart, int64_t *id, struct verr *err);
/* Sets state and, where non-NULL/non-negative, the other fields. */
int store_job_update(struct store *s, const struct job_row *j, struct verr *err);
int store_job_get(struct store *s, int64_t id, struct job_row *out, struct verr *err);
/* In submission order: jobs not in a final state, ended ones that ended
 * at or after ended_since (INT64_MAX: none) or still owe a teardown. */
int store_jobs_list(struct store *s, int64_t ended_since, struct job_row **out, size_t *n,
		    struct verr *err);
/* At most `limit` ended jobs of uid (-1: anyone's) with ids below
 * below_id, the newest ones, in submission order. */
int store_jobs_ended(struct store *s, int64_t uid, int64_t below_id, int limit, struct job_row **out,
		     size_t *n, struct verr *err);
void store_job_row_free(struct job_row *j);
void store_job_rows_free(struct job_row *v, size_t n);

/* What a job's guest used, as its node reported when it tore the guest
 * down (store_usage.c); -1: the node did not say. */
struct store_usage {
	int guest;
	char node[65];
	int64_t cpu_usec, mem_peak;
};
/* Records (again: the last report counts) the usage of n guests of job. */
int store_usage_put(struct store *s, int64_t job, const struct store_usage *u, int n, struct verr *err);
/* An ended job as `vhpc history` shows it, with its guests' usage: of
 * the guests whose numbers arrived (cpu_guests, mem_guests), the sum of
 * their CPU time and the largest peak of memory. */
struct history_row {
	int64_t id;
	uid_t uid;
	char name[65];
	enum job_state state;
	int exit_status;
	char reason[256];
	char *spec_json, *alloc_json;
	int64_t submitted, started, ended;
	int cpu_guests, mem_guests;
	int64_t cpu_usec, mem_peak;
};
/* At most `limit` ended jobs of uid (-1: anyone's) that ended at or after
 * since, with ids below below_id: the newest ones, in submission order. */
int store_history(struct store *s, int64_t uid, int64_t since, int64_t below_id, int limit,
		  struct history_row **out, size_t *n, struct verr *err);
void store_history_free(struct history_row *v, size_t n);

/* A checkpoint of a job (store_ckpt.c).  Its row is written before any
 * node is asked to pause or save, so a controller that dies meanwhile
 * finds it SAVING or SAVED and resumes the job's guests. */
enum ckpt_state {
	CKPT_SAVING = 0,         /* nodes asked to pause and save */
	CKPT_SAVED,              /* every part saved; the job not yet resumed or stopped */
	CKPT_DONE,               /* saved, and the job resumed or stopped */
};
struct ckpt_row {
	char name[65];           /* <job>.<seq> */
	int64_t job, seq;
	uid_t uid;               /* the job's owner */
	enum ckpt_state state;
	bool stop;               /* --stop: the job ends CHECKPOINTED once saved */
	int64_t bytes, created, standstill_ms;
	char *record;            /* ckpt.json's text */
	char damaged[512];       /* why a node refused to restore from it ("" none known) */
};
/* A new row for c->job: its seq and name (<job>.<seq>) into c. */
int store_ckpt_add(struct store *s, struct ckpt_row *c, struct verr *err);
/* State, bytes, standstill and (when non-NULL) record of c->name. */
int store_ckpt_update(struct store *s, const struct ckpt_row *c, struct verr *err);
int store_ckpt_get(struct store *s, const char *name, struct ckpt_row *out, struct verr *err);
/* uid's (-1: everyone's) rows, by job and seq. */
int store_ckpt_list(struct store *s, int64_t uid, struct ckpt_row **out, size_t *n, struct verr *err);
int store_ckpt_delete(struct store *s, const char *name, struct verr *err);
/* Records why name cannot be restored (a node found its part damaged). */
int store_ckpt_set_damaged(struct store *s, const char *name, const char *why, struct verr *err);
void store_ckpt_rows_free(struct ckpt_row *v, size_t n);

int store_node_put(struct store *s, const struct node_row *n, struct verr *err);
int store_node_id(struct store *s, const char *name, int64_t *id, struct verr *err);
int store_nodes_list(struct store *s, struct node_row **out, size_t *n, struct verr *err);
void store_node_rows_free(struct node_row *v, size_t n);

#endif
