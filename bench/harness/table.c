/* The results as a table: per metric, native and guest (median [best]) and
 * their ratio. */
#include <math.h>
#include <string.h>

#include "bench/harness/bh.h"

/* Enough digits to read, no exponents for everyday magnitudes. */
static const char *num(double v, char *buf, size_t len)
{
	double a = fabs(v);

	if (isnan(v))
		snprintf(buf, len, "-");
	else if (a >= 1e5)
		snprintf(buf, len, "%.0f", v);
	else if (a >= 100)
		snprintf(buf, len, "%.1f", v);
	else if (a >= 1 || a == 0)
		snprintf(buf, len, "%.2f", v);
	else
		snprintf(buf, len, "%#.3g", v);
	return buf;
}

static const char *cell(const struct bh_metric *m, int side, char *buf, size_t len)
{
	char a[32], b[32];
	const struct bh_stat *s = &m->st[side];

	if (s->n == 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%s [%s]", num(s->median, a, sizeof(a)),
			 num(bh_stat_best(s, m->better), b, sizeof(b)));
	return buf;
}

static const char *ratio_cell(const struct bh_metric *m, char *buf, size_t len)
{
	if (!m->ratio.ok)
		snprintf(buf, len, "-");
	else if (m->ratio.pairs > 1)
		snprintf(buf, len, "%.3f [%.3f] %.3f..%.3f", m->ratio.median, m->ratio.best, m->ratio.pair_min,
			 m->ratio.pair_max);
	else
		snprintf(buf, len, "%.3f [%.3f]", m->ratio.median, m->ratio.best);
	return buf;
}

/* Repetitions per size set how long each sample is timed: part of what
 * the numbers mean. */
void bh_iter_line(FILE *f, const struct bh_ctx *c)
{
	long long n = c->iter.set ? c->iter.n : IMB_MSGS_PER_SAMPLE;
	long long vol = c->iter.set ? c->iter.vol : IMB_OVERALL_VOL;

	if (c->iter.set)
		fprintf(f, "# --iter %lld,%lldM: ", n, vol >> 20);
	else
		fprintf(f, "# no --iter, the programs' default: ");
	fprintf(f, "min(%lld, %lldM / size) repetitions per size%s\n", n, vol >> 20,
		c->imb[0] && !c->iter.set ? ", fewer where IMB's -time (10 s) cuts a sample" : "");
}

/* The machine's state over the run (linetrip.c): small-message times of
 * both sides follow it, so a reader needs it to trust their ratio. */
void bh_state_line(FILE *f, const struct bh_ctx *c)
{
	struct bh_stat st;

	if (!c->trip_ns || bh_stat_compute(c->trip_ns, (size_t)c->reps, &st) < 0) {
		fprintf(f, "# machine state: not measured (%s)\n", c->why_no_trip[0] ? c->why_no_trip : "no value");
		return;
	}
	fprintf(f, "# machine state: a cache line's round trip CPU %d<->%d, median %.0f ns (%.0f-%.0f) over %zu repetition%s\n",
		c->trip_cpu[0], c->trip_cpu[1], st.median, st.min, st.max, st.n, st.n == 1 ? "" : "s");
	if (st.max > BH_TRIP_SWING * st.min)
		fprintf(f, "# the state changed during the run (slowest %.1fx the fastest): small-message times of\n"
			   "# both sides move with it, so their medians may come from different states\n",
			st.max / st.min);
}

void bh_table(FILE *f, const struct bh_ctx *c)
{
	const struct bh_results *r = &c->res;
	int lw = 6, uw = 4;
	char n[64], g[64], q[96];

	for (size_t i = 0; i < r->n; i++) {
		int l = (int)strlen(r->m[i].label), u = (int)strlen(r->m[i].unit);

		lw = l > lw ? l : lw;
		uw = u > uw ? u : uw;
	}
	fprintf(f, "# vhpc bench %s, %s\n", c->s->name, c->started);
	fprintf(f, "# machine: %s\n", c->machine);
	bh_state_line(f, c);
	fprintf(f, "# native: %s\n", c->native_how);
	fprintf(f, "# guest:  %s\n", c->guest_how);
	if (!strcmp(c->s->name, "mpi"))
		bh_iter_line(f, c);
	fprintf(f, "# %d repetition%s, interleaved.  Each side: median [best] over repetitions, best being\n"
		   "# the minimum of times and the maximum of rates.  ratio = guest / native: of the\n"
		   "# medians [of the bests], then the range of guest/native within one repetition.\n",
		c->reps, c->reps == 1 ? "" : "s");
	fprintf(f, "%-*s  %-*s  %22s  %22s  %s\n", lw, "metric", uw, "unit", "native", "guest",
		"ratio guest/native");
	for (size_t i = 0; i < r->n; i++) {
		const struct bh_metric *m = &r->m[i];

		fprintf(f, "%-*s  %-*s  %22s  %22s  %s\n", lw, m->label, uw, m->unit,
			cell(m, BH_NATIVE, n, sizeof(n)), cell(m, BH_GUEST, g, sizeof(g)),
			ratio_cell(m, q, sizeof(q)));
	}
}
