/* What a registry pull is given and sent, checked before anything is
 * fetched: references (a registry named, never docker.io implied; a tag or
 * a digest, not both), and manifests a hostile registry could send (too
 * many layers, blobs too big, digests not sha256, foreign layers, schema
 * 1, an index without this host's platform, trailing bytes).  The layer
 * cache: made private, refused as a symlink, trimmed oldest first. */
#include "lib/err.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"
#include "images/registry_int.h"

#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define DG "sha256:" H64
#define HA "a123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HB "b123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HC "c123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void refs(void **state)
{
	struct image_reg_ref r;
	struct verr e;
	static const struct {
		const char *src, *msg;
	} bad[] = {
		{ "docker://debian:12", "expected docker://REGISTRY/REPO" },
		{ "docker://library/debian:12", "name the registry" },
		{ "docker://reg.example/debian", "give a :TAG or an @sha256:DIGEST" },
		{ "docker://reg.example/debian:12@" DG, "a tag and a digest" },
		{ "docker://reg.example/debian@sha256:abc", "is not a digest" },
		{ "docker://reg.example/debian@sha512:" H64, "is not a digest" },
		{ "docker://reg.example/Debian:12", "has 'D'" },
		{ "docker://reg.example/a//b:1", "empty or badly joined" },
		{ "docker://reg.example/a/:1", "empty or badly joined" },
		{ "docker://reg.example/a-:1", "empty or badly joined" },
		{ "docker://reg.example/a:-x", "is not a tag" },
		{ "docker://reg.example/a:x$y", "is not a tag" },
		{ "docker://reg.example:0/a:1", "is not a port" },
		{ "docker://reg.example:99999/a:1", "is not a port" },
		{ "docker://reg_x.example/a:1", "is not a registry host" },
		{ "docker://-reg.example/a:1", "is not a registry host" },
		{ "oci:/tmp/x", "is not docker://" },
	};

	(void)state;
	assert_int_equal(image_reg_ref_parse("docker://127.0.0.1:5000/vhpc/hello:1", &r, &e), 0);
	assert_string_equal(r.registry, "127.0.0.1:5000");
	assert_string_equal(r.repo, "vhpc/hello");
	assert_string_equal(r.tag, "1");
	assert_string_equal(r.digest, "");
	assert_int_equal(image_reg_ref_parse("docker://localhost/a__b.c-d/e@" DG, &r, &e), 0);
	assert_string_equal(r.repo, "a__b.c-d/e");
	assert_string_equal(r.digest, DG);
	assert_int_equal(image_reg_ref_parse("docker://reg.example/debian:bookworm-20240101_x.1", &r, &e), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e.msg[0] = 0;
		assert_int_equal(image_reg_ref_parse(bad[i].src, &r, &e), -1);
		if (!strstr(e.msg, bad[i].msg))
			fail_msg("%s: '%s' lacks '%s'", bad[i].src, e.msg, bad[i].msg);
	}
}

static int parse(const char *text, struct image_reg_manifest *m, struct verr *e)
{
	return image_reg_manifest_parse(text, strlen(text), "amd64", m, e);
}

#define LAYER(size) "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" DG "\",\"size\":" #size "}"
#define CONFIG "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" DG "\",\"size\":10}"

static void manifests(void **state)
{
	struct image_reg_manifest m;
	struct verr e;
	char *many;
	size_t len;

	(void)state;
	assert_int_equal(parse("{\"schemaVersion\":2," CONFIG ",\"layers\":[" LAYER(5) "," LAYER(7) "]}", &m, &e), 0);
	assert_false(m.index);
	assert_int_equal(m.nlayers, 2);
	assert_int_equal(m.total, 12);
	assert_int_equal(m.largest, 10);
	image_reg_manifest_free(&m);

	/* an index: this host's entry */
	assert_int_equal(parse("{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":["
			       "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:" H64 "\","
			       "\"size\":300,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
			       "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" DG "\","
			       "\"size\":400,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}", &m, &e), 0);
	assert_true(m.index);
	assert_int_equal(m.instance.size, 400);
	image_reg_manifest_free(&m);
	assert_int_equal(parse("{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
			       "\"digest\":\"" DG "\",\"size\":3,\"platform\":{\"os\":\"linux\",\"architecture\":\"s390x\"}}]}",
			       &m, &e), -1);
	assert_non_null(strstr(e.msg, "no linux/amd64 image (it has: linux/s390x)"));

	/* too many layers */
	many = malloc(IMAGE_REG_MAX_LAYERS * 200 + 400);
	len = (size_t)sprintf(many, "{\"schemaVersion\":2," CONFIG ",\"layers\":[");
	for (unsigned i = 0; i <= IMAGE_REG_MAX_LAYERS; i++)
		len += (size_t)sprintf(many + len, "%s" LAYER(1), i ? "," : "");
	strcpy(many + len, "]}");
	assert_int_equal(parse(many, &m, &e), -1);
	assert_non_null(strstr(e.msg, "lists 257 layers"));
	free(many);

	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "[]", "not a JSON object" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[" LAYER(1) "]} x", "not a JSON object" },
		{ "{\"schemaVersion\":1,\"fsLayers\":[]}", "schema 1" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[]}", "lists 0 layers" },
		{ "{\"schemaVersion\":2,\"layers\":[" LAYER(1) "]}", "has no config" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[" LAYER(-1) "]}", "layer 1 is -1 bytes" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[" LAYER(17179869185) "]}", "more than the" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[" LAYER(17179869184) "," LAYER(17179869184) ","
		  LAYER(17179869184) "," LAYER(17179869184) "," LAYER(1) "]}", "more than 68719476736 bytes by layer 5" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\","
		  "\"digest\":\"sha512:" H64 H64 "\",\"size\":1}]}", "only sha256 digests" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[{\"mediaType\":"
		  "\"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip\",\"digest\":\"" DG "\",\"size\":1}]}",
		  "foreign layer" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[{\"mediaType\":\"text/plain\",\"digest\":\"" DG "\",\"size\":1}]}",
		  "not a tar layer" },
		{ "{\"schemaVersion\":2," CONFIG ",\"layers\":[{\"digest\":\"" DG "\",\"size\":\"1\"}]}", "has no size" },
		{ "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.config.v1+json\"}", "not an image's" },
		{ "{\"schemaVersion\":2,\"manifests\":[]}", "lists 0 manifests" },
		{ "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		  "\"digest\":\"" DG "\",\"size\":3,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}",
		  "entry is not an image manifest" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e.msg[0] = 0;
		assert_int_equal(parse(bad[i].text, &m, &e), -1);
		if (!strstr(e.msg, bad[i].msg))
			fail_msg("%s: '%s' lacks '%s'", bad[i].text, e.msg, bad[i].msg);
		assert_null(m.layers);
	}
}

static void put_blob(const char *cache, const char *hex, size_t size, long age)
{
	char path[512];
	struct timeval tv[2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/sha256/%s", cache, hex);
	assert_non_null(f = fopen(path, "w"));
	for (size_t i = 0; i < size; i++)
		fputc('x', f);
	fclose(f);
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= age;
	tv[1] = tv[0];
	assert_int_equal(utimes(path, tv), 0);
}

static void layer_cache(void **state)
{
	char dir[64], cache[512], path[600], other[600];
	struct stat st;
	struct verr e;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "regcache"), 0);
	setenv("VHPC_STATE_DIR", dir, 1);
	assert_int_equal(image_reg_cache_dir(cache, sizeof(cache), &e), 0);
	assert_int_equal(stat(cache, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* oldest first out, down to the limit (sizes in blocks: 3 x 64 KiB) */
	put_blob(cache, HA, 65536, 300);
	put_blob(cache, HB, 65536, 200);
	put_blob(cache, HC, 65536, 100);
	snprintf(path, sizeof(path), "%s/sha256/not-a-blob", cache);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_true(image_reg_cache_has(cache, "sha256:" HA));
	assert_false(image_reg_cache_has(cache, "sha256:../../etc/passwd"));
	assert_int_equal(image_reg_cache_trim(cache, 2 * 65536 + 4096, &e), 0);
	assert_false(image_reg_cache_has(cache, "sha256:" HA));
	assert_true(image_reg_cache_has(cache, "sha256:" HB));
	assert_true(image_reg_cache_has(cache, "sha256:" HC));
	assert_int_equal(access(path, F_OK), 0);
	/* a symlink where the cache should be is refused, not followed */
	snprintf(path, sizeof(path), "%s/images/.layer-cache", dir);
	snprintf(other, sizeof(other), "%s/elsewhere", dir);
	assert_int_equal(rename(path, other), 0);
	assert_int_equal(symlink(other, path), 0);
	e.msg[0] = 0;
	assert_int_equal(image_reg_cache_dir(cache, sizeof(cache), &e), -1);
	assert_non_null(strstr(e.msg, "is not a folder"));
	unsetenv("VHPC_STATE_DIR");
	assert_int_equal(fx_rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refs),
		cmocka_unit_test(manifests),
		cmocka_unit_test(layer_cache),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
