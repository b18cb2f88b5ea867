/* The metrics of one run: values per side and repetition, and JSON. */
#include "lib/err.h"
#include "lib/grow.h"
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

const char *const bh_side_names[BH_NSIDES] = { "native", "guest" };

void bh_results_init(struct bh_results *r, size_t reps)
{
	memset(r, 0, sizeof(*r));
	r->reps = reps;
}

void bh_results_free(struct bh_results *r)
{
	for (size_t i = 0; i < r->n; i++)
		for (int s = 0; s < BH_NSIDES; s++)
			free(r->m[i].v[s]);
	free(r->m);
	memset(r, 0, sizeof(*r));
}

const char *bh_fmt_x(double x, char *buf, size_t len)
{
	static const char suffix[] = "KMGT";
	unsigned long long u = x >= 0 && x < 1e18 ? (unsigned long long)x : 0;
	double v = x;
	int k = -1;

	if (x < 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	if ((double)u == x)
		while (u >= 1024 && k < 3 && u % 1024 == 0) {
			u /= 1024;
			v = (double)u;
			k++;
		}
	/* 1.5G rather than 1536M once a size is that large. */
	if (k >= 0 && k < 3 && v >= 1024) {
		v /= 1024;
		k++;
	}
	if (k < 0)
		snprintf(buf, len, "%.0f", x);
	else
		snprintf(buf, len, "%g%c", v, suffix[k]);
	return buf;
}

/* Names end up in tables, JSON and gnuplot strings: printable, and no
 * quote, backslash or backtick. */
static bool text_ok(const char *s, size_t max)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; *s; s++, n++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e || *s == '"' || *s == '\\' ||
		    *s == '`')
			return false;
	return n < max;
}

static int desc_check(const struct bh_desc *d, struct verr *err)
{
	const struct bh_metric *m = NULL;

	if (!text_ok(d->group, sizeof(m->group)) || !*d->group)
		return verr_set(err, "metric group '%.80s' is empty, too long or not printable", d->group ? d->group : "");
	if (!text_ok(d->name, sizeof(m->name)) || !*d->name)
		return verr_set(err, "metric name '%.80s' is empty, too long or not printable", d->name ? d->name : "");
	if (!text_ok(d->unit, sizeof(m->unit)))
		return verr_set(err, "unit '%.80s' is too long or not printable", d->unit ? d->unit : "");
	if (!text_ok(d->panel ? d->panel : "", sizeof(m->panel)))
		return verr_set(err, "panel '%.80s' is too long or not printable", d->panel);
	if (!isfinite(d->x) || d->x > 1e18)
		return verr_set(err, "metric %s %s: size out of range", d->group, d->name);
	return 0;
}

static void make_key(const struct bh_desc *d, char *key, size_t len)
{
	if (d->x < 0)
		snprintf(key, len, "%s/%s/-", d->group, d->name);
	else
		snprintf(key, len, "%s/%s/%.0f", d->group, d->name, d->x);
}

const struct bh_metric *bh_metric_find(const struct bh_results *r, const char *key)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->m[i].key, key))
			return &r->m[i];
	return NULL;
}

struct bh_metric *bh_metric_get(struct bh_results *r, const struct bh_desc *d, struct verr *err)
{
	char key[sizeof(r->m->key)], xs[32];
	struct bh_metric *m;

	if (desc_check(d, err) < 0)
		return NULL;
	make_key(d, key, sizeof(key));
	m = (struct bh_metric *)bh_metric_find(r, key);
	if (m) {
		if (strcmp(m->unit, d->unit) || m->better != d->better || strcmp(m->panel, d->panel ? d->panel : "")) {
			verr_set(err, "metric %s: measured as %s before, now as %s", key, m->unit, d->unit);
			return NULL;
		}
		return m;
	}
	if (r->n >= BH_MAX_METRICS) {
		verr_set(err, "more than %d metrics", BH_MAX_METRICS);
		return NULL;
	}
	if (grow(&r->m, &r->cap, r->n + 1, sizeof(*r->m), 64) < 0) {
		verr_set(err, "out of memory");
		return NULL;
	}
	m = &r->m[r->n];
	memset(m, 0, sizeof(*m));
	for (int s = 0; s < BH_NSIDES; s++) {
		m->v[s] = malloc((r->reps ? r->reps : 1) * sizeof(double));
		if (!m->v[s]) {
			free(m->v[0]);
			verr_set(err, "out of memory");
			return NULL;
		}
		for (size_t i = 0; i < r->reps; i++)
			m->v[s][i] = NAN;
	}
	snprintf(m->key, sizeof(m->key), "%s", key);
	snprintf(m->group, sizeof(m->group), "%s", d->group);
	snprintf(m->name, sizeof(m->name), "%s", d->name);
	snprintf(m->unit, sizeof(m->unit), "%s", d->unit);
	snprintf(m->panel, sizeof(m->panel), "%s", d->panel ? d->panel : "");
	if (d->x < 0)
		snprintf(m->label, sizeof(m->label), "%s %s", d->group, d->name);
	else
		snprintf(m->label, sizeof(m->label), "%s %s %s", d->group, d->name, bh_fmt_x(d->x, xs, sizeof(xs)));
	m->better = d->better;
	m->x = d->x < 0 ? -1 : d->x;
	for (int s = 0; s < BH_NSIDES; s++)
		m->st[s].min = m->st[s].median = m->st[s].max = NAN;
	r->n++;
	return m;
}

int bh_add(struct bh_results *r, const struct bh_desc *d, enum bh_side side, size_t rep,
	   double value, struct verr *err)
{
	struct bh_metric *m;

	if ((int)side < 0 || side >= BH_NSIDES || rep >= r->reps)
		return verr_set(err, "measurement outside the run (side %d, repetition %zu)", (int)side, rep + 1);
	if (!isfinite(value) || value < 0 || value > 1e18)
		return verr_set(err, "%s %s: value %g is not a finite number >= 0", d->group ? d->group : "",
				d->name ? d->name : "", value);
	if (!(m = bh_metric_get(r, d, err)))
		return -1;
	if (!isnan(m->v[side][rep]))
		return verr_set(err, "%s: measured twice in %s repetition %zu", m->label, bh_side_names[side], rep + 1);
	m->v[side][rep] = value;
	return 0;
}

void bh_results_finish(struct bh_results *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct bh_metric *m = &r->m[i];

		for (int s = 0; s < BH_NSIDES; s++)
			bh_stat_compute(m->v[s], r->reps, &m->st[s]);
		bh_ratio_compute(m->v[BH_NATIVE], m->v[BH_GUEST], r->reps, &m->st[BH_NATIVE],
				 &m->st[BH_GUEST], m->better, &m->ratio);
	}
}

/* ------------------------------------------------------------------ JSON */

static struct json_object *num_or_null(double v)
{
	return isnan(v) ? NULL : json_object_new_double(v);
}

static struct json_object *side_json(const struct bh_metric *m, int s, size_t reps)
{
	struct json_object *o = json_object_new_object(), *vals = json_object_new_array();

	for (size_t i = 0; i < reps; i++)
		json_object_array_add(vals, num_or_null(m->v[s][i]));
	json_object_object_add(o, "values", vals);
	json_object_object_add(o, "n", json_object_new_int64((int64_t)m->st[s].n));
	json_object_object_add(o, "min", num_or_null(m->st[s].min));
	json_object_object_add(o, "median", num_or_null(m->st[s].median));
	json_object_object_add(o, "max", num_or_null(m->st[s].max));
	return o;
}

struct json_object *bh_results_to_json(const struct bh_results *r)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < r->n; i++) {
		const struct bh_metric *m = &r->m[i];
		struct json_object *o = json_object_new_object(), *ro = NULL;

		json_object_object_add(o, "key", json_object_new_string(m->key));
		json_object_object_add(o, "label", json_object_new_string(m->label));
		json_object_object_add(o, "group", json_object_new_string(m->group));
		json_object_object_add(o, "name", json_object_new_string(m->name));
		json_object_object_add(o, "unit", json_object_new_string(m->unit));
		json_object_object_add(o, "panel", json_object_new_string(m->panel));
		json_object_object_add(o, "better", json_object_new_string(m->better == BH_LOWER ? "lower" : "higher"));
		json_object_object_add(o, "x", m->x < 0 ? NULL : json_object_new_double(m->x));
		for (int s = 0; s < BH_NSIDES; s++)
			json_object_object_add(o, bh_side_names[s], side_json(m, s, r->reps));
		if (m->ratio.ok) {
			ro = json_object_new_object();
			json_object_object_add(ro, "median", json_object_new_double(m->ratio.median));
			json_object_object_add(ro, "best", json_object_new_double(m->ratio.best));
			json_object_object_add(ro, "pairs", json_object_new_int64((int64_t)m->ratio.pairs));
			json_object_object_add(ro, "pair_min", num_or_null(m->ratio.pair_min));
			json_object_object_add(ro, "pair_max", num_or_null(m->ratio.pair_max));
		}
		json_object_object_add(o, "ratio", ro);
		json_object_array_add(a, o);
	}
	return a;
}

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

int bh_results_from_json(struct json_object *metrics, size_t reps, const char *where,
			 struct bh_results *out, struct verr *err)
{
	size_t n;

	bh_results_init(out, reps);
	if (!json_object_is_type(metrics, json_type_array))
		return verr_set(err, "%s: \"metrics\" is not an array", where);
	n = json_object_array_length(metrics);
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(metrics, i), *xv;
		struct bh_desc d = { 0 };
		const char *key, *better;
		struct bh_metric *m;

		if (!json_object_is_type(o, json_type_object))
			goto bad_fmt;
		key = jstr(o, "key");
		d.group = jstr(o, "group");
		d.name = jstr(o, "name");
		d.unit = jstr(o, "unit");
		d.panel = jstr(o, "panel");
		better = jstr(o, "better");
		if (!key || !d.group || !d.name || !d.unit || !better) {
			verr_set(err, "%s: metrics[%zu]: needs strings key, group, name, unit and better", where, i);
			goto fail;
		}
		if (!strcmp(better, "lower"))
			d.better = BH_LOWER;
		else if (!strcmp(better, "higher"))
			d.better = BH_HIGHER;
		else {
			verr_set(err, "%s: metrics[%zu]: better is '%.20s', expected lower or higher", where, i, better);
			goto fail;
		}
		d.x = -1;
		if (json_object_object_get_ex(o, "x", &xv) && xv) {
			if (!json_object_is_type(xv, json_type_double) && !json_object_is_type(xv, json_type_int))
				goto bad_fmt;
			d.x = json_object_get_double(xv);
			if (d.x < 0)
				goto bad_fmt;
		}
		size_t before = out->n;

		if (!(m = bh_metric_get(out, &d, err))) {
			verr_wrap(err, "%s: metrics[%zu]", where, i);
			goto fail;
		}
		if (out->n == before) {
			verr_set(err, "%s: metrics[%zu]: metric %s appears twice", where, i, m->key);
			goto fail;
		}
		if (strcmp(m->key, key)) {
			verr_set(err, "%s: metrics[%zu]: key '%.80s' does not match its fields (%s)", where, i, key, m->key);
			goto fail;
		}
		for (int s = 0; s < BH_NSIDES; s++) {
			struct json_object *so, *vals;

			if (!json_object_object_get_ex(o, bh_side_names[s], &so) ||
			    !json_object_object_get_ex(so, "values", &vals) ||
			    !json_object_is_type(vals, json_type_array)) {
				verr_set(err, "%s: metrics[%zu] (%s): no %s.values array", where, i, key, bh_side_names[s]);
				goto fail;
			}
			if (json_object_array_length(vals) != reps) {
				verr_set(err, "%s: metrics[%zu] (%s): %zu %s values for %zu repetitions", where, i, key,
					 json_object_array_length(vals), bh_side_names[s], reps);
				goto fail;
			}
			for (size_t k = 0; k < reps; k++) {
				struct json_object *v = json_object_array_get_idx(vals, k);
				double x;

				if (!v)
					continue;
				if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
					goto bad_fmt;
				x = json_object_get_double(v);
				if (!isfinite(x) || x < 0) {
					verr_set(err, "%s: metrics[%zu] (%s): %s value %zu is not a number >= 0", where, i,
						 key, bh_side_names[s], k + 1);
					goto fail;
				}
				m->v[s][k] = x;
			}
		}
		continue;
bad_fmt:
		verr_set(err, "%s: metrics[%zu]: not a metric as vhpc bench writes it", where, i);
		goto fail;
	}
	bh_results_finish(out);
	return 0;
fail:
	bh_results_free(out);
	return -1;
}
