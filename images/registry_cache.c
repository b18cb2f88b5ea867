/*
 * The layer cache of registry pulls: every blob skopeo fetched, by digest,
 * in <store>/.layer-cache/sha256/<hex> (skopeo's --dest-shared-blob-dir
 * layout).  skopeo writes a blob beside the import's own layout and
 * renames it in only once its digest checked, so the cache holds whole,
 * checked blobs only, and a second import finds the layers it shares with
 * an earlier one there and does not fetch them.  The cache lives in the
 * store, so it is on the store's file system (skopeo's rename and our
 * links need that), and is private to the user who imports (root, on a
 * node).  Size: trimmed to a limit after each import, least recently used
 * blobs first.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "images/images.h"
#include "images/registry_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A folder of ours: made 0700 if missing; never a symlink, never someone
 * else's. */
static int own_dir(const char *path, struct verr *err)
{
	struct stat st;
	int fd;

	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "cannot make %s", path);
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return verr_errno(err, "%s (the layer cache) is not a folder", path);
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
		close(fd);
		return verr_set(err, "%s (the layer cache) belongs to uid %u, not to this user", path, (unsigned)st.st_uid);
	}
	if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0) {
		close(fd);
		return verr_errno(err, "chmod %s", path);
	}
	close(fd);
	return 0;
}

int image_reg_cache_dir(char *dir, size_t len, struct verr *err)
{
	char store[PATH_MAX], sub[PATH_MAX + 32];

	image_store_dir(store, sizeof(store));
	if (mkdir_p(store, 0755, err) < 0)
		return -1;
	snprintf(dir, len, "%s/.layer-cache", store);
	snprintf(sub, sizeof(sub), "%s/sha256", dir);
	return own_dir(dir, err) < 0 || own_dir(sub, err) < 0 ? -1 : 0;
}

bool image_reg_cache_has(const char *dir, const char *digest)
{
	char path[PATH_MAX + 100];
	struct stat st;

	if (!image_reg_digest_ok(digest))
		return false;
	snprintf(path, sizeof(path), "%s/sha256/%s", dir, digest + 7);
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* cache/sha256/<hex> as layout/blobs/sha256/<hex>, its time now. */
static int link_blob(const char *dir, const char *layout, const char *digest, struct verr *err)
{
	char from[PATH_MAX + 100], to[PATH_MAX + 100];

	if (!image_reg_digest_ok(digest))
		return verr_set(err, "the pulled layout names blob '%.80s'", digest);
	snprintf(from, sizeof(from), "%s/sha256/%s", dir, digest + 7);
	snprintf(to, sizeof(to), "%s/blobs/sha256/%s", layout, digest + 7);
	if (link(from, to) < 0 && errno != EEXIST)
		return verr_errno(err, "cannot link %s to %s", from, to);
	/* Used now: the last a trim removes. */
	utimensat(AT_FDCWD, from, NULL, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static const char *first_digest(struct json_object *o, const char *key)
{
	struct json_object *v, *d;

	if (!json_object_object_get_ex(o, key, &v))
		return NULL;
	if (json_object_is_type(v, json_type_array))
		v = json_object_array_get_idx(v, 0);
	return v && json_object_object_get_ex(v, "digest", &d) && json_object_is_type(d, json_type_string)
	       ? json_object_get_string(d) : NULL;
}

int image_reg_cache_link(const char *dir, const char *layout, struct verr *err)
{
	char path[PATH_MAX + 100], *text = NULL;
	struct json_object *idx = NULL, *man = NULL, *layers;
	const char *md, *cd;
	int r = -1;

	snprintf(path, sizeof(path), "%s/blobs/sha256", layout);
	if (mkdir_p(path, 0755, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/index.json", layout);
	if (read_file(path, &text, NULL, 1 << 20, err) < 0)
		return -1;
	idx = json_tokener_parse(text);
	free(text);
	text = NULL;
	if (!idx || !(md = first_digest(idx, "manifests")) || !image_reg_digest_ok(md)) {
		verr_set(err, "%s names no manifest", path);
		goto out;
	}
	if (link_blob(dir, layout, md, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/sha256/%s", dir, md + 7);
	if (read_file(path, &text, NULL, IMAGE_REG_MAX_MANIFEST, err) < 0)
		goto out;
	man = json_tokener_parse(text);
	if (!man || !(cd = first_digest(man, "config")) || !json_object_object_get_ex(man, "layers", &layers) ||
	    !json_object_is_type(layers, json_type_array)) {
		verr_set(err, "the pulled manifest %s has no config or layers", md);
		goto out;
	}
	if (link_blob(dir, layout, cd, err) < 0)
		goto out;
	for (size_t i = 0; i < json_object_array_length(layers); i++) {
		struct json_object *l = json_object_array_get_idx(layers, i), *d;

		if (!json_object_object_get_ex(l, "digest", &d) ||
		    link_blob(dir, layout, json_object_get_string(d), err) < 0)
			goto out;
	}
	r = 0;
out:
	free(text);
	json_object_put(idx);
	json_object_put(man);
	return r;
}

struct cached_blob {
	char hex[65];
	uint64_t size;
	struct timespec used;
};

static int older_first(const void *a, const void *b)
{
	const struct cached_blob *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

int image_reg_cache_trim(const char *dir, uint64_t max, struct verr *err)
{
	char path[PATH_MAX + 100];
	struct cached_blob *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	DIR *d;
	int dfd;

	snprintf(path, sizeof(path), "%s/sha256", dir);
	if (!(d = opendir(path)))
		return verr_errno(err, "cannot read %s", path);
	dfd = dirfd(d);
	for (struct dirent *e; (e = readdir(d));) {
		char dg[80];
		struct stat st;

		snprintf(dg, sizeof(dg), "sha256:%.70s", e->d_name);
		if (!image_reg_digest_ok(dg) || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			struct cached_blob *nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));

			if (!nv) {
				free(v);
				closedir(d);
				return verr_set(err, "out of memory");
			}
			v = nv;
		}
		snprintf(v[n].hex, sizeof(v[n].hex), "%s", e->d_name);
		v[n].size = (uint64_t)st.st_blocks * 512;
		v[n].used = st.st_mtim;
		total += v[n++].size;
	}
	qsort(v, n, sizeof(*v), older_first);
	for (size_t i = 0; i < n && total > max; i++)
		if (unlinkat(dfd, v[i].hex, 0) == 0)
			total -= v[i].size;
	closedir(d);
	free(v);
	return 0;
}
