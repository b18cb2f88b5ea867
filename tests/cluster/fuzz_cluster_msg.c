/*
 * Hostile messages at vhpc-ctld's and vhpcd's dispatch (and vhpcd's
 * parse of the store's image_data answers): whatever a peer
 * with a valid munge credential sends, every field is validated before
 * anything acts on it.  The first byte picks the message type (or keeps
 * the input's own); the rest is the JSON payload.  Every accepted message
 * must satisfy the limits its parser promises; nothing may crash or leak.
 */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/imgwire.h"
#include "lib/jobspec.h"
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckptname.h"
#include "scheduler/ctld/ctld.h"
#include "nodeagent/daemon/daemon.h"
#include "nodeagent/nodeagent.h"
#include "images/images.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const types[] = {
	"submit", "queue", "job", "wait", "cancel", "output", "nodes", "register", "heartbeat",
	"job_output", "job_exit", "job_prepare", "job_launch", "job_stop",
	"image_have", "image_put", "image_tag", "image_get", "image_list", "image_rm", "image_data",
	"history", "stopped", "job_pause", "job_resume", "job_checkpoint",
	"checkpoint", "checkpoints", "checkpoint_rm", "restart", "node_drain",
};

/* A job of 8 guests on nodes 0 and 1 by turns, for a node's usage report
 * (the `usage` of a `stopped` reply, from node 0). */
static const int usage_nodes[8] = { 0, 1, 0, 1, 0, 1, 0, 1 };

static void check_usage(const struct store_usage *u, int n)
{
	bool seen[8] = { false };

	if (n < 0 || n > 8)
		abort();
	for (int i = 0; i < n; i++) {
		if (u[i].guest < 0 || u[i].guest >= 8 || usage_nodes[u[i].guest] != 0 || seen[u[i].guest] ||
		    u[i].cpu_usec < -1 || u[i].cpu_usec > (1ll << 53) || u[i].mem_peak < -1 || u[i].mem_peak > (1ll << 53))
			abort();
		seen[u[i].guest] = true;
	}
}

/* Parts as parse promises: names, within their objects, the total bounded. */
static void check_parts(const struct image_chunk *c, int n, int max)
{
	size_t total = 0;

	if (n < 0 || n > max || (n && !c))
		abort();
	for (int i = 0; i < n; i++) {
		if (!image_id_ok(c[i].object) || c[i].offset > c[i].size || c[i].len > c[i].size - c[i].offset ||
		    c[i].size > IMGWIRE_OBJECT_MAX)
			abort();
		total += c[i].len;
	}
	if (total > IMGWIRE_CHUNK)
		abort();
}

static void check_cmsg(const struct cmsg *m)
{
	if (m->type == CM_SUBMIT) {
		struct verr e;

		if (!m->have_spec || job_spec_check(&m->spec, &e) < 0 || m->spec.guests < 1 ||
		    m->spec.guests > 4096 || !m->spec.command.n)
			abort();
	}
	if (m->type == CM_REGISTER && (m->nnuma < 1 || m->nnuma > SCHED_MAX_NUMA || !m->underlay))
		abort();
	if ((m->type == CM_REGISTER || m->type == CM_HEARTBEAT) && (m->njobs < 0 || (m->njobs && !m->jobs)))
		abort();
	for (int i = 0; i < m->njobs; i++)
		if (m->jobs[i].job < 1 || m->jobs[i].state >= NJ_MAX)
			abort();
	if (m->type == CM_JOB_OUTPUT && (m->len > CTLD_OUTPUT_CHUNK || m->offset < 0))
		abort();
	if (m->type == CM_OUTPUT && (m->max < 1 || m->max > (int)CTLD_OUTPUT_CHUNK))
		abort();
	if (m->type == CM_JOB_EXIT && (m->status < 0 || m->status > 255))
		abort();
	if ((m->type == CM_REGISTER || m->type == CM_HEARTBEAT) &&
	    (m->ncache < 0 || m->ncache > CTLD_MAX_CACHED || (m->ncache && !m->cache)))
		abort();
	for (int i = 0; i < m->ncache; i++)
		if (!image_id_ok(m->cache[i].id))
			abort();
	if ((m->type == CM_IMAGE_HAVE && (m->nobjects < 1 || m->nobjects > IMGWIRE_MAX_NAMES)) ||
	    (m->type == CM_IMAGE_GET && (m->nobjects < 1 || m->nobjects > IMGWIRE_MAX_GET || m->offset < 0)))
		abort();
	for (int i = 0; i < m->nobjects; i++)
		if (!image_id_ok(m->objects[i]))
			abort();
	if (m->type == CM_IMAGE_PUT)
		check_parts(m->parts, m->nparts, IMGWIRE_MAX_PARTS);
	if (m->type == CM_IMAGE_TAG && (!image_id_ok(m->image_id) || !m->name[0]))
		abort();
	if (m->type == CM_HISTORY && (m->hist_uid < -1 || m->hist_uid >= UINT32_MAX || m->since < 0 || m->before < 1))
		abort();
	/* A checkpoint's name becomes a folder's name under the checkpoint dir. */
	if ((m->type == CM_CHECKPOINT_RM || m->type == CM_RESTART) &&
	    (!ckpt_name_ok(m->ckpt) || strchr(m->ckpt, '/') || m->ckpt[0] == '.'))
		abort();
	if (m->type == CM_NODE_DRAIN && (!m->node[0] || (m->checkpoint && !m->drain)))
		abort();
}

static void check_vmsg(const struct vmsg *m)
{
	if (m->job < 1)
		abort();
	if (m->type == VM_PREPARE) {
		const struct vprep *p = &m->prep;

		if (!na_job_ok(p->local) || p->nhere < 1 || p->nhere > VHPC_MAX_GUESTS || p->ntotal < 1 ||
		    p->vcpus < 1 || p->vni < 1 || p->vni > VHPC_VNI_MAX || strlen(p->key_hex) != 64)
			abort();
		for (int i = 0; i < p->nhere; i++)
			if (p->here[i] < 0 || p->here[i] >= p->ntotal || (i && p->here[i] <= p->here[i - 1]))
				abort();
	}
	if (m->type == VM_LAUNCH && (!m->argv || !m->argv[0] || !m->argv[0][0] || !m->env))
		abort();
	/* The name becomes a folder's: never empty, ".", ".." or with a '/'. */
	if (m->type == VM_CHECKPOINT && (!ckpt_name_ok(m->ckpt) || strchr(m->ckpt, '/') || m->ckpt[0] == '.'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_tokener *tok;
	struct json_object *o;
	struct verr e;
	struct cmsg cm;
	struct vmsg vm;

	if (size < 1 || size > 200000)
		return 0;
	tok = json_tokener_new_ex(32);
	o = json_tokener_parse_ex(tok, (const char *)data + 1, (int)size - 1);
	json_tokener_free(tok);
	if (!o)
		return 0;
	if (json_object_is_type(o, json_type_object) && data[0] < sizeof(types) / sizeof(types[0]))
		json_object_object_add(o, "type", json_object_new_string(types[data[0]]));
	if (ctld_msg_parse(o, &cm, &e) == 0) {
		check_cmsg(&cm);
		ctld_msg_free(&cm);
	} else if (!e.msg[0]) {
		abort();
	}
	if (vmsg_parse(o, &vm, &e) == 0) {
		check_vmsg(&vm);
		vmsg_free(&vm);
	} else if (!e.msg[0]) {
		abort();
	}
	{
		struct store_usage u[8];
		int n;

		if (ctld_usage_parse(o, usage_nodes, 8, 0, u, &n, &e) == 0)
			check_usage(u, n);
		else if (!e.msg[0] || n)
			abort();
	}
	{
		struct image_chunk *c;
		int n;

		if (vimg_data_parse(o, &c, &n, &e) == 0) {
			check_parts(c, n, IMGWIRE_MAX_GET);
			image_chunks_free(c, n);
		} else if (!e.msg[0]) {
			abort();
		}
	}
	json_object_put(o);
	return 0;
}
