/* sys: UnixBench-style loops (vhpc-sysbench) with 1 and N copies, natively
 * on N host cores and in one guest with N vCPUs. */
#include "lib/err.h"
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

static const char *const tests[] = { "syscall", "pipe", "ctxsw", "spawn", NULL };
/* UnixBench's names, for the table. */
static const char *const titles[] = { "System Call Overhead", "Pipe Throughput",
				      "Pipe-based Context Switching", "Process Creation" };

static int sys_plan(struct bh_ctx *c, struct verr *err)
{
	char prog[PATH_MAX], cpus[16], copies[32], secs[32];
	char **native, **guest, **cmd;

	if (c->guests != 1)
		return verr_set(err, "--guests %d: the sys suite runs in one guest", c->guests);
	if (c->ranks > c->ncores)
		return verr_set(err, "--ranks %d: N copies run on N cores, and this host has %d", c->ranks, c->ncores);
	snprintf(cpus, sizeof(cpus), "%d", c->ranks);
	if (c->ranks == 1)
		snprintf(copies, sizeof(copies), "1");
	else
		snprintf(copies, sizeof(copies), "1,%d", c->ranks);
	snprintf(secs, sizeof(secs), "%g", c->seconds);
	native = bh_argv(bh_prog(c, "vhpc-sysbench", prog, sizeof(prog)), NULL);
	cmd = bh_argv("-cpus", cpus, "-copies", copies, "-time", secs, tests[0], tests[1], tests[2],
		      tests[3], NULL);
	if (bh_add_run(c, BH_NATIVE, bh_argv_cat(native, cmd), "", -1, err) < 0)
		return -1;
	/* One launcher rank; the copies are its children, on the guest's
	 * N vCPUs. */
	guest = bh_vhpc_run(c, 1, 1, c->ranks, NULL);
	cmd = bh_argv("vhpc-sysbench", "-cpus", cpus, "-copies", copies, "-time", secs, tests[0], tests[1],
		      tests[2], tests[3], NULL);
	if (bh_add_run(c, BH_GUEST, bh_argv_cat(guest, cmd), "", -1, err) < 0)
		return -1;
	snprintf(c->native_how, sizeof(c->native_how), "vhpc-sysbench on %d host core%s", c->ranks,
		 c->ranks == 1 ? "" : "s");
	snprintf(c->guest_how, sizeof(c->guest_how), "the same in one %s guest with %d vCPU%s (vhpc run -N 1 --vcpus %d)",
		 c->driver, c->ranks, c->ranks == 1 ? "" : "s", c->ranks);
	return 0;
}

struct sys_line {
	struct bh_ctx *c;
	enum bh_side side;
	size_t rep;
};

static int sys_line(void *ctx, struct json_object *o, struct verr *err)
{
	struct sys_line *l = ctx;
	double copies, v;
	char name[32];
	int t = bh_json_enum(o, "test", tests, err);

	if (t < 0 || bh_json_num(o, "copies", 1, 1024, &copies, err) < 0 ||
	    bh_json_num(o, "value", 0, 1e12, &v, err) < 0)
		return -1;
	if (copies != 1 && copies != l->c->ranks)
		return verr_set(err, "%.0f copies were not asked for", copies);
	snprintf(name, sizeof(name), "%.0f cop%s", copies, copies == 1 ? "y" : "ies");
	struct bh_desc d = { titles[t], name, "loops/s", "rate", BH_HIGHER, -1 };

	return bh_add(&l->c->res, &d, l->side, l->rep, v, err);
}

static int sys_parse(struct bh_ctx *c, const struct bh_run *run, size_t rep, const char *path,
		     const char *out, size_t len, uint64_t t0, uint64_t t1, struct verr *err)
{
	struct sys_line l = { c, run->side, rep };
	size_t want = 4 * (c->ranks == 1 ? 1 : 2);
	int n;

	(void)t0;
	(void)t1;
	n = bh_each_line(path, out, len, sys_line, &l, err);
	if (n < 0)
		return -1;
	if ((size_t)n != want)
		return verr_set(err, "%s: %d results, expected %zu", path, n, want);
	return 0;
}

static const char *const sys_panels[] = { "rate", NULL };

const struct bh_suite bh_suite_sys = {
	.name = "sys",
	.def_guests = 1,
	.def_ranks = 0,
	.def_seconds = 1.0,
	.plan = sys_plan,
	.parse = sys_parse,
	.panels = sys_panels,
};
