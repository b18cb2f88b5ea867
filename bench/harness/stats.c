/* Statistics over repetitions and guest/native ratios. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int bh_stat_compute(const double *v, size_t n, struct bh_stat *s)
{
	double *w;
	size_t k = 0;

	s->n = 0;
	s->min = s->median = s->max = NAN;
	if (n == 0)
		return -1;
	w = malloc(n * sizeof(*w));
	if (!w)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!isnan(v[i]))
			w[k++] = v[i];
	if (k == 0) {
		free(w);
		return -1;
	}
	qsort(w, k, sizeof(*w), cmp_double);
	s->n = k;
	s->min = w[0];
	s->max = w[k - 1];
	s->median = k % 2 ? w[k / 2] : (w[k / 2 - 1] + w[k / 2]) / 2;
	free(w);
	return 0;
}

double bh_stat_best(const struct bh_stat *s, enum bh_better b)
{
	return b == BH_LOWER ? s->min : s->max;
}

void bh_ratio_compute(const double *native, const double *guest, size_t reps,
		      const struct bh_stat *ns, const struct bh_stat *gs,
		      enum bh_better b, struct bh_ratio *r)
{
	memset(r, 0, sizeof(*r));
	r->median = r->best = r->pair_min = r->pair_max = NAN;
	/* A side that measured 0 (below the printed resolution, such as a
	 * 0-byte Allreduce) has no meaningful ratio. */
	if (ns->n == 0 || gs->n == 0 || ns->median <= 0 || gs->median <= 0 || bh_stat_best(ns, b) <= 0 ||
	    bh_stat_best(gs, b) <= 0)
		return;
	r->ok = true;
	r->median = gs->median / ns->median;
	r->best = bh_stat_best(gs, b) / bh_stat_best(ns, b);
	for (size_t i = 0; i < reps; i++) {
		double q;

		if (isnan(native[i]) || isnan(guest[i]) || native[i] <= 0 || guest[i] <= 0)
			continue;
		q = guest[i] / native[i];
		if (r->pairs == 0 || q < r->pair_min)
			r->pair_min = q;
		if (r->pairs == 0 || q > r->pair_max)
			r->pair_max = q;
		r->pairs++;
	}
}
