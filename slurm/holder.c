/*
 * vhpc-slurmjob: the node side of vhpc under Slurm, run by the SPANK
 * plugin (never by users).
 *
 *   vhpc-slurmjob hold JOB --cores LIST [--secret FILE] [--peers FILE] [--cpus FILE]
 *       from the job's extern step (root): starts the job's guests on this
 *       node through the node agent's lifecycle, publishes them in
 *       <run dir>/slurm/JOB.state (root's) and JOB.user (the job's user's,
 *       for `vhpc mpirun`) and holds their job dir (its lock says
 *       the job is alive) until the extern step, which lives as long as
 *       the job here, has gone, or SIGTERM (the job epilog); then removes
 *       everything.  It leaves the extern step's processes and cgroups
 *       first: Slurm kills those at once when the job ends, and the
 *       teardown must not be cut short.
 *   vhpc-slurmjob sweep
 *       from a job prolog or epilog (root): removes what dead holders
 *       left (na_cleanup_stale), and their state files.
 *   vhpc-slurmjob check IMAGE
 *       from srun, sbatch or salloc (the user): exit 0 if IMAGE is
 *       stored or can be built here, else the reason on stderr.
 *   vhpc-slurmjob task --sock PATH [--vsock-port N] --key FILE -- PROGRAM...
 *       a task of a job whose guests are VMs (the user, exec'd by the
 *       plugin): runs PROGRAM in its guest (relay.c).
 *
 * The run, state and config dirs come from VHPC_RUN_DIR, VHPC_STATE_DIR
 * and VHPC_CONFIG_DIR, which the plugin sets from plugstack.conf.
 */
#include "lib/clock.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/mpibtl.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/proc.h"
#include "lib/paths.h"
#include "images/images.h"
#include "nodeagent/nodeagent.h"
#include "slurm/holder.h"
#include "slurm/spec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int usage(void)
{
	fprintf(stderr, "usage: vhpc-slurmjob hold JOB --cores LIST [--secret FILE] [--peers FILE] [--cpus FILE]\n"
			"       vhpc-slurmjob sweep\n"
			"       vhpc-slurmjob check IMAGE\n"
			"       vhpc-slurmjob task --sock PATH [--vsock-port N] --key FILE -- PROGRAM...\n"
			"(run by the vhpc SPANK plugin; see slurm/README.md)\n");
	return 2;
}

static void slurm_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s/slurm", vhpc_run_dir());
}

/* ------------------------------------------------------------------ hold */

/* The job's extern step, whose end is the job's end on this node. */
static int anchor = -1;

static bool anchor_gone(int timeout_ms)
{
	struct pollfd p = { .fd = anchor, .events = POLLIN };

	return anchor >= 0 && poll(&p, 1, timeout_ms) > 0;
}

static bool stop_pending(void)
{
	sigset_t p;

	sigpending(&p);
	return sigismember(&p, SIGTERM) || sigismember(&p, SIGINT) || sigismember(&p, SIGHUP) || anchor_gone(0);
}

static int job_ended(void *arg, struct verr *err)
{
	(void)arg;
	return stop_pending() ? verr_set(err, "the job ended while its guests were starting") : 0;
}

struct hold {
	uint32_t id;
	char state[PATH_MAX], user[PATH_MAX];
	unsigned owner[2];         /* the job's uid and gid, once the opts said */
	bool have_owner;
	struct vs_state st;
};

/* Root's copy for the plugin and the epilog, the user's for their own
 * `vhpc mpirun`: no other user reads either (the folder is passable by
 * all, and the state names the guests' sockets, key and environment). */
static void publish(struct hold *h)
{
	char *text = vs_state_text(&h->st), why[600];

	if (!text)
		log_err("job %u: cannot write %s: out of memory", h->id, h->state);
	else if (vs_file_write(h->state, text, NULL, why, sizeof(why)) < 0 ||
		 (h->have_owner && vs_file_write(h->user, text, h->owner, why, sizeof(why)) < 0))
		log_err("job %u: cannot publish its state: %s", h->id, why);
	free(text);
}

static void fail_state(struct hold *h, const char *msg)
{
	h->st.status = VS_FAILED;
	snprintf(h->st.error, sizeof(h->st.error), "%s", msg);
	publish(h);
}

static void add_env(struct vs_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_env(struct vs_state *st, const char *fmt, ...)
{
	va_list ap;

	if (st->nenv == VS_MAX_ENV)
		return;
	va_start(ap, fmt);
	vsnprintf(st->env[st->nenv++], sizeof(st->env[0]), fmt, ap);
	va_end(ap);
}

/* What tasks that run in the guests need: where each guest is, and the
 * environment guestd would have given them.  Open MPI under srun knows
 * nothing of guests: PMIx tells a rank that every rank of the node is
 * local, but vader's segments live in each guest's own /dev/shm, and vader
 * between two guests crashes the ranks.  So ranks in other guests of the
 * node talk through vmshm (it outranks vader for them), ranks of one guest
 * through vader, the rest over the fabric's ofi BTL when the job has it
 * (lib/mpibtl.h), else the job network (eth0); without a vmshm region,
 * vader only where a node has a single guest. */
static int describe(struct hold *h, struct vs_job *vj, struct na_job *nj, struct verr *err)
{
	struct vs_state *st = &h->st;
	struct na_guest_env ge;
	char words[512], btl[64];
	const char *const *env = na_job_guest_env(nj, &ge, -1);

	snprintf(st->job, sizeof(st->job), "%s", vj->local);
	snprintf(st->jobdir, sizeof(st->jobdir), "%s", na_job_dir(nj));
	snprintf(st->driver, sizeof(st->driver), "%s", na_job_driver_name(nj));
	na_job_key_path(nj, st->key, sizeof(st->key));
	for (; *env; env++)
		if (strncmp(*env, "HOME=", 5))
			add_env(st, "%s", *env);
	vs_opts_format(&vj->o, words, sizeof(words));
	add_env(st, "VHPC_SLURM_OPTIONS=%s", words);
	add_env(st, "OMPI_MCA_pml=ob1");
	add_env(st, "OMPI_MCA_osc=^rdma");
	mpibtl_list(btl, sizeof(btl), na_job_has_vmshm(nj) || na_job_nguests(nj) == 1, na_job_has_vmshm(nj),
		    na_job_has_fabric(nj));
	add_env(st, "OMPI_MCA_btl=%s", btl);
	for (int i = 0; na_job_has_fabric(nj) && mpibtl_fabric_mca[i][0]; i++)
		add_env(st, "OMPI_MCA_%s=%s", mpibtl_fabric_mca[i][0], mpibtl_fabric_mca[i][1]);
	add_env(st, "OMPI_MCA_btl_tcp_if_include=eth0");
	add_env(st, "OMPI_MCA_oob_tcp_if_include=eth0");
	if (na_job_has_vmshm(nj))
		add_env(st, "OMPI_MCA_mca_base_component_path=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3:%s",
			VHPC_GUEST_VMSHM_DIR);
	for (int k = 0; k < na_job_nguests(nj); k++) {
		struct vs_guest *g = &st->g[k];
		struct na_guest_access a;
		struct na_guest_info gi;

		if (na_job_guest_access(nj, k, &a, err) < 0 || na_job_guest_info(nj, k, &gi, err) < 0)
			return -1;
		g->index = gi.index;
		g->pid = a.init_pid;
		g->vsock_port = a.vsock_port;
		snprintf(g->sock, sizeof(g->sock), "%s", a.sock);
		snprintf(g->netns, sizeof(g->netns), "%s", gi.netns);
		snprintf(g->cpus, sizeof(g->cpus), "%s", gi.cpus);
		snprintf(g->mems, sizeof(g->mems), "%s", gi.mems);
		ipv4_format(gi.addr, g->addr, sizeof(g->addr));
	}
	st->nguests = na_job_nguests(nj);
	st->status = VS_READY;
	return 0;
}

/* Until the job ends; a guest that stops meanwhile fails the steps that
 * come after, with its reason. */
static void hold_guests(struct hold *h, struct na_job *nj)
{
	sigset_t sigs;
	struct timespec t = { 0, 0 };
	bool told = false;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	for (;;) {
		char why[512];
		int sig = sigtimedwait(&sigs, NULL, &t);

		if (sig > 0) {
			log_info("job %u: signal %d: the job has ended here", h->id, sig);
			return;
		}
		if (anchor_gone(1000)) {
			log_info("job %u: its extern step has ended", h->id);
			return;
		}
		/* The guests' inits are ours once runc has gone (subreaper). */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (!told && na_job_guest_gone(nj, why, sizeof(why))) {
			log_warn("job %u: %s", h->id, why);
			fail_state(h, why);
			told = true;
		}
	}
}

static int hold(uint32_t id, const char *cores, const struct vs_site *site)
{
	struct hold h = { .id = id };
	struct vs_job vj;
	struct na_job *nj = NULL;
	char dir[PATH_MAX], opts[PATH_MAX + 32];
	struct verr e;
	int removed = 0, rc = 1, loaded;
	double t0 = now_s();

	slurm_dir(dir, sizeof(dir));
	snprintf(h.state, sizeof(h.state), "%s/%u.state", dir, id);
	snprintf(h.user, sizeof(h.user), "%s/%u.user", dir, id);
	snprintf(opts, sizeof(opts), "%s/%u.opts", dir, id);
	h.st.holder = getpid();
	publish(&h);
	if (na_cleanup_stale(&removed, &e) < 0)
		log_warn("sweeping what dead jobs left: %s", e.msg);
	else if (removed)
		log_info("removed %d resources that dead jobs left behind", removed);
	loaded = vs_job_load(&vj, id, opts, cores, site, &e);
	if (vj.have_ids) {
		h.owner[0] = (unsigned)vj.uid;
		h.owner[1] = (unsigned)vj.gid;
		h.have_owner = true;
	}
	if (loaded < 0) {
		log_err("job %u: %s", id, e.msg);
		fail_state(&h, e.msg);
		vs_job_free(&vj);
		return 1;
	}
	/* Read once; the epilog removes it if we never get here. */
	unlink(opts);
	vj.s.cancelled = job_ended;
	vj.s.verify_image = true;
	if (na_job_start(&nj, vj.local, &vj.s, &e) < 0 || describe(&h, &vj, nj, &e) < 0)
		goto fail;
	publish(&h);
	log_info("job %u (%s): %d guest%s on node %s (%s driver), ready in %.0f ms", id, vj.local, vj.nguests,
		 vj.nguests == 1 ? "" : "s", vj.node, na_job_driver_name(nj), (now_s() - t0) * 1e3);
	hold_guests(&h, nj);
	rc = 0;
	goto out;
fail:
	log_err("job %u on node %s: %s", id, vj.node, e.msg);
	fail_state(&h, e.msg);
out:
	na_job_stop(nj);
	if (rc == 0)
		log_info("job %u (%s): everything removed", id, vj.local);
	/* A failed job's state stays for its steps to report; the epilog
	 * removes it. */
	if (rc == 0) {
		unlink(h.state);
		unlink(h.user);
	}
	vs_job_free(&vj);
	return rc;
}

/* ----------------------------------------------------------------- sweep */

/* A state file whose holder is gone, of a job whose dir is gone too. */
static void sweep_states(void)
{
	char dir[PATH_MAX];
	DIR *d;
	struct dirent *de;

	slurm_dir(dir, sizeof(dir));
	if (!(d = opendir(dir)))
		return;
	while ((de = readdir(d))) {
		char path[PATH_MAX + 300], why[600];
		struct vs_state *st;
		size_t n = strlen(de->d_name);

		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (n > 5 && !strcmp(de->d_name + n - 5, ".user")) {
			/* A user's copy whose state is gone already. */
			snprintf(path + strlen(path) - 5, 8, ".state");
			if (access(path, F_OK) < 0 && errno == ENOENT) {
				snprintf(path + strlen(path) - 6, 8, ".user");
				unlink(path);
			}
			continue;
		}
		if (n < 7 || strcmp(de->d_name + n - 6, ".state"))
			continue;
		if (!(st = malloc(sizeof(*st))))
			break;
		if (vs_state_load(path, st, why, sizeof(why)) < 0 ||
		    ((!st->holder || kill(st->holder, 0) < 0) && (!st->job[0] || !na_jobdir_alive(st->job)))) {
			if (unlink(path) == 0)
				log_info("sweep: removed %s (its holder is gone)", path);
			/* The user's copy goes with it (never read here: the
			 * user can write it). */
			snprintf(path + strlen(path) - 6, 8, ".user");
			unlink(path);
		}
		free(st);
	}
	closedir(d);
}

static int sweep(void)
{
	struct verr e;
	int removed = 0;

	if (na_cleanup_stale(&removed, &e) < 0) {
		log_err("%s", e.msg);
		return 1;
	}
	if (removed)
		log_info("sweep: removed %d resources that dead jobs left behind", removed);
	sweep_states();
	return 0;
}

/* ----------------------------------------------------------------- check */

static int check(const char *image)
{
	struct image_info img;
	char yaml[PATH_MAX];
	struct verr e;

	if (!ident_ok(image, 64)) {
		fprintf(stderr, "image '%s' is not a plain name\n", image);
		return 1;
	}
	snprintf(yaml, sizeof(yaml), "%s/images/%s.yaml", vhpc_config_dir(), image);
	if (access(yaml, R_OK) == 0 || image_lookup(image, &img, &e) == 0)
		return 0;
	fprintf(stderr, "no image '%s' (`vhpc image list` shows those there are; %s has no %s.yaml to build it from)\n",
		image, vhpc_config_dir(), image);
	return 1;
}

/* --------------------------------------------------------------------- */

static void log_to(const char *name)
{
	char path[PATH_MAX + 64];
	struct verr e;
	int fd;

	slurm_dir(path, sizeof(path));
	if (mkdir_p(path, 0711, &e) < 0)
		return;
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s", name);
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return;
	dup2(fd, STDERR_FILENO);
	close(fd);
}

/* `hold ID --cores C [--secret F] [--peers F] [--cpus F]`: 0, or usage's. */
static int parse_hold(int argc, char **argv, long long *id, const char **cores, struct vs_site *site)
{
	static const struct option lo[] = {
		{ "cores", 1, 0, 'c' }, { "secret", 1, 0, 's' }, { "peers", 1, 0, 'p' }, { "cpus", 1, 0, 'u' }, { 0 }
	};
	int c;

	if (strcmp(argv[1], "hold") || argc < 3 || parse_ll(argv[2], 1, 99999999, id) < 0)
		return usage();
	optind = 3;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'c')
			*cores = optarg;
		else if (c == 's')
			site->secret = optarg;
		else if (c == 'p')
			site->peers = optarg;
		else if (c == 'u')
			site->cpus = optarg;
		else
			return usage();
	}
	return optind != argc || !*cores ? usage() : 0;
}

/* Leaves the extern step, our parent, after taking a pidfd to watch it;
 * signals are then taken when asked for (sigtimedwait, or polled while
 * preparing), never in a handler.  0, or 1 with the reason said. */
static int detach(void)
{
	sigset_t sigs;

	if ((anchor = (int)syscall(SYS_pidfd_open, getppid(), 0)) < 0) {
		fprintf(stderr, "vhpc-slurmjob: the extern step (pid %d): %s\n", (int)getppid(), strerror(errno));
		return 1;
	}
	switch (fork()) {
	case -1:
		return 1;
	case 0:
		break;
	default:
		_exit(0);
	}
	setsid();
	prctl(PR_SET_PDEATHSIG, 0);
	proc_block_stop_signals(&sigs);
	signal(SIGPIPE, SIG_IGN);
	/* Guest inits are ours once runc exits, as they are vhpcd's. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	return 0;
}

int main(int argc, char **argv)
{
	struct vs_site site = { 0 };
	const char *cores = NULL;
	struct verr e;
	long long id;
	int rc;

	vlog_init("vhpc-slurmjob");
	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "check"))
		return argc == 3 ? check(argv[2]) : usage();
	if (!strcmp(argv[1], "task"))
		return vs_task_relay(argc - 1, argv + 1);
	if (getuid() != 0) {
		fprintf(stderr, "vhpc-slurmjob %s: root only (the SPANK plugin runs it)\n", argv[1]);
		return 2;
	}
	umask(022);
	if (!strcmp(argv[1], "sweep")) {
		log_to("sweep.log");
		return argc == 2 ? sweep() : usage();
	}
	if ((rc = parse_hold(argc, argv, &id, &cores, &site)) || (rc = detach()))
		return rc;
	log_to("holder.log");
	if (na_cgroup_enter("vhpc/slurm", &e) < 0)
		log_warn("job %lld: %s; Slurm may stop this process before its guests are removed", id, e.msg);
	rc = hold((uint32_t)id, cores, &site);
	na_cgroup_leave("vhpc/slurm");
	return rc;
}
