/* The cluster's image store: uploads become objects only when their bytes
 * hash to their names, a name is given only to a whole image, names keep
 * their history, a collection removes exactly what no name, no held id
 * and no push under way needs, and only an id root tagged, and has not
 * removed, is an image a job may name. */
#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include <fcntl.h>
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
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "images/images.h"
#include "scheduler/ctld/imgstore.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	return fx_tmpdir(dir, sizeof(dir), "imgstore");
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(dir);
}

static void sha(const void *data, size_t len, char hex[65])
{
	unsigned char d[32];

	crypto_hash_sha256(d, data, len);
	hex_encode(d, 32, hex);
}

/* An object put whole, in two parts (once: the store has it after). */
static void put(struct imgstore *s, const char *data)
{
	char h[65];
	uint64_t next;
	struct verr e;
	size_t len = strlen(data), half = len / 2;

	sha(data, len, h);
	assert_int_equal(imgstore_put(s, h, len, 0, (const uint8_t *)data, half, &next, &e), 0);
	if (next == len)
		return;
	assert_int_equal(next, half);
	assert_int_equal(imgstore_put(s, h, len, half, (const uint8_t *)data + half, len - half, &next, &e), 0);
	assert_int_equal(next, len);
}

/* A manifest of two files with the given contents; its id out. */
static void image(struct imgstore *s, const char *a, const char *b, char id[65])
{
	char ha[65], hb[65], mf[600];

	sha(a, strlen(a), ha);
	sha(b, strlen(b), hb);
	snprintf(mf, sizeof(mf), "d 0755 - - /rootfs\nf 0644 %zu %s /rootfs/a\nf 0644 %zu %s /rootfs/b\n",
		 strlen(a), ha, strlen(b), hb);
	put(s, a);
	put(s, b);
	put(s, mf);
	sha(mf, strlen(mf), id);
}

static void uploads_are_checked(void **state)
{
	struct imgstore *s;
	struct verr e;
	char h[65], other[65];
	uint64_t next;
	uint8_t buf[16];
	size_t len;
	uint64_t size;

	(void)state;
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	sha("hello", 5, h);
	sha("world", 5, other);
	/* bytes that hash to something else are refused, and dropped */
	assert_int_equal(imgstore_put(s, other, 5, 0, (const uint8_t *)"hello", 5, &next, &e), -1);
	assert_non_null(strstr(e.msg, "hash to"));
	assert_int_equal(imgstore_read(s, other, 0, buf, sizeof(buf), &len, &size, &e), -1);
	assert_non_null(strstr(e.msg, "not in the image store"));
	/* a part at the wrong offset writes nothing and says where to go on */
	assert_int_equal(imgstore_put(s, h, 5, 0, (const uint8_t *)"he", 2, &next, &e), 0);
	assert_int_equal(imgstore_put(s, h, 5, 4, (const uint8_t *)"o", 1, &next, &e), 0);
	assert_int_equal(next, 2);
	assert_int_equal(imgstore_put(s, h, 5, 2, (const uint8_t *)"llo", 3, &next, &e), 0);
	assert_int_equal(next, 5);
	assert_int_equal(imgstore_read(s, h, 1, buf, 3, &len, &size, &e), 0);
	assert_int_equal(len, 3);
	assert_int_equal(size, 5);
	assert_memory_equal(buf, "ell", 3);
	/* past its size: refused */
	sha("abc", 3, other);
	assert_int_equal(imgstore_put(s, other, 3, 0, (const uint8_t *)"abcd", 4, &next, &e), -1);
	imgstore_close(s);
}

static void tags_and_history(void **state)
{
	struct imgstore *s;
	struct imgstore_ref r;
	struct verr e;
	char id1[65], id2[65], half[600], hid[65], ha[65], mf[300], gone[65];

	(void)state;
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	image(s, "one", "two", id1);
	assert_int_equal(imgstore_tag(s, "app", id1, 0, 100, &r, &e), 0);
	assert_string_equal(r.format, "tree");
	assert_int_equal(r.bytes, 6);
	assert_int_equal(r.files, 2);
	assert_int_equal(r.nprev, 0);
	image(s, "one", "three", id2);
	assert_int_equal(imgstore_tag(s, "app", id2, 0, 200, &r, &e), 0);
	assert_int_equal(r.nprev, 1);
	assert_string_equal(r.prev[0], id1);
	assert_int_equal(imgstore_lookup(s, "app", &r, &e), 0);
	assert_string_equal(r.id, id2);
	assert_int_equal(r.pushed, 200);
	/* a manifest whose file is not in the store gets no name */
	sha("missing", 7, ha);
	snprintf(mf, sizeof(mf), "d 0755 - - /rootfs\nf 0644 7 %s /rootfs/m\n", ha);
	put(s, mf);
	sha(mf, strlen(mf), hid);
	assert_int_equal(imgstore_tag(s, "broken", hid, 0, 1, &r, &e), -1);
	assert_non_null(strstr(e.msg, "/rootfs/m"));
	assert_int_equal(imgstore_lookup(s, "broken", &r, &e), -1);
	assert_non_null(strstr(e.msg, "no image named 'broken'"));
	/* nor one without a rootfs */
	snprintf(half, sizeof(half), "d 0755 - - /kvm\n");
	put(s, half);
	sha(half, strlen(half), hid);
	assert_int_equal(imgstore_tag(s, "norootfs", hid, 0, 1, &r, &e), -1);
	assert_non_null(strstr(e.msg, "holds no rootfs"));
	assert_int_equal(imgstore_untag(s, "app", gone, &e), 0);
	assert_string_equal(gone, id2);
	assert_int_equal(imgstore_untag(s, "app", gone, &e), -1);
	imgstore_close(s);
}

/* Whether the store holds an object, by name or by content. */
static bool has(struct imgstore *s, const char *h)
{
	uint8_t b[8];
	size_t len;
	uint64_t size;
	struct verr e;

	return imgstore_read(s, h, 0, b, sizeof(b), &len, &size, &e) == 0;
}

static bool present(struct imgstore *s, const char *data)
{
	char h[65];

	sha(data, strlen(data), h);
	return has(s, h);
}

/* A file's mtime can run ahead of time(NULL) (multigrain timestamps): the
 * store's clock must not be what keeps an object. */
static void stamp_ahead(const char *data)
{
	char h[65], path[200];
	struct timespec t[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = time(NULL) + 60 } };

	sha(data, strlen(data), h);
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s", dir, h, h);
	assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

static void collection(void **state)
{
	struct imgstore *s;
	struct imgstore_ref r;
	struct verr e;
	char id1[65], id2[65], id3[65], old[65];
	const char *held[1];
	const char *names[1];
	bool missing[1];
	long removed;
	uint64_t freed;

	(void)state;
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	image(s, "shared", "only-v1", id1);
	image(s, "shared", "only-v2", id2);
	assert_int_equal(imgstore_tag(s, "v1", id1, 0, 1, &r, &e), 0);
	assert_int_equal(imgstore_tag(s, "v2", id2, 0, 1, &r, &e), 0);
	/* a push under way: named by image_have, not tagged yet */
	image(s, "pending-a", "pending-b", id3);
	names[0] = id3;
	assert_int_equal(imgstore_missing(s, names, 1, missing, &e), 0);
	assert_false(missing[0]);
	/* v2 removed but held by a job: nothing goes */
	assert_int_equal(imgstore_untag(s, "v2", old, &e), 0);
	held[0] = id2;
	assert_int_equal(imgstore_gc(s, held, 1, &removed, &freed, &e), 0);
	assert_true(present(s, "only-v2"));
	/* once no job holds it: its own objects go, the shared one stays */
	stamp_ahead("only-v2");
	assert_int_equal(imgstore_gc(s, NULL, 0, &removed, &freed, &e), 0);
	assert_false(present(s, "only-v2"));
	assert_false(has(s, id2));
	assert_false(imgstore_is_image(s, id2));
	assert_true(present(s, "shared"));
	assert_true(present(s, "only-v1"));
	assert_true(imgstore_is_image(s, id1));
	/* the manifest of the push under way stays; its files were never named */
	assert_true(has(s, id3));
	assert_false(imgstore_is_image(s, id3));
	assert_false(present(s, "pending-a"));
	imgstore_close(s);
}

static void obj_file(const char *id, char *path, size_t len)
{
	snprintf(path, len, "%s/objects/%.2s/%s", dir, id, id);
}

/* A manifest or a ref that is there but cannot be read now stops the
 * collection: it must not take the files of the image it names. */
static void unreadable_stops_collection(void **state)
{
	struct imgstore *s;
	struct imgstore_ref r;
	struct verr e;
	char id1[65], id2[65], mf[200], aside[220], ref[120], want[20];
	const char *held[1];
	long removed;
	uint64_t freed;

	(void)state;
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	image(s, "named-a", "named-b", id1);
	assert_int_equal(imgstore_tag(s, "named", id1, 0, 1, &r, &e), 0);
	image(s, "held-a", "held-b", id2);
	held[0] = id2;
	/* a directory where the held image's manifest was: open works, read
	 * fails, as with EIO or EMFILE */
	obj_file(id2, mf, sizeof(mf));
	snprintf(aside, sizeof(aside), "%s.aside", mf);
	assert_int_equal(rename(mf, aside), 0);
	assert_int_equal(mkdir(mf, 0700), 0);
	assert_int_equal(imgstore_gc(s, held, 1, &removed, &freed, &e), -1);
	snprintf(want, sizeof(want), "image %.12s", id2);
	assert_non_null(strstr(e.msg, want));
	assert_int_equal(removed, 0);
	assert_true(present(s, "held-a"));
	assert_int_equal(rmdir(mf), 0);
	assert_int_equal(rename(aside, mf), 0);
	/* a ref that does not parse: which image it names is unknown */
	snprintf(ref, sizeof(ref), "%s/refs/named.json", dir);
	assert_int_equal(write_file_atomic(ref, "{", 1, 0600, &e), 0);
	assert_int_equal(imgstore_gc(s, held, 1, &removed, &freed, &e), -1);
	assert_non_null(strstr(e.msg, "named.json"));
	assert_int_equal(removed, 0);
	assert_true(present(s, "named-a"));
	assert_true(present(s, "held-b"));
	imgstore_close(s);
}

/* imgstore_image: how a job's image_id is judged at submit. */
static int judge(struct imgstore *s, const char *id, const char *name, const char *want, const char *as)
{
	struct imgstore_image im;
	struct verr e = { "" };
	int rc = imgstore_image(s, id, name, &im, &e);

	if (want && (rc == 0 || !strstr(e.msg, want)))
		fail_msg("%.12s: '%s' lacks '%s'", id, rc == 0 ? "accepted" : e.msg, want);
	if (!want && rc < 0)
		fail_msg("%.12s refused: %s", id, e.msg);
	if (as && strcmp(im.name, as))
		fail_msg("%.12s runs as '%s', not '%s'", id, im.name, as);
	return rc;
}

#define NOT_AN_IMAGE "the cluster's image store holds no image with this id"

/* Only a manifest root tagged is an image: not a file that is an object
 * of the store, not a manifest pushed and never tagged; an earlier version
 * of a name still is; once every name it had is removed, it is not, for a
 * new job (a node still pulls it for the jobs queued before), and once
 * collected not even that. */
static void images_by_id(void **state)
{
	struct imgstore *s;
	struct imgstore_ref r;
	struct verr e;
	char id1[65], id2[65], id3[65], file[65], never[65], gone[65];
	long removed;
	uint64_t freed;

	(void)state;
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	image(s, "one", "two", id1);
	assert_int_equal(imgstore_tag(s, "app", id1, 0, 1, &r, &e), 0);
	judge(s, id1, NULL, NULL, "app");
	assert_true(imgstore_is_image(s, id1));
	/* a file of the image: an object named by its sha256, no image; the
	 * same words as for an id the store has never seen */
	sha("one", 3, file);
	assert_true(has(s, file));
	judge(s, file, NULL, NOT_AN_IMAGE, NULL);
	assert_false(imgstore_is_image(s, file));
	sha("never", 5, never);
	judge(s, never, NULL, NOT_AN_IMAGE, NULL);
	judge(s, "E3B0", NULL, "is not an image id", NULL);
	/* a manifest pushed, never tagged */
	image(s, "one", "three", id3);
	judge(s, id3, NULL, NOT_AN_IMAGE, NULL);
	/* a new version: the earlier one stays an image of its name */
	image(s, "one", "four", id2);
	assert_int_equal(imgstore_tag(s, "app", id2, 0, 2, &r, &e), 0);
	judge(s, id1, NULL, NULL, "app");
	judge(s, id1, "app", NULL, "app");
	judge(s, id2, "other", "is not image other (it is app)", NULL);
	/* two names: removing one leaves the other */
	assert_int_equal(imgstore_tag(s, "alias", id1, 0, 3, &r, &e), 0);
	assert_int_equal(imgstore_untag(s, "app", gone, &e), 0);
	judge(s, id2, NULL, "image app was removed from the cluster's image store", NULL);
	judge(s, id1, NULL, NULL, "alias");
	assert_int_equal(imgstore_untag(s, "alias", gone, &e), 0);
	judge(s, id1, NULL, "image alias was removed", NULL);
	/* a node still pulls it for a job queued before */
	assert_true(imgstore_is_image(s, id1));
	/* collected: no image at all */
	assert_int_equal(imgstore_gc(s, NULL, 0, &removed, &freed, &e), 0);
	assert_false(imgstore_is_image(s, id1));
	judge(s, id1, NULL, NOT_AN_IMAGE, NULL);
	imgstore_close(s);
}

/* One earlier version retired: no new job may name it by that name, the
 * name's history forgets it, and the rest of the name stays; the version
 * the name has now, an id it never had, an ambiguous or short prefix are
 * refused and change nothing; a restart does not bring it back. */
static void earlier_version_retired(void **state)
{
	struct imgstore *s;
	struct imgstore_ref r;
	struct verr e;
	char id1[65], id2[65], id3[65], got[65], pre[13];

	(void)state;
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	image(s, "r", "one", id1);
	image(s, "r", "two", id2);
	image(s, "r", "three", id3);
	assert_int_equal(imgstore_tag(s, "rapp", id1, 0, 1, &r, &e), 0);
	assert_int_equal(imgstore_tag(s, "rapp", id2, 0, 2, &r, &e), 0);
	assert_int_equal(imgstore_tag(s, "rapp", id3, 0, 3, &r, &e), 0);
	assert_int_equal(r.nprev, 2);
	judge(s, id1, "rapp", NULL, "rapp");
	assert_int_equal(imgstore_retire(s, "rapp", id3, got, &e), -1);
	assert_non_null(strstr(e.msg, "is the version image rapp names now"));
	assert_int_equal(imgstore_retire(s, "rapp", "0123456789ab", got, &e), -1);
	assert_non_null(strstr(e.msg, "had no earlier version"));
	assert_int_equal(imgstore_retire(s, "rapp", "0123", got, &e), -1);
	assert_non_null(strstr(e.msg, "at least 12"));
	assert_int_equal(imgstore_retire(s, "nosuch", id1, got, &e), -1);
	snprintf(pre, sizeof(pre), "%.12s", id1);
	assert_int_equal(imgstore_retire(s, "rapp", pre, got, &e), 0);
	assert_string_equal(got, id1);
	judge(s, id1, "rapp", "image rapp was removed", NULL);
	judge(s, id2, "rapp", NULL, "rapp");
	judge(s, id3, "rapp", NULL, "rapp");
	assert_int_equal(imgstore_lookup(s, "rapp", &r, &e), 0);
	assert_string_equal(r.id, id3);
	assert_int_equal(r.nprev, 1);
	assert_string_equal(r.prev[0], id2);
	/* twice: it is no longer an earlier version of the name */
	assert_int_equal(imgstore_retire(s, "rapp", id1, got, &e), -1);
	assert_non_null(strstr(e.msg, "had no earlier version"));
	imgstore_close(s);
	/* the next open makes the record agree with the refs: id1 stays out */
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	judge(s, id1, "rapp", "image rapp was removed", NULL);
	judge(s, id2, "rapp", NULL, "rapp");
	imgstore_close(s);
}

/* The record agrees with the names across restarts: a removal cut short
 * (the name gone, its record not yet changed) is finished at the next
 * open, and a store from before the record gets one from its names. */
static void record_after_restart(void **state)
{
	struct imgstore *s;
	struct imgstore_ref r;
	struct verr e;
	char id1[65], id2[65], id3[65], path[200];

	(void)state;
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	image(s, "a", "b", id1);
	image(s, "a", "c", id2);
	image(s, "x", "y", id3);
	assert_int_equal(imgstore_tag(s, "app", id1, 0, 1, &r, &e), 0);
	assert_int_equal(imgstore_tag(s, "app", id2, 0, 2, &r, &e), 0);
	assert_int_equal(imgstore_tag(s, "tool", id3, 0, 2, &r, &e), 0);
	imgstore_close(s);
	/* tool's ref removed, its record not */
	snprintf(path, sizeof(path), "%s/refs/tool.json", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	judge(s, id3, NULL, "image tool was removed", NULL);
	judge(s, id2, NULL, NULL, "app");
	imgstore_close(s);
	/* no record at all (a store from before it) */
	snprintf(path, sizeof(path), "%s/tagged", dir);
	assert_int_equal(rm_rf(path, &e), 0);
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	judge(s, id2, NULL, NULL, "app");
	judge(s, id1, "app", NULL, "app");
	judge(s, id3, NULL, NOT_AN_IMAGE, NULL);
	imgstore_close(s);
}

/* An image's signatures: each checked against the id before it is kept,
 * a key's new one replacing its old, none for an id that is no image,
 * and gone with the image's manifest in a collection. */
static void signatures(void **state)
{
	struct imgstore *s;
	struct imgstore_ref r;
	struct image_sigs add = { .n = 0 }, got;
	uint8_t sk1[64], sk2[64], pk[32];
	char id1[65], id2[65], old[65], path[200];
	struct verr e;
	long removed;
	uint64_t freed;
	int total;

	(void)state;
	crypto_sign_keypair(pk, sk1);
	crypto_sign_keypair(pk, sk2);
	assert_int_equal(imgstore_open(&s, dir, &e), 0);
	image(s, "a1", "b1", id1);
	image(s, "a2", "b2", id2);
	assert_int_equal(imgstore_tag(s, "v1", id1, 0, 1, &r, &e), 0);
	assert_int_equal(imgstore_sigs(s, id1, &got, &e), 0);
	assert_int_equal(got.n, 0);
	/* another id's signature, and any for an id that is no image */
	add.n = 1;
	image_sig_make(sk1, id2, &add.v[0]);
	assert_int_equal(imgstore_sign(s, id1, &add, &total, &e), -1);
	assert_non_null(strstr(e.msg, "is not a signature of image"));
	assert_int_equal(imgstore_sign(s, id2, &add, &total, &e), -1);
	assert_non_null(strstr(e.msg, "is not an image of the store"));
	assert_int_equal(imgstore_sigs(s, id1, &got, &e), 0);
	assert_int_equal(got.n, 0);
	/* two keys; the first key's again replaces its own */
	image_sig_make(sk1, id1, &add.v[0]);
	assert_int_equal(imgstore_sign(s, id1, &add, &total, &e), 0);
	assert_int_equal(total, 1);
	image_sig_make(sk2, id1, &add.v[0]);
	assert_int_equal(imgstore_sign(s, id1, &add, &total, &e), 0);
	assert_int_equal(total, 2);
	image_sig_make(sk1, id1, &add.v[0]);
	assert_int_equal(imgstore_sign(s, id1, &add, &total, &e), 0);
	assert_int_equal(total, 2);
	assert_int_equal(imgstore_sigs(s, id1, &got, &e), 0);
	assert_int_equal(got.n, 2);
	assert_true(image_sig_valid(&got.v[0], id1) && image_sig_valid(&got.v[1], id1));
	/* a damaged file is named, not taken for none */
	snprintf(path, sizeof(path), "%s/signatures/%s", dir, id1);
	{
		FILE *f = fopen(path, "a");

		assert_non_null(f);
		fputs("junk\n", f);
		fclose(f);
	}
	assert_int_equal(imgstore_sigs(s, id1, &got, &e), -1);
	assert_non_null(strstr(e.msg, "line 3"));
	/* collected with the image */
	assert_int_equal(imgstore_untag(s, "v1", old, &e), 0);
	assert_int_equal(imgstore_gc(s, NULL, 0, &removed, &freed, &e), 0);
	assert_false(imgstore_is_image(s, id1));
	assert_int_equal(access(path, F_OK), -1);
	imgstore_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(uploads_are_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(tags_and_history, setup, teardown),
		cmocka_unit_test_setup_teardown(collection, setup, teardown),
		cmocka_unit_test_setup_teardown(unreadable_stops_collection, setup, teardown),
		cmocka_unit_test_setup_teardown(images_by_id, setup, teardown),
		cmocka_unit_test_setup_teardown(earlier_version_retired, setup, teardown),
		cmocka_unit_test_setup_teardown(record_after_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(signatures, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
