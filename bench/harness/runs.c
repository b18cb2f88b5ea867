/* The commands of a run: argv building, native mpirun, vhpc run. */
#include "lib/err.h"
#include "lib/mpibtl.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/harness/bh.h"

void bh_argv_free(char **argv)
{
	if (!argv)
		return;
	for (char **p = argv; *p; p++)
		free(*p);
	free(argv);
}

static char **argv_push(char **a, size_t *n, const char *s)
{
	char **na;

	if (!a)
		return NULL;
	na = realloc(a, (*n + 2) * sizeof(char *));
	if (!na || !(na[*n] = strdup(s))) {
		bh_argv_free(na ? na : a);
		return NULL;
	}
	na[++*n] = NULL;
	return na;
}

char **bh_argv(const char *first, ...)
{
	char **a = calloc(1, sizeof(char *));
	size_t n = 0;
	va_list ap;

	va_start(ap, first);
	for (const char *s = first; s && a; s = va_arg(ap, const char *))
		a = argv_push(a, &n, s);
	va_end(ap);
	return a;
}

char **bh_argv_cat(char **a, char **b)
{
	size_t n = 0;

	if (!a || !b) {
		bh_argv_free(a);
		bh_argv_free(b);
		return NULL;
	}
	while (a[n])
		n++;
	for (char **p = b; *p && a; p++)
		a = argv_push(a, &n, *p);
	bh_argv_free(b);
	return a;
}

const char *bh_prog(const struct bh_ctx *c, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", c->self, name);
	return buf;
}

/* --fabric takes vader away: ranks of one host then talk over the fabric,
 * as the guests' do without vmshm. */
const char *bh_native_btl(const struct bh_ctx *c)
{
	if (c->o->native_btl)
		return c->o->native_btl;
	if (bh_fabric_rdma(c))
		return "self,ofi";
	return c->o->fabric ? "self,tcp" : "self,vader,tcp";
}

bool bh_fabric_rdma(const struct bh_ctx *c)
{
	return c->o->fabric && !strcmp(c->o->fabric, "rdma");
}

char **bh_native_mpirun(const struct bh_ctx *c, int ranks)
{
	char np[16];
	const char *btl = bh_native_btl(c);

	char **a;
	size_t n = 0;

	snprintf(np, sizeof(np), "%d", ranks);
	/* As vhpc run pins guests' ranks: a core each while there are cores,
	 * else shared, yielding so they do not spin each other out. */
	if (ranks <= c->ncores)
		a = bh_argv("mpirun", "--allow-run-as-root", "-np", np, "--map-by", "core",
			    "--bind-to", "core", "--mca", "pml", "ob1", "--mca", "btl", btl, NULL);
	else
		a = bh_argv("mpirun", "--allow-run-as-root", "-np", np, "--oversubscribe", "--bind-to", "none",
			    "--mca", "mpi_yield_when_idle", "1", "--mca", "pml", "ob1", "--mca", "btl", btl, NULL);
	if (!a)
		return a;
	while (a[n])
		n++;
	/* What vhpc gives jobs on the fabric (lib/mpibtl.h). */
	for (int i = 0; bh_fabric_rdma(c) && mpibtl_fabric_mca[i][0]; i++) {
		a = argv_push(a, &n, "--mca");
		a = argv_push(a, &n, mpibtl_fabric_mca[i][0]);
		a = argv_push(a, &n, mpibtl_fabric_mca[i][1]);
	}
	if (!a || !c->o->native_env)
		return a;
	a = argv_push(a, &n, "-x");
	return argv_push(a, &n, c->o->native_env);
}

char **bh_vhpc_run(const struct bh_ctx *c, int guests, int ranks, int vcpus, const char *mem)
{
	char prog[PATH_MAX], ng[16], nr[16], nv[16], to[32];
	char **a;
	size_t n = 0;

	snprintf(ng, sizeof(ng), "%d", guests);
	snprintf(nr, sizeof(nr), "%d", ranks);
	snprintf(nv, sizeof(nv), "%d", vcpus);
	snprintf(to, sizeof(to), "%d", c->o->timeout_s > 0 ? c->o->timeout_s : 600);
	a = bh_argv(bh_prog(c, "vhpc", prog, sizeof(prog)), "run", "-N", ng, "-n", nr, "--timeout", to, NULL);
	if (!a)
		return NULL;
	while (a[n])
		n++;
	if (vcpus > 0) {
		a = argv_push(a, &n, "--vcpus");
		a = argv_push(a, &n, nv);
	}
	if (mem) {
		a = argv_push(a, &n, "--mem");
		a = argv_push(a, &n, mem);
	}
	if (c->o->driver) {
		a = argv_push(a, &n, "--driver");
		a = argv_push(a, &n, c->o->driver);
	}
	if (c->image[0]) {
		a = argv_push(a, &n, "--image");
		a = argv_push(a, &n, c->image);
	}
	if (c->o->fabric)
		a = argv_push(a, &n, bh_fabric_rdma(c) ? "--rdma" : "--no-rdma");
	if (c->o->no_vmshm || c->o->fabric)
		a = argv_push(a, &n, "--no-vmshm");
	else if (c->o->no_single_copy)
		a = argv_push(a, &n, "--no-single-copy");
	return argv_push(a, &n, "--");
}

int bh_add_run(struct bh_ctx *c, enum bh_side side, char **argv, const char *tag, double x,
	       struct verr *err)
{
	struct bh_run *nr;

	if (!argv)
		return verr_set(err, "out of memory");
	nr = realloc(c->runs, (c->nruns + 1) * sizeof(*nr));
	if (!nr) {
		bh_argv_free(argv);
		return verr_set(err, "out of memory");
	}
	c->runs = nr;
	memset(&nr[c->nruns], 0, sizeof(*nr));
	nr[c->nruns].side = side;
	nr[c->nruns].argv = argv;
	nr[c->nruns].x = x;
	snprintf(nr[c->nruns].tag, sizeof(nr[c->nruns].tag), "%s", tag ? tag : "");
	c->nruns++;
	return 0;
}

const char *bh_argv_str(char *const *argv, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = 0;
	for (char *const *p = argv; *p && o < len; p++) {
		bool quote = strpbrk(*p, " \t\n'\"$;&|<>*?()") != NULL || !**p;
		int w = snprintf(buf + o, len - o, "%s%s%s%s", p == argv ? "" : " ", quote ? "'" : "", *p,
				 quote ? "'" : "");

		if (w < 0)
			break;
		o += (size_t)w;
	}
	return buf;
}
