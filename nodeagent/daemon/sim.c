/*
 * --simulate N: one process that is N nodes to the controller, for
 * scheduling benchmarks.  Each fake node registers with the topology of
 * --topology (an hwloc synthetic description), heartbeats, and accepts
 * job_prepare / job_launch / job_stop without making anything; a launched
 * job "runs" for --sim-runtime ms and then reports exit status 0 with no
 * output.  The controller cannot tell it from real nodes: the same
 * messages, the same munge credentials.
 *
 * A checkpoint's messages (job_pause, job_resume, job_checkpoint) are
 * answered as a node that saves nothing would answer them, each logged
 * ("simulated node N: job_pause job J") in the order they came, so a test
 * reads the controller's order from the log.  A paused job does not run
 * on to its end, and a save of a job not paused is refused, as a real
 * node refuses it.  For tests of the controller's failure handling,
 * VHPC_SIM_CKPT_FAIL lists what fails (OP@NODE, OP being check, pause,
 * save or resume; comma-separated) and VHPC_SIM_CKPT_SAVE_MS how long a
 * save takes.  Two more OPs fail a restart's job_prepare (one with
 * restore) as a real node fails it: restore, refused as a node refuses a
 * part that fails its check (code ckpt_damaged: never tried again), and
 * prepare, refused as for a passing problem (an image pull that failed):
 * tried again.
 */
#include "lib/clock.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/grow.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/wire.h"
#include "daemon.h"
#include "nodeagent/place/place.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SJ_READY, SJ_RUNNING, SJ_EXITED };

struct simjob {
	int node;
	int64_t job;
	int state;
	int64_t end_ms;
	bool paused;
	int64_t paused_ms;             /* when it was paused (its end moves on by as much) */
};

static struct {
	pthread_mutex_t mu;
	struct simjob *v;
	int n;
	size_t cap;
} S = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int64_t ms(void)
{
	return (int64_t)(now_ns() / 1000000);
}

static void node_name(int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s-%d", vd.name, i);
}

static int node_of(const char *name)
{
	size_t n = strlen(vd.name);
	long long i;

	if (strncmp(name, vd.name, n) || name[n] != '-' || parse_ll(name + n + 1, 0, vd.simulate - 1, &i) < 0)
		return -1;
	return (int)i;
}

static struct simjob *find(int node, int64_t job)
{
	for (int i = 0; i < S.n; i++)
		if (S.v[i].node == node && S.v[i].job == job)
			return &S.v[i];
	return NULL;
}

static struct json_object *ok(const char *type, int64_t job)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "job", json_object_new_int64(job));
	return o;
}

static void drop(int node, int64_t job)
{
	struct simjob *s = find(node, job);

	if (s)
		*s = S.v[--S.n];
}

/* Whether the test asked for op on this node to fail (VHPC_SIM_CKPT_FAIL). */
static bool ckpt_fails(const char *op, const char *node)
{
	const char *l = getenv("VHPC_SIM_CKPT_FAIL");
	char want[160];
	size_t n;

	if (!l)
		return false;
	n = (size_t)snprintf(want, sizeof(want), "%s@%s", op, node);
	for (const char *p = l; (p = strstr(p, want)); p += n)
		if ((p == l || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return true;
	return false;
}

/* job_pause, job_resume, job_checkpoint: logged in order; s is the job
 * here (or NULL).  Under S.mu. */
static struct json_object *ckpt(const struct vmsg *m, struct simjob *s)
{
	static const char *const names[] = { [VM_PAUSE] = "job_pause", [VM_RESUME] = "job_resume",
					      [VM_CHECKPOINT] = "job_checkpoint" };
	const char *op = m->type == VM_PAUSE ? "pause" : m->type == VM_RESUME ? "resume" : m->check ? "check" : "save";
	struct json_object *r;

	log_info("simulated node %s: %s job %lld%s%s%s", m->node, names[m->type], (long long)m->job,
		 m->type == VM_CHECKPOINT ? (m->check ? " check " : " save ") : "", m->type == VM_CHECKPOINT ? m->ckpt : "",
		 m->close_sessions ? " (close sessions)" : "");
	if (!s)
		return wire_error("job %lld is not on this node", (long long)m->job);
	if (ckpt_fails(op, m->node))
		return wire_error("simulated failure of %s on %s (VHPC_SIM_CKPT_FAIL)", op, m->node);
	switch (m->type) {
	case VM_PAUSE:
		if (!s->paused)
			s->paused_ms = ms();
		s->paused = true;
		return ok("paused", m->job);
	case VM_RESUME:
		if (s->paused && s->state == SJ_RUNNING)
			s->end_ms += ms() - s->paused_ms;
		s->paused = false;
		return ok("resumed", m->job);
	default:
		break;
	}
	if (m->check)
		return ok("checkable", m->job);
	if (!s->paused)
		return wire_error("job %lld: its guests here are not paused: they must be before they are saved",
				  (long long)m->job);
	if (getenv("VHPC_SIM_CKPT_SAVE_MS")) {
		long long d = 0;

		/* S.mu is dropped meanwhile: heartbeats go on. */
		if (parse_ll(getenv("VHPC_SIM_CKPT_SAVE_MS"), 0, 600000, &d) == 0 && d > 0) {
			pthread_mutex_unlock(&S.mu);
			usleep((useconds_t)d * 1000);
			pthread_mutex_lock(&S.mu);
		}
	}
	/* A simulated node saves nothing: 0 bytes, no guests' files. */
	r = ok("checkpointed", m->job);
	json_object_object_add(r, "bytes", json_object_new_int64(0));
	json_object_object_add(r, "guests", json_object_new_array());
	return r;
}

struct json_object *vd_sim_handle(const struct vmsg *m)
{
	int node = node_of(m->node);
	struct json_object *r;
	struct simjob *s;

	if (node < 0)
		return wire_error("no simulated node %s here", m->node);
	pthread_mutex_lock(&S.mu);
	s = find(node, m->job);
	switch (m->type) {
	case VM_PREPARE:
		/* The job's fabric and functions, checked as a real node
		 * checks them against its cluster file (it makes nothing). */
		{
			static struct vjob j;
			struct na_job_spec spec = { 0 };
			struct verr e;

			memset(&j, 0, sizeof(j));
			j.p = m->prep;
			if (vd_fabric_spec(&j, m->node, &spec, &e) < 0) {
				pthread_mutex_unlock(&S.mu);
				return wire_error("%s", e.msg);
			}
		}
		if (m->prep.restore[0] && ckpt_fails("restore", m->node)) {
			log_info("simulated node %s: job_prepare job %lld restore %s: damaged", m->node,
				 (long long)m->job, m->prep.restore);
			pthread_mutex_unlock(&S.mu);
			r = wire_error("checkpoint %s on node %s: this node's part fails its check (simulated: "
				       "VHPC_SIM_CKPT_FAIL)", m->prep.restore, m->node);
			json_object_object_add(r, "code", json_object_new_string(WIRE_CODE_CKPT_DAMAGED));
			return r;
		}
		if (m->prep.restore[0] && ckpt_fails("prepare", m->node)) {
			log_info("simulated node %s: job_prepare job %lld restore %s: refused", m->node,
				 (long long)m->job, m->prep.restore);
			pthread_mutex_unlock(&S.mu);
			return wire_error("image %.12s: pulling it failed (simulated: VHPC_SIM_CKPT_FAIL)", m->prep.image_id);
		}
		if (!s) {
			if (grow(&S.v, &S.cap, (size_t)S.n + 1, sizeof(*S.v), 1024) < 0) {
				pthread_mutex_unlock(&S.mu);
				return wire_error("out of memory");
			}
			S.v[S.n++] = (struct simjob){ node, m->job, SJ_READY, 0, false, 0 };
		}
		r = ok("prepared", m->job);
		break;
	case VM_LAUNCH:
		if (!s) {
			r = wire_error("job %lld is not on this node", (long long)m->job);
			break;
		}
		if (s->state == SJ_READY) {
			s->state = SJ_RUNNING;
			s->end_ms = ms() + vd.sim_runtime_ms;
		}
		r = ok("launched", m->job);
		break;
	case VM_GUEST_OPEN:
		r = wire_error("job %lld: a simulated node runs no guests", (long long)m->job);
		break;
	case VM_PAUSE:
	case VM_RESUME:
	case VM_CHECKPOINT:
		r = ckpt(m, s);
		break;
	default:
		drop(node, m->job);
		r = ok("stopped", m->job);
		break;
	}
	pthread_mutex_unlock(&S.mu);
	return r;
}

static int sim_register(int i, struct verr *err)
{
	struct json_object *req = json_object_new_object(), *numa = json_object_new_array(), *rep, *v;
	struct na_numa_info info[VHPC_MAX_NODES];
	int n = na_topo_numa(vd.topo, info, VHPC_MAX_NODES), rc = 0;
	char name[96], a[20];
	const char *e;

	node_name(i, name, sizeof(name));
	for (int k = 0; k < n && k < VHPC_MAX_NODES; k++) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "os_index", json_object_new_int(info[k].os_index));
		json_object_object_add(o, "cores", json_object_new_int(info[k].ncores));
		json_object_object_add(o, "mem", json_object_new_int64((int64_t)(info[k].mem_bytes ? info[k].mem_bytes : 64ull << 30)));
		json_object_object_add(o, "hugepages_2m_free", json_object_new_int(0));
		json_object_array_add(numa, o);
	}
	json_object_object_add(req, "type", json_object_new_string("register"));
	json_object_object_add(req, "node", json_object_new_string(name));
	json_object_object_add(req, "addr", json_object_new_string(vd.addr));
	json_object_object_add(req, "underlay", json_object_new_string(ipv4_format(vd.underlay, a, sizeof(a))));
	json_object_object_add(req, "numa", numa);
	json_object_object_add(req, "rdma", json_object_new_array());
	vd_fabric_report(req, name, true);
	json_object_object_add(req, "simulated", json_object_new_boolean(true));
	json_object_object_add(req, "jobs", json_object_new_array());
	if (vd_call(req, &rep, 30000, err) < 0) {
		json_object_put(req);
		return -1;
	}
	json_object_put(req);
	if ((e = wire_error_text(rep)))
		rc = verr_set(err, "%s: %s", name, e);
	else if (json_object_object_get_ex(rep, "heartbeat_ms", &v) && json_object_is_type(v, json_type_int) &&
		 json_object_get_int64(v) >= 100)
		vd.hb_ms = (int)json_object_get_int64(v);
	json_object_put(rep);
	return rc;
}

static void heartbeat(int i)
{
	struct json_object *req = json_object_new_object(), *jobs = json_object_new_array(), *rep, *stop;
	static const char *const names[] = { "ready", "running", "exited" };
	struct verr e;
	char name[96];

	node_name(i, name, sizeof(name));
	pthread_mutex_lock(&S.mu);
	for (int k = 0; k < S.n; k++)
		if (S.v[k].node == i) {
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "job", json_object_new_int64(S.v[k].job));
			json_object_object_add(o, "state", json_object_new_string(names[S.v[k].state]));
			json_object_array_add(jobs, o);
		}
	pthread_mutex_unlock(&S.mu);
	json_object_object_add(req, "type", json_object_new_string("heartbeat"));
	json_object_object_add(req, "node", json_object_new_string(name));
	json_object_object_add(req, "jobs", jobs);
	if (vd_call(req, &rep, 10000, &e) == 0) {
		if (json_object_object_get_ex(rep, "stop", &stop) && json_object_is_type(stop, json_type_array)) {
			pthread_mutex_lock(&S.mu);
			for (size_t k = 0; k < json_object_array_length(stop); k++)
				drop(i, json_object_get_int64(json_object_array_get_idx(stop, k)));
			pthread_mutex_unlock(&S.mu);
		}
		if (wire_error_text(rep) && sim_register(i, &e) < 0)
			log_warn("%s", e.msg);
		json_object_put(rep);
	}
	json_object_put(req);
}

/* Jobs whose time is up report their end, from the node of guest 0. */
static void report_exits(void)
{
	for (;;) {
		struct json_object *req, *rep;
		struct verr e;
		char name[96];
		int64_t job = 0;
		int node = -1;

		pthread_mutex_lock(&S.mu);
		for (int k = 0; k < S.n && node < 0; k++)
			if (S.v[k].state == SJ_RUNNING && !S.v[k].paused && ms() >= S.v[k].end_ms) {
				node = S.v[k].node;
				job = S.v[k].job;
				S.v[k].state = SJ_EXITED;
			}
		pthread_mutex_unlock(&S.mu);
		if (node < 0)
			return;
		node_name(node, name, sizeof(name));
		req = json_object_new_object();
		json_object_object_add(req, "type", json_object_new_string("job_exit"));
		json_object_object_add(req, "node", json_object_new_string(name));
		json_object_object_add(req, "job", json_object_new_int64(job));
		json_object_object_add(req, "size", json_object_new_int(0));
		json_object_object_add(req, "status", json_object_new_int(0));
		if (vd_call(req, &rep, 10000, &e) == 0)
			json_object_put(rep);
		json_object_put(req);
	}
}

static void *exit_thread(void *arg)
{
	(void)arg;
	for (;;) {
		report_exits();
		usleep(20000);
	}
	return NULL;
}

static void *hb_thread(void *arg)
{
	(void)arg;
	for (;;) {
		int64_t t0 = ms();

		for (int i = 0; i < vd.simulate; i++)
			heartbeat(i);
		if (ms() - t0 < vd.hb_ms)
			usleep((useconds_t)(vd.hb_ms - (ms() - t0)) * 1000);
	}
	return NULL;
}

int vd_simulate(void)
{
	pthread_t th;
	int64_t t0 = ms();

	for (int i = 0; i < vd.simulate; i++) {
		struct verr e;

		while (sim_register(i, &e) < 0) {
			log_warn("registering simulated node %d: %s; retrying", i, e.msg);
			sleep(1);
		}
	}
	log_info("%d simulated nodes registered in %lld ms", vd.simulate, (long long)(ms() - t0));
	if (pthread_create(&th, NULL, hb_thread, NULL) != 0 || pthread_create(&th, NULL, exit_thread, NULL) != 0)
		return -1;
	return 0;
}
