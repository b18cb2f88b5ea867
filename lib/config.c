/*
 * YAML configuration through libyaml's document loader, bound to C structs
 * by schema tables.  The loader keeps every node's start mark, which is what
 * lets each error name file:line:column.
 */
#include "lib/config.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* Aliases may point back to an enclosing node (`&a [*a]`) or fan out
 * exponentially, so binding counts and caps what it visits. */
#define CF_MAX_DEPTH  32
#define CF_MAX_VISITS 200000

struct cf_doc {
	yaml_document_t doc;
	char *name;
	size_t visits;
};

static const yaml_node_t *Y(const cf_node *n) { return (const yaml_node_t *)n; }

const char *cf_where(const cf_doc *d, const cf_node *n, char *buf, size_t len)
{
	if (n)
		snprintf(buf, len, "%s:%zu:%zu", d->name,
			 Y(n)->start_mark.line + 1, Y(n)->start_mark.column + 1);
	else
		snprintf(buf, len, "%s", d->name);
	return buf;
}

int cf_error(const cf_doc *d, const cf_node *n, struct verr *err,
	     const char *fmt, ...)
{
	char where[512], msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return verr_set(err, "%s: %s", cf_where(d, n, where, sizeof(where)), msg);
}

int cf_load_string(cf_doc **out, const char *name, const char *buf,
		   size_t len, struct verr *err)
{
	yaml_parser_t parser;
	yaml_document_t extra;
	cf_doc *d;

	if (len > CF_MAX_FILE)
		return verr_set(err, "%s: larger than %u bytes", name, CF_MAX_FILE);
	d = calloc(1, sizeof(*d));
	if (!d || !(d->name = strdup(name))) {
		free(d);
		return verr_set(err, "out of memory");
	}
	if (!yaml_parser_initialize(&parser)) {
		free(d->name);
		free(d);
		return verr_set(err, "%s: cannot initialise the YAML parser", name);
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&parser, &d->doc)) {
		verr_set(err, "%s:%zu:%zu: YAML syntax error: %s%s%s", name,
			 parser.problem_mark.line + 1, parser.problem_mark.column + 1,
			 parser.problem ? parser.problem : "malformed document",
			 parser.context ? " " : "", parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		free(d->name);
		free(d);
		return -1;
	}
	if (!yaml_document_get_root_node(&d->doc)) {
		yaml_parser_delete(&parser);
		cf_free_doc(d);
		return verr_set(err, "%s: the file is empty; expected a YAML mapping", name);
	}
	/* A second document would be silently ignored; say so instead. */
	if (!yaml_parser_load(&parser, &extra)) {
		verr_set(err, "%s:%zu:%zu: YAML syntax error: %s", name,
			 parser.problem_mark.line + 1, parser.problem_mark.column + 1,
			 parser.problem ? parser.problem : "malformed document");
		yaml_parser_delete(&parser);
		cf_free_doc(d);
		return -1;
	}
	if (yaml_document_get_root_node(&extra)) {
		size_t line = yaml_document_get_root_node(&extra)->start_mark.line + 1;

		yaml_document_delete(&extra);
		yaml_parser_delete(&parser);
		cf_free_doc(d);
		return verr_set(err, "%s:%zu: a second YAML document; expected exactly one", name, line);
	}
	yaml_document_delete(&extra);
	yaml_parser_delete(&parser);
	*out = d;
	return 0;
}

int cf_load_file(cf_doc **out, const char *path, struct verr *err)
{
	char *buf;
	size_t len;
	int r;

	if (read_file(path, &buf, &len, CF_MAX_FILE, err) < 0)
		return -1;
	r = cf_load_string(out, path, buf, len, err);
	free(buf);
	return r;
}

void cf_free_doc(cf_doc *d)
{
	if (!d)
		return;
	yaml_document_delete(&d->doc);
	free(d->name);
	free(d);
}

const cf_node *cf_root(const cf_doc *d)
{
	return (const cf_node *)yaml_document_get_root_node((yaml_document_t *)&d->doc);
}

enum cf_node_type cf_node_type(const cf_node *n)
{
	switch (Y(n)->type) {
	case YAML_SCALAR_NODE: return CF_NODE_SCALAR;
	case YAML_SEQUENCE_NODE: return CF_NODE_SEQ;
	case YAML_MAPPING_NODE: return CF_NODE_MAP;
	default: return 0;
	}
}

const char *cf_scalar(const cf_node *n)
{
	return Y(n)->type == YAML_SCALAR_NODE ? (const char *)Y(n)->data.scalar.value : NULL;
}

static const cf_node *node_at(const cf_doc *d, int idx)
{
	return (const cf_node *)yaml_document_get_node((yaml_document_t *)&d->doc, idx);
}

size_t cf_seq_len(const cf_doc *d, const cf_node *n)
{
	(void)d;
	if (Y(n)->type != YAML_SEQUENCE_NODE)
		return 0;
	return Y(n)->data.sequence.items.top - Y(n)->data.sequence.items.start;
}

const cf_node *cf_seq_at(const cf_doc *d, const cf_node *n, size_t i)
{
	if (i >= cf_seq_len(d, n))
		return NULL;
	return node_at(d, Y(n)->data.sequence.items.start[i]);
}

const cf_node *cf_map_get(const cf_doc *d, const cf_node *n, const char *key)
{
	if (Y(n)->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = Y(n)->data.mapping.pairs.start;
	     p < Y(n)->data.mapping.pairs.top; p++) {
		const cf_node *k = node_at(d, p->key);
		const char *ks = k ? cf_scalar(k) : NULL;

		if (ks && !strcmp(ks, key))
			return node_at(d, p->value);
	}
	return NULL;
}

static const char *type_word(const cf_node *n)
{
	switch (Y(n)->type) {
	case YAML_SCALAR_NODE: return "a scalar";
	case YAML_SEQUENCE_NODE: return "a list";
	case YAML_MAPPING_NODE: return "a mapping";
	default: return "nothing";
	}
}

/* "key.path: " before a message, or nothing at the top level. */
#define P(path) (path), (*(path) ? ": " : "")

/* A budget check shared by every recursive step. */
static int visit(const cf_doc *d, const cf_node *n, int depth, struct verr *err)
{
	cf_doc *md = (cf_doc *)d;

	if (depth > CF_MAX_DEPTH)
		return cf_error(d, n, err, "nested deeper than %d levels (recursive alias?)", CF_MAX_DEPTH);
	if (++md->visits > CF_MAX_VISITS)
		return cf_error(d, n, err, "document expands to more than %d nodes (alias bomb?)", CF_MAX_VISITS);
	return 0;
}

/* A scalar as a C string, refusing embedded NULs that would truncate it. */
static int scalar_of(const cf_doc *d, const cf_node *n, const char *path,
		     const char *what, const char **out, struct verr *err)
{
	if (Y(n)->type != YAML_SCALAR_NODE)
		return cf_error(d, n, err, "%s%sexpected %s, got %s", P(path), what, type_word(n));
	if (strlen((const char *)Y(n)->data.scalar.value) != Y(n)->data.scalar.length)
		return cf_error(d, n, err, "%s%scontains a NUL byte", P(path));
	*out = (const char *)Y(n)->data.scalar.value;
	return 0;
}

static void free_strlist(struct cf_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static void free_strmap(struct cf_strmap *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->key[i]);
		free(m->val[i]);
	}
	free(m->key);
	free(m->val);
	m->key = m->val = NULL;
	m->n = 0;
}

static int bind_map(const cf_doc *d, const cf_node *n, const struct cf_schema *s,
		    void *dst, const char *path, int depth, struct verr *err);

static int bind_field(const cf_doc *d, const cf_node *v, const struct cf_field *f,
		      void *dst, const char *path, int depth, struct verr *err)
{
	char *p = (char *)dst + f->off;
	const char *sv;

	if (visit(d, v, depth, err) < 0)
		return -1;
	switch (f->kind) {
	case CF_STR: {
		char *dup;

		if (scalar_of(d, v, path, f->what ? f->what : "a string", &sv, err) < 0)
			return -1;
		if (!(dup = strdup(sv)))
			return verr_set(err, "out of memory");
		free(*(char **)p);
		*(char **)p = dup;
		return 0;
	}
	case CF_INT: {
		long long x, lo = f->min, hi = f->max;

		if (!lo && !hi) {
			lo = -(1LL << 62);
			hi = 1LL << 62;
		}
		if (scalar_of(d, v, path, "an integer", &sv, err) < 0)
			return -1;
		if (parse_ll(sv, lo, hi, &x) < 0)
			return cf_error(d, v, err, "%s%sexpected %s in %lld..%lld, got '%s'", P(path), f->what ? f->what : "an integer", lo, hi, sv);
		*(long long *)p = x;
		return 0;
	}
	case CF_BOOL: {
		static const char *const yes[] = { "true", "yes", "on", NULL };
		static const char *const no[] = { "false", "no", "off", NULL };

		if (scalar_of(d, v, path, "true or false", &sv, err) < 0)
			return -1;
		for (int i = 0; yes[i]; i++) {
			if (!strcasecmp(sv, yes[i])) {
				*(bool *)p = true;
				return 0;
			}
			if (!strcasecmp(sv, no[i])) {
				*(bool *)p = false;
				return 0;
			}
		}
		return cf_error(d, v, err, "%s%sexpected true or false, got '%s'", P(path), sv);
	}
	case CF_SIZE: {
		uint64_t x;

		if (scalar_of(d, v, path, "a size", &sv, err) < 0)
			return -1;
		if (parse_size(sv, &x) < 0)
			return cf_error(d, v, err, "%s%sexpected a size such as 512M or 4G, got '%s'", P(path), sv);
		if ((f->min || f->max) && (x < (uint64_t)f->min || x > (uint64_t)f->max)) {
			char a[32], b[32];

			return cf_error(d, v, err, "%s%s%s is outside %s..%s", P(path), sv,
					fmt_size(f->min, a, sizeof(a)), fmt_size(f->max, b, sizeof(b)));
		}
		*(uint64_t *)p = x;
		return 0;
	}
	case CF_ENUM: {
		char list[512] = "";

		if (scalar_of(d, v, path, "one word", &sv, err) < 0)
			return -1;
		for (int i = 0; f->names[i]; i++) {
			if (!strcmp(sv, f->names[i])) {
				*(int *)p = i;
				return 0;
			}
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 i ? ", " : "", f->names[i]);
		}
		return cf_error(d, v, err, "%s%sexpected one of %s, got '%s'", P(path), list, sv);
	}
	case CF_STRLIST: {
		struct cf_strlist *l = (struct cf_strlist *)p, nl = { 0 };
		size_t n = cf_seq_len(d, v);

		if (Y(v)->type != YAML_SEQUENCE_NODE)
			return cf_error(d, v, err, "%s%sexpected a list of strings, got %s", P(path), type_word(v));
		nl.v = calloc(n + 1, sizeof(char *));
		if (!nl.v)
			return verr_set(err, "out of memory");
		for (size_t i = 0; i < n; i++) {
			const cf_node *it = cf_seq_at(d, v, i);

			if (!it || visit(d, it, depth + 1, err) < 0 ||
			    scalar_of(d, it, path, "a string", &sv, err) < 0 ||
			    !(nl.v[nl.n++] = strdup(sv))) {
				if (!it)
					cf_error(d, v, err, "%s%sbroken list", P(path));
				free_strlist(&nl);
				return -1;
			}
		}
		free_strlist(l);
		*l = nl;
		return 0;
	}
	case CF_STRMAP: {
		struct cf_strmap *m = (struct cf_strmap *)p, nm = { 0 };
		size_t n;

		if (Y(v)->type != YAML_MAPPING_NODE)
			return cf_error(d, v, err, "%s%sexpected a mapping of names to values, got %s", P(path), type_word(v));
		n = Y(v)->data.mapping.pairs.top - Y(v)->data.mapping.pairs.start;
		nm.key = calloc(n + 1, sizeof(char *));
		nm.val = calloc(n + 1, sizeof(char *));
		if (!nm.key || !nm.val) {
			free(nm.key);
			free(nm.val);
			return verr_set(err, "out of memory");
		}
		for (size_t i = 0; i < n; i++) {
			const yaml_node_pair_t *pr = &Y(v)->data.mapping.pairs.start[i];
			const cf_node *k = node_at(d, pr->key), *val = node_at(d, pr->value);
			const char *ks, *vs;

			if (!k || !val || visit(d, val, depth + 1, err) < 0 ||
			    scalar_of(d, k, path, "a name", &ks, err) < 0 ||
			    scalar_of(d, val, path, "a scalar value", &vs, err) < 0)
				goto map_fail;
			for (size_t j = 0; j < nm.n; j++)
				if (!strcmp(nm.key[j], ks)) {
					cf_error(d, k, err, "%s%skey '%s' appears twice", P(path), ks);
					goto map_fail;
				}
			nm.key[nm.n] = strdup(ks);
			nm.val[nm.n] = strdup(vs);
			nm.n++;
			if (!nm.key[nm.n - 1] || !nm.val[nm.n - 1]) {
				verr_set(err, "out of memory");
				goto map_fail;
			}
			continue;
map_fail:
			free_strmap(&nm);
			return -1;
		}
		free_strmap(m);
		*m = nm;
		return 0;
	}
	case CF_STRUCT:
		return bind_map(d, v, f->sub, p, path, depth + 1, err);
	case CF_LIST: {
		struct cf_list *l = (struct cf_list *)p, nl = { 0 };
		size_t n = cf_seq_len(d, v);

		if (Y(v)->type != YAML_SEQUENCE_NODE)
			return cf_error(d, v, err, "%s%sexpected a list, got %s", P(path), type_word(v));
		nl.v = calloc(n ? n : 1, f->sub->size);
		if (!nl.v)
			return verr_set(err, "out of memory");
		for (size_t i = 0; i < n; i++) {
			char ipath[512];
			const cf_node *it = cf_seq_at(d, v, i);

			snprintf(ipath, sizeof(ipath), "%s[%zu]", path, i);
			nl.n = i + 1;
			if (!it || bind_map(d, it, f->sub, (char *)nl.v + i * f->sub->size,
					    ipath, depth + 1, err) < 0) {
				for (size_t j = 0; j < nl.n; j++)
					cf_release(f->sub, (char *)nl.v + j * f->sub->size);
				free(nl.v);
				return -1;
			}
		}
		if (l->v) {
			for (size_t j = 0; j < l->n; j++)
				cf_release(f->sub, (char *)l->v + j * f->sub->size);
			free(l->v);
		}
		*l = nl;
		return 0;
	}
	case CF_CUSTOM:
		return f->parse(d, v, p, err);
	}
	return verr_set(err, "%s: schema error: unknown kind %d", path, (int)f->kind);
}

static int bind_map(const cf_doc *d, const cf_node *n, const struct cf_schema *s,
		    void *dst, const char *path, int depth, struct verr *err)
{
	size_t nfields = 0, npairs;
	unsigned char seen[128] = { 0 };

	if (visit(d, n, depth, err) < 0)
		return -1;
	if (Y(n)->type != YAML_MAPPING_NODE)
		return cf_error(d, n, err, "%s%sexpected a mapping (key: value lines), got %s", P(path), type_word(n));
	while (s->fields[nfields].key)
		nfields++;
	if (nfields > sizeof(seen))
		return verr_set(err, "schema %s has too many fields", s->name);
	npairs = Y(n)->data.mapping.pairs.top - Y(n)->data.mapping.pairs.start;
	for (size_t i = 0; i < npairs; i++) {
		const yaml_node_pair_t *pr = &Y(n)->data.mapping.pairs.start[i];
		const cf_node *k = node_at(d, pr->key), *v = node_at(d, pr->value);
		const char *ks;
		char fpath[512];
		size_t fi;

		if (!k || !v)
			return cf_error(d, n, err, "%s%sbroken mapping", P(path));
		if (scalar_of(d, k, path, "a key name", &ks, err) < 0)
			return -1;
		for (fi = 0; fi < nfields; fi++)
			if (!strcmp(s->fields[fi].key, ks))
				break;
		if (fi == nfields) {
			char list[700] = "";

			for (size_t j = 0; j < nfields; j++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
					 j ? ", " : "", s->fields[j].key);
			return cf_error(d, k, err, "%s%sunknown key '%.100s' (expected one of: %s)", P(path), ks, list);
		}
		if (seen[fi])
			return cf_error(d, k, err, "%s%skey '%s' appears twice", P(path), ks);
		seen[fi] = 1;
		snprintf(fpath, sizeof(fpath), "%s%s%s", path, *path ? "." : "", ks);
		if (bind_field(d, v, &s->fields[fi], dst, fpath, depth, err) < 0)
			return -1;
	}
	for (size_t fi = 0; fi < nfields; fi++)
		if ((s->fields[fi].flags & CF_REQUIRED) && !seen[fi])
			return cf_error(d, n, err, "%s%smissing required key '%s'",
					path, *path ? ": " : "", s->fields[fi].key);
	return 0;
}

int cf_bind(const cf_doc *d, const cf_node *n, const struct cf_schema *s,
	    void *dst, struct verr *err)
{
	((cf_doc *)d)->visits = 0;
	return bind_map(d, n, s, dst, "", 0, err);
}

int cf_bind_file(const char *path, const struct cf_schema *s, void *dst,
		 struct verr *err)
{
	cf_doc *d;
	int r;

	if (cf_load_file(&d, path, err) < 0)
		return -1;
	r = cf_bind(d, cf_root(d), s, dst, err);
	cf_free_doc(d);
	return r;
}

void cf_release(const struct cf_schema *s, void *dst)
{
	for (const struct cf_field *f = s->fields; f->key; f++) {
		char *p = (char *)dst + f->off;

		switch (f->kind) {
		case CF_STR:
			free(*(char **)p);
			*(char **)p = NULL;
			break;
		case CF_STRLIST:
			free_strlist((struct cf_strlist *)p);
			break;
		case CF_STRMAP:
			free_strmap((struct cf_strmap *)p);
			break;
		case CF_STRUCT:
			cf_release(f->sub, p);
			break;
		case CF_LIST: {
			struct cf_list *l = (struct cf_list *)p;

			for (size_t i = 0; i < l->n; i++)
				cf_release(f->sub, (char *)l->v + i * f->sub->size);
			free(l->v);
			l->v = NULL;
			l->n = 0;
			break;
		}
		case CF_CUSTOM:
			if (f->release)
				f->release(p);
			break;
		default:
			break;
		}
	}
}
