/*
 * `vhpc mpirun`: in the batch script of a Slurm job submitted with
 * --vhpc-image, runs mpirun inside the job's guest 0 with vhpc-rsh as its
 * launch agent, across every guest of the job, as `vhpc run` does on one
 * machine.  For sites whose Slurm has no PMIx (srun --mpi=pmix is the
 * other way).  The batch script runs on the job's first node, which holds
 * guest 0; the SPANK plugin tells it where the guests are
 * ($VHPC_SLURM_STATE).  mpirun starts in guest 0 with guestd's environment,
 * so nothing of Slurm's (SLURM_*) reaches it and Open MPI uses vhpc-rsh,
 * not its Slurm launcher.
 */
#include "lib/argv.h"
#include "lib/chan.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/gexec.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "cli.h"
#include "jobargs.h"
#include "optgen.h"
#include "scheduler/launch.h"
#include "slurm/slurm.h"

#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define READY_WAIT_S 600
#define PROBE_MS     120000

static volatile int forward_sig;

static void on_signal(int sig)
{
	forward_sig = sig;
}

/* -n, --map-by and -x are vhpc run's (lib/jobopts.c), with words for
 * a job whose guests Slurm made. */
static const struct opt mpirun_rows[] = {
	{ .id = JO_RANKS, .help = "ranks (default: every slot of every guest)" },
	{ .id = JO_MAPBY, .help = "round-robin over the guests (default) or fill each in turn" },
	{ .id = JO_ENV, .help = "pass a variable to the ranks (your value when none is given)" },
	{ .id = JO_HELP, .help = "this help" },
};
#define MPIRUN_ROWS (sizeof(mpirun_rows) / sizeof(mpirun_rows[0]))

static void help(void)
{
	struct opt rows[MPIRUN_ROWS];
	struct optset s = { .n = 0 };

	printf("usage: vhpc mpirun [-n RANKS] [--map-by node|slot] [-x NAME[=VALUE]]... [--] PROGRAM [ARGS...]\n"
	       "\n"
	       "In the batch script of a Slurm job submitted with --vhpc-image: mpirun in the job's\n"
	       "guest 0, across all its guests (one slot per vCPU), with vhpc-rsh as its launch agent.\n");
	optset_words(&s, rows, mpirun_rows, MPIRUN_ROWS, JO_MPIRUN);
	optset_help(&s, 21, stdout);
}

/* The options, then the program, into j; 0, 1 after --help, or a usage
 * error's exit status. */
static int mpirun_args(int argc, char **argv, struct job_spec *j)
{
	struct opt rows[MPIRUN_ROWS];
	struct optset s = { .n = 0 };
	int rc;

	job_spec_defaults(j);
	optset_words(&s, rows, mpirun_rows, MPIRUN_ROWS, JO_MPIRUN);
	if ((rc = job_args_options("mpirun", &s, argc, argv, j, help)))
		return rc;
	if (optind >= argc)
		return usage_error("mpirun", "no program to run (vhpc mpirun [OPTIONS] PROGRAM [ARGS...])");
	j->command.n = (size_t)(argc - optind);
	if (!(j->command.v = calloc(j->command.n + 1, sizeof(char *))))
		return EXIT_VHPC;
	for (size_t i = 0; i < j->command.n; i++)
		if (!(j->command.v[i] = strdup(argv[optind + (int)i])))
			return EXIT_VHPC;
	return 0;
}

/* Until the job's guests on this node are ready (the state file). */
static int wait_state(const char *path, struct vs_state *st)
{
	time_t end = time(NULL) + READY_WAIT_S;
	char why[800];

	for (;;) {
		int rc = vs_state_load(path, st, why, sizeof(why));

		if (rc == 0 && st->status == VS_READY)
			return 0;
		if (rc == 0 && st->status == VS_FAILED) {
			log_err("the job's guests failed: %s", st->error);
			return -1;
		}
		if (time(NULL) > end) {
			log_err("the job's guests were not ready within %d s (%s)", READY_WAIT_S,
				rc < 0 ? why : "still preparing");
			return -1;
		}
		usleep(50000);
	}
}

/* How many guests the job has: the plugin's rule over Slurm's CPUs. */
static int job_guests(const struct vs_state *st, int *total, int *vcpus)
{
	const char *cpn = getenv("SLURM_JOB_CPUS_PER_NODE");
	int cpus[VS_MAX_NODES], n, first, count;
	struct vs_opts o = { 0 };
	char why[300] = "no VHPC_SLURM_OPTIONS";

	for (int i = 0; i < st->nenv; i++)
		if (!strncmp(st->env[i], "VHPC_SLURM_OPTIONS=", 19) &&
		    vs_opts_parse(st->env[i] + 19, &o, why, sizeof(why)) == 0)
			why[0] = 0;
	if (why[0] || !cpn || vs_cpus_per_node(cpn, cpus, VS_MAX_NODES, &n, why, sizeof(why)) < 0) {
		log_err("the job's layout: %s", why[0] ? why : "SLURM_JOB_CPUS_PER_NODE is not set");
		return -1;
	}
	*vcpus = o.vcpus ? o.vcpus : 1;
	if (vs_layout(cpus, n, *vcpus, 0, &first, &count, total, why, sizeof(why)) < 0) {
		log_err("the job's layout: %s", why);
		return -1;
	}
	return 0;
}

/* mpirun fails when it cannot reach a guest: first every guest's agent
 * answers (the other nodes' guests may still be starting). */
static int probe_all(struct chan *c, int total, struct verr *err)
{
	char script[] = "i=0; while [ $i -lt \"$1\" ]; do "
			"until vhpc-rsh g$i true 2>/dev/null; do sleep 0.2; done; i=$((i + 1)); done";
	char n[16];
	const char *argv[] = { "sh", "-c", script, "probe", n, NULL };
	struct gexec_req req = { .argv = argv, .env = launch_env, .cwd = "/", .out_fd = -1, .err_fd = -1,
				 .timeout_ms = PROBE_MS, .cancel = &forward_sig };
	int status, rc;

	snprintf(n, sizeof(n), "%d", total);
	rc = gexec_run(c, &req, &status, err);
	if (rc == GEXEC_TIMEOUT || (rc == 0 && status))
		return verr_set(err, "not every guest of the job answered within %d s", PROBE_MS / 1000);
	return rc;
}

static int connect_g0(const struct vs_state *st, struct chan *c, struct verr *err)
{
	uint8_t key[CHAN_KEY_LEN];
	int rc;

	if (chan_key_load(st->key, key, err) < 0)
		return -1;
	rc = st->g[0].vsock_port ? gexec_connect_vsock(c, st->g[0].sock, st->g[0].vsock_port, key, 10000, err)
				 : gexec_connect_unix(c, st->g[0].sock, key, 10000, err);
	explicit_bzero(key, sizeof(key));
	return rc;
}

int cmd_mpirun(int argc, char **argv)
{
	const char *path = getenv("VHPC_SLURM_STATE");
	struct job_spec j;
	struct launch_plan lp = { 0 };
	struct launch_guest *lg = NULL;
	struct vs_state *st = NULL;
	struct gexec_req req = { 0 };
	struct passwd *pw = getpwuid(getuid());
	char cwd[PATH_MAX], **margv = NULL;
	int c, total, vcpus, status = EXIT_VHPC, *split = NULL;
	struct sigaction sa = { .sa_handler = on_signal };
	struct chan ch;
	struct verr e;

	if ((c = mpirun_args(argc, argv, &j))) {
		job_spec_free(&j);
		return c == 1 ? 0 : c;
	}
	if (!path || !*path) {
		log_err("vhpc mpirun runs in the batch script of a Slurm job submitted with --vhpc-image "
			"($VHPC_SLURM_STATE is not set)");
		job_spec_free(&j);
		return EXIT_VHPC;
	}
	if (!(st = malloc(sizeof(*st))) || wait_state(path, st) < 0 || job_guests(st, &total, &vcpus) < 0)
		goto out;
	if (st->nguests < 1 || st->g[0].index != 0) {
		log_err("this node does not hold the job's guest g0: vhpc mpirun runs in the batch script, on the "
			"job's first node");
		goto out;
	}
	if (!j.ranks)
		j.ranks = (long long)total * vcpus;
	if (!(lg = calloc((size_t)total, sizeof(*lg))) || !(split = calloc((size_t)total, sizeof(int))))
		goto out;
	launch_split_ranks((int)j.ranks, total, split);
	for (int i = 0; i < total; i++) {
		snprintf(lg[i].name, sizeof(lg[i].name), "g%d", i);
		lg[i].vcpus = vcpus;
		lg[i].ranks = split[i];
	}
	lp.spec = &j;
	lp.nguests = total;
	lp.guests = lg;
	lp.rsh_path = LAUNCH_RSH;
	lp.hostfile = "/vhpc/hostfile";
	lp.net_if = "eth0";
	/* What the job has, as the holder told its tasks (slurm/holder.c). */
	for (int i = 0; i < st->nenv; i++) {
		static const char ofi[] = "OMPI_MCA_btl_ofi_provider_include=";

		lp.vmshm |= !strncmp(st->env[i], "VHPC_VMSHM_PATH=", 16);
		lp.fabric |= !strncmp(st->env[i], ofi, sizeof(ofi) - 1);
	}
	lp.vmshm_component_dir = VHPC_GUEST_VMSHM_DIR;
	lp.workdir = getcwd(cwd, sizeof(cwd));
	lp.home = pw ? pw->pw_dir : NULL;
	if (!(margv = launch_guest_argv(&lp)))
		goto out;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (connect_g0(st, &ch, &e) < 0) {
		log_err("guest g0: %s", e.msg);
		goto out;
	}
	if (probe_all(&ch, total, &e) < 0) {
		log_err("guest g0: %s", e.msg);
		chan_close(&ch);
		goto out;
	}
	req.argv = (const char *const *)margv;
	req.env = launch_env;
	req.cwd = lp.workdir;
	req.out_fd = STDOUT_FILENO;
	req.err_fd = STDERR_FILENO;
	req.cancel = &forward_sig;
	if (gexec_run(&ch, &req, &status, &e) < 0) {
		log_err("mpirun in guest g0: %s", e.msg);
		status = EXIT_VHPC;
	}
	chan_close(&ch);
out:
	argv_free(margv);
	free(split);
	free(lg);
	free(st);
	job_spec_free(&j);
	return status;
}
