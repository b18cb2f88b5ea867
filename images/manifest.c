/* The manifest that names an image: one line per entry, sorted by path,
 *   d MODE - - PATH | f MODE SIZE SHA256 PATH | l MODE - TARGET PATH
 * (PATH is the rest of the line, so it may hold spaces; a TARGET may not)
 * and the image id is the sha256 of that text.  Times and owners are left
 * out on purpose: they differ between builds of the same content. */
#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/grow.h"
#include "image_int.h"
#include "images/images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdbool.h>
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

	if (grow(&m->text, &m->cap, m->len + n + 1, 1, 1 << 16) < 0)
		return verr_set(err, "out of memory");
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
		/* The path is a line's last field: it may hold spaces, not newlines. */
		if (strchr(name, '\n')) {
			r = verr_set(err, "%s: names with newlines are not allowed in images", path);
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
			/* The target is a field of its own: a space would move the path. */
			if (!*target || strchr(target, '\n') || strchr(target, ' ')) {
				r = verr_set(err, "%s: symlink targets with spaces or newlines are not allowed in images", path);
				goto next;
			}
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

/* ------------------------------------------------------------ reading */

bool image_id_ok(const char *s)
{
	return sha256_hex_ok(s);
}

/* A path as the walk writes it: "/" then components, none empty, "." or
 * "..", so that it can only name something inside the image dir. */
static bool mf_path_ok(const char *p)
{
	size_t n = strlen(p);

	if (p[0] != '/' || n < 2 || n >= IMAGE_MF_PATH_MAX || p[n - 1] == '/')
		return false;
	for (const char *c = p; c && *c;) {
		const char *next = strchr(c + 1, '/');
		size_t l = (next ? (size_t)(next - c) : strlen(c)) - 1;

		if (l == 0 || (l == 1 && c[1] == '.') || (l == 2 && c[1] == '.' && c[2] == '.'))
			return false;
		c = next;
	}
	return true;
}

/* What an image's folder may hold besides rootfs/'s content, and as what.
 * Every other name there is the node's own (manifest, info.json, .mnt,
 * .used, .lock, and whatever it adds later): a manifest that put a symlink
 * in one's place would have root write, lock or mount through it, and one
 * in a part's place (kvm/rootfs.ext4 -> a host disk) would hand a guest
 * what it points at. */
static const struct {
	const char *path;
	char type;
} mf_parts[] = {
	{ "/rootfs", 'd' }, { "/rootfs.squashfs", 'f' }, { "/rootfs.erofs", 'f' }, { "/kvm", 'd' },
	{ "/kvm/vmlinuz", 'f' }, { "/kvm/vmlinux", 'f' }, { "/kvm/initramfs.img", 'f' },
	{ "/kvm/kernel.version", 'f' }, { "/kvm/rootfs.ext4", 'f' },
};

static int mf_place_ok(const struct image_mf_ent *e, size_t lineno, struct verr *err)
{
	static const char *const kind[] = { ['d'] = "folder", ['f'] = "file", ['l'] = "symlink" };

	if (!strncmp(e->path, "/rootfs/", 8))
		return 0;
	for (size_t i = 0; i < sizeof(mf_parts) / sizeof(mf_parts[0]); i++)
		if (!strcmp(e->path, mf_parts[i].path))
			return e->type == mf_parts[i].type ? 0
				: verr_set(err, "manifest line %zu: %s is a %s in an image, not a %s; refused", lineno,
					   e->path, kind[(unsigned char)mf_parts[i].type], kind[(unsigned char)e->type]);
	return verr_set(err, "manifest line %zu: '%.200s' is not part of an image (it holds " IMAGE_MF_PARTS
			"; every other name in its folder is the node's own); refused", lineno, e->path);
}

static int split5(char *line, char *f[5])
{
	for (int i = 0; i < 4; i++) {
		char *sp = strchr(line, ' ');

		if (!sp)
			return -1;
		*sp = 0;
		f[i] = line;
		line = sp + 1;
	}
	/* The path is the rest of the line, spaces and all. */
	f[4] = line;
	return 0;
}

static int by_path(const void *a, const void *b)
{
	return strcmp((*(const struct image_mf_ent *const *)a)->path, (*(const struct image_mf_ent *const *)b)->path);
}

/* No path twice, and every entry's parent folder listed (as a folder). */
static int mf_check_tree(struct image_mf *m, struct verr *err)
{
	struct image_mf_ent **s = malloc((m->n ? m->n : 1) * sizeof(*s));
	int r = 0;

	if (!s)
		return verr_set(err, "out of memory");
	for (size_t i = 0; i < m->n; i++)
		s[i] = &m->v[i];
	qsort(s, m->n, sizeof(*s), by_path);
	for (size_t i = 1; i < m->n && r == 0; i++)
		if (!strcmp(s[i]->path, s[i - 1]->path))
			r = verr_set(err, "manifest: %s is listed twice", s[i]->path);
	for (size_t i = 0; i < m->n && r == 0; i++) {
		const char *slash = strrchr(m->v[i].path, '/');
		struct image_mf_ent key, *kp = &key, **hit;
		char parent[IMAGE_MF_PATH_MAX];

		if (slash == m->v[i].path)
			continue;
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - m->v[i].path), m->v[i].path);
		key.path = parent;
		hit = bsearch(&kp, s, m->n, sizeof(*s), by_path);
		if (!hit || (*hit)->type != 'd' || *hit > &m->v[i])
			r = verr_set(err, "manifest: %s is not inside a folder listed before it", m->v[i].path);
	}
	free(s);
	return r;
}

static int mf_line(struct image_mf *m, char *line, size_t lineno, struct verr *err)
{
	struct image_mf_ent *e = &m->v[m->n];
	char *f[5], *end;
	unsigned long mode;

	if (split5(line, f) < 0 || strlen(f[0]) != 1 || strlen(f[1]) != 4)
		return verr_set(err, "manifest line %zu: expected 'TYPE MODE SIZE HASH PATH'", lineno);
	e->type = f[0][0];
	errno = 0;
	mode = strtoul(f[1], &end, 8);
	if (*end || mode > 07777 || f[1][0] == '-' || f[1][0] == '+')
		return verr_set(err, "manifest line %zu: mode '%s' is not 4 octal digits", lineno, f[1]);
	e->mode = (unsigned)mode;
	e->path = f[4];
	if (!mf_path_ok(e->path))
		return verr_set(err, "manifest line %zu: '%.200s' is not a plain path inside the image", lineno, e->path);
	e->size = 0;
	e->sha = NULL;
	e->target = NULL;
	switch (e->type) {
	case 'd':
		if (strcmp(f[2], "-") || strcmp(f[3], "-"))
			return verr_set(err, "manifest line %zu: a folder has no size or hash", lineno);
		break;
	case 'l':
		if (mode != 0777 || strcmp(f[2], "-") || !*f[3] || strlen(f[3]) >= IMAGE_MF_PATH_MAX)
			return verr_set(err, "manifest line %zu: a symlink is 'l 0777 - TARGET PATH'", lineno);
		e->target = f[3];
		m->files++;
		break;
	case 'f': {
		unsigned long long sz;

		if (!*f[2] || f[2][strspn(f[2], "0123456789")] || strlen(f[2]) > 15 ||
		    (sz = strtoull(f[2], NULL, 10)) > IMAGE_MF_FILE_MAX)
			return verr_set(err, "manifest line %zu: size '%.20s' is not a number up to 2^40", lineno, f[2]);
		if (!sha256_hex_ok(f[3]))
			return verr_set(err, "manifest line %zu: '%.70s' is not a sha256 in hex", lineno, f[3]);
		/* Guests gain nothing from them; a node would be handed them. */
		if (mode & 06000)
			return verr_set(err, "manifest line %zu: %.200s is setuid or setgid; images hold neither", lineno, e->path);
		e->size = sz;
		e->sha = f[3];
		m->bytes += sz;
		m->files++;
		break;
	}
	default:
		return verr_set(err, "manifest line %zu: type '%c' is not d, f or l", lineno, e->type);
	}
	if (mf_place_ok(e, lineno, err) < 0)
		return -1;
	m->n++;
	return 0;
}

int image_mf_parse(const char *text, size_t len, struct image_mf *m, struct verr *err)
{
	size_t lines = 0, lineno = 0;
	char *p;

	memset(m, 0, sizeof(*m));
	if (len > IMAGE_MF_TEXT_MAX)
		return verr_set(err, "manifest: %zu bytes, more than the %u allowed", len, IMAGE_MF_TEXT_MAX);
	if (memchr(text, 0, len))
		return verr_set(err, "manifest: holds a NUL byte");
	if (len && text[len - 1] != '\n')
		return verr_set(err, "manifest: the last line does not end with a newline");
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	if (lines > IMAGE_MF_ENTRIES_MAX)
		return verr_set(err, "manifest: %zu entries, more than the %u allowed", lines, IMAGE_MF_ENTRIES_MAX);
	m->text = malloc(len + 1);
	m->v = calloc(lines ? lines : 1, sizeof(*m->v));
	if (!m->text || !m->v) {
		image_mf_free(m);
		return verr_set(err, "out of memory");
	}
	memcpy(m->text, text, len);
	m->text[len] = 0;
	for (p = m->text; *p;) {
		char *nl = strchr(p, '\n');

		*nl = 0;
		if (mf_line(m, p, ++lineno, err) < 0) {
			image_mf_free(m);
			return -1;
		}
		p = nl + 1;
	}
	if (mf_check_tree(m, err) < 0) {
		image_mf_free(m);
		return -1;
	}
	return 0;
}

void image_mf_free(struct image_mf *m)
{
	free(m->text);
	free(m->v);
	memset(m, 0, sizeof(*m));
}
