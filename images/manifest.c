/* The manifest that names an image: one line per entry, sorted by path,
 *   d MODE - - PATH | f MODE SIZE SHA256 PATH | l MODE - TARGET PATH
 * and the image id is the sha256 of that text.  Times and owners are left
 * out on purpose: they differ between builds of the same content. */
#include "lib/bytes.h"
#include "lib/err.h"
#include "image_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct mf {
	char *text;
	size_t len, cap;
	uint64_t bytes;
	long files;
};

static int mf_add(struct mf *m, const char *line, struct verr *err)
{
	size_t n = strlen(line);

	if (m->len + n + 1 > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 1 << 16;
		char *nt;

		while (ncap < m->len + n + 1)
			ncap *= 2;
		nt = realloc(m->text, ncap);
		if (!nt)
			return verr_set(err, "out of memory");
		m->text = nt;
		m->cap = ncap;
	}
	memcpy(m->text + m->len, line, n + 1);
	m->len += n;
	return 0;
}

static int hash_file(int dirfd, const char *name, char hex[65], struct verr *err)
{
	crypto_hash_sha256_state h;
	unsigned char buf[1 << 16], d[32];
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return verr_errno(err, "cannot read %s", name);
	crypto_hash_sha256_init(&h);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crypto_hash_sha256_update(&h, buf, n);
	close(fd);
	if (n < 0)
		return verr_errno(err, "cannot read %s", name);
	crypto_hash_sha256_final(&h, d);
	hex_encode(d, 32, hex);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int walk(struct mf *m, int dirfd, const char *rel, int depth, struct verr *err)
{
	struct dirent **ents;
	int n, r = 0;

	if (depth > 64)
		return verr_set(err, "%s: directory tree too deep", rel);
	/* scandir wants a path; /proc/self/fd keeps the walk on this fd. */
	{
		char fdpath[64];

		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", dirfd);
		n = scandir(fdpath, &ents, NULL, by_name);
	}
	if (n < 0)
		return verr_errno(err, "cannot list %s", *rel ? rel : "/");
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		char path[PATH_MAX], line[PATH_MAX * 2 + 128];
		struct stat st;

		if (r < 0 || !strcmp(name, ".") || !strcmp(name, ".."))
			goto next;
		if (depth == 0 && (!strcmp(name, "manifest") || !strcmp(name, "info.json") || name[0] == '.'))
			goto next;
		snprintf(path, sizeof(path), "%s/%s", rel, name);
		if (strchr(name, '\n') || strchr(name, ' ')) {
			r = verr_set(err, "%s: names with spaces or newlines are not allowed in images", path);
			goto next;
		}
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = verr_errno(err, "cannot stat %s", path);
			goto next;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub;

			snprintf(line, sizeof(line), "d %04o - - %s\n", st.st_mode & 07777, path);
			if (mf_add(m, line, err) < 0) {
				r = -1;
				goto next;
			}
			sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				r = verr_errno(err, "cannot open %s", path);
				goto next;
			}
			r = walk(m, sub, path, depth + 1, err);
			close(sub);
		} else if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t tl = readlinkat(dirfd, name, target, sizeof(target) - 1);

			if (tl < 0) {
				r = verr_errno(err, "readlink %s", path);
				goto next;
			}
			target[tl] = 0;
			snprintf(line, sizeof(line), "l 0777 - %s %s\n", target, path);
			r = mf_add(m, line, err);
			m->files++;
		} else if (S_ISREG(st.st_mode)) {
			char hex[65];

			if (hash_file(dirfd, name, hex, err) < 0) {
				r = -1;
				goto next;
			}
			snprintf(line, sizeof(line), "f %04o %lld %s %s\n", st.st_mode & 07777,
				 (long long)st.st_size, hex, path);
			r = mf_add(m, line, err);
			m->bytes += st.st_size;
			m->files++;
		} else {
			r = verr_set(err, "%s: only files, directories and symlinks belong in an image", path);
		}
next:
		free(ents[i]);
	}
	free(ents);
	return r;
}

int image_manifest(const char *root, char **text, size_t *len, char id[65],
		   uint64_t *bytes, long *files, struct verr *err)
{
	struct mf m = { 0 };
	unsigned char d[32];
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return verr_errno(err, "cannot open %s", root);
	if (walk(&m, fd, "", 0, err) < 0 || mf_add(&m, "", err) < 0) {
		close(fd);
		free(m.text);
		return -1;
	}
	close(fd);
	crypto_hash_sha256((unsigned char *)d, (const unsigned char *)m.text, m.len);
	hex_encode(d, 32, id);
	*text = m.text;
	*len = m.len;
	if (bytes)
		*bytes = m.bytes;
	if (files)
		*files = m.files;
	return 0;
}
