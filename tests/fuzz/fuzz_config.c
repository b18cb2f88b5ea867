/* Feeds arbitrary bytes to the YAML loader and a schema with every kind. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lib/config.h"
#include "lib/err.h"

struct inner { char *s; long long i; struct cf_list kids; };
static const struct cf_schema inner_schema;
static const struct cf_field inner_fields[] = {
	{ .key = "s", .kind = CF_STR, .off = offsetof(struct inner, s) },
	{ .key = "i", .kind = CF_INT, .off = offsetof(struct inner, i), .min = -5, .max = 5 },
	{ .key = "kids", .kind = CF_LIST, .off = offsetof(struct inner, kids), .sub = &inner_schema },
	{ 0 }
};
static const struct cf_schema inner_schema = { "inner", sizeof(struct inner), inner_fields };

struct outer {
	char *name; long long n; bool b; uint64_t sz; int e;
	struct cf_strlist l; struct cf_strmap m; struct inner in; struct cf_list list;
};
static const char *const names[] = { "a", "b", NULL };
static const struct cf_field outer_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = offsetof(struct outer, name), .flags = CF_REQUIRED },
	{ .key = "n", .kind = CF_INT, .off = offsetof(struct outer, n) },
	{ .key = "b", .kind = CF_BOOL, .off = offsetof(struct outer, b) },
	{ .key = "sz", .kind = CF_SIZE, .off = offsetof(struct outer, sz), .min = 1, .max = 1 << 30 },
	{ .key = "e", .kind = CF_ENUM, .off = offsetof(struct outer, e), .names = names },
	{ .key = "l", .kind = CF_STRLIST, .off = offsetof(struct outer, l) },
	{ .key = "m", .kind = CF_STRMAP, .off = offsetof(struct outer, m) },
	{ .key = "in", .kind = CF_STRUCT, .off = offsetof(struct outer, in), .sub = &inner_schema },
	{ .key = "list", .kind = CF_LIST, .off = offsetof(struct outer, list), .sub = &inner_schema },
	{ 0 }
};
static const struct cf_schema outer_schema = { "outer", sizeof(struct outer), outer_fields };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct verr err;
	struct outer o;
	cf_doc *d;

	if (cf_load_string(&d, "fuzz.yaml", (const char *)data, size, &err) < 0)
		return 0;
	memset(&o, 0, sizeof(o));
	cf_bind(d, cf_root(d), &outer_schema, &o, &err);
	cf_release(&outer_schema, &o);
	cf_free_doc(d);
	return 0;
}
