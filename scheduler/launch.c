#include "lib/argv.h"
#include "lib/consts.h"
#include "lib/jobspec.h"
#include "lib/mpibtl.h"
#include "launch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const launch_env[] = {
	"PATH=" LAUNCH_IMAGE_PATH, "HOME=/tmp", "TMPDIR=/tmp",
	"VHPC_JOB_KEY=/vhpc/job.key", NULL
};

void launch_split_ranks(int ranks, int nguests, int *out)
{
	for (int i = 0; i < nguests; i++)
		out[i] = ranks / nguests + (i < ranks % nguests ? 1 : 0);
}

/* Guests with more ranks than this keep vader's default fast boxes: a
 * rank holds up to 32 of them in its 4 MiB segment. */
#define LAUNCH_BIG_FBOX_RANKS 8

static bool env_has(const struct job_spec *j, const char *key)
{
	for (size_t i = 0; i < j->env.n; i++)
		if (!strcmp(j->env.key[i], key))
			return true;
	return false;
}

/* The job's own environment, as the ranks get it (mpirun's -x before each
 * for the launch, bare for vhpc exec): its PATH and LD_LIBRARY_PATH come
 * after the image's, so that vhpc's programs stay found. */
static void add_job_env(struct argv_b *a, const struct job_spec *j, bool as_x)
{
	for (size_t i = 0; i < j->env.n; i++) {
		const char *k = j->env.key[i], *v = j->env.val[i];

		if (as_x)
			argv_add(a, "-x");
		if (!strcmp(k, "PATH"))
			argv_add(a, "PATH=%s%s%s", LAUNCH_IMAGE_PATH, *v ? ":" : "", v);
		else if (!strcmp(k, "LD_LIBRARY_PATH"))
			argv_add(a, "LD_LIBRARY_PATH=%s%s%s", LAUNCH_IMAGE_LIBS, *v ? ":" : "", v);
		else
			argv_add(a, "%s=%s", k, v);
	}
}

char **launch_mpirun_argv(const struct launch_plan *p)
{
	struct argv_b a = { 0 };
	const struct job_spec *j = p->spec;
	bool ranks_share = false;
	int most_ranks = 0;
	char btl[64];

	for (int i = 0; i < p->nguests; i++) {
		if (p->guests[i].ranks > p->guests[i].vcpus)
			ranks_share = true;
		if (p->guests[i].ranks > most_ranks)
			most_ranks = p->guests[i].ranks;
	}
	argv_add(&a, "mpirun");
	argv_add(&a, "--allow-run-as-root");
	argv_add(&a, "-np");
	argv_add(&a, "%lld", j->ranks);
	argv_add(&a, "--hostfile");
	argv_add(&a, "%s", p->hostfile);
	argv_add(&a, "--map-by");
	argv_add(&a, "%s", j->map_by == MAP_BY_SLOT ? "slot" : "node");
	/* Guests are pinned 1:1 already; inside, ranks get cores of their
	 * own unless there are more ranks than vCPUs. */
	argv_add(&a, "--bind-to");
	argv_add(&a, "%s", ranks_share ? "none" : "core");
	/* Guests are given different cores; without this every orted assumes
	 * mpirun's topology and binds to cores its guest may not use. */
	argv_add(&a, "--mca");
	argv_add(&a, "orte_hetero_nodes");
	argv_add(&a, "1");
	argv_add(&a, "--mca");
	argv_add(&a, "plm_rsh_agent");
	argv_add(&a, "%s", p->rsh_path);
	/* Each guest's vhpc-guestd starts its orted directly from mpirun:
	 * no tree spawn, so a launch failure names the guest it happened on. */
	argv_add(&a, "--mca");
	argv_add(&a, "plm_rsh_no_tree_spawn");
	argv_add(&a, "1");
	/* ob1 always: the BTL choice is then the only transport difference
	 * between runs with and without vmshm (a UCX PML would bypass BTLs). */
	argv_add(&a, "--mca");
	argv_add(&a, "pml");
	argv_add(&a, "ob1");
	/* osc rdma fails MPI_Win_create when a peer lacks RDMA BTLs (tcp too);
	 * pt2pt over ob1 works everywhere. */
	argv_add(&a, "--mca");
	argv_add(&a, "osc");
	argv_add(&a, "^rdma");
	mpibtl_list(btl, sizeof(btl), true, p->vmshm, p->fabric);
	argv_add(&a, "--mca");
	argv_add(&a, "btl");
	argv_add(&a, "%s", btl);
	for (int i = 0; p->fabric && mpibtl_fabric_mca[i][0]; i++) {
		argv_add(&a, "--mca");
		argv_add(&a, "%s", mpibtl_fabric_mca[i][0]);
		argv_add(&a, "%s", mpibtl_fabric_mca[i][1]);
	}
	if (p->vmshm && p->vmshm_component_dir) {
		argv_add(&a, "--mca");
		argv_add(&a, "mca_base_component_path");
		argv_add(&a, VHPC_GUEST_OMPI_COMPONENTS ":%s", p->vmshm_component_dir);
	}
	argv_add(&a, "--mca");
	argv_add(&a, "btl_tcp_if_include");
	argv_add(&a, "%s", p->net_if);
	argv_add(&a, "--mca");
	argv_add(&a, "oob_tcp_if_include");
	argv_add(&a, "%s", p->net_if);
	if (ranks_share || j->oversubscribe) {
		/* Ranks that share a core must yield, or they spin each other out. */
		argv_add(&a, "--mca");
		argv_add(&a, "mpi_yield_when_idle");
		argv_add(&a, "1");
	}
	if (ranks_share && most_ranks <= LAUNCH_BIG_FBOX_RANKS && !env_has(j, "OMPI_MCA_btl_vader_fbox_size")) {
		/* A rank that outruns a peer sharing its core fills vader's 4 KiB
		 * fast box (128 small messages), then waits for fragments the
		 * peer returns only when it gets the core: fixed-root Bcast of
		 * 1 byte took 2-2.5 us instead of 0.4 (4 ranks in two 1-vCPU
		 * guests).  64 KiB per peer, at most 7 peers per rank. */
		argv_add(&a, "--mca");
		argv_add(&a, "btl_vader_fbox_size");
		argv_add(&a, "65536");
	}
	argv_add(&a, "-wdir");
	argv_add(&a, "%s", p->workdir ? p->workdir : "/tmp");
	if (!env_has(j, "HOME")) {
		argv_add(&a, "-x");
		argv_add(&a, "HOME=%s", p->home ? p->home : "/tmp");
	}
	add_job_env(&a, j, true);
	for (size_t i = 0; i < j->command.n; i++)
		argv_add(&a, "%s", j->command.v[i]);
	return argv_finish(&a);
}

char **launch_exec_env(const struct job_spec *j, const char *home)
{
	struct argv_b a = { 0 };

	for (int i = 0; launch_env[i]; i++)
		argv_add(&a, "%s", launch_env[i]);
	if (!env_has(j, "HOME"))
		argv_add(&a, "HOME=%s", home && *home ? home : "/tmp");
	add_job_env(&a, j, false);
	return argv_finish(&a);
}

void launch_rank_path(const struct job_spec *j, char *buf, size_t len)
{
	const char *v = NULL;

	for (size_t i = 0; i < j->env.n; i++)
		if (!strcmp(j->env.key[i], "PATH"))
			v = j->env.val[i];
	snprintf(buf, len, "%s%s%s", LAUNCH_IMAGE_PATH, v && *v ? ":" : "", v ? v : "");
}

/* $1 the program, $2 the image, $3 the ranks' PATH, $4 their working
 * folder (the check may run elsewhere: vhpcd starts mpirun in /tmp), then
 * mpirun's argv.  What Open MPI's orted does for each rank
 * (opal_path_findv): a name with a slash is taken as it is, from the
 * working folder; any other is looked for along PATH, whose relative
 * entries (an empty one too) are the working folder's. */
static const char launch_check_sh[] =
	"p=$1 img=$2 path=$3 w=$4; shift 4\n"
	"ok() { [ -f \"$1\" ] && [ -x \"$1\" ]; }\n"
	"case $p in\n"
	"*/*)\tcase $p in /*) f=$p;; *) f=$w/$p;; esac\n"
	"\tok \"$f\" && exec \"$@\"\n"
	"\t[ -e \"$f\" ] && { printf 'vhpc: %s: not an executable file\\n' \"$p\" >&2; exit 126; }\n"
	"\tcase $p in\n"
	"\t/*) where=\"in $img or the job's folders\";;\n"
	"\t*) where=\"in $w (the job's working folder)\";;\n"
	"\tesac;;\n"
	"*)\tset -f; IFS=:\n"
	"\tfor d in $path; do\n"
	"\t\tcase $d in /*) ;; *) d=$w/$d;; esac\n"
	"\t\tok \"$d/$p\" && { unset IFS; set +f; exec \"$@\"; }\n"
	"\tdone\n"
	"\twhere=\"in $img (PATH=$path)\";;\n"
	"esac\n"
	"printf 'vhpc: %s: not found %s\\n' \"$p\" \"$where\" >&2\n"
	"exit 127\n";

char **launch_guest_argv(const struct launch_plan *p)
{
	struct argv_b a = { 0 };
	char **mp = launch_mpirun_argv(p), path[4096];
	const char *image = p->image ? p->image : p->spec->image;

	if (!mp || p->spec->command.n == 0)
		return mp;
	launch_rank_path(p->spec, path, sizeof(path));
	argv_add(&a, "/bin/sh");
	argv_add(&a, "-c");
	argv_add(&a, "%s", launch_check_sh);
	argv_add(&a, "vhpc");
	argv_add(&a, "%s", p->spec->command.v[0]);
	if (image)
		argv_add(&a, "image %s", image);
	else
		argv_add(&a, "the job's image");
	argv_add(&a, "%s", path);
	argv_add(&a, "%s", p->workdir ? p->workdir : "/tmp");
	for (char **q = mp; *q; q++)
		argv_add(&a, "%s", *q);
	argv_free(mp);
	return argv_finish(&a);
}
