/*
 * The cluster file (configs/cluster.yaml).
 */
#ifndef VHPC_LIB_CLUSTER_H
#define VHPC_LIB_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/config.h"
#include "lib/inet.h"

/* vhpc-ctld's defaults when the cluster file's `ctld:` is silent. */
#define CLUSTER_OUTPUT_LIMIT       (256ull << 20)
#define CLUSTER_OUTPUT_LIMIT_MIN   (64ull << 10)
#define CLUSTER_MAX_JOBS_PER_USER  500
#define CLUSTER_KEEP_ENDED         3600
#define CLUSTER_SPOOL_MAX          512

/* A PCI function a node's admin offers for passthrough (fabric.nodes[].pci). */
struct cluster_pci {
	char *addr;              /* "0000:00:05.0" (lib/fabric.h pci_addr_ok) */
	char *cls;               /* "nic", "gpu", "vf", ... (fabric_class_ok) */
};
/* One node's part of `fabric:`, by the name its vhpcd registers with. */
struct cluster_fabric_node {
	char *name;
	char *link;              /* its fabric netdev; NULL: fabric.link */
	struct cf_list pci;      /* struct cluster_pci */
};
/* `fabric:` (scheduler/README.md, "Resources"): the RDMA fabric and what
 * the controller hands each job from it. */
struct cluster_fabric {
	int mode;                /* enum fabric_mode (lib/fabric.h) */
	char *link;              /* every node's fabric netdev unless its entry says */
	long long vlan_lo, vlan_hi;   /* roce, soft-roce: a VLAN per job; 0 = no pool */
	long long pkey_lo, pkey_hi;   /* ib: a partition key per job; 0 = no pool */
	struct ipv4net pool;     /* fabric subnets are carved from here */
	long long prefix;        /* each job gets a /prefix (larger for big jobs) */
	struct cf_list nodes;    /* struct cluster_fabric_node */
};

/* `images:` (images/README.md, "Signed images"): the public keys this
 * node trusts to sign images, and whether a guest may start only from an
 * image one of them signed.  Each node acts on its own file. */
#define CLUSTER_KEYS_MAX 64
#define CLUSTER_KEY_TEXT 73       /* "ed25519:" and 64 hex digits, NUL */
struct cluster_images {
	bool require_signed;
	uint8_t (*keys)[32];      /* ed25519 public keys */
	size_t nkeys;
};
extern const struct cf_schema cluster_images_schema;
/* "ed25519:<64 hex digits>", the form keys take in the cluster file and
 * in `vhpc image keygen`'s .pub file; -1 when s is anything else. */
int cluster_key_parse(const char *s, uint8_t pk[32]);
void cluster_key_format(const uint8_t pk[32], char out[CLUSTER_KEY_TEXT]);

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
	/* Host paths every job's guests get (SRC[:DST][:ro], lib/binds.h),
	 * where a job's own --bind may come from (none: anywhere but the
	 * image's own folders), and whether each user's home and each job's
	 * submission folder are shared. */
	struct cf_strlist binds;
	struct cf_strlist bind_allow;
	bool bind_home, bind_workdir;
	/* vhpc-ctld (`ctld:`, scheduler/README.md): its output spool (NULL:
	 * beside its state folder), each job's output limit, the jobs a user
	 * may have waiting or running at once, and the seconds an ended job
	 * stays in its memory (SQLite keeps it for good). */
	char *ctld_spool;
	uint64_t ctld_output_limit;
	long long ctld_max_jobs_per_user;
	long long ctld_keep_ended;
	/* Each node's folder for kvm guests' scratch disks, on a local disk;
	 * NULL: <state dir>/scratch (nodeagent/README.md). */
	char *scratch_dir;
	/* job_network.underlay_encryption: the job networks' VXLAN between
	 * nodes rides over WireGuard (nodeagent/README.md, "Underlay
	 * encryption"); off when key is NULL. */
	struct cluster_wg {
		char *key;             /* the cluster's secret, a root-only file on every node */
		struct ipv4net pool;   /* the nodes' WireGuard addresses */
		long long port;        /* its UDP port on the underlay */
	} wg;
	struct cluster_fabric fabric;
	struct cluster_images images;
	/* checkpoints: where jobs' checkpoints live (dir; NULL: the default,
	 * CLUSTER_CKPT_DIR) and whether every node sees the same folder (a
	 * cluster filesystem), so a job may restart on any nodes (shared), or
	 * only on those that saved it (scheduler/README.md, "Checkpoints"). */
	struct cluster_ckpt {
		char *dir;
		bool shared;
	} ckpt;
};
#define CLUSTER_CKPT_DIR "/var/lib/vhpc/checkpoints"
/* The checkpoint folder the cluster file names, or the default. */
const char *cluster_ckpt_dir(const struct cluster_cfg *c);
extern const struct cf_schema cluster_schema;
extern const struct cf_schema cluster_fabric_schema;
/* fabric: the checks across its fields and job_network (lib/cluster_fabric.c). */
int cluster_fabric_check(const struct cluster_cfg *c, const char *path, struct verr *err);
/* path NULL: $VHPC_CLUSTER, else <config dir>/cluster.yaml. */
int cluster_load(const char *path, struct cluster_cfg *c, struct verr *err);
void cluster_free(struct cluster_cfg *c);
/* The node's entry of fabric.nodes, or NULL. */
const struct cluster_fabric_node *cluster_fabric_node(const struct cluster_cfg *c, const char *node);
/* The node's fabric netdev: its entry's link, else fabric.link; NULL
 * where the cluster has no fabric. */
const char *cluster_fabric_link(const struct cluster_cfg *c, const char *node);

#endif
