/* Manifests as the image code writes and reads them, and a node's pull:
 * the parser takes what image_manifest writes and names what is wrong in
 * anything else, the names a node keeps for itself above all; a pull
 * through a fetch function makes a tree whose manifest hashes to the id,
 * refuses a changed or truncated file without leaving anything under the
 * id, and pulls no manifest the store does not hold as an image's; root
 * opens an image's files through no symlink. */
#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "images/images.h"
#include "images/image_int.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	return fx_tmpdir(dir, sizeof(dir), "mf");
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(dir);
}

static void put(const char *rel, const char *data, mode_t mode)
{
	char path[300];
	struct verr e;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	assert_int_equal(write_file(path, data, strlen(data), mode, &e), 0);
}

/* An image folder: rootfs/ with files (one twice), a symlink, a folder. */
static void make_tree(void)
{
	char path[300];
	struct verr e;

	snprintf(path, sizeof(path), "%s/img/rootfs/usr/bin", dir);
	assert_int_equal(mkdir_p(path, 0755, &e), 0);
	put("img/rootfs/usr/bin/tool", "#!/bin/sh\necho tool\n", 0755);
	put("img/rootfs/usr/bin/same", "#!/bin/sh\necho tool\n", 0700);
	put("img/rootfs/empty", "", 0644);
	snprintf(path, sizeof(path), "%s/img/rootfs/usr/bin/link", dir);
	assert_int_equal(symlink("tool", path), 0);
	snprintf(path, sizeof(path), "%s/img/rootfs/etc", dir);
	assert_int_equal(mkdir(path, 0750), 0);
}

static void parses_what_it_writes(void **state)
{
	char *text, id[65], path[300];
	size_t len;
	uint64_t bytes;
	long files;
	struct image_mf m;
	struct verr e;

	(void)state;
	make_tree();
	snprintf(path, sizeof(path), "%s/img", dir);
	assert_int_equal(image_manifest(path, &text, &len, id, &bytes, &files, &e), 0);
	assert_true(image_id_ok(id));
	assert_int_equal(image_mf_parse(text, len, &m, &e), 0);
	assert_int_equal(m.bytes, bytes);
	assert_int_equal(m.files, files);
	assert_int_equal(m.n, 8);   /* rootfs, empty, etc, usr, usr/bin, link, same, tool */
	for (size_t i = 0; i < m.n; i++)
		if (!strcmp(m.v[i].path, "/rootfs/usr/bin/link")) {
			assert_int_equal(m.v[i].type, 'l');
			assert_string_equal(m.v[i].target, "tool");
		} else if (!strcmp(m.v[i].path, "/rootfs/usr/bin/same")) {
			assert_int_equal(m.v[i].mode, 0700);
		}
	image_mf_free(&m);
	free(text);
}

static void refuses(const char *text, const char *want)
{
	struct image_mf m;
	struct verr e = { "" };

	if (image_mf_parse(text, strlen(text), &m, &e) == 0) {
		image_mf_free(&m);
		fail_msg("accepted: %s", text);
	}
	if (!strstr(e.msg, want))
		fail_msg("for %s: '%s' lacks '%s'", text, e.msg, want);
}

#define H "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static void names_what_is_wrong(void **state)
{
	(void)state;
	refuses("d 0755 - - /a", "does not end with a newline");
	refuses("x 0755 - - /a\n", "type 'x'");
	refuses("d 755 - - /a\n", "expected 'TYPE MODE SIZE HASH PATH'");
	refuses("d 0789 - - /a\n", "not 4 octal digits");
	refuses("d 0755 - - a\n", "not a plain path");
	refuses("d 0755 - - /a/../b\n", "not a plain path");
	refuses("d 0755 - - /a//b\n", "not a plain path");
	refuses("d 0755 - - /a/.\n", "not a plain path");
	refuses("d 0755 - - /a/\n", "not a plain path");
	refuses("d 0755 3 - /a\n", "a folder has no size");
	refuses("f 0644 x " H " /a\n", "is not a number");
	refuses("f 0644 -1 " H " /a\n", "is not a number");
	refuses("f 0644 2000000000000 " H " /a\n", "up to 2^40");
	refuses("f 0644 0 E3B0 /a\n", "not a sha256");
	refuses("f 4755 0 " H " /a\n", "setuid or setgid");
	refuses("l 0644 - x /a\n", "a symlink is");
	refuses("f 0644 0 " H " /rootfs/b\n", "not inside a folder listed before it");
	refuses("d 0755 - - /rootfs\nf 0644 0 " H " /rootfs/a\nf 0644 0 " H " /rootfs/a/b\n", "not inside a folder");
	refuses("d 0755 - - /rootfs\nd 0755 - - /rootfs\n", "listed twice");
	refuses("d 0755 - - /rootfs/b\nd 0755 - - /rootfs\n", "not inside a folder listed before it");
	refuses("l 0777 - a b /c\n", "not a plain path");
	{
		struct image_mf m;
		struct verr e;

		const char *ok = "d 0755 - - /rootfs\nf 0644 0 " H " /rootfs/b c\nl 0777 - ../x /rootfs/c\n";

		assert_int_equal(image_mf_parse(ok, strlen(ok), &m, &e), 0);
		assert_int_equal(m.n, 3);
		assert_string_equal(m.v[1].path, "/rootfs/b c");
		image_mf_free(&m);
		assert_int_equal(image_mf_parse("", 0, &m, &e), 0);
		assert_int_equal(m.n, 0);
		image_mf_free(&m);
	}
}

/* The names a node writes, locks or mounts in an image's folder are no
 * image's: a manifest that puts anything there, a symlink above all, is
 * refused, and so is a part of the wrong type; inside rootfs/ the same
 * names are the guest's own. */
static void refuses_the_nodes_names(void **state)
{
	(void)state;
	refuses("l 0777 - /etc/ld.so.preload /manifest\n", "'/manifest' is not part of an image");
	refuses("f 0644 0 " H " /info.json\n", "'/info.json' is not part of an image");
	refuses("l 0777 - /usr /.mnt\n", "'/.mnt' is not part of an image");
	refuses("d 0755 - - /.mnt\n", "'/.mnt' is not part of an image");
	refuses("l 0777 - /etc/shadow /.used\n", "'/.used' is not part of an image");
	refuses("l 0777 - /etc/passwd /.lock\n", "'/.lock' is not part of an image");
	refuses("d 0755 - - /.pull-x\n", "'/.pull-x' is not part of an image");
	refuses("d 0755 - - /etc\n", "'/etc' is not part of an image");
	refuses("l 0777 - / /rootfs\n", "/rootfs is a folder in an image, not a symlink");
	refuses("d 0755 - - /rootfs.squashfs\n", "/rootfs.squashfs is a file in an image, not a folder");
	refuses("l 0777 - /dev/sda /rootfs.erofs\n", "/rootfs.erofs is a file in an image, not a symlink");
	refuses("l 0777 - /kvm2 /kvm\n", "/kvm is a folder in an image, not a symlink");
	refuses("d 0755 - - /kvm\nl 0777 - /dev/sda /kvm/rootfs.ext4\n",
		"/kvm/rootfs.ext4 is a file in an image, not a symlink");
	refuses("d 0755 - - /kvm\nl 0777 - /boot/vmlinuz /kvm/vmlinuz\n", "/kvm/vmlinuz is a file in an image");
	refuses("d 0755 - - /kvm\nf 0644 0 " H " /kvm/extra\n", "'/kvm/extra' is not part of an image");
	refuses("d 0755 - - /kvm\nd 0755 - - /kvm/rootfs.ext4\n", "/kvm/rootfs.ext4 is a file in an image, not a folder");
	{
		const char *ok = "d 0755 - - /rootfs\nl 0777 - /etc/ld.so.preload /rootfs/manifest\n"
				 "d 0755 - - /rootfs/.mnt\nd 0755 - - /kvm\nf 0644 0 " H " /kvm/vmlinuz\n"
				 "f 0644 0 " H " /kvm/vmlinux\nf 0644 0 " H " /kvm/initramfs.img\n"
				 "f 0644 0 " H " /kvm/kernel.version\nf 0644 0 " H " /kvm/rootfs.ext4\n"
				 "f 0644 0 " H " /rootfs.squashfs\nf 0644 0 " H " /rootfs.erofs\n";
		struct image_mf m;
		struct verr e;

		assert_int_equal(image_mf_parse(ok, strlen(ok), &m, &e), 0);
		assert_int_equal(m.n, 11);
		image_mf_free(&m);
	}
}

/* ---------------------------------------------------------------- pulls */

/* A store in a folder: objects by name, served a few bytes at a time so
 * that parts and offsets are exercised; a manifest only for an id it
 * holds as an image (images), as vhpc-ctld's store does. */
static char store[300];
static char images[4][65];

static int fetch(void *arg, const char *const *objs, int n, uint64_t offset, bool manifest,
		 struct image_chunk **out, int *nout, struct verr *err)
{
	struct image_chunk *c;
	size_t room = 7;
	int k = 0;
	bool image = false;

	(void)arg;
	for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++)
		image |= !strcmp(images[i], objs[0]);
	if (manifest && (n != 1 || !image))
		return verr_set(err, "image %s is not an image of the store", objs[0]);
	c = calloc((size_t)n, sizeof(*c));
	for (int i = 0; i < n && room; i++, offset = 0) {
		char path[400], *buf;
		size_t len;

		snprintf(path, sizeof(path), "%s/%s", store, objs[i]);
		if (read_file(path, &buf, &len, 1 << 20, err) < 0) {
			image_chunks_free(c, k);
			return -1;
		}
		snprintf(c[k].object, sizeof(c[k].object), "%s", objs[i]);
		c[k].size = len;
		c[k].offset = offset;
		c[k].len = len - offset < room ? len - offset : room;
		c[k].data = malloc(c[k].len + 1);
		memcpy(c[k].data, buf + offset, c[k].len);
		free(buf);
		room -= c[k].len;
		k++;
		if (offset + c[k - 1].len < len)
			break;
	}
	*out = c;
	*nout = k;
	return 0;
}

/* The image folder's files into the store, by content. */
static void fill_store(const char *img, const char *text, size_t len, const char *id)
{
	struct image_mf m;
	struct verr e;
	char path[400], src[400];

	snprintf(store, sizeof(store), "%s/store", dir);
	assert_int_equal(mkdir_p(store, 0755, &e), 0);
	snprintf(path, sizeof(path), "%s/%s", store, id);
	assert_int_equal(write_file(path, text, len, 0644, &e), 0);
	memset(images, 0, sizeof(images));
	snprintf(images[0], sizeof(images[0]), "%s", id);
	assert_int_equal(image_mf_parse(text, len, &m, &e), 0);
	for (size_t i = 0; i < m.n; i++) {
		char *buf;
		size_t bl;

		if (m.v[i].type != 'f')
			continue;
		snprintf(src, sizeof(src), "%s%s", img, m.v[i].path);
		snprintf(path, sizeof(path), "%s/%s", store, m.v[i].sha);
		assert_int_equal(read_file(src, &buf, &bl, 1 << 20, &e), 0);
		assert_int_equal(write_file(path, buf, bl, 0644, &e), 0);
		free(buf);
	}
	image_mf_free(&m);
}

static void pulls(void **state)
{
	char img[300], cache[300], *text, id[65], path[400], *again, id2[65];
	size_t len, l2;
	struct image_info out;
	struct image_pull_stats st;
	struct verr e;
	struct stat sb;
	char tool[65];

	(void)state;
	make_tree();
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	assert_int_equal(image_manifest(img, &text, &len, id, NULL, NULL, &e), 0);
	fill_store(img, text, len, id);
	put("img/info.json", "{\"name\":\"t\"}", 0644);
	{
		struct image_pull_req rq = { .cache = cache, .id = id, .name = "t", .fetch = fetch };

		assert_int_equal(image_pull(&rq, &st, &out, &e), 0);
	}
	assert_string_equal(out.format, "tree");
	assert_int_equal(st.objects, 1);        /* tool and same are one content; empty needs none */
	/* the pulled tree names the same id, modes and links included */
	snprintf(path, sizeof(path), "%s/%s", cache, id);
	assert_int_equal(image_manifest(path, &again, &l2, id2, NULL, NULL, &e), 0);
	assert_string_equal(id2, id);
	free(again);
	snprintf(path, sizeof(path), "%s/%s/rootfs/usr/bin/same", cache, id);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);

	/* a changed file in the store: refused, nothing under the id */
	assert_int_equal(image_cache_remove(cache, id, &e), 0);
	{
		unsigned char d[32];
		const char *c = "#!/bin/sh\necho tool\n";

		crypto_hash_sha256(d, (const unsigned char *)c, strlen(c));
		hex_encode(d, 32, tool);
	}
	snprintf(path, sizeof(path), "%s/%s", store, tool);
	assert_int_equal(write_file(path, "#!/bin/sh\necho TOOL\n", 20, 0644, &e), 0);
	{
		struct image_pull_req rq = { .cache = cache, .id = id, .name = "t", .fetch = fetch };

		assert_int_equal(image_pull(&rq, &st, &out, &e), -1);
		assert_non_null(strstr(e.msg, "the store's copy was changed or damaged; refused"));
		assert_non_null(strstr(e.msg, "/rootfs/usr/bin/"));
	}
	snprintf(path, sizeof(path), "%s/%s", cache, id);
	assert_int_not_equal(access(path, F_OK), 0);
	/* truncated */
	snprintf(path, sizeof(path), "%s/%s", store, tool);
	assert_int_equal(write_file(path, "#!/bin", 6, 0644, &e), 0);
	{
		struct image_pull_req rq = { .cache = cache, .id = id, .name = "t", .fetch = fetch };

		assert_int_equal(image_pull(&rq, &st, &out, &e), -1);
		assert_non_null(strstr(e.msg, "the store holds 6 bytes of it where the manifest says 20"));
	}
	/* a manifest that does not hash to the id */
	snprintf(path, sizeof(path), "%s/%s", store, id);
	assert_int_equal(write_file(path, "d 0755 - - /rootfs\n", 19, 0644, &e), 0);
	{
		struct image_pull_req rq = { .cache = cache, .id = id, .name = "t", .fetch = fetch };

		assert_int_equal(image_pull(&rq, &st, &out, &e), -1);
		assert_non_null(strstr(e.msg, "not to the image's id"));
	}
	snprintf(path, sizeof(path), "%s/%s", cache, id);
	assert_int_not_equal(access(path, F_OK), 0);
	free(text);
}

/* Asked for an id the store does not hold as an image, a pull gets no
 * manifest; given a manifest that puts a symlink where the node writes its
 * own files, it refuses it before writing anything: the canary outside
 * the cache (standing in for /etc/ld.so.preload) stays as it was. */
static void pulls_no_forged_manifest(void **state)
{
	char cache[300], canary[300], mf[600], id[65], path[400], *text;
	struct image_pull_req rq = { .cache = cache, .id = id, .name = "t", .fetch = fetch };
	struct image_pull_stats st;
	struct image_info out;
	unsigned char d[32];
	struct verr e = { "" };

	(void)state;
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	snprintf(canary, sizeof(canary), "%s/ld.so.preload", dir);
	put("ld.so.preload", "a system file\n", 0644);
	snprintf(mf, sizeof(mf), "d 0755 - - /rootfs\nl 0777 - %s /manifest\nl 0777 - %s /info.json\n", canary, canary);
	crypto_hash_sha256(d, (const unsigned char *)mf, strlen(mf));
	hex_encode(d, 32, id);
	snprintf(store, sizeof(store), "%s/store", dir);
	assert_int_equal(mkdir_p(store, 0755, &e), 0);
	snprintf(path, sizeof(path), "%s/%s", store, id);
	assert_int_equal(write_file(path, mf, strlen(mf), 0644, &e), 0);
	/* an object of the store, not an image of it */
	memset(images, 0, sizeof(images));
	assert_int_equal(image_pull(&rq, &st, &out, &e), -1);
	assert_non_null(strstr(e.msg, "is not an image of the store"));
	/* the store's word for it all the same: the manifest is refused */
	snprintf(images[0], sizeof(images[0]), "%s", id);
	assert_int_equal(image_pull(&rq, &st, &out, &e), -1);
	assert_non_null(strstr(e.msg, "'/manifest' is not part of an image"));
	assert_int_equal(read_file(canary, &text, NULL, 1 << 10, &e), 0);
	assert_string_equal(text, "a system file\n");
	free(text);
	snprintf(path, sizeof(path), "%s/%s", cache, id);
	assert_int_not_equal(access(path, F_OK), 0);
}

/* An image folder in a cache, by hand: c/<H>/ */
static void cached(struct image_info *img)
{
	char path[400];
	struct verr e;

	memset(img, 0, sizeof(*img));
	snprintf(img->id, sizeof(img->id), "%s", H);
	snprintf(img->dir, sizeof(img->dir), "%s/c/%s", dir, H);
	snprintf(path, sizeof(path), "%s/kvm", img->dir);
	assert_int_equal(mkdir_p(path, 0755, &e), 0);
}

static int part(const struct image_info *img, const char *rel, struct verr *e)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", img->dir, rel);
	return image_open_part(img, path, e);
}

/* Root opens an image's parts for a guest only as regular files of its
 * folder, never through a symlink (kvm/rootfs.ext4 -> a host disk), marks
 * it used without following one, and reads no info.json through one. */
static void opens_no_symlink(void **state)
{
	struct image_info img, out;
	char path[600], canary[300], sub[300];
	struct verr e = { "" };
	int fd;

	(void)state;
	cached(&img);
	put("c/" H "/kvm/vmlinuz", "a kernel", 0644);
	fd = part(&img, "kvm/vmlinuz", &e);
	assert_true(fd >= 0);
	close(fd);
	/* the root disk a symlink to a host disk (here a canary file) */
	snprintf(canary, sizeof(canary), "%s/host-disk", dir);
	put("host-disk", "a host disk\n", 0644);
	snprintf(path, sizeof(path), "%s/kvm/rootfs.ext4", img.dir);
	assert_int_equal(symlink(canary, path), 0);
	assert_int_equal(part(&img, "kvm/rootfs.ext4", &e), -1);
	assert_non_null(strstr(e.msg, "a symlink where root keeps image files"));
	/* a symlink above it: kvm2 -> kvm */
	snprintf(path, sizeof(path), "%s/kvm2", img.dir);
	assert_int_equal(symlink("kvm", path), 0);
	assert_int_equal(part(&img, "kvm2/vmlinuz", &e), -1);
	assert_non_null(strstr(e.msg, "a symlink where root keeps image files"));
	/* the image's own folder a symlink */
	snprintf(sub, sizeof(sub), "%s/c/%.63sf", dir, H);
	assert_int_equal(symlink(img.dir, sub), 0);
	snprintf(img.dir, sizeof(img.dir), "%s", sub);
	assert_int_equal(part(&img, "kvm/vmlinuz", &e), -1);
	cached(&img);
	/* not a regular file: a fifo, which would block an open */
	snprintf(path, sizeof(path), "%s/kvm/initramfs.img", img.dir);
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_int_equal(part(&img, "kvm/initramfs.img", &e), -1);
	assert_non_null(strstr(e.msg, "not a regular file"));
	/* .used a symlink: touching the image follows nothing */
	snprintf(canary, sizeof(canary), "%s/created-by-root", dir);
	snprintf(path, sizeof(path), "%s/.used", img.dir);
	assert_int_equal(symlink(canary, path), 0);
	image_cache_touch(&img);
	assert_int_not_equal(access(canary, F_OK), 0);
	/* info.json a symlink: the image is not loaded from it */
	put("info", "{\"name\":\"t\",\"format\":\"tree\"}", 0644);
	snprintf(path, sizeof(path), "%s/info.json", img.dir);
	snprintf(canary, sizeof(canary), "%s/info", dir);
	assert_int_equal(symlink(canary, path), 0);
	snprintf(path, sizeof(path), "%s/rootfs", img.dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/c", dir);
	assert_int_equal(image_load(path, H, &out, &e), -1);
	assert_non_null(strstr(e.msg, "a symlink where root keeps image files"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(parses_what_it_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(names_what_is_wrong, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_the_nodes_names, setup, teardown),
		cmocka_unit_test_setup_teardown(pulls, setup, teardown),
		cmocka_unit_test_setup_teardown(pulls_no_forged_manifest, setup, teardown),
		cmocka_unit_test_setup_teardown(opens_no_symlink, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
