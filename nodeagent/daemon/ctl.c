/*
 * vhpcd towards the controller: registration (topology, capacity, RDMA
 * devices, the jobs it holds) and heartbeats (the jobs again, with their
 * state: the controller reconciles, and its reply lists jobs to stop).
 */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "daemon.h"
#include "nodeagent/place/place.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const state_names[] = { "preparing", "ready", "running", "exited", "failed" };

int vd_call(struct json_object *req, struct json_object **reply, int timeout_ms, struct verr *err)
{
	struct wire_peer peer;

	if (wire_call(vd.ctl, req, reply, &peer, timeout_ms, err) < 0)
		return verr_wrap(err, "vhpc-ctld");
	if (peer.uid != 0) {
		json_object_put(*reply);
		*reply = NULL;
		return verr_set(err, "vhpc-ctld at %s: the reply comes from uid %u, not root", vd.ctl,
				(unsigned)peer.uid);
	}
	return 0;
}

/* The jobs this node holds, for the controller.  Guests that died turn
 * their job to failed here.  Holds vd.mu. */
static struct json_object *jobs_json(void)
{
	struct json_object *a = json_object_new_array();

	for (int i = 0; i < vd.njobs; i++) {
		struct vjob *j = vd.jobs[i];
		struct json_object *o = json_object_new_object();
		char why[256];

		if (!j->stopping && (j->state == VJ_READY || j->state == VJ_RUNNING) &&
		    !vjob_guests_alive(j, why, sizeof(why))) {
			j->state = VJ_FAILED;
			snprintf(j->error, sizeof(j->error), "%s", why);
			log_warn("job %lld: %s", (long long)j->id, j->error);
		}
		json_object_object_add(o, "job", json_object_new_int64(j->id));
		json_object_object_add(o, "state", json_object_new_string(state_names[j->state]));
		if (j->state == VJ_FAILED)
			json_object_object_add(o, "error", json_object_new_string(j->error));
		json_object_array_add(a, o);
	}
	return a;
}

static void stop_listed(struct json_object *rep)
{
	struct json_object *stop;

	if (!json_object_object_get_ex(rep, "stop", &stop) || !json_object_is_type(stop, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(stop) && i < 4096; i++) {
		struct json_object *v = json_object_array_get_idx(stop, i);

		if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) > 0) {
			log_info("job %lld: the controller says it is over; removing it", (long long)json_object_get_int64(v));
			vd_stop_async(json_object_get_int64(v));
		}
	}
}

int vd_register(struct verr *err)
{
	struct json_object *req = json_object_new_object(), *numa = json_object_new_array(), *rep, *v;
	struct na_numa_info info[VHPC_MAX_NODES];
	int n = na_topo_numa(vd.topo, info, VHPC_MAX_NODES);
	char a[20];
	const char *e;

	for (int i = 0; i < n && i < VHPC_MAX_NODES; i++) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "os_index", json_object_new_int(info[i].os_index));
		json_object_object_add(o, "cores", json_object_new_int(info[i].ncores));
		json_object_object_add(o, "mem", json_object_new_int64((int64_t)info[i].mem_bytes));
		json_object_object_add(o, "hugepages_2m_free", json_object_new_int64((int64_t)info[i].hugepages_2m_free));
		json_object_array_add(numa, o);
	}
	json_object_object_add(req, "type", json_object_new_string("register"));
	json_object_object_add(req, "node", json_object_new_string(vd.name));
	json_object_object_add(req, "addr", json_object_new_string(vd.addr));
	json_object_object_add(req, "underlay", json_object_new_string(ipv4_format(vd.underlay, a, sizeof(a))));
	json_object_object_add(req, "numa", numa);
	json_object_object_add(req, "rdma", json_object_get(vd.rdma));
	vd_fabric_report(req, vd.name, false);
	json_object_object_add(req, "simulated", json_object_new_boolean(false));
	json_object_object_add(req, "images", vd_images_json());
	pthread_mutex_lock(&vd.mu);
	json_object_object_add(req, "jobs", jobs_json());
	pthread_mutex_unlock(&vd.mu);
	if (vd_call(req, &rep, 30000, err) < 0) {
		json_object_put(req);
		return -1;
	}
	json_object_put(req);
	if ((e = wire_error_text(rep))) {
		verr_set(err, "vhpc-ctld refused the registration: %s", e);
		json_object_put(rep);
		return -1;
	}
	if (json_object_object_get_ex(rep, "heartbeat_ms", &v) && json_object_is_type(v, json_type_int) &&
	    json_object_get_int64(v) >= 100 && json_object_get_int64(v) <= 600000)
		vd.hb_ms = (int)json_object_get_int64(v);
	stop_listed(rep);
	json_object_put(rep);
	log_info("registered with vhpc-ctld at %s as %s (%s, underlay %s); heartbeats every %d ms",
		 vd.ctl, vd.name, vd.addr, a, vd.hb_ms);
	return 0;
}

void *vd_heartbeat_thread(void *arg)
{
	bool lost = false;

	(void)arg;
	for (;;) {
		struct json_object *req = json_object_new_object(), *rep;
		struct verr e;
		struct json_object *code;

		usleep((useconds_t)vd.hb_ms * 1000);
		json_object_object_add(req, "type", json_object_new_string("heartbeat"));
		json_object_object_add(req, "node", json_object_new_string(vd.name));
		json_object_object_add(req, "images", vd_images_json());
		pthread_mutex_lock(&vd.mu);
		json_object_object_add(req, "jobs", jobs_json());
		pthread_mutex_unlock(&vd.mu);
		if (vd_call(req, &rep, vd.hb_ms * 2 > 5000 ? vd.hb_ms * 2 : 5000, &e) < 0) {
			if (!lost)
				log_warn("heartbeat: %s", e.msg);
			lost = true;
			json_object_put(req);
			continue;
		}
		json_object_put(req);
		if (lost)
			log_info("heartbeat: vhpc-ctld answers again");
		lost = false;
		if (wire_error_text(rep)) {
			if (json_object_object_get_ex(rep, "code", &code) &&
			    !strcmp(json_object_get_string(code), "unknown_node")) {
				if (vd_register(&e) < 0)
					log_warn("%s", e.msg);
			} else {
				log_warn("heartbeat refused: %s", wire_error_text(rep));
			}
		} else {
			stop_listed(rep);
		}
		json_object_put(rep);
	}
	return NULL;
}

void vd_stop_job(int64_t id)
{
	struct vjob *j;

	pthread_mutex_lock(&vd.mu);
	j = vd_job_find(id);
	if (!j) {
		pthread_mutex_unlock(&vd.mu);
		return;
	}
	if (j->state == VJ_PREPARING || j->stopping) {
		/* Whoever has it ends it; wait for that. */
		j->stop_requested = true;
		while (vd_job_find(id) == j)
			pthread_cond_wait(&vd.cv, &vd.mu);
		pthread_mutex_unlock(&vd.mu);
		return;
	}
	j->stopping = true;
	/* A job_pause or job_checkpoint of the job finishes first. */
	while (j->ckpt_busy)
		pthread_cond_wait(&vd.cv, &vd.mu);
	pthread_mutex_unlock(&vd.mu);
	/* cgroup v1's freezer holds even a SIGKILL until the guest thaws, and
	 * the monitor may wait on a frozen guest 0's agent: a paused job
	 * (job_checkpoint --stop) runs again for its grace period, as any
	 * stopped job does.  A job taken over after a restart may have been
	 * paused by the vhpcd before (resume is idempotent). */
	if ((j->paused || j->adopted) && j->nj) {
		struct verr e;

		if (na_job_resume(j->nj, &e) < 0)
			log_warn("job %lld: resuming it to stop it: %s", (long long)j->id, e.msg);
	}
	vjob_monitor_stop(j);
	vjob_teardown(j);
	pthread_mutex_lock(&vd.mu);
	vd_job_remove(j);
	pthread_cond_broadcast(&vd.cv);
	pthread_mutex_unlock(&vd.mu);
	log_info("job %lld (%s): removed from this node", (long long)j->id, j->local);
	vjob_free(j);
}

static void *stop_thread(void *arg)
{
	int64_t id = *(int64_t *)arg;

	free(arg);
	vd_stop_job(id);
	return NULL;
}

void vd_stop_async(int64_t id)
{
	int64_t *p = malloc(sizeof(*p));
	pthread_t th;
	pthread_attr_t a;

	if (!p)
		return;
	*p = id;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &a, stop_thread, p) != 0)
		free(p);
	pthread_attr_destroy(&a);
}
