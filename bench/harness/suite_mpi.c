/* mpi: vhpc-mpibench (or a real IMB-MPI1, --imb) PingPong, Sendrecv,
 * Exchange, Allreduce and Bcast; native mpirun against vhpc run. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/harness/bh.h"

static const char *const benches[] = { "PingPong", "Sendrecv", "Exchange", "Allreduce", "Bcast", NULL };

/* IMB's -msglen file: one length per line; "sep" between them. */
static char *lengths(const struct bh_ctx *c, char sep)
{
	size_t cap = c->nsizes * 24 + 1, o = 0;
	char *list = malloc(cap);

	if (!list)
		return NULL;
	list[0] = 0;
	for (size_t i = 0; i < c->nsizes; i++)
		o += (size_t)snprintf(list + o, cap - o, "%lld%c", c->sizes[i], sep);
	return list;
}

static void msglen_path(const struct bh_ctx *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s/msglen.txt", c->dir);
}

static int mpi_prepare(struct bh_ctx *c, struct verr *err)
{
	char path[PATH_MAX + 32], *list = lengths(c, '\n');
	int rc;

	if (!list)
		return verr_set(err, "out of memory");
	msglen_path(c, path, sizeof(path));
	rc = write_file(path, list, strlen(list), 0644, err);
	free(list);
	return rc;
}

/* The program's arguments after -msglen FILE, the same on both sides:
 * -npmin, --iter's -iter and the benchmarks.  IMB's default iteration
 * policy cuts a sample's repetitions to what fits in -time seconds (10);
 * with --iter the count asked for should run, so IMB gets the run's time
 * limit there: it cuts only a sample that alone would outlast the run.
 * (-iter_policy off would keep every count, but it also drops the VOL
 * part of the rule and runs N repetitions at every size.) */
static char **program_args(const struct bh_ctx *c, const char *np)
{
	char iter[64], secs[24];
	char **a = bh_argv("-npmin", np, NULL);

	if (c->iter.set) {
		bh_iter_arg(&c->iter, c->imb[0] != 0, iter, sizeof(iter));
		a = bh_argv_cat(a, bh_argv("-iter", iter, NULL));
		if (c->imb[0]) {
			snprintf(secs, sizeof(secs), "%d", c->o->timeout_s > 0 ? c->o->timeout_s : 600);
			a = bh_argv_cat(a, bh_argv("-time", secs, NULL));
		}
	}
	for (size_t i = 0; i < c->nbenches; i++)
		a = bh_argv_cat(a, bh_argv(c->benches[i], NULL));
	return a;
}

/* --benchmarks A,B (case as IMB: any) into c->benches, in IMB's order. */
static int choose_benches(struct bh_ctx *c, struct verr *err)
{
	const char *list = c->o->benchmarks;
	bool want[sizeof(benches) / sizeof(benches[0])] = { false };

	c->nbenches = 0;
	if (!list) {
		for (int i = 0; benches[i]; i++)
			c->benches[c->nbenches++] = benches[i];
		return 0;
	}
	for (const char *p = list;;) {
		size_t n = strcspn(p, ",");
		int k = -1;

		for (int i = 0; benches[i] && k < 0; i++)
			if (strlen(benches[i]) == n && !strncasecmp(p, benches[i], n))
				k = i;
		if (k < 0)
			return verr_set(err, "--benchmarks: '%.*s' is not one of PingPong, Sendrecv, Exchange, "
					"Allreduce, Bcast", (int)(n > 40 ? 40 : n), p);
		if (want[k])
			return verr_set(err, "--benchmarks: %s is named twice", benches[k]);
		want[k] = true;
		if (!p[n])
			break;
		p += n + 1;
	}
	for (int i = 0; benches[i]; i++)
		if (want[i])
			c->benches[c->nbenches++] = benches[i];
	return 0;
}

static int mpi_plan(struct bh_ctx *c, struct verr *err)
{
	char np[16], prog[PATH_MAX], path[PATH_MAX + 32], line[1024], *list, *script;
	const char *bin;
	char **native, **guest, **cmd, **args;

	if (choose_benches(c, err) < 0)
		return -1;
	free(c->vmshm);
	if (!(c->vmshm = calloc((size_t)c->reps, sizeof(*c->vmshm))))
		return verr_set(err, "out of memory");
	if (c->ranks < 2)
		return verr_set(err, "--ranks %d: the mpi suite needs at least 2 ranks (PingPong)", c->ranks);
	if (c->guests > c->ranks)
		return verr_set(err, "--guests %d is more than --ranks %d: every guest needs a rank",
				c->guests, c->ranks);
	/* IMB-MPI1 rounds each size up to whole floats for Allreduce (1, 2
	 * and 3 bytes all run as 4), so two sizes could give the same row
	 * twice, and the run would fail after the first repetition.
	 * vhpc-mpibench skips such sizes instead.  (The list is sorted.) */
	for (size_t i = 1; c->imb[0] && i < c->nsizes; i++) {
		long long a = c->sizes[i - 1], b = c->sizes[i];

		if (a > 0 && (a + 3) / 4 == (b + 3) / 4) {
			char x[32], y[32];

			return verr_set(err, "--sizes %s and %s with --imb: IMB-MPI1 runs Allreduce on "
					"whole floats and measures both as %lld bytes; leave one of them out",
					bh_fmt_x((double)a, x, sizeof(x)), bh_fmt_x((double)b, y, sizeof(y)),
					(b + 3) / 4 * 4);
		}
	}
	snprintf(np, sizeof(np), "%d", c->ranks);
	bin = c->imb[0] ? c->imb : bh_prog(c, "vhpc-mpibench", prog, sizeof(prog));

	msglen_path(c, path, sizeof(path));
	native = bh_native_mpirun(c, c->ranks);
	cmd = bh_argv_cat(bh_argv(bin, "-msglen", path, NULL), program_args(c, np));
	if (bh_add_run(c, BH_NATIVE, bh_argv_cat(native, cmd), "", -1, err) < 0)
		return -1;
	/* Guests do not see the host's files: each rank writes its own
	 * lengths file inside its guest first.  (The arguments are numbers
	 * and benchmark names: nothing the shell would expand.) */
	if (!(args = program_args(c, np)))
		return verr_set(err, "out of memory");
	bh_argv_str(args, line, sizeof(line));
	bh_argv_free(args);
	if (!(list = lengths(c, ' ')))
		return verr_set(err, "out of memory");
	if (asprintf(&script, "f=/tmp/vhpc-bench-msglen.$$; for s in %s; do echo $s; done >$f && "
		     "exec %s -msglen $f %s",
		     list, c->imb[0] ? BH_IMB_GUEST_PATH : "vhpc-mpibench", line) < 0) {
		free(list);
		return verr_set(err, "out of memory");
	}
	free(list);
	guest = bh_vhpc_run(c, c->guests, c->ranks, 0, NULL);
	/* The vmshm BTL's counters, printed at finalize (they are kept
	 * anyway, so the run is not slowed): what carried the pair. */
	if (!c->o->no_vmshm && !c->o->fabric) {
		size_t n = 0;

		while (guest && guest[n] && strcmp(guest[n], "--"))
			n++;
		if (guest && guest[n]) {
			free(guest[n]);
			guest[n] = NULL;
			guest = bh_argv_cat(guest, bh_argv("-x", "OMPI_MCA_btl_vmshm_stats=1", "--", NULL));
		}
	}
	cmd = bh_argv("sh", "-c", script, NULL);
	free(script);
	if (bh_add_run(c, BH_GUEST, bh_argv_cat(guest, cmd), "", -1, err) < 0)
		return -1;
	snprintf(c->native_how, sizeof(c->native_how), "mpirun -np %d on this host (btl %s)%s%s%.200s", c->ranks,
		 bh_native_btl(c), c->ranks <= c->ncores ? ", a core each" : ", sharing cores",
		 c->o->native_env ? ", -x " : "", c->o->native_env ? c->o->native_env : "");
	snprintf(c->guest_how, sizeof(c->guest_how), "vhpc run -N %d -n %d (%s guests%s)", c->guests,
		 c->ranks, c->driver, c->o->fabric ? (bh_fabric_rdma(c) ? ", --rdma --no-vmshm" : ", --no-rdma --no-vmshm")
		 : c->o->no_vmshm ? ", --no-vmshm" : c->o->no_single_copy ? ", --no-single-copy" : "");
	return 0;
}

/* The vmshm counters in the guest run's stderr (next to its stdout,
 * raw/guest-N.err); a run without them is recorded as such. */
static void guest_transport(struct bh_ctx *c, size_t rep, const char *out_path)
{
	size_t n = strlen(out_path), len;
	char errp[PATH_MAX + 8], *text;
	struct verr e;

	memset(&c->vmshm[rep], 0, sizeof(c->vmshm[rep]));
	if (n < 4 || strcmp(out_path + n - 4, ".out") || n >= sizeof(errp))
		return;
	snprintf(errp, sizeof(errp), "%.*s.err", (int)(n - 4), out_path);
	if (read_file(errp, &text, &len, 16u << 20, &e) < 0)
		return;
	bh_vmshm_sent(text, len, &c->vmshm[rep]);
	free(text);
}

static void warn_violation(void *ctx, const struct imb_table *t, const struct imb_row *r,
			   const char *msg)
{
	size_t *n = ctx;

	/* Nothing to time at 0 bytes: vhpc-mpibench's Allreduce prints 0.00. */
	if (r && imb_row_bytes(t, r) == 0)
		return;
	if ((*n)++ < 3)
		log_warn("%s line %d: %s", t->name, r ? r->line : t->line, msg);
}

static int mpi_parse(struct bh_ctx *c, const struct bh_run *run, size_t rep, const char *path,
		     const char *out, size_t len, uint64_t t0, uint64_t t1, struct verr *err)
{
	struct imb_output o;
	struct imb_check_opts co;
	size_t bad = 0;

	(void)t0;
	(void)t1;
	if (imb_parse(path, out, len, &o, err) < 0)
		return -1;
	for (size_t i = 0; i < c->nbenches; i++) {
		int np = imb_is_pair(c->benches[i]) ? 2 : c->ranks;

		if (!imb_find(&o, c->benches[i], np)) {
			imb_output_free(&o);
			return verr_set(err, "%s: no %s table at %d processes", path, c->benches[i], np);
		}
	}
	/* Odd numbers are worth a warning, not a lost run: real IMB rounds
	 * differently and, without --iter, may cut repetitions (-time). */
	imb_check_defaults(&co);
	co.mbyte = imb_guess_mbyte(&o);
	co.fewer_reps_ok = !c->iter.set;
	if (c->iter.set) {
		co.max_reps = c->iter.n;
		co.overall_vol = c->iter.vol;
	}
	imb_check(&o, &co, warn_violation, &bad);
	if (bad > 0)
		log_warn("%s: %zu IMB sanity violation%s (vhpc-imbcheck %s lists them)", path, bad,
			 bad == 1 ? "" : "s", path);
	if (bh_from_imb(&c->res, run->side, rep, &o, err) < 0) {
		imb_output_free(&o);
		return -1;
	}
	imb_output_free(&o);
	if (run->side == BH_GUEST && c->vmshm && rep < (size_t)c->reps)
		guest_transport(c, rep, path);
	return 0;
}

static const char *const mpi_panels[] = { "latency", "bandwidth", NULL };

const struct bh_suite bh_suite_mpi = {
	.name = "mpi",
	.def_guests = 2,
	.def_ranks = 2,
	.has_sizes = true,
	.has_msglog = true,
	.msglog_default = "0:22",
	.msglog_zero = true,
	.size_min = 0,
	.size_max = 1LL << 30,
	.plan = mpi_plan,
	.prepare = mpi_prepare,
	.parse = mpi_parse,
	.panels = mpi_panels,
};
