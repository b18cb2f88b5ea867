/* Parsed IMB tables as JSON (json-c), for harnesses such as `vhpc bench`. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* JSON keys per column: stable names without units or punctuation. */
static const char *const json_keys[IMB_NCOLS] = {
	[IMB_COL_GROUP] = "group",
	[IMB_COL_BYTES] = "bytes",
	[IMB_COL_REPS] = "reps",
	[IMB_COL_T] = "t_usec",
	[IMB_COL_TMIN] = "t_min_usec",
	[IMB_COL_TMAX] = "t_max_usec",
	[IMB_COL_TAVG] = "t_avg_usec",
	[IMB_COL_MBPS] = "mbytes_per_sec",
	[IMB_COL_MSGRATE] = "msg_per_sec",
	[IMB_COL_DEFECTS] = "defects",
	[IMB_COL_T_OVRL] = "t_ovrl_usec",
	[IMB_COL_T_PURE] = "t_pure_usec",
	[IMB_COL_T_CPU] = "t_cpu_usec",
	[IMB_COL_OVERLAP] = "overlap_percent",
};

/* "%.15g" keeps the printed digits (0.2, not 0.20000000000000001). */
static json_object *num(double v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.15g", v);
	return json_object_new_double_s(v, buf);
}

static json_object *row_json(const struct imb_table *t, const struct imb_row *r)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "line", json_object_new_int(r->line));
	for (int i = 0; i < t->ncols; i++) {
		enum imb_col c = t->cols[i];

		if (r->v[c] < 0)
			continue;       /* not printed: a failed sample */
		if (c == IMB_COL_GROUP || c == IMB_COL_BYTES || c == IMB_COL_REPS)
			json_object_object_add(o, json_keys[c], json_object_new_int64((int64_t)r->v[c]));
		else
			json_object_object_add(o, json_keys[c], num(r->v[c]));
	}
	if (r->failure)
		json_object_object_add(o, "failure", json_object_new_string(r->failure));
	return o;
}

static json_object *table_json(const struct imb_table *t)
{
	json_object *o = json_object_new_object(), *cols, *rows;

	if (!o)
		return NULL;
	json_object_object_add(o, "name", json_object_new_string(t->name));
	json_object_object_add(o, "multi", json_object_new_boolean(t->multi));
	json_object_object_add(o, "nprocs", json_object_new_int(t->nprocs));
	json_object_object_add(o, "ngroups", json_object_new_int(t->ngroups));
	json_object_object_add(o, "waiting", json_object_new_int(t->waiting));
	json_object_object_add(o, "line", json_object_new_int(t->line));
	json_object_object_add(o, "bw_factor", num(imb_bw_factor(t->name)));
	cols = json_object_new_array();
	for (int i = 0; cols && i < t->ncols; i++)
		json_object_array_add(cols, json_object_new_string(json_keys[t->cols[i]]));
	json_object_object_add(o, "columns", cols);
	rows = json_object_new_array();
	for (size_t i = 0; rows && i < t->nrows; i++)
		json_object_array_add(rows, row_json(t, &t->rows[i]));
	json_object_object_add(o, "rows", rows);
	return o;
}

char *imb_output_json(const struct imb_output *out)
{
	json_object *o = json_object_new_object(), *tables;
	char *s = NULL;

	if (!o)
		return NULL;
	json_object_object_add(o, "source", json_object_new_string(out->source));
	json_object_object_add(o, "suite", json_object_new_string(out->suite));
	json_object_object_add(o, "ignored_lines", json_object_new_int64((int64_t)out->ignored_lines));
	tables = json_object_new_array();
	for (size_t i = 0; tables && i < out->ntables; i++)
		json_object_array_add(tables, table_json(&out->tables[i]));
	json_object_object_add(o, "tables", tables);
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
						  JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return s;
}
