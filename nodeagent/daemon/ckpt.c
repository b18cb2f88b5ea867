/*
 * vhpcd's side of a job's checkpoint (issue 36, scheduler/PROTOCOL.md):
 * job_pause, job_resume and job_checkpoint, each from vhpc-ctld, each
 * idempotent.  The controller pauses every node before any saves, so
 * these only ever act on this node's guests; the node agent's job level
 * (nodeagent/job_ckpt.c) and the drivers do the work.
 *
 * One of them at a time per job (ckpt_busy), and never beside the job's
 * teardown: vd_stop_job waits for the one running.
 */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "daemon.h"
#include "nodeagent/nodeagent.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct json_object *reply(const char *type, int64_t job)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "job", json_object_new_int64(job));
	return o;
}

/* The job, marked busy, or an error reply.  Only a job whose guests were
 * started and are not being removed. */
static struct vjob *take(const struct vmsg *m, struct json_object **err_reply)
{
	struct vjob *j;

	pthread_mutex_lock(&vd.mu);
	for (;;) {
		j = vd_job_find(m->job);
		if (!j || !j->ckpt_busy || j->stopping)
			break;
		pthread_cond_wait(&vd.cv, &vd.mu);
	}
	if (!j || j->stopping) {
		*err_reply = wire_error("job %lld is not on this node", (long long)m->job);
		j = NULL;
	} else if (j->state == VJ_PREPARING || j->state == VJ_FAILED || !j->nj) {
		*err_reply = wire_error("job %lld is %s here", (long long)m->job,
					j->state == VJ_FAILED ? j->error : "still being prepared");
		j = NULL;
	} else {
		j->ckpt_busy = true;
	}
	pthread_mutex_unlock(&vd.mu);
	return j;
}

static void give_back(struct vjob *j, int paused)
{
	pthread_mutex_lock(&vd.mu);
	if (paused >= 0)
		j->paused = paused;
	j->ckpt_busy = false;
	pthread_cond_broadcast(&vd.cv);
	pthread_mutex_unlock(&vd.mu);
}

/* Long enough for guestd's grace before SIGKILL (guest/opts.c: 2 s). */
#define SESSIONS_CLOSE_MS 10000

static struct json_object *pause_job(struct vjob *j, const struct vmsg *m)
{
	bool mon;
	int sessions;
	struct verr e, e2;

	/* Sessions this driver cannot save, closed when asked (the
	 * controller asks once every node said it can save the rest). */
	pthread_mutex_lock(&vd.mu);
	sessions = j->sessions;
	pthread_mutex_unlock(&vd.mu);
	if (m->close_sessions && sessions > 0 && na_job_ckpt_no_sessions(j->nj) &&
	    vd_sessions_close(j->id, SESSIONS_CLOSE_MS, &e) < 0) {
		give_back(j, -1);
		log_warn("job %lld: pause: %s", (long long)j->id, e.msg);
		return wire_error("job %lld: cannot pause its guests on node %s: %s", (long long)j->id, vd.name, e.msg);
	}

	/* The monitor's connection to guest 0's agent is closed, both ends,
	 * before anything freezes: a container guest holding it cannot be
	 * dumped (a socket of this agent's network namespace, whose peer is
	 * outside the dump), and a restored guest has no such peer anyway.
	 * job_resume starts it again. */
	pthread_mutex_lock(&vd.mu);
	mon = j->mon_running;
	pthread_mutex_unlock(&vd.mu);
	vjob_monitor_stop(j);
	if (na_job_pause(j->nj, &e) < 0) {
		if (mon && vjob_reattach(j, &e2) < 0)
			log_warn("job %lld: its monitor after a failed pause: %s", (long long)j->id, e2.msg);
		give_back(j, -1);
		log_warn("job %lld: pause: %s", (long long)j->id, e.msg);
		return wire_error("job %lld: cannot pause its guests on node %s: %s", (long long)j->id, vd.name, e.msg);
	}
	give_back(j, 1);
	log_info("job %lld: its %d guest%s here paused", (long long)j->id, j->p.nhere, j->p.nhere == 1 ? "" : "s");
	return reply("paused", j->id);
}

static struct json_object *resume_job(struct vjob *j)
{
	struct verr e;

	if (na_job_resume(j->nj, &e) < 0) {
		give_back(j, -1);
		log_warn("job %lld: resume: %s", (long long)j->id, e.msg);
		return wire_error("job %lld: cannot resume its guests on node %s: %s", (long long)j->id, vd.name, e.msg);
	}
	/* Guest 0's node of a job taken over while paused: mpirun's status
	 * and output are taken up now, as after any vhpcd restart.  Still
	 * busy, so no job_stop joins a monitor being started. */
	if (j->p.nhere > 0 && j->p.here[0] == 0 && j->state == VJ_RUNNING && !j->mon_running &&
	    vjob_reattach(j, &e) < 0) {
		pthread_mutex_lock(&vd.mu);
		j->state = VJ_FAILED;
		snprintf(j->error, sizeof(j->error), "after a resume: %s", e.msg);
		pthread_mutex_unlock(&vd.mu);
		log_warn("job %lld: %s", (long long)j->id, j->error);
	}
	give_back(j, 0);
	log_info("job %lld: its guests here run again", (long long)j->id);
	return reply("resumed", j->id);
}

/* This node's part, the guests paused; they stay paused whatever
 * happens (the controller resumes them). */
static struct json_object *save(struct vjob *j, const struct vmsg *m)
{
	const char *dir = cluster_ckpt_dir(&vd.cl);
	struct na_ckpt_saved *s = calloc(1, sizeof(*s));
	struct json_object *r, *gs;
	uint64_t t0 = now_ns();
	struct verr e;

	if (!s) {
		give_back(j, -1);
		return wire_error("out of memory");
	}
	if (na_job_ckpt_save(j->nj, dir, m->ckpt, s, &e) < 0) {
		give_back(j, -1);
		free(s);
		log_warn("job %lld: checkpoint %s: %s", (long long)j->id, m->ckpt, e.msg);
		return wire_error("job %lld: checkpoint %s on node %s: %s", (long long)j->id, m->ckpt, vd.name, e.msg);
	}
	give_back(j, -1);
	r = reply("checkpointed", j->id);
	json_object_object_add(r, "bytes", json_object_new_int64((int64_t)s->bytes));
	gs = json_object_new_array();
	for (int k = 0; k < s->nguests; k++) {
		struct json_object *g = json_object_new_object();

		json_object_object_add(g, "guest", json_object_new_int(s->g[k].index));
		json_object_object_add(g, "bytes", json_object_new_int64((int64_t)s->g[k].bytes));
		json_object_array_add(gs, g);
	}
	json_object_object_add(r, "guests", gs);
	log_info("job %lld: checkpoint %s: %d guest%s here saved in %s/%s, %.1f MiB in %.0f ms", (long long)j->id,
		 m->ckpt, s->nguests, s->nguests == 1 ? "" : "s", dir, m->ckpt, s->bytes / 1048576.0,
		 (now_ns() - t0) / 1e6);
	free(s);
	return r;
}

static struct json_object *checkpoint(struct vjob *j, const struct vmsg *m)
{
	struct verr e;
	int sessions;

	pthread_mutex_lock(&vd.mu);
	sessions = j->sessions;
	pthread_mutex_unlock(&vd.mu);
	/* Whether it can be done comes first, with or without check: a save
	 * must never start on something it cannot finish. */
	if (na_job_ckpt_check(j->nj, &e) < 0)
		verr_wrap(&e, "job %lld cannot be checkpointed on node %s", (long long)j->id, vd.name);
	else if (sessions > 0 && na_job_ckpt_no_sessions(j->nj) && !m->close_sessions)
		verr_set(&e, "job %lld cannot be checkpointed on node %s now: %d vhpc exec or vhpc shell session%s "
			 "open into its guests there, whose connection%s CRIU cannot save; end %s and checkpoint again, "
			 "or checkpoint with --close-sessions",
			 (long long)j->id, vd.name, sessions, sessions == 1 ? " is" : "s are", sessions == 1 ? "" : "s",
			 sessions == 1 ? "it" : "them");
	else if (m->check) {
		give_back(j, -1);
		return reply("checkable", j->id);
	} else if (!j->paused)
		verr_set(&e, "job %lld: its guests on node %s are not paused (job_pause comes first)", (long long)j->id,
			 vd.name);
	else
		return save(j, m);
	give_back(j, -1);
	log_info("checkpoint %s%s refused: %s", m->ckpt, m->check ? " (check)" : "", e.msg);
	return wire_error("%s", e.msg);
}

struct json_object *vd_ckpt_handle(const struct vmsg *m)
{
	struct json_object *err_reply = NULL;
	struct vjob *j = take(m, &err_reply);

	if (!j)
		return err_reply;
	switch (m->type) {
	case VM_PAUSE:
		return pause_job(j, m);
	case VM_RESUME:
		return resume_job(j);
	case VM_CHECKPOINT:
		return checkpoint(j, m);
	default:
		give_back(j, -1);
		return wire_error("unhandled message");
	}
}
