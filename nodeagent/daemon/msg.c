/*
 * The controller's messages to vhpcd (scheduler/PROTOCOL.md), parsed and
 * checked field by field.  Pure: no state, no I/O (fuzzed with the
 * controller's own parser in tests/cluster/fuzz_cluster_msg.c).
 */
#include "lib/ckptname.h"
#include "lib/bytes.h"
#include "lib/chan.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/imgwire.h"
#include "lib/inet.h"
#include "lib/jf.h"
#include "lib/jobspec.h"
#include "lib/wire.h"
#include "daemon.h"
#include "nodeagent/jobdir/jobdir.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vprep_free(struct vprep *p)
{
	free(p->here);
	free(p->ranks);
	free(p->peers);
	free(p->guest_nodes);
	free(p->wg.key);
	memset(p, 0, sizeof(*p));
}

void vmsg_free(struct vmsg *m)
{
	vprep_free(&m->prep);
	jf_strv_free(m->argv);
	jf_strv_free(m->env);
	memset(m, 0, sizeof(*m));
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static int int_array(struct json_object *o, const char *key, size_t max, long long lo, long long hi,
		     int **out, int *n, struct verr *err)
{
	struct json_object *a;

	if (jf_array(o, key, true, max, &a, err) < 0)
		return -1;
	*n = (int)json_object_array_length(a);
	*out = calloc(*n ? *n : 1, sizeof(int));
	if (!*out)
		return verr_set(err, "out of memory");
	for (int i = 0; i < *n; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		int64_t v;

		if (!json_object_is_type(e, json_type_int))
			return verr_set(err, "\"%s\"[%d]: expected an integer", key, i);
		v = json_object_get_int64(e);
		if (v < lo || v > hi)
			return verr_set(err, "\"%s\"[%d]: %lld is outside %lld..%lld", key, i, (long long)v, lo, hi);
		(*out)[i] = (int)v;
	}
	return 0;
}

/* The controller planned them (lib/binds.h); checked again all the same:
 * what arrives on a socket is not trusted to follow the rules. */
static int parse_binds(struct json_object *o, struct bind_list *l, struct verr *err)
{
	static const char *const f[] = { "src", "dst", "ro", NULL };
	struct json_object *a = NULL;
	char why[512];

	l->n = 0;
	if (jf_array(o, "binds", false, BIND_MAX, &a, err) < 0)
		return -1;
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		struct bind *b = &l->v[l->n];
		const char *src, *dst;

		if (!json_object_is_type(e, json_type_object))
			return verr_set(err, "\"binds\"[%zu]: expected an object", i);
		if (jf_only(e, "binds", f, err) < 0 || jf_str(e, "src", true, BIND_PATH_MAX - 1, &src, err) < 0 ||
		    jf_str(e, "dst", true, BIND_PATH_MAX - 1, &dst, err) < 0 || jf_bool(e, "ro", true, &b->ro, err) < 0)
			return verr_wrap(err, "\"binds\"[%zu]", i);
		if (bind_path_check("source", src, why, sizeof(why)) < 0 || bind_path_check("destination", dst, why, sizeof(why)) < 0)
			return verr_set(err, "\"binds\"[%zu]: %s", i, why);
		if (!strcmp(src, "/") || bind_dst_protected(dst))
			return verr_set(err, "\"binds\"[%zu]: %s over the guest's %s is not a bind the rules allow", i,
					src, bind_dst_protected(dst) ? bind_dst_protected(dst) : "root");
		snprintf(b->src, sizeof(b->src), "%s", src);
		snprintf(b->dst, sizeof(b->dst), "%s", dst);
		l->n++;
	}
	return 0;
}

/* A list of non-zero IPv4 addresses, at most max of them. */
static int addr_array(struct json_object *o, const char *key, int max, uint32_t **out, int *n, struct verr *err)
{
	struct json_object *a;

	if (jf_array(o, key, true, max, &a, err) < 0)
		return -1;
	*n = (int)json_object_array_length(a);
	if (!(*out = calloc(*n ? (size_t)*n : 1, sizeof(uint32_t))))
		return verr_set(err, "out of memory");
	for (int i = 0; i < *n; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);

		if (!json_object_is_type(e, json_type_string) ||
		    ipv4_parse(json_object_get_string(e), &(*out)[i]) < 0 || !(*out)[i])
			return verr_set(err, "\"%s\"[%d]: expected an IPv4 address", key, i);
	}
	return 0;
}

/* Optional (older controllers): where each guest of the job is.  The node
 * agent checks that they name this node or its peers. */
static int parse_guest_nodes(struct json_object *o, struct vprep *p, struct verr *err)
{
	int n;

	if (!json_object_object_get_ex(o, "guest_nodes", NULL))
		return 0;
	if (addr_array(o, "guest_nodes", VD_MAX_JOB_GUESTS, &p->guest_nodes, &n, err) < 0)
		return -1;
	if (n != p->ntotal)
		return verr_set(err, "\"guest_nodes\": %d entries for %d guests", n, p->ntotal);
	return 0;
}

/* Optional: the job's VXLAN rides over WireGuard (nodeagent/net/wg.c);
 * the key is a path on this node, as the cluster file names it. */
static int parse_wg(struct json_object *o, struct vprep *p, struct verr *err)
{
	static const char *const f[] = { "key", "pool", "port", NULL };
	struct json_object *w;
	const char *key, *pool;
	long long port;

	if (!json_object_object_get_ex(o, "underlay_encryption", &w))
		return 0;
	if (!json_object_is_type(w, json_type_object) || jf_only(w, "underlay_encryption", f, err) < 0 ||
	    jf_str(w, "key", true, 255, &key, err) < 0 || jf_str(w, "pool", true, 18, &pool, err) < 0 ||
	    jf_int(w, "port", true, 1, 65535, &port, err) < 0)
		return verr_wrap(err, "\"underlay_encryption\"");
	if (key[0] != '/')
		return verr_set(err, "\"underlay_encryption\": key '%.60s' is not an absolute path", key);
	if (ipv4net_parse(pool, false, &p->wg.pool) < 0 || p->wg.pool.prefix < 8 || p->wg.pool.prefix > 24)
		return verr_set(err, "\"underlay_encryption\": pool '%s' is not a network /8../24", pool);
	p->wg.port = port;
	if (!(p->wg.key = strdup(key)))
		return verr_set(err, "out of memory");
	return 0;
}

/* "fabric": {mode, vlan | pkey, subnet[, asked]}: the job's share of the
 * fabric; asked: the user said --rdma. */
static int parse_fabric(struct json_object *o, struct vprep *p, struct verr *err)
{
	static const char *const f[] = { "mode", "vlan", "pkey", "subnet", "asked", NULL };
	struct json_object *fo;
	const char *mode, *sub;
	long long vlan = 0, pkey = 0;

	if (!json_object_object_get_ex(o, "fabric", &fo))
		return 0;
	if (!json_object_is_type(fo, json_type_object) || jf_only(fo, "fabric", f, err) < 0 ||
	    jf_str(fo, "mode", true, 16, &mode, err) < 0 || jf_int(fo, "vlan", false, 1, 4094, &vlan, err) < 0 ||
	    jf_int(fo, "pkey", false, 1, 0x7ffe, &pkey, err) < 0 || jf_str(fo, "subnet", true, 18, &sub, err) < 0 ||
	    jf_bool(fo, "asked", false, &p->rdma_asked, err) < 0)
		return verr_wrap(err, "\"fabric\"");
	for (p->fabric_mode = 1; fabric_mode_names[p->fabric_mode] && strcmp(fabric_mode_names[p->fabric_mode], mode);
	     p->fabric_mode++)
		;
	if (!fabric_mode_names[p->fabric_mode])
		return verr_set(err, "\"fabric\": mode '%.16s' is not roce, soft-roce or ib", mode);
	if (p->fabric_mode == FABRIC_IB ? !pkey || vlan : !vlan || pkey)
		return verr_set(err, "\"fabric\": mode %s takes %s alone", mode, p->fabric_mode == FABRIC_IB ? "a pkey" : "a vlan");
	if (ipv4net_parse(sub, false, &p->fsubnet) < 0 || p->fsubnet.prefix < 8 || p->fsubnet.prefix > 30)
		return verr_set(err, "\"fabric\": subnet '%s' is not a network /8../30 (host bits zero)", sub);
	if ((uint64_t)p->ntotal + 3 > 1ull << (32 - p->fsubnet.prefix))
		return verr_set(err, "\"fabric\": %d guests do not fit the subnet /%d", p->ntotal, p->fsubnet.prefix);
	p->rdma = true;
	p->vlan = (int)vlan;
	p->pkey = (int)pkey;
	return 0;
}

/* "pci": [{guest, addr}]: functions for this node's guests.  Whether each
 * is one the node's admin listed is the node's to check (vd_fabric_spec). */
static int parse_pci(struct json_object *o, struct vprep *p, struct verr *err)
{
	static const char *const f[] = { "guest", "addr", NULL };
	struct json_object *a = NULL;

	if (jf_array(o, "pci", false, NODE_PCI_MAX, &a, err) < 0)
		return -1;
	p->npci = a ? (int)json_object_array_length(a) : 0;
	for (int i = 0; i < p->npci; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *addr;
		long long g;
		bool here = false;

		if (!json_object_is_type(e, json_type_object) || jf_only(e, "pci entry", f, err) < 0 ||
		    jf_int(e, "guest", true, 0, p->ntotal - 1, &g, err) < 0 ||
		    jf_str(e, "addr", true, PCI_ADDR_LEN, &addr, err) < 0)
			return verr_wrap(err, "\"pci\"[%d]", i);
		if (!pci_addr_ok(addr))
			return verr_set(err, "\"pci\"[%d]: '%s' is not a PCI function's address", i, addr);
		for (int k = 0; k < p->nhere && !here; k++)
			here = p->here[k] == g;
		if (!here)
			return verr_set(err, "\"pci\"[%d]: guest %lld is not on this node", i, g);
		for (int k = 0; k < i; k++)
			if (!strcmp(p->pci[k], addr))
				return verr_set(err, "\"pci\"[%d]: %s is given twice", i, addr);
		snprintf(p->pci[i], sizeof(p->pci[i]), "%s", addr);
		p->pci_guest[i] = (int)g;
	}
	return 0;
}

/* "restore": {"ckpt": NAME}: the guests come from this node's part of a
 * checkpoint.  The name becomes a folder's name under the node's
 * checkpoint dir, so it is held to the names vhpc-ctld makes. */
static int parse_restore(struct json_object *o, struct vprep *p, struct verr *err)
{
	static const char *const f[] = { "ckpt", NULL };
	struct json_object *r = NULL;
	const char *s;

	if (jf_object(o, "restore", false, &r, err) < 0)
		return -1;
	if (!r)
		return 0;
	if (jf_only(r, "job_prepare's restore", f, err) < 0 || jf_str(r, "ckpt", true, 64, &s, err) < 0)
		return -1;
	if (!ckpt_name_ok(s))
		return verr_set(err, "\"restore\": '%.64s' is not a checkpoint name ([a-z0-9][a-z0-9.-]{0,63})", s);
	snprintf(p->restore, sizeof(p->restore), "%s", s);
	return 0;
}

static int parse_prepare(struct json_object *o, struct vprep *p, struct verr *err)
{
	static const char *const f[] = {
		"node", "job", "local", "uid", "vni", "subnet", "guest_port", "image", "image_id", "tuning", "driver",
		"vcpus", "mem", "oversubscribe", "vmshm", "single_copy", "scratch", "key", "timeout", "guests", "ranks",
		"peers", "guest_nodes", "underlay_encryption", "binds", "fabric", "pci", "restore", NULL
	};
	const char *s;
	long long v;

	if (jf_only(o, "job_prepare", f, err) < 0 ||
	    jf_str(o, "local", true, 15, &s, err) < 0)
		return -1;
	if (!na_job_ok(s))
		return verr_set(err, "\"local\": '%s' is not a job id for this node (1..12 of a-z, 0-9)", s);
	snprintf(p->local, sizeof(p->local), "%s", s);
	if (jf_int(o, "uid", true, 0, UINT32_MAX - 1, &v, err) < 0)
		return -1;
	p->uid = (uid_t)v;
	if (jf_int(o, "vni", true, 1, VHPC_VNI_MAX, &v, err) < 0)
		return -1;
	p->vni = (uint32_t)v;
	if (jf_str(o, "subnet", true, 18, &s, err) < 0)
		return -1;
	if (ipv4net_parse(s, false, &p->subnet) < 0 || p->subnet.prefix < 8 || p->subnet.prefix > 30)
		return verr_set(err, "\"subnet\": '%s' is not a network /8../30 (host bits zero)", s);
	if (jf_int(o, "guest_port", true, 1, 65535, &v, err) < 0)
		return -1;
	p->guest_port = (int)v;
	if (jf_ident(o, "image", true, 64, &s, err) < 0)
		return -1;
	snprintf(p->image, sizeof(p->image), "%s", s);
	if (jf_str(o, "image_id", true, 64, &s, err) < 0)
		return -1;
	if (!sha256_hex_ok(s))
		return verr_set(err, "\"image_id\": expected an image id (64 lowercase hex digits)");
	snprintf(p->image_id, sizeof(p->image_id), "%s", s);
	if (jf_ident(o, "tuning", true, 64, &s, err) < 0)
		return -1;
	snprintf(p->tuning, sizeof(p->tuning), "%s", s);
	if (jf_str(o, "driver", true, 16, &s, err) < 0)
		return -1;
	if (vhpc_driver_index(s) < 0)
		return verr_set(err, "\"driver\": '%.16s' is not " VHPC_DRIVER_CHOICES, s);
	snprintf(p->driver, sizeof(p->driver), "%s", s);
	if (jf_int(o, "vcpus", true, 1, VHPC_MAX_VCPUS, &v, err) < 0)
		return -1;
	p->vcpus = (int)v;
	if (jf_int(o, "mem", true, 64ll << 20, 1ll << 42, &v, err) < 0)
		return -1;
	p->mem = (uint64_t)v;
	v = 0;
	if (jf_int(o, "scratch", false, (long long)JOB_SCRATCH_MIN, (long long)JOB_SCRATCH_MAX, &v, err) < 0)
		return -1;
	p->scratch = (uint64_t)v;
	/* An older controller sends none: its jobs had the pod. */
	p->single_copy = true;
	if (jf_bool(o, "oversubscribe", true, &p->oversubscribe, err) < 0 ||
	    jf_bool(o, "vmshm", true, &p->vmshm, err) < 0 ||
	    jf_bool(o, "single_copy", false, &p->single_copy, err) < 0 ||
	    jf_str(o, "key", true, 2 * CHAN_KEY_LEN, &s, err) < 0)
		return -1;
	{
		uint8_t key[CHAN_KEY_LEN];

		if (strlen(s) != 2 * CHAN_KEY_LEN || hex_decode(s, key, sizeof(key)) < 0)
			return verr_set(err, "\"key\": expected %d hex digits", 2 * CHAN_KEY_LEN);
	}
	snprintf(p->key_hex, sizeof(p->key_hex), "%s", s);
	if (jf_int(o, "timeout", true, 1, 366 * 86400, &v, err) < 0)
		return -1;
	p->timeout = v;
	if (int_array(o, "ranks", VD_MAX_JOB_GUESTS, 1, 1 << 20, &p->ranks, &p->ntotal, err) < 0 ||
	    parse_binds(o, &p->binds, err) < 0)
		return -1;
	if (p->ntotal < 1)
		return verr_set(err, "\"ranks\": a job has at least one guest");
	if ((uint64_t)p->ntotal + 3 > 1ull << (32 - p->subnet.prefix))
		return verr_set(err, "\"ranks\": %d guests do not fit the subnet /%d", p->ntotal, p->subnet.prefix);
	for (int i = 0; i < p->ntotal; i++)
		p->nranks_total += p->ranks[i];
	if (int_array(o, "guests", VHPC_MAX_GUESTS, 0, p->ntotal - 1, &p->here, &p->nhere, err) < 0)
		return -1;
	if (p->nhere < 1)
		return verr_set(err, "\"guests\": no guest for this node");
	qsort(p->here, p->nhere, sizeof(int), cmp_int);
	for (int i = 1; i < p->nhere; i++)
		if (p->here[i] == p->here[i - 1])
			return verr_set(err, "\"guests\": guest %d given twice", p->here[i]);
	if (addr_array(o, "peers", VD_MAX_PEERS, &p->peers, &p->npeers, err) < 0)
		return -1;
	if (parse_guest_nodes(o, p, err) < 0 || parse_wg(o, p, err) < 0)
		return -1;
	if (parse_restore(o, p, err) < 0)
		return -1;
	return parse_fabric(o, p, err) < 0 ? -1 : parse_pci(o, p, err);
}

int vmsg_parse(struct json_object *msg, struct vmsg *m, struct verr *err)
{
	static const char *const f_launch[] = { "node", "job", "argv", "env", "timeout_ms", NULL };
	static const char *const f_stop[] = { "node", "job", "reason", NULL };
	static const char *const f_open[] = { "node", "job", "guest", "pipe_key", NULL };
	static const char *const f_job[] = { "node", "job", NULL };
	static const char *const f_ckpt[] = { "node", "job", "ckpt", "check", "close_sessions", NULL };
	static const char *const f_pause[] = { "node", "job", "close_sessions", NULL };
	const char *t = wire_type(msg), *s;
	long long v;

	memset(m, 0, sizeof(*m));
	if (!strcmp(t, "job_prepare"))
		m->type = VM_PREPARE;
	else if (!strcmp(t, "job_launch"))
		m->type = VM_LAUNCH;
	else if (!strcmp(t, "job_stop"))
		m->type = VM_STOP;
	else if (!strcmp(t, "guest_open"))
		m->type = VM_GUEST_OPEN;
	else if (!strcmp(t, "job_pause"))
		m->type = VM_PAUSE;
	else if (!strcmp(t, "job_resume"))
		m->type = VM_RESUME;
	else if (!strcmp(t, "job_checkpoint"))
		m->type = VM_CHECKPOINT;
	else
		return verr_set(err, "unknown message type '%.64s'", t);
	if (jf_int(msg, "job", true, 1, INT64_MAX / 2, &v, err) < 0 ||
	    jf_ident(msg, "node", true, 64, &s, err) < 0)
		goto fail;
	m->job = v;
	snprintf(m->node, sizeof(m->node), "%s", s);
	switch (m->type) {
	case VM_PREPARE:
		m->prep.job = m->job;
		snprintf(m->prep.node, sizeof(m->prep.node), "%s", m->node);
		if (parse_prepare(msg, &m->prep, err) < 0)
			goto fail;
		break;
	case VM_LAUNCH:
		if (jf_only(msg, "job_launch", f_launch, err) < 0 ||
		    jf_strv(msg, "argv", true, 4096, 64 * 1024, &m->argv, NULL, err) < 0 ||
		    jf_strv(msg, "env", true, 256, 4096, &m->env, NULL, err) < 0 ||
		    jf_int(msg, "timeout_ms", true, 0, 366ll * 86400 * 1000, &v, err) < 0)
			goto fail;
		m->timeout_ms = v;
		if (!m->argv[0] || !m->argv[0][0]) {
			verr_set(err, "\"argv\": empty command");
			goto fail;
		}
		for (char **e = m->env; *e; e++)
			if (!strchr(*e, '=') || **e == '=') {
				verr_set(err, "\"env\": '%.40s' is not NAME=VALUE", *e);
				goto fail;
			}
		break;
	case VM_STOP:
		s = NULL;
		if (jf_only(msg, "job_stop", f_stop, err) < 0 || jf_str(msg, "reason", false, 63, &s, err) < 0)
			goto fail;
		snprintf(m->reason, sizeof(m->reason), "%s", s ? s : "");
		break;
	case VM_GUEST_OPEN:
		if (jf_only(msg, "guest_open", f_open, err) < 0 ||
		    jf_int(msg, "guest", true, 0, VD_MAX_JOB_GUESTS - 1, &v, err) < 0 ||
		    jf_str(msg, "pipe_key", true, 2 * WPIPE_KEY_LEN, &s, err) < 0)
			goto fail;
		m->guest = (int)v;
		if (hex_decode(s, m->pipe_key, sizeof(m->pipe_key)) < 0) {
			verr_set(err, "\"pipe_key\": expected %d hex digits", 2 * WPIPE_KEY_LEN);
			goto fail;
		}
		break;
	case VM_PAUSE:
		if (jf_only(msg, t, f_pause, err) < 0 || jf_bool(msg, "close_sessions", false, &m->close_sessions, err) < 0)
			goto fail;
		break;
	case VM_RESUME:
		if (jf_only(msg, t, f_job, err) < 0)
			goto fail;
		break;
	case VM_CHECKPOINT:
		if (jf_only(msg, "job_checkpoint", f_ckpt, err) < 0 || jf_str(msg, "ckpt", true, 64, &s, err) < 0 ||
		    jf_bool(msg, "check", false, &m->check, err) < 0 ||
		    jf_bool(msg, "close_sessions", false, &m->close_sessions, err) < 0)
			goto fail;
		/* It becomes a folder's name under the checkpoint dir. */
		if (!ckpt_name_ok(s)) {
			verr_set(err, "\"ckpt\": '%.64s' is not a checkpoint name ([a-z0-9][a-z0-9.-]{0,63})", s);
			goto fail;
		}
		snprintf(m->ckpt, sizeof(m->ckpt), "%s", s);
		break;
	}
	return 0;
fail:
	verr_wrap(err, "%s", t);
	vmsg_free(m);
	return -1;
}

int vimg_data_parse(struct json_object *reply, struct image_chunk **chunks, int *n, struct verr *err)
{
	/* signatures: the image's, with its manifest (images/sign.c). */
	static const char *const f[] = { "parts", WIRE_DATA, "signatures", NULL };

	*chunks = NULL;
	*n = 0;
	if (strcmp(wire_type(reply), "image_data"))
		return verr_set(err, "vhpc-ctld answered '%.32s', not image_data", wire_type(reply));
	if (jf_only(reply, "image_data", f, err) < 0 ||
	    imgwire_parts(reply, "parts", IMGWIRE_MAX_GET, IMGWIRE_CHUNK, chunks, n, err) < 0)
		return verr_wrap(err, "image_data");
	return 0;
}
