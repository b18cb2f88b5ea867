/*
 * vmshm BTL module: which peers it reaches (add_procs), descriptors, and
 * the send paths.  Every send copies the fragment into the peer's ring
 * (one copy: contiguous user data is referenced in place, never staged);
 * the receiver hands the PML a pointer into the ring (the second copy is
 * the PML's unpack).  A full ring queues the fragment on its endpoint and
 * progress retries it, so nothing here ever waits.
 */
#include "btl_vmshm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "opal/class/opal_bitmap.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/proc.h"

#define C (&mca_btl_vmshm_component)
#define INPLACE_HDR_CAP 256

static int vmshm_add_procs(struct mca_btl_base_module_t *btl, size_t nprocs,
			   struct opal_proc_t **procs,
			   struct mca_btl_base_endpoint_t **peers,
			   struct opal_bitmap_t *reachable);
static int vmshm_del_procs(struct mca_btl_base_module_t *btl, size_t nprocs,
			   struct opal_proc_t **procs,
			   struct mca_btl_base_endpoint_t **peers);
static mca_btl_base_descriptor_t *vmshm_alloc(struct mca_btl_base_module_t *btl,
					      struct mca_btl_base_endpoint_t *ep,
					      uint8_t order, size_t size, uint32_t flags);
static int vmshm_free(struct mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des);
static mca_btl_base_descriptor_t *vmshm_prepare_src(struct mca_btl_base_module_t *btl,
						    struct mca_btl_base_endpoint_t *ep,
						    struct opal_convertor_t *conv,
						    uint8_t order, size_t reserve,
						    size_t *size, uint32_t flags);
static int vmshm_send(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
		      struct mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag);
static int vmshm_sendi(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
		       struct opal_convertor_t *conv, void *header, size_t header_size,
		       size_t payload_size, uint8_t order, uint32_t flags,
		       mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **descriptor);
static int vmshm_register_error(struct mca_btl_base_module_t *btl,
				mca_btl_base_module_error_cb_fn_t cbfunc);
static int vmshm_get(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
		     void *local_address, uint64_t remote_address,
		     struct mca_btl_base_registration_handle_t *local_handle,
		     struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
		     int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
		     void *cbcontext, void *cbdata);
static struct mca_btl_base_registration_handle_t *
vmshm_register_mem(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
		   void *base, size_t size, uint32_t flags);
static int vmshm_deregister_mem(struct mca_btl_base_module_t *btl,
				struct mca_btl_base_registration_handle_t *handle);

mca_btl_base_module_t mca_btl_vmshm = {
	.btl_component = &mca_btl_vmshm_component.super,
	.btl_add_procs = vmshm_add_procs,
	.btl_del_procs = vmshm_del_procs,
	.btl_finalize = vmshm_module_finalize,
	.btl_alloc = vmshm_alloc,
	.btl_free = vmshm_free,
	.btl_prepare_src = vmshm_prepare_src,
	.btl_send = vmshm_send,
	.btl_sendi = vmshm_sendi,
	.btl_dump = mca_btl_base_dump,
	.btl_register_error = vmshm_register_error,
	.btl_get = vmshm_get,
	.btl_register_mem = vmshm_register_mem,
	.btl_deregister_mem = vmshm_deregister_mem,
	.btl_registration_handle_size = 0,
};

/* ------------------------------------------------------------ fragments */

/* Every fragment ever allocated, so finalize frees them all. */
static vmshm_frag_t **all_frags;
static size_t all_n, all_cap;

static vmshm_frag_t *frag_new(uint8_t kind, size_t cap)
{
	vmshm_frag_t *f;
	if (all_n == all_cap) {
		size_t n = all_cap ? all_cap * 2 : 64;
		vmshm_frag_t **v = realloc(all_frags, n * sizeof(*v));
		if (!v)
			return NULL;
		all_frags = v;
		all_cap = n;
	}
	if (posix_memalign((void **)&f, 64, sizeof(*f) + cap))
		return NULL;
	memset(f, 0, sizeof(*f));
	OBJ_CONSTRUCT(&f->base, mca_btl_base_descriptor_t);
	f->kind = kind;
	f->cap = cap;
	f->buf = (unsigned char *)(f + 1);
	all_frags[all_n++] = f;
	return f;
}

static vmshm_frag_t **free_list(uint8_t kind)
{
	return kind == FRAG_EAGER ? &C->free_eager :
	       kind == FRAG_MAX ? &C->free_max : &C->free_inplace;
}

static vmshm_frag_t *frag_get(uint8_t kind)
{
	vmshm_frag_t **head = free_list(kind), *f;

	OPAL_THREAD_LOCK(&C->send_lock);
	f = *head;
	if (f)
		*head = f->next;
	else
		f = frag_new(kind, kind == FRAG_EAGER ? mca_btl_vmshm.btl_eager_limit :
				   kind == FRAG_MAX ? mca_btl_vmshm.btl_max_send_size :
				   INPLACE_HDR_CAP);
	OPAL_THREAD_UNLOCK(&C->send_lock);
	if (!f)
		return NULL;
	f->next = NULL;
	f->ep = NULL;
	f->base.des_segments = f->segs;
	f->base.des_segment_count = 1;
	f->base.des_cbfunc = NULL;
	f->base.des_cbdata = NULL;
	f->base.des_context = NULL;
	f->base.des_flags = 0;
	f->base.order = MCA_BTL_NO_ORDER;
	f->segs[0].seg_addr.pval = f->buf;
	f->segs[0].seg_len = 0;
	f->segs[1].seg_addr.pval = NULL;
	f->segs[1].seg_len = 0;
	return f;
}

/* Caller holds send_lock (or runs single-threaded). */
static void frag_put_locked(vmshm_frag_t *f)
{
	vmshm_frag_t **head = free_list(f->kind);
	f->next = *head;
	*head = f;
}

static void frag_put(vmshm_frag_t *f)
{
	OPAL_THREAD_LOCK(&C->send_lock);
	frag_put_locked(f);
	OPAL_THREAD_UNLOCK(&C->send_lock);
}

void vmshm_frags_release_all(void)
{
	for (size_t i = 0; i < all_n; i++) {
		OBJ_DESTRUCT(&all_frags[i]->base);
		free(all_frags[i]);
	}
	free(all_frags);
	all_frags = NULL;
	all_n = all_cap = 0;
	C->free_eager = C->free_max = C->free_inplace = NULL;
	C->done_head = C->done_tail = NULL;
}

static mca_btl_base_descriptor_t *vmshm_alloc(struct mca_btl_base_module_t *btl,
					      struct mca_btl_base_endpoint_t *ep,
					      uint8_t order, size_t size, uint32_t flags)
{
	vmshm_frag_t *f;

	(void)order;
	if (size <= btl->btl_eager_limit)
		f = frag_get(FRAG_EAGER);
	else if (size <= btl->btl_max_send_size)
		f = frag_get(FRAG_MAX);
	else
		return NULL;
	if (!f)
		return NULL;
	f->ep = ep;
	f->segs[0].seg_len = size;
	f->base.des_flags = flags;
	return &f->base;
}

static int vmshm_free(struct mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
	(void)btl;
	frag_put((vmshm_frag_t *)des);
	return OPAL_SUCCESS;
}

static mca_btl_base_descriptor_t *vmshm_prepare_src(struct mca_btl_base_module_t *btl,
						    struct mca_btl_base_endpoint_t *ep,
						    struct opal_convertor_t *conv,
						    uint8_t order, size_t reserve,
						    size_t *size, uint32_t flags)
{
	vmshm_frag_t *f;
	struct iovec iov;
	uint32_t cnt = 1;
	size_t data = *size;

	(void)order;
	if (reserve >= btl->btl_max_send_size)
		return NULL;
	if (data > btl->btl_max_send_size - reserve)
		data = btl->btl_max_send_size - reserve;

	if (!opal_convertor_need_buffers(conv) && reserve <= INPLACE_HDR_CAP) {
		/* Contiguous: point at the user's bytes; send copies them straight
		 * into the ring, and the PML keeps them alive until our callback. */
		f = frag_get(FRAG_INPLACE);
		if (!f)
			return NULL;
		iov.iov_base = NULL;
		iov.iov_len = data;
		if (opal_convertor_pack(conv, &iov, &cnt, &data) < 0) {
			frag_put(f);
			return NULL;
		}
		f->segs[0].seg_len = reserve;
		f->segs[1].seg_addr.pval = iov.iov_base;
		f->segs[1].seg_len = data;
		f->base.des_segment_count = data ? 2 : 1;
	} else {
		f = frag_get(reserve + data <= btl->btl_eager_limit ? FRAG_EAGER : FRAG_MAX);
		if (!f)
			return NULL;
		iov.iov_base = f->buf + reserve;
		iov.iov_len = data;
		if (opal_convertor_pack(conv, &iov, &cnt, &data) < 0) {
			frag_put(f);
			return NULL;
		}
		f->segs[0].seg_len = reserve + data;
	}
	f->ep = ep;
	f->base.des_flags = flags;
	*size = data;
	return &f->base;
}

/* --------------------------------------------------------------- sending */

static size_t frag_len(const vmshm_frag_t *f)
{
	size_t n = 0;
	for (size_t i = 0; i < f->base.des_segment_count; i++)
		n += f->segs[i].seg_len;
	return n;
}

/* Copies one fragment into the peer's ring; caller holds send_lock. */
static int write_frag(struct mca_btl_base_endpoint_t *ep, vmshm_frag_t *f)
{
	size_t len = frag_len(f);
	void *dst;
	int rc;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	/* The last segment carries the data (the user's bytes in place, or our
	 * packed copy): the payload goes where that segment's page offset puts
	 * it (vmshm_ring.h, VMSHM_MATCH_SHIFT). */
	uint32_t page_off = VMSHM_NO_MATCH;
	if (f->base.des_segment_count) {
		const mca_btl_base_segment_t *last = &f->segs[f->base.des_segment_count - 1];

		page_off = vmshm_page_off_for(last->seg_addr.pval, len - last->seg_len);
	}
	rc = vmshm_prod_reserve_at(&ep->prod, (uint32_t)len, page_off, &dst);
	if (rc)
		return rc;
	for (size_t i = 0, off = 0; i < f->base.des_segment_count; i++) {
		memcpy((uint8_t *)dst + off, f->segs[i].seg_addr.pval, f->segs[i].seg_len);
		off += f->segs[i].seg_len;
	}
	vmshm_prod_commit(&ep->prod, (uint32_t)len, f->tag);
	ep->tx_frags++;
	ep->tx_bytes += len;
	return 0;
}

static void push_done_locked(vmshm_frag_t *f)
{
	f->next = NULL;
	if (C->done_tail)
		C->done_tail->next = f;
	else
		C->done_head = f;
	C->done_tail = f;
}

static const char *ring_error(int rc)
{
	return rc == -EPROTO ? "the peer's tail in the region is impossible (corrupt region)" :
	       rc == -EMSGSIZE ? "fragment larger than the ring allows" : "ring error";
}

static void fail_endpoint_locked(struct mca_btl_base_endpoint_t *ep, int rc)
{
	ep->broken = true;
	/* The PML is told once; queued fragments stay where they are (the job
	 * is aborted by the error callback). */
	OPAL_THREAD_UNLOCK(&C->send_lock);
	vmshm_fatal(ep->proc, "sending to slot %u: %s", ep->peer_slot, ring_error(rc));
	OPAL_THREAD_LOCK(&C->send_lock);
}

static int vmshm_send(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
		      struct mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
	vmshm_frag_t *f = (vmshm_frag_t *)des;
	int rc;

	(void)btl;
	f->tag = tag;
	f->ep = ep;
	/* ob1 counts pipelined fragments down in the completion callback even
	 * when it did not ask for one (open-mpi/ompi#3845): always call it, and
	 * always from progress, never from inside this function. */
	f->base.des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
	if (ep->broken)
		return OPAL_ERR_UNREACH;
	OPAL_THREAD_LOCK(&C->send_lock);
	if (!ep->pend_head) {
		rc = write_frag(ep, f);
		if (rc == 0) {
			push_done_locked(f);
			OPAL_THREAD_UNLOCK(&C->send_lock);
			return OPAL_SUCCESS;
		}
		if (rc != -EAGAIN) {
			fail_endpoint_locked(ep, rc);
			OPAL_THREAD_UNLOCK(&C->send_lock);
			return OPAL_ERROR;
		}
		ep->tx_full++;
	}
	f->next = NULL;
	if (ep->pend_tail)
		ep->pend_tail->next = f;
	else
		ep->pend_head = f;
	ep->pend_tail = f;
	if (!ep->pending_listed) {
		ep->pending_listed = true;
		ep->pend_next = C->pend_eps;
		C->pend_eps = ep;
	}
	OPAL_THREAD_UNLOCK(&C->send_lock);
	return OPAL_SUCCESS;
}

static int vmshm_sendi(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
		       struct opal_convertor_t *conv, void *header, size_t header_size,
		       size_t payload_size, uint8_t order, uint32_t flags,
		       mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **descriptor)
{
	size_t total = header_size + payload_size;
	void *dst;
	int rc;

	if (descriptor)
		*descriptor = NULL;
	if (ep->broken)
		return OPAL_ERR_UNREACH;
	if (total > btl->btl_max_send_size)
		return OPAL_ERR_OUT_OF_RESOURCE;
	/* Contiguous bytes are copied from where they are, and their payload
	 * goes where their page offset puts it (vmshm_ring.h, VMSHM_MATCH_SHIFT). */
	void *src = NULL;
	uint32_t page_off = VMSHM_NO_MATCH;
	if (payload_size && !opal_convertor_need_buffers(conv)) {
		opal_convertor_get_current_pointer(conv, &src);
		page_off = vmshm_page_off_for(src, header_size);
	}
	OPAL_THREAD_LOCK(&C->send_lock);
	/* Queued fragments go first (ordering); a full ring waits.  Either way
	 * the PML gets a descriptor to pack into and send: it then queues
	 * behind the others here instead of on the PML's own pending list. */
	rc = ep->pend_head ? -EAGAIN :
	     vmshm_prod_reserve_at(&ep->prod, (uint32_t)total, page_off, &dst);
	if (rc) {
		if (rc == -EAGAIN) {
			ep->tx_full++;
			OPAL_THREAD_UNLOCK(&C->send_lock);
			if (descriptor)
				*descriptor = vmshm_alloc(btl, ep, order, total,
							  flags | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
			return OPAL_ERR_OUT_OF_RESOURCE;
		}
		fail_endpoint_locked(ep, rc);
		OPAL_THREAD_UNLOCK(&C->send_lock);
		return OPAL_ERROR;
	}
	if (src) {
		/* Contiguous: the PML considers the send done when we return, so
		 * the convertor's position does not matter; skip its machinery. */
		vmshm_copy_lines_last_first(dst, header, header_size, src, payload_size);
	} else {
		memcpy(dst, header, header_size);
		if (payload_size) {
			struct iovec iov = { .iov_base = (uint8_t *)dst + header_size,
					     .iov_len = payload_size };
			uint32_t cnt = 1;
			size_t max = payload_size;
			(void)opal_convertor_pack(conv, &iov, &cnt, &max);
			total = header_size + max;
		}
	}
	vmshm_prod_commit(&ep->prod, (uint32_t)total, tag);
	ep->tx_frags++;
	ep->tx_bytes += total;
	OPAL_THREAD_UNLOCK(&C->send_lock);
	return OPAL_SUCCESS;
}

int vmshm_send_pending(void)
{
	struct mca_btl_base_endpoint_t **pp, *ep;
	int n = 0;

	OPAL_THREAD_LOCK(&C->send_lock);
	pp = &C->pend_eps;
	while ((ep = *pp)) {
		while (ep->pend_head && !ep->broken) {
			vmshm_frag_t *f = ep->pend_head;
			int rc = write_frag(ep, f);
			if (rc == -EAGAIN)
				break;
			if (rc) {
				fail_endpoint_locked(ep, rc);
				break;
			}
			ep->pend_head = f->next;
			if (!ep->pend_head)
				ep->pend_tail = NULL;
			push_done_locked(f);
			n++;
		}
		if (!ep->pend_head || ep->broken) {
			*pp = ep->pend_next;
			ep->pending_listed = false;
			ep->pend_next = NULL;
		} else {
			pp = &ep->pend_next;
		}
	}
	OPAL_THREAD_UNLOCK(&C->send_lock);
	return n;
}

int vmshm_complete_sent(void)
{
	vmshm_frag_t *f;
	int n = 0;

	OPAL_THREAD_LOCK(&C->send_lock);
	f = C->done_head;
	C->done_head = C->done_tail = NULL;
	OPAL_THREAD_UNLOCK(&C->send_lock);
	while (f) {
		vmshm_frag_t *next = f->next;
		/* Read before the callback: it may hand the descriptor back. */
		bool ours = f->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
		if (f->base.des_cbfunc)
			f->base.des_cbfunc(&mca_btl_vmshm, f->ep, &f->base, OPAL_SUCCESS);
		if (ours)
			frag_put(f);
		f = next;
		n++;
	}
	return n;
}

/* ------------------------------------------------------------- add_procs */

static int vader_is_selected(void)
{
	if (C->vader_selected < 0) {
		mca_btl_base_selected_module_t *sm;
		C->vader_selected = 0;
		OPAL_LIST_FOREACH(sm, &mca_btl_base_modules_initialized,
				  mca_btl_base_selected_module_t) {
			const char *n = sm->btl_component->btl_version.mca_component_name;
			if (!strcmp(n, "vader") || !strcmp(n, "sm"))
				C->vader_selected = 1;
		}
	}
	return C->vader_selected;
}

static struct mca_btl_base_endpoint_t *find_endpoint(const opal_process_name_t *name)
{
	for (struct mca_btl_base_endpoint_t *ep = C->endpoints; ep; ep = ep->next)
		if (ep->name.jobid == name->jobid && ep->name.vpid == name->vpid)
			return ep;
	return NULL;
}

#define NAMEFMT "[%u,%u]"
#define NAMEARG(n) (unsigned)(n).jobid, (unsigned)(n).vpid

/* Whether the peer that published mx can be reached through our region. */
static bool peer_reachable(opal_proc_t *proc, const struct vmshm_modex *mx, size_t sz)
{
	char host[VMSHM_ID_LEN], guest[VMSHM_ID_LEN];
	const char *my_guest = C->guest_id ? C->guest_id : "";
	bool same_guest;

	if (sz != sizeof(*mx) || mx->version != VMSHM_MODEX_VERSION) {
		VMSHM_VERBOSE(1, "peer " NAMEFMT ": modex entry of %zu bytes, version %u: "
			      "not used", NAMEARG(proc->proc_name), sz, mx->version);
		return false;
	}
	memcpy(host, mx->host_id, sizeof(host));
	host[sizeof(host) - 1] = 0;
	memcpy(guest, mx->guest_id, sizeof(guest));
	guest[sizeof(guest) - 1] = 0;
	if (strcmp(host, C->host_id)) {
		VMSHM_VERBOSE(2, "peer " NAMEFMT " is on host '%s', not ours", NAMEARG(proc->proc_name), host);
		return false;
	}
	if (memcmp(mx->uuid, C->geom.uuid, sizeof(mx->uuid))) {
		VMSHM_VERBOSE(1, "peer " NAMEFMT " is on host '%s' but maps another region "
			      "(check VHPC_VMSHM_PATH): not used", NAMEARG(proc->proc_name), host);
		return false;
	}
	if (mx->slot >= C->geom.nslots || mx->slot == C->my_slot) {
		VMSHM_VERBOSE(1, "peer " NAMEFMT " claims slot %u: not used",
			      NAMEARG(proc->proc_name), mx->slot);
		return false;
	}
	if (*guest && *my_guest)
		same_guest = !strcmp(guest, my_guest);
	else
		same_guest = OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags);
	if (same_guest && vader_is_selected()) {
		VMSHM_VERBOSE(1, "peer " NAMEFMT " is in our guest: left to vader",
			      NAMEARG(proc->proc_name));
		return false;
	}
	return true;
}

/* The peer's pid if we may read its messages out of its memory: single
 * copy is on here and there (it published its pid only then), it is in our
 * PID namespace, and reading its key at the address it published gives the
 * key (a peer in another user namespace, or whose pid means another
 * process, fails here, not in a message).  Both ends decide alike, so a
 * sender uses RGET exactly with the peers that will read. */
static pid_t single_copy_pid(opal_proc_t *proc, const struct vmshm_modex *mx)
{
	uint64_t got = 0;
	struct iovec l = { &got, sizeof(got) }, r = { (void *)(uintptr_t)mx->probe, sizeof(got) };
	ssize_t n;

	if (!C->single_copy)
		return 0;
	if (!mx->pid) {
		VMSHM_VERBOSE(1, "peer " NAMEFMT " does not offer single copy: large messages "
			      "go through the ring", NAMEARG(proc->proc_name));
		return 0;
	}
	if (mx->pidns != C->my_pidns) {
		VMSHM_VERBOSE(1, "peer " NAMEFMT " is in another PID namespace: no single copy, "
			      "large messages go through the ring", NAMEARG(proc->proc_name));
		return 0;
	}
	n = process_vm_readv((pid_t)mx->pid, &l, 1, &r, 1, 0);
	if (n != (ssize_t)sizeof(got) || got != mx->key) {
		VMSHM_VERBOSE(1, "peer " NAMEFMT ": cannot read its memory (%s): no single copy, "
			      "large messages go through the ring", NAMEARG(proc->proc_name),
			      n < 0 ? strerror(errno) : "another process");
		return 0;
	}
	return (pid_t)mx->pid;
}

static struct mca_btl_base_endpoint_t *connect_peer(opal_proc_t *proc,
						    const struct vmshm_modex *mx)
{
	struct mca_btl_base_endpoint_t *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return NULL;
	ep->proc = proc;
	ep->name = proc->proc_name;
	ep->peer_slot = mx->slot;
	ep->cma_pid = single_copy_pid(proc, mx);
	vmshm_prod_init(&ep->prod, vmshm_ring_ctrl(C->base, &C->geom, C->my_slot, mx->slot),
			vmshm_ring_data(C->base, &C->geom, C->my_slot, mx->slot),
			C->geom.ring_size, C->geom.ring_shift, mx->key);
	if (C->hot_window != VMSHM_HOT_WINDOW)
		ep->prod.hot = C->hot_window && C->geom.ring_size >= 4 * C->hot_window ?
			       C->hot_window : 0;
	vmshm_slot_mark_active(C->base, mx->slot, C->my_slot);
	ep->next = C->endpoints;
	C->endpoints = ep;
	VMSHM_VERBOSE(1, "using vmshm for peer " NAMEFMT " (slot %u%s)",
		      NAMEARG(proc->proc_name), mx->slot, ep->cma_pid ? ", single copy" : "");
	return ep;
}

static int vmshm_add_procs(struct mca_btl_base_module_t *btl, size_t nprocs,
			   struct opal_proc_t **procs,
			   struct mca_btl_base_endpoint_t **peers,
			   struct opal_bitmap_t *reachable)
{
	const opal_process_name_t me = OPAL_PROC_MY_NAME;

	(void)btl;
	if (!C->ready)
		return OPAL_SUCCESS;
	for (size_t i = 0; i < nprocs; i++) {
		opal_proc_t *proc = procs[i];
		struct mca_btl_base_endpoint_t *ep;
		struct vmshm_modex *mx = NULL;
		size_t sz = 0;
		int rc;

		if (proc->proc_name.jobid == me.jobid && proc->proc_name.vpid == me.vpid)
			continue;
		OPAL_THREAD_LOCK(&C->send_lock);
		/* Idempotent: the same peer added again (lazily, or by a second
		 * communicator) keeps its endpoint and its place in the ring. */
		ep = find_endpoint(&proc->proc_name);
		OPAL_THREAD_UNLOCK(&C->send_lock);
		if (!ep) {
			OPAL_MODEX_RECV(rc, &C->super.btl_version, &proc->proc_name,
					(void **)&mx, &sz);
			if (rc != OPAL_SUCCESS || !mx) {
				VMSHM_VERBOSE(2, "peer " NAMEFMT " published no vmshm entry",
					      NAMEARG(proc->proc_name));
				continue;
			}
			if (!peer_reachable(proc, mx, sz)) {
				free(mx);
				continue;
			}
			OPAL_THREAD_LOCK(&C->send_lock);
			ep = find_endpoint(&proc->proc_name);
			if (!ep)
				ep = connect_peer(proc, mx);
			OPAL_THREAD_UNLOCK(&C->send_lock);
			free(mx);
			if (!ep)
				return OPAL_ERR_OUT_OF_RESOURCE;
		}
		ep->proc = proc;
		peers[i] = ep;
		if (reachable)
			opal_bitmap_set_bit(reachable, (int)i);
	}
	return OPAL_SUCCESS;
}

static int vmshm_del_procs(struct mca_btl_base_module_t *btl, size_t nprocs,
			   struct opal_proc_t **procs,
			   struct mca_btl_base_endpoint_t **peers)
{
	(void)btl;
	(void)procs;
	(void)peers;
	(void)nprocs;
	/* Endpoints live until finalize: a ring's producer position cannot be
	 * rebuilt, and the same peer may be added again. */
	return OPAL_SUCCESS;
}

static int vmshm_register_error(struct mca_btl_base_module_t *btl,
				mca_btl_base_module_error_cb_fn_t cbfunc)
{
	(void)btl;
	C->error_cb = cbfunc;
	return OPAL_SUCCESS;
}

/* -------------------------------------------------------------- finalize */

/* Nothing is pinned: process_vm_readv takes plain addresses.  A handle for
 * a peer we may read from (or be read by) makes ob1 use RGET with it; none
 * makes it send through the ring. */
static struct mca_btl_base_registration_handle_t *
vmshm_register_mem(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
		   void *base, size_t size, uint32_t flags)
{
	static char handle;

	(void)btl;
	(void)base;
	(void)size;
	if (!ep || ep->cma_pid <= 0)
		return NULL;
	/* Ranks that share cores (mpi_yield_when_idle, which vhpc sets when
	 * the guests oversubscribe the host) send through the ring: there a
	 * receiver's single copy waits for the receiver to be scheduled while
	 * the sender cannot go on, where the ring lets each side copy in its
	 * own time slice (README, "Single copy in container guests"). */
	if ((flags & MCA_BTL_REG_FLAG_REMOTE_READ) && opal_progress_yield_when_idle)
		return NULL;
	return (struct mca_btl_base_registration_handle_t *)&handle;
}

static int vmshm_deregister_mem(struct mca_btl_base_module_t *btl,
				struct mca_btl_base_registration_handle_t *handle)
{
	(void)btl;
	(void)handle;
	return OPAL_SUCCESS;
}

/* ob1's RGET: the sender's rendezvous header names its buffer, and we copy
 * the message from there into ours in one copy.  An error makes ob1 ask the
 * sender for the rest through send fragments (the ring), so a peer we
 * cannot read costs a round trip, not the message.  The remote address is
 * whatever the peer sent: reading it can only give us the peer's own
 * memory, and the length is ob1's, bounded by our receive buffer. */
static int vmshm_get(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
		     void *local_address, uint64_t remote_address,
		     struct mca_btl_base_registration_handle_t *local_handle,
		     struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
		     int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
		     void *cbcontext, void *cbdata)
{
	struct iovec l = { local_address, size }, r = { (void *)(uintptr_t)remote_address, size };

	(void)remote_handle;
	(void)flags;
	(void)order;
	if (!ep || ep->cma_pid <= 0)
		return OPAL_ERROR;
	/* A single iovec moves whole or not at all, up to 0x7ffff000 bytes a
	 * call (what Linux gives for more). */
	while (r.iov_len) {
		ssize_t n = process_vm_readv(ep->cma_pid, &l, 1, &r, 1, 0);

		if (n <= 0) {
			VMSHM_VERBOSE(1, "peer " NAMEFMT ": reading %zu bytes of its memory failed (%s): "
				      "no single copy from it from now on", NAMEARG(ep->name), r.iov_len,
				      n < 0 ? strerror(errno) : "nothing read");
			ep->cma_pid = 0;
			return OPAL_ERROR;
		}
		l.iov_base = (char *)l.iov_base + n;
		l.iov_len -= (size_t)n;
		r.iov_base = (char *)r.iov_base + n;
		r.iov_len -= (size_t)n;
	}
	ep->gets++;
	ep->get_bytes += size;
	cbfunc(btl, ep, local_address, local_handle, cbcontext, cbdata, OPAL_SUCCESS);
	return OPAL_SUCCESS;
}

void vmshm_print_stats(void)
{
	for (uint32_t s = 0; s < C->geom.nslots; s++) {
		struct mca_btl_base_endpoint_t *ep = NULL;
		for (struct mca_btl_base_endpoint_t *e = C->endpoints; e; e = e->next)
			if (e->peer_slot == s)
				ep = e;
		struct vmshm_inbound *in = &C->in[s];
		if (!ep && !in->rx_frags)
			continue;
		/* The peer's rank: ours if we know it, else what its slot says. */
		unsigned peer = ep ? (unsigned)ep->name.vpid :
			(unsigned)(__atomic_load_n(&vmshm_slot_at(C->base, s)->owner,
						   __ATOMIC_RELAXED) & 0xffffffffu);
		vmshm_log("vmshm-stats: peer %u slot %u tx_frags %llu tx_bytes %llu "
			  "rx_frags %llu rx_bytes %llu ring_full %llu gets %llu get_bytes %llu "
			  "laps %llu rewinds %llu",
			  peer, s, (unsigned long long)(ep ? ep->tx_frags : 0),
			  (unsigned long long)(ep ? ep->tx_bytes : 0),
			  (unsigned long long)in->rx_frags, (unsigned long long)in->rx_bytes,
			  (unsigned long long)(ep ? ep->tx_full : 0),
			  (unsigned long long)(ep ? ep->gets : 0),
			  (unsigned long long)(ep ? ep->get_bytes : 0),
			  (unsigned long long)(ep ? ep->prod.laps : 0),
			  (unsigned long long)(ep ? ep->prod.rewinds : 0));
	}
}

int vmshm_module_finalize(struct mca_btl_base_module_t *btl)
{
	(void)btl;
	if (!C->ready)
		return OPAL_SUCCESS;
	/* Callbacks still owed are dropped, not made: Open MPI 4.1 closes the
	 * pml framework (and unloads ob1) before the bml finalizes the BTLs,
	 * so a callback here jumped into unmapped code.  The fragments are
	 * ours and go below.  Seen as a SIGSEGV of the receiver in about 1 of
	 * 10 single-copy runs, whose last FIN was still owed. */
	C->done_head = C->done_tail = NULL;
	if (C->stats)
		vmshm_print_stats();
	C->ready = false;
	vmshm_slot_release(C->base, &C->geom, C->my_slot, C->my_owner);
	while (C->endpoints) {
		struct mca_btl_base_endpoint_t *ep = C->endpoints;
		C->endpoints = ep->next;
		free(ep);
	}
	C->pend_eps = NULL;
	vmshm_frags_release_all();
	free(C->in);
	free(C->active);
	C->in = NULL;
	C->active = NULL;
	C->nactive = 0;
	memset(C->known, 0, sizeof(C->known));
	munmap(C->base, C->size);
	C->base = NULL;
	return OPAL_SUCCESS;
}
