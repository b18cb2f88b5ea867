/* Benchmark output (from the host or from a guest: checked, never trusted)
 * into metrics. */
#include "lib/err.h"
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

#define BH_MAX_LINE 4096

int bh_from_imb(struct bh_results *r, enum bh_side side, size_t rep,
		const struct imb_output *o, struct verr *err)
{
	for (size_t i = 0; i < o->ntables; i++) {
		const struct imb_table *t = &o->tables[i];
		char group[64];

		/* -multi tables are per group of processes: not what we run. */
		if (t->multi)
			continue;
		if (t->nprocs > 0)
			snprintf(group, sizeof(group), "%.40s np=%d", t->name, t->nprocs);
		else
			snprintf(group, sizeof(group), "%.40s", t->name);
		for (size_t k = 0; k < t->nrows; k++) {
			const struct imb_row *row = &t->rows[k];
			long long bytes = imb_row_bytes(t, row);
			double tmax = imb_row_tmax(t, row);
			struct bh_desc d = { .group = group, .name = "t", .unit = "usec", .panel = "latency",
					     .better = BH_LOWER, .x = bytes < 0 ? -1 : (double)bytes };

			if (row->failure || tmax < 0)
				continue;
			if (bh_add(r, &d, side, rep, tmax, err) < 0)
				return verr_wrap(err, "%s:%d", o->source, row->line);
			if (bytes > 0 && imb_has(t, IMB_COL_MBPS)) {
				d.name = "bw";
				d.unit = "Mbytes/sec";
				d.panel = "bandwidth";
				d.better = BH_HIGHER;
				if (bh_add(r, &d, side, rep, row->v[IMB_COL_MBPS], err) < 0)
					return verr_wrap(err, "%s:%d", o->source, row->line);
			}
		}
	}
	return 0;
}

int bh_each_line(const char *name, const char *text, size_t len, bh_line_fn fn, void *ctx,
		 struct verr *err)
{
	static const char tag[] = "vhpc-bench ";
	const char *p = text, *end = text + len;
	int count = 0, line = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		line++;
		if (l >= sizeof(tag) - 1 && !memcmp(p, tag, sizeof(tag) - 1)) {
			char *s;
			struct json_object *o;
			enum json_tokener_error je;

			if (l > BH_MAX_LINE)
				return verr_set(err, "%s:%d: result line longer than %d bytes", name, line, BH_MAX_LINE);
			s = strndup(p + sizeof(tag) - 1, l - (sizeof(tag) - 1));
			if (!s)
				return verr_set(err, "out of memory");
			if (strlen(s) != l - (sizeof(tag) - 1)) {
				free(s);
				return verr_set(err, "%s:%d: NUL byte in a result line", name, line);
			}
			o = json_tokener_parse_verbose(s, &je);
			free(s);
			if (!o || !json_object_is_type(o, json_type_object)) {
				json_object_put(o);
				return verr_set(err, "%s:%d: result line is not a JSON object%s%s", name, line,
						o ? "" : ": ", o ? "" : json_tokener_error_desc(je));
			}
			if (fn(ctx, o, err) < 0) {
				json_object_put(o);
				return verr_wrap(err, "%s:%d", name, line);
			}
			json_object_put(o);
			count++;
		}
		p += l + 1;
	}
	return count;
}

int bh_json_num(struct json_object *o, const char *key, double min, double max, double *out,
		struct verr *err)
{
	struct json_object *v;
	double x;

	if (!json_object_object_get_ex(o, key, &v) || !v ||
	    (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)))
		return verr_set(err, "\"%s\" is missing or not a number", key);
	x = json_object_get_double(v);
	if (!isfinite(x) || x < min || x > max)
		return verr_set(err, "\"%s\": %g is outside %g..%g", key, x, min, max);
	*out = x;
	return 0;
}

int bh_json_enum(struct json_object *o, const char *key, const char *const *names,
		 struct verr *err)
{
	struct json_object *v;
	const char *s;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return verr_set(err, "\"%s\" is missing or not a string", key);
	s = json_object_get_string(v);
	for (int i = 0; names[i]; i++)
		if (!strcmp(s, names[i]))
			return i;
	return verr_set(err, "\"%s\": unexpected value '%.40s'", key, s);
}
