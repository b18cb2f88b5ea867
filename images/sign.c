/*
 * Signed images (images.h, "signatures"; README "Signed images"): ed25519
 * through libsodium, which vhpc links already for its hashes.  What is
 * signed is IMAGE_SIG_CONTEXT and the id (the sha256 of the manifest, which
 * covers every file): a signature is about one image and says so, never
 * bare bytes another use of the key could have signed.
 */
#include "lib/bytes.h"
#include "lib/cluster.h"
#include "lib/err.h"
#include "images/images.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The secret key file: one line, the seed the key pair comes from. */
#define SK_HEAD "vhpc-image-secret-key-v1 ed25519 "
#define SK_LEN  (sizeof(SK_HEAD) - 1 + 64 + 1)

static bool lowhex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* n digits already checked by lowhex; hex_decode wants a whole string. */
static int hex_decode_n(const char *s, size_t n, uint8_t *out, size_t len)
{
	if (n != 2 * len || !lowhex(s, n))
		return -1;
	for (size_t i = 0; i < len; i++) {
		int hi = s[2 * i] <= '9' ? s[2 * i] - '0' : s[2 * i] - 'a' + 10;
		int lo = s[2 * i + 1] <= '9' ? s[2 * i + 1] - '0' : s[2 * i + 1] - 'a' + 10;

		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* ---------------------------------------------------- the signature file */

static int sig_line(const char *p, size_t n, size_t lineno, struct image_sig *out, struct verr *err)
{
	if (n != IMAGE_SIG_LINE - 1 || memcmp(p, "ed25519 ", 8) || p[8 + 64] != ' ' || !lowhex(p + 8, 64) ||
	    !lowhex(p + 8 + 65, 128))
		return verr_set(err, "signatures line %zu: expected 'ed25519 <key: 64 hex digits> <signature: 128 hex digits>'",
				lineno);
	if (hex_decode_n(p + 8, 64, out->key, 32) < 0 || hex_decode_n(p + 8 + 65, 128, out->sig, 64) < 0)
		return verr_set(err, "signatures line %zu: bad hex", lineno);
	return 0;
}

int image_sigs_parse(const char *text, size_t len, struct image_sigs *s, struct verr *err)
{
	size_t lineno = 0;

	memset(s, 0, sizeof(*s));
	if (len > IMAGE_SIG_TEXT_MAX)
		return verr_set(err, "signatures: %zu bytes, more than the %d of %d signatures", len, IMAGE_SIG_TEXT_MAX,
				IMAGE_SIG_MAX);
	if (len && text[len - 1] != '\n')
		return verr_set(err, "signatures: the last line does not end with a newline");
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(text + at, '\n', len - at);
		struct image_sig *sig = &s->v[s->n];

		if (s->n == IMAGE_SIG_MAX)
			return verr_set(err, "signatures: more than %d", IMAGE_SIG_MAX);
		if (sig_line(text + at, (size_t)(nl - (text + at)), ++lineno, sig, err) < 0)
			return -1;
		for (int k = 0; k < s->n; k++)
			if (!memcmp(s->v[k].key, sig->key, 32))
				return verr_set(err, "signatures line %zu: a second signature by the key of line %d", lineno, k + 1);
		s->n++;
		at = (size_t)(nl - text) + 1;
	}
	return 0;
}

void image_sigs_format(const struct image_sigs *s, char *buf)
{
	char *p = buf;

	for (int i = 0; i < s->n; i++) {
		memcpy(p, "ed25519 ", 8);
		hex_encode(s->v[i].key, 32, p + 8);
		p[8 + 64] = ' ';
		hex_encode(s->v[i].sig, 64, p + 8 + 65);
		p[IMAGE_SIG_LINE - 1] = '\n';
		p += IMAGE_SIG_LINE;
	}
	*p = 0;
}

int image_sigs_add(struct image_sigs *s, const struct image_sig *sig, struct verr *err)
{
	for (int i = 0; i < s->n; i++)
		if (!memcmp(s->v[i].key, sig->key, 32)) {
			s->v[i] = *sig;
			return 0;
		}
	if (s->n == IMAGE_SIG_MAX)
		return verr_set(err, "the image has %d signatures already, the most one keeps", IMAGE_SIG_MAX);
	s->v[s->n++] = *sig;
	return 0;
}

/* The message: the context, then the id as its 64 hex digits. */
static void sig_msg(const char *id, unsigned char msg[sizeof(IMAGE_SIG_CONTEXT) - 1 + 64])
{
	memcpy(msg, IMAGE_SIG_CONTEXT, sizeof(IMAGE_SIG_CONTEXT) - 1);
	memcpy(msg + sizeof(IMAGE_SIG_CONTEXT) - 1, id, 64);
}

bool image_sig_valid(const struct image_sig *sig, const char *id)
{
	unsigned char msg[sizeof(IMAGE_SIG_CONTEXT) - 1 + 64];

	if (!image_id_ok(id) || sodium_init() < 0)
		return false;
	sig_msg(id, msg);
	return crypto_sign_verify_detached(sig->sig, msg, sizeof(msg), sig->key) == 0;
}

void image_sig_make(const uint8_t sk[64], const char *id, struct image_sig *out)
{
	unsigned char msg[sizeof(IMAGE_SIG_CONTEXT) - 1 + 64];

	if (sodium_init() < 0)
		abort();
	sig_msg(id, msg);
	crypto_sign_detached(out->sig, NULL, msg, sizeof(msg), sk);
	crypto_sign_ed25519_sk_to_pk(out->key, sk);
}

/* ------------------------------------------------- an image's folder's file */

/* img's folder, reached from its parent without a symlink (nofollow.c). */
static int open_image_dir(const char *dir, struct verr *err)
{
	const char *slash = strrchr(dir, '/');
	char parent[512];
	int pfd, fd;

	if (!slash || slash == dir || !slash[1])
		return verr_set(err, "%s is not an image's folder", dir);
	snprintf(parent, sizeof(parent), "%.*s", (int)(slash - dir), dir);
	if ((pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return verr_errno(err, "cannot open %s", parent);
	fd = image_openat(pfd, slash + 1, O_RDONLY | O_DIRECTORY, 0, err);
	close(pfd);
	return fd;
}

int image_sigs_read(const char *dir, struct image_sigs *s, struct verr *err)
{
	int dfd = open_image_dir(dir, err), r;
	char *text;
	size_t len;

	memset(s, 0, sizeof(*s));
	if (dfd < 0)
		return -1;
	/* One byte more than a well-formed file can be: the parser says so. */
	r = image_read_at(dfd, IMAGE_SIG_FILE, IMAGE_SIG_TEXT_MAX + 1, &text, &len, err);
	close(dfd);
	if (r < 0)
		return errno == ENOENT ? 0 : verr_wrap(err, "image %s", dir);
	r = image_sigs_parse(text, len, s, err);
	free(text);
	return r;
}

int image_sigs_write(const char *dir, const struct image_sigs *s, struct verr *err)
{
	char text[IMAGE_SIG_TEXT_MAX + 1];
	int dfd = open_image_dir(dir, err), r;

	if (dfd < 0)
		return -1;
	image_sigs_format(s, text);
	r = image_write_at(dfd, IMAGE_SIG_FILE, text, strlen(text), 0644, true, err);
	close(dfd);
	return r;
}

/* ------------------------------------------------------------------- keys */

int image_key_generate(const char *path, char pub[CLUSTER_KEY_TEXT], struct verr *err)
{
	unsigned char seed[32], pk[32], sk[64];
	char line[SK_LEN + 1], pubpath[4096], publine[CLUSTER_KEY_TEXT + 1];
	int fd;

	if (strlen(path) + 5 > sizeof(pubpath))
		return verr_set(err, "%s: path too long", path);
	snprintf(pubpath, sizeof(pubpath), "%s.pub", path);
	if (sodium_init() < 0)
		return verr_set(err, "libsodium does not start");
	randombytes_buf(seed, sizeof(seed));
	crypto_sign_seed_keypair(pk, sk, seed);
	memcpy(line, SK_HEAD, sizeof(SK_HEAD) - 1);
	hex_encode(seed, 32, line + sizeof(SK_HEAD) - 1);
	line[SK_LEN - 1] = '\n';
	sodium_memzero(seed, sizeof(seed));
	sodium_memzero(sk, sizeof(sk));
	/* Never over an existing key: losing one is losing what it signed. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		sodium_memzero(line, sizeof(line));
		return verr_errno(err, "cannot create %s", path);
	}
	if (fchmod(fd, 0600) < 0 || write(fd, line, SK_LEN) != (ssize_t)SK_LEN || fsync(fd) < 0) {
		verr_errno(err, "cannot write %s", path);
		close(fd);
		unlink(path);
		sodium_memzero(line, sizeof(line));
		return -1;
	}
	close(fd);
	sodium_memzero(line, sizeof(line));
	cluster_key_format(pk, pub);
	snprintf(publine, sizeof(publine), "%s\n", pub);
	fd = open(pubpath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, publine, strlen(publine)) != (ssize_t)strlen(publine) || fsync(fd) < 0) {
		verr_errno(err, "cannot write %s", pubpath);
		if (fd >= 0) {
			close(fd);
			unlink(pubpath);
		}
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}

int image_key_load(const char *path, uint8_t sk[64], struct verr *err)
{
	char buf[SK_LEN + 2], probe[CLUSTER_KEY_TEXT + 1];
	unsigned char seed[32], pk[32];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return verr_errno(err, "key %s: cannot open it%s", path, errno == ELOOP ? " (a symlink: give the file itself)" : "");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return verr_set(err, "key %s: not a regular file; refused", path);
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return verr_errno(err, "key %s: cannot read it", path);
	snprintf(probe, sizeof(probe), "%.*s", (int)(n < (ssize_t)CLUSTER_KEY_TEXT ? n : CLUSTER_KEY_TEXT - 1), buf);
	if (!strncmp(probe, "ed25519:", 8))
		return verr_set(err, "key %s is a public key; sign with the secret key beside it (without .pub)", path);
	/* A secret anyone else could read is no longer the signer's alone. */
	if (st.st_uid != geteuid())
		return verr_set(err, "key %s belongs to uid %u, not to you (uid %u); refused", path, (unsigned)st.st_uid,
				(unsigned)geteuid());
	if (st.st_mode & 077)
		return verr_set(err, "key %s has mode %04o: others may read or change it; a secret key must be 0600 "
				"(chmod 600 %s, and make a new key if others could have read it)", path,
				(unsigned)(st.st_mode & 07777), path);
	if (n != (ssize_t)SK_LEN || memcmp(buf, SK_HEAD, sizeof(SK_HEAD) - 1) || buf[SK_LEN - 1] != '\n' ||
	    !lowhex(buf + sizeof(SK_HEAD) - 1, 64)) {
		sodium_memzero(buf, sizeof(buf));
		return verr_set(err, "key %s: %zd bytes, not a vhpc image secret key (one line '%s<64 hex digits>', "
				"%zu bytes, as `vhpc image keygen` writes)", path, n, SK_HEAD, SK_LEN);
	}
	if (sodium_init() < 0 || hex_decode_n(buf + sizeof(SK_HEAD) - 1, 64, seed, 32) < 0) {
		sodium_memzero(buf, sizeof(buf));
		return verr_set(err, "key %s: bad hex", path);
	}
	sodium_memzero(buf, sizeof(buf));
	crypto_sign_seed_keypair(pk, sk, seed);
	sodium_memzero(seed, sizeof(seed));
	return 0;
}

/* ---------------------------------------------------------------- policy */

static bool trusted(const struct cluster_images *p, const uint8_t key[32])
{
	for (size_t i = 0; i < p->nkeys; i++)
		if (!memcmp(p->keys[i], key, 32))
			return true;
	return false;
}

int image_sig_require(const struct image_info *img, const struct cluster_images *p, struct verr *err)
{
	struct image_sigs s;
	char key[CLUSTER_KEY_TEXT], why[256] = "";
	int untrusted = 0, invalid = 0;

	if (!p->require_signed)
		return 0;
	if (image_sigs_read(img->dir, &s, err) < 0)
		return verr_wrap(err, "image %s (%.12s): its signatures cannot be read; refused, as this node requires "
				 "signed images", img->name, img->id);
	if (s.n == 0)
		return verr_set(err, "image %s (%.12s) is not signed, and this node requires signed images "
				"(images.require_signed in its cluster file); refused", img->name, img->id);
	for (int i = 0; i < s.n; i++) {
		bool t = trusted(p, s.v[i].key), ok = image_sig_valid(&s.v[i], img->id);

		if (t && ok)
			return 0;
		cluster_key_format(s.v[i].key, key);
		if (t) {
			invalid++;
			snprintf(why, sizeof(why), "the signature by trusted key %.24s... does not verify for this image's id "
				 "(a signature of another image, or a damaged one)", key);
		} else if (!invalid) {
			untrusted++;
			snprintf(why, sizeof(why), "signed only by keys this node does not trust (%.24s...%s; its cluster file's "
				 "images.trusted_keys)", key, s.n > 1 ? " and others" : "");
		}
	}
	(void)untrusted;
	return verr_set(err, "image %s (%.12s): %s; refused, as this node requires signed images", img->name, img->id, why);
}
