#include "lib/consts.h"
#include "lib/jobspec.h"
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

struct argv_b { char **v; size_t n, cap; bool oom; };

static void push(struct argv_b *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void push(struct argv_b *a, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (a->oom)
		return;
	if (a->n + 2 > a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 32;
		char **nv = realloc(a->v, ncap * sizeof(*nv));

		if (!nv) {
			a->oom = true;
			return;
		}
		a->v = nv;
		a->cap = ncap;
	}
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0) {
		a->oom = true;
		va_end(ap);
		return;
	}
	va_end(ap);
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
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
	push(&a, "mpirun");
	push(&a, "--allow-run-as-root");
	push(&a, "-np");
	push(&a, "%lld", j->ranks);
	push(&a, "--hostfile");
	push(&a, "%s", p->hostfile);
	push(&a, "--map-by");
	push(&a, "%s", j->map_by == MAP_BY_SLOT ? "slot" : "node");
	/* Guests are pinned 1:1 already; inside, ranks get cores of their
	 * own unless there are more ranks than vCPUs. */
	push(&a, "--bind-to");
	push(&a, "%s", ranks_share ? "none" : "core");
	/* Guests are given different cores; without this every orted assumes
	 * mpirun's topology and binds to cores its guest may not use. */
	push(&a, "--mca");
	push(&a, "orte_hetero_nodes");
	push(&a, "1");
	push(&a, "--mca");
	push(&a, "plm_rsh_agent");
	push(&a, "%s", p->rsh_path);
	/* Each guest's vhpc-guestd starts its orted directly from mpirun:
	 * no tree spawn, so a launch failure names the guest it happened on. */
	push(&a, "--mca");
	push(&a, "plm_rsh_no_tree_spawn");
	push(&a, "1");
	/* ob1 always: the BTL choice is then the only transport difference
	 * between runs with and without vmshm (a UCX PML would bypass BTLs). */
	push(&a, "--mca");
	push(&a, "pml");
	push(&a, "ob1");
	/* osc rdma fails MPI_Win_create when a peer lacks RDMA BTLs (tcp too);
	 * pt2pt over ob1 works everywhere. */
	push(&a, "--mca");
	push(&a, "osc");
	push(&a, "^rdma");
	snprintf(btl, sizeof(btl), "self,vader,%stcp", p->vmshm ? "vmshm," : "");
	push(&a, "--mca");
	push(&a, "btl");
	push(&a, "%s", btl);
	if (p->vmshm && p->vmshm_component_dir) {
		push(&a, "--mca");
		push(&a, "mca_base_component_path");
		push(&a, VHPC_GUEST_OMPI_COMPONENTS ":%s", p->vmshm_component_dir);
	}
	push(&a, "--mca");
	push(&a, "btl_tcp_if_include");
	push(&a, "%s", p->net_if);
	push(&a, "--mca");
	push(&a, "oob_tcp_if_include");
	push(&a, "%s", p->net_if);
	if (ranks_share || j->oversubscribe) {
		/* Ranks that share a core must yield, or they spin each other out. */
		push(&a, "--mca");
		push(&a, "mpi_yield_when_idle");
		push(&a, "1");
	}
	if (ranks_share && most_ranks <= LAUNCH_BIG_FBOX_RANKS && !env_has(j, "OMPI_MCA_btl_vader_fbox_size")) {
		/* A rank that outruns a peer sharing its core fills vader's 4 KiB
		 * fast box (128 small messages), then waits for fragments the
		 * peer returns only when it gets the core: fixed-root Bcast of
		 * 1 byte took 2-2.5 us instead of 0.4 (4 ranks in two 1-vCPU
		 * guests).  64 KiB per peer, at most 7 peers per rank. */
		push(&a, "--mca");
		push(&a, "btl_vader_fbox_size");
		push(&a, "65536");
	}
	push(&a, "-wdir");
	push(&a, "%s", p->workdir ? p->workdir : "/tmp");
	if (!env_has(j, "HOME")) {
		push(&a, "-x");
		push(&a, "HOME=%s", p->home ? p->home : "/tmp");
	}
	for (size_t i = 0; i < j->env.n; i++) {
		const char *k = j->env.key[i], *v = j->env.val[i];

		push(&a, "-x");
		if (!strcmp(k, "PATH"))
			push(&a, "PATH=%s%s%s", LAUNCH_IMAGE_PATH, *v ? ":" : "", v);
		else if (!strcmp(k, "LD_LIBRARY_PATH"))
			push(&a, "LD_LIBRARY_PATH=%s%s%s", LAUNCH_IMAGE_LIBS, *v ? ":" : "", v);
		else
			push(&a, "%s=%s", k, v);
	}
	for (size_t i = 0; i < j->command.n; i++)
		push(&a, "%s", j->command.v[i]);
	if (a.oom) {
		launch_free_argv(a.v);
		return NULL;
	}
	return a.v;
}

void launch_free_argv(char **argv)
{
	if (!argv)
		return;
	for (char **p = argv; *p; p++)
		free(*p);
	free(argv);
}
