/*
 * Config: YAML (libyaml) bound to C structs through a schema table; every
 * error names file:line:column and what was expected.
 */
#ifndef VHPC_LIB_CONFIG_H
#define VHPC_LIB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include "lib/err.h"

/*
 * A loaded YAML document.  Nodes are only valid while the document lives.
 * Documents are capped in size and in the number of nodes a bind may visit,
 * so hostile files (alias bombs, recursive anchors) fail with an error.
 */
typedef struct cf_doc cf_doc;
typedef struct cf_node cf_node;

#define CF_MAX_FILE (4u << 20)

int cf_load_file(cf_doc **out, const char *path, struct verr *err);
int cf_load_string(cf_doc **out, const char *name, const char *buf,
		   size_t len, struct verr *err);
void cf_free_doc(cf_doc *d);
const cf_node *cf_root(const cf_doc *d);

enum cf_kind {
	CF_STR = 1,   /* char *            any scalar */
	CF_INT,       /* long long         integer within [min,max] */
	CF_BOOL,      /* bool              true/false/yes/no/on/off */
	CF_SIZE,      /* uint64_t          "512M", "2GiB", "4096" within [min,max] */
	CF_ENUM,      /* int               index into names[] */
	CF_STRLIST,   /* struct cf_strlist sequence of scalars */
	CF_STRMAP,    /* struct cf_strmap  mapping of scalar -> scalar */
	CF_STRUCT,    /* nested struct described by sub */
	CF_LIST,      /* struct cf_list    sequence of sub structs */
	CF_CUSTOM,    /* parse() decides; it gets the node */
};

#define CF_REQUIRED 1u

struct cf_strlist { char **v; size_t n; };
struct cf_strmap  { char **key; char **val; size_t n; };
struct cf_list    { void *v; size_t n; };

struct cf_schema;
struct cf_field {
	const char *key;
	enum cf_kind kind;
	size_t off;
	unsigned flags;
	long long min, max;          /* CF_INT, CF_SIZE: both 0 means unbounded */
	const char *const *names;    /* CF_ENUM, NULL-terminated */
	const struct cf_schema *sub; /* CF_STRUCT, CF_LIST */
	int (*parse)(const cf_doc *d, const cf_node *n, void *dst, struct verr *err);
	void (*release)(void *dst);  /* CF_CUSTOM: frees what parse made */
	const char *what;            /* words for "expected ..." in errors */
};

struct cf_schema {
	const char *name;            /* for messages: "cluster", "job" */
	size_t size;                 /* sizeof the bound struct */
	const struct cf_field *fields; /* terminated by a field with key == NULL */
};

/* Binds a mapping node to dst (zeroed by the caller or holding defaults).
 * Unknown keys, wrong types and missing required keys are errors. */
int cf_bind(const cf_doc *d, const cf_node *n, const struct cf_schema *s,
	    void *dst, struct verr *err);
/* Loads a file and binds its root. */
int cf_bind_file(const char *path, const struct cf_schema *s, void *dst,
		 struct verr *err);
/* Frees what cf_bind allocated inside dst (not dst itself). */
void cf_release(const struct cf_schema *s, void *dst);

/* Node access for CF_CUSTOM parsers.  Each *_as function fails with a
 * message that names file:line:column of the node. */
enum cf_node_type { CF_NODE_SCALAR = 1, CF_NODE_SEQ, CF_NODE_MAP };
enum cf_node_type cf_node_type(const cf_node *n);
const char *cf_scalar(const cf_node *n);          /* NULL unless scalar */
size_t cf_seq_len(const cf_doc *d, const cf_node *n);
const cf_node *cf_seq_at(const cf_doc *d, const cf_node *n, size_t i);
const cf_node *cf_map_get(const cf_doc *d, const cf_node *n, const char *key);
/* "file:line:col" of the node, into buf. */
const char *cf_where(const cf_doc *d, const cf_node *n, char *buf, size_t len);
/* Sets err to "file:line:col: <fmt>" and returns -1. */
int cf_error(const cf_doc *d, const cf_node *n, struct verr *err,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
