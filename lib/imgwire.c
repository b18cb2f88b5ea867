/* Image objects on the wire: sha256 lists and object parts (imgwire.h). */
#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/imgwire.h"
#include "lib/jf.h"
#include "lib/wire.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void image_chunks_free(struct image_chunk *c, int n)
{
	for (int i = 0; c && i < n; i++)
		free(c[i].data);
	free(c);
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

		if (!json_object_is_type(e, json_type_string) || !sha256_hex_ok(json_object_get_string(e)) ||
		    json_object_get_string_len(e) != 64) {
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
	static const char *const f[] = { "object", "size", "offset", "len", NULL };
	struct json_object *a, *d = NULL;
	struct image_chunk *v;
	const char *data = "";
	size_t total = 0, have = 0;
	int cnt;

	*out = NULL;
	*n = 0;
	if (jf_array(o, key, true, (size_t)max_parts, &a, err) < 0)
		return -1;
	if (json_object_object_get_ex(o, WIRE_DATA, &d)) {
		if (!json_object_is_type(d, json_type_string))
			return verr_set(err, "\"%s\": expected the message's data", WIRE_DATA);
		data = json_object_get_string(d);
		have = (size_t)json_object_get_string_len(d);
	}
	if (have > max_bytes)
		return verr_set(err, "%zu bytes of data, more than %zu", have, max_bytes);
	cnt = (int)json_object_array_length(a);
	if (!(v = calloc(cnt ? cnt : 1, sizeof(*v))))
		return verr_set(err, "out of memory");
	for (int i = 0; i < cnt; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *obj;
		long long size, off, len;

		if (!json_object_is_type(e, json_type_object) || jf_only(e, "part", f, err) < 0 ||
		    jf_str(e, "object", true, 64, &obj, err) < 0 ||
		    jf_int(e, "size", true, 0, (long long)IMGWIRE_OBJECT_MAX, &size, err) < 0 ||
		    jf_int(e, "offset", true, 0, (long long)IMGWIRE_OBJECT_MAX, &off, err) < 0 ||
		    jf_int(e, "len", true, 0, (long long)max_bytes, &len, err) < 0) {
			if (!json_object_is_type(e, json_type_object))
				verr_set(err, "expected an object");
			goto fail;
		}
		if (!sha256_hex_ok(obj)) {
			verr_set(err, "\"object\": expected a sha256 (64 lowercase hex digits)");
			goto fail;
		}
		if (off > size || len > size - off) {
			verr_set(err, "%lld bytes at %lld run past the object's size %lld", len, off, size);
			goto fail;
		}
		if ((size_t)len > have - total) {
			verr_set(err, "the parts hold more bytes than the message's data (%zu)", have);
			goto fail;
		}
		memcpy(v[i].object, obj, 65);
		v[i].size = (uint64_t)size;
		v[i].offset = (uint64_t)off;
		v[i].len = (size_t)len;
		if (!(v[i].data = malloc(v[i].len + 1))) {
			verr_set(err, "out of memory");
			goto fail;
		}
		memcpy(v[i].data, data + total, v[i].len);
		total += v[i].len;
		continue;
fail:
		image_chunks_free(v, i + 1);
		return verr_wrap(err, "\"%s\"[%d]", key, i);
	}
	if (total != have) {
		image_chunks_free(v, cnt);
		return verr_set(err, "\"%s\": the parts hold %zu bytes of the message's %zu", key, total, have);
	}
	*out = v;
	*n = cnt;
	return 0;
}

struct json_object *imgwire_part(const char *object, uint64_t size, uint64_t offset, size_t len)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "object", json_object_new_string(object));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)size));
	json_object_object_add(o, "offset", json_object_new_int64((int64_t)offset));
	json_object_object_add(o, "len", json_object_new_int64((int64_t)len));
	return o;
}

struct json_object *imgwire_sha_array(const char *const *v, int n)
{
	struct json_object *a = json_object_new_array();

	for (int i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}
