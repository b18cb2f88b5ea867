/*
 * guest_open: the controller asks, for a user it has checked (the job's
 * owner or root: vhpc exec, vhpc shell), for a stream to one of a job's
 * guests here.  The stream goes to that guest's agent and nowhere else:
 * the message names only the job and the guest's index, and the socket
 * is the one this node agent made for that guest (opened without
 * following a link a guest may have put in its place).  What runs on it
 * is the guestd channel under the job's key, between the user's vhpc and
 * the guest; this side only relays, sealed end to end (lib/wirepipe.h)
 * with the key the message carries.
 *
 * A checkpoint of a driver that cannot save such a stream (a container
 * guest's end is a socket whose peer is this agent) either waits for
 * none or, asked to (a drain), closes them: vd_sessions_close.
 */
#include "lib/clock.h"
#include "lib/gexec.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "lib/wirepipe.h"
#include "daemon.h"

#include <json-c/json.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define OPEN_TIMEOUT_MS 5000

struct stream {
	int guest_fd;
	int64_t job;
	int guest;
	uint8_t key[WPIPE_KEY_LEN];
	struct stream *next;
};

/* Every open stream, so that a checkpoint can close a job's; under vd.mu,
 * which also keeps guest_fd from being closed under a shutdown. */
static struct stream *open_streams;

/* Counts the job's open streams (ckpt.c reads the count) and lists or
 * unlists s. */
static void count(struct stream *s, int by)
{
	struct vjob *j;

	pthread_mutex_lock(&vd.mu);
	if (by > 0) {
		s->next = open_streams;
		open_streams = s;
	} else {
		for (struct stream **p = &open_streams; *p; p = &(*p)->next)
			if (*p == s) {
				*p = s->next;
				break;
			}
	}
	if ((j = vd_job_find(s->job)) && j->sessions + by >= 0)
		j->sessions += by;
	pthread_mutex_unlock(&vd.mu);
}

/* Half-closes each of the job's streams towards its guest: guestd sees
 * its client gone and stops the session's command (TERM, its grace,
 * KILL); the relay passes on what is still said and ends when guestd's
 * side closes, so no session is counted once its process is gone. */
int vd_sessions_close(int64_t job, int wait_ms, struct verr *err)
{
	uint64_t until = now_ns() + (uint64_t)wait_ms * 1000000ull;
	struct vjob *j;
	int n = 0, left;

	pthread_mutex_lock(&vd.mu);
	for (struct stream *s = open_streams; s; s = s->next)
		if (s->job == job && shutdown(s->guest_fd, SHUT_WR) == 0)
			n++;
	for (;;) {
		j = vd_job_find(job);
		left = j ? j->sessions : 0;
		if (left == 0 || now_ns() >= until)
			break;
		pthread_mutex_unlock(&vd.mu);
		usleep(50 * 1000);
		pthread_mutex_lock(&vd.mu);
	}
	pthread_mutex_unlock(&vd.mu);
	if (n)
		log_info("job %lld: %d exec or shell session%s closed for a checkpoint%s", (long long)job, n,
			 n == 1 ? "" : "s", left ? ", not all ended" : "");
	if (left)
		return verr_set(err, "%d vhpc exec or vhpc shell session%s still open %d s after %s connection%s "
				"closed", left, left == 1 ? " was" : "s were", wait_ms / 1000, left == 1 ? "its" : "their",
				left == 1 ? " was" : "s were");
	return 0;
}

static void relay(int fd, void *arg)
{
	struct stream *s = arg;

	if (fd >= 0) {
		int rc = wpipe_relay(s->guest_fd, fd, s->key, false);

		log_info("job %lld: the exec stream to g%d ended%s", (long long)s->job, s->guest,
			 rc ? " (cut or reset)" : "");
	}
	count(s, -1);
	close(s->guest_fd);
	sodium_memzero(s->key, sizeof(s->key));
	free(s);
}

/* Guest m->guest's access, when it is one of the job's guests here. */
static int find_guest(const struct vmsg *m, struct na_guest_access *a, struct verr *err)
{
	struct vjob *j;
	int rc = -1;

	pthread_mutex_lock(&vd.mu);
	j = vd_job_find(m->job);
	if (!j || j->stopping || !j->nj) {
		verr_set(err, "job %lld is not on this node", (long long)m->job);
		goto out;
	}
	/* Not into a checkpoint that may be closing the others. */
	if ((j->ckpt_busy || j->paused) && na_job_ckpt_no_sessions(j->nj)) {
		verr_set(err, "job %lld is being checkpointed on this node; open the session again once that is done",
			 (long long)m->job);
		goto out;
	}
	if (j->state != VJ_READY && j->state != VJ_RUNNING && j->state != VJ_EXITED) {
		verr_set(err, "job %lld: its guests here are %s", (long long)m->job,
			 j->state == VJ_FAILED ? "gone (it failed)" : "not ready yet");
		goto out;
	}
	for (int k = 0; k < na_job_nguests(j->nj); k++) {
		struct na_guest_info gi;

		if (na_job_guest_info(j->nj, k, &gi, err) < 0)
			goto out;
		if (gi.index == m->guest) {
			rc = na_job_guest_access(j->nj, k, a, err);
			goto out;
		}
	}
	verr_set(err, "job %lld: guest g%d is not on this node", (long long)m->job, m->guest);
out:
	pthread_mutex_unlock(&vd.mu);
	return rc;
}

struct json_object *vd_guest_open(const struct vmsg *m)
{
	struct na_guest_access a;
	struct json_object *r;
	struct stream *s;
	struct verr e;
	int fd;

	if (find_guest(m, &a, &e) < 0 ||
	    (fd = gexec_open_stream(a.sock, a.vsock_port, OPEN_TIMEOUT_MS, &e)) < 0) {
		log_warn("job %lld: guest_open g%d: %s", (long long)m->job, m->guest, e.msg);
		return wire_error("%s", e.msg);
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return wire_error("out of memory");
	}
	s->guest_fd = fd;
	s->job = m->job;
	s->guest = m->guest;
	memcpy(s->key, m->pipe_key, sizeof(s->key));
	log_info("job %lld: exec stream to g%d opened", (long long)m->job, m->guest);
	count(s, 1);
	wire_serve_takeover(relay, s);
	r = json_object_new_object();
	json_object_object_add(r, "type", json_object_new_string("guest_opened"));
	json_object_object_add(r, "job", json_object_new_int64(m->job));
	json_object_object_add(r, "guest", json_object_new_int(m->guest));
	return r;
}
