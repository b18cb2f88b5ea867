/*
 * vhpc node drain NODE [--checkpoint] and vhpc node undrain NODE (root):
 * a drained node takes no new guests; what runs there goes on, or with
 * --checkpoint every job running there is checkpointed with stop and
 * requeued as a restart of that checkpoint (ctld_ckpt.c), which lands on
 * other nodes when the cluster's checkpoints are shared, and otherwise
 * waits for the node to be undrained.
 */
#include "lib/log.h"
#include "lib/wire.h"
#include "ctld.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One job of the node: checkpointed with stop, then restarted; what
 * happened, for the reply. */
static struct json_object *requeue(struct ctld *ctl, int64_t id, const char *node)
{
	struct wire_peer root = { .uid = 0 };
	struct cmsg m = { .type = CM_CHECKPOINT, .id = id, .stop = true };
	struct json_object *o = json_object_new_object(), *r;
	const char *e;
	char name[65];

	json_object_object_add(o, "id", json_object_new_int64(id));
	r = ctld_ckpt_handle(ctl, &m, &root);
	if ((e = wire_error_text(r))) {
		/* It runs on: the node is drained, not stopped. */
		json_object_object_add(o, "error", json_object_new_string(e));
		json_object_put(r);
		return o;
	}
	snprintf(name, sizeof(name), "%s", json_object_get_string(json_object_object_get(r, "name")));
	json_object_put(r);
	json_object_object_add(o, "checkpoint", json_object_new_string(name));
	memset(&m, 0, sizeof(m));
	m.type = CM_RESTART;
	snprintf(m.ckpt, sizeof(m.ckpt), "%s", name);
	r = ctld_ckpt_handle(ctl, &m, &root);
	if ((e = wire_error_text(r))) {
		json_object_object_add(o, "error", json_object_new_string(e));
	} else {
		int64_t nid = json_object_get_int64(json_object_object_get(r, "id"));
		struct cjob *j;
		struct verr ve;

		json_object_object_add(o, "restart", json_object_new_int64(nid));
		pthread_mutex_lock(&ctl->mu);
		/* The old job says where it went. */
		if ((j = ctld_job_find(ctl, id))) {
			size_t len = strlen(j->reason);

			snprintf(j->reason + len, sizeof(j->reason) - len, "; requeued as job %lld (node %s drained)",
				 (long long)nid, node);
			ctld_job_commit(ctl, j, false, &ve);
		}
		pthread_mutex_unlock(&ctl->mu);
		log_info("job %lld: node %s drained: checkpointed to %s, requeued as job %lld", (long long)id, node, name,
			 (long long)nid);
	}
	json_object_put(r);
	return o;
}

struct json_object *ctld_drain_handle(struct ctld *ctl, const struct cmsg *m)
{
	struct json_object *r, *jobs = json_object_new_array();
	struct cnode *n;
	int64_t *ids = NULL;
	int nids = 0, idx;
	struct verr e;

	pthread_mutex_lock(&ctl->mu);
	if (!(n = ctld_node_find(ctl, m->node))) {
		pthread_mutex_unlock(&ctl->mu);
		json_object_put(jobs);
		return ctld_error("not_found", "no node %s", m->node);
	}
	if (n->drained != m->drain) {
		n->drained = m->drain;
		ctld_node_commit(ctl, n, &e);
		log_info("node %s %s", n->name, m->drain ? "drained: no new jobs go there" : "undrained: takes jobs again");
		ctld_kick(ctl);
	}
	idx = ctld_node_index(ctl, n);
	if (m->drain && m->checkpoint && (ids = calloc((size_t)ctl->njobs + 1, sizeof(*ids))))
		for (int i = 0; i < ctl->njobs; i++)
			if (ctl->jobs[i]->state == JOB_RUNNING && ctld_job_uses(ctl->jobs[i], idx))
				ids[nids++] = ctl->jobs[i]->id;
	pthread_mutex_unlock(&ctl->mu);
	/* One job at a time: each stands still only for its own save. */
	for (int i = 0; i < nids; i++)
		json_object_array_add(jobs, requeue(ctl, ids[i], m->node));
	free(ids);
	r = ctld_reply(m->drain ? "drained" : "undrained");
	json_object_object_add(r, "node", json_object_new_string(m->node));
	json_object_object_add(r, "jobs", jobs);
	return r;
}
