/* Image objects on the wire: sha256 lists and object parts (imgwire.h). */
#include "lib/err.h"
#include "lib/imgwire.h"
#include "lib/jf.h"

#include <json-c/json.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void image_chunks_free(struct image_chunk *c, int n)
{
	for (int i = 0; c && i < n; i++)
		free(c[i].data);
	free(c);
}

static bool sha_ok(const char *s, size_t len)
{
	if (len != 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int imgwire_shas(struct json_object *o, const char *key, bool required, int max, char (**out)[65], int *n,
		 struct verr *err)
{
	struct json_object *a = NULL;

	*out = NULL;
	*n = 0;
	if (jf_array(o, key, required, (size_t)max, &a, err) < 0)
		return -1;
	if (!a)
		return 0;
	*n = (int)json_object_array_length(a);
	if (required && *n < 1)
		return verr_set(err, "\"%s\": names no object", key);
	if (!(*out = calloc(*n ? *n : 1, sizeof(**out))))
		return verr_set(err, "out of memory");
	for (int i = 0; i < *n; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);

		if (!json_object_is_type(e, json_type_string) ||
		    !sha_ok(json_object_get_string(e), (size_t)json_object_get_string_len(e))) {
			free(*out);
			*out = NULL;
			*n = 0;
			return verr_set(err, "\"%s\"[%d]: expected a sha256 (64 lowercase hex digits)", key, i);
		}
		memcpy((*out)[i], json_object_get_string(e), 65);
	}
	return 0;
}

int imgwire_parts(struct json_object *o, const char *key, int max_parts, size_t max_bytes,
		  struct image_chunk **out, int *n, struct verr *err)
{
	static const char *const f[] = { "object", "size", "offset", "data", NULL };
	struct json_object *a;
	struct image_chunk *v;
	size_t total = 0;
	int cnt;

	*out = NULL;
	*n = 0;
	if (jf_array(o, key, true, (size_t)max_parts, &a, err) < 0)
		return -1;
	cnt = (int)json_object_array_length(a);
	if (!(v = calloc(cnt ? cnt : 1, sizeof(*v))))
		return verr_set(err, "out of memory");
	for (int i = 0; i < cnt; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *obj, *data;
		long long size, off;
		size_t b64len, cap;

		if (!json_object_is_type(e, json_type_object) || jf_only(e, "part", f, err) < 0 ||
		    jf_str(e, "object", true, 64, &obj, err) < 0 ||
		    jf_int(e, "size", true, 0, (long long)IMGWIRE_OBJECT_MAX, &size, err) < 0 ||
		    jf_int(e, "offset", true, 0, (long long)IMGWIRE_OBJECT_MAX, &off, err) < 0 ||
		    jf_str(e, "data", true, sodium_base64_ENCODED_LEN(max_bytes, sodium_base64_VARIANT_URLSAFE),
			   &data, err) < 0) {
			if (!json_object_is_type(e, json_type_object))
				verr_set(err, "expected an object");
			goto fail;
		}
		if (!sha_ok(obj, strlen(obj))) {
			verr_set(err, "\"object\": expected a sha256 (64 lowercase hex digits)");
			goto fail;
		}
		memcpy(v[i].object, obj, 65);
		v[i].size = (uint64_t)size;
		v[i].offset = (uint64_t)off;
		b64len = strlen(data);
		cap = b64len / 4 * 3 + 3;
		if (!(v[i].data = malloc(cap))) {
			verr_set(err, "out of memory");
			goto fail;
		}
		if (sodium_base642bin(v[i].data, cap, data, b64len, NULL, &v[i].len, NULL,
				      sodium_base64_VARIANT_URLSAFE) != 0) {
			verr_set(err, "\"data\": not base64");
			goto fail;
		}
		total += v[i].len;
		if (total > max_bytes) {
			verr_set(err, "more than %zu bytes of data in all", max_bytes);
			goto fail;
		}
		if (v[i].offset > v[i].size || v[i].len > v[i].size - v[i].offset) {
			verr_set(err, "%zu bytes at %llu run past the object's size %llu", v[i].len,
				 (unsigned long long)v[i].offset, (unsigned long long)v[i].size);
			goto fail;
		}
		continue;
fail:
		image_chunks_free(v, i + 1);
		return verr_wrap(err, "\"%s\"[%d]", key, i);
	}
	*out = v;
	*n = cnt;
	return 0;
}

struct json_object *imgwire_part(const char *object, uint64_t size, uint64_t offset, const uint8_t *data,
				 size_t len)
{
	struct json_object *o = json_object_new_object();
	size_t blen = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_URLSAFE);
	char *b64 = malloc(blen);

	if (!b64) {
		json_object_put(o);
		return NULL;
	}
	sodium_bin2base64(b64, blen, data, len, sodium_base64_VARIANT_URLSAFE);
	json_object_object_add(o, "object", json_object_new_string(object));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)size));
	json_object_object_add(o, "offset", json_object_new_int64((int64_t)offset));
	json_object_object_add(o, "data", json_object_new_string(b64));
	free(b64);
	return o;
}

struct json_object *imgwire_sha_array(const char *const *v, int n)
{
	struct json_object *a = json_object_new_array();

	for (int i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}
