/*
 * exec: a stream from a user's vhpc to one of its running job's guests
 * (vhpc exec, vhpc shell).  The controller decides who may: the job's
 * owner or root, as for cancel (the same `denied` otherwise).  It then
 * asks the guest's node for a stream to that guest's agent (guest_open:
 * root to vhpcd, naming only the job and the guest) and relays between
 * the two connections.  The stream is sealed end to end between vhpc and
 * vhpcd under a key made here for it alone (lib/wirepipe.h), which both
 * learn only in munge-sealed messages; inside it, vhpc and the guest run
 * the guestd channel under the job's key, which the reply gives the user
 * (its guests hold it too), with the folder and environment the ranks get.
 */
#include "lib/argv.h"
#include "lib/bytes.h"
#include "lib/log.h"
#include "lib/wire.h"
#include "lib/wirepipe.h"
#include "scheduler/launch.h"
#include "ctld.h"

#include <json-c/json.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A stream holds a connection of vhpc-ctld for as long as it lasts, where
 * every other request holds one for seconds: without a bound per user,
 * one user's idle shells could take every connection there is
 * (VHPC_WIRE_MAX_CONNS), and the cluster's requests with them. */
#define EXEC_MAX_PER_USER 32

static struct {
	pthread_mutex_t mu;
	struct { uid_t uid; int n; } u[64];
} open_streams = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Counts one more stream of uid: false when it has its limit, or when
 * too many users have streams open at once (root is not counted). */
static bool stream_take(uid_t uid)
{
	int free_slot = -1;
	bool ok = false;

	if (uid == 0)
		return true;
	pthread_mutex_lock(&open_streams.mu);
	for (int i = 0; i < 64; i++) {
		if (open_streams.u[i].n && open_streams.u[i].uid == uid) {
			if (open_streams.u[i].n < EXEC_MAX_PER_USER) {
				open_streams.u[i].n++;
				ok = true;
			}
			goto out;
		}
		if (!open_streams.u[i].n && free_slot < 0)
			free_slot = i;
	}
	if (free_slot >= 0) {
		open_streams.u[free_slot].uid = uid;
		open_streams.u[free_slot].n = 1;
		ok = true;
	}
out:
	pthread_mutex_unlock(&open_streams.mu);
	return ok;
}

static void stream_give(uid_t uid)
{
	if (uid == 0)
		return;
	pthread_mutex_lock(&open_streams.mu);
	for (int i = 0; i < 64; i++)
		if (open_streams.u[i].n && open_streams.u[i].uid == uid) {
			open_streams.u[i].n--;
			break;
		}
	pthread_mutex_unlock(&open_streams.mu);
}

struct target {
	char node[65], addr[64];
	char key_hex[2 * CHAN_KEY_LEN + 1];
	char cwd[BIND_PATH_MAX];
	char **env;
	bool simulated;
};

/* Under ctl->mu: where guest m->guest of job m->id runs, for uid. */
static struct json_object *find(struct ctld *ctl, const struct cmsg *m, uid_t uid, struct target *t)
{
	struct json_object *err = NULL;
	bool owned;
	struct cjob *j = ctld_user_job(ctl, m->id, uid, &owned, &err);
	const struct cnode *n;

	if (!j)
		return err;
	if (j->state != JOB_RUNNING)
		err = store_job_state_final(j->state)
			      ? ctld_error("ended", "job %lld has ended (%s)", (long long)j->id, store_job_state_names[j->state])
			      : ctld_error("invalid", "job %lld is not running yet (%s)", (long long)j->id,
					   store_job_state_names[j->state]);
	else if (m->guest >= j->nguests || !j->alloc)
		err = ctld_error("invalid", "job %lld has %d guest%s (g0..g%d), not g%d", (long long)j->id, j->nguests,
				 j->nguests == 1 ? "" : "s", j->nguests - 1, m->guest);
	if (err)
		goto out;
	n = &ctl->nodes[j->alloc[m->guest].node];
	snprintf(t->node, sizeof(t->node), "%s", n->name);
	snprintf(t->addr, sizeof(t->addr), "%s", n->addr);
	t->simulated = n->simulated;
	snprintf(t->key_hex, sizeof(t->key_hex), "%s", j->key_hex);
	snprintf(t->cwd, sizeof(t->cwd), "%s", j->paths.wdir[0] ? j->paths.wdir : "/tmp");
	t->env = launch_exec_env(&j->spec, j->paths.home);
	if (!t->env)
		err = ctld_error("internal", "out of memory");
out:
	if (owned)
		ctld_job_free(j);
	return err;
}

struct splice {
	int node_fd;
	uid_t uid;
};

static void splice_fd(int fd, void *arg)
{
	struct splice *sp = arg;

	if (fd >= 0)
		wpipe_splice(fd, sp->node_fd);
	close(sp->node_fd);
	stream_give(sp->uid);
	free(sp);
}

struct json_object *ctld_exec(struct ctld *ctl, const struct cmsg *m, const struct wire_peer *peer)
{
	struct target t = { 0 };
	struct json_object *r, *req, *rep = NULL, *ev;
	uint8_t pk[WPIPE_KEY_LEN];
	char pk_hex[2 * WPIPE_KEY_LEN + 1];
	struct wire_peer np = { .uid = 0 };
	struct splice *sp = NULL;
	struct verr e;
	int fd = -1;

	pthread_mutex_lock(&ctl->mu);
	r = find(ctl, m, peer->uid, &t);
	pthread_mutex_unlock(&ctl->mu);
	if (r) {
		argv_free(t.env);
		return r;
	}
	if (t.simulated) {
		argv_free(t.env);
		return ctld_error("invalid", "job %lld: g%d is on simulated node %s, which runs no guests",
				  (long long)m->id, m->guest, t.node);
	}
	if (!stream_take(peer->uid)) {
		argv_free(t.env);
		log_warn("exec job %lld g%d for uid %u: refused, %d streams of this user are open", (long long)m->id,
			 m->guest, (unsigned)peer->uid, EXEC_MAX_PER_USER);
		return ctld_error("full", "uid %u has %d vhpc exec and vhpc shell sessions open, the most one user may; "
			      "end one first", (unsigned)peer->uid, EXEC_MAX_PER_USER);
	}
	random_bytes(pk, sizeof(pk));
	hex_encode(pk, sizeof(pk), pk_hex);
	sodium_memzero(pk, sizeof(pk));
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("guest_open"));
	json_object_object_add(req, "node", json_object_new_string(t.node));
	json_object_object_add(req, "job", json_object_new_int64(m->id));
	json_object_object_add(req, "guest", json_object_new_int(m->guest));
	json_object_object_add(req, "pipe_key", json_object_new_string(pk_hex));
	if (!(sp = malloc(sizeof(*sp))) ||
	    wire_call_open(t.addr, req, &rep, &np, ctl->rpc_timeout_ms, &fd, &e) < 0 || fd < 0 ||
	    (np.uid != 0 && verr_set(&e, "the answer came from uid %u, not root", (unsigned)np.uid) < 0)) {
		if (fd >= 0 && np.uid != 0) {
			close(fd);
			json_object_put(rep);
			rep = NULL;
		}
		if (!sp)
			verr_set(&e, "out of memory");
		r = ctld_error("internal", "job %lld: g%d on node %s: %s", (long long)m->id, m->guest, t.node,
			       rep ? wire_error_text(rep) : e.msg);
		log_warn("exec job %lld g%d for uid %u: %s", (long long)m->id, m->guest, (unsigned)peer->uid,
			 rep ? wire_error_text(rep) : e.msg);
		free(sp);
		stream_give(peer->uid);
		goto out;
	}
	log_info("exec job %lld g%d for uid %u through node %s", (long long)m->id, m->guest, (unsigned)peer->uid,
		 t.node);
	r = ctld_reply("exec_ready");
	json_object_object_add(r, "id", json_object_new_int64(m->id));
	json_object_object_add(r, "guest", json_object_new_int(m->guest));
	json_object_object_add(r, "node", json_object_new_string(t.node));
	json_object_object_add(r, "key", json_object_new_string(t.key_hex));
	json_object_object_add(r, "pipe_key", json_object_new_string(pk_hex));
	json_object_object_add(r, "cwd", json_object_new_string(t.cwd));
	ev = json_object_new_array();
	for (char **p = t.env; *p; p++)
		json_object_array_add(ev, json_object_new_string(*p));
	json_object_object_add(r, "env", ev);
	sp->node_fd = fd;
	sp->uid = peer->uid;
	wire_serve_takeover(splice_fd, sp);
out:
	json_object_put(req);
	json_object_put(rep);
	sodium_memzero(pk_hex, sizeof(pk_hex));
	sodium_memzero(t.key_hex, sizeof(t.key_hex));
	argv_free(t.env);
	return r;
}
