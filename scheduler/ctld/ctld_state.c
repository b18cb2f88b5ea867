/*
 * vhpc-ctld's nodes and jobs in memory, and their durable copy in the
 * store.  A change is committed before anything acts on it; a commit that
 * fails ends the daemon (the state on disk is then the truth a restart
 * recovers from, rather than a memory that disagrees with it), unless it
 * failed for a full disk and the database's reserve can be given up
 * (ctld_room.c).  Ended jobs leave memory after the cluster file's
 * ctld.keep_ended; the store keeps them, and requests read them there.
 */
#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/grow.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "ctld.h"
#include "scheduler/jobjson.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct ctld *ctld_new(void)
{
	struct ctld *ctl = calloc(1, sizeof(*ctl));

	if (!ctl)
		return NULL;
	pthread_mutex_init(&ctl->mu, NULL);
	pthread_mutex_init(&ctl->spool_mu, NULL);
	pthread_cond_init(&ctl->changed, NULL);
	pthread_cond_init(&ctl->kick, NULL);
	ctl->spool_fd = -1;
	ctl->room.state_fd = -1;
	return ctl;
}

int64_t ctld_mono_ms(void)
{
	return (int64_t)(now_ns() / 1000000);
}

int64_t ctld_wall_s(void)
{
	return (int64_t)time(NULL);
}

static void __attribute__((noreturn)) store_broken(const struct verr *e)
{
	log_err("%s; stopping: the state on disk is what a restart recovers", e->msg);
	_exit(1);
}

/* After a commit: whether to try it again (it met a full disk, and the
 * database's reserve made room).  Any other failure ends the daemon. */
static bool commit_again(struct ctld *ctl, int rc, const struct verr *e)
{
	if (rc == STORE_FULL && ctld_room_release(ctl))
		return true;
	if (rc < 0)
		store_broken(e);
	return false;
}

/* ---------------------------------------------------------------- lookup */

struct cjob *ctld_job_find(struct ctld *ctl, int64_t id)
{
	int lo = 0, hi = ctl->njobs - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;

		if (ctl->jobs[mid]->id == id)
			return ctl->jobs[mid];
		if (ctl->jobs[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

static int job_insert(struct ctld *ctl, struct cjob *j)
{
	int pos = ctl->njobs;

	if (grow(&ctl->jobs, &ctl->capjobs, (size_t)ctl->njobs + 1, sizeof(*ctl->jobs), 256) < 0)
		return -1;
	while (pos > 0 && ctl->jobs[pos - 1]->id > j->id)
		pos--;
	memmove(&ctl->jobs[pos + 1], &ctl->jobs[pos], sizeof(*ctl->jobs) * (ctl->njobs - pos));
	ctl->jobs[pos] = j;
	ctl->njobs++;
	return 0;
}

struct cnode *ctld_node_find(struct ctld *ctl, const char *name)
{
	for (int i = 0; i < ctl->nnodes; i++)
		if (!strcmp(ctl->nodes[i].name, name))
			return &ctl->nodes[i];
	return NULL;
}

int ctld_node_index(struct ctld *ctl, const struct cnode *n)
{
	return (int)(n - ctl->nodes);
}

bool ctld_job_active(const struct cjob *j)
{
	return j->state == JOB_STARTING || j->state == JOB_RUNNING;
}

bool ctld_job_visible(const struct cjob *j, uid_t uid)
{
	return uid == 0 || uid == j->uid;
}

static void base36(uint64_t v, char *buf, size_t len)
{
	char tmp[16];
	int n = 0;

	do {
		tmp[n++] = "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36];
		v /= 36;
	} while (v && n < 15);
	for (int i = 0; i < n && (size_t)i + 1 < len; i++)
		buf[i] = tmp[n - 1 - i];
	buf[(size_t)n < len ? n : (int)len - 1] = 0;
}

void ctld_job_local_id(const struct cjob *j, const struct cnode *n, char *buf, size_t len)
{
	char a[16], b[16];

	base36((uint64_t)j->id, a, sizeof(a));
	base36((uint64_t)n->id, b, sizeof(b));
	snprintf(buf, len, "%sx%s", a, b);
}

int ctld_job_launcher(const struct cjob *j)
{
	return j->nalloc > 0 ? j->alloc[0].node : -1;
}

/* ------------------------------------------------------------ encoding */

static char *alloc_to_json(struct ctld *ctl, const struct cjob *j)
{
	struct json_object *o = json_object_new_array();
	char *s;

	for (int i = 0; i < j->nalloc; i++) {
		struct json_object *g1 = json_object_new_object(), *takes = json_object_new_array();

		json_object_object_add(g1, "node", json_object_new_string(ctl->nodes[j->alloc[i].node].name));
		for (int t = 0; t < j->alloc[i].ntakes; t++) {
			struct json_object *tk = json_object_new_array();

			json_object_array_add(tk, json_object_new_int(j->alloc[i].take[t].numa));
			json_object_array_add(tk, json_object_new_int(j->alloc[i].take[t].cores));
			json_object_array_add(tk, json_object_new_int64((int64_t)j->alloc[i].take[t].mem));
			json_object_array_add(takes, tk);
		}
		json_object_object_add(g1, "takes", takes);
		json_object_array_add(o, g1);
	}
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

static char *net_to_json(const struct ctld *ctl, const struct cjob *j)
{
	struct json_object *o = json_object_new_object();
	char a[20], sub[32], *s;

	snprintf(sub, sizeof(sub), "%s/%d", ipv4_format(j->subnet.addr, a, sizeof(a)), j->subnet.prefix);
	json_object_object_add(o, "vni", json_object_new_int64(j->vni));
	json_object_object_add(o, "subnet", json_object_new_string(sub));
	json_object_object_add(o, "key", json_object_new_string(j->key_hex));
	ctld_fabric_to_json(ctl, j, o);
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

static char *cleanup_to_json(struct ctld *ctl, const struct cjob *j)
{
	struct json_object *o = json_object_new_array();
	char *s;

	for (int i = 0; i < ctl->nnodes && j->cleanup; i++)
		if (j->cleanup[i])
			json_object_array_add(o, json_object_new_string(ctl->nodes[i].name));
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

/* Our own rows, written by us: still read defensively (a damaged row
 * must not crash the daemon, only lose that job's allocation). */
static int alloc_from_json(struct ctld *ctl, struct cjob *j, const char *text)
{
	struct json_object *o = text ? json_tokener_parse(text) : NULL;
	int n, rc = -1;

	if (!o || !json_object_is_type(o, json_type_array))
		goto out;
	n = (int)json_object_array_length(o);
	if (n < 1 || n > SCHED_MAX_GUESTS)
		goto out;
	j->alloc = calloc(n, sizeof(*j->alloc));
	if (!j->alloc)
		goto out;
	for (int i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(o, i), *v, *takes;
		struct cnode *nd;

		if (!json_object_object_get_ex(e, "node", &v) || !(nd = ctld_node_find(ctl, json_object_get_string(v))) ||
		    !json_object_object_get_ex(e, "takes", &takes) ||
		    !json_object_is_type(takes, json_type_array) ||
		    json_object_array_length(takes) > SCHED_MAX_NUMA)
			goto out;
		j->alloc[i].node = ctld_node_index(ctl, nd);
		j->alloc[i].ntakes = (int)json_object_array_length(takes);
		for (int t = 0; t < j->alloc[i].ntakes; t++) {
			struct json_object *tk = json_object_array_get_idx(takes, t);

			if (!json_object_is_type(tk, json_type_array) || json_object_array_length(tk) != 3)
				goto out;
			j->alloc[i].take[t].numa = json_object_get_int(json_object_array_get_idx(tk, 0));
			j->alloc[i].take[t].cores = json_object_get_int(json_object_array_get_idx(tk, 1));
			j->alloc[i].take[t].mem = (uint64_t)json_object_get_int64(json_object_array_get_idx(tk, 2));
			if (j->alloc[i].take[t].numa < 0 || j->alloc[i].take[t].numa >= SCHED_MAX_NUMA)
				goto out;
		}
	}
	j->nalloc = n;
	rc = 0;
out:
	if (rc < 0) {
		free(j->alloc);
		j->alloc = NULL;
		j->nalloc = 0;
	}
	json_object_put(o);
	return rc;
}

static int net_from_json(struct cjob *j, const char *text)
{
	struct json_object *o = text ? json_tokener_parse(text) : NULL, *v;
	int rc = -1;

	if (!o || !json_object_is_type(o, json_type_object))
		goto out;
	if (!json_object_object_get_ex(o, "vni", &v))
		goto out;
	j->vni = (uint32_t)json_object_get_int64(v);
	if (!json_object_object_get_ex(o, "subnet", &v) || ipv4net_parse(json_object_get_string(v), false, &j->subnet) < 0)
		goto out;
	if (!json_object_object_get_ex(o, "key", &v) || strlen(json_object_get_string(v)) != 2 * CHAN_KEY_LEN)
		goto out;
	snprintf(j->key_hex, sizeof(j->key_hex), "%s", json_object_get_string(v));
	ctld_fabric_from_json(j, o);
	rc = 0;
out:
	json_object_put(o);
	return rc;
}

static void cleanup_from_json(struct ctld *ctl, struct cjob *j, const char *text)
{
	struct json_object *o = text ? json_tokener_parse(text) : NULL;

	for (size_t i = 0; o && json_object_is_type(o, json_type_array) && i < json_object_array_length(o); i++) {
		struct cnode *n = ctld_node_find(ctl, json_object_get_string(json_object_array_get_idx(o, i)));

		if (n)
			ctld_job_owe_stop(j, ctld_node_index(ctl, n));
	}
	json_object_put(o);
}

/* ------------------------------------------------------------- commits */

int ctld_job_commit(struct ctld *ctl, struct cjob *j, bool with_alloc, struct verr *err)
{
	struct job_row r = { 0 };
	int rc;

	r.id = j->id;
	r.state = j->state;
	r.started = j->started;
	r.ended = j->ended;
	r.exit_status = j->exit_status;
	r.attempts = j->attempts;
	snprintf(r.reason, sizeof(r.reason), "%s", j->reason);
	if (with_alloc) {
		r.alloc_json = alloc_to_json(ctl, j);
		r.net_json = net_to_json(ctl, j);
	}
	r.cleanup_json = cleanup_to_json(ctl, j);
	do
		rc = store_job_update(ctl->st, &r, err);
	while (commit_again(ctl, rc, err));
	store_job_row_free(&r);
	pthread_cond_broadcast(&ctl->changed);
	return rc;
}

int ctld_node_commit(struct ctld *ctl, struct cnode *n, struct verr *err)
{
	struct node_row r = { 0 };
	int rc;

	snprintf(r.name, sizeof(r.name), "%s", n->name);
	snprintf(r.addr, sizeof(r.addr), "%s", n->addr);
	r.up = n->up;
	r.last_seen = ctld_wall_s();
	r.info_json = n->info_json;
	r.drained = n->drained;
	do
		rc = store_node_put(ctl->st, &r, err);
	while (commit_again(ctl, rc, err));
	if (!n->id && store_node_id(ctl->st, n->name, &n->id, err) < 0)
		store_broken(err);
	return 0;
}

void ctld_kick(struct ctld *ctl)
{
	ctl->kicked = true;
	pthread_cond_signal(&ctl->kick);
}

void ctld_job_owe_stop(struct cjob *j, int n)
{
	if (!j->cleanup && !(j->cleanup = calloc(CTLD_MAX_NODES, sizeof(bool)))) {
		log_err("out of memory");
		_exit(1);
	}
	if (!j->cleanup[n]) {
		j->cleanup[n] = true;
		j->ncleanup++;
	}
}

bool ctld_job_owes_stop(const struct cjob *j, int n)
{
	return j->cleanup && j->cleanup[n];
}

static void set_cleanup_all(struct ctld *ctl, struct cjob *j)
{
	for (int i = 0; i < j->nalloc; i++)
		if (ctl->nodes[j->alloc[i].node].up)
			ctld_job_owe_stop(j, j->alloc[i].node);
}

void ctld_job_end(struct ctld *ctl, struct cjob *j, enum job_state st, int exit_status, const char *fmt, ...)
{
	struct verr e;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->reason, sizeof(j->reason), fmt, ap);
	va_end(ap);
	j->state = st;
	j->exit_status = exit_status;
	j->ended = ctld_wall_s();
	set_cleanup_all(ctl, j);
	ctld_job_commit(ctl, j, false, &e);
	ctld_metrics_job_ended(ctl, st);
	log_info("job %lld: %s%s%s", (long long)j->id, store_job_state_names[st], j->reason[0] ? ": " : "", j->reason);
	if (j->ncleanup)
		ctld_rpc_stop_job(ctl, j);
	ctld_kick(ctl);
}

void ctld_job_requeue(struct ctld *ctl, struct cjob *j, const char *why)
{
	struct verr e;

	j->attempts++;
	set_cleanup_all(ctl, j);
	if (j->attempts >= CTLD_MAX_ATTEMPTS) {
		snprintf(j->reason, sizeof(j->reason), "could not start (%d attempts); last: %s", j->attempts, why);
		j->state = JOB_FAILED;
		j->exit_status = 125;
		j->ended = ctld_wall_s();
	} else {
		snprintf(j->reason, sizeof(j->reason), "requeued after a failed start: %s", why);
		j->state = JOB_PENDING;
		/* A node with a passing problem gets a moment. */
		j->retry_ms = ctld_mono_ms() + (long long)ctl->start_retry_ms * j->attempts;
	}
	ctld_job_commit(ctl, j, false, &e);
	if (j->state == JOB_FAILED)
		ctld_metrics_job_ended(ctl, JOB_FAILED);
	log_info("job %lld: %s: %s", (long long)j->id, store_job_state_names[j->state], j->reason);
	if (j->ncleanup)
		ctld_rpc_stop_job(ctl, j);
	ctld_kick(ctl);
}

bool ctld_job_uses(const struct cjob *j, int node)
{
	for (int i = 0; i < j->nalloc; i++)
		if (j->alloc[i].node == node)
			return true;
	return false;
}

void ctld_node_down(struct ctld *ctl, struct cnode *n, const char *why)
{
	struct verr e;
	int ni = ctld_node_index(ctl, n);

	n->up = false;
	ctld_node_commit(ctl, n, &e);
	log_warn("node %s is down: %s", n->name, why);
	for (int i = 0; i < ctl->njobs; i++) {
		struct cjob *j = ctl->jobs[i];

		/* Its part of any job went with it; no job_stop is owed there. */
		if (ctld_job_owes_stop(j, ni)) {
			j->cleanup[ni] = false;
			j->ncleanup--;
			ctld_job_commit(ctl, j, false, &e);
		}
		if (ctld_job_active(j) && ctld_job_uses(j, ni))
			ctld_job_end(ctl, j, JOB_NODE_FAIL, 125, "node %s failed: %s", n->name, why);
	}
	ctld_kick(ctl);
}

void ctld_node_reconcile(struct ctld *ctl, struct cnode *n, const struct cmsg_nodejob *jobs, int njobs,
		    int64_t *stop, int *nstop)
{
	int ni = ctld_node_index(ctl, n);
	int64_t now = ctld_wall_s();

	*nstop = 0;
	for (int i = 0; i < njobs; i++) {
		struct cjob *j = ctld_job_find(ctl, jobs[i].job);

		if (!j || !ctld_job_active(j) || !ctld_job_uses(j, ni)) {
			stop[(*nstop)++] = jobs[i].job;
			continue;
		}
		if (jobs[i].state == NJ_FAILED && j->state == JOB_RUNNING)
			ctld_job_end(ctl, j, JOB_FAILED, 125, "node %s: %s", n->name,
				jobs[i].error[0] ? jobs[i].error : "its part of the job failed");
	}
	/* A running job the node does not know any more (its vhpcd restarted
	 * and could not take it over): it cannot complete.  Jobs that just
	 * started may not be in a report that was on its way already. */
	for (int i = 0; i < ctl->njobs; i++) {
		struct cjob *j = ctl->jobs[i];
		bool seen = false;

		if (j->state != JOB_RUNNING || !ctld_job_uses(j, ni) ||
		    now - j->started < 2 * ctl->hb_interval_ms / 1000 + 2)
			continue;
		for (int k = 0; k < njobs && !seen; k++)
			seen = jobs[k].job == j->id;
		if (!seen)
			ctld_job_end(ctl, j, JOB_FAILED, 125, "node %s lost its part of the job", n->name);
	}
}

void ctld_nodes_usage(struct ctld *ctl, struct sched_node *sn)
{
	for (int i = 0; i < ctl->nnodes; i++) {
		memset(sn[i].used_cores, 0, sizeof(sn[i].used_cores));
		memset(sn[i].used_mem, 0, sizeof(sn[i].used_mem));
		for (int d = 0; d < sn[i].ndev; d++)
			sn[i].dev[d].used = 0;
	}
	for (int k = 0; k < ctl->njobs; k++) {
		struct cjob *j = ctl->jobs[k];
		bool all = ctld_job_active(j);
		struct sched_req one = ctld_job_req(j, 1);

		if (!all && !j->ncleanup)
			continue;
		for (int i = 0; i < j->nalloc; i++) {
			struct sched_node *n = &sn[j->alloc[i].node];

			if (!all && !ctld_job_owes_stop(j, j->alloc[i].node))
				continue;
			sched_take_extras(n, &one, +1);
			for (int t = 0; t < j->alloc[i].ntakes; t++) {
				n->used_cores[j->alloc[i].take[t].numa] += j->alloc[i].take[t].cores;
				n->used_mem[j->alloc[i].take[t].numa] += j->alloc[i].take[t].mem;
			}
		}
	}
}

/* ---------------------------------------------------------------- views */

struct json_object *ctld_job_json(struct ctld *ctl, const struct cjob *j)
{
	struct json_object *o = json_object_new_object(), *nodes = json_object_new_array(),
		*alloc = json_object_new_array();
	bool *seen = calloc(ctl->nnodes ? ctl->nnodes : 1, sizeof(bool));

	json_object_object_add(o, "id", json_object_new_int64(j->id));
	json_object_object_add(o, "uid", json_object_new_int64(j->uid));
	json_object_object_add(o, "name", json_object_new_string(j->name));
	json_object_object_add(o, "state", json_object_new_string(store_job_state_names[j->state]));
	json_object_object_add(o, "reason", json_object_new_string(j->reason));
	json_object_object_add(o, "guests", json_object_new_int(j->nguests));
	json_object_object_add(o, "ranks", json_object_new_int(j->ranks));
	json_object_object_add(o, "vcpus", json_object_new_int(j->vcpus));
	json_object_object_add(o, "mem", json_object_new_int64((int64_t)j->mem));
	json_object_object_add(o, "timeout", json_object_new_int64(j->limit));
	json_object_object_add(o, "submitted", json_object_new_int64(j->submitted));
	json_object_object_add(o, "started", json_object_new_int64(j->started));
	json_object_object_add(o, "ended", json_object_new_int64(j->ended));
	if (store_job_state_final(j->state))
		json_object_object_add(o, "exit_status", json_object_new_int(j->exit_status));
	json_object_object_add(o, "output_bytes", json_object_new_int64(j->out_size));
	if (j->out_cut)
		json_object_object_add(o, "output_cut", json_object_new_boolean(true));
	json_object_object_add(o, "attempts", json_object_new_int(j->attempts));
	if (j->restart[0])
		json_object_object_add(o, "restart", json_object_new_string(j->restart));
	json_object_object_add(o, "image", json_object_new_string(j->image));
	if (j->image_id[0])
		json_object_object_add(o, "image_id", json_object_new_string(j->image_id));
	for (int i = 0; i < j->nalloc; i++) {
		struct json_object *a = json_object_new_object();
		const char *name = ctl->nodes[j->alloc[i].node].name;

		json_object_object_add(a, "guest", json_object_new_int(i));
		json_object_object_add(a, "node", json_object_new_string(name));
		json_object_array_add(alloc, a);
		if (seen && !seen[j->alloc[i].node]) {
			seen[j->alloc[i].node] = true;
			json_object_array_add(nodes, json_object_new_string(name));
		}
	}
	free(seen);
	json_object_object_add(o, "nodes", nodes);
	json_object_object_add(o, "alloc", alloc);
	if (j->vni) {
		char a[20], sub[32];

		snprintf(sub, sizeof(sub), "%s/%d", ipv4_format(j->subnet.addr, a, sizeof(a)), j->subnet.prefix);
		json_object_object_add(o, "vni", json_object_new_int64(j->vni));
		json_object_object_add(o, "subnet", json_object_new_string(sub));
	}
	ctld_fabric_job_json(ctl, j, o);
	return o;
}

struct json_object *ctld_node_json(struct ctld *ctl, const struct cnode *n)
{
	struct json_object *o = json_object_new_object(), *numa = json_object_new_array(),
		*jobs = json_object_new_array(), *info = n->info_json ? json_tokener_parse(n->info_json) : NULL, *v;
	struct sched_node *sn = calloc(ctl->nnodes ? ctl->nnodes : 1, sizeof(*sn));
	int ni = ctld_node_index(ctl, n);
	char a[20];

	if (sn)
		ctld_nodes_usage(ctl, sn);
	json_object_object_add(o, "name", json_object_new_string(n->name));
	json_object_object_add(o, "addr", json_object_new_string(n->addr));
	json_object_object_add(o, "underlay", json_object_new_string(ipv4_format(n->underlay, a, sizeof(a))));
	json_object_object_add(o, "state", json_object_new_string(n->up ? "up" : "down"));
	json_object_object_add(o, "drained", json_object_new_boolean(n->drained));
	json_object_object_add(o, "last_seen_ms", json_object_new_int64(ctld_mono_ms() - n->last_seen_ms));
	json_object_object_add(o, "simulated", json_object_new_boolean(n->simulated));
	for (int k = 0; k < n->nnuma; k++) {
		struct json_object *e = json_object_new_object();

		json_object_object_add(e, "os_index", json_object_new_int(n->numa[k].os_index));
		json_object_object_add(e, "cores", json_object_new_int(n->numa[k].cores));
		json_object_object_add(e, "mem", json_object_new_int64((int64_t)n->numa[k].mem));
		json_object_object_add(e, "hugepages_2m_free", json_object_new_int64((int64_t)n->numa[k].huge2m));
		json_object_object_add(e, "used_cores", json_object_new_int(sn ? sn[ni].used_cores[k] : 0));
		json_object_object_add(e, "used_mem", json_object_new_int64(sn ? (int64_t)sn[ni].used_mem[k] : 0));
		json_object_array_add(numa, e);
	}
	free(sn);
	json_object_object_add(o, "numa", numa);
	json_object_object_add(o, "rdma", info && json_object_object_get_ex(info, "rdma", &v)
			       ? json_object_get(v) : json_object_new_array());
	json_object_put(info);
	ctld_fabric_node_json(ctl, n, o);
	for (int i = 0; i < ctl->njobs; i++) {
		const struct cjob *j = ctl->jobs[i];

		if (!ctld_job_active(j))
			continue;
		for (int k = 0; k < j->nalloc; k++)
			if (j->alloc[k].node == ni) {
				json_object_array_add(jobs, json_object_new_int64(j->id));
				break;
			}
	}
	json_object_object_add(o, "jobs", jobs);
	return o;
}

/* ---------------------------------------------------------------- load */

/* The request with the cluster's defaults filled in. */
static void job_resolve_request(struct ctld *ctl, struct cjob *j)
{
	const struct job_spec *s = &j->spec;

	j->nguests = (int)s->guests;
	j->ranks = (int)(s->ranks ? s->ranks : s->guests * (s->vcpus ? s->vcpus : 1));
	j->vcpus = (int)(s->vcpus ? s->vcpus : (j->ranks + j->nguests - 1) / j->nguests);
	/* mpirun's -np comes from the spec */
	j->spec.ranks = j->ranks;
	j->mem = s->mem ? s->mem : ctl->cl.default_mem;
	j->limit = s->timeout ? s->timeout : ctl->cl.default_timeout;
	snprintf(j->image, sizeof(j->image), "%s", s->image ? s->image : ctl->cl.default_image);
	snprintf(j->image_id, sizeof(j->image_id), "%s", s->image_id ? s->image_id : "");
	snprintf(j->tuning, sizeof(j->tuning), "%s", s->tuning ? s->tuning : ctl->cl.default_tuning);
	if (s->name)
		snprintf(j->name, sizeof(j->name), "%s", s->name);
	ctld_fabric_resolve(j);
}

void ctld_job_resolve(struct ctld *ctl, struct cjob *j)
{
	struct verr e;

	job_resolve_request(ctl, j);
	j->paths_err[0] = 0;
	if (job_paths_plan(&ctl->cl, &j->spec, j->uid, &j->paths, &e) < 0)
		snprintf(j->paths_err, sizeof(j->paths_err), "%s", e.msg);
}

struct cjob *ctld_job_new(void)
{
	return calloc(1, sizeof(struct cjob));
}

void ctld_job_free(struct cjob *j)
{
	if (!j)
		return;
	job_spec_free(&j->spec);
	free(j->spec_json);
	free(j->alloc);
	free(j->pci);
	free(j->cleanup);
	free(j);
}

int ctld_job_add(struct ctld *ctl, struct cjob *j)
{
	return job_insert(ctl, j);
}

static int load_node(struct ctld *ctl, const struct node_row *r)
{
	struct cnode *n = &ctl->nodes[ctl->nnodes];
	struct json_object *info = r->info_json ? json_tokener_parse(r->info_json) : NULL, *v;
	struct cmsg m;
	struct verr e;

	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", r->name);
	snprintf(n->addr, sizeof(n->addr), "%s", r->addr);
	n->id = r->id;
	n->up = r->up;
	n->drained = r->drained;
	/* Nodes get a full heartbeat timeout from our start to check in. */
	n->last_seen_ms = ctld_mono_ms();
	/* The info is what the node registered with: parse it as such. */
	if (info && json_object_is_type(info, json_type_object)) {
		json_object_object_add(info, "type", json_object_new_string("register"));
		json_object_object_add(info, "node", json_object_new_string(r->name));
		json_object_object_add(info, "addr", json_object_new_string(r->addr));
		json_object_object_add(info, "jobs", json_object_new_array());
		if (ctld_msg_parse(info, &m, &e) == 0) {
			n->underlay = m.underlay;
			n->nnuma = m.nnuma;
			memcpy(n->numa, m.numa, sizeof(n->numa));
			n->simulated = m.simulated;
			ctld_fabric_node_take(n, &m);
			n->have_info = true;
			ctld_msg_free(&m);
		} else {
			log_warn("node %s: stored information unusable (%s); waiting for it to register", r->name, e.msg);
			n->up = false;
		}
	}
	(void)v;
	json_object_put(info);
	n->info_json = r->info_json ? strdup(r->info_json) : NULL;
	ctl->nnodes++;
	return 0;
}

/* A job from its row; `plan`: its paths too (a job that may still start). */
static struct cjob *job_from(struct ctld *ctl, struct job_row *r, bool plan)
{
	struct cjob *j = ctld_job_new();
	struct json_object *spec;
	struct verr e;

	if (!j)
		return NULL;
	j->id = r->id;
	j->uid = r->uid;
	snprintf(j->name, sizeof(j->name), "%s", r->name);
	j->state = r->state;
	j->submitted = r->submitted;
	j->started = r->started;
	j->ended = r->ended;
	j->exit_status = r->exit_status;
	j->attempts = r->attempts;
	snprintf(j->reason, sizeof(j->reason), "%s", r->reason);
	snprintf(j->restart, sizeof(j->restart), "%s", r->restart);
	spec = r->spec_json ? json_tokener_parse(r->spec_json) : NULL;
	if (!spec || job_spec_from_json(spec, &j->spec, &e) < 0) {
		json_object_put(spec);
		log_err("job %lld: its stored spec is unusable; marking it failed", (long long)r->id);
		job_spec_defaults(&j->spec);
		j->spec.command.v = calloc(2, sizeof(char *));
		if (!store_job_state_final(j->state)) {
			j->broken = true;
			snprintf(j->reason, sizeof(j->reason), "its stored spec could not be read back");
		}
	} else {
		json_object_put(spec);
	}
	j->spec_json = r->spec_json;
	r->spec_json = NULL;
	if (plan)
		ctld_job_resolve(ctl, j);
	else
		job_resolve_request(ctl, j);
	if (r->alloc_json && alloc_from_json(ctl, j, r->alloc_json) < 0 && ctld_job_active(j)) {
		j->broken = true;
		snprintf(j->reason, sizeof(j->reason), "its stored allocation could not be read back");
	}
	/* The vCPUs a job was started with are in its allocation (without
	 * --vcpus the scheduler chose them). */
	if (j->nalloc) {
		j->vcpus = 0;
		for (int t = 0; t < j->alloc[0].ntakes; t++)
			j->vcpus += j->alloc[0].take[t].cores;
	}
	if (r->net_json && net_from_json(j, r->net_json) < 0 && ctld_job_active(j)) {
		j->broken = true;
		snprintf(j->reason, sizeof(j->reason), "its stored job network could not be read back");
	}
	cleanup_from_json(ctl, j, r->cleanup_json);
	ctld_spool_scan(ctl, j->id, &j->out_size, &j->out_cut);
	return j;
}

struct cjob *ctld_job_from_row(struct ctld *ctl, struct job_row *r)
{
	return job_from(ctl, r, false);
}

static int load_job(struct ctld *ctl, struct job_row *r)
{
	struct cjob *j = job_from(ctl, r, !store_job_state_final(r->state));

	if (!j || job_insert(ctl, j) < 0) {
		ctld_job_free(j);
		return -1;
	}
	return 0;
}

void ctld_forget_ended(struct ctld *ctl)
{
	int64_t before = ctld_wall_s() - ctl->cl.ctld_keep_ended;
	int kept = 0, gone = 0;

	for (int i = 0; i < ctl->njobs; i++) {
		struct cjob *j = ctl->jobs[i];

		/* Nothing acts on it any more: no thread, no teardown owed. */
		if (store_job_state_final(j->state) && j->ended <= before && !j->worker && !j->stopping && !j->ncleanup) {
			ctld_job_free(j);
			gone++;
		} else {
			ctl->jobs[kept++] = j;
		}
	}
	ctl->njobs = kept;
	if (gone)
		log_info("%d job%s ended over %lld s ago: out of memory, kept in the store", gone, gone == 1 ? "" : "s",
			 (long long)ctl->cl.ctld_keep_ended);
}

int ctld_state_load(struct ctld *ctl, struct verr *err)
{
	struct node_row *nv;
	struct job_row *jv;
	size_t nn, nj;

	ctl->nodes = calloc(CTLD_MAX_NODES, sizeof(*ctl->nodes));
	if (!ctl->nodes)
		return verr_set(err, "out of memory");
	if (store_nodes_list(ctl->st, &nv, &nn, err) < 0)
		return -1;
	for (size_t i = 0; i < nn && ctl->nnodes < CTLD_MAX_NODES; i++)
		load_node(ctl, &nv[i]);
	store_node_rows_free(nv, nn);
	if (store_jobs_list(ctl->st, ctld_wall_s() - ctl->cl.ctld_keep_ended, &jv, &nj, err) < 0)
		return -1;
	for (size_t i = 0; i < nj; i++)
		if (load_job(ctl, &jv[i]) < 0) {
			store_job_rows_free(jv, nj);
			return verr_set(err, "out of memory");
		}
	store_job_rows_free(jv, nj);
	/* Pick up where the last run left each job. */
	for (int i = 0; i < ctl->njobs; i++) {
		struct cjob *j = ctl->jobs[i];

		if (j->broken) {
			char why[256];

			snprintf(why, sizeof(why), "%s", j->reason);
			log_err("job %lld: %s", (long long)j->id, why);
			ctld_job_end(ctl, j, JOB_FAILED, 125, "%s", why);
		} else if (j->state == JOB_STARTING) {
			log_info("job %lld: was starting; starting it again on the same nodes", (long long)j->id);
			ctld_rpc_start_job(ctl, j);
		} else if (j->state == JOB_RUNNING) {
			log_info("job %lld: was running; re-attaching", (long long)j->id);
			ctld_rpc_relaunch_job(ctl, j);
		}
		if (j->ncleanup && !j->stopping)
			ctld_rpc_stop_job(ctl, j);
	}
	log_info("recovered %d node%s and %d job%s from the store", ctl->nnodes, ctl->nnodes == 1 ? "" : "s",
		 ctl->njobs, ctl->njobs == 1 ? "" : "s");
	return 0;
}
