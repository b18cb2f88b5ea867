/*
 * Validated access to a received wire message's fields.  Every getter
 * fails with a message naming the field and what was expected.
 */
#ifndef VHPC_LIB_JF_H
#define VHPC_LIB_JF_H

#include <stdbool.h>
#include <stddef.h>
#include "lib/err.h"

struct json_object;

/* Fields: absent optional ones leave *out untouched and return 0. */
int jf_int(struct json_object *o, const char *key, bool required, long long min, long long max,
	   long long *out, struct verr *err);
int jf_bool(struct json_object *o, const char *key, bool required, bool *out, struct verr *err);
/* A string of at most max bytes without NULs. */
int jf_str(struct json_object *o, const char *key, bool required, size_t max, const char **out,
	   struct verr *err);
/* A string that passes ident_ok(s, max). */
int jf_ident(struct json_object *o, const char *key, bool required, size_t max, const char **out,
	     struct verr *err);
/* An array of at most max entries / an object. */
int jf_array(struct json_object *o, const char *key, bool required, size_t max,
	     struct json_object **out, struct verr *err);
int jf_object(struct json_object *o, const char *key, bool required, struct json_object **out,
	      struct verr *err);
/* Fails on a key not in allowed (NULL-terminated); "v" and "type" are always allowed. */
int jf_only(struct json_object *o, const char *what, const char *const *allowed, struct verr *err);
/* A NULL-terminated vector of strdup'd strings from an array of strings
 * (at most max entries of at most maxlen bytes each); free with jf_strv_free. */
int jf_strv(struct json_object *o, const char *key, bool required, size_t max, size_t maxlen,
	    char ***out, size_t *n, struct verr *err);
void jf_strv_free(char **v);

#endif
