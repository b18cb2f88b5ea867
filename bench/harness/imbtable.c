/* The mpi suite's results as IMB tables with both sides in them (--table
 * imb, `make demo`): what a reader of IMB output expects, with native,
 * guests and their ratio side by side, and above them what the numbers
 * are: cores, ranks per guest and what carried the guests' pair. */
#include <math.h>
#include <string.h>

#include "bench/harness/bh.h"

static const struct bh_metric *find(const struct bh_ctx *c, const char *bench, int np, const char *name,
				    long long bytes)
{
	char key[192];

	snprintf(key, sizeof(key), "%s np=%d/%s/%lld", bench, np, name, bytes);
	return bh_metric_find(&c->res, key);
}

static const char *med(const struct bh_metric *m, int side, char *buf, size_t len)
{
	if (!m || m->st[side].n == 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2f", m->st[side].median);
	return buf;
}

static const char *ratio(const struct bh_metric *m, char *buf, size_t len)
{
	if (!m || !m->ratio.ok)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.3f", m->ratio.median);
	return buf;
}

static void facts(FILE *f, const struct bh_ctx *c)
{
	char how[512];
	int per = c->ranks / c->guests, extra = c->ranks % c->guests;

	fprintf(f, "# vhpc bench mpi, %s\n", c->started);
	fprintf(f, "# machine: %s\n", c->machine);
	bh_state_line(f, c);
	if (c->ranks <= c->ncores)
		fprintf(f, "# cores: %d; ranks: %d, no more than cores (a core each on both sides)\n", c->ncores,
			c->ranks);
	else
		fprintf(f, "# cores: %d; ranks: %d, MORE THAN CORES: ranks share cores, and their times are the\n"
			   "# scheduler's as much as the transport's\n", c->ncores, c->ranks);
	fprintf(f, "# native: %s\n", c->native_how);
	if (extra)
		fprintf(f, "# guests: %s, %d-%d ranks per guest\n", c->guest_how, per, per + 1);
	else
		fprintf(f, "# guests: %s, %d rank%s per guest\n", c->guest_how, per, per == 1 ? "" : "s");
	fprintf(f, "# between the guests: %s\n", bh_transport_str(c, how, sizeof(how)));
	bh_iter_line(f, c);
	fprintf(f, "# each figure: the median of %d repetition%s (native and guest runs interleaved);\n"
		   "# ratio = guests / native: a time below 1 or a rate above 1 is the guests doing better\n",
		c->reps, c->reps == 1 ? "" : "s");
}

static void section(FILE *f, const struct bh_ctx *c, const char *bench)
{
	bool pair = imb_is_pair(bench);
	int np = pair ? 2 : c->ranks;
	bool bw = imb_bw_factor(bench) > 0;
	long long max_reps = c->iter.set ? c->iter.n : IMB_MSGS_PER_SAMPLE;
	long long vol = c->iter.set ? c->iter.vol : IMB_OVERALL_VOL;

	fprintf(f, "\n#---------------------------------------------------\n");
	fprintf(f, "# Benchmarking %s\n", bench);
	fprintf(f, "# #processes = %d", np);
	if (c->ranks > np)
		fprintf(f, " (%d additional processes waiting in MPI_Barrier)", c->ranks - np);
	fprintf(f, "\n#---------------------------------------------------\n");
	fprintf(f, "#%25s %-32s%s\n", "", pair ? "------------ t[usec] ----------" : "---------- t_max[usec] --------",
		bw ? "   -------- Mbytes/sec --------" : "");
	fprintf(f, "%13s %12s %10s %10s %10s", "#bytes", "#repetitions", "native", "guests", "ratio");
	if (bw)
		fprintf(f, "   %10s %10s %8s", "native", "guests", "ratio");
	fputc('\n', f);
	for (size_t i = 0; i < c->nsizes; i++) {
		long long bytes = c->sizes[i];
		const struct bh_metric *mt = find(c, bench, np, "t", bytes);
		const struct bh_metric *mb = bw && bytes > 0 ? find(c, bench, np, "bw", bytes) : NULL;
		char a[32], b[32], r[32];

		/* Sizes the benchmark skips (Allreduce below a float). */
		if (!mt)
			continue;
		fprintf(f, "%13lld %12lld %10s %10s %10s", bytes, imb_reps(bytes, max_reps, vol),
			med(mt, BH_NATIVE, a, sizeof(a)), med(mt, BH_GUEST, b, sizeof(b)), ratio(mt, r, sizeof(r)));
		if (bw && bytes > 0)
			fprintf(f, "   %10s %10s %8s", med(mb, BH_NATIVE, a, sizeof(a)), med(mb, BH_GUEST, b, sizeof(b)),
				ratio(mb, r, sizeof(r)));
		else if (bw)
			fprintf(f, "   %10s %10s %8s", "0.00", "0.00", "-");
		fputc('\n', f);
	}
}

void bh_imb_table(FILE *f, const struct bh_ctx *c)
{
	facts(f, c);
	if (c->imb[0] && !c->iter.set)
		fprintf(f, "# #repetitions: the rule's; IMB-MPI1 may have run fewer where its -time (10 s) cut a sample\n");
	for (size_t i = 0; i < c->nbenches; i++)
		section(f, c, c->benches[i]);
	fprintf(f, "\n# every repetition's value, the best of each side and the spread of the ratio: results.txt\n");
}
