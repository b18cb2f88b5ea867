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
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "lib/wire.h"
#include "ctld.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vhpc-ctld [OPTIONS]\n"
		"The vhpc cluster controller (scheduler/PROTOCOL.md).\n\n"
		"  --listen ADDR:PORT        where nodes and users reach it (default: 0.0.0.0 and\n"
		"                            the port of `controller:` in the cluster file)\n"
		"  --state DIR               database and the cluster's image store\n"
		"                            (default $VHPC_STATE_DIR/ctld)\n"
		"  --spool DIR               job output (default: the cluster file's ctld.spool, else\n"
		"                            the state folder's path with -spool: $VHPC_STATE_DIR/ctld-spool)\n"
		"  --cluster FILE            cluster file (default $VHPC_CLUSTER, else configs/cluster.yaml)\n"
		"  --heartbeat-interval MS   how often nodes report (default 2000)\n"
		"  --heartbeat-misses N      missed reports before a node is down (default 3)\n"
		"  --sched-depth N           queued jobs each scheduling pass considers (default 100)\n"
		"  --rpc-timeout MS          longest wait for a node to start or stop a job (default 300000)\n"
		"  --log FILE                append log lines here instead of stderr\n"
		"  --help, --version\n");
}

/* The controller this process serves: wire_serve's handler has no argument
 * of its own to carry it (lib/wire.h), so handle() alone reads it here. */
static struct ctld *served;

/* One message from a CLI, a node agent or a peer: what it may send decides
 * whether it is handled. */
static struct json_object *handle(struct json_object *msg, const struct wire_peer *peer,
				  const char *who)
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
		r = ctld_handle(served, &m, peer);
	}
	ctld_msg_free(&m);
	return r;
}

static void *accept_thread(void *arg)
{
	/* Small stacks: a thousand nodes may heartbeat at once. */
	wire_serve((int)(intptr_t)arg, 256 * 1024, handle);
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

enum { O_LISTEN = 256, O_STATE, O_SPOOL, O_CLUSTER, O_HBI, O_HBM, O_DEPTH, O_RPC, O_LOG, O_HELP, O_VERSION };

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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", 1, 0, O_LISTEN }, { "state", 1, 0, O_STATE }, { "spool", 1, 0, O_SPOOL },
		{ "cluster", 1, 0, O_CLUSTER },
		{ "heartbeat-interval", 1, 0, O_HBI }, { "heartbeat-misses", 1, 0, O_HBM },
		{ "sched-depth", 1, 0, O_DEPTH }, { "rpc-timeout", 1, 0, O_RPC }, { "log", 1, 0, O_LOG },
		{ "help", 0, 0, O_HELP }, { "version", 0, 0, O_VERSION }, { 0 }
	};
	const char *listen_spec = NULL, *cluster = NULL, *logf = NULL, *spool = NULL;
	char listen_buf[300], db[700];
	long long v;
	struct verr e;
	sigset_t sigs;
	pthread_t th;
	int c, lfd, port, sig;
	struct ctld *ctl = calloc(1, sizeof(*ctl));

	vlog_init("vhpc-ctld");
	if (!ctl) {
		fprintf(stderr, "vhpc-ctld: out of memory\n");
		return 1;
	}
	pthread_mutex_init(&ctl->mu, NULL);
	pthread_mutex_init(&ctl->spool_mu, NULL);
	pthread_cond_init(&ctl->changed, NULL);
	pthread_cond_init(&ctl->kick, NULL);
	ctl->spool_fd = -1;
	ctl->room.state_fd = -1;
	ctl->hb_interval_ms = 2000;
	ctl->hb_misses = 3;
	ctl->sched_depth = 100;
	ctl->rpc_timeout_ms = 300000;
	snprintf(ctl->state_dir, sizeof(ctl->state_dir), "%s/ctld", vhpc_state_dir());
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_LISTEN: listen_spec = optarg; break;
		case O_STATE:
			if (!*optarg || strlen(optarg) >= sizeof(ctl->state_dir) - 64) {
				fprintf(stderr, "vhpc-ctld: --state: expected a directory path\n");
				return 2;
			}
			snprintf(ctl->state_dir, sizeof(ctl->state_dir), "%s", optarg);
			break;
		case O_SPOOL: spool = optarg; break;
		case O_CLUSTER: cluster = optarg; break;
		case O_LOG: logf = optarg; break;
		case O_HBI:
		case O_HBM:
		case O_DEPTH:
		case O_RPC: {
			static const long long lim[][2] = { { 100, 600000 }, { 1, 100 }, { 1, 100000 }, { 1000, 3600000 } };
			static const char *const names[] = { "--heartbeat-interval", "--heartbeat-misses",
							     "--sched-depth", "--rpc-timeout" };
			int k = c - O_HBI;

			if (parse_ll(optarg, lim[k][0], lim[k][1], &v) < 0) {
				fprintf(stderr, "vhpc-ctld: %s: expected a number %lld..%lld, got '%s'\n",
					names[k], lim[k][0], lim[k][1], optarg);
				return 2;
			}
			if (c == O_HBI)
				ctl->hb_interval_ms = (int)v;
			else if (c == O_HBM)
				ctl->hb_misses = (int)v;
			else if (c == O_DEPTH)
				ctl->sched_depth = (int)v;
			else
				ctl->rpc_timeout_ms = (int)v;
			break;
		}
		case O_HELP:
		case 'h':
			usage(stdout);
			return 0;
		case O_VERSION:
			printf("vhpc-ctld %s\n", VHPC_VERSION);
			return 0;
		default:
			fprintf(stderr, "vhpc-ctld: unknown option or missing value: '%s'\n", argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "vhpc-ctld: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (logf && setup_log(logf, &e) < 0) {
		fprintf(stderr, "vhpc-ctld: %s\n", e.msg);
		return 1;
	}
	if (cluster_load(cluster, &ctl->cl, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	if (!listen_spec) {
		char host[256];

		if (!ctl->cl.controller || hostport_parse(ctl->cl.controller, false, host, sizeof(host), &port) < 0) {
			log_err("no --listen, and the cluster file has no usable `controller: HOST:PORT`");
			return 2;
		}
		snprintf(listen_buf, sizeof(listen_buf), "0.0.0.0:%d", port);
		listen_spec = listen_buf;
	}
	e.msg[0] = 0;
	if (mkdir_p(ctl->state_dir, 0700, &e) < 0 || chmod(ctl->state_dir, 0700) < 0) {
		log_err("%s", e.msg[0] ? e.msg : "cannot set up the state dir");
		return 1;
	}
	/* The database's room before the database: a restart on a full disk
	 * first frees the reserve it will need. */
	if (set_spool(ctl, spool, &e) < 0 || ctld_room_open(ctl, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	snprintf(db, sizeof(db), "%s/images", ctl->state_dir);
	if (imgstore_open(&ctl->images, db, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	snprintf(db, sizeof(db), "%s/ctld.db", ctl->state_dir);
	if (store_open(&ctl->st, db, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	/* Signals are taken by sigwait below; threads inherit the mask. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
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
	pthread_mutex_unlock(&ctl->mu);
	served = ctl;
	if (pthread_create(&th, NULL, ctld_sched_thread, ctl) != 0 ||
	    pthread_create(&th, NULL, accept_thread, (void *)(intptr_t)lfd) != 0) {
		log_err("cannot start threads");
		return 1;
	}
	log_info("listening on %s (port %d), state in %s, heartbeats every %d ms (%d missed: down)",
		 listen_spec, port, ctl->state_dir, ctl->hb_interval_ms, ctl->hb_misses);
	{
		char a[32];

		log_info("job output in %s, at most %s a job; at most %lld jobs waiting or running per user; ended "
			 "jobs leave memory after %lld s", ctl->spool_dir, fmt_size(ctl->cl.ctld_output_limit, a, sizeof(a)),
			 ctl->cl.ctld_max_jobs_per_user, ctl->cl.ctld_keep_ended);
	}
	log_info("ready");
	for (;;) {
		if (sigwait(&sigs, &sig) != 0)
			continue;
		if (sig == SIGHUP)
			continue;
		break;
	}
	/* Everything that matters is in the store already. */
	log_info("signal %d: stopping", sig);
	_exit(0);
}
