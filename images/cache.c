/*
 * A node's image cache: <cache>/<id>/ as image_pull made them, each with
 * a .used file whose time is when a job last started from it.  The cache
 * keeps to a size by removing the least recently used images, never one a
 * job holds (the caller says which) and never one still mounted.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "image_int.h"
#include "images/images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long used_time(const char *cache, const char *id)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s/.used", cache, id);
	if (lstat(path, &st) == 0)
		return st.st_mtime;
	snprintf(path, sizeof(path), "%s/%s/info.json", cache, id);
	return lstat(path, &st) == 0 ? st.st_mtime : 0;
}

static int by_used(const void *a, const void *b)
{
	const struct image_cached *x = a, *y = b;

	return (x->used > y->used) - (x->used < y->used);
}

int image_cache_list(const char *cache, struct image_cached **out, size_t *n, struct verr *err)
{
	struct image_cached *v = NULL;
	size_t cnt = 0, cap = 0;
	DIR *d;

	*out = NULL;
	*n = 0;
	if (!(d = opendir(cache)))
		return errno == ENOENT ? 0 : verr_errno(err, "cannot list %s", cache);
	for (struct dirent *e; (e = readdir(d));) {
		struct image_info img;
		struct verr ignore;

		if (!image_id_ok(e->d_name) || image_load(cache, e->d_name, &img, &ignore) < 0)
			continue;
		if (grow(&v, &cap, cnt + 1, sizeof(*v), 16) < 0) {
			free(v);
			closedir(d);
			return verr_set(err, "out of memory");
		}
		memset(&v[cnt], 0, sizeof(v[cnt]));
		snprintf(v[cnt].id, sizeof(v[cnt].id), "%s", img.id);
		snprintf(v[cnt].name, sizeof(v[cnt].name), "%s", img.name);
		v[cnt].bytes = img.bytes;
		v[cnt].used = used_time(cache, img.id);
		cnt++;
	}
	closedir(d);
	if (cnt)
		qsort(v, cnt, sizeof(*v), by_used);
	*out = v;
	*n = cnt;
	return 0;
}

void image_cache_touch(const struct image_info *img)
{
	int dfd = open(img->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fd;

	if (dfd < 0)
		return;
	/* Made once, then only its time changes: never through a link. */
	fd = image_openat(dfd, ".used", O_WRONLY | O_CREAT | O_EXCL, 0644, NULL);
	if (fd >= 0)
		close(fd);
	else if (errno == EEXIST)
		utimensat(dfd, ".used", NULL, AT_SYMLINK_NOFOLLOW);
	close(dfd);
}

static bool kept(const char *id, const char *const *keep, int nkeep)
{
	for (int i = 0; i < nkeep; i++)
		if (keep[i] && !strcmp(keep[i], id))
			return true;
	return false;
}

/* Out of the way by one rename (so no job finds half of it), then gone. */
static int remove_image(const char *cache, const char *id, struct verr *err)
{
	char from[PATH_MAX], to[PATH_MAX + 32];
	struct image_info img;

	if (image_load(cache, id, &img, err) == 0 && image_unmount(&img, err) < 0)
		return -1;
	snprintf(from, sizeof(from), "%s/%s", cache, id);
	snprintf(to, sizeof(to), "%s/.evict-%s-%d", cache, id, (int)getpid());
	if (rename(from, to) < 0)
		return verr_errno(err, "cannot move %s out of the cache", from);
	return rm_rf(to, err);
}

int image_cache_evict(const char *cache, uint64_t limit, uint64_t room, const char *const *keep, int nkeep,
		      struct verr *err)
{
	struct image_cached *v;
	uint64_t total = 0;
	size_t n;

	if (image_cache_list(cache, &v, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		total += v[i].bytes;
	for (size_t i = 0; i < n && total + room > limit; i++) {
		struct verr e;
		char sz[32];

		if (kept(v[i].id, keep, nkeep))
			continue;
		if (remove_image(cache, v[i].id, &e) < 0) {
			log_warn("image cache: cannot evict %.12s: %s", v[i].id, e.msg);
			continue;
		}
		total -= v[i].bytes;
		log_info("image cache: evicted %.12s (%s, %s), least recently used", v[i].id, v[i].name,
			 fmt_size(v[i].bytes, sz, sizeof(sz)));
	}
	free(v);
	if (total + room > limit) {
		char a[32], b[32], c[32];

		return verr_set(err, "the image cache %s cannot hold %s more: %s of images in use by jobs, limit %s",
				cache, fmt_size(room, a, sizeof(a)), fmt_size(total, b, sizeof(b)),
				fmt_size(limit, c, sizeof(c)));
	}
	return 0;
}

int image_cache_remove(const char *cache, const char *id, struct verr *err)
{
	if (!image_id_ok(id))
		return verr_set(err, "'%.80s' is not an image id", id);
	return remove_image(cache, id, err);
}

int image_cache_sweep(const char *cache, struct verr *err)
{
	DIR *d = opendir(cache);
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : verr_errno(err, "cannot list %s", cache);
	for (struct dirent *e; (e = readdir(d));) {
		char path[PATH_MAX];
		struct verr e2;

		if (strncmp(e->d_name, ".pull-", 6) && strncmp(e->d_name, ".evict-", 7))
			continue;
		snprintf(path, sizeof(path), "%s/%s", cache, e->d_name);
		if (rm_rf(path, &e2) < 0) {
			log_warn("image cache: %s", e2.msg);
			rc = -1;
		} else {
			log_info("image cache: removed %s, left by an interrupted pull or eviction", e->d_name);
		}
	}
	closedir(d);
	return rc < 0 ? verr_set(err, "image cache %s: some remains could not be removed", cache) : 0;
}

int image_cache_unmount_all(const char *cache, struct verr *err)
{
	struct image_cached *v;
	size_t n;
	int rc = 0;

	if (image_cache_list(cache, &v, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct image_info img;
		struct verr e;

		if (image_load(cache, v[i].id, &img, &e) == 0 && image_unmount(&img, &e) < 0) {
			*err = e;
			rc = -1;
		}
	}
	free(v);
	return rc;
}
