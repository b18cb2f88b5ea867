/*
 * vhpcd: the node agent daemon.  It registers this node (topology, capacity,
 * RDMA devices) with vhpc-ctld, heartbeats, and runs its part of jobs on
 * the controller's word: job_prepare (placement, the job network with its
 * VXLAN to the job's other nodes, guests), job_launch (mpirun, detached,
 * in guest 0) and job_stop.  Messages: scheduler/PROTOCOL.md.
 *
 * Crash-only: SIGTERM and kill -9 leave the same behind, running guests in
 * job dirs whose lock is free; a restarted vhpcd takes them over.
 */
#include "lib/cluster.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/proc.h"
#include "lib/paths.h"
#include "daemon.h"
#include "nodeagent/place/place.h"

#include <fcntl.h>
#include <limits.h>
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vhpcd --listen ADDR:PORT [OPTIONS]\n"
		"The vhpc node agent (scheduler/PROTOCOL.md).\n\n"
		"  --listen ADDR:PORT     where the controller reaches this node (ADDR: this\n"
		"                         node's IPv4 address)\n"
		"  --name NAME            node name (default: the hostname)\n"
		"  --underlay ADDR        address job VXLANs run over (default: the --listen one)\n"
		"  --controller HOST:PORT vhpc-ctld (default: $VHPC_CONTROLLER, else `controller:`\n"
		"                         of the cluster file)\n"
		"  --spool-size SIZE      tmpfs for a job's output on its guest-0 node (default 64M)\n"
		"  --image-cache DIR      images pulled from vhpc-ctld's store (default\n"
		"                         $VHPC_STATE_DIR/image-cache)\n"
		"  --image-cache-size SIZE  what the cache may hold; least recently used images\n"
		"                         not in use go first (default 20G)\n"
		"  --cpus LIST            this node is only these cpus of the machine (e.g. 0-15);\n"
		"                         several vhpcds can share a machine this way\n"
		"  --simulate N           be N fake nodes NAME-0..NAME-<N-1> that start nothing\n"
		"                         (scheduling benchmarks)\n"
		"  --topology SPEC        with --simulate: each fake node's hwloc topology, e.g.\n"
		"                         \"synthetic:pack:2 numa:2 core:16 pu:2\"\n"
		"  --sim-runtime MS       with --simulate: how long a job 'runs' (default 0)\n"
		"  --log FILE             append log lines here instead of stderr\n"
		"Runtime dir: $VHPC_RUN_DIR (one per vhpcd on a machine).\n");
}

static int die2(const char *fmt, const char *a)
{
	fprintf(stderr, "vhpcd: ");
	fprintf(stderr, fmt, a);
	fprintf(stderr, "\n");
	return 2;
}

static void *serve_thread(void *arg)
{
	vd_serve((int)(intptr_t)arg);
	return NULL;
}

enum { O_LISTEN = 256, O_NAME, O_UNDERLAY, O_CTL, O_SPOOL, O_SIM, O_TOPO, O_SIMRT, O_LOG, O_HELP, O_VERSION,
       O_CPUS, O_CACHE, O_CACHE_SIZE };

/* What the command line says, before it is checked against the machine. */
struct args {
	const char *listen, *underlay, *ctl, *topo, *log;
	int cpus[4096];
	size_t ncpus;
};

/* The options kept as given, checked against the machine later. */
static const char **str_opt(struct args *a, int c)
{
	switch (c) {
	case O_LISTEN: return &a->listen;
	case O_UNDERLAY: return &a->underlay;
	case O_CTL: return &a->ctl;
	case O_TOPO: return &a->topo;
	case O_LOG: return &a->log;
	default: return NULL;
	}
}

#define NOT_VALUE_OPT (-2)

/* The options whose value is checked here: -1 to go on, 2 after saying
 * what is wrong, NOT_VALUE_OPT if C is none of them. */
static int value_opt(struct args *a, int c, const char *arg)
{
	long long v;

	switch (c) {
	case O_NAME:
		if (!ident_ok(arg, 48))
			return die2("--name '%s': letters, digits, '.', '_', '-' (at most 48)", arg);
		snprintf(vd.name, sizeof(vd.name), "%s", arg);
		return -1;
	case O_SPOOL:
		if (parse_size(arg, &vd.spool_size) < 0 || vd.spool_size < (1u << 20))
			return die2("--spool-size '%s': expected a size of at least 1M", arg);
		return -1;
	case O_SIM:
		if (parse_ll(arg, 1, 8000, &v) < 0)
			return die2("--simulate '%s': expected 1..8000 nodes", arg);
		vd.simulate = (int)v;
		return -1;
	case O_SIMRT:
		if (parse_ll(arg, 0, 86400000, &v) < 0)
			return die2("--sim-runtime '%s': expected milliseconds", arg);
		vd.sim_runtime_ms = (int)v;
		return -1;
	case O_CACHE:
		if (arg[0] != '/' || strlen(arg) >= sizeof(vd.cache) - 100)
			return die2("--image-cache '%s': expected an absolute folder path", arg);
		snprintf(vd.cache, sizeof(vd.cache), "%s", arg);
		return -1;
	case O_CACHE_SIZE:
		if (parse_size(arg, &vd.cache_size) < 0 || vd.cache_size < (16u << 20))
			return die2("--image-cache-size '%s': expected a size of at least 16M", arg);
		return -1;
	case O_CPUS:
		if (cpulist_parse(arg, a->cpus, 4096, &a->ncpus) < 0 || !a->ncpus)
			return die2("--cpus '%s': expected a cpu list such as 0-3,8", arg);
		return -1;
	default:
		return NOT_VALUE_OPT;
	}
}

/* Returns -1 to go on, else the exit status (--help, --version, a bad option). */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "listen", 1, 0, O_LISTEN }, { "name", 1, 0, O_NAME }, { "underlay", 1, 0, O_UNDERLAY },
		{ "controller", 1, 0, O_CTL }, { "spool-size", 1, 0, O_SPOOL }, { "simulate", 1, 0, O_SIM },
		{ "topology", 1, 0, O_TOPO }, { "sim-runtime", 1, 0, O_SIMRT }, { "log", 1, 0, O_LOG },
		{ "help", 0, 0, O_HELP }, { "version", 0, 0, O_VERSION }, { "cpus", 1, 0, O_CPUS },
		{ "image-cache", 1, 0, O_CACHE }, { "image-cache-size", 1, 0, O_CACHE_SIZE }, { 0 }
	};
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char **s = str_opt(a, c);

		if (s) {
			*s = optarg;
		} else if ((r = value_opt(a, c, optarg)) != NOT_VALUE_OPT) {
			if (r >= 0)
				return r;
		} else if (c == O_HELP || c == 'h') {
			usage(stdout);
			return 0;
		} else if (c == O_VERSION) {
			printf("vhpcd %s\n", VHPC_VERSION);
			return 0;
		} else {
			usage(stderr);
			return die2("unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return die2("unexpected argument '%s'", argv[optind]);
	return -1;
}

/* This node's addresses, name, log, controller and topology from the
 * arguments and the cluster file; -1 to go on, else the exit status. */
static int settle(const struct args *a)
{
	const char *ctl = a->ctl;
	char host[256];
	struct verr e;
	int port;

	if (!a->listen || hostport_parse(a->listen, false, host, sizeof(host), &port) < 0 ||
	    ipv4_parse(host, &vd.underlay) < 0 || !vd.underlay)
		return die2("--listen '%s': expected this node's IPv4 address and a port, e.g. 10.0.0.5:6818",
			    a->listen ? a->listen : "(missing)");
	snprintf(vd.addr, sizeof(vd.addr), "%s", a->listen);
	if (a->underlay && (ipv4_parse(a->underlay, &vd.underlay) < 0 || !vd.underlay))
		return die2("--underlay '%s': expected an IPv4 address", a->underlay);
	if (a->topo && !vd.simulate)
		return die2("--topology %s: only with --simulate; a real node places guests on its own cores", a->topo);
	if (!vd.name[0]) {
		char h[64];

		if (gethostname(h, sizeof(h)) < 0 || !ident_ok(h, 48))
			return die2("%s", "no --name and no usable hostname");
		snprintf(vd.name, sizeof(vd.name), "%s", h);
	}
	if (a->log) {
		int fd = open(a->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);

		if (fd < 0)
			return die2("--log %s: cannot open it", a->log);
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
	if (!ctl)
		ctl = getenv("VHPC_CONTROLLER");
	/* The cluster file names the controller unless --controller does,
	 * and this node's fabric and PCI functions (fabric:): without one,
	 * a node told where its controller is has neither. */
	if (cluster_load(NULL, &vd.cl, &e) < 0) {
		const char *env = getenv("VHPC_CLUSTER");
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/cluster.yaml", vhpc_config_dir());
		if ((!ctl || !*ctl) || access(env && *env ? env : path, F_OK) == 0) {
			log_err("%s", e.msg);
			return 1;
		}
		memset(&vd.cl, 0, sizeof(vd.cl));
	}
	if (!ctl || !*ctl)
		ctl = vd.cl.controller;
	if (!ctl || hostport_parse(ctl, false, host, sizeof(host), &port) < 0) {
		log_err("no usable controller address (--controller, $VHPC_CONTROLLER or `controller:` in the cluster file)");
		return 2;
	}
	snprintf(vd.ctl, sizeof(vd.ctl), "%s", ctl);
	if (na_topo_load(&vd.topo, a->topo, &e) < 0 ||
	    (a->ncpus && na_topo_restrict(vd.topo, a->cpus, (int)a->ncpus, &e) < 0)) {
		log_err("%s%s", a->ncpus ? "--cpus: " : "", e.msg);
		return 1;
	}
	return -1;
}

/* A real node: takes over what a previous vhpcd left running, registers
 * (retrying until the controller answers) and starts heartbeats. */
static int start_node(void)
{
	struct verr e;
	pthread_t th;
	bool lost = false;

	/* Guest inits become our children when runc exits, so we reap them
	 * when their guests stop. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (vd_image_init(&e) < 0) {
		log_err("%s", e.msg);
		return -1;
	}
	vd.rdma = vd_rdma_devices();
	if (vd_adopt_all(&e) < 0)
		log_warn("taking over the jobs of the run dir: %s", e.msg);
	while (vd_register(&e) < 0) {
		if (!lost)
			log_warn("%s; retrying", e.msg);
		lost = true;
		sleep(1);
	}
	if (pthread_create(&th, NULL, vd_heartbeat_thread, NULL) != 0) {
		log_err("cannot start the heartbeat thread");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct args a;
	struct verr e;
	sigset_t sigs;
	pthread_t th;
	int rc, lfd, sig;

	vlog_init("vhpcd");
	vd.hb_ms = 2000;
	vd.spool_size = 64ull << 20;
	vd.cache_size = 20ull << 30;
	snprintf(vd.cache, sizeof(vd.cache), "%s/image-cache", vhpc_state_dir());
	if ((rc = parse_args(argc, argv, &a)) >= 0 || (rc = settle(&a)) >= 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	proc_block_stop_signals(&sigs);
	lfd = tcp_listen(a.listen, NULL, &e);
	if (lfd < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	if (pthread_create(&th, NULL, serve_thread, (void *)(intptr_t)lfd) != 0) {
		log_err("cannot start the listener thread");
		return 1;
	}
	if (vd.simulate) {
		log_info("simulating %d nodes %s-0..%s-%d on %s", vd.simulate, vd.name, vd.name,
			 vd.simulate - 1, vd.addr);
		if (vd_simulate() < 0) {
			log_err("cannot start the simulation");
			return 1;
		}
	} else if (start_node() < 0) {
		return 1;
	}
	log_info("node %s ready (run dir %s)", vd.name, vhpc_run_dir());
	for (;;) {
		if (sigwait(&sigs, &sig) != 0 || sig == SIGHUP)
			continue;
		break;
	}
	/* The guests keep running; a restarted vhpcd takes them over. */
	log_info("signal %d: stopping (jobs keep running)", sig);
	_exit(0);
}
