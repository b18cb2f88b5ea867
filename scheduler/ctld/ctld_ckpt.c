/*
 * vhpc checkpoint: a coordinated checkpoint of a whole running job
 * (scheduler/README.md, "Checkpoints"; the messages in PROTOCOL.md).
 *
 * The order is the contract's: the record into the store, job_checkpoint
 * with check on every node (nothing changes yet; a node that cannot save
 * its part says why, and the record goes again), job_pause to every node,
 * and only once all of them paused, job_checkpoint to every node; then job_resume to every
 * node, or with --stop the job ends CHECKPOINTED and is torn down.  Any
 * failure after the pause: job_resume everywhere, the partial checkpoint
 * removed, the user told which node and why.
 *
 * A request runs in its connection's thread, without ctl->mu while it
 * waits for nodes; the job's ckpt_busy keeps a second one out.
 */
#include "lib/cluster.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "lib/jobspec.h"
#include "ctld.h"
#include "lib/ckptname.h"
#include "scheduler/jobjson.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Saving a part writes the guests' memory: minutes for large guests. */
#define SAVE_TIMEOUT_MS (30 * 60 * 1000)
/* The exit status of a job that ended CHECKPOINTED: EX_TEMPFAIL, "try
 * again later", which is what a restart from its checkpoint does. */
#define CKPT_EXIT_STATUS 75

/* The calls of one step to the job's nodes: one per node, in the order
 * of its guests. */
struct step {
	struct ctld_call *c;
	int n;
	int *node;                     /* node index of each call */
};

static void step_free(struct step *s)
{
	if (s->c)
		ctld_calls_free(s->c, s->n);
	free(s->node);
	memset(s, 0, sizeof(*s));
}

/* A message of `type` for each node of j.  Holds ctl->mu. */
static int step_make(struct ctld *ctl, const struct cjob *j, const char *type, struct step *s)
{
	memset(s, 0, sizeof(*s));
	s->node = calloc(j->nalloc ? j->nalloc : 1, sizeof(int));
	s->c = calloc(j->nalloc ? j->nalloc : 1, sizeof(*s->c));
	if (!s->node || !s->c) {
		free(s->node);
		free(s->c);
		return -1;
	}
	s->n = ctld_job_nodes(j, s->node);
	for (int k = 0; k < s->n; k++) {
		const struct cnode *n = &ctl->nodes[s->node[k]];

		snprintf(s->c[k].node, sizeof(s->c[k].node), "%s", n->name);
		snprintf(s->c[k].addr, sizeof(s->c[k].addr), "%s", n->addr);
		s->c[k].req = json_object_new_object();
		json_object_object_add(s->c[k].req, "type", json_object_new_string(type));
		json_object_object_add(s->c[k].req, "node", json_object_new_string(n->name));
		json_object_object_add(s->c[k].req, "job", json_object_new_int64(j->id));
	}
	return 0;
}

/* The first call that failed, or -1. */
static int step_failed(const struct step *s)
{
	for (int k = 0; k < s->n; k++)
		if (s->c[k].rc < 0)
			return k;
	return -1;
}

/* job_resume to every node of the step's nodes (a fresh set of calls),
 * each tried up to 3 times: a job must not stay paused.  The first node
 * that never answered into bad (or ""). */
static void resume_all(struct ctld *ctl, const struct step *like, int64_t job, char *bad, size_t len)
{
	struct step r = { 0 };

	bad[0] = 0;
	r.n = like->n;
	r.c = calloc(like->n ? like->n : 1, sizeof(*r.c));
	if (!r.c) {
		snprintf(bad, len, "out of memory");
		return;
	}
	for (int k = 0; k < r.n; k++) {
		snprintf(r.c[k].node, sizeof(r.c[k].node), "%s", like->c[k].node);
		snprintf(r.c[k].addr, sizeof(r.c[k].addr), "%s", like->c[k].addr);
		r.c[k].req = json_object_new_object();
		json_object_object_add(r.c[k].req, "type", json_object_new_string("job_resume"));
		json_object_object_add(r.c[k].req, "node", json_object_new_string(like->c[k].node));
		json_object_object_add(r.c[k].req, "job", json_object_new_int64(job));
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		int k;

		ctld_fan_out(r.c, r.n, ctl->rpc_timeout_ms);
		if ((k = step_failed(&r)) < 0)
			break;
		snprintf(bad, len, "node %s: %s", r.c[k].node, r.c[k].err.msg);
		log_warn("job %lld: resume on %s", (long long)job, bad);
		/* Those that answered are asked again: job_resume is idempotent. */
		for (k = 0; k < r.n; k++) {
			json_object_put(r.c[k].reply);
			r.c[k].reply = NULL;
		}
		if (attempt < 2)
			sleep(1);
		else
			break;
		bad[0] = 0;
	}
	step_free(&r);
}

/* The checkpoint folder, opened without following a link at its end, and
 * root's: -1 when this machine does not see it (the controller need not
 * run on a node; scheduler/README.md says what then). */
static int ckpt_dir_open(struct ctld *ctl)
{
	const char *dir = cluster_ckpt_dir(&ctl->cl);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 077)) {
		log_warn("checkpoint folder %s is not root's and closed to others (mode 0700): not touched", dir);
		close(fd);
		return -1;
	}
	return fd;
}

/* Removes <dir>/<name> where this machine sees it; what the nodes left of a
 * failed save they removed themselves. */
static void ckpt_files_remove(struct ctld *ctl, const char *name)
{
	char path[CLUSTER_SPOOL_MAX + 80];
	struct verr e;
	int fd = ckpt_dir_open(ctl);

	if (fd < 0 || !ckpt_name_ok(name)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	snprintf(path, sizeof(path), "%s/%s", cluster_ckpt_dir(&ctl->cl), name);
	if (rm_rf(path, &e) < 0)
		log_warn("checkpoint %s: %s", name, e.msg);
}

/* ckpt.json into <dir>/<name>/, written last (the nodes' parts are in). */
static void ckpt_json_write(struct ctld *ctl, const char *name, const char *text)
{
	int dfd = ckpt_dir_open(ctl), cfd = -1, fd = -1;
	size_t len = strlen(text);

	if (dfd < 0)
		return;
	if ((cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (fd = openat(cfd, "ckpt.json.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0 ||
	    write(fd, text, len) != (ssize_t)len || fsync(fd) < 0 ||
	    renameat(cfd, "ckpt.json.tmp", cfd, "ckpt.json") < 0)
		log_warn("checkpoint %s: cannot write its ckpt.json: %s (the controller's store keeps the record)",
			 name, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (cfd >= 0)
		close(cfd);
	close(dfd);
}

/* The record (ckpt.json): what a restart needs.  Holds ctl->mu. */
static struct json_object *record_new(struct ctld *ctl, const struct cjob *j, const char *name, const struct step *s)
{
	struct json_object *o = json_object_new_object(), *parts = json_object_new_array(), *spec;
	char a[20], sub[32];

	json_object_object_add(o, "name", json_object_new_string(name));
	json_object_object_add(o, "job", json_object_new_int64(j->id));
	json_object_object_add(o, "uid", json_object_new_int64(j->uid));
	spec = json_tokener_parse(j->spec_json ? j->spec_json : "{}");
	json_object_object_add(o, "spec", spec ? spec : json_object_new_object());
	json_object_object_add(o, "image", json_object_new_string(j->image));
	json_object_object_add(o, "image_id", json_object_new_string(j->image_id));
	json_object_object_add(o, "key", json_object_new_string(j->key_hex));
	snprintf(sub, sizeof(sub), "%s/%d", ipv4_format(j->subnet.addr, a, sizeof(a)), j->subnet.prefix);
	json_object_object_add(o, "subnet", json_object_new_string(sub));
	json_object_object_add(o, "guest_port", json_object_new_int64(ctl->cl.guest_port));
	json_object_object_add(o, "guests", json_object_new_int(j->nguests));
	json_object_object_add(o, "ranks", json_object_new_int(j->ranks));
	json_object_object_add(o, "vcpus", json_object_new_int(j->vcpus));
	json_object_object_add(o, "mem", json_object_new_int64((int64_t)j->mem));
	json_object_object_add(o, "vmshm", json_object_new_boolean(ctld_job_vmshm(j)));
	/* Informative, as vmshm: a restart takes both from "spec". */
	json_object_object_add(o, "single_copy", json_object_new_boolean(j->spec.single_copy));
	json_object_object_add(o, "shared", json_object_new_boolean(ctl->cl.ckpt.shared));
	for (int k = 0; k < s->n; k++) {
		struct json_object *p = json_object_new_object(), *g = json_object_new_array();

		for (int i = 0; i < j->nalloc; i++)
			if (j->alloc[i].node == s->node[k])
				json_object_array_add(g, json_object_new_int(i));
		json_object_object_add(p, "node", json_object_new_string(s->c[k].node));
		json_object_object_add(p, "guests", g);
		json_object_array_add(parts, p);
	}
	json_object_object_add(o, "parts", parts);
	json_object_object_add(o, "created", json_object_new_int64(ctld_wall_s()));
	return o;
}

/* What each node's `checkpointed` reply says it saved, into the record;
 * the sum.  A reply without a sane size counts 0 (the files are there;
 * their part file says their sizes). */
static int64_t record_sizes(struct json_object *rec, const struct step *s)
{
	struct json_object *parts = json_object_object_get(rec, "parts");
	int64_t total = 0;

	for (int k = 0; k < s->n; k++) {
		struct json_object *v, *p = json_object_array_get_idx(parts, (size_t)k);
		int64_t b = 0;

		if (json_object_object_get_ex(s->c[k].reply, "bytes", &v) && json_object_is_type(v, json_type_int) &&
		    json_object_get_int64(v) >= 0)
			b = json_object_get_int64(v);
		if (p)
			json_object_object_add(p, "bytes", json_object_new_int64(b));
		total += b;
	}
	json_object_object_add(rec, "bytes", json_object_new_int64(total));
	return total;
}

static void row_update(struct ctld *ctl, struct ckpt_row *row)
{
	struct verr e;

	if (store_ckpt_update(ctl->st, row, &e) < 0)
		log_err("checkpoint %s: %s", row->name, e.msg);
}

/* Ends the request: the job free for another checkpoint.  Takes ctl->mu. */
static void job_unbusy(struct ctld *ctl, int64_t id)
{
	struct cjob *j;

	pthread_mutex_lock(&ctl->mu);
	if ((j = ctld_job_find(ctl, id)))
		j->ckpt_busy = false;
	pthread_mutex_unlock(&ctl->mu);
}

/* A failure after the pause: every node resumes, the partial checkpoint
 * goes, and the user hears which node and why. */
static struct json_object *abandon(struct ctld *ctl, struct ckpt_row *row, const struct step *s, const char *what,
				   const struct ctld_call *c)
{
	char bad[400];
	struct verr e;

	log_warn("job %lld: checkpoint %s: %s on node %s: %s; resuming the job", (long long)row->job, row->name, what,
		 c->node, c->err.msg);
	resume_all(ctl, s, row->job, bad, sizeof(bad));
	ckpt_files_remove(ctl, row->name);
	pthread_mutex_lock(&ctl->mu);
	if (store_ckpt_delete(ctl->st, row->name, &e) < 0)
		log_err("checkpoint %s: %s", row->name, e.msg);
	pthread_mutex_unlock(&ctl->mu);
	job_unbusy(ctl, row->job);
	return ctld_error("failed", "job %lld: checkpoint failed: %s on node %s: %s; the job runs on%s%s",
			  (long long)row->job, what, c->node, c->err.msg, bad[0] ? ", but resuming failed on " : "", bad);
}

static struct json_object *do_checkpoint(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct ckpt_row row = { 0 };
	struct step check = { 0 }, pause = { 0 }, save = { 0 };
	struct json_object *r = NULL, *rec = NULL;
	struct cjob *j;
	struct verr e;
	bool owned;
	int k;
	uint64_t t0;

	pthread_mutex_lock(&ctl->mu);
	if (!(j = ctld_user_job(ctl, m->id, uid, &owned, &r)))
		goto unlock;
	if (owned || j->state != JOB_RUNNING) {
		r = ctld_error("not_running", "job %lld is %s: only a running job can be checkpointed", (long long)m->id,
			       store_job_state_names[j->state]);
		if (owned)
			ctld_job_free(j);
		goto unlock;
	}
	if (j->ckpt_busy) {
		r = ctld_error("busy", "job %lld is being checkpointed already: one checkpoint of a job at a time",
			       (long long)m->id);
		goto unlock;
	}
	row.job = j->id;
	row.uid = j->uid;
	row.stop = m->stop;
	row.state = CKPT_SAVING;
	row.created = ctld_wall_s();
	/* 1. The record, before any node is asked anything. */
	if (store_ckpt_add(ctl->st, &row, &e) < 0) {
		r = ctld_error("internal", "cannot record the checkpoint: %s", e.msg);
		goto unlock;
	}
	if (step_make(ctl, j, "job_checkpoint", &check) < 0 || step_make(ctl, j, "job_pause", &pause) < 0 ||
	    step_make(ctl, j, "job_checkpoint", &save) < 0) {
		log_err("out of memory");
		_exit(1);
	}
	rec = record_new(ctl, j, row.name, &check);
	j->ckpt_busy = true;
	pthread_mutex_unlock(&ctl->mu);
	for (k = 0; k < check.n; k++) {
		json_object_object_add(check.c[k].req, "ckpt", json_object_new_string(row.name));
		json_object_object_add(check.c[k].req, "check", json_object_new_boolean(true));
		json_object_object_add(save.c[k].req, "ckpt", json_object_new_string(row.name));
		json_object_object_add(save.c[k].req, "check", json_object_new_boolean(false));
		/* Sessions are closed only once every node said it can save,
		 * at the pause: a refusal leaves them open. */
		if (m->close_sessions) {
			json_object_object_add(check.c[k].req, "close_sessions", json_object_new_boolean(true));
			json_object_object_add(pause.c[k].req, "close_sessions", json_object_new_boolean(true));
		}
	}

	/* 2. Can every node save its part?  Nothing has changed yet. */
	ctld_fan_out(check.c, check.n, ctl->rpc_timeout_ms);
	pthread_mutex_lock(&ctl->mu);
	k = step_failed(&check);
	j = ctld_job_find(ctl, row.job);
	if (k >= 0 || !j || j->state != JOB_RUNNING) {
		if (k >= 0)
			r = ctld_error("refused", "job %lld cannot be checkpointed: node %s: %s (nothing was changed)",
				       (long long)row.job, check.c[k].node, check.c[k].err.msg);
		else
			r = ctld_error("not_running", "job %lld ended meanwhile", (long long)row.job);
		if (store_ckpt_delete(ctl->st, row.name, &e) < 0)
			log_err("checkpoint %s: %s", row.name, e.msg);
		if (j)
			j->ckpt_busy = false;
		goto unlock;
	}
	pthread_mutex_unlock(&ctl->mu);

	/* 3. Every node pauses; only then does any save. */
	t0 = now_ns();
	ctld_fan_out(pause.c, pause.n, ctl->rpc_timeout_ms);
	if ((k = step_failed(&pause)) >= 0) {
		r = abandon(ctl, &row, &pause, "pausing", &pause.c[k]);
		goto out;
	}
	log_info("job %lld: paused on %d node%s for checkpoint %s", (long long)row.job, pause.n, pause.n == 1 ? "" : "s",
		 row.name);
	ctld_fan_out(save.c, save.n, SAVE_TIMEOUT_MS);
	if ((k = step_failed(&save)) >= 0) {
		r = abandon(ctl, &row, &pause, "saving", &save.c[k]);
		goto out;
	}
	row.bytes = record_sizes(rec, &save);
	row.record = strdup(json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN));
	if (!row.record) {
		log_err("out of memory");
		_exit(1);
	}
	ckpt_json_write(ctl, row.name, row.record);
	row.state = CKPT_SAVED;
	pthread_mutex_lock(&ctl->mu);
	row_update(ctl, &row);
	pthread_mutex_unlock(&ctl->mu);

	/* 4. On, or stopped. */
	if (row.stop) {
		pthread_mutex_lock(&ctl->mu);
		row.standstill_ms = (int64_t)((now_ns() - t0) / 1000000);
		if ((j = ctld_job_find(ctl, row.job)) && j->state == JOB_RUNNING)
			ctld_job_end(ctl, j, JOB_CHECKPOINTED, CKPT_EXIT_STATUS, "checkpointed to %s and stopped", row.name);
		pthread_mutex_unlock(&ctl->mu);
	} else {
		char bad[400];

		resume_all(ctl, &pause, row.job, bad, sizeof(bad));
		row.standstill_ms = (int64_t)((now_ns() - t0) / 1000000);
		if (bad[0])
			log_err("job %lld: checkpoint %s saved, but resuming failed on %s", (long long)row.job, row.name, bad);
	}
	row.state = CKPT_DONE;
	pthread_mutex_lock(&ctl->mu);
	row_update(ctl, &row);
	if ((j = ctld_job_find(ctl, row.job)))
		j->ckpt_busy = false;
	pthread_mutex_unlock(&ctl->mu);
	log_info("job %lld: checkpoint %s: %lld bytes, stood still %lld ms%s", (long long)row.job, row.name,
		 (long long)row.bytes, (long long)row.standstill_ms, row.stop ? ", stopped" : "");
	r = ctld_reply("checkpointed");
	json_object_object_add(r, "name", json_object_new_string(row.name));
	json_object_object_add(r, "id", json_object_new_int64(row.job));
	json_object_object_add(r, "bytes", json_object_new_int64(row.bytes));
	json_object_object_add(r, "standstill_ms", json_object_new_int64(row.standstill_ms));
	json_object_object_add(r, "stopped", json_object_new_boolean(row.stop));
	goto out;
unlock:
	pthread_mutex_unlock(&ctl->mu);
out:
	step_free(&check);
	step_free(&pause);
	step_free(&save);
	json_object_put(rec);
	free(row.record);
	return r;
}

/* The nodes of a record's parts, comma-separated, and into out each
 * part's node and the bytes it reported (an admin's space per node). */
static void record_nodes(const char *record, char *buf, size_t len, struct json_object *out)
{
	struct json_object *rec = json_tokener_parse(record), *parts = rec ? json_object_object_get(rec, "parts") : NULL;
	size_t at = 0;

	buf[0] = 0;
	for (size_t k = 0; parts && json_object_is_type(parts, json_type_array) && k < json_object_array_length(parts);
	     k++) {
		struct json_object *p = json_object_array_get_idx(parts, k), *o = json_object_new_object();
		const char *n = json_object_get_string(json_object_object_get(p, "node"));
		int64_t b = json_object_get_int64(json_object_object_get(p, "bytes"));

		if (at + 1 < len)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", k ? "," : "", n ? n : "?");
		json_object_object_add(o, "node", json_object_new_string(n ? n : "?"));
		json_object_object_add(o, "bytes", json_object_new_int64(b > 0 ? b : 0));
		json_object_array_add(out, o);
	}
	json_object_put(rec);
}

static const char *const ckpt_state_names[] = { "saving", "saved", "done" };

static struct json_object *do_list(struct ctld *ctl, uid_t uid)
{
	struct json_object *r, *a;
	struct ckpt_row *v;
	struct verr e;
	size_t n;

	pthread_mutex_lock(&ctl->mu);
	if (store_ckpt_list(ctl->st, uid ? (int64_t)uid : -1, &v, &n, &e) < 0) {
		pthread_mutex_unlock(&ctl->mu);
		return ctld_error("internal", "%s", e.msg);
	}
	pthread_mutex_unlock(&ctl->mu);
	r = ctld_reply("checkpoints");
	a = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object(), *parts = json_object_new_array();
		char nodes[600];

		record_nodes(v[i].record, nodes, sizeof(nodes), parts);
		json_object_object_add(o, "name", json_object_new_string(v[i].name));
		json_object_object_add(o, "job", json_object_new_int64(v[i].job));
		json_object_object_add(o, "uid", json_object_new_int64(v[i].uid));
		json_object_object_add(o, "state", json_object_new_string(ckpt_state_names[v[i].state]));
		json_object_object_add(o, "bytes", json_object_new_int64(v[i].bytes));
		json_object_object_add(o, "created", json_object_new_int64(v[i].created));
		json_object_object_add(o, "standstill_ms", json_object_new_int64(v[i].standstill_ms));
		json_object_object_add(o, "stopped", json_object_new_boolean(v[i].stop));
		json_object_object_add(o, "nodes", json_object_new_string(nodes));
		json_object_object_add(o, "parts", parts);
		if (v[i].damaged[0])
			json_object_object_add(o, "damaged", json_object_new_string(v[i].damaged));
		json_object_array_add(a, o);
	}
	store_ckpt_rows_free(v, n);
	json_object_object_add(r, "checkpoints", a);
	return r;
}

void ctld_ckpt_mark_damaged(struct ctld *ctl, const char *name, const char *node, const char *why)
{
	char text[512];
	struct verr e;

	snprintf(text, sizeof(text), "node %s: %s", node, why);
	if (store_ckpt_set_damaged(ctl->st, name, text, &e) < 0)
		log_warn("checkpoint %s: %s", name, e.msg);
}

static struct json_object *do_rm(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct ckpt_row row;
	struct json_object *r;
	struct verr e;
	bool seen;
	int fd;

	pthread_mutex_lock(&ctl->mu);
	if (store_ckpt_get(ctl->st, m->ckpt, &row, &e) < 0) {
		pthread_mutex_unlock(&ctl->mu);
		return ctld_error(strstr(e.msg, "no checkpoint") == e.msg ? "not_found" : "internal", "%s", e.msg);
	}
	if (uid != 0 && uid != row.uid) {
		r = ctld_error("denied", "checkpoint %s: permission denied (it belongs to uid %u; only its owner and root may "
			       "remove it)", row.name, (unsigned)row.uid);
	} else if (row.state != CKPT_DONE) {
		r = ctld_error("busy", "checkpoint %s is being made: remove it once `vhpc checkpoint` has answered", row.name);
	} else if (store_ckpt_delete(ctl->st, row.name, &e) < 0) {
		r = ctld_error("internal", "%s", e.msg);
	} else {
		r = NULL;
	}
	pthread_mutex_unlock(&ctl->mu);
	free(row.record);
	if (r)
		return r;
	/* Record first, then files: a crash between leaves files no record
	 * names, never a record without its files. */
	fd = ckpt_dir_open(ctl);
	seen = fd >= 0;
	if (fd >= 0)
		close(fd);
	ckpt_files_remove(ctl, m->ckpt);
	log_info("checkpoint %s removed by uid %u", m->ckpt, (unsigned)uid);
	r = ctld_reply("removed");
	json_object_object_add(r, "name", json_object_new_string(m->ckpt));
	/* Where the controller does not see the folder, the admin removes it. */
	json_object_object_add(r, "files_removed", json_object_new_boolean(seen));
	json_object_object_add(r, "dir", json_object_new_string(cluster_ckpt_dir(&ctl->cl)));
	return r;
}

/* ---------------------------------------------------------- restart */

void ctld_ckpt_plan_free(struct ctld_ckpt_plan *p)
{
	for (int k = 0; k < p->nparts; k++)
		free(p->parts[k].guests);
	free(p->parts);
	memset(p, 0, sizeof(*p));
}

static int plan_from(struct json_object *rec, int nguests, struct ctld_ckpt_plan *pl, struct verr *err)
{
	struct json_object *v, *parts;
	const char *s;
	bool *seen;
	int total = 0;

	memset(pl, 0, sizeof(*pl));
	if (!json_object_object_get_ex(rec, "subnet", &v) || !(s = json_object_get_string(v)) ||
	    ipv4net_parse(s, false, &pl->subnet) < 0)
		return verr_set(err, "its record has no job subnet");
	if (!json_object_object_get_ex(rec, "key", &v) || !(s = json_object_get_string(v)) ||
	    strlen(s) != 2 * CHAN_KEY_LEN || strspn(s, "0123456789abcdef") != 2 * CHAN_KEY_LEN)
		return verr_set(err, "its record has no job key");
	snprintf(pl->key_hex, sizeof(pl->key_hex), "%s", s);
	pl->guest_port = json_object_get_int64(json_object_object_get(rec, "guest_port"));
	pl->vcpus = json_object_get_int(json_object_object_get(rec, "vcpus"));
	pl->shared = json_object_get_boolean(json_object_object_get(rec, "shared"));
	if (!json_object_object_get_ex(rec, "parts", &parts) || !json_object_is_type(parts, json_type_array) ||
	    !json_object_array_length(parts) || (int)json_object_array_length(parts) > nguests || pl->vcpus < 1)
		return verr_set(err, "its record has no parts or vCPUs");
	if (!(seen = calloc((size_t)nguests, sizeof(bool))) ||
	    !(pl->parts = calloc(json_object_array_length(parts), sizeof(*pl->parts)))) {
		free(seen);
		return verr_set(err, "out of memory");
	}
	pl->nparts = (int)json_object_array_length(parts);
	for (int k = 0; k < pl->nparts; k++) {
		struct json_object *p = json_object_array_get_idx(parts, (size_t)k), *g = json_object_object_get(p, "guests");
		struct ctld_ckpt_part *cp = &pl->parts[k];

		snprintf(cp->node, sizeof(cp->node), "%s", json_object_get_string(json_object_object_get(p, "node")) ?: "");
		if (!g || !json_object_is_type(g, json_type_array) || !json_object_array_length(g) ||
		    !(cp->guests = calloc(json_object_array_length(g), sizeof(int))))
			break;
		for (size_t i = 0; i < json_object_array_length(g); i++) {
			int gi = json_object_get_int(json_object_array_get_idx(g, i));

			if (gi < 0 || gi >= nguests || seen[gi])
				break;
			seen[gi] = true;
			cp->guests[cp->nguests++] = gi;
			total++;
		}
	}
	free(seen);
	if (total != nguests) {
		ctld_ckpt_plan_free(pl);
		return verr_set(err, "its record's parts do not hold each of its %d guests once", nguests);
	}
	return 0;
}

/* The guests' agents (guestd) listen on the port they were started with,
 * and that is inside the snapshot; the nodes reach every guest of every
 * job on the cluster file's guest_port.  Restored under another port, no
 * one could launch, exec into or stop the guests cleanly: refused, saying
 * how to get it back. */
static int port_check(struct ctld *ctl, const char *name, long long port, struct verr *err)
{
	if (port == ctl->cl.guest_port)
		return 0;
	return verr_set(err, "checkpoint %s: its guests' agents listen on port %lld (inside the snapshot), and the "
			"cluster's job_network.guest_port is now %lld: set it back to %lld to restart this checkpoint",
			name, port, (long long)ctl->cl.guest_port, port);
}

int ctld_ckpt_plan(struct ctld *ctl, const char *name, int nguests, struct ctld_ckpt_plan *out, struct verr *err)
{
	struct ckpt_row row;
	struct json_object *rec;
	int rc;

	if (store_ckpt_get(ctl->st, name, &row, err) < 0)
		return -1;
	rec = row.state == CKPT_DONE ? json_tokener_parse(row.record) : NULL;
	free(row.record);
	if (!rec)
		return verr_set(err, "checkpoint %s is not whole (it was being made)", name);
	rc = plan_from(rec, nguests, out, err);
	json_object_put(rec);
	if (rc < 0)
		return verr_wrap(err, "checkpoint %s", name);
	if (port_check(ctl, name, out->guest_port, err) < 0) {
		ctld_ckpt_plan_free(out);
		return -1;
	}
	return 0;
}

int ctld_ckpt_parts(struct ctld *ctl, struct cjob *j, struct sched_parts *out, struct verr *err)
{
	struct ctld_ckpt_plan pl;

	memset(out, 0, sizeof(*out));
	if (ctld_ckpt_plan(ctl, j->restart, j->nguests, &pl, err) < 0)
		return -1;
	/* The guests' cores as they were saved. */
	j->vcpus = pl.vcpus;
	out->anywhere = pl.shared;
	if (!(out->part = calloc((size_t)pl.nparts, sizeof(*out->part)))) {
		ctld_ckpt_plan_free(&pl);
		return verr_set(err, "out of memory");
	}
	out->nparts = pl.nparts;
	for (int k = 0; k < pl.nparts; k++) {
		const struct cnode *n = ctld_node_find(ctl, pl.parts[k].node);

		out->part[k].home = n ? ctld_node_index(ctl, n) : -1;
		out->part[k].nguests = pl.parts[k].nguests;
		/* The plan's array changes hands. */
		out->part[k].guests = pl.parts[k].guests;
		pl.parts[k].guests = NULL;
	}
	ctld_ckpt_plan_free(&pl);
	return 0;
}

void ctld_ckpt_parts_free(struct sched_parts *p)
{
	for (int k = 0; k < p->nparts; k++)
		free(p->part[k].guests);
	free(p->part);
	memset(p, 0, sizeof(*p));
}

void ctld_ckpt_parts_why(struct ctld *ctl, const struct cjob *j, const struct sched_parts *p, char *why, size_t len)
{
	size_t at;

	if (p->anywhere) {
		snprintf(why, len, "waiting: no up, undrained nodes can take checkpoint %s's %d part%s, each on a node "
			 "of its own", j->restart, p->nparts, p->nparts == 1 ? "" : "s");
		return;
	}
	at = (size_t)snprintf(why, len, "waiting: the cluster's checkpoints are not shared, so checkpoint %s's parts "
			      "go back to the nodes that saved them, and one is down, drained or cannot take them (",
			      j->restart);
	for (int k = 0; k < p->nparts && at < len; k++)
		at += (size_t)snprintf(why + at, len - at, "%s%s", k ? ", " : "",
				       p->part[k].home >= 0 ? ctl->nodes[p->part[k].home].name : "a node gone");
	if (at < len)
		snprintf(why + at, len - at, ")");
}

/* restart NAME: a new job from the checkpoint, for its owner or root. */
static struct json_object *do_restart(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct ctld_ckpt_plan pl;
	struct json_object *rec = NULL, *spec, *r = NULL, *v;
	struct ckpt_row row = { 0 };
	struct cjob *j = NULL;
	struct verr e;
	const char *text, *image_id;
	long long port;
	int64_t id;

	pthread_mutex_lock(&ctl->mu);
	if (store_ckpt_get(ctl->st, m->ckpt, &row, &e) < 0) {
		r = ctld_error(strstr(e.msg, "no checkpoint") == e.msg ? "not_found" : "internal", "%s", e.msg);
		goto out;
	}
	if (uid != 0 && uid != row.uid) {
		r = ctld_error("denied", "checkpoint %s: permission denied (it belongs to uid %u; only its owner and root may "
			       "restart it)", row.name, (unsigned)row.uid);
		goto out;
	}
	if (row.state != CKPT_DONE || !(rec = json_tokener_parse(row.record)) ||
	    !json_object_object_get_ex(rec, "spec", &spec) || !json_object_is_type(spec, json_type_object)) {
		r = ctld_error("invalid", "checkpoint %s is not whole (it is being made, or its record is damaged)", row.name);
		goto out;
	}
	if (!(j = ctld_job_new())) {
		r = ctld_error("internal", "out of memory");
		goto out;
	}
	if (job_spec_from_json(spec, &j->spec, &e) < 0) {
		r = ctld_error("invalid", "checkpoint %s: its job's spec: %s", row.name, e.msg);
		goto out;
	}
	if (plan_from(rec, (int)j->spec.guests, &pl, &e) < 0) {
		r = ctld_error("invalid", "checkpoint %s: %s", row.name, e.msg);
		goto out;
	}
	port = pl.guest_port;
	ctld_ckpt_plan_free(&pl);
	if (port_check(ctl, row.name, port, &e) < 0) {
		r = ctld_error("invalid", "%s", e.msg);
		goto out;
	}
	/* The content the guests ran: an image replaced since is still the
	 * old id while the store has its manifest. */
	image_id = json_object_object_get_ex(rec, "image_id", &v) ? json_object_get_string(v) : "";
	if (!image_id || !*image_id || !imgstore_is_image(ctl->images, image_id)) {
		r = ctld_error("invalid", "checkpoint %s: its image %.12s is no longer in the cluster's image store: the "
			       "job cannot be restored onto other content", row.name, image_id ? image_id : "?");
		goto out;
	}
	text = json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN);
	if (store_job_add_restart(ctl->st, row.uid, "job", text, ctld_wall_s(), row.name, &id, &e) < 0) {
		r = ctld_error("internal", "cannot store the job: %s", e.msg);
		goto out;
	}
	ctld_spool_forget(ctl, id);
	j->id = id;
	j->uid = row.uid;
	snprintf(j->name, sizeof(j->name), "job");
	snprintf(j->restart, sizeof(j->restart), "%s", row.name);
	j->state = JOB_PENDING;
	j->submitted = ctld_wall_s();
	if (!(j->spec_json = strdup(text))) {
		log_err("out of memory");
		_exit(1);
	}
	ctld_job_resolve(ctl, j);
	snprintf(j->reason, sizeof(j->reason), "queued: restarts from checkpoint %s", row.name);
	if (ctld_job_add(ctl, j) < 0) {
		log_err("out of memory");
		_exit(1);
	}
	log_info("job %lld: restart of checkpoint %s (job %lld) by uid %u", (long long)id, row.name, (long long)row.job,
		 (unsigned)uid);
	j = NULL;
	ctld_kick(ctl);
	r = ctld_reply("submitted");
	json_object_object_add(r, "id", json_object_new_int64(id));
	json_object_object_add(r, "restart", json_object_new_string(row.name));
out:
	pthread_mutex_unlock(&ctl->mu);
	if (j)
		ctld_job_free(j);
	json_object_put(rec);
	free(row.record);
	return r;
}

struct json_object *ctld_ckpt_handle(struct ctld *ctl, const struct cmsg *m, const struct wire_peer *peer)
{
	switch (m->type) {
	case CM_CHECKPOINT:
		return do_checkpoint(ctl, m, peer->uid);
	case CM_CHECKPOINTS:
		return do_list(ctl, peer->uid);
	case CM_CHECKPOINT_RM:
		return do_rm(ctl, m, peer->uid);
	case CM_RESTART:
		return do_restart(ctl, m, peer->uid);
	default:
		return ctld_error("invalid", "unhandled message type");
	}
}

/* --------------------------------------------------------- recovery */

struct recover {
	struct ctld *ctl;
	struct ckpt_row row;
};

/* A checkpoint a dead controller left SAVING or SAVED: its job's guests
 * may be paused.  SAVED with --stop: the checkpoint is whole, the job ends
 * as asked; otherwise every node resumes (idempotent), and a SAVING
 * checkpoint, partial, is removed. */
static void *recover_thread(void *arg)
{
	struct recover *rv = arg;
	struct ctld *ctl = rv->ctl;
	struct ckpt_row *row = &rv->row;
	struct step s = { 0 };
	struct cjob *j;
	struct verr e;
	char bad[400] = "";
	bool resume = false;

	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, row->job);
	if (j && j->state == JOB_RUNNING) {
		if (row->state == CKPT_SAVED && row->stop) {
			ctld_job_end(ctl, j, JOB_CHECKPOINTED, CKPT_EXIT_STATUS, "checkpointed to %s and stopped", row->name);
		} else if (step_make(ctl, j, "job_resume", &s) == 0) {
			resume = true;
			j->ckpt_busy = true;
		}
	}
	pthread_mutex_unlock(&ctl->mu);
	if (resume) {
		resume_all(ctl, &s, row->job, bad, sizeof(bad));
		log_info("job %lld: resumed after checkpoint %s was cut short by a restart%s%s", (long long)row->job,
			 row->name, bad[0] ? "; failed on " : "", bad);
		job_unbusy(ctl, row->job);
	}
	if (row->state == CKPT_SAVING) {
		ckpt_files_remove(ctl, row->name);
		pthread_mutex_lock(&ctl->mu);
		if (store_ckpt_delete(ctl->st, row->name, &e) < 0)
			log_err("checkpoint %s: %s", row->name, e.msg);
		pthread_mutex_unlock(&ctl->mu);
		log_info("checkpoint %s: partial, removed", row->name);
	} else {
		row->state = CKPT_DONE;
		free(row->record);
		row->record = NULL;
		pthread_mutex_lock(&ctl->mu);
		row_update(ctl, row);
		pthread_mutex_unlock(&ctl->mu);
	}
	step_free(&s);
	free(row->record);
	free(rv);
	return NULL;
}

void ctld_ckpt_recover(struct ctld *ctl)
{
	struct ckpt_row *v;
	struct verr e;
	size_t n;

	if (store_ckpt_list(ctl->st, -1, &v, &n, &e) < 0) {
		log_err("checkpoints: %s", e.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct recover *rv;
		pthread_t th;

		if (v[i].state == CKPT_DONE)
			continue;
		if (!(rv = calloc(1, sizeof(*rv)))) {
			log_err("out of memory");
			_exit(1);
		}
		rv->ctl = ctl;
		rv->row = v[i];
		v[i].record = NULL;
		if (pthread_create(&th, NULL, recover_thread, rv) != 0) {
			log_err("cannot start a thread for checkpoint %s", rv->row.name);
			_exit(1);
		}
		pthread_detach(th);
	}
	store_ckpt_rows_free(v, n);
}
