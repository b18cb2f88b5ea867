/*
 * Every message vhpc-ctld accepts, parsed and checked field by field before
 * anything acts on it (scheduler/PROTOCOL.md).  Pure: no state, no I/O, so
 * it is unit-tested and fuzzed (tests/cluster/fuzz_cluster_msg.c).
 */
#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/imgwire.h"
#include "lib/inet.h"
#include "lib/jf.h"
#include "lib/jobspec.h"
#include "lib/wire.h"
#include "ctld.h"
#include "imgstore.h"
#include "lib/ckptname.h"
#include "scheduler/jobjson.h"

#include <json-c/json.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

const char *const ctld_nodejob_state_names[] = { "preparing", "ready", "running", "exited", "failed", NULL };

static const struct {
	const char *name;
	enum cmsg_type type;
	bool node_only;
} types[] = {
	{ "submit", CM_SUBMIT, false },       { "queue", CM_QUEUE, false },
	{ "job", CM_JOB, false },             { "wait", CM_WAIT, false },
	{ "cancel", CM_CANCEL, false },       { "output", CM_OUTPUT, false },
	{ "nodes", CM_NODES, false },         { "register", CM_REGISTER, true },
	{ "heartbeat", CM_HEARTBEAT, true },  { "job_output", CM_JOB_OUTPUT, true },
	{ "job_exit", CM_JOB_EXIT, true },
	/* The image store: root pushes and removes, nodes fetch, anyone looks. */
	{ "image_have", CM_IMAGE_HAVE, true }, { "image_put", CM_IMAGE_PUT, true },
	{ "image_tag", CM_IMAGE_TAG, true },   { "image_get", CM_IMAGE_GET, true },
	{ "image_list", CM_IMAGE_LIST, false }, { "image_rm", CM_IMAGE_RM, true },
	{ "exec", CM_EXEC, false },
	{ "history", CM_HISTORY, false },
	{ "checkpoint", CM_CHECKPOINT, false }, { "checkpoints", CM_CHECKPOINTS, false },
	{ "checkpoint_rm", CM_CHECKPOINT_RM, false }, { "restart", CM_RESTART, false },
	/* root's: the admin's (a node agent could send it too; it is root) */
	{ "node_drain", CM_NODE_DRAIN, true },
};

bool ctld_msg_node_only(enum cmsg_type t)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].type == t)
			return types[i].node_only;
	return true;
}

void ctld_msg_free(struct cmsg *m)
{
	if (m->have_spec)
		job_spec_free(&m->spec);
	free(m->jobs);
	free(m->data);
	free(m->cache);
	free(m->objects);
	free(m->signatures);
	image_chunks_free(m->parts, m->nparts);
	memset(m, 0, sizeof(*m));
}

static int job_id(struct json_object *o, struct cmsg *m, struct verr *err)
{
	long long id;

	if (jf_int(o, "id", true, 1, INT64_MAX / 2, &id, err) < 0)
		return -1;
	m->id = id;
	return 0;
}

static int node_name(struct json_object *o, struct cmsg *m, struct verr *err)
{
	const char *s;

	if (jf_ident(o, "node", true, 64, &s, err) < 0)
		return -1;
	snprintf(m->node, sizeof(m->node), "%s", s);
	return 0;
}

static int parse_numa(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "os_index", "cores", "mem", "hugepages_2m_free", NULL };
	struct json_object *a;

	if (jf_array(o, "numa", true, SCHED_MAX_NUMA, &a, err) < 0)
		return -1;
	m->nnuma = (int)json_object_array_length(a);
	if (m->nnuma < 1)
		return verr_set(err, "\"numa\": a node has at least one NUMA node");
	for (int i = 0; i < m->nnuma; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		long long osi, cores, mem = 0, huge = 0;

		if (!json_object_is_type(e, json_type_object))
			return verr_set(err, "\"numa\"[%d]: expected an object", i);
		if (jf_only(e, "numa entry", f, err) < 0 ||
		    jf_int(e, "os_index", true, 0, 4095, &osi, err) < 0 ||
		    jf_int(e, "cores", true, 0, 4096, &cores, err) < 0 ||
		    jf_int(e, "mem", false, 0, 1ll << 50, &mem, err) < 0 ||
		    jf_int(e, "hugepages_2m_free", false, 0, 1ll << 40, &huge, err) < 0)
			return verr_wrap(err, "\"numa\"[%d]", i);
		m->numa[i] = (struct cmsg_numa){ (int)osi, (int)cores, (uint64_t)mem, (uint64_t)huge };
	}
	return 0;
}

static int parse_rdma(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "name", "node_guid", "ports", "netdev", "numa", NULL };
	struct json_object *a = NULL;

	if (jf_array(o, "rdma", false, CTLD_MAX_RDMA, &a, err) < 0)
		return -1;
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *s;
		long long ports;

		const char *nd = NULL;
		long long numa;

		if (!json_object_is_type(e, json_type_object) || jf_only(e, "rdma entry", f, err) < 0 ||
		    jf_ident(e, "name", true, 64, &s, err) < 0 || jf_str(e, "node_guid", false, 32, &s, err) < 0 ||
		    jf_int(e, "ports", false, 0, 256, &ports, err) < 0 || jf_str(e, "netdev", false, 15, &nd, err) < 0 ||
		    jf_int(e, "numa", false, -1, 4095, &numa, err) < 0)
			return verr_wrap(err, "\"rdma\"[%zu]", i);
		if (nd && !netdev_name_ok(nd))
			return verr_set(err, "\"rdma\"[%zu]: \"netdev\": '%s' is not an interface name", i, nd);
	}
	m->rdma = a;
	return 0;
}

/* The node's fabric link and its functions for passthrough: each from the
 * admin's list in the node's cluster file, which the node checked exists. */
static int parse_fabric(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "addr", "class", "numa", NULL };
	const char *link = NULL;
	struct json_object *a = NULL;

	if (jf_str(o, "fabric_link", false, 15, &link, err) < 0)
		return -1;
	if (link && !netdev_name_ok(link))
		return verr_set(err, "\"fabric_link\": '%s' is not an interface name", link);
	snprintf(m->fabric_link, sizeof(m->fabric_link), "%s", link ? link : "");
	if (jf_array(o, "pci", false, NODE_PCI_MAX, &a, err) < 0)
		return -1;
	m->npci = a ? (int)json_object_array_length(a) : 0;
	for (int i = 0; i < m->npci; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *addr, *cls;
		long long numa = -1;

		if (!json_object_is_type(e, json_type_object) || jf_only(e, "pci entry", f, err) < 0 ||
		    jf_str(e, "addr", true, PCI_ADDR_LEN, &addr, err) < 0 ||
		    jf_str(e, "class", true, FABRIC_CLASS_MAX, &cls, err) < 0 ||
		    jf_int(e, "numa", false, -1, 4095, &numa, err) < 0)
			return verr_wrap(err, "\"pci\"[%d]", i);
		if (!pci_addr_ok(addr))
			return verr_set(err, "\"pci\"[%d]: \"addr\": '%s' is not a PCI function's address", i, addr);
		if (!fabric_class_ok(cls))
			return verr_set(err, "\"pci\"[%d]: \"class\": '%s' is not a class name", i, cls);
		for (int k = 0; k < i; k++)
			if (!strcmp(m->pci[k].addr, addr))
				return verr_set(err, "\"pci\"[%d]: %s is listed twice", i, addr);
		snprintf(m->pci[i].addr, sizeof(m->pci[i].addr), "%s", addr);
		snprintf(m->pci[i].cls, sizeof(m->pci[i].cls), "%s", cls);
		m->pci[i].numa = (int)numa;
	}
	return 0;
}

static int parse_nodejobs(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "job", "state", "error", NULL };
	struct json_object *a;

	if (jf_array(o, "jobs", true, CTLD_MAX_NODEJOBS, &a, err) < 0)
		return -1;
	m->njobs = (int)json_object_array_length(a);
	m->jobs = calloc(m->njobs ? m->njobs : 1, sizeof(*m->jobs));
	if (!m->jobs)
		return verr_set(err, "out of memory");
	for (int i = 0; i < m->njobs; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *st = NULL, *er = NULL;
		long long id;
		int k;

		if (!json_object_is_type(e, json_type_object))
			return verr_set(err, "\"jobs\"[%d]: expected an object", i);
		if (jf_only(e, "job entry", f, err) < 0 || jf_int(e, "job", true, 1, INT64_MAX / 2, &id, err) < 0 ||
		    jf_str(e, "state", true, 16, &st, err) < 0 || jf_str(e, "error", false, 1024, &er, err) < 0)
			return verr_wrap(err, "\"jobs\"[%d]", i);
		for (k = 0; ctld_nodejob_state_names[k] && strcmp(ctld_nodejob_state_names[k], st); k++)
			;
		if (!ctld_nodejob_state_names[k])
			return verr_set(err, "\"jobs\"[%d]: state '%.16s' is not preparing, ready, running, exited or failed", i, st);
		m->jobs[i].job = id;
		m->jobs[i].state = (enum nodejob_state)k;
		snprintf(m->jobs[i].error, sizeof(m->jobs[i].error), "%s", er ? er : "");
	}
	return 0;
}

/* A node's image cache, in register and heartbeat (optional). */
static int parse_cache(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "id", "name", "bytes", "used", "in_use", NULL };
	struct json_object *a = NULL;

	if (jf_array(o, "images", false, CTLD_MAX_CACHED, &a, err) < 0)
		return -1;
	if (!a)
		return 0;
	m->have_cache = true;
	m->ncache = (int)json_object_array_length(a);
	if (!(m->cache = calloc(m->ncache ? m->ncache : 1, sizeof(*m->cache))))
		return verr_set(err, "out of memory");
	for (int i = 0; i < m->ncache; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		struct cmsg_cached *c = &m->cache[i];
		const char *id, *name = NULL;
		long long bytes, used;

		if (!json_object_is_type(e, json_type_object))
			return verr_set(err, "\"images\"[%d]: expected an object", i);
		if (jf_only(e, "images entry", f, err) < 0 || jf_str(e, "id", true, 64, &id, err) < 0 ||
		    jf_ident(e, "name", false, 64, &name, err) < 0 ||
		    jf_int(e, "bytes", true, 0, 1ll << 50, &bytes, err) < 0 ||
		    jf_int(e, "used", true, 0, 1ll << 40, &used, err) < 0 ||
		    jf_bool(e, "in_use", true, &c->in_use, err) < 0)
			return verr_wrap(err, "\"images\"[%d]", i);
		if (!sha256_hex_ok(id))
			return verr_set(err, "\"images\"[%d]: \"id\": expected an image id (64 lowercase hex digits)", i);
		snprintf(c->id, sizeof(c->id), "%s", id);
		snprintf(c->name, sizeof(c->name), "%s", name ? name : "");
		c->bytes = (uint64_t)bytes;
		c->used = used;
	}
	return 0;
}

static int parse_image(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f_have[] = { "objects", NULL }, *const f_put[] = { "parts", WIRE_DATA, NULL },
		*const f_tag[] = { "name", "id", "signatures", NULL }, *const f_get[] = { "objects", "offset", "manifest", NULL },
		*const f_none[] = { NULL }, *const f_rm[] = { "name", "version", NULL };
	const char *s;
	long long v;

	switch (m->type) {
	case CM_IMAGE_HAVE:
		return jf_only(o, "image_have", f_have, err) < 0 ? -1
			: imgwire_shas(o, "objects", true, IMGWIRE_MAX_NAMES, &m->objects, &m->nobjects, err);
	case CM_IMAGE_PUT:
		return jf_only(o, "image_put", f_put, err) < 0 ? -1
			: imgwire_parts(o, "parts", IMGWIRE_MAX_PARTS, IMGWIRE_CHUNK, &m->parts, &m->nparts, err);
	case CM_IMAGE_TAG:
		if (jf_only(o, "image_tag", f_tag, err) < 0 || jf_ident(o, "name", true, 64, &s, err) < 0)
			return -1;
		snprintf(m->name, sizeof(m->name), "%s", s);
		if (jf_str(o, "id", true, 64, &s, err) < 0)
			return -1;
		if (!sha256_hex_ok(s))
			return verr_set(err, "\"id\": expected an image id (64 lowercase hex digits)");
		snprintf(m->image_id, sizeof(m->image_id), "%s", s);
		/* Parsed and checked against the id by the store (images/sign.c). */
		s = NULL;
		if (jf_str(o, "signatures", false, CMSG_SIGS_MAX, &s, err) < 0)
			return -1;
		if (s && !(m->signatures = strdup(s)))
			return verr_set(err, "out of memory");
		return 0;
	case CM_IMAGE_GET:
		if (jf_only(o, "image_get", f_get, err) < 0 ||
		    imgwire_shas(o, "objects", true, IMGWIRE_MAX_GET, &m->objects, &m->nobjects, err) < 0 ||
		    jf_int(o, "offset", true, 0, (long long)IMGWIRE_OBJECT_MAX, &v, err) < 0 ||
		    jf_bool(o, "manifest", false, &m->manifest, err) < 0)
			return -1;
		if (m->manifest && m->nobjects != 1)
			return verr_set(err, "\"manifest\": asks for one image's manifest, not %d objects", m->nobjects);
		m->offset = v;
		return 0;
	case CM_IMAGE_LIST:
		return jf_only(o, "image_list", f_none, err);
	case CM_IMAGE_RM:
		if (jf_only(o, "image_rm", f_rm, err) < 0 || jf_ident(o, "name", true, 64, &s, err) < 0)
			return -1;
		snprintf(m->name, sizeof(m->name), "%s", s);
		s = NULL;
		if (jf_str(o, "version", false, 64, &s, err) < 0)
			return -1;
		snprintf(m->image_id, sizeof(m->image_id), "%s", s ? s : "");
		return 0;
	default:
		return verr_set(err, "internal: not an image message");
	}
}

static int parse_register(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "node", "addr", "underlay", "numa", "rdma", "fabric_link", "pci", "simulated",
					 "jobs", "images", NULL };
	const char *addr, *ul;
	char host[64];
	int port;

	if (jf_only(o, "register", f, err) < 0 || node_name(o, m, err) < 0 ||
	    jf_str(o, "addr", true, 63, &addr, err) < 0 || jf_str(o, "underlay", true, 15, &ul, err) < 0)
		return -1;
	if (hostport_parse(addr, false, host, sizeof(host), &port) < 0)
		return verr_set(err, "\"addr\": '%s' is not HOST:PORT", addr);
	snprintf(m->addr, sizeof(m->addr), "%s", addr);
	if (ipv4_parse(ul, &m->underlay) < 0 || m->underlay == 0)
		return verr_set(err, "\"underlay\": '%s' is not an IPv4 address", ul);
	if (parse_numa(o, m, err) < 0 || parse_rdma(o, m, err) < 0 || parse_fabric(o, m, err) < 0 ||
	    jf_bool(o, "simulated", false, &m->simulated, err) < 0 || parse_cache(o, m, err) < 0)
		return -1;
	return parse_nodejobs(o, m, err);
}

static int parse_job_output(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "node", "job", "offset", "data", NULL };
	const char *data;
	long long id, off;
	size_t b64len, cap;

	if (jf_only(o, "job_output", f, err) < 0 || node_name(o, m, err) < 0 ||
	    jf_int(o, "job", true, 1, INT64_MAX / 2, &id, err) < 0 ||
	    jf_int(o, "offset", true, 0, CTLD_OUTPUT_PAST, &off, err) < 0 ||
	    jf_str(o, "data", true, sodium_base64_ENCODED_LEN(CTLD_OUTPUT_CHUNK, sodium_base64_VARIANT_ORIGINAL), &data, err) < 0)
		return -1;
	m->id = id;
	m->offset = off;
	b64len = strlen(data);
	cap = b64len / 4 * 3 + 3;
	m->data = malloc(cap ? cap : 1);
	if (!m->data)
		return verr_set(err, "out of memory");
	if (sodium_base642bin(m->data, cap, data, b64len, NULL, &m->len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0 || m->len > CTLD_OUTPUT_CHUNK)
		return verr_set(err, "\"data\": not base64 of at most %u bytes", CTLD_OUTPUT_CHUNK);
	return 0;
}

static int parse_job_exit(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "node", "job", "size", "status", "timeout", "lost", NULL };
	long long id, size, st;

	if (jf_only(o, "job_exit", f, err) < 0 || node_name(o, m, err) < 0 ||
	    jf_int(o, "job", true, 1, INT64_MAX / 2, &id, err) < 0 ||
	    jf_int(o, "size", true, 0, CTLD_OUTPUT_PAST, &size, err) < 0 ||
	    jf_int(o, "status", true, 0, 255, &st, err) < 0 ||
	    jf_bool(o, "timeout", false, &m->timed_out, err) < 0 ||
	    jf_bool(o, "lost", false, &m->lost, err) < 0)
		return -1;
	m->id = id;
	m->size = size;
	m->status = (int)st;
	return 0;
}

/* history: whose jobs (a uid), ended since when, below which id. */
static int parse_history(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "uid", "since", "before", NULL };
	long long uid = -1, since = 0, before = INT64_MAX;

	if (jf_only(o, "history", f, err) < 0 || jf_int(o, "uid", false, 0, UINT32_MAX - 1, &uid, err) < 0 ||
	    jf_int(o, "since", false, 0, 1ll << 40, &since, err) < 0 ||
	    jf_int(o, "before", false, 1, INT64_MAX, &before, err) < 0)
		return -1;
	m->hist_uid = uid;
	m->since = since;
	m->before = before;
	return 0;
}

/* checkpoint: a job, --stop and --close-sessions; checkpoint_rm, restart: a name vhpc-ctld makes
 * (it becomes a folder's name: never "..", a slash or a leading dot). */
static int parse_ckpt(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f_ck[] = { "id", "stop", "close_sessions", NULL }, *const f_name[] = { "name", NULL };
	const char *s;

	if (m->type == CM_CHECKPOINT)
		return jf_only(o, "checkpoint", f_ck, err) < 0 || job_id(o, m, err) < 0 ||
		       jf_bool(o, "stop", false, &m->stop, err) < 0 ? -1
			: jf_bool(o, "close_sessions", false, &m->close_sessions, err);
	if (m->type == CM_CHECKPOINTS)
		return jf_only(o, "checkpoints", (const char *const[]){ NULL }, err);
	if (jf_only(o, m->type == CM_RESTART ? "restart" : "checkpoint_rm", f_name, err) < 0 ||
	    jf_str(o, "name", true, 64, &s, err) < 0)
		return -1;
	if (ckpt_name_check(s, err) < 0)
		return verr_wrap(err, "\"name\"");
	snprintf(m->ckpt, sizeof(m->ckpt), "%s", s);
	return 0;
}

/* node_drain: a node, drain or undrain, and whether to checkpoint its jobs. */
static int parse_drain(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f[] = { "node", "drain", "checkpoint", NULL };

	if (jf_only(o, "node_drain", f, err) < 0 || node_name(o, m, err) < 0 ||
	    jf_bool(o, "drain", true, &m->drain, err) < 0 || jf_bool(o, "checkpoint", false, &m->checkpoint, err) < 0)
		return -1;
	if (m->checkpoint && !m->drain)
		return verr_set(err, "\"checkpoint\": only with \"drain\": true");
	return 0;
}

static int parse_body(struct json_object *o, struct cmsg *m, struct verr *err)
{
	static const char *const f_submit[] = { "job", NULL }, *const f_id[] = { "id", NULL },
		*const f_queue[] = { "all", NULL }, *const f_wait[] = { "id", "timeout_ms", NULL },
		*const f_output[] = { "id", "offset", "max", NULL }, *const f_none[] = { NULL },
		*const f_exec[] = { "id", "guest", NULL },
		*const f_hb[] = { "node", "jobs", "images", NULL };
	struct json_object *job;
	long long v;

	switch (m->type) {
	case CM_SUBMIT:
		if (jf_only(o, "submit", f_submit, err) < 0 || jf_object(o, "job", true, &job, err) < 0)
			return -1;
		if (job_spec_from_json(job, &m->spec, err) < 0)
			return verr_wrap(err, "submit");
		m->have_spec = true;
		return 0;
	case CM_QUEUE:
		return jf_only(o, "queue", f_queue, err) < 0 ? -1 : jf_bool(o, "all", false, &m->all, err);
	case CM_JOB:
	case CM_CANCEL:
		return jf_only(o, m->type == CM_JOB ? "job" : "cancel", f_id, err) < 0 ? -1 : job_id(o, m, err);
	case CM_EXEC:
		if (jf_only(o, "exec", f_exec, err) < 0 || job_id(o, m, err) < 0 ||
		    jf_int(o, "guest", true, 0, 4095 /* a job has at most 4096 guests */, &v, err) < 0)
			return -1;
		m->guest = (int)v;
		return 0;
	case CM_WAIT:
		if (jf_only(o, "wait", f_wait, err) < 0 || job_id(o, m, err) < 0 ||
		    jf_int(o, "timeout_ms", true, 0, 60000, &v, err) < 0)
			return -1;
		m->timeout_ms = (int)v;
		return 0;
	case CM_OUTPUT:
		m->max = CTLD_OUTPUT_CHUNK;
		if (jf_only(o, "output", f_output, err) < 0 || job_id(o, m, err) < 0 ||
		    jf_int(o, "offset", true, 0, 1ll << 50, &v, err) < 0)
			return -1;
		m->offset = v;
		v = m->max;
		if (jf_int(o, "max", false, 1, CTLD_OUTPUT_CHUNK, &v, err) < 0)
			return -1;
		m->max = (int)v;
		return 0;
	case CM_NODES:
		return jf_only(o, "nodes", f_none, err);
	case CM_REGISTER:
		return parse_register(o, m, err);
	case CM_HEARTBEAT:
		if (jf_only(o, "heartbeat", f_hb, err) < 0 || node_name(o, m, err) < 0 || parse_cache(o, m, err) < 0)
			return -1;
		return parse_nodejobs(o, m, err);
	case CM_JOB_OUTPUT:
		return parse_job_output(o, m, err);
	case CM_JOB_EXIT:
		return parse_job_exit(o, m, err);
	case CM_HISTORY:
		return parse_history(o, m, err);
	case CM_CHECKPOINT:
	case CM_CHECKPOINTS:
	case CM_CHECKPOINT_RM:
	case CM_RESTART:
		return parse_ckpt(o, m, err);
	case CM_NODE_DRAIN:
		return parse_drain(o, m, err);
	case CM_IMAGE_HAVE:
	case CM_IMAGE_PUT:
	case CM_IMAGE_TAG:
	case CM_IMAGE_GET:
	case CM_IMAGE_LIST:
	case CM_IMAGE_RM:
		return parse_image(o, m, err);
	}
	return verr_set(err, "internal: no parser for message type %d", m->type);
}

int ctld_msg_parse(struct json_object *msg, struct cmsg *m, struct verr *err)
{
	const char *t = wire_type(msg);

	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(types[i].name, t))
			m->type = types[i].type;
	if (!m->type)
		return verr_set(err, "unknown message type '%.64s'", t);
	if (parse_body(msg, m, err) < 0) {
		if (!strstr(err->msg, t))
			verr_wrap(err, "%s", t);
		ctld_msg_free(m);
		return -1;
	}
	return 0;
}
