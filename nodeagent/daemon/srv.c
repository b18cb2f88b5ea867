/*
 * vhpcd's listener: the controller's job_prepare, job_launch and job_stop,
 * each on a connection of its own, each from root only (munge says who),
 * each idempotent: a controller that restarted repeats what it did not see
 * answered.
 */
#include "lib/err.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct vd vd = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
};

struct vjob *vd_job_find(int64_t id)
{
	for (int i = 0; i < vd.njobs; i++)
		if (vd.jobs[i]->id == id)
			return vd.jobs[i];
	return NULL;
}

int vd_job_add(struct vjob *j)
{
	if (grow(&vd.jobs, &vd.capjobs, (size_t)vd.njobs + 1, sizeof(*vd.jobs), 16) < 0)
		return -1;
	vd.jobs[vd.njobs++] = j;
	return 0;
}

void vd_job_remove(struct vjob *j)
{
	for (int i = 0; i < vd.njobs; i++)
		if (vd.jobs[i] == j) {
			vd.jobs[i] = vd.jobs[--vd.njobs];
			return;
		}
}

static struct json_object *ok_reply(const char *type, int64_t job)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "job", json_object_new_int64(job));
	return o;
}

/* A refused job_prepare; "code" ckpt_damaged when its restore found this
 * node's part of the checkpoint damaged, which the controller does not try
 * again (scheduler/PROTOCOL.md, "Rules for every message"). */
static struct json_object *prepare_error(bool damaged, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static struct json_object *prepare_error(bool damaged, const char *fmt, ...)
{
	struct json_object *r;
	char buf[1400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	r = wire_error("%s", buf);
	if (damaged)
		json_object_object_add(r, "code", json_object_new_string(WIRE_CODE_CKPT_DAMAGED));
	return r;
}

static struct json_object *prepare(struct vmsg *m, const char *text)
{
	struct vjob *j;
	struct verr e;
	bool damaged;
	int rc;

	pthread_mutex_lock(&vd.mu);
	j = vd_job_find(m->job);
	if (j) {
		/* A repeated job_prepare: the answer of the first one. */
		while (j && j->state == VJ_PREPARING && !j->stopping) {
			pthread_cond_wait(&vd.cv, &vd.mu);
			j = vd_job_find(m->job);
		}
		if (!j) {
			pthread_mutex_unlock(&vd.mu);
			return wire_error("job %lld: its preparation here failed; see the other reply", (long long)m->job);
		}
		if (j->stopping || j->state == VJ_FAILED) {
			struct json_object *r = prepare_error(j->state == VJ_FAILED && j->ckpt_damaged, "job %lld: %s",
							      (long long)m->job,
							      j->state == VJ_FAILED ? j->error : "being removed from this node");

			pthread_mutex_unlock(&vd.mu);
			return r;
		}
		pthread_mutex_unlock(&vd.mu);
		return ok_reply("prepared", m->job);
	}
	j = calloc(1, sizeof(*j));
	if (!j || !(j->prep_json = strdup(text))) {
		pthread_mutex_unlock(&vd.mu);
		free(j);
		return wire_error("out of memory");
	}
	j->id = m->job;
	snprintf(j->local, sizeof(j->local), "%s", m->prep.local);
	j->state = VJ_PREPARING;
	j->p = m->prep;
	/* the message keeps nothing: its arrays now belong to the job */
	memset(&m->prep, 0, sizeof(m->prep));
	vd_job_add(j);
	pthread_mutex_unlock(&vd.mu);
	vd_usage_forget(j->id);

	rc = vjob_prepare(j, &e);
	pthread_mutex_lock(&vd.mu);
	if (rc == 0 && j->stop_requested)
		rc = verr_set(&e, "stopped by the controller while it was being prepared");
	if (rc < 0) {
		j->state = VJ_FAILED;
		j->stopping = true;
		snprintf(j->error, sizeof(j->error), "%s", e.msg);
		pthread_cond_broadcast(&vd.cv);
		pthread_mutex_unlock(&vd.mu);
		log_warn("job %lld: preparing it here failed: %s", (long long)j->id, e.msg);
		vjob_teardown(j);
		pthread_mutex_lock(&vd.mu);
		vd_job_remove(j);
		pthread_cond_broadcast(&vd.cv);
		pthread_mutex_unlock(&vd.mu);
		damaged = j->ckpt_damaged;
		vjob_free(j);
		return prepare_error(damaged, "%s", e.msg);
	}
	j->state = VJ_READY;
	if (j->p.restore[0]) {
		/* Restored paused, mpirun inside them: never launched again;
		 * job_resume thaws them and takes up its status and output. */
		j->paused = true;
		j->launched = true;
		j->state = VJ_RUNNING;
	}
	pthread_cond_broadcast(&vd.cv);
	pthread_mutex_unlock(&vd.mu);
	return ok_reply("prepared", m->job);
}

static struct json_object *launch(const struct vmsg *m)
{
	struct vjob *j;
	struct verr e;

	pthread_mutex_lock(&vd.mu);
	j = vd_job_find(m->job);
	if (!j || j->stopping) {
		pthread_mutex_unlock(&vd.mu);
		return wire_error("job %lld is not on this node", (long long)m->job);
	}
	if (j->p.here[0] != 0) {
		pthread_mutex_unlock(&vd.mu);
		return wire_error("job %lld: guest 0 is not on this node", (long long)m->job);
	}
	if (j->state == VJ_RUNNING || j->state == VJ_EXITED) {
		pthread_mutex_unlock(&vd.mu);
		return ok_reply("launched", m->job);
	}
	if (j->state != VJ_READY) {
		struct json_object *r = wire_error("job %lld is %s here", (long long)m->job,
						   j->state == VJ_FAILED ? j->error : "still being prepared");

		pthread_mutex_unlock(&vd.mu);
		return r;
	}
	j->state = VJ_RUNNING;
	pthread_mutex_unlock(&vd.mu);
	if (vjob_launch(j, m, &e) < 0) {
		pthread_mutex_lock(&vd.mu);
		j->state = VJ_FAILED;
		snprintf(j->error, sizeof(j->error), "launch: %s", e.msg);
		pthread_mutex_unlock(&vd.mu);
		return wire_error("%s", e.msg);
	}
	return ok_reply("launched", m->job);
}

struct json_object *vd_handle(const struct vmsg *m)
{
	switch (m->type) {
	case VM_PREPARE:
		break;         /* needs the message text: see conn_thread */
	case VM_LAUNCH:
		return launch(m);
	case VM_STOP: {
		struct json_object *r;

		vd_stop_job(m->job);
		r = ok_reply("stopped", m->job);
		vd_usage_reply(r, m->job);
		return r;
	}
	case VM_GUEST_OPEN:
		return vd_guest_open(m);
	case VM_PAUSE:
	case VM_RESUME:
	case VM_CHECKPOINT:
		return vd_ckpt_handle(m);
	}
	return wire_error("unhandled message");
}

/* One message from the controller: root only, and for this node. */
static struct json_object *handle(struct json_object *msg, const struct wire_peer *peer,
				  const char *who, void *ctx)
{
	struct json_object *r;
	struct vmsg m;
	struct verr e;

	(void)ctx; /* the daemon's state is vd: one per process */
	if (peer->uid != 0) {
		log_warn("%s: rejected '%s' from uid %u: only the controller (root) talks to vhpcd", who,
			 wire_type(msg), (unsigned)peer->uid);
		return wire_error("permission denied: vhpcd takes messages from root only");
	}
	if (vmsg_parse(msg, &m, &e) < 0) {
		log_warn("%s: rejected message: %s", who, e.msg);
		return wire_error("%s", e.msg);
	}
	if (strcmp(m.node, vd.name) && !vd.simulate) {
		log_warn("%s: rejected '%s' for node %s: this is %s", who, wire_type(msg), m.node, vd.name);
		r = wire_error("this is node %s, not %s", vd.name, m.node);
	} else {
		log_debug("%s: %s job %lld", who, wire_type(msg), (long long)m.job);
		if (vd.simulate)
			r = vd_sim_handle(&m);
		else if (m.type == VM_PREPARE)
			/* Stored as the job's job.json: the whole message. */
			r = prepare(&m, json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN));
		else
			r = vd_handle(&m);
	}
	vmsg_free(&m);
	return r;
}

void vd_serve(int lfd)
{
	wire_serve(lfd, 0, handle, NULL);
}
