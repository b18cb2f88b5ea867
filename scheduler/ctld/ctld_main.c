/*
 * vhpc-ctld: the cluster's controller.  It keeps the queue and the nodes in
 * SQLite (scheduler/ctld/store.c), gang-schedules jobs onto the node agents
 * (vhpcd) that register with it, and answers the vhpc CLI.  Every message
 * is a munge-signed wire message (lib/wire.c) on a TCP connection of its
 * own; scheduler/PROTOCOL.md lists them.
 *
 * Crash-only: SIGTERM and kill -9 leave the same state behind, the store's,
 * and a restart resumes from it (ctld_state_load).
 */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/proc.h"
#include "lib/wire.h"
#include "ctld.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* One message from a CLI, a node agent or a peer: what it may send decides
 * whether it is handled. */
static struct json_object *handle(struct json_object *msg, const struct wire_peer *peer,
				  const char *who, void *ctx)
{
	struct json_object *r;
	struct cmsg m;
	struct verr e;

	if (ctld_msg_parse(msg, &m, &e) < 0) {
		log_warn("%s (uid %u): rejected message: %s", who, (unsigned)peer->uid, e.msg);
		r = wire_error("%s", e.msg);
		json_object_object_add(r, "code", json_object_new_string("invalid"));
		return r;
	}
	if (ctld_msg_node_only(m.type) && peer->uid != 0) {
		log_warn("%s (uid %u): rejected '%s': not root", who, (unsigned)peer->uid, wire_type(msg));
		r = wire_error("'%s' is a message of node agents and admins: only root may send it", wire_type(msg));
		json_object_object_add(r, "code", json_object_new_string("denied"));
	} else {
		log_debug("%s (uid %u): %s", who, (unsigned)peer->uid, wire_type(msg));
		r = ctld_handle(ctx, &m, peer);
	}
	ctld_msg_free(&m);
	return r;
}

/* What the accept thread serves, for the process's life. */
struct listener {
	int fd;
	struct ctld *ctl;
};

static void *accept_thread(void *arg)
{
	struct listener *l = arg;

	/* Small stacks: a thousand nodes may heartbeat at once. */
	wire_serve(l->fd, 256 * 1024, handle, l->ctl);
}

static int setup_log(const char *path, struct verr *err)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return verr_errno(err, "--log %s", path);
	dup2(fd, STDERR_FILENO);
	close(fd);
	return 0;
}

/* The spool: --spool, else the cluster file's, else beside the state
 * folder (a folder of its own, where a filesystem of its own can go). */
static int set_spool(struct ctld *ctl, const char *opt, struct verr *err)
{
	const char *dir = opt ? opt : ctl->cl.ctld_spool;
	size_t n = strlen(ctl->state_dir);

	while (n > 1 && ctl->state_dir[n - 1] == '/')
		n--;
	if (dir)
		snprintf(ctl->spool_dir, sizeof(ctl->spool_dir), "%s", dir);
	else
		snprintf(ctl->spool_dir, sizeof(ctl->spool_dir), "%.*s-spool", (int)n, ctl->state_dir);
	if (!ctl->spool_dir[0] || strlen(ctl->spool_dir) >= CLUSTER_SPOOL_MAX)
		return verr_set(err, "--spool: expected a folder's path of at most %d bytes", CLUSTER_SPOOL_MAX - 1);
	return ctld_spool_open(ctl, err);
}

/* The log, the cluster file, and where to listen: --listen, else the
 * cluster file's controller port on every address. */
static int setup(struct ctld *ctl, struct ctld_opts *o, char *listen_buf, size_t len)
{
	struct verr e;
	char host[256];
	int port;

	if (o->log && setup_log(o->log, &e) < 0) {
		fprintf(stderr, "vhpc-ctld: %s\n", e.msg);
		return 1;
	}
	if (cluster_load(o->cluster, &ctl->cl, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	if (o->listen)
		return 0;
	if (!ctl->cl.controller || hostport_parse(ctl->cl.controller, false, host, sizeof(host), &port) < 0) {
		log_err("no --listen, and the cluster file has no usable `controller: HOST:PORT`");
		return 2;
	}
	snprintf(listen_buf, len, "0.0.0.0:%d", port);
	o->listen = listen_buf;
	return 0;
}

/* The state folder, the spool, the image store and the database. */
static int open_state(struct ctld *ctl, const struct ctld_opts *o)
{
	char path[700];
	struct verr e;

	e.msg[0] = 0;
	if (mkdir_p(ctl->state_dir, 0700, &e) < 0 || chmod(ctl->state_dir, 0700) < 0) {
		log_err("%s", e.msg[0] ? e.msg : "cannot set up the state dir");
		return 1;
	}
	/* The database's room before the database: a restart on a full disk
	 * first frees the reserve it will need. */
	if (set_spool(ctl, o->spool, &e) < 0 || ctld_room_open(ctl, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/images", ctl->state_dir);
	if (imgstore_open(&ctl->images, path, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/ctld.db", ctl->state_dir);
	if (store_open(&ctl->st, path, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	return 0;
}

/* Listens, recovers the state, and starts the scheduler and the listener's
 * threads. */
static int serve(struct ctld *ctl, const char *listen_spec)
{
	struct verr e;
	pthread_t th;
	int lfd, port;
	char a[32];

	lfd = tcp_listen(listen_spec, &port, &e);
	if (lfd < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	pthread_mutex_lock(&ctl->mu);
	/* Content an image removed before a restart kept for its jobs goes
	 * once they have ended; the first collection finds out. */
	ctl->img_gc_pending = true;
	if (ctld_state_load(ctl, &e) < 0) {
		pthread_mutex_unlock(&ctl->mu);
		log_err("%s", e.msg);
		return 1;
	}
	/* Jobs a checkpoint left paused when the last controller died. */
	ctld_ckpt_recover(ctl);
	pthread_mutex_unlock(&ctl->mu);
	static struct listener l;

	l = (struct listener){ lfd, ctl };
	if (pthread_create(&th, NULL, ctld_sched_thread, ctl) != 0 ||
	    pthread_create(&th, NULL, accept_thread, &l) != 0) {
		log_err("cannot start threads");
		return 1;
	}
	log_info("listening on %s (port %d), state in %s, heartbeats every %d ms (%d missed: down)",
		 listen_spec, port, ctl->state_dir, ctl->hb_interval_ms, ctl->hb_misses);
	log_info("job output in %s, at most %s a job; at most %lld jobs waiting or running per user; ended "
		 "jobs leave memory after %lld s", ctl->spool_dir, fmt_size(ctl->cl.ctld_output_limit, a, sizeof(a)),
		 ctl->cl.ctld_max_jobs_per_user, ctl->cl.ctld_keep_ended);
	log_info("ready");
	return 0;
}

int main(int argc, char **argv)
{
	struct ctld_opts o;
	struct ctld *ctl;
	char listen_buf[300];
	struct verr e;
	sigset_t sigs;
	int rc, sig;

	vlog_init("vhpc-ctld");
	if (!(ctl = ctld_new())) {
		fprintf(stderr, "vhpc-ctld: out of memory\n");
		return 1;
	}
	if ((rc = ctld_opts_parse(ctl, &o, argc, argv)) != CTLD_OPTS_RUN)
		return rc;
	if ((rc = setup(ctl, &o, listen_buf, sizeof(listen_buf))) || (rc = open_state(ctl, &o)))
		return rc;
	/* Signals are taken by sigwait below; threads inherit the mask. */
	signal(SIGPIPE, SIG_IGN);
	proc_block_stop_signals(&sigs);
	if (o.metrics && ctld_metrics_start(ctl, o.metrics, o.metrics_token, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	if ((rc = serve(ctl, o.listen)))
		return rc;
	do
		sig = 0;
	while (sigwait(&sigs, &sig) != 0 || sig == SIGHUP);
	/* Everything that matters is in the store already. */
	log_info("signal %d: stopping", sig);
	_exit(0);
}
