/*
 * vhpcd internals (private to nodeagent/vhpcd_*.c and main_vhpcd.c).
 *
 *   vhpcd_msg.c   the controller's messages, parsed and validated (pure; fuzzed)
 *   vhpcd_job.c   one job on this node: prepare (dir, placement, network with
 *                 VXLAN, vmshm, guests), re-adopt after a restart, tear down
 *   vhpcd_run.c   launch (detached mpirun in guest 0), output and exit to ctld
 *   vhpcd_ctl.c   registration and heartbeats
 *   vhpcd_srv.c   the listener: one thread per controller connection
 *   vhpcd_sim.c   --simulate N: fake nodes for scheduling benchmarks
 *   vhpcd_rdma.c  RDMA devices (libibverbs)
 *   fabric.c      the node's fabric and PCI functions: reported, and a job's share checked
 *   image.c       the node's image cache: pulls from vhpc-ctld's store
 *   exec.c        guest_open: a sealed stream to a guest's agent (vhpc exec)
 */
#ifndef VHPC_NODEAGENT_VHPCD_INT_H
#define VHPC_NODEAGENT_VHPCD_INT_H

#include "lib/binds.h"
#include "lib/chan.h"
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/imgwire.h"
#include "lib/inet.h"
#include "lib/tuning.h"
#include "lib/wirepipe.h"
#include <sys/types.h>
#include <pthread.h>

#include "nodeagent/nodeagent.h"

struct json_object;

#define VD_MAX_JOB_GUESTS 4096     /* guests of one job, all nodes */
#define VD_MAX_PEERS      4096
#define VD_OUTPUT_CHUNK   (256u * 1024)

/* ------------------------------------------------------------- messages */

enum vmsg_type { VM_PREPARE = 1, VM_LAUNCH, VM_STOP, VM_GUEST_OPEN, VM_PAUSE, VM_RESUME, VM_CHECKPOINT };

struct vprep {
	int64_t job;
	char node[65];
	char local[16];            /* the na job id on this node */
	uid_t uid;
	uint32_t vni;
	struct ipv4net subnet;
	int guest_port;
	char image[65], tuning[65];
	char image_id[65];         /* what image named when the job was submitted */
	char driver[17];           /* a name of lib/drivers.h */
	int vcpus;
	uint64_t mem;
	uint64_t scratch;          /* the job spec's /scratch size; 0 = none */
	bool oversubscribe, vmshm;
	bool single_copy;          /* absent (an older controller): true */
	int nhere;                 /* guests on this node */
	int *here;                 /* their job-wide indexes (sorted, unique) */
	int ntotal;                /* guests of the job */
	int *ranks;                /* per guest of the job */
	int nranks_total;
	int npeers;
	uint32_t *peers;
	uint32_t *guest_nodes;     /* [ntotal] each guest's node (underlay), or NULL */
	struct cluster_wg wg;      /* underlay encryption: key NULL = none */
	char key_hex[2 * CHAN_KEY_LEN + 1];
	int64_t timeout;
	struct bind_list binds;    /* host paths in the guests */
	/* the fabric (job_prepare's "fabric"): absent, rdma false */
	bool rdma;
	bool rdma_asked;           /* "asked": the user said --rdma */
	int fabric_mode;           /* enum fabric_mode */
	int vlan, pkey;            /* the one its mode uses; 0 the other */
	struct ipv4net fsubnet;
	/* PCI functions for this node's guests (job_prepare's "pci") */
	int npci;
	char pci[NODE_PCI_MAX][PCI_ADDR_LEN + 1];
	int pci_guest[NODE_PCI_MAX];   /* job-wide guest index, one of here[] */
	char restore[65];          /* "restore": the checkpoint the guests come
	                            * from (left paused), or "" */
};

struct vmsg {
	enum vmsg_type type;
	int64_t job;
	char node[65];
	struct vprep prep;         /* VM_PREPARE */
	char **argv, **env;        /* VM_LAUNCH */
	int64_t timeout_ms;
	char reason[64];           /* VM_STOP */
	int guest;                 /* VM_GUEST_OPEN: job-wide index */
	uint8_t pipe_key[WPIPE_KEY_LEN]; /* VM_GUEST_OPEN: seals the stream */
	char ckpt[65];             /* VM_CHECKPOINT: its name, [a-z0-9][a-z0-9.-]{0,63} */
	bool check;                /* VM_CHECKPOINT: only whether it can be done */
	bool close_sessions;       /* VM_PAUSE: close the exec and shell sessions a
				    * driver cannot save (ckpt_no_sessions) first;
				    * VM_CHECKPOINT check: they do not refuse it */
};

int vmsg_parse(struct json_object *msg, struct vmsg *m, struct verr *err);
/* vhpc-ctld's image_data answer (its parts checked: names, sizes, bounds). */
int vimg_data_parse(struct json_object *reply, struct image_chunk **chunks, int *n, struct verr *err);
void vmsg_free(struct vmsg *m);
void vprep_free(struct vprep *p);

/* ------------------------------------------------------------- the node */

enum vjob_state { VJ_PREPARING = 0, VJ_READY, VJ_RUNNING, VJ_EXITED, VJ_FAILED };

struct vjob {
	int64_t id;
	char local[16];
	enum vjob_state state;
	char error[256];
	bool stop_requested;       /* a job_stop came while preparing */
	bool stopping;
	bool adopted;              /* taken over from a dead vhpcd */
	bool paused;               /* job_pause: its guests here are frozen */
	bool ckpt_busy;            /* a job_pause, job_resume or job_checkpoint runs */
	bool ckpt_damaged;         /* its restore was refused: the part here is damaged */
	int sessions;              /* exec streams open into its guests here (exec.c) */
	struct vprep p;
	char *prep_json;
	/* resources: the node agent's job lifecycle */
	struct na_job *nj;
	struct image_info img;     /* from the cache, by p.image_id */
	char label[32];            /* VHPC_JOB in the guests: the job number */
	char host_id[160];         /* the vmshm BTL's "same host" */
	const char *pci[NODE_PCI_MAX]; /* na_job_spec's view of p.pci */
	int pci_local[NODE_PCI_MAX];   /* ... and of p.pci_guest: this node's index */
	/* running (launcher) */
	bool launched;
	pthread_t mon;
	bool mon_running, mon_stop;
};

struct vd {
	pthread_mutex_t mu;
	pthread_cond_t cv;         /* job table or a job's state changed */
	char name[65];
	char addr[64];             /* where we listen, HOST:PORT, as ctld should reach us */
	uint32_t underlay;
	char ctl[300];             /* vhpc-ctld HOST:PORT */
	struct na_topo *topo;
	struct cluster_cfg cl;
	struct json_object *rdma;  /* [{name, node_guid, ports}] */
	int hb_ms;
	uint64_t spool_size;
	struct vjob **jobs;
	int njobs;
	size_t capjobs;
	/* the image cache (image.c) */
	char cache[512];           /* --image-cache */
	uint64_t cache_size;       /* --image-cache-size */
	/* --simulate */
	int simulate;
	char topo_spec[256];
	int sim_runtime_ms;
};

extern struct vd vd;

struct vjob *vd_job_find(int64_t id);
int vd_job_add(struct vjob *j);
void vd_job_remove(struct vjob *j);
void vjob_free(struct vjob *j);

/* vhpcd_job.c; prepare and teardown run without vd.mu. */
int vjob_prepare(struct vjob *j, struct verr *err);
/* Everything the job has here, in reverse; logs what fails. */
void vjob_teardown(struct vjob *j);
/* Jobs a dead vhpcd left in the run dir: taken over (their guests keep
 * running) or, when that is not possible, removed. */
int vd_adopt_all(struct verr *err);
/* Whether all of the job's guests here still run; when not, *why says
 * which stopped and how. */
bool vjob_guests_alive(struct vjob *j, char *why, size_t len);

/* usage.c: what torn-down jobs used (vhpc history) */
/* Reads what the job's guests here used from their cgroups, which must
 * still exist (vjob_teardown, before na_job_stop), and keeps it. */
void vd_usage_take(struct vjob *j);
/* A job started here again (after a failed start): what its earlier
 * attempt used is not what a later job_stop asks about. */
void vd_usage_forget(int64_t job);
/* Adds `usage` to job_stop's reply when the numbers of job are kept. */
void vd_usage_reply(struct json_object *reply, int64_t job);

/* vhpcd_run.c */
int vjob_launch(struct vjob *j, const struct vmsg *m, struct verr *err);
/* Re-attaches to a detached mpirun found running after a restart. */
int vjob_reattach(struct vjob *j, struct verr *err);
void vjob_monitor_stop(struct vjob *j);

/* vhpcd_ctl.c */
int vd_register(struct verr *err);
void *vd_heartbeat_thread(void *arg);
/* Stops a job in a thread of its own (a stop from the controller's reply). */
void vd_stop_async(int64_t id);
/* Tears the job down and forgets it (the job_stop handler). */
void vd_stop_job(int64_t id);
/* A call to the controller; the reply must come from root. */
int vd_call(struct json_object *req, struct json_object **reply, int timeout_ms, struct verr *err);

/* vhpcd_srv.c */
void vd_serve(int lfd) __attribute__((noreturn));
/* Answers a validated job_launch or job_stop. */
struct json_object *vd_handle(const struct vmsg *m);

/* exec.c: guest_open, a stream to a guest's agent for vhpc exec and
 * vhpc shell; takes the connection over after its reply. */
struct json_object *vd_guest_open(const struct vmsg *m);
/* Closes the job's exec and shell streams here and waits up to wait_ms
 * for their sessions to end (exec.c); -1 when some did not. */
int vd_sessions_close(int64_t job, int wait_ms, struct verr *err);

/* ckpt.c: job_pause, job_resume and job_checkpoint (scheduler/PROTOCOL.md). */
struct json_object *vd_ckpt_handle(const struct vmsg *m);

/* vhpcd_sim.c: registers and heartbeats the fake nodes; their messages */
int vd_simulate(void);
struct json_object *vd_sim_handle(const struct vmsg *m);

/* image.c: the image cache */
/* Locks the cache (one vhpcd per cache) and removes what an interrupted
 * pull left. */
int vd_image_init(struct verr *err);
/* The job's image, by its id, from the cache; pulled from vhpc-ctld first
 * when missing (checked, room made). */
int vd_image_get(const struct vjob *j, struct image_info *out, struct verr *err);
/* The cache for register and heartbeat: [{id, name, bytes, used, in_use}]. */
struct json_object *vd_images_json(void);

/* vhpcd_rdma.c */
struct json_object *vd_rdma_devices(void);
/* A sysfs attribute's first line, relative to dir, never through a link
 * at its last component (fabric.c); 0 or -1. */
int vd_sysfs_read(const char *dir, const char *rel, char *buf, size_t len);
/* register's fabric_link and pci for node `name` from the cluster file:
 * the link when it exists here, and each listed function that exists,
 * with its NUMA node (a simulated node reports them unchecked). */
void vd_fabric_report(struct json_object *req, const char *name, bool simulated);
/* The job_prepare's fabric and functions, checked against node's entry of
 * this vhpcd's cluster file, into the job's spec (logged). */
int vd_fabric_spec(struct vjob *j, const char *node, struct na_job_spec *s, struct verr *err);

#endif
