/* net: TCP stream throughput and request/response round trips between two
 * ranks (vhpc-netbench): native over loopback, guests over the job network. */
#include "lib/err.h"
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

static int net_plan(struct bh_ctx *c, struct verr *err)
{
	char prog[PATH_MAX], sizes[64 * 24], secs[32];
	char **native, **guest, **cmd;

	if (c->ranks != 2)
		return verr_set(err, "--ranks %d: the net suite runs exactly 2 ranks (a sender and a receiver)", c->ranks);
	if (c->guests < 1 || c->guests > 2)
		return verr_set(err, "--guests %d: the net suite runs in 1 guest (loopback inside) or 2 (guest to guest)",
				c->guests);
	bh_sizes_str(c->sizes, c->nsizes, sizes, sizeof(sizes));
	snprintf(secs, sizeof(secs), "%g", c->seconds);
	native = bh_native_mpirun(c, 2);
	cmd = bh_argv(bh_prog(c, "vhpc-netbench", prog, sizeof(prog)), "-sizes", sizes, "-time", secs,
		      "stream", "rr", NULL);
	if (bh_add_run(c, BH_NATIVE, bh_argv_cat(native, cmd), "", -1, err) < 0)
		return -1;
	guest = bh_vhpc_run(c, c->guests, 2, 0, NULL);
	cmd = bh_argv("vhpc-netbench", "-sizes", sizes, "-time", secs, "stream", "rr", NULL);
	if (bh_add_run(c, BH_GUEST, bh_argv_cat(guest, cmd), "", -1, err) < 0)
		return -1;
	snprintf(c->native_how, sizeof(c->native_how),
		 "two processes on this host over loopback (mpirun -np 2, a core each)");
	snprintf(c->guest_how, sizeof(c->guest_how), "%s (vhpc run -N %d -n 2, %s guests)",
		 c->guests == 2 ? "guest to guest over the job network" : "two processes in one guest",
		 c->guests, c->driver);
	return 0;
}

struct net_line {
	struct bh_ctx *c;
	enum bh_side side;
	size_t rep;
};

static int net_line(void *ctx, struct json_object *o, struct verr *err)
{
	static const char *const tests[] = { "stream", "rr", NULL };
	struct net_line *l = ctx;
	struct bh_desc d;
	double size, v;
	int t = bh_json_enum(o, "test", tests, err);
	bool known = false;

	if (t < 0 || bh_json_num(o, "size", 1, 1 << 30, &size, err) < 0 ||
	    bh_json_num(o, "value", 0, 1e12, &v, err) < 0)
		return -1;
	for (size_t i = 0; i < l->c->nsizes; i++)
		known |= (double)l->c->sizes[i] == size;
	if (!known)
		return verr_set(err, "size %.0f was not asked for", size);
	if (t == 0)
		d = (struct bh_desc){ "TCP stream", "throughput", "Mbit/s", "bandwidth", BH_HIGHER, size };
	else
		d = (struct bh_desc){ "TCP rr", "round trip", "usec", "latency", BH_LOWER, size };
	return bh_add(&l->c->res, &d, l->side, l->rep, v, err);
}

static int net_parse(struct bh_ctx *c, const struct bh_run *run, size_t rep, const char *path,
		     const char *out, size_t len, uint64_t t0, uint64_t t1, struct verr *err)
{
	struct net_line l = { c, run->side, rep };
	int n;

	(void)t0;
	(void)t1;
	n = bh_each_line(path, out, len, net_line, &l, err);
	if (n < 0)
		return -1;
	/* Each result once (bh_add refuses repeats), so a full count is all of them. */
	if ((size_t)n != 2 * c->nsizes)
		return verr_set(err, "%s: %d results, expected %zu (stream and rr at %zu sizes)", path, n,
				2 * c->nsizes, c->nsizes);
	return 0;
}

static const char *const net_panels[] = { "bandwidth", "latency", NULL };

const struct bh_suite bh_suite_net = {
	.name = "net",
	.def_guests = 2,
	.def_ranks = 2,
	.def_seconds = 1.0,
	.has_sizes = true,
	.has_msglog = true,
	.sizes_default = "1,64,1K,16K,64K",
	.msglog_default = NULL,
	.size_min = 1,
	.size_max = 16LL << 20,
	.plan = net_plan,
	.parse = net_parse,
	.panels = net_panels,
};
