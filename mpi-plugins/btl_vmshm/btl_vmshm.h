/*
 * Internal header of the vmshm BTL (Open MPI 4.1, BTL interface 3.1):
 * shared memory between ranks in different guests on one physical host.
 * Component (params, region attach, modex, progress) in btl_vmshm_component.c;
 * module (add_procs, descriptors, send paths) in btl_vmshm_module.c.
 */
#ifndef VHPC_BTL_VMSHM_H
#define VHPC_BTL_VMSHM_H

#include "opal_config.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"
#include "opal/threads/mutex.h"
#include "opal/util/proc.h"

#include "lib/vmshm/vmshm_region.h"
#include "lib/vmshm/vmshm_ring.h"

/* 4: a large record's payload may sit up to a page after its header (its
 * skew); 3: records on 32 bytes (lib/vmshm/vmshm_ring.h).  A peer with an
 * older BTL is not reached through vmshm. */
#define VMSHM_MODEX_VERSION 4u
#define VMSHM_ID_LEN 64

/* What each rank publishes (global scope) so peers can decide reachability. */
struct vmshm_modex {
	uint32_t version;
	uint32_t slot;
	uint64_t key;          /* stamps records in the rings delivering to us */
	uint8_t uuid[16];
	char host_id[VMSHM_ID_LEN];
	char guest_id[VMSHM_ID_LEN];
	/* Single copy (btl_vmshm_single_copy): a peer in our PID namespace
	 * reads large messages straight out of our memory (process_vm_readv);
	 * it first reads our key at probe to prove that it can. */
	uint64_t pidns;        /* inode of /proc/self/ns/pid */
	uint64_t probe;        /* address of our key in our memory */
	uint32_t pid;
	uint32_t pad;
};

enum vmshm_frag_kind { FRAG_EAGER, FRAG_MAX, FRAG_INPLACE };

typedef struct vmshm_frag {
	mca_btl_base_descriptor_t base;
	mca_btl_base_segment_t segs[2];
	struct mca_btl_base_endpoint_t *ep;
	struct vmshm_frag *next;
	size_t cap;
	uint8_t kind;
	uint8_t tag;
	unsigned char *buf;
} vmshm_frag_t;

struct mca_btl_base_endpoint_t {
	opal_proc_t *proc;
	opal_process_name_t name;
	uint32_t peer_slot;
	pid_t cma_pid;         /* > 0: large messages from this peer are read from it */
	bool broken;
	bool pending_listed;
	struct vmshm_prod prod;
	vmshm_frag_t *pend_head, *pend_tail;
	struct mca_btl_base_endpoint_t *next;         /* all endpoints */
	struct mca_btl_base_endpoint_t *pend_next;    /* endpoints with pending frags */
	uint64_t tx_frags, tx_bytes, tx_full;
	uint64_t gets, get_bytes;
};

/* Per-producer state on the receiving side. */
struct vmshm_inbound {
	struct vmshm_cons cons;
	bool open;
	bool broken;
	uint64_t rx_frags, rx_bytes;
};

typedef struct {
	mca_btl_base_component_3_0_0_t super;

	/* parameters */
	char *host_id;
	char *region_path;
	char *guest_id;
	bool create;
	size_t region_size;
	char *region_offset;           /* a device file: where the region starts in it */
	unsigned int ring_size;
	unsigned int max_slots;
	unsigned int hot_window;
	int attach_timeout_ms;
	int verbose;
	bool stats;
	bool single_copy;
	uint64_t my_pidns;

	/* the region */
	void *base;
	uint64_t size;
	struct vmshm_geom geom;
	uint32_t my_slot;
	uint32_t my_epoch;
	uint64_t my_key;
	uint64_t my_owner;
	bool ready;

	/* receive side */
	struct vmshm_inbound *in;      /* [nslots] */
	uint32_t *active;              /* producer slots being polled */
	uint32_t nactive;
	uint64_t known[VMSHM_MAX_SLOTS / 64];
	uint64_t valid[VMSHM_MAX_SLOTS / 64];  /* real slots other than ours */
	uint64_t *my_active;                   /* our slot's producer bitmap */
	int polling;
	bool progress_hp;
	mca_btl_base_descriptor_t rx_desc;
	mca_btl_base_segment_t rx_seg;

	/* send side */
	struct mca_btl_base_endpoint_t *endpoints;
	struct mca_btl_base_endpoint_t *pend_eps;
	vmshm_frag_t *done_head, *done_tail;   /* sent, callback not yet made */
	vmshm_frag_t *free_eager, *free_max, *free_inplace;

	opal_mutex_t send_lock;
	opal_mutex_t poll_lock;
	mca_btl_base_module_error_cb_fn_t error_cb;
	int vader_selected;  /* -1 unknown */
} mca_btl_vmshm_component_t;

OPAL_MODULE_DECLSPEC extern mca_btl_vmshm_component_t mca_btl_vmshm_component;
extern mca_btl_base_module_t mca_btl_vmshm;

/* module */
int vmshm_module_finalize(struct mca_btl_base_module_t *btl);
void vmshm_frags_release_all(void);
/* Copies pending fragments of every waiting endpoint into its ring. */
int vmshm_send_pending(void);
/* Makes the callbacks of fragments whose bytes are in the ring. */
int vmshm_complete_sent(void);
void vmshm_fatal(opal_proc_t *proc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vmshm_print_stats(void);

#define VMSHM_VERBOSE(lvl, ...) \
	do { if (mca_btl_vmshm_component.verbose >= (lvl)) vmshm_log(__VA_ARGS__); } while (0)
void vmshm_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
