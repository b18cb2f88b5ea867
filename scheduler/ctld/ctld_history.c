/*
 * Accounting (vhpc history): what a job's guests used, recorded as their
 * nodes report it in the `stopped` replies of the job's teardown, and the
 * `history` request that lists ended jobs with it from the store.  Users
 * see their own jobs, root everyone's.
 */
#include "lib/err.h"
#include "lib/log.h"
#include "ctld.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctld_usage_take(struct ctld *ctl, struct cjob *j, int node, struct json_object *reply)
{
	struct store_usage *u;
	int *where, n = 0;
	struct verr e;

	if (!j || !j->nalloc || !json_object_object_get_ex(reply, "usage", NULL))
		return;
	u = calloc((size_t)j->nalloc, sizeof(*u));
	where = calloc((size_t)j->nalloc, sizeof(int));
	if (!u || !where) {
		free(u);
		free(where);
		return;
	}
	for (int i = 0; i < j->nalloc; i++)
		where[i] = j->alloc[i].node;
	if (ctld_usage_parse(reply, where, j->nalloc, node, u, &n, &e) < 0) {
		log_warn("job %lld: node %s's usage report refused: %s (its guests' usage stays unknown)",
			 (long long)j->id, ctl->nodes[node].name, e.msg);
	} else {
		for (int i = 0; i < n; i++)
			snprintf(u[i].node, sizeof(u[i].node), "%s", ctl->nodes[node].name);
		/* Accounting is not state anything acts on: a store that cannot
		 * take it loses the numbers, not the controller. */
		if (store_usage_put(ctl->st, j->id, u, n, &e) < 0)
			log_warn("job %lld: recording what its guests on %s used: %s", (long long)j->id,
				 ctl->nodes[node].name, e.msg);
	}
	free(u);
	free(where);
}

/* A history page holds at most this many jobs (well within a reply's
 * 512 KiB); the client asks for the next with `before`. */
#define HISTORY_PAGE 500

/* The job's guests and distinct nodes, from its stored allocation (or its
 * spec, for a job that never started). */
static void add_placement(struct json_object *o, const struct history_row *h)
{
	struct json_object *alloc = h->alloc_json ? json_tokener_parse(h->alloc_json) : NULL;
	struct json_object *spec, *v, *nodes = json_object_new_array();
	int guests = 0;

	if (alloc && json_object_is_type(alloc, json_type_array)) {
		guests = (int)json_object_array_length(alloc);
		for (int i = 0; i < guests; i++) {
			const char *name = json_object_object_get_ex(json_object_array_get_idx(alloc, i), "node", &v)
				? json_object_get_string(v) : NULL;
			bool seen = !name;

			for (size_t k = 0; !seen && k < json_object_array_length(nodes); k++)
				seen = !strcmp(json_object_get_string(json_object_array_get_idx(nodes, k)), name);
			if (!seen)
				json_object_array_add(nodes, json_object_new_string(name));
		}
	} else if (h->spec_json && (spec = json_tokener_parse(h->spec_json))) {
		if (json_object_object_get_ex(spec, "guests", &v))
			guests = json_object_get_int(v);
		json_object_put(spec);
	}
	json_object_put(alloc);
	json_object_object_add(o, "guests", json_object_new_int(guests));
	json_object_object_add(o, "nodes", nodes);
}

static struct json_object *history_json(const struct history_row *h)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "id", json_object_new_int64(h->id));
	json_object_object_add(o, "uid", json_object_new_int64(h->uid));
	json_object_object_add(o, "name", json_object_new_string(h->name));
	json_object_object_add(o, "state", json_object_new_string(store_job_state_names[h->state]));
	json_object_object_add(o, "exit_status", json_object_new_int(h->exit_status));
	json_object_object_add(o, "reason", json_object_new_string(h->reason));
	add_placement(o, h);
	json_object_object_add(o, "submitted", json_object_new_int64(h->submitted));
	json_object_object_add(o, "started", json_object_new_int64(h->started));
	json_object_object_add(o, "ended", json_object_new_int64(h->ended));
	json_object_object_add(o, "elapsed", json_object_new_int64(
		h->started > 0 && h->ended >= h->started ? h->ended - h->started : 0));
	/* null: no guest's numbers arrived (unknown, not 0) */
	json_object_object_add(o, "cpu_usec", h->cpu_guests ? json_object_new_int64(h->cpu_usec) : NULL);
	json_object_object_add(o, "cpu_guests", json_object_new_int(h->cpu_guests));
	json_object_object_add(o, "mem_peak", h->mem_guests ? json_object_new_int64(h->mem_peak) : NULL);
	json_object_object_add(o, "mem_guests", json_object_new_int(h->mem_guests));
	return o;
}

struct json_object *ctld_history_handle(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct json_object *r, *a;
	struct history_row *v;
	size_t n;
	struct verr e;
	int64_t who = uid == 0 ? m->hist_uid : (int64_t)uid;

	if (uid != 0 && m->hist_uid >= 0 && m->hist_uid != (int64_t)uid)
		return ctld_error("denied", "permission denied (the jobs of uid %lld are theirs and root's to see; "
				  "you are uid %u)", (long long)m->hist_uid, (unsigned)uid);
	if (store_history(ctl->st, who, m->since, m->before, HISTORY_PAGE, &v, &n, &e) < 0)
		return ctld_error("internal", "%s", e.msg);
	r = ctld_reply("history");
	a = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, history_json(&v[i]));
	json_object_object_add(r, "jobs", a);
	json_object_object_add(r, "more", json_object_new_boolean(n == HISTORY_PAGE));
	store_history_free(v, n);
	return r;
}
