/* plot.png with gnuplot: one panel per kind of number (latency,
 * bandwidth, ...), native (solid) and guest (dashed) on one chart; sizes
 * on a log axis, or bars where metrics have no size. */
#include "lib/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

/* Every digit results.json has (json-c writes %.17g): nine digits rounded
 * a value a second time, so a reader rounding both could see two numbers. */
static void val(FILE *f, double v)
{
	if (isnan(v))
		fputs(" ?", f);
	else
		fprintf(f, " %.17g", v);
}

static bool same_series(const struct bh_metric *a, const struct bh_metric *b)
{
	return !strcmp(a->group, b->group) && !strcmp(a->name, b->name);
}

/* Explicit size tics (1K, 64K, 4M) rather than 2^n or 1e+06. */
static void size_tics(FILE *f, const struct bh_results *r, const char *panel)
{
	double *xs = malloc((r->n ? r->n : 1) * sizeof(double));
	size_t n = 0;

	if (!xs)
		return;
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->m[i].panel, panel) && r->m[i].x > 0)
			xs[n++] = r->m[i].x;
	bh_gp_size_tics(f, xs, n, 0);
	free(xs);
}

/* Lines against size: a data file per series. */
static int panel_lines(FILE *gp, const struct bh_ctx *c, int pi, const char *panel, struct verr *err)
{
	const struct bh_results *r = &c->res;
	bool *done = calloc(r->n ? r->n : 1, sizeof(bool));
	int series = 0;
	double lo = INFINITY, hi = 0;

	if (!done)
		return verr_set(err, "out of memory");
	size_tics(gp, r, panel);
	fprintf(gp, "set logscale x 2\nset xlabel \"size (bytes)\"\n");
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->m[i].panel, panel))
			for (int s = 0; s < BH_NSIDES; s++)
				if (r->m[i].st[s].n && r->m[i].x > 0) {
					if (r->m[i].st[s].min < lo)
						lo = r->m[i].st[s].min;
					if (r->m[i].st[s].max > hi)
						hi = r->m[i].st[s].max;
				}
	if (lo > 0 && hi / lo > 20)
		fputs("set logscale y\n", gp);
	fputs("plot ", gp);
	for (size_t i = 0; i < r->n; i++) {
		char path[PATH_MAX + 64];
		FILE *d;

		if (done[i] || strcmp(r->m[i].panel, panel))
			continue;
		series++;
		snprintf(path, sizeof(path), "%s/plot-%d-%d.dat", c->dir, pi, series);
		if (!(d = fopen(path, "w"))) {
			free(done);
			return verr_errno(err, "%s", path);
		}
		fprintf(d, "# %s %s (%s): size native_median native_min native_max guest_median guest_min guest_max\n",
			r->m[i].group, r->m[i].name, r->m[i].unit);
		for (size_t k = i; k < r->n; k++) {
			const struct bh_metric *m = &r->m[k];

			if (!same_series(m, &r->m[i]) || strcmp(m->panel, panel))
				continue;
			done[k] = true;
			if (m->x <= 0)
				continue;
			fprintf(d, "%.17g", m->x);
			for (int s = 0; s < BH_NSIDES; s++) {
				val(d, m->st[s].median);
				val(d, m->st[s].min);
				val(d, m->st[s].max);
			}
			fputc('\n', d);
		}
		if (fclose(d) != 0) {
			free(done);
			return verr_errno(err, "%s", path);
		}
		fprintf(gp, "%s\"plot-%d-%d.dat\" using 1:2:3:4 with yerrorlines lc %d dt 1 pt 7 ps 0.6 title \"%s %s native\", \\\n"
			"  \"\" using 1:5:6:7 with yerrorlines lc %d dt 2 pt 6 ps 0.6 title \"%s %s guest\"",
			series > 1 ? ", \\\n  " : "", pi, series, series, r->m[i].group, r->m[i].name, series,
			r->m[i].group, r->m[i].name);
	}
	fputs("\n", gp);
	fputs("unset logscale\nunset xtics\nset xtics\nset autoscale x\n", gp);
	free(done);
	return series;
}

/* Bars of native and guest per metric. */
static int panel_bars(FILE *gp, const struct bh_ctx *c, int pi, const char *panel, struct verr *err)
{
	const struct bh_results *r = &c->res;
	char path[PATH_MAX + 64];
	FILE *d;
	int n = 0;

	snprintf(path, sizeof(path), "%s/plot-%d.dat", c->dir, pi);
	if (!(d = fopen(path, "w")))
		return verr_errno(err, "%s", path);
	fputs("# metric native_median guest_median\n", d);
	for (size_t i = 0; i < r->n; i++) {
		const struct bh_metric *m = &r->m[i];

		if (strcmp(m->panel, panel))
			continue;
		fprintf(d, "\"%s\"", m->label);
		val(d, m->st[BH_NATIVE].median);
		val(d, m->st[BH_GUEST].median);
		fputc('\n', d);
		n++;
	}
	if (fclose(d) != 0)
		return verr_errno(err, "%s", path);
	fprintf(gp, "set style data histograms\nset style histogram clustered gap 1\n"
		    "set style fill solid 0.7 border -1\nset logscale y\nset xtics rotate by -25 scale 0\n"
		    "plot \"plot-%d.dat\" using 2:xtic(1) lc 1 title \"native\", \"\" using 3 lc 2 fs pattern 4 title \"guest\"\n"
		    "unset logscale\nset xtics norotate\nset style data points\n",
		pi);
	return n;
}

int bh_plot(const struct bh_ctx *c, struct verr *err)
{
	char path[PATH_MAX + 32];
	const char *const *panels = c->s->panels;
	int np = 0, pi = 0;
	FILE *gp;

	for (; panels[np]; np++)
		;
	snprintf(path, sizeof(path), "%s/plot.gp", c->dir);
	if (!(gp = fopen(path, "w")))
		return verr_errno(err, "%s", path);
	fprintf(gp, "# vhpc bench %s: `gnuplot plot.gp` in this folder redraws plot.png\n"
		    "set terminal pngcairo size 1100,%d font \",10\"\nset output \"plot.png\"\n"
		    "set datafile missing \"?\"\nset key outside right top\nset grid\n"
		    "set multiplot layout %d,1 title \"vhpc bench %s: native vs %s guests, %d repetition%s, medians\"\n",
		c->s->name, 420 * (np ? np : 1), np ? np : 1, c->s->name, c->driver, c->reps, c->reps == 1 ? "" : "s");
	for (; panels[pi]; pi++) {
		const char *unit = "";
		bool sized = true, any = false;
		int r;

		for (size_t i = 0; i < c->res.n; i++)
			if (!strcmp(c->res.m[i].panel, panels[pi])) {
				unit = c->res.m[i].unit;
				sized &= c->res.m[i].x >= 0;
				any = true;
			}
		fprintf(gp, "set title \"%s%s\"\nset ylabel \"%s\"\n", panels[pi],
			sized ? ": native solid, guest dashed, bars min..max" : "", unit);
		if (!any) {
			fputs("set label 1 \"no data\" at graph 0.5,0.5 center\nplot NaN notitle\nunset label 1\n", gp);
			continue;
		}
		r = sized ? panel_lines(gp, c, pi + 1, panels[pi], err) : panel_bars(gp, c, pi + 1, panels[pi], err);
		if (r < 0) {
			fclose(gp);
			return -1;
		}
	}
	fputs("unset multiplot\n", gp);
	if (fclose(gp) != 0)
		return verr_errno(err, "%s", path);
	return bh_gnuplot(c->dir, "plot.gp", "plot.png", err);
}
