/*
 * vhpc-ctld's calls to node agents, each in a thread of its own without
 * ctl->mu: starting a job (job_prepare on every node, all or nothing, then
 * job_launch on the node of guest 0) and stopping it (job_stop).  Every
 * call is idempotent on the vhpcd side, so a restarted ctld simply makes
 * them again.
 */
#include "lib/argv.h"
#include "lib/clock.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "ctld.h"
#include "scheduler/launch.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FANOUT_THREADS 32

struct fan {
	struct ctld_call *c;
	int n;
	atomic_int next;
	int timeout_ms;
};

static void call_one(struct ctld_call *c, int timeout_ms)
{
	struct wire_peer peer;
	const char *e;

	c->rc = wire_call(c->addr, c->req, &c->reply, &peer, timeout_ms, &c->err);
	if (c->rc == 0 && peer.uid != 0) {
		verr_set(&c->err, "the reply comes from uid %u, not root: refused", (unsigned)peer.uid);
		c->rc = -1;
	} else if (c->rc == 0 && (e = wire_error_text(c->reply))) {
		verr_set(&c->err, "%s", e);
		c->rc = -1;
	}
}

static void *fan_worker(void *arg)
{
	struct fan *f = arg;
	int i;

	while ((i = atomic_fetch_add(&f->next, 1)) < f->n)
		call_one(&f->c[i], f->timeout_ms);
	return NULL;
}

/* Makes every call, up to FANOUT_THREADS at once. */
static void fan_out(struct ctld_call *c, int n, int timeout_ms)
{
	struct fan f = { .c = c, .n = n, .timeout_ms = timeout_ms };
	pthread_t th[FANOUT_THREADS];
	int nt = n < FANOUT_THREADS ? n : FANOUT_THREADS, started = 0;

	atomic_init(&f.next, 0);
	for (int i = 0; i < nt; i++)
		if (pthread_create(&th[i], NULL, fan_worker, &f) == 0)
			started++;
	if (!started)
		fan_worker(&f);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

static void free_calls(struct ctld_call *c, int n);

void ctld_fan_out(struct ctld_call *c, int n, int timeout_ms)
{
	fan_out(c, n, timeout_ms);
}

void ctld_calls_free(struct ctld_call *c, int n)
{
	free_calls(c, n);
}

static void free_calls(struct ctld_call *c, int n)
{
	for (int i = 0; i < n; i++) {
		json_object_put(c[i].req);
		json_object_put(c[i].reply);
	}
	free(c);
}

/* What a worker thread is given: its job by id, since the job may leave
 * memory while the thread works without ctl->mu. */
struct work {
	struct ctld *ctl;
	int64_t id;
};

static void spawn_thread(struct ctld *ctl, void *(*fn)(void *), struct cjob *j)
{
	pthread_t th;
	pthread_attr_t a;
	struct work *w = malloc(sizeof(*w));

	if (!w) {
		log_err("out of memory");
		_exit(1);
	}
	w->ctl = ctl;
	w->id = j->id;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &a, fn, w) != 0) {
		log_err("cannot start a thread for job %lld", (long long)j->id);
		_exit(1);
	}
	pthread_attr_destroy(&a);
}

int ctld_job_nodes(const struct cjob *j, int *out)
{
	int n = 0;

	for (int i = 0; i < j->nalloc; i++) {
		bool seen = false;

		for (int k = 0; k < n && !seen; k++)
			seen = out[k] == j->alloc[i].node;
		if (!seen)
			out[n++] = j->alloc[i].node;
	}
	return n;
}

bool ctld_job_vmshm(const struct cjob *j)
{
	if (!j->spec.vmshm || j->ranks < 2)
		return false;
	for (int a = 0; a < j->nalloc; a++)
		for (int b = a + 1; b < j->nalloc; b++)
			if (j->alloc[a].node == j->alloc[b].node)
				return true;
	return false;
}

static struct json_object *binds_json(const struct cjob *j)
{
	struct json_object *b = json_object_new_array();

	for (int i = 0; i < j->paths.binds.n; i++) {
		struct json_object *e = json_object_new_object();

		json_object_object_add(e, "src", json_object_new_string(j->paths.binds.v[i].src));
		json_object_object_add(e, "dst", json_object_new_string(j->paths.binds.v[i].dst));
		json_object_object_add(e, "ro", json_object_new_boolean(j->paths.binds.v[i].ro));
		json_object_array_add(b, e);
	}
	return b;
}

/* The cluster's WireGuard underlay, for nodes to encrypt the job's VXLAN. */
static struct json_object *wg_json(struct ctld *ctl)
{
	struct json_object *w = json_object_new_object();
	char a[20], sub[32];

	snprintf(sub, sizeof(sub), "%s/%d", ipv4_format(ctl->cl.wg.pool.addr, a, sizeof(a)), ctl->cl.wg.pool.prefix);
	json_object_object_add(w, "key", json_object_new_string(ctl->cl.wg.key));
	json_object_object_add(w, "pool", json_object_new_string(sub));
	json_object_object_add(w, "port", json_object_new_int64(ctl->cl.wg.port));
	return w;
}

static struct json_object *prepare_msg(struct ctld *ctl, const struct cjob *j, int node, const int *nodes, int nn)
{
	struct json_object *o = json_object_new_object(), *guests = json_object_new_array(),
		*ranks = json_object_new_array(), *peers = json_object_new_array(),
		*where = json_object_new_array();
	const struct cnode *n = &ctl->nodes[node];
	char local[32], a[20], sub[32];
	int *rpg = calloc(j->nguests, sizeof(int));

	ctld_job_local_id(j, n, local, sizeof(local));
	if (rpg)
		launch_split_ranks(j->ranks, j->nguests, rpg);
	json_object_object_add(o, "type", json_object_new_string("job_prepare"));
	json_object_object_add(o, "node", json_object_new_string(n->name));
	json_object_object_add(o, "job", json_object_new_int64(j->id));
	json_object_object_add(o, "local", json_object_new_string(local));
	json_object_object_add(o, "uid", json_object_new_int64(j->uid));
	json_object_object_add(o, "vni", json_object_new_int64(j->vni));
	snprintf(sub, sizeof(sub), "%s/%d", ipv4_format(j->subnet.addr, a, sizeof(a)), j->subnet.prefix);
	json_object_object_add(o, "subnet", json_object_new_string(sub));
	json_object_object_add(o, "guest_port", json_object_new_int64(ctl->cl.guest_port));
	json_object_object_add(o, "image", json_object_new_string(j->image));
	json_object_object_add(o, "image_id", json_object_new_string(j->image_id));
	json_object_object_add(o, "tuning", json_object_new_string(j->tuning));
	json_object_object_add(o, "driver", json_object_new_string(
		vhpc_driver_name(j->spec.driver >= 0 ? j->spec.driver : ctl->cl.default_driver)));
	json_object_object_add(o, "vcpus", json_object_new_int(j->vcpus));
	json_object_object_add(o, "mem", json_object_new_int64((int64_t)j->mem));
	json_object_object_add(o, "oversubscribe", json_object_new_boolean(j->spec.oversubscribe));
	json_object_object_add(o, "vmshm", json_object_new_boolean(ctld_job_vmshm(j)));
	json_object_object_add(o, "single_copy", json_object_new_boolean(j->spec.single_copy));
	if (j->spec.scratch)
		json_object_object_add(o, "scratch", json_object_new_int64((int64_t)j->spec.scratch));
	json_object_object_add(o, "key", json_object_new_string(j->key_hex));
	json_object_object_add(o, "timeout", json_object_new_int64(j->limit));
	if (j->paths.binds.n)
		json_object_object_add(o, "binds", binds_json(j));
	for (int i = 0; i < j->nalloc; i++) {
		if (j->alloc[i].node == node)
			json_object_array_add(guests, json_object_new_int(i));
		json_object_array_add(ranks, json_object_new_int(rpg ? rpg[i] : 1));
		json_object_array_add(where, json_object_new_string(
			ipv4_format(ctl->nodes[j->alloc[i].node].underlay, a, sizeof(a))));
	}
	for (int k = 0; k < nn; k++)
		if (nodes[k] != node)
			json_object_array_add(peers, json_object_new_string(
				ipv4_format(ctl->nodes[nodes[k]].underlay, a, sizeof(a))));
	json_object_object_add(o, "guests", guests);
	json_object_object_add(o, "ranks", ranks);
	json_object_object_add(o, "peers", peers);
	json_object_object_add(o, "guest_nodes", where);
	if (ctl->cl.wg.key)
		json_object_object_add(o, "underlay_encryption", wg_json(ctl));
	if (j->restart[0]) {
		/* Its guests come from the checkpoint, left paused with their
		 * network dropping frames until job_resume. */
		struct json_object *rs = json_object_new_object();

		json_object_object_add(rs, "ckpt", json_object_new_string(j->restart));
		json_object_object_add(o, "restore", rs);
	}
	ctld_fabric_prepare(ctl, j, node, o);
	free(rpg);
	return o;
}

static struct json_object *launch_msg(struct ctld *ctl, const struct cjob *j, struct verr *err)
{
	struct launch_plan lp = { 0 };
	struct launch_guest *lg = calloc(j->nguests, sizeof(*lg));
	int *rpg = calloc(j->nguests, sizeof(int));
	const char *const *env = launch_env;
	struct json_object *o = NULL, *argv, *ev;
	char **av;

	if (!lg || !rpg) {
		verr_set(err, "out of memory");
		goto out;
	}
	launch_split_ranks(j->ranks, j->nguests, rpg);
	for (int i = 0; i < j->nguests; i++) {
		snprintf(lg[i].name, sizeof(lg[i].name), "g%d", i);
		lg[i].addr = j->subnet.addr + 2 + (uint32_t)i;
		lg[i].vcpus = j->vcpus;
		lg[i].ranks = rpg[i];
	}
	lp.spec = &j->spec;
	lp.nguests = j->nguests;
	lp.guests = lg;
	lp.rsh_path = LAUNCH_RSH;
	lp.hostfile = "/vhpc/hostfile";
	lp.net_if = "eth0";
	lp.vmshm = ctld_job_vmshm(j);
	lp.fabric = j->rdma;
	lp.vmshm_component_dir = VHPC_GUEST_VMSHM_DIR;
	lp.workdir = j->paths.wdir;
	lp.home = j->paths.home;
	lp.image = j->image;
	/* launch_guest_argv reads ranks from the spec */
	if (!(av = launch_guest_argv(&lp))) {
		verr_set(err, "out of memory");
		goto out;
	}
	o = json_object_new_object();
	argv = json_object_new_array();
	ev = json_object_new_array();
	for (char **p = av; *p; p++)
		json_object_array_add(argv, json_object_new_string(*p));
	for (int i = 0; env[i]; i++)
		json_object_array_add(ev, json_object_new_string(env[i]));
	argv_free(av);
	json_object_object_add(o, "type", json_object_new_string("job_launch"));
	json_object_object_add(o, "node", json_object_new_string(ctl->nodes[ctld_job_launcher(j)].name));
	json_object_object_add(o, "job", json_object_new_int64(j->id));
	json_object_object_add(o, "argv", argv);
	json_object_object_add(o, "env", ev);
	json_object_object_add(o, "timeout_ms", json_object_new_int64(j->limit * 1000));
out:
	free(lg);
	free(rpg);
	return o;
}

/* One call per node of j, in the order of its guests, addressed but with
 * no request yet; *nodes (freed by the caller) says which node each is. */
static struct ctld_call *job_calls(const struct ctld *ctl, const struct cjob *j, int **nodes, int *nn)
{
	struct ctld_call *c = calloc(j->nalloc, sizeof(*c));

	*nodes = calloc(j->nalloc, sizeof(int));
	if (!*nodes || !c) {
		log_err("out of memory");
		_exit(1);
	}
	*nn = ctld_job_nodes(j, *nodes);
	for (int k = 0; k < *nn; k++) {
		snprintf(c[k].node, sizeof(c[k].node), "%s", ctl->nodes[(*nodes)[k]].name);
		snprintf(c[k].addr, sizeof(c[k].addr), "%s", ctl->nodes[(*nodes)[k]].addr);
	}
	return c;
}

/* A restored job: job_resume to every node of it (idempotent), instead of
 * a launch: mpirun runs on from the checkpoint in guest 0, and its node
 * takes up its status and output.  Ends the job when a node refuses. */
static void resume(struct ctld *ctl, int64_t id)
{
	struct ctld_call *c;
	struct cjob *j;
	int *nodes, nn, bad = -1;

	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	if (!j || j->state != JOB_RUNNING) {
		pthread_mutex_unlock(&ctl->mu);
		return;
	}
	c = job_calls(ctl, j, &nodes, &nn);
	for (int k = 0; k < nn; k++) {
		c[k].req = json_object_new_object();
		json_object_object_add(c[k].req, "type", json_object_new_string("job_resume"));
		json_object_object_add(c[k].req, "node", json_object_new_string(ctl->nodes[nodes[k]].name));
		json_object_object_add(c[k].req, "job", json_object_new_int64(id));
	}
	pthread_mutex_unlock(&ctl->mu);
	fan_out(c, nn, ctl->rpc_timeout_ms);
	for (int k = 0; k < nn && bad < 0; k++)
		if (c[k].rc < 0)
			bad = k;
	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	if (bad >= 0 && j && j->state == JOB_RUNNING)
		ctld_job_end(ctl, j, JOB_FAILED, 125, "resuming its restored guests on node %s failed: %s", c[bad].node,
			     c[bad].err.msg);
	else if (bad < 0)
		log_info("job %lld: restored from checkpoint %s and resumed on %d node%s", (long long)id,
			 j ? j->restart : "?", nn, nn == 1 ? "" : "s");
	pthread_mutex_unlock(&ctl->mu);
	free_calls(c, nn);
	free(nodes);
}

/* job_launch to the node of guest 0; ends the job when that fails. */
static void launch(struct ctld *ctl, int64_t id)
{
	struct ctld_call c = { 0 };
	struct cjob *j;
	struct verr e;

	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	if (!j || j->state != JOB_RUNNING || ctld_job_launcher(j) < 0) {
		pthread_mutex_unlock(&ctl->mu);
		return;
	}
	snprintf(c.node, sizeof(c.node), "%s", ctl->nodes[ctld_job_launcher(j)].name);
	snprintf(c.addr, sizeof(c.addr), "%s", ctl->nodes[ctld_job_launcher(j)].addr);
	c.req = launch_msg(ctl, j, &e);
	if (!c.req) {
		ctld_metrics_start_failed(ctl, CTLD_SF_INTERNAL);
		ctld_job_end(ctl, j, JOB_FAILED, 125, "cannot make its launch: %s", e.msg);
		pthread_mutex_unlock(&ctl->mu);
		return;
	}
	pthread_mutex_unlock(&ctl->mu);
	call_one(&c, ctl->rpc_timeout_ms);
	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	if (c.rc < 0 && j && j->state == JOB_RUNNING) {
		ctld_metrics_start_failed(ctl, CTLD_SF_LAUNCH);
		ctld_job_end(ctl, j, JOB_FAILED, 125, "launch on node %s failed: %s", c.node, c.err.msg);
	} else if (c.rc == 0)
		log_info("job %lld: launched on %s", (long long)id, c.node);
	pthread_mutex_unlock(&ctl->mu);
	json_object_put(c.req);
	json_object_put(c.reply);
}

/* Whether a job can be prepared on its nodes: still starting, its paths
 * planned, its image resolved; if not, it is ended.  Holds ctl->mu. */
static bool startable(struct ctld *ctl, struct cjob *j)
{
	struct imgstore_ref ref;
	struct verr e;

	if (!j || j->state != JOB_STARTING) {
		if (j)
			j->worker = false;
		return false;
	}
	if (j->paths_err[0]) {
		/* The cluster file changed under a queued job: it says why. */
		j->worker = false;
		ctld_metrics_start_failed(ctl, CTLD_SF_PATHS);
		ctld_job_end(ctl, j, JOB_FAILED, 125, "%s", j->paths_err);
		return false;
	}
	if (j->image_id[0])
		return true;
	/* Queued by a controller that did not resolve images at submit. */
	if (imgstore_lookup(ctl->images, j->image, &ref, &e) < 0) {
		j->worker = false;
		ctld_metrics_start_failed(ctl, CTLD_SF_IMAGE);
		ctld_job_end(ctl, j, JOB_FAILED, 125, "%s", e.msg);
		return false;
	}
	snprintf(j->image_id, sizeof(j->image_id), "%s", ref.id);
	log_info("job %lld: image %s resolved at its start, to %.12s", (long long)j->id, j->image, ref.id);
	return true;
}

/* After every node of the job answered its job_prepare (c, nn of them):
 * RUNNING, and true to launch it; or back to the queue.  Holds ctl->mu. */
static bool prepared(struct ctld *ctl, struct cjob *j, const struct ctld_call *c, int nn, uint64_t t0)
{
	struct verr e;
	int bad = -1;

	j->worker = false;
	for (int k = 0; k < nn && bad < 0; k++)
		if (c[k].rc < 0)
			bad = k;
	if (j->state != JOB_STARTING) {
		/* cancelled or failed meanwhile: whoever did that stops it */
		return false;
	}
	/* A restart whose checkpoint a node found damaged can never start:
	 * it fails now, not after two more attempts that pull the image. */
	for (int k = 0; k < nn && j->restart[0]; k++) {
		const char *code = c[k].rc < 0 ? wire_error_code(c[k].reply) : NULL;

		if (!code || strcmp(code, WIRE_CODE_CKPT_DAMAGED))
			continue;
		log_warn("job %lld: start failed, checkpoint %s damaged: node %s: %s", (long long)j->id, j->restart,
			 c[k].node, c[k].err.msg);
		ctld_metrics_start_failed(ctl, CTLD_SF_NODE_REFUSED);
		j->attempts++;
		ctld_ckpt_mark_damaged(ctl, j->restart, c[k].node, c[k].err.msg);
		ctld_job_end(ctl, j, JOB_FAILED, 125, "checkpoint %s is damaged, not tried again: node %s: %s",
			     j->restart, c[k].node, c[k].err.msg);
		return false;
	}
	if (bad >= 0) {
		char why[700];

		snprintf(why, sizeof(why), "node %s: %s", c[bad].node, c[bad].err.msg);
		log_warn("job %lld: start failed: %s", (long long)j->id, why);
		/* No reply: the call itself failed (connect, munge, timeout). */
		ctld_metrics_start_failed(ctl, c[bad].reply ? CTLD_SF_NODE_REFUSED : CTLD_SF_NODE_UNREACHABLE);
		ctld_job_requeue(ctl, j, why);
		return false;
	}
	j->state = JOB_RUNNING;
	j->started = ctld_wall_s();
	j->reason[0] = 0;
	ctld_job_commit(ctl, j, false, &e);
	ctld_metrics_job_running(ctl, j);
	log_info("job %lld: %d guest%s on %d node%s ready in %.0f ms", (long long)j->id, j->nguests,
		 j->nguests == 1 ? "" : "s", nn, nn == 1 ? "" : "s", (now_ns() - t0) / 1e6);
	return true;
}

static void *start_thread(void *arg)
{
	struct work w = *(struct work *)arg;
	struct ctld *ctl = w.ctl;
	int64_t id = w.id;
	struct ctld_call *c;
	struct cjob *j;
	int *nodes, nn;
	uint64_t t0 = now_ns();
	bool go, restored;

	free(arg);
	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	if (!startable(ctl, j)) {
		pthread_mutex_unlock(&ctl->mu);
		return NULL;
	}
	c = job_calls(ctl, j, &nodes, &nn);
	for (int k = 0; k < nn; k++) {
		c[k].req = prepare_msg(ctl, j, nodes[k], nodes, nn);
	}
	pthread_mutex_unlock(&ctl->mu);

	fan_out(c, nn, ctl->rpc_timeout_ms);

	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	restored = j && j->restart[0];
	go = prepared(ctl, j, c, nn, t0);
	pthread_mutex_unlock(&ctl->mu);
	free_calls(c, nn);
	free(nodes);
	if (go && restored)
		resume(ctl, id);
	else if (go)
		launch(ctl, id);
	return NULL;
}

static void *relaunch_thread(void *arg)
{
	struct work w = *(struct work *)arg;
	struct ctld *ctl = w.ctl;
	int64_t id = w.id;
	struct cjob *j;
	bool restored;

	free(arg);
	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	restored = j && j->restart[0];
	pthread_mutex_unlock(&ctl->mu);
	/* A restored job is never launched: its mpirun came back with it. */
	if (restored)
		resume(ctl, id);
	else
		launch(ctl, id);
	pthread_mutex_lock(&ctl->mu);
	if ((j = ctld_job_find(ctl, id)))
		j->worker = false;
	pthread_mutex_unlock(&ctl->mu);
	return NULL;
}

static void *stop_thread(void *arg)
{
	struct work w = *(struct work *)arg;
	struct ctld *ctl = w.ctl;
	int64_t id = w.id;
	struct ctld_call *c;
	struct cjob *j;
	int n = 0, *idx;
	bool ended;

	free(arg);
	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	c = calloc(ctl->nnodes ? ctl->nnodes : 1, sizeof(*c));
	idx = calloc(ctl->nnodes ? ctl->nnodes : 1, sizeof(int));
	/* A job that has ended is accounted from its nodes' replies; a
	 * requeued one's failed start is not. */
	ended = j && store_job_state_final(j->state);
	if (!c || !idx) {
		log_err("out of memory");
		_exit(1);
	}
	for (int i = 0; i < ctl->nnodes; i++) {
		if (!ctld_job_owes_stop(j, i))
			continue;
		snprintf(c[n].node, sizeof(c[n].node), "%s", ctl->nodes[i].name);
		snprintf(c[n].addr, sizeof(c[n].addr), "%s", ctl->nodes[i].addr);
		c[n].req = json_object_new_object();
		json_object_object_add(c[n].req, "type", json_object_new_string("job_stop"));
		json_object_object_add(c[n].req, "node", json_object_new_string(ctl->nodes[i].name));
		json_object_object_add(c[n].req, "job", json_object_new_int64(id));
		json_object_object_add(c[n].req, "reason", json_object_new_string(
			store_job_state_final(j->state) ? store_job_state_names[j->state] : "requeued"));
		idx[n++] = i;
	}
	pthread_mutex_unlock(&ctl->mu);

	fan_out(c, n, ctl->rpc_timeout_ms);

	pthread_mutex_lock(&ctl->mu);
	j = ctld_job_find(ctl, id);
	for (int k = 0; k < n; k++) {
		if (c[k].rc == 0 && ended)
			ctld_usage_take(ctl, j, idx[k], c[k].reply);
		if (c[k].rc == 0 && ctld_job_owes_stop(j, idx[k])) {
			j->cleanup[idx[k]] = false;
			j->ncleanup--;
		} else if (c[k].rc < 0) {
			log_warn("job %lld: stop on node %s: %s (will retry)", (long long)id, c[k].node, c[k].err.msg);
		}
	}
	if (n) {
		struct verr e;

		ctld_job_commit(ctl, j, false, &e);
	}
	j->stopping = false;
	if (j->ncleanup)
		j->stop_retry_ms = ctld_mono_ms() + 3000;
	else
		log_debug("job %lld: every node has torn it down", (long long)id);
	ctld_kick(ctl);
	pthread_mutex_unlock(&ctl->mu);
	free_calls(c, n);
	free(idx);
	return NULL;
}

void ctld_rpc_start_job(struct ctld *ctl, struct cjob *j)
{
	if (j->worker)
		return;
	j->worker = true;
	spawn_thread(ctl, start_thread, j);
}

void ctld_rpc_relaunch_job(struct ctld *ctl, struct cjob *j)
{
	if (j->worker)
		return;
	j->worker = true;
	spawn_thread(ctl, relaunch_thread, j);
}

void ctld_rpc_stop_job(struct ctld *ctl, struct cjob *j)
{
	if (j->stopping || !j->ncleanup)
		return;
	j->stopping = true;
	spawn_thread(ctl, stop_thread, j);
}
