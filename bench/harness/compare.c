/* vhpc bench compare A B: two results folders, per metric and side the
 * ratio B/A of the medians with the noise range of the repetitions. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/harness/bh.h"

#define MAX_RESULTS_FILE (256u << 20)

static struct json_object *jget(struct json_object *o, const char *path)
{
	char buf[128], *save = NULL;
	struct json_object *cur = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
		if (!json_object_is_type(cur, json_type_object) || !json_object_object_get_ex(cur, k, &cur))
			return NULL;
	return cur;
}

static const char *jget_str(struct json_object *o, const char *path)
{
	struct json_object *v = jget(o, path);

	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* A value as it reads in the file: strings bare, anything else (numbers,
 * the iter object, sizes) as JSON; NULL when absent or null. */
static const char *jget_text(struct json_object *o, const char *path)
{
	struct json_object *v = jget(o, path);

	if (!v)
		return NULL;
	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) :
	       json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
}

void bh_doc_free(struct bh_doc *d)
{
	json_object_put(d->root);
	bh_results_free(&d->res);
	memset(d, 0, sizeof(*d));
}

int bh_doc_load(const char *dir, struct bh_doc *d, struct verr *err)
{
	char path[PATH_MAX + 32], *text;
	size_t len;
	struct stat st;
	struct json_object *cfg, *reps, *metrics;
	enum json_tokener_error je;
	const char *s;

	memset(d, 0, sizeof(*d));
	if (strlen(dir) >= sizeof(d->dir) - 16)
		return verr_set(err, "%s: path too long", dir);
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	if (stat(dir, &st) < 0)
		return verr_errno(err, "%s", dir);
	if (!S_ISDIR(st.st_mode))
		return verr_set(err, "%s: not a folder (a results folder of vhpc bench holds results.json)", dir);
	snprintf(path, sizeof(path), "%s/results.json", dir);
	if (access(path, F_OK) < 0 && errno == ENOENT)
		return verr_set(err, "%s: no results.json here; is it a vhpc bench results folder?", dir);
	if (read_file(path, &text, &len, MAX_RESULTS_FILE, err) < 0)
		return -1;
	d->root = json_tokener_parse_verbose(text, &je);
	free(text);
	if (!d->root)
		return verr_set(err, "%s: not JSON (%s)", path, json_tokener_error_desc(je));
	if (!json_object_is_type(d->root, json_type_object) || !(s = jget_str(d->root, "format")) ||
	    strcmp(s, "vhpc-bench/1")) {
		bh_doc_free(d);
		return verr_set(err, "%s: not a vhpc bench results file (\"format\" is not \"vhpc-bench/1\")", path);
	}
	if (!(s = jget_str(d->root, "suite")) ||
	    (strcmp(s, "mpi") && strcmp(s, "net") && strcmp(s, "mem") && strcmp(s, "sys"))) {
		bh_doc_free(d);
		return verr_set(err, "%s: \"suite\" is missing or unknown", path);
	}
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	snprintf(d->suite, sizeof(d->suite), "%s", s);
	snprintf(d->started, sizeof(d->started), "%s", (s = jget_str(d->root, "started")) ? s : "?");
	snprintf(d->driver, sizeof(d->driver), "%s", (s = jget_str(d->root, "config.driver")) ? s : "?");
	snprintf(d->host, sizeof(d->host), "%s", (s = jget_str(d->root, "machine.hostname")) ? s : "?");
	if (!json_object_object_get_ex(d->root, "config", &cfg) || !json_object_object_get_ex(cfg, "reps", &reps) ||
	    !json_object_is_type(reps, json_type_int) || json_object_get_int64(reps) < 1 ||
	    json_object_get_int64(reps) > BH_MAX_REPS) {
		bh_doc_free(d);
		return verr_set(err, "%s: \"config.reps\" is missing or not in 1..%d", path, BH_MAX_REPS);
	}
	d->reps = (size_t)json_object_get_int64(reps);
	if (!json_object_object_get_ex(d->root, "metrics", &metrics)) {
		bh_doc_free(d);
		return verr_set(err, "%s: no \"metrics\"", path);
	}
	if (bh_results_from_json(metrics, d->reps, path, &d->res, err) < 0) {
		json_object_put(d->root);
		d->root = NULL;
		return -1;
	}
	return 0;
}

struct side_cmp {
	bool ok;
	double ratio, lo, hi;
	const char *change;      /* "same", "better", "worse" */
};

/* B/A of one side; the range pairs B's extremes with A's opposite ones,
 * so it holds every ratio the repetitions allow. */
static void side_compare(const struct bh_metric *a, const struct bh_metric *b, int s, struct side_cmp *c)
{
	const struct bh_stat *x = &a->st[s], *y = &b->st[s];

	memset(c, 0, sizeof(*c));
	c->change = "-";
	if (!x->n || !y->n || x->median <= 0 || x->min <= 0)
		return;
	c->ok = true;
	c->ratio = y->median / x->median;
	c->lo = y->min / x->max;
	c->hi = y->max / x->min;
	if (c->lo <= 1 && c->hi >= 1)
		c->change = "same";
	else if ((c->lo > 1) == (a->better == BH_HIGHER))
		c->change = "better";
	else
		c->change = "worse";
}

static void machine_diff(FILE *f, const struct bh_doc *a, const struct bh_doc *b)
{
	/* The machine, and every setting that shapes what was measured: a
	 * ratio between runs with other repetition counts or rank counts is
	 * no like-for-like comparison, and the reader must be told. */
	static const char *const keys[] = { "machine.hostname", "machine.hwloc", "machine.cpu_model",
					    "machine.kernel", "machine.versions.vhpc", "machine.versions.openmpi",
					    "machine.versions.runc", "config.driver", "config.image", "config.imb",
					    "config.guests", "config.ranks", "config.iter", "config.seconds",
					    "config.no_vmshm", "config.no_single_copy", "config.native_btl",
					    "config.native_env", "config.fabric", NULL };

	for (int i = 0; keys[i]; i++) {
		char xa[256], ya[256];
		const char *x = jget_text(a->root, keys[i]), *y = jget_text(b->root, keys[i]);

		/* json-c reuses one buffer per object: keep copies. */
		x = x ? (snprintf(xa, sizeof(xa), "%s", x), xa) : NULL;
		y = y ? (snprintf(ya, sizeof(ya), "%s", y), ya) : NULL;

		if ((x || y) && (!x || !y || strcmp(x, y)))
			fprintf(f, "# differs: %s: A %s, B %s\n", keys[i] + (strchr(keys[i], '.') - keys[i]) + 1,
				x ? x : "(none)", y ? y : "(none)");
	}
}

static struct json_object *side_json(const struct side_cmp *c)
{
	struct json_object *o;

	if (!c->ok)
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "ratio", json_object_new_double(c->ratio));
	json_object_object_add(o, "lo", json_object_new_double(c->lo));
	json_object_object_add(o, "hi", json_object_new_double(c->hi));
	json_object_object_add(o, "change", json_object_new_string(c->change));
	return o;
}

static const char *side_text(const struct side_cmp *c, char *buf, size_t len)
{
	if (!c->ok)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.3f [%.3f..%.3f] %s", c->ratio, c->lo, c->hi, c->change);
	return buf;
}

static const char *ratio_text(const struct bh_metric *m, char *buf, size_t len)
{
	if (m->ratio.ok)
		snprintf(buf, len, "%.3f", m->ratio.median);
	else
		snprintf(buf, len, "-");
	return buf;
}

int bh_compare(FILE *f, const struct bh_doc *a, const struct bh_doc *b, bool json, struct verr *err)
{
	struct json_object *doc = NULL, *arr = NULL, *only_a = NULL, *only_b = NULL;
	size_t both = 0, na = 0, nb = 0;
	int lw = 6, uw = 4;

	if (strcmp(a->suite, b->suite))
		return verr_set(err, "%s is a %s run and %s a %s run: nothing to compare", a->dir, a->suite,
				b->dir, b->suite);
	for (size_t i = 0; i < a->res.n; i++) {
		int l = (int)strlen(a->res.m[i].label), u = (int)strlen(a->res.m[i].unit);

		lw = l > lw ? l : lw;
		uw = u > uw ? u : uw;
	}
	if (json) {
		doc = json_object_new_object();
		arr = json_object_new_array();
		only_a = json_object_new_array();
		only_b = json_object_new_array();
		json_object_object_add(doc, "a", json_object_new_string(a->dir));
		json_object_object_add(doc, "b", json_object_new_string(b->dir));
		json_object_object_add(doc, "suite", json_object_new_string(a->suite));
	} else {
		fprintf(f, "# A: %s (%s, %s, %zu repetitions, host %s, %s driver)\n", a->dir, a->suite, a->started,
			a->reps, a->host, a->driver);
		fprintf(f, "# B: %s (%s, %s, %zu repetitions, host %s, %s driver)\n", b->dir, b->suite, b->started,
			b->reps, b->host, b->driver);
		machine_diff(f, a, b);
		fprintf(f, "# Per side: B/A of the medians [noise range: min B / max A .. max B / min A];\n"
			   "# better or worse when the whole range is past 1, else same.  Last: guest/native in A -> B.\n");
		fprintf(f, "%-*s  %-*s  %-34s  %-34s  %s\n", lw, "metric", uw, "unit", "native B/A", "guest B/A",
			"guest/native A -> B");
	}
	for (size_t i = 0; i < a->res.n; i++) {
		const struct bh_metric *x = &a->res.m[i], *y = bh_metric_find(&b->res, x->key);
		struct side_cmp sc[BH_NSIDES];
		char s0[64], s1[64], r0[16], r1[16];

		if (!y) {
			na++;
			if (json)
				json_object_array_add(only_a, json_object_new_string(x->key));
			continue;
		}
		both++;
		for (int s = 0; s < BH_NSIDES; s++)
			side_compare(x, y, s, &sc[s]);
		if (json) {
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "key", json_object_new_string(x->key));
			json_object_object_add(o, "label", json_object_new_string(x->label));
			json_object_object_add(o, "unit", json_object_new_string(x->unit));
			json_object_object_add(o, "better", json_object_new_string(x->better == BH_LOWER ? "lower" : "higher"));
			for (int s = 0; s < BH_NSIDES; s++)
				json_object_object_add(o, bh_side_names[s], side_json(&sc[s]));
			json_object_object_add(o, "ratio_a", x->ratio.ok ? json_object_new_double(x->ratio.median) : NULL);
			json_object_object_add(o, "ratio_b", y->ratio.ok ? json_object_new_double(y->ratio.median) : NULL);
			json_object_array_add(arr, o);
		} else {
			fprintf(f, "%-*s  %-*s  %-34s  %-34s  %s -> %s\n", lw, x->label, uw, x->unit,
				side_text(&sc[BH_NATIVE], s0, sizeof(s0)), side_text(&sc[BH_GUEST], s1, sizeof(s1)),
				ratio_text(x, r0, sizeof(r0)), ratio_text(y, r1, sizeof(r1)));
		}
	}
	for (size_t i = 0; i < b->res.n; i++)
		if (!bh_metric_find(&a->res, b->res.m[i].key)) {
			nb++;
			if (json)
				json_object_array_add(only_b, json_object_new_string(b->res.m[i].key));
		}
	if (json) {
		json_object_object_add(doc, "metrics", arr);
		json_object_object_add(doc, "only_a", only_a);
		json_object_object_add(doc, "only_b", only_b);
		fprintf(f, "%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(doc);
	} else {
		fprintf(f, "# %zu metrics compared; %zu only in A, %zu only in B\n", both, na, nb);
	}
	if (both == 0)
		return verr_set(err, "%s and %s have no metric in common", a->dir, b->dir);
	return 0;
}

int bench_compare(const char *a, const char *b, bool json)
{
	struct bh_doc da, db;
	struct verr err;
	int rc;

	if (bh_doc_load(a, &da, &err) < 0) {
		fprintf(stderr, "vhpc bench compare: A: %s\n", err.msg);
		return 1;
	}
	if (bh_doc_load(b, &db, &err) < 0) {
		fprintf(stderr, "vhpc bench compare: B: %s\n", err.msg);
		bh_doc_free(&da);
		return 1;
	}
	rc = bh_compare(stdout, &da, &db, json, &err);
	if (rc < 0)
		fprintf(stderr, "vhpc bench compare: %s\n", err.msg);
	bh_doc_free(&da);
	bh_doc_free(&db);
	return rc < 0 ? 1 : 0;
}
