/*
 * The launcher node's part of a running job: mpirun runs in guest 0 as a
 * detached command (guest/PROTOCOL.md, spawn), so it outlives this vhpcd;
 * a monitor thread reads its output from guest 0's agent (guestd's output
 * request, so no driver needs a folder shared with the host) and ships it
 * to the controller in acknowledged chunks (the controller says which offset it has, so nothing is lost or
 * doubled across restarts of either side) and, once it has ended and all
 * of its output is there, its exit status.
 */
#include "lib/chan.h"
#include "lib/err.h"
#include "lib/gexec.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "daemon.h"
#include "nodeagent/nodeagent.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DETACHED_ID "job"

/* Guest 0 is the first of the launcher node's guests (indexes sorted). */
static int g0_connect(struct vjob *j, struct chan *c, struct verr *err)
{
	return na_job_connect(j->nj, 0, c, 5000, err);
}

static void *monitor(void *arg);

static int start_monitor(struct vjob *j, struct verr *err)
{
	/* Stopped before (a pause for a checkpoint) and started again. */
	pthread_mutex_lock(&vd.mu);
	j->mon_stop = false;
	pthread_mutex_unlock(&vd.mu);
	if (pthread_create(&j->mon, NULL, monitor, j) != 0)
		return verr_set(err, "cannot start the job's monitor thread");
	j->mon_running = true;
	return 0;
}

int vjob_launch(struct vjob *j, const struct vmsg *m, struct verr *err)
{
	struct gexec_req r = { .argv = (const char *const *)m->argv, .env = (const char *const *)m->env,
			       .cwd = "/tmp", .out_fd = -1, .err_fd = -1 };
	struct gexec_state st;
	struct chan c;
	struct verr e;
	pid_t pid;

	r.timeout_ms = m->timeout_ms > 2000000000 ? 2000000000 : (int)m->timeout_ms;
	if (g0_connect(j, &c, err) < 0)
		return verr_wrap(err, "guest g0");
	/* Launched before (a repeated job_launch): attach to it. */
	if (gexec_state(&c, DETACHED_ID, 0, &st, &e) == 0) {
		chan_close(&c);
		log_info("job %lld: mpirun already runs in g0 (pid %d)", (long long)j->id, (int)st.pid);
	} else {
		if (gexec_spawn(&c, &r, DETACHED_ID, &pid, err) < 0) {
			chan_close(&c);
			return verr_wrap(err, "guest g0");
		}
		chan_close(&c);
		log_info("job %lld: mpirun started in g0 (pid %d)", (long long)j->id, (int)pid);
	}
	j->launched = true;
	return start_monitor(j, err);
}

int vjob_reattach(struct vjob *j, struct verr *err)
{
	struct gexec_state st;
	struct chan c;
	struct verr e;

	if (g0_connect(j, &c, err) < 0)
		return verr_wrap(err, "guest g0");
	if (gexec_state(&c, DETACHED_ID, 0, &st, &e) < 0) {
		/* Never launched: the controller's job_launch will come. */
		chan_close(&c);
		return 0;
	}
	chan_close(&c);
	j->launched = true;
	j->state = VJ_RUNNING;
	log_info("job %lld: re-attached to mpirun in g0 (pid %d, %s)", (long long)j->id, (int)st.pid,
		 st.exited ? "ended" : "running");
	return start_monitor(j, err);
}

void vjob_monitor_stop(struct vjob *j)
{
	bool run;

	pthread_mutex_lock(&vd.mu);
	j->mon_stop = true;
	run = j->mon_running;
	j->mon_running = false;
	pthread_mutex_unlock(&vd.mu);
	if (run)
		pthread_join(j->mon, NULL);
}

static bool should_stop(struct vjob *j)
{
	bool s;

	pthread_mutex_lock(&vd.mu);
	s = j->mon_stop;
	pthread_mutex_unlock(&vd.mu);
	return s;
}

static void set_state(struct vjob *j, enum vjob_state st, const char *error)
{
	pthread_mutex_lock(&vd.mu);
	j->state = st;
	if (error)
		snprintf(j->error, sizeof(j->error), "%s", error);
	pthread_cond_broadcast(&vd.cv);
	pthread_mutex_unlock(&vd.mu);
}

/* One job_output (n may be 0: asks where the controller is).  Returns the
 * offset the controller has, -1 when it could not be reached, -2 when it
 * takes no more output for the job. */
static int64_t ship(struct vjob *j, int64_t off, const uint8_t *buf, size_t n)
{
	struct json_object *req = json_object_new_object(), *rep = NULL;
	char *b64 = malloc(sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL));
	const char *e;
	struct verr err;
	int64_t next = -1;

	if (!b64) {
		json_object_put(req);
		return -1;
	}
	sodium_bin2base64(b64, sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL), buf, n,
			  sodium_base64_VARIANT_ORIGINAL);
	json_object_object_add(req, "type", json_object_new_string("job_output"));
	json_object_object_add(req, "node", json_object_new_string(vd.name));
	json_object_object_add(req, "job", json_object_new_int64(j->id));
	json_object_object_add(req, "offset", json_object_new_int64(off));
	json_object_object_add(req, "data", json_object_new_string(b64));
	free(b64);
	if (vd_call(req, &rep, 30000, &err) < 0) {
		log_debug("job %lld: output: %s", (long long)j->id, err.msg);
	} else if ((e = wire_error_text(rep))) {
		log_info("job %lld: the controller takes no more output: %s", (long long)j->id, e);
		next = -2;
	} else {
		struct json_object *v;

		if (json_object_object_get_ex(rep, "next", &v) && json_object_is_type(v, json_type_int) &&
		    json_object_get_int64(v) >= 0)
			next = json_object_get_int64(v);
	}
	json_object_put(req);
	json_object_put(rep);
	return next;
}

/* job_exit: 1 accepted, 0 not (the controller lacks output: *next, or
 * holds the exit for *hold_ms while a node of the job is quiet), -1
 * unreachable, -2 refused. */
static int report_exit(struct vjob *j, const struct gexec_state *st, int64_t size, int64_t *next, int *hold_ms)
{
	struct json_object *req = json_object_new_object(), *rep = NULL, *v;
	struct verr err;
	const char *e;
	int rc = -1;

	json_object_object_add(req, "type", json_object_new_string("job_exit"));
	json_object_object_add(req, "node", json_object_new_string(vd.name));
	json_object_object_add(req, "job", json_object_new_int64(j->id));
	json_object_object_add(req, "size", json_object_new_int64(size));
	json_object_object_add(req, "status", json_object_new_int(st->status & 255));
	json_object_object_add(req, "timeout", json_object_new_boolean(st->timed_out));
	json_object_object_add(req, "lost", json_object_new_boolean(st->lost));
	if (vd_call(req, &rep, 30000, &err) < 0) {
		log_debug("job %lld: exit report: %s", (long long)j->id, err.msg);
	} else if ((e = wire_error_text(rep))) {
		log_warn("job %lld: the controller refused the exit report: %s", (long long)j->id, e);
		rc = -2;
	} else {
		rc = json_object_object_get_ex(rep, "accepted", &v) && json_object_get_boolean(v) ? 1 : 0;
		if (json_object_object_get_ex(rep, "next", &v) && json_object_is_type(v, json_type_int))
			*next = json_object_get_int64(v);
		if (json_object_object_get_ex(rep, "hold_ms", &v) && json_object_is_type(v, json_type_int)) {
			int64_t h = json_object_get_int64(v);

			*hold_ms = h < 10 ? 10 : h > 5000 ? 5000 : (int)h;
		}
	}
	json_object_put(req);
	json_object_put(rep);
	return rc;
}

static void *monitor(void *arg)
{
	struct vjob *j = arg;
	uint8_t *buf = malloc(VD_OUTPUT_CHUNK);
	struct gexec_state st = { 0 };
	struct chan c;
	bool connected = false, exited = false, synced = false;
	int64_t sent = 0;

	if (!buf) {
		set_state(j, VJ_FAILED, "out of memory");
		return NULL;
	}
	while (!should_stop(j)) {
		bool pause = false, caught_up = false;
		struct verr e;

		if (!connected) {
			char why[256];

			if (g0_connect(j, &c, &e) == 0) {
				connected = true;
			} else {
				pthread_mutex_lock(&vd.mu);
				if (!vjob_guests_alive(j, why, sizeof(why))) {
					pthread_mutex_unlock(&vd.mu);
					set_state(j, VJ_FAILED, why);
					break;
				}
				pthread_mutex_unlock(&vd.mu);
				usleep(500000);
				continue;
			}
		}
		/* Output first, in chunks, from where the controller is. */
		while (!should_stop(j)) {
			size_t n = 0;
			long long size;
			int64_t next;

			if (synced) {
				if (gexec_output(&c, DETACHED_ID, sent, VD_OUTPUT_CHUNK, buf, &n, &size, &e) < 0) {
					log_debug("job %lld: g0: %s", (long long)j->id, e.msg);
					chan_close(&c);
					connected = false;
					pause = true;
					break;
				}
				if (n == 0) {
					caught_up = true;
					break;
				}
			}
			next = ship(j, sent, buf, n);
			if (next == -2)
				goto out;
			if (next < 0) {
				pause = true;
				break;
			}
			synced = true;
			sent = next;
		}
		if (pause) {
			sleep(1);
			continue;
		}
		if (exited && caught_up) {
			int64_t next = sent;
			int hold_ms = 0;
			int r = report_exit(j, &st, sent, &next, &hold_ms);

			if (r == 1) {
				log_info("job %lld: mpirun ended (status %d%s), %lld bytes of output delivered",
					 (long long)j->id, st.status, st.timed_out ? ", timed out" : "", (long long)sent);
				set_state(j, VJ_EXITED, NULL);
				break;
			}
			if (r == -2)
				break;
			if (r == 0 && hold_ms)
				usleep((useconds_t)hold_ms * 1000);
			else if (r == 0)
				sent = next;
			else
				sleep(1);
			continue;
		}
		if (exited)
			continue;
		if (gexec_state(&c, DETACHED_ID, 500, &st, &e) < 0) {
			log_debug("job %lld: g0: %s", (long long)j->id, e.msg);
			chan_close(&c);
			connected = false;
			usleep(200000);
			continue;
		}
		/* Exited: the next round drains what it wrote last, then reports. */
		exited = st.exited;
	}
out:
	/* Until guest 0's session has closed its end: a pause for a
	 * checkpoint follows, and CRIU cannot dump a guest that still holds
	 * this connection (nodeagent/README.md, "Checkpoints"). */
	if (connected && chan_close_wait(&c, 3000) < 0)
		log_warn("job %lld: g0's agent did not close its end of the monitor's connection within 3 s",
			 (long long)j->id);
	free(buf);
	return NULL;
}
