/*
 * The embedded scheduler behind `vhpc run` on one machine: it decides the
 * job's shape (guests, vCPUs, ranks, subnet, key), hands it to the node
 * agent's job lifecycle (nodeagent/nodeagent.h, na_job_*), runs mpirun in
 * guest 0 and has everything removed again, whatever happened in between.
 */
#include "lib/argv.h"
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/cluster.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fabric_local.h"
#include "lib/gexec.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/tuning.h"
#include "embedded.h"
#include "cli.h"
#include "lib/jobpaths.h"
#include "scheduler/launch.h"
#include "nodeagent/nodeagent.h"

#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* forward_sig is consumed by gexec_run when it passes the signal on to the
 * job; interrupted stays set, so the end of the run knows why it ended. */
static volatile int forward_sig, interrupted;

static void on_signal(int sig)
{
	forward_sig = sig;
	if (!interrupted)
		interrupted = sig;
}

struct run {
	const struct job_spec *j;
	struct job_paths paths;
	struct cluster_cfg cl;
	struct na_topo *topo;
	struct na_job *nj;
	int nguests, vcpus;
	int *ranks_per_guest;
	long long timeout;
	struct fabric_claim fab;     /* its VLAN or pkey and functions, held till the end */
};

static int cancelled(void *arg, struct verr *err)
{
	(void)arg;
	if (!interrupted)
		return 0;
	return verr_set(err, "interrupted by signal %d; removing the job", interrupted);
}

static int choose_vcpus(struct run *r, struct verr *err)
{
	const struct job_spec *j = r->j;
	struct na_numa_info nodes[VHPC_MAX_NODES];
	int nn = na_topo_numa(r->topo, nodes, VHPC_MAX_NODES), cores = 0, *busy = NULL, nbusy = 0, maxr = 0;

	for (int i = 0; i < nn && i < VHPC_MAX_NODES; i++)
		cores += nodes[i].ncores;
	for (int i = 0; i < r->nguests; i++)
		if (r->ranks_per_guest[i] > maxr)
			maxr = r->ranks_per_guest[i];
	if (j->vcpus) {
		r->vcpus = (int)j->vcpus;
		return 0;
	}
	r->vcpus = maxr;
	if (j->oversubscribe)
		return 0;
	if (na_busy_cpus(&busy, &nbusy, err) < 0)
		return -1;
	free(busy);
	if ((cores - nbusy) < r->nguests * maxr && (cores - nbusy) / r->nguests >= 1) {
		r->vcpus = (cores - nbusy) / r->nguests;
		log_info("this host has %d free cores: %d vCPU%s per guest, so %d ranks share each guest's cores (--vcpus or --oversubscribe to change)",
			 cores - nbusy, r->vcpus, r->vcpus == 1 ? "" : "s", maxr);
	}
	return 0;
}

static int run_job(struct run *r, const struct launch_plan *lp, int *status, struct verr *err)
{
	char **argv = launch_guest_argv(lp);
	struct gexec_req req = { 0 };
	double t0;
	int rc;

	if (!argv)
		return verr_set(err, "out of memory");
	if (vlog_get_level() >= VLOG_DEBUG) {
		char line[4096] = "";

		for (char **p = argv; *p; p++)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s", p == argv ? "" : " ", *p);
		log_debug("guest g0 runs: %s", line);
	}
	req.argv = (const char *const *)argv;
	req.env = launch_env;
	req.cwd = lp->workdir ? lp->workdir : "/tmp";
	req.out_fd = STDOUT_FILENO;
	req.err_fd = STDERR_FILENO;
	req.timeout_ms = (int)(r->timeout > 2000000 ? 2000000000 : r->timeout * 1000);
	req.cancel = &forward_sig;
	t0 = now_s();
	rc = na_job_run(r->nj, 0, &req, status, err);
	argv_free(argv);
	if (rc < 0)
		return -1;
	if (rc == GEXEC_TIMEOUT || now_s() - t0 >= (double)r->timeout) {
		log_err("the job ran out of its %lld s time limit and was stopped", r->timeout);
		*status = EXIT_TIMEOUT;
	}
	return 0;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void free_run(struct run *r)
{
	if (r->topo)
		na_topo_free(r->topo);
	fabric_local_release(&r->fab);
	cluster_free(&r->cl);
	free(r->ranks_per_guest);
}

/* The job's shape on this machine: what the lifecycle is told to make. */
static int job_shape(struct run *r, const struct embedded_opts *o, struct verr *err)
{
	const char *topo = o->topology ? o->topology : getenv("VHPC_TOPOLOGY");

	r->nguests = (int)r->j->guests;
	r->timeout = r->j->timeout ? r->j->timeout : r->cl.default_timeout;
	if (r->nguests > VHPC_MAX_GUESTS)
		return verr_set(err, "%d guests: at most %d per machine", r->nguests, VHPC_MAX_GUESTS);
	if (!(r->ranks_per_guest = calloc((size_t)r->nguests, sizeof(int))))
		return verr_set(err, "out of memory");
	launch_split_ranks((int)r->j->ranks, r->nguests, r->ranks_per_guest);
	if (na_topo_load(&r->topo, topo && *topo ? topo : NULL, err) < 0)
		return -1;
	return choose_vcpus(r, err);
}

/* Whom the job runs as: the caller, or for root the --user it names. */
static int job_user(const char *name, uid_t *uid, gid_t *gid, struct verr *err)
{
	struct passwd *pw;
	long long v;

	*uid = getuid();
	*gid = getgid();
	if (!name)
		return 0;
	if (!*name)
		return verr_set(err, "--user: expected a user name or uid, got an empty string");
	if (*uid != 0)
		return verr_set(err, "--user %s: only root may run a job as another user", name);
	pw = getpwnam(name);
	if (!pw && parse_ll(name, 0, UINT32_MAX - 1, &v) == 0)
		pw = getpwuid((uid_t)v);
	if (!pw)
		return verr_set(err, "--user %s: no such user on this machine", name);
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

int embedded_run(const struct job_spec *j, const struct embedded_opts *o, struct verr *err)
{
	struct run r = { .j = j };
	struct launch_plan lp = { 0 };
	struct launch_guest *lg = NULL;
	struct na_job_spec s = { 0 };
	double t0 = now_s();
	int status = -1, removed = 0;
	char job[16] = "", rnd[4];

	/* Say what is missing before anything fails half-way on a permission. */
	if (geteuid() != 0)
		return verr_set(err, "vhpc run by an ordinary user needs the local vhpc service, which is not running "
				"on this machine: an admin starts it once with `vhpc service start` (as root; see vhpc "
				"service --help), and your jobs then run as you.  Or submit to a cluster's vhpc-ctld "
				"(controller: in the cluster file, or $VHPC_CONTROLLER).");
	install_signals();
	/* Orphans of the job (container inits, once runc exits) come to us
	 * rather than to the host's init, which may be slow to reap them. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (cluster_load(NULL, &r.cl, err) < 0)
		return -1;
	if (job_user(o->user, &s.uid, &s.gid, err) < 0 || job_paths_plan(&r.cl, j, s.uid, &r.paths, err) < 0)
		goto out;
	if (na_cleanup_stale(&removed, err) < 0)
		goto out;
	if (removed)
		log_info("removed %d resources that earlier jobs left behind", removed);
	if (job_shape(&r, o, err) < 0)
		goto out;
	if (!(lg = calloc((size_t)r.nguests, sizeof(*lg)))) {
		verr_set(err, "out of memory");
		goto out;
	}
	{
		char host[65] = "";

		/* This machine is the node its hostname names in fabric.nodes. */
		gethostname(host, sizeof(host) - 1);
		if (fabric_local_claim(&r.cl, host, j, r.nguests, -1, &r.fab, err) < 0)
			goto out;
	}
	random_bytes(rnd, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), job);
	na_job_spec_from(&s, j, &r.cl);
	s.rdma = r.fab.rdma;
	s.rdma_asked = j->rdma == JOB_RDMA_ON;
	s.fabric_link = r.fab.link;
	s.fabric_vlan = r.fab.vlan;
	s.fabric_pkey = (uint16_t)r.fab.pkey;
	s.fabric_subnet = r.fab.subnet;
	s.pci = r.fab.pci_v;
	s.pci_guest = r.fab.pci_guest;
	s.npci = r.fab.npci;
	s.fabric_node = r.fab.node;
	s.label = job;
	s.allow_emulated = o->allow_emulated_kvm;
	s.nguests = s.ntotal = r.nguests;
	s.ranks = r.ranks_per_guest;
	s.subnet_pool = &r.cl;
	s.topo = r.topo;
	s.vcpus = r.vcpus;
	s.host_id = na_boot_id();
	s.binds = &r.paths.binds;
	s.cancelled = cancelled;
	random_bytes(s.key, sizeof(s.key));
	if (na_job_start(&r.nj, job, &s, err) < 0)
		goto out;
	log_info("job %s: %d guest%s ready in %.2f s", job, r.nguests, r.nguests == 1 ? "" : "s", now_s() - t0);
	for (int i = 0; i < r.nguests; i++) {
		snprintf(lg[i].name, sizeof(lg[i].name), "g%d", i);
		lg[i].addr = na_job_guest_addr(r.nj, i);
		lg[i].vcpus = r.vcpus;
		lg[i].ranks = r.ranks_per_guest[i];
	}
	lp.spec = j;
	lp.nguests = r.nguests;
	lp.guests = lg;
	lp.rsh_path = LAUNCH_RSH;
	lp.hostfile = "/vhpc/hostfile";
	lp.net_if = "eth0";
	lp.vmshm = na_job_has_vmshm(r.nj);
	lp.fabric = r.fab.rdma;
	lp.vmshm_component_dir = VHPC_GUEST_VMSHM_DIR;
	lp.workdir = r.paths.wdir;
	lp.home = r.paths.home;
	lp.image = s.image;
	if (run_job(&r, &lp, &status, err) < 0)
		status = -1;
	else
		log_info("job %s: exit status %d after %.2f s", job, status, now_s() - t0);
out:
	na_job_stop(r.nj);
	/* Guest inits were reparented to us (child subreaper): reap them, so
	 * no zombie outlives the job. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	explicit_bzero(s.key, sizeof(s.key));
	free(lg);
	free_run(&r);
	/* Interrupted by the user: say so in the status, as shells do, even if
	 * the job's own exit status came back after the signal reached it. */
	if (interrupted) {
		if (status < 0)
			log_err("%s", err->msg);
		else
			log_err("job %s: interrupted by signal %d (%s); it was stopped and everything of it removed",
				job, interrupted, strsignal(interrupted));
		status = 128 + interrupted;
	}
	return status;
}
