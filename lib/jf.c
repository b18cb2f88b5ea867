/*
 * Getters that check every field a peer sends, naming the field when it is wrong.
 */
#include "lib/jf.h"
#include "lib/err.h"
#include "lib/parse.h"

#include <json-c/json.h>
#include <string.h>

/* ------------------------------------------------------------- fields */

static struct json_object *field(struct json_object *o, const char *key, bool required,
				 int *rc, struct verr *err)
{
	struct json_object *v;

	*rc = 0;
	if (!json_object_object_get_ex(o, key, &v) || !v) {
		if (required)
			*rc = verr_set(err, "missing \"%s\"", key);
		return NULL;
	}
	return v;
}

int jf_int(struct json_object *o, const char *key, bool required, long long min, long long max,
	   long long *out, struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);
	int64_t n;

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_int))
		return verr_set(err, "\"%s\": expected an integer", key);
	n = json_object_get_int64(v);
	/* json-c saturates; the bounds used are far inside int64. */
	if (n < min || n > max)
		return verr_set(err, "\"%s\": %lld is outside %lld..%lld", key, (long long)n, min, max);
	*out = n;
	return 0;
}

int jf_bool(struct json_object *o, const char *key, bool required, bool *out, struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_boolean))
		return verr_set(err, "\"%s\": expected true or false", key);
	*out = json_object_get_boolean(v);
	return 0;
}

int jf_str(struct json_object *o, const char *key, bool required, size_t max, const char **out,
	   struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);
	const char *s;

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_string))
		return verr_set(err, "\"%s\": expected a string", key);
	s = json_object_get_string(v);
	if ((size_t)json_object_get_string_len(v) != strlen(s))
		return verr_set(err, "\"%s\": contains a NUL character", key);
	if (strlen(s) > max)
		return verr_set(err, "\"%s\": longer than %zu bytes", key, max);
	*out = s;
	return 0;
}

int jf_ident(struct json_object *o, const char *key, bool required, size_t max, const char **out,
	     struct verr *err)
{
	const char *s = NULL;

	if (jf_str(o, key, required, max, &s, err) < 0)
		return -1;
	if (!s)
		return 0;
	if (!ident_ok(s, max))
		return verr_set(err, "\"%s\": '%.40s' is not a plain name (letters, digits, '.', '_', '-')", key, s);
	*out = s;
	return 0;
}

int jf_array(struct json_object *o, const char *key, bool required, size_t max,
	     struct json_object **out, struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_array))
		return verr_set(err, "\"%s\": expected an array", key);
	if (json_object_array_length(v) > max)
		return verr_set(err, "\"%s\": %zu entries; at most %zu", key,
				json_object_array_length(v), max);
	*out = v;
	return 0;
}

int jf_object(struct json_object *o, const char *key, bool required, struct json_object **out,
	      struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_object))
		return verr_set(err, "\"%s\": expected an object", key);
	*out = v;
	return 0;
}

int jf_only(struct json_object *o, const char *what, const char *const *allowed, struct verr *err)
{
	json_object_object_foreach(o, key, val) {
		bool ok = !strcmp(key, "v") || !strcmp(key, "type");

		(void)val;
		for (const char *const *a = allowed; !ok && a && *a; a++)
			ok = !strcmp(*a, key);
		if (!ok)
			return verr_set(err, "%s: unknown field \"%.40s\"", what, key);
	}
	return 0;
}

void jf_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

int jf_strv(struct json_object *o, const char *key, bool required, size_t max, size_t maxlen,
	    char ***out, size_t *n, struct verr *err)
{
	struct json_object *a = NULL;
	size_t len;
	char **v;

	if (jf_array(o, key, required, max, &a, err) < 0)
		return -1;
	if (!a)
		return 0;
	len = json_object_array_length(a);
	v = calloc(len + 1, sizeof(*v));
	if (!v)
		return verr_set(err, "out of memory");
	for (size_t i = 0; i < len; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *s;

		if (!json_object_is_type(e, json_type_string)) {
			jf_strv_free(v);
			return verr_set(err, "\"%s\"[%zu]: expected a string", key, i);
		}
		s = json_object_get_string(e);
		if ((size_t)json_object_get_string_len(e) != strlen(s) || strlen(s) > maxlen) {
			jf_strv_free(v);
			return verr_set(err, "\"%s\"[%zu]: contains a NUL or is longer than %zu bytes", key, i, maxlen);
		}
		if (!(v[i] = strdup(s))) {
			jf_strv_free(v);
			return verr_set(err, "out of memory");
		}
	}
	*out = v;
	if (n)
		*n = len;
	return 0;
}
