/* mem: what memory costs a guest.  Per size: a native process that mallocs
 * and memsets it, against a guest started with enough --mem that does the
 * same: the touch per GiB on each side, and the time from the command to
 * the program running and to the memory touched.  (The kvm driver
 * prefaults guest RAM in vhpc-hv before boot, so there the start-up time
 * grows with --mem; vhpc-hv-bench measures that prefault alone.) */
#include "lib/err.h"
#include "lib/log.h"
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

/* What the guest needs beyond the touched memory: its agent, mpirun, orted. */
#define GUEST_OVERHEAD (256LL << 20)

static int mem_plan(struct bh_ctx *c, struct verr *err)
{
	char prog[PATH_MAX], size[32], mem[32], tag[32];

	if (c->guests != 1 || c->ranks != 1)
		return verr_set(err, "the mem suite runs one process in one guest (--guests 1 --ranks 1)");
	for (size_t i = 0; i < c->nsizes; i++) {
		long long s = c->sizes[i];
		char **native, **guest, **cmd;

		snprintf(size, sizeof(size), "%lld", s);
		/* --mem in whole MiB, the touched size plus the guest's own. */
		snprintf(mem, sizeof(mem), "%lldM", (s + GUEST_OVERHEAD + (1 << 20) - 1) >> 20);
		bh_fmt_x((double)s, tag, sizeof(tag));
		native = bh_argv(bh_prog(c, "vhpc-sysbench", prog, sizeof(prog)), "-cpus", "1", "-size", size,
				 "memtouch", NULL);
		if (bh_add_run(c, BH_NATIVE, native, tag, (double)s, err) < 0)
			return -1;
		guest = bh_vhpc_run(c, 1, 1, 1, mem);
		cmd = bh_argv("vhpc-sysbench", "-cpus", "1", "-size", size, "memtouch", NULL);
		if (bh_add_run(c, BH_GUEST, bh_argv_cat(guest, cmd), tag, (double)s, err) < 0)
			return -1;
	}
	snprintf(c->native_how, sizeof(c->native_how), "a process on one host core: malloc + memset");
	snprintf(c->guest_how, sizeof(c->guest_how),
		 "vhpc run -N 1 --vcpus 1 --mem SIZE+256M (%s guest), the same inside", c->driver);
	return 0;
}

struct mem_line {
	double size, ms, t_start, t_done;
	int n;
};

static int mem_line(void *ctx, struct json_object *o, struct verr *err)
{
	static const char *const tests[] = { "memtouch", NULL };
	struct mem_line *l = ctx;

	if (l->n++)
		return verr_set(err, "more than one memtouch result");
	if (bh_json_enum(o, "test", tests, err) < 0 || bh_json_num(o, "size", 0, 1e15, &l->size, err) < 0 ||
	    bh_json_num(o, "ms", 0, 1e9, &l->ms, err) < 0 ||
	    bh_json_num(o, "t_start", 0, 1e19, &l->t_start, err) < 0 ||
	    bh_json_num(o, "t_done", 0, 1e19, &l->t_done, err) < 0)
		return -1;
	return 0;
}

static bool clock_warned;

static int mem_parse(struct bh_ctx *c, const struct bh_run *run, size_t rep, const char *path,
		     const char *out, size_t len, uint64_t t0, uint64_t t1, struct verr *err)
{
	struct mem_line l = { 0 };
	double gib;
	struct bh_desc d = { "memset", "touch", "ms/GiB", "per GiB", BH_LOWER, run->x };

	if (bh_each_line(path, out, len, mem_line, &l, err) < 0)
		return -1;
	if (l.n != 1)
		return verr_set(err, "%s: no memtouch result", path);
	if (l.size != run->x)
		return verr_set(err, "%s: touched %.0f bytes, asked for %.0f", path, l.size, run->x);
	gib = run->x / (double)(1 << 30);
	if (bh_add(&c->res, &d, run->side, rep, l.ms / gib, err) < 0)
		return -1;
	/* Container guests share the host's monotonic clock; a guest with its
	 * own clock (kvm) gives times outside the run, which are left out. */
	if (!(l.t_start >= (double)t0 && l.t_start <= l.t_done && l.t_done <= (double)t1)) {
		if (!clock_warned)
			log_warn("%s: the program's clock is not this host's; start-up times left out", path);
		clock_warned = true;
		return 0;
	}
	d = (struct bh_desc){ "start", "program running", "ms", "start", BH_LOWER, run->x };
	if (bh_add(&c->res, &d, run->side, rep, (l.t_start - (double)t0) / 1e6, err) < 0)
		return -1;
	d = (struct bh_desc){ "start", "memory touched", "ms", "start", BH_LOWER, run->x };
	return bh_add(&c->res, &d, run->side, rep, (l.t_done - (double)t0) / 1e6, err);
}

static const char *const mem_panels[] = { "per GiB", "start", NULL };

const struct bh_suite bh_suite_mem = {
	.name = "mem",
	.def_guests = 1,
	.def_ranks = 1,
	.has_sizes = true,
	.sizes_default = "256M,1G",
	.size_min = 1LL << 20,
	.size_max = 1LL << 40,
	.plan = mem_plan,
	.parse = mem_parse,
	.panels = mem_panels,
};
