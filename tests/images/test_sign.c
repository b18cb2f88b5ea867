/* Signed images (images/sign.c): keys as `vhpc image keygen` writes them
 * and the refusals of a bad one; a signature holds for its image's id
 * only (never another id, a changed byte, or the bare id without the
 * context); the signatures file parsed strictly; a node's policy
 * (image_sig_require) refuses an unsigned image, one signed by a key it
 * does not trust, a signature of another id and a tampered one, each with
 * its reason, and takes a good one; and the cluster file's images:. */
#include "lib/bytes.h"
#include "lib/cluster.h"
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

static char dir[64];

static int setup(void **state)
{
	(void)state;
	return fx_tmpdir(dir, sizeof(dir), "sig");
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(dir);
}

static const char ID_A[] = "1111111111111111111111111111111111111111111111111111111111111111";
static const char ID_B[] = "2222222222222222222222222222222222222222222222222222222222222222";

static void put(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void keys(void **state)
{
	char path[128], pub[CLUSTER_KEY_TEXT], text[256], lnk[140];
	uint8_t sk[64], pk[32];
	struct verr e;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/k", dir);
	assert_int_equal(image_key_generate(path, pub, &e), 0);
	assert_int_equal(cluster_key_parse(pub, pk), 0);
	/* Never over an existing key. */
	assert_int_equal(image_key_generate(path, pub, &e), -1);
	assert_non_null(strstr(e.msg, "cannot create"));
	assert_int_equal(image_key_load(path, sk, &e), 0);
	assert_memory_equal(sk + 32, pk, 32);
	/* The .pub file holds the cluster file's form. */
	snprintf(text, sizeof(text), "%s.pub", path);
	assert_non_null(f = fopen(text, "r"));
	assert_non_null(fgets(text, sizeof(text), f));
	fclose(f);
	assert_int_equal(strncmp(text, pub, strlen(pub)), 0);
	snprintf(text, sizeof(text), "%s.pub", path);
	assert_int_equal(image_key_load(text, sk, &e), -1);
	assert_non_null(strstr(e.msg, "is a public key"));
	/* Readable by others, or by its group: refused, saying so. */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(image_key_load(path, sk, &e), -1);
	assert_non_null(strstr(e.msg, "mode 0644"));
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(image_key_load(path, sk, &e), -1);
	assert_non_null(strstr(e.msg, "must be 0600"));
	/* A symlink to it is not followed. */
	snprintf(lnk, sizeof(lnk), "%s/lnk", dir);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(symlink(path, lnk), 0);
	assert_int_equal(image_key_load(lnk, sk, &e), -1);
	assert_non_null(strstr(e.msg, "symlink"));
	/* Wrong lengths, and a raw 64-byte key. */
	snprintf(path, sizeof(path), "%s/short", dir);
	put(path, "vhpc-image-secret-key-v1 ed25519 abcd\n", 0600);
	assert_int_equal(image_key_load(path, sk, &e), -1);
	assert_non_null(strstr(e.msg, "not a vhpc image secret key"));
	snprintf(path, sizeof(path), "%s/raw", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < 64; i++)
		fputc(i, f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(image_key_load(path, sk, &e), -1);
	assert_non_null(strstr(e.msg, "64 bytes, not a vhpc image secret key"));
	snprintf(path, sizeof(path), "%s/upper", dir);
	put(path, "vhpc-image-secret-key-v1 ed25519 ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\n", 0600);
	assert_int_equal(image_key_load(path, sk, &e), -1);
	/* The cluster file's form, exactly. */
	assert_int_equal(cluster_key_parse("ed25519:", pk), -1);
	assert_int_equal(cluster_key_parse("ed25519:0000000000000000000000000000000000000000000000000000000000000000 ", pk), -1);
	assert_int_equal(cluster_key_parse("ED25519:0000000000000000000000000000000000000000000000000000000000000000", pk), -1);
	assert_int_equal(cluster_key_parse("ed25519:000000000000000000000000000000000000000000000000000000000000000G", pk), -1);
}

static void keypair(uint8_t sk[64])
{
	uint8_t pk[32];

	crypto_sign_keypair(pk, sk);
}

static void signatures(void **state)
{
	uint8_t sk[64];
	struct image_sig s, t;
	unsigned char bare[64];

	(void)state;
	assert_int_equal(sodium_init() < 0, 0);
	keypair(sk);
	image_sig_make(sk, ID_A, &s);
	assert_true(image_sig_valid(&s, ID_A));
	assert_false(image_sig_valid(&s, ID_B));
	assert_false(image_sig_valid(&s, "not an id"));
	for (int bit = 0; bit < 8 * 64; bit += 37) {
		t = s;
		t.sig[bit / 8] ^= (uint8_t)(1 << (bit % 8));
		assert_false(image_sig_valid(&t, ID_A));
	}
	t = s;
	t.key[0] ^= 1;
	assert_false(image_sig_valid(&t, ID_A));
	/* The bare id, signed without the context, is no image signature:
	 * a key used for something else signs no image by accident. */
	memcpy(bare, ID_A, 64);
	crypto_sign_detached(t.sig, NULL, bare, 64, sk);
	crypto_sign_ed25519_sk_to_pk(t.key, sk);
	assert_false(image_sig_valid(&t, ID_A));
}

static void parses_strictly(void **state)
{
	struct image_sigs s, r;
	uint8_t sk[64];
	char text[IMAGE_SIG_TEXT_MAX + 1], big[IMAGE_SIG_TEXT_MAX + IMAGE_SIG_LINE + 1], bad[IMAGE_SIG_LINE + 8];
	struct verr e;

	(void)state;
	memset(&s, 0, sizeof(s));
	assert_int_equal(image_sigs_parse("", 0, &r, &e), 0);
	assert_int_equal(r.n, 0);
	for (int i = 0; i < IMAGE_SIG_MAX; i++) {
		struct image_sig g;

		keypair(sk);
		image_sig_make(sk, ID_A, &g);
		assert_int_equal(image_sigs_add(&s, &g, &e), 0);
	}
	/* Full: one more key is refused, the same key replaces its own. */
	{
		struct image_sig g;

		keypair(sk);
		image_sig_make(sk, ID_A, &g);
		assert_int_equal(image_sigs_add(&s, &g, &e), -1);
		g = s.v[3];
		g.sig[0] ^= 1;
		assert_int_equal(image_sigs_add(&s, &g, &e), 0);
		assert_int_equal(s.n, IMAGE_SIG_MAX);
		g.sig[0] ^= 1;
		assert_int_equal(image_sigs_add(&s, &g, &e), 0);
	}
	image_sigs_format(&s, text);
	assert_int_equal(strlen(text), IMAGE_SIG_TEXT_MAX);
	assert_int_equal(image_sigs_parse(text, strlen(text), &r, &e), 0);
	assert_int_equal(r.n, IMAGE_SIG_MAX);
	assert_memory_equal(&r.v, &s.v, sizeof(s.v));
	/* One line more than it may hold. */
	snprintf(big, sizeof(big), "%s%.*s", text, IMAGE_SIG_LINE, text);
	assert_int_equal(image_sigs_parse(big, strlen(big), &r, &e), -1);
	assert_non_null(strstr(e.msg, "more than"));
	/* The same key twice. */
	snprintf(big, sizeof(big), "%.*s%.*s", IMAGE_SIG_LINE, text, IMAGE_SIG_LINE, text);
	assert_int_equal(image_sigs_parse(big, strlen(big), &r, &e), -1);
	assert_non_null(strstr(e.msg, "line 2: a second signature by the key of line 1"));
	/* No newline at the end; upper case; a space too many; another scheme. */
	assert_int_equal(image_sigs_parse(text, IMAGE_SIG_LINE - 1, &r, &e), -1);
	assert_non_null(strstr(e.msg, "newline"));
	snprintf(bad, sizeof(bad), "%.*s", IMAGE_SIG_LINE, text);
	bad[20] = 'A';
	assert_int_equal(image_sigs_parse(bad, strlen(bad), &r, &e), -1);
	assert_non_null(strstr(e.msg, "line 1: expected 'ed25519"));
	snprintf(bad, sizeof(bad), "%.*s", IMAGE_SIG_LINE, text);
	memcpy(bad, "ed448   ", 8);
	assert_int_equal(image_sigs_parse(bad, strlen(bad), &r, &e), -1);
	snprintf(bad, sizeof(bad), "%.*s  \n", IMAGE_SIG_LINE - 1, text);
	assert_int_equal(image_sigs_parse(bad, strlen(bad), &r, &e), -1);
	snprintf(bad, sizeof(bad), "%.*s", IMAGE_SIG_LINE, text);
	bad[100] = 0;
	assert_int_equal(image_sigs_parse(bad, IMAGE_SIG_LINE, &r, &e), -1);
	assert_int_equal(image_sigs_parse("\n", 1, &r, &e), -1);
}

/* An image's folder <dir>/<id> with the signatures text given. */
static void image_at(struct image_info *img, const char *id, const char *sigs)
{
	char path[600];

	memset(img, 0, sizeof(*img));
	snprintf(img->id, sizeof(img->id), "%s", id);
	snprintf(img->name, sizeof(img->name), "app");
	snprintf(img->dir, sizeof(img->dir), "%s/%s", dir, id);
	mkdir(img->dir, 0755);
	snprintf(path, sizeof(path), "%s/" IMAGE_SIG_FILE, img->dir);
	unlink(path);
	if (sigs)
		put(path, sigs, 0644);
}

static void policy(void **state)
{
	uint8_t sk[64], other[64], trusted_keys[2][32];
	struct cluster_images on = { .require_signed = true, .keys = trusted_keys, .nkeys = 2 }, off = { 0 };
	struct image_sigs s = { .n = 0 };
	struct image_sig g;
	struct image_info img;
	char text[IMAGE_SIG_TEXT_MAX + 1];
	struct verr e;

	(void)state;
	keypair(sk);
	keypair(other);
	crypto_sign_ed25519_sk_to_pk(trusted_keys[0], sk);
	memset(trusted_keys[1], 7, 32);
	/* Unsigned. */
	image_at(&img, ID_A, NULL);
	assert_int_equal(image_sig_require(&img, &off, &e), 0);
	assert_int_equal(image_sig_require(&img, &on, &e), -1);
	assert_non_null(strstr(e.msg, "image app (111111111111) is not signed"));
	image_at(&img, ID_A, "");
	assert_int_equal(image_sig_require(&img, &on, &e), -1);
	assert_non_null(strstr(e.msg, "is not signed"));
	/* Signed by a key the node does not trust. */
	image_sig_make(other, ID_A, &g);
	s.n = 0;
	image_sigs_add(&s, &g, &e);
	image_sigs_format(&s, text);
	image_at(&img, ID_A, text);
	assert_int_equal(image_sig_require(&img, &off, &e), 0);
	assert_int_equal(image_sig_require(&img, &on, &e), -1);
	assert_non_null(strstr(e.msg, "signed only by keys this node does not trust"));
	/* A trusted key's signature of another image. */
	image_sig_make(sk, ID_B, &g);
	s.n = 0;
	image_sigs_add(&s, &g, &e);
	image_sigs_format(&s, text);
	image_at(&img, ID_A, text);
	assert_int_equal(image_sig_require(&img, &on, &e), -1);
	assert_non_null(strstr(e.msg, "does not verify for this image's id"));
	/* Its own signature, tampered with. */
	image_sig_make(sk, ID_A, &g);
	g.sig[10] ^= 0x40;
	s.n = 0;
	image_sigs_add(&s, &g, &e);
	image_sigs_format(&s, text);
	image_at(&img, ID_A, text);
	assert_int_equal(image_sig_require(&img, &on, &e), -1);
	assert_non_null(strstr(e.msg, "does not verify"));
	/* A good one, after an untrusted one. */
	image_sig_make(other, ID_A, &g);
	s.n = 0;
	image_sigs_add(&s, &g, &e);
	image_sig_make(sk, ID_A, &g);
	image_sigs_add(&s, &g, &e);
	image_sigs_format(&s, text);
	image_at(&img, ID_A, text);
	assert_int_equal(image_sig_require(&img, &on, &e), 0);
	/* Through image_sigs_write and _read. */
	image_at(&img, ID_B, NULL);
	image_sig_make(sk, ID_B, &g);
	s.n = 0;
	image_sigs_add(&s, &g, &e);
	assert_int_equal(image_sigs_write(img.dir, &s, &e), 0);
	assert_int_equal(image_sig_require(&img, &on, &e), 0);
	/* A malformed file says so; a symlink in its place is not followed. */
	image_at(&img, ID_A, "garbage\n");
	assert_int_equal(image_sig_require(&img, &on, &e), -1);
	assert_non_null(strstr(e.msg, "its signatures cannot be read"));
	assert_non_null(strstr(e.msg, "line 1"));
	{
		char path[600], target[600];

		image_at(&img, ID_A, NULL);
		snprintf(target, sizeof(target), "%s/%s/" IMAGE_SIG_FILE, dir, ID_B);
		snprintf(path, sizeof(path), "%s/" IMAGE_SIG_FILE, img.dir);
		assert_int_equal(symlink(target, path), 0);
		assert_int_equal(image_sig_require(&img, &on, &e), -1);
		assert_non_null(strstr(e.msg, "cannot be read"));
	}
}

static void cluster_file(void **state)
{
	char path[128], text[1024];
	struct cluster_cfg c;
	struct verr e;
	static const char head[] = "name: t\njob_network:\n  pool: 10.213.0.0/16\n";
	static const char k1[] = "ed25519:3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29";

	(void)state;
	snprintf(path, sizeof(path), "%s/cluster.yaml", dir);
	snprintf(text, sizeof(text), "%simages:\n  require_signed: true\n  trusted_keys:\n    - %s\n", head, k1);
	put(path, text, 0644);
	assert_int_equal(cluster_load(path, &c, &e), 0);
	assert_true(c.images.require_signed);
	assert_int_equal(c.images.nkeys, 1);
	assert_int_equal(c.images.keys[0][0], 0x3b);
	cluster_free(&c);
	/* Without images:, nothing is required. */
	put(path, head, 0644);
	assert_int_equal(cluster_load(path, &c, &e), 0);
	assert_false(c.images.require_signed);
	cluster_free(&c);
	/* A bad key names its line. */
	snprintf(text, sizeof(text), "%simages:\n  trusted_keys:\n    - %s\n    - ed25519:abc\n", head, k1);
	put(path, text, 0644);
	assert_int_equal(cluster_load(path, &c, &e), -1);
	assert_non_null(strstr(e.msg, ":7:"));
	assert_non_null(strstr(e.msg, "ed25519:abc"));
	snprintf(text, sizeof(text), "%simages:\n  trusted_keys: [%s, %s]\n", head, k1, k1);
	put(path, text, 0644);
	assert_int_equal(cluster_load(path, &c, &e), -1);
	assert_non_null(strstr(e.msg, "listed twice"));
	/* Required, with no key to trust: no image could start. */
	snprintf(text, sizeof(text), "%simages:\n  require_signed: true\n", head);
	put(path, text, 0644);
	assert_int_equal(cluster_load(path, &c, &e), -1);
	assert_non_null(strstr(e.msg, "lists no key"));
	snprintf(text, sizeof(text), "%simages:\n  require_signed: maybe\n  trusted_keys: [%s]\n", head, k1);
	put(path, text, 0644);
	assert_int_equal(cluster_load(path, &c, &e), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(keys, setup, teardown),
		cmocka_unit_test(signatures),
		cmocka_unit_test(parses_strictly),
		cmocka_unit_test_setup_teardown(policy, setup, teardown),
		cmocka_unit_test_setup_teardown(cluster_file, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
