/*
 * vhpc-ctld's answers to validated messages (ctld_msg.c did the checking;
 * ctld_main.c checked that node messages come from root).  Users see and
 * act on their own jobs only; root on all.
 */
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "ctld.h"
#include "scheduler/jobjson.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long finished jobs stay in `vhpc queue` without --all. */
#define RECENT_S 300

struct json_object *ctld_error(const char *code, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	struct json_object *o;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	o = wire_error("%s", buf);
	json_object_object_add(o, "code", json_object_new_string(code));
	return o;
}

struct json_object *ctld_reply(const char *type)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	return o;
}

/* The job a user asks about, or NULL and an error reply.  A job that has
 * left memory comes from the store: *owned, for the caller to ctld_job_free. */
static struct cjob *user_job(struct ctld *ctl, int64_t id, uid_t uid, bool *owned, struct json_object **err)
{
	struct cjob *j = ctld_job_find(ctl, id);
	struct job_row r;
	struct verr e;

	*owned = false;
	if (!j) {
		int rc = store_job_get(ctl->st, id, &r, &e);

		if (rc < 0) {
			*err = strstr(e.msg, "no job") == e.msg ? ctld_error("not_found", "no job %lld", (long long)id)
								: ctld_error("internal", "%s", e.msg);
			return NULL;
		}
		j = ctld_job_from_row(ctl, &r);
		store_job_row_free(&r);
		if (!j) {
			*err = ctld_error("internal", "out of memory");
			return NULL;
		}
		*owned = true;
	}
	if (!ctld_job_visible(j, uid)) {
		*err = ctld_error("denied", "job %lld: permission denied (it belongs to uid %u; only its owner and root may see or cancel it)",
				 (long long)id, (unsigned)j->uid);
		if (*owned)
			ctld_job_free(j);
		return NULL;
	}
	return j;
}

struct cjob *ctld_user_job(struct ctld *ctl, int64_t id, uid_t uid, bool *owned, struct json_object **err)
{
	return user_job(ctl, id, uid, owned, err);
}

/* Jobs of uid that have not ended. */
static long long user_jobs(struct ctld *ctl, uid_t uid)
{
	long long n = 0;

	for (int i = 0; i < ctl->njobs; i++)
		n += ctl->jobs[i]->uid == uid && !store_job_state_final(ctl->jobs[i]->state);
	return n;
}

/* Whether the controller takes a new job from uid now: NULL, or the
 * refusal. */
static struct json_object *refuse_submit(struct ctld *ctl, uid_t uid)
{
	char why[900];
	long long n;

	/* root: the admin, and the local service's `vhpc run` */
	if (uid != 0 && (n = user_jobs(ctl, uid)) >= ctl->cl.ctld_max_jobs_per_user)
		return ctld_error("full", "uid %u has %lld jobs waiting or running, the cluster's limit per user "
				  "(ctld.max_jobs_per_user in the cluster file): wait for some to end, or cancel some",
				  (unsigned)uid, n);
	if (ctld_room_for_jobs(ctl, why, sizeof(why)) < 0)
		return ctld_error("full", "%s", why);
	return NULL;
}

/* Whether the job can ever run here: NULL, or the refusal.  Its image's
 * name goes to the id it names now, into spec. */
static struct json_object *check_submit(struct ctld *ctl, const struct cmsg *m, uid_t uid, struct json_object *spec)
{
	struct json_object *r;
	struct job_paths *jp;
	struct verr e;
	char a[20];
	int rc;

	if ((r = refuse_submit(ctl, uid)))
		return r;
	if ((1ull << (32 - ctld_sched_job_prefix(ctl, (int)m->spec.guests))) < (uint64_t)m->spec.guests + 3)
		return ctld_error("invalid", "%lld guests need more addresses than the job network pool %s/%d holds",
				  m->spec.guests, ipv4_format(ctl->cl.job_pool.addr, a, sizeof(a)), ctl->cl.job_pool.prefix);
	/* Its paths are planned again when it starts; refused here, the user
	 * hears why at once. */
	if (!(jp = malloc(sizeof(*jp))))
		return ctld_error("invalid", "out of memory");
	rc = job_paths_plan(&ctl->cl, &m->spec, uid, jp, &e);
	free(jp);
	if (rc < 0)
		return ctld_error("invalid", "%s", e.msg);
	/* The content the job will run, whatever is pushed after. */
	if (ctld_image_resolve(ctl, spec, &m->spec, &e) < 0)
		return ctld_error("invalid", "%s", e.msg);
	return NULL;
}

/* The job into the store, durable before the reply: *id is its row's.
 * NULL, or the error to reply. */
static struct json_object *store_submit(struct ctld *ctl, const struct cmsg *m, uid_t uid,
					struct json_object *spec, int64_t *id)
{
	const char *text = json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN);
	char why[900];
	struct verr e;
	int rc;

	rc = store_job_add(ctl->st, uid, m->spec.name ? m->spec.name : "job", text, ctld_wall_s(), id, &e);
	if (rc == 0)
		return NULL;
	log_err("submit: %s", e.msg);
	if (rc != STORE_FULL)
		return ctld_error("internal", "cannot store the job: %s", e.msg);
	ctld_room_release(ctl);
	return ctld_error("full", "%s", ctld_room_for_jobs(ctl, why, sizeof(why)) < 0 ? why :
			  "the state folder's filesystem is full: new jobs are refused until there is room");
}

static struct json_object *do_submit(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct json_object *spec = job_spec_to_json(&m->spec), *r;
	struct cjob *j = ctld_job_new();
	struct verr e;
	int64_t id;

	if (!j)
		r = ctld_error("internal", "out of memory");
	else if (!(r = check_submit(ctl, m, uid, spec)))
		r = store_submit(ctl, m, uid, spec, &id);
	if (r) {
		json_object_put(spec);
		free(j);
		return r;
	}
	/* The id is new: a file of that name is an earlier database's. */
	ctld_spool_forget(ctl, id);
	j->id = id;
	j->uid = uid;
	snprintf(j->name, sizeof(j->name), "job");
	j->state = JOB_PENDING;
	j->submitted = ctld_wall_s();
	j->spec_json = strdup(json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN));
	if (job_spec_from_json(spec, &j->spec, &e) < 0) {
		/* cannot happen: it was valid a moment ago */
		log_err("submit: %s", e.msg);
		_exit(1);
	}
	json_object_put(spec);
	ctld_job_resolve(ctl, j);
	snprintf(j->reason, sizeof(j->reason), "queued");
	if (ctld_job_add(ctl, j) < 0) {
		log_err("out of memory");
		_exit(1);
	}
	log_info("job %lld: submitted by uid %u: %d guest%s, %d ranks, %s vCPUs per guest", (long long)id,
		 (unsigned)uid, j->nguests, j->nguests == 1 ? "" : "s", j->ranks,
		 j->spec.vcpus ? "given" : "scheduler-chosen");
	ctld_kick(ctl);
	r = ctld_reply("submitted");
	json_object_object_add(r, "id", json_object_new_int64(id));
	return r;
}

/* `queue --all` lists at most this many ended jobs that left memory. */
#define QUEUE_FROM_STORE 1000

static struct json_object *do_queue(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct json_object *r = ctld_reply("jobs"), *a = json_object_new_array();
	int64_t now = ctld_wall_s();
	struct job_row *old = NULL;
	size_t nold = 0, k = 0;
	struct verr e;

	/* Ended jobs that left memory: the newest, from the store. */
	if (m->all &&
	    store_jobs_ended(ctl->st, uid ? (int64_t)uid : -1, INT64_MAX, QUEUE_FROM_STORE, &old, &nold, &e) < 0) {
		log_warn("queue: %s", e.msg);
		nold = 0;
	}
	for (int i = 0; i <= ctl->njobs; i++) {
		struct cjob *j = i < ctl->njobs ? ctl->jobs[i] : NULL;

		/* both lists are in id order */
		for (; k < nold && (!j || old[k].id < j->id); k++) {
			struct cjob *o;

			if (ctld_job_find(ctl, old[k].id) || !(o = ctld_job_from_row(ctl, &old[k])))
				continue;
			json_object_array_add(a, ctld_job_json(ctl, o));
			ctld_job_free(o);
		}
		if (!j || !ctld_job_visible(j, uid))
			continue;
		if (store_job_state_final(j->state) && !m->all && now - j->ended > RECENT_S)
			continue;
		json_object_array_add(a, ctld_job_json(ctl, j));
	}
	store_job_rows_free(old, nold);
	json_object_object_add(r, "jobs", a);
	return r;
}

static struct json_object *job_reply(struct ctld *ctl, const struct cjob *j)
{
	struct json_object *r = ctld_reply("job");

	json_object_object_add(r, "job", ctld_job_json(ctl, j));
	return r;
}

static struct json_object *do_wait(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct json_object *err, *r;
	bool owned;
	struct cjob *j = user_job(ctl, m->id, uid, &owned, &err);
	struct timespec dl;

	if (!j)
		return err;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += m->timeout_ms / 1000;
	dl.tv_nsec += (long)(m->timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	/* Looked up again after each wait: it may have left memory meanwhile. */
	while (!owned && !store_job_state_final(j->state) && !ctl->stop) {
		bool timed_out = pthread_cond_timedwait(&ctl->changed, &ctl->mu, &dl) == ETIMEDOUT;

		if (!(j = user_job(ctl, m->id, uid, &owned, &err)))
			return err;
		if (timed_out)
			break;
	}
	r = job_reply(ctl, j);
	if (owned)
		ctld_job_free(j);
	return r;
}

static struct json_object *do_cancel(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct json_object *err, *r;
	bool owned;
	struct cjob *j = user_job(ctl, m->id, uid, &owned, &err);

	if (!j)
		return err;
	if (store_job_state_final(j->state)) {
		r = ctld_error("ended", "job %lld has already ended (%s)", (long long)j->id, store_job_state_names[j->state]);
		if (owned)
			ctld_job_free(j);
		return r;
	}
	ctld_job_end(ctl, j, JOB_CANCELLED, 143, "cancelled by uid %u", (unsigned)uid);
	r = ctld_reply("cancelled");
	json_object_object_add(r, "id", json_object_new_int64(j->id));
	json_object_object_add(r, "state", json_object_new_string(store_job_state_names[j->state]));
	return r;
}

static struct json_object *do_output(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct json_object *err, *r;
	bool owned;
	struct cjob *j = user_job(ctl, m->id, uid, &owned, &err);
	char *b64;
	uint8_t *buf;
	int64_t want = 0;
	ssize_t n;

	if (!j)
		return err;
	buf = malloc((size_t)m->max);
	b64 = malloc(sodium_base64_ENCODED_LEN((size_t)m->max, sodium_base64_VARIANT_ORIGINAL));
	if (!buf || !b64) {
		free(buf);
		free(b64);
		if (owned)
			ctld_job_free(j);
		return ctld_error("internal", "out of memory");
	}
	if (m->offset < j->out_size)
		want = j->out_size - m->offset < m->max ? j->out_size - m->offset : m->max;
	/* A file shorter than the controller knows (an admin removed it to
	 * make room) ends where it ends. */
	n = want ? ctld_spool_read(ctl, j->id, buf, (size_t)want, m->offset) : 0;
	sodium_bin2base64(b64, sodium_base64_ENCODED_LEN((size_t)n, sodium_base64_VARIANT_ORIGINAL),
			  buf, (size_t)n, sodium_base64_VARIANT_ORIGINAL);
	r = ctld_reply("output");
	json_object_object_add(r, "id", json_object_new_int64(j->id));
	json_object_object_add(r, "offset", json_object_new_int64(m->offset));
	json_object_object_add(r, "data", json_object_new_string(b64));
	json_object_object_add(r, "size", json_object_new_int64(j->out_size));
	json_object_object_add(r, "state", json_object_new_string(store_job_state_names[j->state]));
	json_object_object_add(r, "final", json_object_new_boolean(
		store_job_state_final(j->state) && (m->offset + n >= j->out_size || n < want)));
	free(b64);
	free(buf);
	if (owned)
		ctld_job_free(j);
	return r;
}

static struct json_object *do_nodes(struct ctld *ctl)
{
	struct json_object *r = ctld_reply("nodes"), *a = json_object_new_array();

	for (int i = 0; i < ctl->nnodes; i++)
		json_object_array_add(a, ctld_node_json(ctl, &ctl->nodes[i]));
	json_object_object_add(r, "nodes", a);
	return r;
}

static struct json_object *stop_list(const int64_t *stop, int n)
{
	struct json_object *a = json_object_new_array();

	for (int i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_int64(stop[i]));
	return a;
}

static char *node_info(const struct cmsg *m)
{
	struct json_object *o = json_object_new_object(), *numa = json_object_new_array();
	char a[20], *s;

	json_object_object_add(o, "underlay", json_object_new_string(ipv4_format(m->underlay, a, sizeof(a))));
	for (int k = 0; k < m->nnuma; k++) {
		struct json_object *e = json_object_new_object();

		json_object_object_add(e, "os_index", json_object_new_int(m->numa[k].os_index));
		json_object_object_add(e, "cores", json_object_new_int(m->numa[k].cores));
		json_object_object_add(e, "mem", json_object_new_int64((int64_t)m->numa[k].mem));
		json_object_object_add(e, "hugepages_2m_free", json_object_new_int64((int64_t)m->numa[k].huge2m));
		json_object_array_add(numa, e);
	}
	json_object_object_add(o, "numa", numa);
	json_object_object_add(o, "rdma", m->rdma ? json_object_get(m->rdma) : json_object_new_array());
	if (m->fabric_link[0])
		json_object_object_add(o, "fabric_link", json_object_new_string(m->fabric_link));
	if (m->npci) {
		struct json_object *pa = json_object_new_array();

		for (int i = 0; i < m->npci; i++) {
			struct json_object *e = json_object_new_object();

			json_object_object_add(e, "addr", json_object_new_string(m->pci[i].addr));
			json_object_object_add(e, "class", json_object_new_string(m->pci[i].cls));
			json_object_object_add(e, "numa", json_object_new_int(m->pci[i].numa));
			json_object_array_add(pa, e);
		}
		json_object_object_add(o, "pci", pa);
	}
	json_object_object_add(o, "simulated", json_object_new_boolean(m->simulated));
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

static struct json_object *do_register(struct ctld *ctl, const struct cmsg *m)
{
	struct cnode *n = ctld_node_find(ctl, m->node);
	struct json_object *r;
	struct verr e;
	int64_t *stop;
	int nstop;

	if (!n) {
		if (ctl->nnodes >= CTLD_MAX_NODES)
			return ctld_error("full", "this controller takes at most %d nodes", CTLD_MAX_NODES);
		n = &ctl->nodes[ctl->nnodes++];
		memset(n, 0, sizeof(*n));
		snprintf(n->name, sizeof(n->name), "%s", m->node);
	}
	snprintf(n->addr, sizeof(n->addr), "%s", m->addr);
	n->underlay = m->underlay;
	n->nnuma = m->nnuma;
	memcpy(n->numa, m->numa, sizeof(n->numa));
	n->simulated = m->simulated;
	ctld_fabric_node_take(n, m);
	free(n->info_json);
	n->info_json = node_info(m);
	n->have_info = true;
	ctld_image_cache_update(n, m);
	if (!n->up)
		log_info("node %s registered (%s, %d NUMA node%s)", n->name, n->addr, n->nnuma, n->nnuma == 1 ? "" : "s");
	n->up = true;
	n->last_seen_ms = ctld_mono_ms();
	ctld_node_commit(ctl, n, &e);
	stop = calloc(m->njobs ? m->njobs : 1, sizeof(*stop));
	if (!stop)
		return ctld_error("internal", "out of memory");
	ctld_node_reconcile(ctl, n, m->jobs, m->njobs, stop, &nstop);
	ctld_kick(ctl);
	r = ctld_reply("registered");
	json_object_object_add(r, "heartbeat_ms", json_object_new_int(ctl->hb_interval_ms));
	json_object_object_add(r, "stop", stop_list(stop, nstop));
	free(stop);
	return r;
}

static struct json_object *do_heartbeat(struct ctld *ctl, const struct cmsg *m)
{
	struct cnode *n = ctld_node_find(ctl, m->node);
	struct json_object *r;
	int64_t *stop;
	int nstop;

	if (!n || !n->have_info)
		return ctld_error("unknown_node", "node %s is not registered", m->node);
	n->last_seen_ms = ctld_mono_ms();
	ctld_image_cache_update(n, m);
	if (!n->up) {
		struct verr e;

		n->up = true;
		ctld_node_commit(ctl, n, &e);
		log_info("node %s is back", n->name);
		ctld_kick(ctl);
	}
	stop = calloc(m->njobs ? m->njobs : 1, sizeof(*stop));
	if (!stop)
		return ctld_error("internal", "out of memory");
	ctld_node_reconcile(ctl, n, m->jobs, m->njobs, stop, &nstop);
	r = ctld_reply("heartbeat_ok");
	json_object_object_add(r, "stop", stop_list(stop, nstop));
	free(stop);
	return r;
}

/* The job whose launcher the sending node is, or an error reply. */
static struct cjob *launcher_job(struct ctld *ctl, const struct cmsg *m, struct json_object **err)
{
	struct cjob *j = ctld_job_find(ctl, m->id);
	int l;

	if (!j) {
		*err = ctld_error("not_found", "no job %lld", (long long)m->id);
		return NULL;
	}
	l = ctld_job_launcher(j);
	if (l < 0 || strcmp(ctl->nodes[l].name, m->node)) {
		*err = ctld_error("denied", "job %lld: node %s does not run its guest 0", (long long)m->id, m->node);
		return NULL;
	}
	return j;
}

/* Output of a running job from the node of its guest 0, appended to the
 * spool at the offset the controller has.  Once the output is cut, the
 * node is sent past any end the output can have: it reads nothing more
 * from the guest, and goes on to the job's exit. */
static struct json_object *do_job_output(struct ctld *ctl, const struct cmsg *m)
{
	struct json_object *err, *r;
	struct cjob *j = launcher_job(ctl, m, &err);
	int64_t id, size, skip, end;
	bool cut;

	if (!j)
		return err;
	if (j->state != JOB_RUNNING)
		return ctld_error("ended", "job %lld is %s: no more output", (long long)j->id, store_job_state_names[j->state]);
	id = j->id;
	/* The disk is not written under ctl->mu; appends take turns, and the
	 * job is looked up again after (it may have ended meanwhile). */
	pthread_mutex_unlock(&ctl->mu);
	pthread_mutex_lock(&ctl->spool_mu);
	pthread_mutex_lock(&ctl->mu);
	if (!(j = ctld_job_find(ctl, id))) {
		pthread_mutex_unlock(&ctl->spool_mu);
		return ctld_error("ended", "job %lld has ended: no more output", (long long)id);
	}
	size = j->out_size;
	skip = size - m->offset;
	cut = j->out_cut;
	pthread_mutex_unlock(&ctl->mu);
	end = size;
	if (!cut && m->offset <= size && skip < (int64_t)m->len)
		end = ctld_spool_append(ctl, id, size, m->data + skip, m->len - (size_t)skip, &cut);
	pthread_mutex_lock(&ctl->mu);
	pthread_mutex_unlock(&ctl->spool_mu);
	if ((j = ctld_job_find(ctl, id))) {
		if (end > j->out_size)
			j->out_size = end;
		j->out_cut |= cut;
		pthread_cond_broadcast(&ctl->changed);
	}
	r = ctld_reply("output_ack");
	json_object_object_add(r, "next", json_object_new_int64(cut ? CTLD_OUTPUT_PAST : end));
	return r;
}

/* A node of the job, other than its launcher, not heard from since `since`
 * (monotonic ms), or NULL. */
static const struct cnode *unconfirmed_node(struct ctld *ctl, const struct cjob *j, int64_t since)
{
	int l = ctld_job_launcher(j);

	for (int i = 0; i < ctl->nnodes; i++)
		if (i != l && ctl->nodes[i].up && ctld_job_uses(j, i) && ctl->nodes[i].last_seen_ms <= since)
			return &ctl->nodes[i];
	return NULL;
}

static struct json_object *do_job_exit(struct ctld *ctl, const struct cmsg *m)
{
	struct json_object *err, *r;
	struct cjob *j = launcher_job(ctl, m, &err);
	const struct cnode *quiet = NULL;
	bool accepted = true;

	if (!j)
		return err;
	if (j->state == JOB_RUNNING) {
		/* Cut output: what the node has beyond the spool is dropped. */
		if (!j->out_cut && m->size != j->out_size) {
			accepted = false;
		} else if (m->status != 0 && !m->timed_out &&
			   (quiet = unconfirmed_node(ctl, j, j->exit_held_ms ? j->exit_held_ms
									   : (j->exit_held_ms = ctld_mono_ms())))) {
			/* mpirun fails at once when a node of the job dies, well
			 * before the node misses its heartbeats.  A failed exit is
			 * final only once every other node of the job has been
			 * heard from since; a node that is marked down instead
			 * ends the job NODE_FAIL, which says what happened. */
			accepted = false;
			if (!j->exit_hold_logged) {
				log_info("job %lld: exit status %d held until node %s is heard from", (long long)j->id,
					 m->status, quiet->name);
				j->exit_hold_logged = true;
			}
		} else if (m->lost) {
			ctld_job_end(ctl, j, JOB_FAILED, 125, "its mpirun in guest 0 was lost (its keeper died)");
		} else if (m->timed_out) {
			ctld_job_end(ctl, j, JOB_TIMEOUT, 124, "ran out of its time limit (%lld s)", (long long)j->limit);
		} else {
			ctld_job_end(ctl, j, JOB_COMPLETED, m->status, "%s", "");
		}
	} else if (!store_job_state_final(j->state)) {
		return ctld_error("invalid", "job %lld is %s, not running", (long long)j->id, store_job_state_names[j->state]);
	}
	r = ctld_reply("exit_ack");
	json_object_object_add(r, "accepted", json_object_new_boolean(accepted));
	json_object_object_add(r, "next", json_object_new_int64(j->out_cut ? CTLD_OUTPUT_PAST : j->out_size));
	if (quiet)
		json_object_object_add(r, "hold_ms", json_object_new_int(ctl->hb_interval_ms));
	return r;
}

struct json_object *ctld_handle(struct ctld *ctl, const struct cmsg *m, const struct wire_peer *peer)
{
	struct json_object *r;

	/* The store has its own lock: its disk work holds up no heartbeat. */
	if (m->type >= CM_IMAGE_HAVE && m->type <= CM_IMAGE_RM)
		return ctld_image_handle(ctl, m, peer);
	/* It waits for a node's answer: not under ctl->mu. */
	if (m->type == CM_EXEC)
		return ctld_exec(ctl, m, peer);
	if (m->type == CM_HISTORY)
		return ctld_history_handle(ctl, m, peer->uid);
	/* A checkpoint waits for its nodes: not under ctl->mu. */
	if (m->type >= CM_CHECKPOINT && m->type <= CM_RESTART)
		return ctld_ckpt_handle(ctl, m, peer);
	if (m->type == CM_NODE_DRAIN)
		return ctld_drain_handle(ctl, m);
	pthread_mutex_lock(&ctl->mu);
	switch (m->type) {
	case CM_SUBMIT: r = do_submit(ctl, m, peer->uid); break;
	case CM_QUEUE: r = do_queue(ctl, m, peer->uid); break;
	case CM_JOB: {
		bool owned;
		struct cjob *j = user_job(ctl, m->id, peer->uid, &owned, &r);

		if (j)
			r = job_reply(ctl, j);
		if (j && owned)
			ctld_job_free(j);
		break;
	}
	case CM_WAIT: r = do_wait(ctl, m, peer->uid); break;
	case CM_CANCEL: r = do_cancel(ctl, m, peer->uid); break;
	case CM_OUTPUT: r = do_output(ctl, m, peer->uid); break;
	case CM_NODES: r = do_nodes(ctl); break;
	case CM_REGISTER: r = do_register(ctl, m); break;
	case CM_HEARTBEAT: r = do_heartbeat(ctl, m); break;
	case CM_JOB_OUTPUT: r = do_job_output(ctl, m); break;
	case CM_JOB_EXIT: r = do_job_exit(ctl, m); break;
	default: r = ctld_error("invalid", "unhandled message type"); break;
	}
	pthread_mutex_unlock(&ctl->mu);
	return r;
}
