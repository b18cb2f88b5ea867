/*
 * vhpc node drain NODE [--checkpoint] and vhpc node undrain NODE (root):
 * a drained node takes no new guests; what runs there goes on, or with
 * --checkpoint every job running there is checkpointed with stop and
 * requeued as a restart of that checkpoint (ctld_ckpt.c), which lands on
 * other nodes when the cluster's checkpoints are shared, and otherwise
 * waits for the node to be undrained.
 *
 * The jobs' checkpoints run at once, a thread each: they are independent
 * (each its own pause, save and ckpt_busy), and a maintenance window
 * should wait for the slowest save, not for their sum.  A job whose
 * checkpoint fails is resumed by it (ctld_ckpt.c's abandon) and runs on
 * where it is, on the drained node: never requeued without a checkpoint,
 * which would lose its work, nor lost.  The reply names it and why.
 */
#include "lib/log.h"
#include "lib/wire.h"
#include "ctld.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One job of the node: checkpointed with stop, then restarted; what
 * happened, for the reply. */
static struct json_object *requeue(struct ctld *ctl, int64_t id, const char *node)
{
	struct wire_peer root = { .uid = 0 };
	/* Maintenance does not wait for a user's open shell: it is closed. */
	struct cmsg m = { .type = CM_CHECKPOINT, .id = id, .stop = true, .close_sessions = true };
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

struct one {
	struct ctld *ctl;
	int64_t id;
	const char *node;
	struct json_object *result;
	pthread_t th;
	bool started;
};

static void *one_thread(void *arg)
{
	struct one *o = arg;

	o->result = requeue(o->ctl, o->id, o->node);
	return NULL;
}

/* Every job's checkpoint and requeue at once; their results in ids' order. */
static void requeue_all(struct ctld *ctl, const int64_t *ids, int nids, const char *node, struct json_object *jobs)
{
	struct one *v = calloc((size_t)nids + 1, sizeof(*v));

	for (int i = 0; i < nids; i++) {
		if (!v) {
			/* No memory for the threads: one after the other still drains. */
			json_object_array_add(jobs, requeue(ctl, ids[i], node));
			continue;
		}
		v[i] = (struct one){ ctl, ids[i], node, NULL, 0, false };
		v[i].started = pthread_create(&v[i].th, NULL, one_thread, &v[i]) == 0;
		if (!v[i].started)
			one_thread(&v[i]);
	}
	for (int i = 0; v && i < nids; i++) {
		if (v[i].started)
			pthread_join(v[i].th, NULL);
		json_object_array_add(jobs, v[i].result);
	}
	free(v);
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
	requeue_all(ctl, ids, nids, m->node, jobs);
	free(ids);
	r = ctld_reply(m->drain ? "drained" : "undrained");
	json_object_object_add(r, "node", json_object_new_string(m->node));
	json_object_object_add(r, "jobs", jobs);
	return r;
}
