/* ratio.gp and its data: guest/native of every plotted metric, the number
 * the suites exist for, on one chart.  Times (lower is better) and rates
 * (higher is better) get panels of their own, since a ratio of 1.2 is a
 * loss in one and a gain in the other.  Each point is the ratio of the
 * medians; its error bar the range of guest/native within one repetition
 * (the noise the interleaved pairs show).  Against size on a log axis, one
 * line per series; a panel with nothing sized (the sys suite) gets bars.
 * Metrics plot.png leaves out (a run's wall time) are left out here too. */
#include "lib/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

static const char *const kind_names[] = { [BH_LOWER] = "time", [BH_HIGHER] = "rate" };
static const char *const kind_titles[] = {
	[BH_LOWER] = "guest/native of times (lower is better)",
	[BH_HIGHER] = "guest/native of rates (higher is better)",
};

static bool in_panel(const struct bh_metric *m, enum bh_better k)
{
	return m->panel[0] && m->better == k && m->ratio.ok;
}

/* Every digit results.json has (json-c writes %.17g): nine digits rounded
 * a value a second time, so a reader rounding both could see two numbers. */
static void val(FILE *f, double v)
{
	if (isnan(v))
		fputs(" ?", f);
	else
		fprintf(f, " %.17g", v);
}

/* size (or label) ratio lo hi best pairs */
static void row(FILE *d, const struct bh_metric *m)
{
	const struct bh_ratio *q = &m->ratio;

	val(d, q->median);
	val(d, q->pairs ? q->pair_min : NAN);
	val(d, q->pairs ? q->pair_max : NAN);
	val(d, q->best);
	fprintf(d, " %zu\n", q->pairs);
}

static const char columns[] =
	"#   ratio: guest median / native median; lo..hi: guest/native within one repetition\n"
	"#   (the error bar); best: guest best / native best; pairs: repetitions with both sides\n";

/* The same series keeps its colour in both panels: its group's place
 * among the groups shown. */
static int colour(const struct bh_results *r, const char *group)
{
	const char *seen[64];
	int n = 0;

	for (size_t i = 0; i < r->n; i++) {
		const char *g = r->m[i].group;
		int k = 0;

		if (!in_panel(&r->m[i], BH_LOWER) && !in_panel(&r->m[i], BH_HIGHER))
			continue;
		while (k < n && strcmp(seen[k], g))
			k++;
		if (k == n && n < 64)
			seen[n++] = g;
		if (!strcmp(g, group))
			return k + 1;
	}
	return n + 1;
}

/* A y range that shows 1.0 and both goal lines whatever the data; a log
 * axis once ratios span more than a factor of 10. */
static void y_range(FILE *gp, const struct bh_results *r, enum bh_better k, bool sized, bool bars)
{
	double lo = 0.9, hi = 1.15;

	for (size_t i = 0; i < r->n; i++) {
		const struct bh_ratio *q = &r->m[i].ratio;

		if (!in_panel(&r->m[i], k) || (sized && r->m[i].x < 0))
			continue;
		/* (vhpc links no libm: comparisons, not fmin/fmax) */
		if (q->median < lo)
			lo = q->median;
		if (q->median > hi)
			hi = q->median;
		if (q->pairs && q->pair_min < lo)
			lo = q->pair_min;
		if (q->pairs && q->pair_max > hi)
			hi = q->pair_max;
	}
	if (bars)
		fprintf(gp, "set yrange [0:%.6g]\n", hi * 1.08);
	else if (hi / lo > 10)
		/* Base 2: tics at 0.25, 0.5, 1, 2, 4 rather than only at 1. */
		fprintf(gp, "set logscale y 2\nset format y \"%%g\"\nset yrange [%.6g:%.6g]\n", lo / 1.2, hi * 1.2);
	else
		fprintf(gp, "set yrange [%.6g:%.6g]\n", lo - (hi - lo) * 0.06, hi + (hi - lo) * 0.06);
}

static int cmp_x(const void *a, const void *b)
{
	const struct bh_metric *x = *(const struct bh_metric *const *)a, *y = *(const struct bh_metric *const *)b;

	return (x->x > y->x) - (x->x < y->x);
}

static int panel_lines(FILE *gp, const struct bh_chart *ch, enum bh_better k, struct verr *err)
{
	const struct bh_results *r = ch->res;
	const struct bh_metric **pts = malloc((r->n ? r->n : 1) * sizeof(*pts));
	double *xs = malloc((r->n ? r->n : 1) * sizeof(double)), minpos = INFINITY, zero;
	bool *done = calloc(r->n ? r->n : 1, sizeof(bool));
	size_t nx = 0;
	int series = 0;

	if (!pts || !xs || !done) {
		free(pts);
		free(xs);
		free(done);
		return verr_set(err, "out of memory");
	}
	/* Both panels on the same size axis, one above the other. */
	for (size_t i = 0; i < r->n; i++)
		if ((in_panel(&r->m[i], BH_LOWER) || in_panel(&r->m[i], BH_HIGHER)) && r->m[i].x >= 0) {
			xs[nx++] = r->m[i].x;
			if (r->m[i].x > 0 && r->m[i].x < minpos)
				minpos = r->m[i].x;
		}
	/* Size 0 (IMB's classic latency) half a step left of the smallest. */
	zero = isfinite(minpos) ? minpos / 2 : 1;
	bh_gp_size_tics(gp, xs, nx, zero);
	free(xs);
	fprintf(gp, "set logscale x 2\nset xlabel \"size (bytes)\"\nzero = %.17g\n", zero);
	y_range(gp, r, k, true, false);
	fputs("plot ", gp);
	for (size_t i = 0; i < r->n; i++) {
		char path[PATH_MAX + 64];
		size_t n = 0;
		FILE *d;

		if (done[i] || !in_panel(&r->m[i], k) || r->m[i].x < 0)
			continue;
		for (size_t j = i; j < r->n; j++)
			if (!done[j] && in_panel(&r->m[j], k) && r->m[j].x >= 0 && !strcmp(r->m[j].group, r->m[i].group) &&
			    !strcmp(r->m[j].name, r->m[i].name)) {
				done[j] = true;
				pts[n++] = &r->m[j];
			}
		qsort(pts, n, sizeof(*pts), cmp_x);
		series++;
		snprintf(path, sizeof(path), "%s/ratio-%s-%d.dat", ch->dir, kind_names[k], series);
		if (!(d = fopen(path, "w"))) {
			free(pts);
			free(done);
			return verr_errno(err, "%s", path);
		}
		fprintf(d, "# %s %s (%s, %s is better): size ratio lo hi best pairs\n%s", r->m[i].group, r->m[i].name,
			r->m[i].unit, k == BH_LOWER ? "lower" : "higher", columns);
		for (size_t j = 0; j < n; j++) {
			fprintf(d, "%.17g", pts[j]->x);
			row(d, pts[j]);
		}
		if (fclose(d) != 0) {
			free(pts);
			free(done);
			return verr_errno(err, "%s", path);
		}
		fprintf(gp, "%s\"ratio-%s-%d.dat\" using ($1 > 0 ? $1 : zero):2:3:4 with yerrorlines lc %d pt 7 ps 0.6 "
			    "title \"%s %s\"",
			series > 1 ? ", \\\n  " : "", kind_names[k], series, colour(r, r->m[i].group), r->m[i].group,
			r->m[i].name);
	}
	fputs("\nunset logscale\nunset xtics\nset xtics\nset autoscale\nunset xlabel\nset format y\n", gp);
	free(pts);
	free(done);
	return series;
}

static int panel_bars(FILE *gp, const struct bh_chart *ch, enum bh_better k, struct verr *err)
{
	const struct bh_results *r = ch->res;
	char path[PATH_MAX + 64];
	FILE *d;
	int n = 0;

	snprintf(path, sizeof(path), "%s/ratio-%s.dat", ch->dir, kind_names[k]);
	if (!(d = fopen(path, "w")))
		return verr_errno(err, "%s", path);
	fprintf(d, "# metric ratio lo hi best pairs (%s is better)\n%s", k == BH_LOWER ? "lower" : "higher", columns);
	for (size_t i = 0; i < r->n; i++)
		if (in_panel(&r->m[i], k)) {
			fprintf(d, "\"%s\"", r->m[i].label);
			row(d, &r->m[i]);
			n++;
		}
	if (fclose(d) != 0)
		return verr_errno(err, "%s", path);
	y_range(gp, r, k, false, true);
	fprintf(gp, "set style data histograms\nset style histogram errorbars gap 1 lw 1\n"
		    "set style fill solid 0.7 border -1\nset xtics rotate by -25 scale 0\n"
		    "plot \"ratio-%s.dat\" using 2:3:4:xtic(1) lc %d notitle\n"
		    "set xtics norotate\nset style data points\nset autoscale\n",
		kind_names[k], k == BH_LOWER ? 1 : 2);
	return n;
}

int bh_ratio_write(const struct bh_chart *ch, struct verr *err)
{
	static const enum bh_better kinds[] = { BH_LOWER, BH_HIGHER };
	const struct bh_results *r = ch->res;
	bool has[2] = { false, false }, sized[2] = { false, false };
	char path[PATH_MAX + 32];
	int np = 0;
	FILE *gp;

	for (size_t i = 0; i < r->n; i++)
		for (int k = 0; k < 2; k++)
			if (in_panel(&r->m[i], kinds[k])) {
				has[k] = true;
				sized[k] |= r->m[i].x >= 0;
			}
	np = has[0] + has[1];
	snprintf(path, sizeof(path), "%s/ratio.gp", ch->dir);
	if (!(gp = fopen(path, "w")))
		return verr_errno(err, "%s", path);
	/* noenhanced: metric names are shown as they are ("_" is no subscript). */
	fprintf(gp, "# vhpc bench %s: `gnuplot ratio.gp` in this folder redraws ratio.png\n"
		    "set terminal pngcairo noenhanced size 1100,%d font \",10\"\nset output \"ratio.png\"\n"
		    "set datafile missing \"?\"\nset key outside right top\nset grid\nset ylabel \"guest / native\"\n"
		    "set lmargin at screen 0.07\nset rmargin at screen 0.78\n"
		    "set multiplot layout %d,1 title \"vhpc bench %s: guest/native (%s guests), %d repetition%s: "
		    "ratio of the medians, error bars its range within one repetition; dashed: 0.95 and 1.1\"\n",
		    ch->suite, 420 * (np ? np : 1), np ? np : 1, ch->suite, ch->driver, ch->reps, ch->reps == 1 ? "" : "s");
	/* 1.0 is the native speed; the goals 0.95 and 1.1 either side. */
	fputs("set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb \"black\" front\n"
	      "set arrow 2 from graph 0, first 0.95 to graph 1, first 0.95 nohead dt 2 lc rgb \"gray30\" front\n"
	      "set arrow 3 from graph 0, first 1.1 to graph 1, first 1.1 nohead dt 2 lc rgb \"gray30\" front\n", gp);
	if (np == 0)
		fputs("set title \"no ratios\"\nset yrange [0:2]\n"
		      "set label 1 \"no metric measured on both sides\" at graph 0.5,0.5 center\nplot NaN notitle\n", gp);
	for (int k = 0; k < 2; k++) {
		int rc;

		if (!has[k])
			continue;
		fprintf(gp, "set title \"%s%s\"\n", kind_titles[kinds[k]], sized[k] ? ", against size" : "");
		rc = sized[k] ? panel_lines(gp, ch, kinds[k], err) : panel_bars(gp, ch, kinds[k], err);
		if (rc < 0) {
			fclose(gp);
			return -1;
		}
	}
	fputs("unset multiplot\n", gp);
	if (fclose(gp) != 0)
		return verr_errno(err, "%s", path);
	return 0;
}
