/*
 * The checkpoint folder on this node (issue 36; nodeagent/README.md,
 * "Checkpoints"): <dir>/<name>/ and the part file that seals what one
 * node wrote there.  Root writes here on behalf of a job whose guests
 * and user are hostile, so every step is a descriptor: the folder is
 * opened once, without following a link, and must be root's and closed
 * to others; everything under it is reached with openat and O_NOFOLLOW,
 * one component at a time, and a name is never a path.
 */
#include "lib/ckptname.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/fsutil.h"
#include "nodeagent/nodeagent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUMS_MAX (1u << 20)     /* a part file's size: thousands of lines */
#define HASH_BUF (1u << 20)

/* fd is a dir of ours no one else may enter or change. */
static int root_only(int fd, const char *what, struct verr *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return verr_errno(err, "%s", what);
	if (!S_ISDIR(st.st_mode))
		return verr_set(err, "%s: not a directory", what);
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		return verr_set(err, "%s: not root's with mode 0700 (owner %u, mode %04o): refused, "
				"a checkpoint folder others can change could be swapped under root",
				what, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}

int na_ckpt_root_open(const char *dir, bool create, struct verr *err)
{
	int fd;

	if (!dir || dir[0] != '/')
		return verr_set(err, "checkpoints.dir '%s': not an absolute path", dir ? dir : "");
	if (create && mkdir_p(dir, 0700, err) < 0)
		return verr_wrap(err, "checkpoint folder %s", dir);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "checkpoint folder %s", dir);
	if (root_only(fd, dir, err) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int na_ckpt_subdir(int dirfd, const char *name, bool create, struct verr *err)
{
	int fd;

	if (create && mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "%s", name);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP || errno == ENOTDIR
			       ? verr_set(err, "%s: not a directory (a link is never followed)", name)
			       : verr_errno(err, "%s", name);
	if (root_only(fd, name, err) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int na_ckpt_open(int root, const char *name, bool create, struct verr *err)
{
	if (!ckpt_name_ok(name))
		return verr_set(err, "'%.64s' is not a checkpoint name ([a-z0-9][a-z0-9.-]{0,63})", name ? name : "");
	return na_ckpt_subdir(root, name, create, err);
}

int na_ckpt_remove(int dirfd, const char *name, struct verr *err)
{
	return rm_rf_at_fd(dirfd, name, err);
}

void na_ckpt_part_name(int first, char *buf, size_t len)
{
	snprintf(buf, len, "part.g%d.sha256", first);
}

/* A relative name of the part: one or two components of [A-Za-z0-9._-],
 * neither "." nor "..": what the agent writes, so anything else in a part
 * file is an attack or damage. */
static bool rel_ok(const char *s)
{
	int comps = 1;
	size_t n = strlen(s);

	if (n == 0 || n > 200 || s[0] == '/' || s[n - 1] == '/')
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '/') {
			if (p[1] == '/' || ++comps > 2)
				return false;
			continue;
		}
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-'))
			return false;
	}
	for (const char *c = s; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
		if (!strncmp(c, ".", 1) && (c[1] == '/' || c[1] == 0 || (c[1] == '.' && (c[2] == '/' || c[2] == 0))))
			return false;
	return true;
}

/* The machine, not the checkpoint, is short of something: the part may be
 * whole, and a later attempt can tell. */
bool na_ckpt_short_errno(int e)
{
	return e == ENOMEM || e == EMFILE || e == ENFILE || e == EINTR || e == EAGAIN;
}

/* rel (rel_ok) under dirfd, read-only, a regular file, no link followed:
 * -2 when the machine is short of something (na_ckpt_short_errno). */
static int open_rel(int dirfd, const char *rel, struct verr *err)
{
	char dir[201];
	const char *slash = strchr(rel, '/');
	int dfd = dirfd, fd;
	struct stat st;

	if (slash) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - rel), rel);
		dfd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0) {
			verr_errno(err, "%s", dir);
			return na_ckpt_short_errno(errno) ? -2 : -1;
		}
		rel = slash + 1;
	}
	fd = openat(dfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (dfd != dirfd)
		close(dfd);
	if (fd < 0) {
		verr_errno(err, "%s", rel);
		return na_ckpt_short_errno(errno) ? -2 : -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return verr_set(err, "%s: not a regular file", rel);
	}
	return fd;
}

/* sha256 of fd's contents (holes read as zeros) and its size; -2 when
 * there was no memory to read them with. */
static int hash_fd(int fd, char hex[65], uint64_t *size, struct verr *err)
{
	crypto_hash_sha256_state st;
	unsigned char h[crypto_hash_sha256_BYTES];
	unsigned char *buf = malloc(HASH_BUF);
	ssize_t n;

	if (!buf) {
		verr_set(err, "out of memory");
		return -2;
	}
	*size = 0;
	crypto_hash_sha256_init(&st);
	while ((n = read(fd, buf, HASH_BUF)) > 0) {
		crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
		*size += (uint64_t)n;
	}
	free(buf);
	if (n < 0)
		return verr_errno(err, "reading");
	crypto_hash_sha256_final(&st, h);
	sodium_bin2hex(hex, 65, h, sizeof(h));
	return 0;
}

int na_ckpt_part_seal(int cfd, int first, const char *const *rel, int n, struct verr *err)
{
	char part[64], tmp[80], hex[65];
	size_t cap = 256, len = 0;
	char *text = malloc(cap);
	int fd = -1, rc = -1;

	if (!text)
		return verr_set(err, "out of memory");
	text[0] = 0;
	/* Comment lines, which sha256sum -c skips, carry the sizes: a
	 * truncated file is named before its hash is read. */
	for (int i = 0; i < n; i++) {
		uint64_t size;
		int f;

		if (!rel_ok(rel[i])) {
			verr_set(err, "%s: not a name a part may hold", rel[i]);
			goto out;
		}
		if ((f = open_rel(cfd, rel[i], err)) < 0)
			goto out;
		rc = hash_fd(f, hex, &size, err);
		close(f);
		if (rc < 0) {
			verr_wrap(err, "%s", rel[i]);
			goto out;
		}
		rc = -1;
		if (len + 2 * strlen(rel[i]) + 128 > cap) {
			char *t = realloc(text, cap = 2 * cap + 2 * strlen(rel[i]) + 128);

			if (!t) {
				verr_set(err, "out of memory");
				goto out;
			}
			text = t;
		}
		len += (size_t)sprintf(text + len, "# size %s %llu\n%s  %s\n", rel[i], (unsigned long long)size, hex,
				       rel[i]);
	}
	if (len > SUMS_MAX) {
		verr_set(err, "%d files are more than a part file holds", n);
		goto out;
	}
	na_ckpt_part_name(first, part, sizeof(part));
	snprintf(tmp, sizeof(tmp), ".%s.tmp", part);
	unlinkat(cfd, tmp, 0);
	/* Written last and renamed into place: a part file that exists is
	 * whole, and so is every file it names. */
	fd = openat(cfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		verr_errno(err, "%s", tmp);
		goto out;
	}
	if (write_full(fd, text, len) < 0 || fsync(fd) < 0) {
		verr_errno(err, "%s", tmp);
		unlinkat(cfd, tmp, 0);
		goto out;
	}
	if (renameat(cfd, tmp, cfd, part) < 0 || fsync(cfd) < 0) {
		verr_errno(err, "%s", part);
		unlinkat(cfd, tmp, 0);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(text);
	return rc;
}

int na_ckpt_part_verify(int cfd, int first, struct verr *err)
{
	char part[64], *text, *save = NULL, *want_rel = NULL;
	unsigned long long want_size = 0;
	bool have_size = false;
	int fd, files = 0, rc = -1;
	ssize_t n;

	na_ckpt_part_name(first, part, sizeof(part));
	if ((fd = open_rel(cfd, part, err)) < 0) {
		verr_wrap(err, "this node's part of the checkpoint is not whole (its part file is written last)");
		return fd;
	}
	text = malloc(SUMS_MAX + 1);
	if (!text) {
		close(fd);
		verr_set(err, "out of memory");
		return -2;
	}
	n = read(fd, text, SUMS_MAX + 1);
	close(fd);
	if (n < 0 || n > SUMS_MAX) {
		free(text);
		if (n > SUMS_MAX)
			return verr_set(err, "%s: larger than %u bytes", part, SUMS_MAX);
		verr_errno(err, "%s", part);
		return na_ckpt_short_errno(errno) ? -2 : -1;
	}
	text[n] = 0;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char rel[256], hex[65], got[65];
		unsigned long long size;
		uint64_t have;
		int f, h;

		if (sscanf(l, "# size %255s %llu", rel, &size) == 2 && rel_ok(rel)) {
			free(want_rel);
			want_rel = strdup(rel);
			want_size = size;
			have_size = want_rel != NULL;
			continue;
		}
		if (strlen(l) < 67 || l[64] != ' ' || l[65] != ' ' || sscanf(l, "%64[0-9a-f]", hex) != 1 ||
		    strlen(hex) != 64 || !rel_ok(l + 66)) {
			verr_set(err, "%s: line '%.80s' is not a sha256 and a name of the part", part, l);
			goto bad;
		}
		snprintf(rel, sizeof(rel), "%s", l + 66);
		if ((f = open_rel(cfd, rel, err)) < 0) {
			verr_wrap(err, "the checkpoint's file %s, listed in %s", rel, part);
			rc = f;
			goto bad;
		}
		if (have_size && !strcmp(want_rel, rel)) {
			struct stat st;

			if (fstat(f, &st) == 0 && (unsigned long long)st.st_size != want_size) {
				close(f);
				verr_set(err, "the checkpoint's file %s has %lld bytes, %s says %llu: it was changed "
					 "or truncated", rel, (long long)st.st_size, part, want_size);
				goto bad;
			}
		}
		h = hash_fd(f, got, &have, err);
		close(f);
		if (h < 0) {
			verr_wrap(err, "%s", rel);
			rc = h;
			goto bad;
		}
		if (strcmp(got, hex)) {
			verr_set(err, "the checkpoint's file %s does not match its sha256 in %s: it was changed "
				 "after it was saved", rel, part);
			goto bad;
		}
		files++;
		have_size = false;
	}
	free(want_rel);
	free(text);
	if (files == 0)
		return verr_set(err, "%s names no file", part);
	return 0;
bad:
	free(want_rel);
	free(text);
	return rc;
}
