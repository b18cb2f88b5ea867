/*
 * spank_vhpc.so: vhpc's SPANK plugin.  `srun --vhpc-image=IMG ./app` (and
 * sbatch, salloc) runs the job's tasks inside vhpc guests.
 *
 *   srun/sbatch/salloc   the --vhpc-* options (or SLURM_VHPC_*), checked
 *                        here, go to the job's control environment
 *   job prolog (root)    sweeps what dead jobs left; records the options
 *                        and the job in <run dir>/slurm/<job>.opts
 *   extern step (root)   starts vhpc-slurmjob, which starts the guests
 *                        and holds them until the job ends
 *   each step            waits until they are ready; each task joins its
 *                        guest (task_init_privileged, task_init)
 *   batch step           tells `vhpc mpirun` where the state is
 *   job epilog (root)    stops vhpc-slurmjob, sweeps
 *
 * plugstack.conf arguments: secret=FILE (required), peers=FILE, cpus=FILE,
 * run_dir=DIR ("%h" = host name), state_dir=DIR, config_dir=DIR,
 * bindir=DIR (where vhpc-slurmjob is).  slurm/README.md has the rest.
 */
#include "lib/jobopts.h"
#include "slurm/slurm.h"
#include "slurm/plugin.h"

#include <slurm/spank.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

SPANK_PLUGIN(vhpc, 1);

#ifndef VS_BINDIR
#define VS_BINDIR "/usr/local/bin"
#endif

#define STEP_EXTERN   0xfffffffcu
#define STEP_BATCH    0xfffffffbu
#define STEP_INTERACT 0xfffffffau
#define READY_WAIT_S  600

static struct {
	char run_dir[PATH_MAX], state_dir[PATH_MAX], config_dir[PATH_MAX], bindir[PATH_MAX];
	char secret[PATH_MAX], peers[PATH_MAX], cpus[PATH_MAX];
} cfg;

extern char **environ;

static struct vs_opts opts;
static bool given[VS_NOPTS];

/* This step's view of the job's guests here, for its tasks. */
static struct vs_state *st;
static char st_err[1200];
static const struct vs_guest *my_guest;
static struct vs_relay relay;
static bool have_relay;

/* ------------------------------------------------------------- options */

static struct spank_option options[VS_NOPTS];
static char option_names[VS_NOPTS][40];

static int opt_cb(int val, const char *optarg, int remote)
{
	char why[400];

	(void)remote;
	if (val < 0 || val >= VS_NOPTS)
		return -1;
	given[val] = true;
	if (vs_opt_set(&opts, vs_opt_row(val)->o.name, options[val].has_arg ? optarg : NULL, why,
		       sizeof(why)) < 0) {
		/* Slurm's own words then name only the option. */
		slurm_error("vhpc: %s", why);
		return -1;
	}
	return 0;
}

/* Slurm's option array, from the job option table's rows for Slurm. */
static int options_register(spank_t sp)
{
	for (int i = 0; i < VS_NOPTS; i++) {
		const struct job_opt *r = vs_opt_row(i);

		snprintf(option_names[i], sizeof(option_names[i]), "vhpc-%s", r->o.name);
		options[i] = (struct spank_option){ option_names[i], (char *)r->o.arg, (char *)r->slurm_help,
						    r->o.arg != NULL, i, opt_cb };
		if (spank_option_register(sp, &options[i]) != ESPANK_SUCCESS)
			return -1;
	}
	return 0;
}

/* ----------------------------------------------------------- plumbing */

static int set_arg(const char *a, const char *key, char *dst, size_t len)
{
	size_t n = strlen(key);

	if (strncmp(a, key, n) || a[n] != '=')
		return 0;
	if (a[n + 1] != '/' || strlen(a + n + 1) >= len) {
		slurm_error("vhpc: plugstack.conf: %s: expected an absolute path", a);
		return -1;
	}
	snprintf(dst, len, "%s", a + n + 1);
	return 1;
}

/* "%h" in run_dir: this host's name (several slurmd on one machine, each
 * in a UTS namespace of its own, as in vhpc's tests). */
static void expand_host(char *dir, size_t len)
{
	char *h = strstr(dir, "%h"), host[65] = "", out[PATH_MAX];

	if (!h)
		return;
	gethostname(host, sizeof(host) - 1);
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(h - dir), dir, host, h + 2);
	snprintf(dir, len, "%s", out);
}

static int parse_args(int ac, char **av)
{
	static bool done;

	/* Slurm calls slurm_spank_init in some contexts only (not before a
	 * job prolog or epilog): every callback starts here. */
	if (done)
		return 0;
	done = true;
	snprintf(cfg.run_dir, sizeof(cfg.run_dir), "/run/vhpc/slurm");
	snprintf(cfg.bindir, sizeof(cfg.bindir), "%s", VS_BINDIR);
	for (int i = 0; i < ac; i++) {
		int r = 0;

		r += set_arg(av[i], "secret", cfg.secret, sizeof(cfg.secret));
		r += set_arg(av[i], "peers", cfg.peers, sizeof(cfg.peers));
		r += set_arg(av[i], "cpus", cfg.cpus, sizeof(cfg.cpus));
		r += set_arg(av[i], "run_dir", cfg.run_dir, sizeof(cfg.run_dir));
		r += set_arg(av[i], "state_dir", cfg.state_dir, sizeof(cfg.state_dir));
		r += set_arg(av[i], "config_dir", cfg.config_dir, sizeof(cfg.config_dir));
		r += set_arg(av[i], "bindir", cfg.bindir, sizeof(cfg.bindir));
		if (r < 0)
			return -1;
		if (r == 0) {
			slurm_error("vhpc: plugstack.conf: unknown argument '%s' (secret=, peers=, cpus=, run_dir=, "
				    "state_dir=, config_dir=, bindir=)", av[i]);
			return -1;
		}
	}
	expand_host(cfg.run_dir, sizeof(cfg.run_dir));
	if (strchr(cfg.run_dir, ' ')) {
		slurm_error("vhpc: plugstack.conf: run_dir '%s' has a space", cfg.run_dir);
		return -1;
	}
	return 0;
}

static void file_of(char *buf, size_t len, uint32_t job, const char *ext)
{
	snprintf(buf, len, "%s/slurm/%u.%s", cfg.run_dir, job, ext);
}

/* Runs vhpc-slurmjob ARGS in a child with vhpc's directories in its
 * environment; as_child: returns the pid at once (the holder). */
static pid_t run_tool(const char *const *args, bool as_child, bool quiet, char *err, size_t elen)
{
	char prog[PATH_MAX + 32], env[4][PATH_MAX + 20];
	char *envp[64] = { env[0], env[1], env[2], env[3], "PATH=/usr/sbin:/usr/bin:/sbin:/bin" };
	int ne = 5;
	const char *argv[14];
	int p[2], n = 0, status;
	pid_t pid;

	snprintf(prog, sizeof(prog), "%s/vhpc-slurmjob", cfg.bindir);
	snprintf(env[0], sizeof(env[0]), "VHPC_RUN_DIR=%s", cfg.run_dir);
	snprintf(env[1], sizeof(env[1]), "VHPC_STATE_DIR=%s", cfg.state_dir[0] ? cfg.state_dir : "/var/lib/vhpc");
	snprintf(env[2], sizeof(env[2]), "VHPC_CONFIG_DIR=%s", cfg.config_dir[0] ? cfg.config_dir : "/etc/vhpc");
	snprintf(env[3], sizeof(env[3]), "VHPC_LOG=%s", getenv("VHPC_LOG") ? getenv("VHPC_LOG") : "info");
	/* The rest of vhpc's settings slurmd was started with (its kernel
	 * cache, the kvm driver's time scale, ...) go to vhpc-slurmjob too;
	 * the four above are plugstack.conf's. */
	for (char **e = environ; *e && ne < 63; e++)
		if (!strncmp(*e, "VHPC_", 5) && strncmp(*e, "VHPC_RUN_DIR=", 13) && strncmp(*e, "VHPC_STATE_DIR=", 15) &&
		    strncmp(*e, "VHPC_CONFIG_DIR=", 16) && strncmp(*e, "VHPC_LOG=", 9))
			envp[ne++] = *e;
	envp[ne] = NULL;
	argv[n++] = prog;
	for (; *args && n < 13; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);

		if (as_child)
			prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(quiet ? nul : p[1], 2) < 0)
			_exit(127);
		close_range(3, ~0u, 0);
		execve(prog, (char *const *)argv, envp);
		dprintf(2, "cannot run %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	close(p[1]);
	if (as_child) {
		close(p[0]);
		return pid;
	}
	{
		size_t got = 0;
		ssize_t r;

		while (got + 1 < elen && (r = read(p[0], err + got, elen - got - 1)) != 0)
			if (r > 0)
				got += (size_t)r;
			else if (errno != EINTR)
				break;
		err[got] = 0;
		if (got && err[got - 1] == '\n')
			err[got - 1] = 0;
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ callbacks */

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (parse_args(ac, av) < 0)
		return -1;
	if (spank_context() == S_CTX_SLURMD || spank_context() == S_CTX_JOB_SCRIPT)
		return 0;
	return options_register(sp);
}

/* srun, sbatch, salloc: the job's options, checked while the user waits. */
static int submit_side(spank_t sp)
{
	char why[800], words[512];

	if (vs_opts_env(&opts, given, environ, why, sizeof(why)) < 0) {
		slurm_error("vhpc: %s", why);
		return -1;
	}
	if (!opts.set)
		return 0;
	{
		const char *args[] = { "check", opts.image, NULL };

		if (run_tool(args, false, false, why, sizeof(why)) != 0) {
			slurm_error("vhpc: %s", why[0] ? why : "cannot check the image (vhpc-slurmjob failed)");
			return -1;
		}
	}
	vs_opts_format(&opts, words, sizeof(words));
	/* Inside an allocation the job's options are set; an srun there
	 * passes its own to its step, which checks them against the job's. */
	if (!getenv("SLURM_JOB_ID") && spank_job_control_setenv(sp, "VHPC", words, 1) != ESPANK_SUCCESS) {
		slurm_error("vhpc: cannot pass the options to the job (spank_job_control_setenv)");
		return -1;
	}
	return 0;
}

/* The extern step lives as long as the job on this node: its child holds
 * the guests. */
static int extern_step(spank_t sp)
{
	char opts_path[PATH_MAX + 32], jobs[24], cores_buf[4096];
	const char *args[12];
	char *cores = NULL;
	uint32_t job = 0;
	int n = 0;

	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
		return 0;
	file_of(opts_path, sizeof(opts_path), job, "opts");
	if (access(opts_path, F_OK) < 0)
		return 0;
	if (spank_get_item(sp, S_JOB_ALLOC_CORES, &cores) != ESPANK_SUCCESS || !cores || !*cores) {
		slurm_error("vhpc: job %u: Slurm gave no core list for this node (S_JOB_ALLOC_CORES)", job);
		return 0;
	}
	snprintf(jobs, sizeof(jobs), "%u", job);
	snprintf(cores_buf, sizeof(cores_buf), "%s", cores);
	args[n++] = "hold";
	args[n++] = jobs;
	args[n++] = "--cores";
	args[n++] = cores_buf;
	if (cfg.secret[0]) {
		args[n++] = "--secret";
		args[n++] = cfg.secret;
	}
	if (cfg.peers[0]) {
		args[n++] = "--peers";
		args[n++] = cfg.peers;
	}
	if (cfg.cpus[0]) {
		args[n++] = "--cpus";
		args[n++] = cfg.cpus;
	}
	args[n] = NULL;
	if (run_tool(args, true, true, NULL, 0) < 0)
		slurm_error("vhpc: job %u: cannot start vhpc-slurmjob: %s", job, strerror(errno));
	return 0;
}

/* Until the holder says ready or failed, or is gone. */
static void wait_ready(uint32_t job)
{
	char path[PATH_MAX + 32], why[800];
	time_t t0 = time(NULL);

	file_of(path, sizeof(path), job, "state");
	if (!(st = malloc(sizeof(*st)))) {
		snprintf(st_err, sizeof(st_err), "out of memory");
		return;
	}
	for (;;) {
		bool ok = vs_state_load(path, st, why, sizeof(why)) == 0;

		if (ok && st->status == VS_READY)
			return;
		if (ok && st->status == VS_FAILED) {
			snprintf(st_err, sizeof(st_err), "job %u's guests on this node failed: %s", job, st->error);
			break;
		}
		if (ok && st->holder && kill(st->holder, 0) < 0) {
			snprintf(st_err, sizeof(st_err), "job %u: vhpc-slurmjob died while starting the guests", job);
			break;
		}
		/* No holder after a while: the job has no extern step. */
		if (!ok && time(NULL) > t0 + 20) {
			snprintf(st_err, sizeof(st_err), "job %u has no guests on this node (%s): slurm.conf needs "
				 "PrologFlags=Contain, and the job --vhpc-image from its submission", job, why);
			break;
		}
		if (time(NULL) > t0 + READY_WAIT_S) {
			snprintf(st_err, sizeof(st_err), "job %u's guests were not ready within %d s", job, READY_WAIT_S);
			break;
		}
		usleep(20000);
	}
	free(st);
	st = NULL;
}

/* A step's options must be the job's: its guests exist already. */
static void check_step_options(void)
{
	struct vs_opts job;
	char words[512], why[700];

	if (!opts.set || !st)
		return;
	for (int i = 0; i < st->nenv; i++)
		if (!strncmp(st->env[i], "VHPC_SLURM_OPTIONS=", 19) &&
		    vs_opts_parse(st->env[i] + 19, &job, why, sizeof(why)) == 0) {
			if ((opts.image[0] && strcmp(opts.image, job.image)) ||
			    (opts.driver[0] && strcmp(opts.driver, job.driver)) ||
			    (opts.vcpus && opts.vcpus != job.vcpus) || (opts.mem && opts.mem != job.mem) ||
			    (given[vs_opt_index(JO_NOVMSHM)] && !job.no_vmshm) ||
			    (given[vs_opt_index(JO_NOSINGLECOPY)] && !job.no_single_copy) ||
			    (opts.rdma && opts.rdma != job.rdma) ||
			    (opts.devices[0] && strcmp(opts.devices, job.devices))) {
				vs_opts_format(&job, words, sizeof(words));
				snprintf(st_err, sizeof(st_err), "this step's --vhpc-* options differ from its job's (%s): "
					 "a job's guests are set when it is submitted", words);
				free(st);
				st = NULL;
			}
			return;
		}
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char path[PATH_MAX + 32];
	uint32_t job = 0, step = 0;

	if (parse_args(ac, av) < 0)
		return -1;
	if (!spank_remote(sp))
		return spank_context() == S_CTX_LOCAL || spank_context() == S_CTX_ALLOCATOR ? submit_side(sp) : 0;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
		return 0;
	if (step == STEP_EXTERN)
		return extern_step(sp);
	file_of(path, sizeof(path), job, "state");
	if (step == STEP_BATCH) {
		char o[PATH_MAX + 32];

		/* The batch script stays on the node; `vhpc mpirun` in it finds
		 * the guests through the user's copy of the state (not there yet
		 * maybe: the holder writes it once it has read the opts). */
		file_of(o, sizeof(o), job, "opts");
		if (access(path, F_OK) == 0 || access(o, F_OK) == 0) {
			file_of(path, sizeof(path), job, "user");
			spank_setenv(sp, "VHPC_SLURM_STATE", path, 1);
		}
		return 0;
	}
	if (step == STEP_INTERACT)
		return 0;
	/* A step of a job whose prolog recorded options, or with its own. */
	if (access(path, F_OK) < 0 && !opts.set)
		return 0;
	wait_ready(job);
	check_step_options();
	return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	char why[600];
	uid_t uid;
	gid_t gid;
	int task = 0;

	if (parse_args(ac, av) < 0)
		return -1;
	if (!st && !st_err[0])
		return 0;
	if (!st) {
		slurm_error("vhpc: %s", st_err);
		return -1;
	}
	if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
		return -1;
	/* Tasks go round-robin over the node's guests. */
	my_guest = &st->g[task % st->nguests];
	/* A VM's task is relayed in task_init; nothing to join here. */
	if (strcmp(st->driver, "container"))
		return 0;
	if (vs_relay_start(my_guest->netns, uid, gid, &relay, why, sizeof(why)) < 0) {
		slurm_error("vhpc: task %d: PMIx relay into guest g%d: %s", task, my_guest->index, why);
		return -1;
	}
	have_relay = true;
	if (vs_enter_guest(my_guest, why, sizeof(why)) < 0) {
		slurm_error("vhpc: task %d: %s", task, why);
		return -1;
	}
	return 0;
}

/* The task's environment in the guest: the guest's own (PATH first), Open
 * MPI's settings for guests unless the user gave theirs, PMIx through the
 * relay. */
static int guest_env(spank_t sp)
{
	char v[4096], buf[4200], why[300], **env = NULL;
	char uri[16][64];
	int server[VS_RELAY_PORTS] = { 0 }, nserver = 0, nuri = 0;

	for (int i = 0; i < st->nenv; i++) {
		char name[128];
		const char *eq = strchr(st->env[i], '=');
		size_t n = (size_t)(eq - st->env[i]);

		if (n >= sizeof(name))
			continue;
		memcpy(name, st->env[i], n);
		name[n] = 0;
		if (!strcmp(name, "PATH")) {
			if (spank_getenv(sp, "PATH", v, sizeof(v)) == ESPANK_SUCCESS && v[0])
				snprintf(buf, sizeof(buf), "%s:%s", eq + 1, v);
			else
				snprintf(buf, sizeof(buf), "%s", eq + 1);
			spank_setenv(sp, "PATH", buf, 1);
		} else {
			spank_setenv(sp, name, eq + 1, !strncmp(name, "VHPC_", 5));
		}
	}
	snprintf(buf, sizeof(buf), "g%d", my_guest->index);
	spank_setenv(sp, "VHPC_GUEST_ID", buf, 1);
	snprintf(buf, sizeof(buf), "%d", my_guest->index);
	spank_setenv(sp, "VHPC_GUEST_INDEX", buf, 1);
	spank_setenv(sp, "TMPDIR", "/tmp", 1);
	/* Every PMIX_SERVER_URI*: each server port gets a relay port.  The
	 * names first: setting a variable may move the environment. */
	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
		env = NULL;
	for (int i = 0; env && env[i] && nuri < 16; i++) {
		const char *eq = strchr(env[i], '=');

		if (!strncmp(env[i], "PMIX_SERVER_URI", 15) && eq && (size_t)(eq - env[i]) < sizeof(uri[0]))
			snprintf(uri[nuri++], sizeof(uri[0]), "%.*s", (int)(eq - env[i]), env[i]);
	}
	for (int i = 0; i < nuri; i++) {
		int port, k;

		if (spank_getenv(sp, uri[i], v, sizeof(v)) != ESPANK_SUCCESS ||
		    vs_pmix_uri_rewrite(v, 0, buf, sizeof(buf), &port) < 0)
			continue;
		for (k = 0; k < nserver && server[k] != port; k++)
			;
		if (k == nserver) {
			if (nserver == VS_RELAY_PORTS)
				continue;
			server[nserver++] = port;
		}
		if (vs_pmix_uri_rewrite(v, relay.port[k], buf, sizeof(buf), &port) == 0)
			spank_setenv(sp, uri[i], buf, 1);
	}
	if (!nserver || !have_relay)
		return 0;
	/* Its shared-memory store lives in the node's /tmp, which the guest
	 * does not see: data comes over the relayed connection instead. */
	spank_setenv(sp, "PMIX_GDS_MODULE", "hash", 1);
	spank_setenv(sp, "PMIX_MCA_gds", "hash", 1);
	if (vs_relay_aim(&relay, server, why, sizeof(why)) < 0) {
		slurm_error("vhpc: %s", why);
		return -1;
	}
	return 0;
}

/* A task whose guest is a VM becomes `vhpc-slurmjob task`, which runs
 * the program there (relay.c): its exec replaces slurmstepd's. */
static int relay_into_vm(spank_t sp)
{
	char prog[PATH_MAX + 32], port[16], guest[16], **env = NULL, **jargv = NULL;
	const char *args[16 + 4096];
	int jargc = 0, n = 0;

	if (spank_get_item(sp, S_JOB_ARGV, &jargc, &jargv) != ESPANK_SUCCESS || jargc < 1 ||
	    spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS) {
		slurm_error("vhpc: the task's command line or environment is not at hand");
		return -1;
	}
	if (jargc > 4096) {
		slurm_error("vhpc: a task of %d words is more than a guest takes (4096)", jargc);
		return -1;
	}
	snprintf(prog, sizeof(prog), "%s/vhpc-slurmjob", cfg.bindir);
	snprintf(port, sizeof(port), "%u", my_guest->vsock_port);
	snprintf(guest, sizeof(guest), "g%d", my_guest->index);
	args[n++] = prog;
	args[n++] = "task";
	args[n++] = "--sock";
	args[n++] = my_guest->sock;
	if (my_guest->vsock_port) {
		args[n++] = "--vsock-port";
		args[n++] = port;
	}
	args[n++] = "--key";
	args[n++] = st->key;
	args[n++] = "--guest";
	args[n++] = guest;
	args[n++] = "--";
	for (int i = 0; i < jargc; i++)
		args[n++] = jargv[i];
	args[n] = NULL;
	execve(prog, (char *const *)args, env);
	slurm_error("vhpc: cannot run %s: %s", prog, strerror(errno));
	return -1;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	char why[300];

	if (parse_args(ac, av) < 0)
		return -1;
	if (!my_guest)
		return 0;
	if (guest_env(sp) < 0)
		return -1;
	if (have_relay && relay.aim_fd >= 0) {
		/* Not a PMIx task: the relay ends. */
		close(relay.aim_fd);
		relay.aim_fd = -1;
	}
	if (!my_guest->pid)
		return relay_into_vm(sp);
	/* The guest's RLIMIT_MEMLOCK (task_init_privileged took it) stays:
	 * slurmstepd would set the soft limit srun had (PropagateResourceLimits)
	 * just before exec, from this variable of the task's environment. */
	spank_unsetenv(sp, "SLURM_RLIMIT_MEMLOCK");
	if (vs_become_guest_task(my_guest, why, sizeof(why)) < 0) {
		slurm_error("vhpc: %s", why);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------ prolog, epilog */

/* Whether a job dir of the run dir has lost its owner, or a state file
 * its holder: only then is vhpc-slurmjob sweep worth its exec. */
static bool anything_stale(void)
{
	char dir[PATH_MAX + 16];
	struct dirent *de;
	bool stale = false;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/jobs", cfg.run_dir);
	if ((d = opendir(dir))) {
		while (!stale && (de = readdir(d))) {
			char lock[PATH_MAX + 300];
			struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
			int fd;

			if (de->d_name[0] == '.')
				continue;
			snprintf(lock, sizeof(lock), "%s/%s/lock", dir, de->d_name);
			fd = open(lock, O_RDONLY | O_CLOEXEC);
			stale = fd < 0 || fcntl(fd, F_OFD_GETLK, &fl) < 0 || fl.l_type == F_UNLCK;
			if (fd >= 0)
				close(fd);
		}
		closedir(d);
	}
	return stale;
}

static void sweep(void)
{
	const char *args[] = { "sweep", NULL };
	char why[400];

	if (anything_stale() && run_tool(args, false, false, why, sizeof(why)) != 0)
		slurm_error("vhpc: sweeping what dead jobs left: %s", why[0] ? why : "vhpc-slurmjob sweep failed");
}

static int write_opts(uint32_t job, const char *words)
{
	char path[PATH_MAX + 32], text[8192], why[PATH_MAX + 200];
	const char *uid = getenv("SLURM_JOB_UID"), *gid = getenv("SLURM_JOB_GID");
	const char *node = getenv("SLURMD_NODENAME"), *nodes = getenv("SLURM_NODELIST");
	const char *wd = getenv("SLURM_JOB_WORK_DIR"), *cpn = getenv("SLURM_JOB_CPUS_PER_NODE");
	int n;

	if (!uid || !gid || !node || !nodes || !cpn) {
		slurm_error("vhpc: job %u: the prolog's environment lacks SLURM_JOB_UID, SLURM_JOB_GID, "
			    "SLURMD_NODENAME, SLURM_NODELIST or SLURM_JOB_CPUS_PER_NODE", job);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/slurm", cfg.run_dir);
	/* Its parents as the node agent makes a run dir; itself passable by
	 * all, for the state files of `vhpc mpirun`. */
	for (char *s = path + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			slurm_error("vhpc: cannot create %s: %s", path, strerror(errno));
			return -1;
		}
		*s = '/';
	}
	if (mkdir(path, 0711) < 0 && errno != EEXIST) {
		slurm_error("vhpc: cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	n = snprintf(text, sizeof(text), "%s\noptions %s\nuid %s\ngid %s\nnode %s\nnodelist %s\ncpus_per_node %s\n"
		     "workdir %s\n", VS_OPTS_MAGIC, words, uid, gid, node, nodes, cpn, wd && *wd ? wd : "-");
	if (n < 0 || (size_t)n >= sizeof(text) || strpbrk(words, "\n") || strpbrk(wd ? wd : "", "\n")) {
		slurm_error("vhpc: job %u: its options or folders do not fit the opts file", job);
		return -1;
	}
	file_of(path, sizeof(path), job, "opts");
	if (vs_file_write(path, text, NULL, why, sizeof(why)) < 0) {
		slurm_error("vhpc: writing %s", why);
		return -1;
	}
	return 0;
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	const char *words = getenv("SPANK_VHPC");
	uint32_t job = 0;

	if (parse_args(ac, av) < 0)
		return -1;
	sweep();
	if (!words || !*words || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
		return 0;
	/* A system fault fails the prolog (Slurm then drains the node); the
	 * job's own mistakes reach its steps through the state file. */
	return write_opts(job, words);
}

/* Stops the job's holder: it removes the guests on SIGTERM. */
static void stop_holder(uint32_t job)
{
	char path[PATH_MAX + 32], why[600], comm[64] = "";
	struct vs_state *s = malloc(sizeof(*s));
	FILE *f;

	file_of(path, sizeof(path), job, "state");
	if (!s || vs_state_load(path, s, why, sizeof(why)) < 0 || !s->holder)
		goto out;
	snprintf(why, sizeof(why), "/proc/%d/comm", (int)s->holder);
	if ((f = fopen(why, "r"))) {
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
	}
	if (strncmp(comm, "vhpc-slurmjob", 13))
		goto out;
	kill(s->holder, SIGTERM);
	for (int i = 0; i < 600 && kill(s->holder, 0) == 0; i++)
		usleep(50000);
	if (kill(s->holder, 0) == 0) {
		slurm_error("vhpc: job %u: vhpc-slurmjob (pid %d) did not stop in 30 s; killing it", job, (int)s->holder);
		kill(s->holder, SIGKILL);
	}
out:
	free(s);
	unlink(path);
	file_of(path, sizeof(path), job, "user");
	unlink(path);
	file_of(path, sizeof(path), job, "opts");
	unlink(path);
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	uint32_t job = 0;

	if (parse_args(ac, av) < 0)
		return -1;
	if (spank_get_item(sp, S_JOB_ID, &job) == ESPANK_SUCCESS)
		stop_holder(job);
	sweep();
	return 0;
}
