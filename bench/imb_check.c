/*
 * Sanity checks on an IMB table: what must hold for any honest run of
 * IMB-MPI1 (or vhpc-mpibench), whatever the machine.  Printed numbers carry
 * two decimals, so every comparison allows the rounding of both sides.
 */
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* Half of the last printed digit of "%.2f". */
#define HALF_ULP 0.005
#define SLACK    1e-9

void imb_check_defaults(struct imb_check_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mbyte = 1e6;
	o->max_reps = IMB_MSGS_PER_SAMPLE;
	o->overall_vol = IMB_OVERALL_VOL;
}

double imb_guess_mbyte(const struct imb_output *o)
{
	return strcasestr(o->suite, "Benchmark Suite V") ? 1048576.0 : 1e6;
}

struct checker {
	const struct imb_table *t;
	imb_report_fn report;
	void *ctx;
	size_t n;
};

static void vio(struct checker *c, const struct imb_row *r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void vio(struct checker *c, const struct imb_row *r, const char *fmt, ...)
{
	char msg[512];
	int off = 0;
	va_list ap;

	if (r && imb_has(c->t, IMB_COL_BYTES))
		off = snprintf(msg, sizeof(msg), "%lld bytes: ", imb_row_bytes(c->t, r));
	va_start(ap, fmt);
	vsnprintf(msg + off, sizeof(msg) - (size_t)off, fmt, ap);
	va_end(ap);
	c->n++;
	if (c->report)
		c->report(c->ctx, c->t, r, msg);
}

static void check_reps(struct checker *c, const struct imb_row *r,
		       const struct imb_check_opts *o)
{
	long long bytes = imb_row_bytes(c->t, r), reps = (long long)r->v[IMB_COL_REPS];
	long long want = imb_reps(bytes < 0 ? 0 : bytes, o->max_reps, o->overall_vol);

	if (reps < 1)
		vio(c, r, "%lld repetitions; at least 1 expected", reps);
	else if (o->fewer_reps_ok ? reps > want : reps != want)
		vio(c, r, "%lld repetitions; the rule min(%lld, max(1, %lld / bytes)) gives %s%lld",
		    reps, o->max_reps, o->overall_vol, o->fewer_reps_ok ? "at most " : "", want);
}

/* A collective on 0 bytes may return without communicating (Open MPI's
 * MPI_Bcast and MPI_Allreduce do): a few ns a call, printed 0.00.  Point
 * to point still sends a message. */
static bool may_take_no_time(const struct imb_table *t, const struct imb_row *r)
{
	return imb_has(t, IMB_COL_BYTES) && imb_row_bytes(t, r) == 0 && imb_bw_factor(t->name) == 0;
}

static void check_times(struct checker *c, const struct imb_row *r)
{
	const struct imb_table *t = c->t;
	double tmax = imb_row_tmax(t, r);

	if ((imb_has(t, IMB_COL_T) || imb_has(t, IMB_COL_TMAX)) &&
	    !(tmax > 0 || (tmax == 0 && may_take_no_time(t, r))))
		vio(c, r, "time %.2f usec is not positive", tmax);
	if (imb_has(t, IMB_COL_TMIN) && imb_has(t, IMB_COL_TMAX) && imb_has(t, IMB_COL_TAVG)) {
		double mn = r->v[IMB_COL_TMIN], mx = r->v[IMB_COL_TMAX], av = r->v[IMB_COL_TAVG];

		if (mn > av + 2 * HALF_ULP + SLACK || av > mx + 2 * HALF_ULP + SLACK)
			vio(c, r, "t_min %.2f <= t_avg %.2f <= t_max %.2f does not hold", mn, av, mx);
	}
}

/* Mbytes/sec must be factor * bytes / t_max for some t_max and Mbytes/sec
 * that round to the printed ones. */
static void check_bw(struct checker *c, const struct imb_row *r, double factor, double mbyte)
{
	double T = imb_row_tmax(c->t, r), M = r->v[IMB_COL_MBPS];
	double b = (double)imb_row_bytes(c->t, r), k = mbyte / 1e6;
	double lo, hi;

	if (T < 0 || b < 0 || !(T > 0))
		return;         /* no time to compare with; check_times reports it */
	lo = factor * b / (T + HALF_ULP) / k - HALF_ULP;
	hi = T > HALF_ULP ? factor * b / (T - HALF_ULP) / k + HALF_ULP : INFINITY;
	if (M < lo * (1 - SLACK) - SLACK || M > hi * (1 + SLACK) + SLACK)
		vio(c, r, "Mbytes/sec %.2f does not match %g x %.0f bytes / t_max %.2f usec = %.2f (MB = %.0f bytes)",
		    M, factor, b, T, factor * b / T / k, mbyte);
}

size_t imb_check_table(const struct imb_table *t, const struct imb_check_opts *o,
		       imb_report_fn report, void *ctx)
{
	struct checker c = { .t = t, .report = report, .ctx = ctx };
	double factor = imb_bw_factor(t->name);
	long long prev = -1;

	if (t->nrows == 0)
		vio(&c, NULL, "table has no rows");
	if (t->nprocs < 1)
		vio(&c, NULL, "no '# #processes = N' line");
	else if (imb_is_pair(t->name) && t->nprocs != 2)
		vio(&c, NULL, "%s runs between 2 processes, the table says #processes = %d",
		    t->name, t->nprocs);
	for (size_t i = 0; i < t->nrows; i++) {
		const struct imb_row *r = &t->rows[i];

		if (r->failure) {
			vio(&c, r, "sample failed: %s", r->failure);
			continue;
		}
		if (imb_has(t, IMB_COL_BYTES)) {
			long long b = imb_row_bytes(t, r);

			/* -multi tables repeat each size once per group. */
			if (i > 0 && (t->multi ? b < prev : b <= prev))
				vio(&c, r, "message size does not grow (previous row: %lld bytes)", prev);
			prev = b;
		}
		check_reps(&c, r, o);
		check_times(&c, r);
		if (imb_has(t, IMB_COL_DEFECTS) && r->v[IMB_COL_DEFECTS] > 0)
			vio(&c, r, "data check found defects (%.2f)", r->v[IMB_COL_DEFECTS]);
		if (imb_has(t, IMB_COL_MBPS) && factor > 0)
			check_bw(&c, r, factor, o->mbyte);
	}
	return c.n;
}

size_t imb_check(const struct imb_output *out, const struct imb_check_opts *o,
		 imb_report_fn report, void *ctx)
{
	size_t n = 0;

	for (size_t i = 0; i < out->ntables; i++)
		n += imb_check_table(&out->tables[i], o, report, ctx);
	return n;
}
