/* Device options: the registry of HV_DEVICE_OPTION declarations, the
 * command-line form `--NAME k=v,k=v,flag,positional` bound through the same
 * cf_schema as the YAML form, and the per-instance checks. */
#include "config.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/parse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Weak: programs without device files (unit tests) have no such section. */
extern const struct hv_devopt *const __start_hv_devopts[] __attribute__((weak));
extern const struct hv_devopt *const __stop_hv_devopts[] __attribute__((weak));

int hv_devopts(const struct hv_devopt *const **list)
{
	int n = __start_hv_devopts ? (int)(__stop_hv_devopts - __start_hv_devopts) : 0;

	*list = __start_hv_devopts;
	return n > HV_MAX_DEVOPTS ? HV_MAX_DEVOPTS : n;
}

static const struct hv_devset *find_set(const struct hv_config *c, const struct hv_devopt *opt)
{
	for (int i = 0; i < c->ndevopts; i++)
		if (c->dev[i].opt == opt)
			return &c->dev[i];
	return NULL;
}

size_t hv_dev_count(const struct hv_config *c, const struct hv_devopt *opt)
{
	const struct hv_devset *s = find_set(c, opt);

	return s ? s->n : 0;
}

void *hv_dev_get(const struct hv_config *c, const struct hv_devopt *opt, size_t i)
{
	const struct hv_devset *s = find_set(c, opt);

	return s && i < s->n ? s->item[i] : NULL;
}

const char *hv_dev_where(const struct hv_config *c, const struct hv_devopt *opt, size_t i)
{
	const struct hv_devset *s = find_set(c, opt);

	return s && i < s->n ? s->where[i] : "";
}

static int append(struct hv_devset *s, void *item, const char *where, struct verr *err)
{
	void **ni;
	char **nw;

	if ((int)s->n >= s->opt->max) {
		cf_release(s->opt->schema, item);
		free(item);
		return verr_set(err, "%s: at most %d %s device%s", where, s->opt->max, s->opt->name,
				s->opt->max == 1 ? "" : "s");
	}
	ni = realloc(s->item, (s->n + 1) * sizeof(*ni));
	if (ni)
		s->item = ni;
	nw = realloc(s->where, (s->n + 1) * sizeof(*nw));
	if (nw)
		s->where = nw;
	if (!ni || !nw || !(s->where[s->n] = strdup(where))) {
		cf_release(s->opt->schema, item);
		free(item);
		return verr_set(err, "out of memory");
	}
	s->item[s->n++] = item;
	return 0;
}

static const struct cf_field *field(const struct cf_schema *sc, const char *key)
{
	for (const struct cf_field *f = sc->fields; f->key; f++)
		if (!strcmp(f->key, key))
			return f;
	return NULL;
}

static int set_field(const struct cf_field *f, void *item, const char *val, const char *where,
		     struct verr *err)
{
	char *p = (char *)item + f->off;
	long long lo = f->min, hi = f->max;

	if (!lo && !hi)
		lo = -0x7fffffffffffffffll, hi = 0x7fffffffffffffffll;
	switch (f->kind) {
	case CF_BOOL:
		if (!val || !strcasecmp(val, "true") || !strcasecmp(val, "yes") || !strcasecmp(val, "on") ||
		    !strcmp(val, "1"))
			*(bool *)p = true;
		else if (!strcasecmp(val, "false") || !strcasecmp(val, "no") || !strcasecmp(val, "off") ||
			 !strcmp(val, "0"))
			*(bool *)p = false;
		else
			return verr_set(err, "%s: %s=%s is not true or false", where, f->key, val);
		return 0;
	case CF_STR:
		if (!val)
			return verr_set(err, "%s: %s needs a value (%s=...)", where, f->key, f->key);
		free(*(char **)p);
		if (!(*(char **)p = strdup(val)))
			return verr_set(err, "out of memory");
		return 0;
	case CF_INT: {
		long long v;

		if (!val || parse_ll(val, lo, hi, &v) < 0)
			return verr_set(err, "%s: %s=%s is not a number from %lld to %lld", where, f->key,
					val ? val : "", lo, hi);
		*(long long *)p = v;
		return 0;
	}
	case CF_SIZE: {
		uint64_t v;

		if (!val || parse_size(val, &v) < 0 || (long long)v < lo || (long long)v > hi)
			return verr_set(err, "%s: %s=%s is not %s", where, f->key, val ? val : "",
					f->what ? f->what : "a size");
		*(uint64_t *)p = v;
		return 0;
	}
	default:
		return verr_set(err, "%s: %s cannot be given on the command line", where, f->key);
	}
}

/* "k=v,flag,word" into a new item of the option's schema. */
static int parse_kv(const struct hv_devopt *opt, const char *arg, const char *where, void **out,
		    struct verr *err)
{
	void *item = calloc(1, opt->schema->size);
	char *s = strdup(arg ? arg : ""), *save = NULL;
	bool positional_used = false;
	int rc = 0;

	if (!item || !s) {
		free(item);
		free(s);
		return verr_set(err, "out of memory");
	}
	for (char *t = strtok_r(s, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		const struct cf_field *f;
		const char *val = NULL;

		if (eq) {
			*eq = 0;
			val = eq + 1;
		}
		for (char *k = t; *k; k++)
			if (*k == '-')
				*k = '_';
		f = field(opt->schema, t);
		if (!eq && (!f || f->kind != CF_BOOL) && opt->positional && !positional_used) {
			/* A bare word: the positional key's value (the whole
			 * token, dashes as given). */
			f = field(opt->schema, opt->positional);
			val = arg + (t - s);
			{
				size_t l = strcspn(val, ",");
				char *v = strndup(val, l);

				rc = v ? set_field(f, item, v, where, err) : verr_set(err, "out of memory");
				free(v);
			}
			positional_used = true;
			continue;
		}
		if (!f) {
			char known[256] = "";

			for (const struct cf_field *k = opt->schema->fields; k->key; k++)
				snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
					 k == opt->schema->fields ? "" : ", ", k->key);
			rc = verr_set(err, "%s: unknown key '%s' (expected %s)", where, t, known);
			break;
		}
		if (f == field(opt->schema, opt->positional ? opt->positional : ""))
			positional_used = true;
		rc = set_field(f, item, val, where, err);
	}
	free(s);
	if (rc) {
		cf_release(opt->schema, item);
		free(item);
		return -1;
	}
	*out = item;
	return 0;
}

int hv_devset_add_cli(struct hv_devset *s, const char *arg, struct verr *err)
{
	char where[256];
	void *item;

	if (!s->from_cli) {           /* the command line replaces the file's list */
		hv_devset_free(s);
		s->from_cli = true;
	}
	snprintf(where, sizeof(where), "--%s %s", s->opt->name, arg ? arg : "");
	if (parse_kv(s->opt, arg, where, &item, err) < 0)
		return -1;
	return append(s, item, where, err);
}

static int yaml_one(struct hv_devset *s, const cf_doc *d, const cf_node *n, struct verr *err)
{
	char where[256], w[200];
	void *item;

	snprintf(where, sizeof(where), "%s: %s", cf_where(d, n, w, sizeof(w)), s->opt->name);
	if (cf_node_type(n) == CF_NODE_MAP) {
		if (!(item = calloc(1, s->opt->schema->size)))
			return verr_set(err, "out of memory");
		if (cf_bind(d, n, s->opt->schema, item, err) < 0) {
			cf_release(s->opt->schema, item);
			free(item);
			return -1;
		}
		return append(s, item, where, err);
	}
	if (cf_node_type(n) == CF_NODE_SCALAR) {
		const char *v = cf_scalar(n);

		if (v && (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")))
			return 0;
		if (v && (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")))
			v = "";
		if (parse_kv(s->opt, v, where, &item, err) < 0)
			return -1;
		return append(s, item, where, err);
	}
	return cf_error(d, n, err, "%s: expected a mapping (%s)", s->opt->name, s->opt->usage);
}

int hv_devset_yaml(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	struct hv_devset *s = dst;

	hv_devset_free(s);
	if (cf_node_type(n) == CF_NODE_SEQ) {
		size_t len = cf_seq_len(d, n);

		for (size_t i = 0; i < len; i++)
			if (yaml_one(s, d, cf_seq_at(d, n, i), err) < 0)
				return -1;
		return 0;
	}
	return yaml_one(s, d, n, err);
}

void hv_devset_free(struct hv_devset *s)
{
	for (size_t i = 0; i < s->n; i++) {
		cf_release(s->opt->schema, s->item[i]);
		free(s->item[i]);
		free(s->where[i]);
	}
	free(s->item);
	free(s->where);
	s->item = NULL;
	s->where = NULL;
	s->n = 0;
}

int hv_devsets_check(struct hv_config *c, struct verr *err)
{
	for (int i = 0; i < c->ndevopts; i++) {
		struct hv_devset *s = &c->dev[i];

		for (size_t k = 0; k < s->n; k++)
			if (s->opt->check && s->opt->check(s->item[k], s->where[k], err) < 0)
				return -1;
	}
	return 0;
}
