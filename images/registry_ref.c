/*
 * What a registry pull is told and told back: the image reference an admin
 * gives, and the manifest the registry sends.  Both are checked here, with
 * no I/O, before skopeo fetches a layer: the manifest says how many blobs
 * of what size will come, so a registry that would send too much is
 * refused before it sends anything (skopeo then holds every blob to its
 * size and digest).
 */
#include "lib/err.h"
#include "images/registry_int.h"

#include <ctype.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool image_reg_digest_ok(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) || strlen(d) != 71)
		return false;
	for (const char *c = d + 7; *c; c++)
		if (!isdigit((unsigned char)*c) && !(*c >= 'a' && *c <= 'f'))
			return false;
	return true;
}

/* host[:port], where docker's rule takes it for a registry at all: a dot,
 * a port or localhost.  Anything else would be docker.io's library, which
 * no site means to reach by accident. */
static int check_registry(const char *src, const char *h, struct verr *err)
{
	const char *colon = strchr(h, ':');
	size_t hl = colon ? (size_t)(colon - h) : strlen(h);

	if (!hl || hl > 253 || h[0] == '-' || h[0] == '.')
		return verr_set(err, "%s: '%s' is not a registry host", src, h);
	for (size_t i = 0; i < hl; i++)
		if (!isalnum((unsigned char)h[i]) && h[i] != '.' && h[i] != '-')
			return verr_set(err, "%s: '%s' is not a registry host (letters, digits, '.' and '-', then :PORT)",
					src, h);
	if (colon) {
		char *end;
		long port = strtol(colon + 1, &end, 10);

		if (!isdigit((unsigned char)colon[1]) || *end || port < 1 || port > 65535)
			return verr_set(err, "%s: '%s' is not a port", src, colon + 1);
	} else if (!memchr(h, '.', hl) && strcmp(h, "localhost")) {
		return verr_set(err, "%s: name the registry (docker://REGISTRY/REPO:TAG, e.g. docker.io/library/debian:12): "
				"'%s' is not a host name", src, h);
	}
	return 0;
}

/* Components of lowercase letters and digits, joined by '.', '_' or '-'
 * inside a component and '/' between them. */
static int check_repo(const char *src, const char *p, struct verr *err)
{
	size_t n = strlen(p);

	if (!n || n > 255)
		return verr_set(err, "%s: no repository, or one longer than 255 characters", src);
	for (size_t i = 0; i < n; i++) {
		char c = p[i], prev = i ? p[i - 1] : '/', next = i + 1 < n ? p[i + 1] : '/';
		bool alnum = (c >= 'a' && c <= 'z') || isdigit((unsigned char)c);

		if (alnum)
			continue;
		if (!strchr("._-/", c))
			return verr_set(err, "%s: the repository '%s' has '%c': lowercase letters, digits, '.', '_', '-' and '/' only",
					src, p, c);
		if (strchr("._-/", prev) && !(c == '_' && prev == '_') && !(c == '-' && prev == '-'))
			return verr_set(err, "%s: the repository '%s' has an empty or badly joined component", src, p);
		if (next == '/')
			return verr_set(err, "%s: the repository '%s' has an empty or badly joined component", src, p);
	}
	return 0;
}

static int check_tag(const char *src, const char *t, struct verr *err)
{
	size_t n = strlen(t);

	if (!n || n > 128 || t[0] == '.' || t[0] == '-')
		return verr_set(err, "%s: '%s' is not a tag (1 to 128 of letters, digits, '_', '.', '-'; not first '.' or '-')",
				src, t);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)t[i]) && !strchr("_.-", t[i]))
			return verr_set(err, "%s: '%s' is not a tag", src, t);
	return 0;
}

int image_reg_ref_parse(const char *src, struct image_reg_ref *r, struct verr *err)
{
	char buf[700], *slash, *at, *colon, *rest;

	memset(r, 0, sizeof(*r));
	if (strncmp(src, "docker://", 9))
		return verr_set(err, "'%.200s' is not docker://REGISTRY/REPO:TAG", src);
	if (strlen(src + 9) >= sizeof(buf))
		return verr_set(err, "%.200s...: the reference is too long", src);
	snprintf(buf, sizeof(buf), "%s", src + 9);
	if (!(slash = strchr(buf, '/')))
		return verr_set(err, "%s: expected docker://REGISTRY/REPO:TAG or docker://REGISTRY/REPO@sha256:DIGEST", src);
	*slash = 0;
	rest = slash + 1;
	if (strlen(buf) >= sizeof(r->registry) || check_registry(src, buf, err) < 0)
		return strlen(buf) >= sizeof(r->registry) ? verr_set(err, "%s: the registry name is too long", src) : -1;
	snprintf(r->registry, sizeof(r->registry), "%s", buf);
	if ((at = strchr(rest, '@'))) {
		*at = 0;
		if (!image_reg_digest_ok(at + 1))
			return verr_set(err, "%s: '%s' is not a digest (sha256: and 64 lowercase hex digits)", src, at + 1);
		snprintf(r->digest, sizeof(r->digest), "%s", at + 1);
	}
	colon = strrchr(rest, ':');
	if (colon && strchr(colon, '/'))
		colon = NULL;
	if (colon) {
		*colon = 0;
		if (at)
			return verr_set(err, "%s: a tag and a digest: give one (skopeo takes one)", src);
		if (check_tag(src, colon + 1, err) < 0)
			return -1;
		snprintf(r->tag, sizeof(r->tag), "%s", colon + 1);
	}
	if (!r->tag[0] && !r->digest[0])
		return verr_set(err, "%s: give a :TAG or an @sha256:DIGEST (an import names what it pins)", src);
	if (check_repo(src, rest, err) < 0)
		return -1;
	snprintf(r->repo, sizeof(r->repo), "%s", rest);
	return 0;
}

void image_reg_ref_pinned(const struct image_reg_ref *r, const char *digest, char *out, size_t len)
{
	snprintf(out, len, "docker://%s/%s@%s", r->registry, r->repo, digest);
}

/* ------------------------------------------------------------ manifests */

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
	       ? json_object_get_string(v) : NULL;
}

/* A descriptor: digest and size, the size at most max. */
static int blob_of(struct json_object *o, const char *where, uint64_t max, struct image_reg_blob *b, struct verr *err)
{
	const char *d = o && json_object_is_type(o, json_type_object) ? jstr(o, "digest") : NULL;
	struct json_object *s;
	int64_t size;

	if (!d)
		return verr_set(err, "the manifest's %s has no digest", where);
	if (!image_reg_digest_ok(d))
		return verr_set(err, "the manifest's %s has digest '%.80s': only sha256 digests are taken", where, d);
	if (!json_object_object_get_ex(o, "size", &s) || !json_object_is_type(s, json_type_int))
		return verr_set(err, "the manifest's %s has no size", where);
	size = json_object_get_int64(s);
	if (size < 0 || (uint64_t)size > max)
		return verr_set(err, "the manifest's %s is %lld bytes: more than the %llu a pull takes", where, (long long)size,
				(unsigned long long)max);
	snprintf(b->digest, sizeof(b->digest), "%s", d);
	b->size = (uint64_t)size;
	return 0;
}

static bool is_manifest_type(const char *t)
{
	return t && (!strcmp(t, "application/vnd.oci.image.manifest.v1+json") ||
		     !strcmp(t, "application/vnd.docker.distribution.manifest.v2+json"));
}

static int parse_index(struct json_object *list, const char *arch, struct image_reg_manifest *m, struct verr *err)
{
	size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
	char seen[200] = "";

	if (!n || n > IMAGE_REG_MAX_INDEX)
		return verr_set(err, "the image index lists %zu manifests (1 to %u taken)", n, IMAGE_REG_MAX_INDEX);
	m->index = true;
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(list, i), *p;
		const char *os = NULL, *a = NULL;
		char where[48];

		if (json_object_is_type(e, json_type_object) && json_object_object_get_ex(e, "platform", &p) &&
		    json_object_is_type(p, json_type_object)) {
			os = jstr(p, "os");
			a = jstr(p, "architecture");
		}
		if (!os || !a)
			continue;
		if (strlen(seen) < sizeof(seen) - 40)
			snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%s%.16s/%.16s", seen[0] ? ", " : "", os, a);
		if (strcmp(os, "linux") || strcmp(a, arch))
			continue;
		snprintf(where, sizeof(where), "index entry %zu", i + 1);
		if (!is_manifest_type(jstr(e, "mediaType")))
			return verr_set(err, "the image index's linux/%s entry is not an image manifest", arch);
		return blob_of(e, where, IMAGE_REG_MAX_MANIFEST, &m->instance, err);
	}
	return verr_set(err, "the image index has no linux/%s image (it has: %s)", arch, seen[0] ? seen : "no platforms");
}

static int check_layer_type(const char *t, size_t i, struct verr *err)
{
	static const char *const ok[] = {
		"application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.v1.tar+gzip",
		"application/vnd.oci.image.layer.v1.tar+zstd", "application/vnd.docker.image.rootfs.diff.tar.gzip", NULL
	};

	if (!t)
		return verr_set(err, "the manifest's layer %zu has no mediaType", i + 1);
	for (int k = 0; ok[k]; k++)
		if (!strcmp(t, ok[k]))
			return 0;
	if (strstr(t, "foreign") || strstr(t, "nondistributable"))
		return verr_set(err, "the manifest's layer %zu is a foreign layer (%.100s), fetched from elsewhere: not taken",
				i + 1, t);
	return verr_set(err, "the manifest's layer %zu is of type '%.100s', not a tar layer", i + 1, t);
}

static int parse_image(struct json_object *o, struct image_reg_manifest *m, struct verr *err)
{
	struct json_object *cfg = NULL, *layers = NULL;
	size_t n;

	if (!json_object_object_get_ex(o, "config", &cfg) || blob_of(cfg, "config", IMAGE_REG_MAX_MANIFEST * 4ull,
								       &m->config, err) < 0)
		return cfg ? -1 : verr_set(err, "the manifest has no config");
	if (!json_object_object_get_ex(o, "layers", &layers) || !json_object_is_type(layers, json_type_array))
		return verr_set(err, "the manifest has no list of layers");
	n = json_object_array_length(layers);
	if (!n || n > IMAGE_REG_MAX_LAYERS)
		return verr_set(err, "the manifest lists %zu layers (1 to %u taken)", n, IMAGE_REG_MAX_LAYERS);
	if (!(m->layers = calloc(n, sizeof(*m->layers))))
		return verr_set(err, "out of memory");
	m->largest = m->config.size;
	for (size_t i = 0; i < n; i++) {
		struct json_object *l = json_object_array_get_idx(layers, i);
		char where[32];

		snprintf(where, sizeof(where), "layer %zu", i + 1);
		if (blob_of(l, where, IMAGE_REG_MAX_BLOB, &m->layers[i], err) < 0 ||
		    check_layer_type(jstr(l, "mediaType"), i, err) < 0)
			return -1;
		m->nlayers++;
		m->total += m->layers[i].size;
		if (m->layers[i].size > m->largest)
			m->largest = m->layers[i].size;
		if (m->total > IMAGE_REG_MAX_TOTAL)
			return verr_set(err, "the manifest's layers come to more than %llu bytes by layer %zu",
					(unsigned long long)IMAGE_REG_MAX_TOTAL, i + 1);
	}
	return 0;
}

int image_reg_manifest_parse(const char *text, size_t len, const char *arch, struct image_reg_manifest *m,
			     struct verr *err)
{
	struct json_tokener *tok;
	struct json_object *o, *v, *list;
	const char *type;
	int r;

	memset(m, 0, sizeof(*m));
	if (len > IMAGE_REG_MAX_MANIFEST)
		return verr_set(err, "the manifest is %zu bytes (at most %u taken)", len, IMAGE_REG_MAX_MANIFEST);
	if (!(tok = json_tokener_new()))
		return verr_set(err, "out of memory");
	o = json_tokener_parse_ex(tok, text, (int)len);
	if (o && tok->char_offset < (int)len) {
		for (size_t i = (size_t)tok->char_offset; i < len && o; i++)
			if (!isspace((unsigned char)text[i])) {
				json_object_put(o);
				o = NULL;
			}
	}
	json_tokener_free(tok);
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return verr_set(err, "the manifest is not a JSON object");
	}
	if (!json_object_object_get_ex(o, "schemaVersion", &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) != 2) {
		json_object_put(o);
		return verr_set(err, "the manifest is not of schema version 2 (Docker schema 1 images are not taken)");
	}
	type = jstr(o, "mediaType");
	if (json_object_object_get_ex(o, "manifests", &list))
		r = type && strcmp(type, "application/vnd.oci.image.index.v1+json") &&
			strcmp(type, "application/vnd.docker.distribution.manifest.list.v2+json")
		    ? verr_set(err, "the manifest lists manifests but is of type '%.100s'", type)
		    : parse_index(list, arch, m, err);
	else if (type && !is_manifest_type(type))
		r = verr_set(err, "the manifest is of type '%.100s', not an image's", type);
	else
		r = parse_image(o, m, err);
	json_object_put(o);
	if (r < 0)
		image_reg_manifest_free(m);
	return r;
}

void image_reg_manifest_free(struct image_reg_manifest *m)
{
	free(m->layers);
	m->layers = NULL;
	m->nlayers = 0;
}
