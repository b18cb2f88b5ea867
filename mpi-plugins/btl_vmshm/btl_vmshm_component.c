/*
 * vmshm BTL component: parameters, attaching the region, the modex entry,
 * and the progress function that polls the rings other ranks write to us.
 */
#include "btl_vmshm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opal/mca/pmix/pmix.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/proc.h"

static int vmshm_register(void);
static int vmshm_open(void);
static int vmshm_close(void);
static mca_btl_base_module_t **vmshm_init(int *num_btls, bool progress_threads,
					  bool mpi_threads);
static int vmshm_progress(void);

mca_btl_vmshm_component_t mca_btl_vmshm_component = {
	.super = {
		.btl_version = {
			MCA_BTL_DEFAULT_VERSION("vmshm"),
			.mca_open_component = vmshm_open,
			.mca_close_component = vmshm_close,
			.mca_register_component_params = vmshm_register,
		},
		.btl_data = {
			.param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT,
		},
		.btl_init = vmshm_init,
		.btl_progress = vmshm_progress,
	},
};

#define C (&mca_btl_vmshm_component)

void vmshm_log(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[vmshm %s:%d rank %u] %s\n",
		OPAL_PROC_MY_HOSTNAME ? OPAL_PROC_MY_HOSTNAME : "?", (int)getpid(),
		(unsigned)OPAL_PROC_MY_NAME.vpid, buf);
	fflush(stderr);
}

void vmshm_fatal(opal_proc_t *proc, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	vmshm_log("error: %s", buf);
	/* ob1 aborts the job on a fatal BTL error: better than a silent hang. */
	if (C->error_cb)
		C->error_cb(&mca_btl_vmshm, MCA_BTL_ERROR_FLAGS_FATAL, proc, buf);
}

/* Default for a string parameter: the platform's environment variable. */
static char *env_default(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? (char *)v : NULL;
}

static void reg_string(const char *name, const char *desc, char **storage, const char *env)
{
	*storage = env_default(env);
	(void)mca_base_component_var_register(&C->super.btl_version, name, desc,
					      MCA_BASE_VAR_TYPE_STRING, NULL, 0,
					      MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_3,
					      MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int vmshm_register(void)
{
	const char *e;

	(void)mca_base_var_group_component_register(&C->super.btl_version,
		"Shared memory between guests on one physical host (vhpc)");

	reg_string("host_id", "Physical host this guest runs on; ranks with equal host "
		   "ids and the same region use vmshm (default: $VHPC_HOST_ID)",
		   &C->host_id, "VHPC_HOST_ID");
	reg_string("region", "Path of the shared-memory region: a file on tmpfs/hugetlbfs "
		   "or an ivshmem BAR resource file (default: $VHPC_VMSHM_PATH)",
		   &C->region_path, "VHPC_VMSHM_PATH");
	reg_string("region_offset", "Where the region starts when the region path is a device "
		   "(/dev/mem in a kvm guest: the ivshmem BAR's physical address; the mapped "
		   "length is btl_vmshm_region_size) (default: $VHPC_VMSHM_OFFSET)",
		   &C->region_offset, "VHPC_VMSHM_OFFSET");
	reg_string("guest_id", "Guest this rank runs in; peers with the same guest id "
		   "are left to vader when vader is selected (default: $VHPC_GUEST_ID; "
		   "empty: guest = Open MPI node)", &C->guest_id, "VHPC_GUEST_ID");

	e = getenv("VHPC_VMSHM_CREATE");
	C->create = e && !strcmp(e, "1");
	(void)mca_base_component_var_register(&C->super.btl_version, "create",
		"Create the region file if it is missing (tests; the platform creates it "
		"in jobs) (default: $VHPC_VMSHM_CREATE=1)", MCA_BASE_VAR_TYPE_BOOL, NULL, 0,
		MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
		&C->create);
	C->region_size = 64ul << 20;
	e = getenv("VHPC_VMSHM_SIZE");
	if (e && *e) {
		char *end;
		unsigned long long v = strtoull(e, &end, 10);
		if (*end == 'M' || *end == 'm')
			v <<= 20, end++;
		else if (*end == 'G' || *end == 'g')
			v <<= 30, end++;
		if (!*end && v)
			C->region_size = v;
	}
	(void)mca_base_component_var_register(&C->super.btl_version, "region_size",
		"Size of the region when this rank creates it (default: $VHPC_VMSHM_SIZE or 64M)",
		MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
		MCA_BASE_VAR_SCOPE_READONLY, &C->region_size);
	C->ring_size = 1u << 20;
	(void)mca_base_component_var_register(&C->super.btl_version, "ring_size",
		"Bytes per ring (power of two) when this rank formats the region; "
		"the largest it may use",
		MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
		OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &C->ring_size);
	e = getenv("VHPC_VMSHM_SLOTS");
	C->max_slots = e && *e ? (unsigned)strtoul(e, NULL, 10) : 0;
	(void)mca_base_component_var_register(&C->super.btl_version, "max_slots",
		"Ranks that share the region, when this rank formats it; rings shrink "
		"to fit them (0: as many slots as fit) (default: $VHPC_VMSHM_SLOTS)",
		MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
		OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &C->max_slots);
	C->hot_window = VMSHM_HOT_WINDOW;
	(void)mca_base_component_var_register(&C->super.btl_version, "hot_window",
		"Bytes at the start of a ring that a consumer which keeps up is kept in "
		"(0: use the whole ring; only rings of 4 windows or more)",
		MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
		OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY, &C->hot_window);
	C->attach_timeout_ms = 10000;
	(void)mca_base_component_var_register(&C->super.btl_version, "attach_timeout",
		"Milliseconds to wait for another rank to finish formatting the region",
		MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
		OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &C->attach_timeout_ms);
	C->verbose = 0;
	(void)mca_base_component_var_register(&C->super.btl_version, "verbose",
		"1: say which peers use vmshm and why others do not; 2: more",
		MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
		OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &C->verbose);
	e = getenv("VHPC_VMSHM_SINGLE_COPY");
	C->single_copy = e && !strcmp(e, "1");
	if (e && *e && strcmp(e, "0") && strcmp(e, "1"))
		vmshm_log("VHPC_VMSHM_SINGLE_COPY='%.40s' is neither 0 nor 1: single copy stays off", e);
	(void)mca_base_component_var_register(&C->super.btl_version, "single_copy",
		"Messages above the rendezvous limit are read straight from the sender's "
		"memory (process_vm_readv) by a peer in the same PID and user namespace; "
		"set where co-located guests share them (default: $VHPC_VMSHM_SINGLE_COPY=1)",
		MCA_BASE_VAR_TYPE_BOOL, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
		MCA_BASE_VAR_SCOPE_READONLY, &C->single_copy);
	C->stats = false;
	(void)mca_base_component_var_register(&C->super.btl_version, "stats",
		"Print per-peer fragment and byte counters at finalize (vmshm-stats: lines)",
		MCA_BASE_VAR_TYPE_BOOL, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
		OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &C->stats);

	/* Above vader (65536) so that a peer in another guest that vader could
	 * also reach (guests simulated inside one node) goes to vmshm; vmshm
	 * never claims same-guest peers while vader is selected, and never self. */
	mca_btl_vmshm.btl_exclusivity = MCA_BTL_EXCLUSIVITY_HIGH + 1;
	/* Large fragments: ob1's per-fragment work costs more than copying
	 * through a ring that stays in cache (see README, benchmark).  Eager
	 * up to 64 KiB of payload (and ob1's match header): a rendezvous
	 * costs a round trip, and when ranks share cores every step of it
	 * waits for the peer to be scheduled (4 ranks on 2 cores, 64 KiB
	 * PingPong: 25.4 us with a 16 KiB limit, 10.8 us with this one, vader
	 * 11.7; README, "Eager up to 64 KiB"). */
	mca_btl_vmshm.btl_eager_limit = 64 * 1024 + 64;
	mca_btl_vmshm.btl_rndv_eager_limit = 64 * 1024;
	mca_btl_vmshm.btl_max_send_size = 128 * 1024;
	mca_btl_vmshm.btl_rdma_pipeline_send_length = mca_btl_vmshm.btl_eager_limit;
	mca_btl_vmshm.btl_rdma_pipeline_frag_size = mca_btl_vmshm.btl_eager_limit;
	mca_btl_vmshm.btl_min_rdma_pipeline_size = INT32_MAX;
	/* Not SEND_INPLACE: with it, ob1 sends eager messages over 256 bytes
	 * through prepare_src+send; without it, through sendi, which copies
	 * straight into the ring and completes at once.  prepare_src still
	 * references contiguous data in place for rendezvous fragments. */
	mca_btl_vmshm.btl_flags = MCA_BTL_FLAGS_SEND;
	/* GET on every rank, single copy or not: ob1 aborts a receiver whose
	 * BTL cannot take a peer's RGET header.  Whether a sender uses RGET is
	 * decided per peer by btl_register_mem (module). */
	mca_btl_vmshm.btl_flags |= MCA_BTL_FLAGS_GET;
	mca_btl_vmshm.btl_get_limit = SIZE_MAX;
	mca_btl_vmshm.btl_get_alignment = 0;
	mca_btl_vmshm.btl_latency = 1;
	mca_btl_vmshm.btl_bandwidth = 20000;
	return mca_btl_base_param_register(&C->super.btl_version, &mca_btl_vmshm);
}

static int vmshm_open(void)
{
	OBJ_CONSTRUCT(&C->send_lock, opal_mutex_t);
	OBJ_CONSTRUCT(&C->poll_lock, opal_mutex_t);
	C->vader_selected = -1;
	return OPAL_SUCCESS;
}

static void unmap_region(void)
{
	if (C->base) {
		munmap(C->base, C->size);
		C->base = NULL;
	}
}

static int vmshm_close(void)
{
	/* We may have registered ourselves (discover_producers); the library
	 * is unloaded after this. */
	if (C->progress_hp)
		(void)opal_progress_unregister(vmshm_progress);
	C->progress_hp = false;
	if (C->ready)
		vmshm_module_finalize(&mca_btl_vmshm);
	unmap_region();
	OBJ_DESTRUCT(&C->send_lock);
	OBJ_DESTRUCT(&C->poll_lock);
	return OPAL_SUCCESS;
}

static int map_region(char *err, size_t errlen)
{
	int flags = O_RDWR | O_CLOEXEC | (C->create ? O_CREAT : 0);
	int fd = open(C->region_path, flags, 0600);
	struct stat st;

	if (fd < 0) {
		snprintf(err, errlen, "open: %s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "fstat: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (st.st_size == 0 && C->create) {
		/* Every creating rank asks for the same size: racing is harmless. */
		if (ftruncate(fd, (off_t)C->region_size) < 0 || fstat(fd, &st) < 0) {
			snprintf(err, errlen, "sizing to %zu bytes: %s", C->region_size,
				 strerror(errno));
			close(fd);
			return -1;
		}
	}
	off_t off = 0;
	size_t len = (size_t)st.st_size;

	/* A kvm guest maps the ivshmem BAR through /dev/mem (opened without
	 * O_SYNC): the kernel then maps it write-back, where the BAR's sysfs
	 * resource file would be uncached (UC-), and on AMD hosts KVM keeps
	 * the guest's memory type. */
	if (S_ISCHR(st.st_mode)) {
		char *end = NULL;
		unsigned long long o = C->region_offset ? strtoull(C->region_offset, &end, 0) : 0;

		if (!C->region_offset || !*C->region_offset || *end || (o & 4095)) {
			snprintf(err, errlen, "a device region needs a page-aligned btl_vmshm_region_offset "
				 "(VHPC_VMSHM_OFFSET), got '%s'", C->region_offset ? C->region_offset : "");
			close(fd);
			return -1;
		}
		off = (off_t)o;
		len = C->region_size;
	} else if (st.st_size <= 0) {
		snprintf(err, errlen, "region is empty (the platform sizes it before the job)");
		close(fd);
		return -1;
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "mmap of %zu bytes at %lld: %s", len, (long long)off,
			 strerror(errno));
		return -1;
	}
	C->base = p;
	C->size = (uint64_t)len;
	return 0;
}

/* Gives back what vmshm_init took after it claimed a slot; vmshm stays off. */
static mca_btl_base_module_t **init_failed(void)
{
	free(C->in);
	free(C->active);
	C->in = NULL;
	C->active = NULL;
	vmshm_slot_release(C->base, &C->geom, C->my_slot, C->my_owner);
	unmap_region();
	return NULL;
}

static void clamp_sizes(void)
{
	/* Eight fragments fit in a ring, so copying in and copying out overlap. */
	size_t max = C->geom.ring_size / 8;
	if (max > vmshm_ring_max_payload(C->geom.ring_size))
		max = vmshm_ring_max_payload(C->geom.ring_size);
	if (mca_btl_vmshm.btl_max_send_size > max)
		mca_btl_vmshm.btl_max_send_size = max;
	if (mca_btl_vmshm.btl_eager_limit > mca_btl_vmshm.btl_max_send_size)
		mca_btl_vmshm.btl_eager_limit = mca_btl_vmshm.btl_max_send_size;
	if (mca_btl_vmshm.btl_rndv_eager_limit > mca_btl_vmshm.btl_max_send_size)
		mca_btl_vmshm.btl_rndv_eager_limit = mca_btl_vmshm.btl_max_send_size;
}

static mca_btl_base_module_t **vmshm_init(int *num_btls, bool progress_threads,
					  bool mpi_threads)
{
	char err[256];
	mca_btl_base_module_t **mods;
	struct vmshm_modex mx;
	int rc;

	(void)progress_threads;
	(void)mpi_threads;
	*num_btls = 0;
	if (!C->host_id || !*C->host_id || !C->region_path || !*C->region_path) {
		VMSHM_VERBOSE(1, "not configured (no host id or region): disabled");
		return NULL;
	}
	if (strlen(C->host_id) >= VMSHM_ID_LEN ||
	    (C->guest_id && strlen(C->guest_id) >= VMSHM_ID_LEN)) {
		vmshm_log("host/guest id longer than %d bytes: vmshm disabled", VMSHM_ID_LEN - 1);
		return NULL;
	}
	if (map_region(err, sizeof(err))) {
		vmshm_log("region %s: %s: vmshm disabled, peers fall back to other BTLs",
			  C->region_path, err);
		return NULL;
	}
	struct vmshm_attach_opts o = {
		.ring_size = C->ring_size, .max_slots = C->max_slots,
		.timeout_ms = C->attach_timeout_ms,
	};
	if (vmshm_region_attach(C->base, C->size, &o, &C->geom, err, sizeof(err))) {
		vmshm_log("region %s: %s: vmshm disabled, peers fall back to other BTLs",
			  C->region_path, err);
		unmap_region();
		return NULL;
	}
	C->my_owner = ((uint64_t)OPAL_PROC_MY_NAME.jobid << 32) | OPAL_PROC_MY_NAME.vpid;
	if (vmshm_slot_claim(C->base, &C->geom, C->my_owner, &C->my_slot, &C->my_epoch)) {
		vmshm_log("region %s: all %u slots taken: vmshm disabled", C->region_path,
			  C->geom.nslots);
		unmap_region();
		return NULL;
	}
	vmshm_random(&C->my_key, sizeof(C->my_key));
	C->in = calloc(C->geom.nslots, sizeof(*C->in));
	C->active = calloc(C->geom.nslots, sizeof(*C->active));
	mods = malloc(sizeof(*mods));
	if (!C->in || !C->active || !mods) {
		free(mods);
		return init_failed();
	}
	clamp_sizes();

	memset(&mx, 0, sizeof(mx));
	mx.version = VMSHM_MODEX_VERSION;
	mx.slot = C->my_slot;
	mx.key = C->my_key;
	memcpy(mx.uuid, C->geom.uuid, sizeof(mx.uuid));
	snprintf(mx.host_id, sizeof(mx.host_id), "%s", C->host_id);
	snprintf(mx.guest_id, sizeof(mx.guest_id), "%s", C->guest_id ? C->guest_id : "");
	if (C->single_copy) {
		struct stat ns;

		if (stat("/proc/self/ns/pid", &ns) == 0) {
			C->my_pidns = (uint64_t)ns.st_ino;
			mx.pidns = C->my_pidns;
			mx.pid = (uint32_t)getpid();
			mx.probe = (uint64_t)(uintptr_t)&C->my_key;
		} else {
			VMSHM_VERBOSE(1, "no /proc/self/ns/pid (%s): no single copy", strerror(errno));
			C->single_copy = false;
		}
	}
	/* Global scope: peers in other guests run under other orteds. */
	OPAL_MODEX_SEND(rc, OPAL_PMIX_GLOBAL, &C->super.btl_version, &mx, sizeof(mx));
	if (rc != OPAL_SUCCESS) {
		vmshm_log("modex send failed (%d): vmshm disabled", rc);
		free(mods);
		return init_failed();
	}
	C->rx_desc.des_segments = &C->rx_seg;
	C->rx_desc.des_segment_count = 1;
	C->my_active = vmshm_slot_at(C->base, C->my_slot)->active;
	for (uint32_t w = 0; w < VMSHM_MAX_SLOTS / 64; w++)
		C->valid[w] = vmshm_slot_active_word_mask(&C->geom, w) & ~(w == C->my_slot / 64 ?
			1ull << (C->my_slot % 64) : 0);
	C->ready = true;
	VMSHM_VERBOSE(1, "region %s: %u slots, %u-byte rings, slot %u epoch %u, host '%s' guest '%s'",
		      C->region_path, C->geom.nslots, C->geom.ring_size, C->my_slot,
		      C->my_epoch, C->host_id, C->guest_id ? C->guest_id : "");
	mods[0] = &mca_btl_vmshm;
	*num_btls = 1;
	return mods;
}

/* Producers announce themselves in our slot's bitmap when they connect, so
 * a peer that has not been through add_procs here yet is still heard. */
static void discover_producers(void)
{
	for (uint32_t w = 0; w * 64 < C->geom.nslots; w++) {
		uint64_t bits = __atomic_load_n(&C->my_active[w], __ATOMIC_ACQUIRE) &
				C->valid[w] & ~C->known[w];
		while (bits) {
			uint32_t b = (uint32_t)__builtin_ctzll(bits);
			uint32_t p = w * 64 + b;
			bits &= bits - 1;
			C->known[w] |= 1ull << b;
			vmshm_cons_init(&C->in[p].cons,
					vmshm_ring_ctrl(C->base, &C->geom, p, C->my_slot),
					vmshm_ring_data(C->base, &C->geom, p, C->my_slot),
					C->geom.ring_size, C->geom.ring_shift, C->my_key);
			C->in[p].open = true;
			C->active[C->nactive++] = p;
			VMSHM_VERBOSE(2, "slot %u started sending to us", p);
			/* Until we send to someone ourselves, Open MPI polls us only
			 * every 8th round (its low-priority list); a peer that talks
			 * to us deserves every round. */
			if (!C->progress_hp) {
				C->progress_hp = true;
				opal_progress_register(vmshm_progress);
			}
		}
	}
}

static opal_proc_t *proc_of_slot(uint32_t slot)
{
	for (struct mca_btl_base_endpoint_t *ep = C->endpoints; ep; ep = ep->next)
		if (ep->peer_slot == slot)
			return ep->proc;
	return NULL;
}

static int poll_inbound(void)
{
	int n = 0;

	/* A receive callback that calls back into progress must not see the
	 * record it is being handed a second time. */
	if (C->polling || OPAL_THREAD_TRYLOCK(&C->poll_lock))
		return 0;
	C->polling = 1;
	discover_producers();
	for (uint32_t i = 0; i < C->nactive; i++) {
		uint32_t p = C->active[i];
		struct vmshm_inbound *in = &C->in[p];
		if (in->broken)
			continue;
		for (int k = 0; k < 64; k++) {
			struct vmshm_msg m;
			char err[200];
			int r = vmshm_cons_peek(&in->cons, &m, err, sizeof(err));
			if (r == 0)
				break;
			if (r < 0) {
				in->broken = true;
				vmshm_fatal(proc_of_slot(p), "corrupt ring from slot %u: %s", p, err);
				break;
			}
			mca_btl_active_message_callback_t *reg =
				mca_btl_base_active_message_trigger + m.tag;
			if (!reg->cbfunc) {
				in->broken = true;
				vmshm_fatal(proc_of_slot(p), "corrupt ring from slot %u: fragment "
					    "for unregistered tag %u", p, m.tag);
				break;
			}
			C->rx_seg.seg_addr.pval = (void *)m.payload;
			C->rx_seg.seg_len = m.len;
			C->rx_desc.des_segments = &C->rx_seg;
			C->rx_desc.des_segment_count = 1;
			reg->cbfunc(&mca_btl_vmshm, m.tag, &C->rx_desc, reg->cbdata);
			vmshm_cons_pop(&in->cons);
			in->rx_frags++;
			in->rx_bytes += m.len;
			n++;
			/* Large fragments: give the room back at once so the sender
			 * copies the next one while we copy this one out. */
			if (m.len >= 4096)
				vmshm_cons_publish(&in->cons);
		}
		vmshm_cons_publish(&in->cons);
	}
	C->polling = 0;
	OPAL_THREAD_UNLOCK(&C->poll_lock);
	return n;
}

static int vmshm_progress(void)
{
	int n = 0;

	if (!C->ready)
		return 0;
	if (C->done_head)
		n += vmshm_complete_sent();
	if (C->pend_eps)
		n += vmshm_send_pending();
	return n + poll_inbound();
}
