/*
 * The cluster's image store on vhpc-ctld's disk (imgstore.h).  Objects are
 * immutable once named: an upload grows in tmp/<sha>.part and is renamed
 * into objects/ only when its bytes hash to its name.  A ref is written
 * atomically.  Whether an object was changed on disk afterwards is not
 * this file's to judge: nodes check every file they pull against the
 * manifest, which hashes to the id they were given.
 */
#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "images/images.h"
#include "imgstore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Objects a push named (image_have) and has not tagged yet: a collection
 * leaves them alone for an hour. */
#define PUSH_GRACE_S 3600

struct pending {
	char sha[65];
	time_t until;
};

struct imgstore {
	pthread_mutex_t mu;
	char dir[PATH_MAX - 200];
	struct pending *pend;          /* sorted by sha */
	size_t npend, cappend;
};

static void obj_path(const struct imgstore *s, const char *sha, char *buf, size_t len)
{
	snprintf(buf, len, "%s/objects/%.2s/%s", s->dir, sha, sha);
}

static void part_path(const struct imgstore *s, const char *sha, char *buf, size_t len)
{
	snprintf(buf, len, "%s/tmp/%s.part", s->dir, sha);
}

static void ref_path(const struct imgstore *s, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/refs/%s.json", s->dir, name);
}

int imgstore_open(struct imgstore **out, const char *dir, struct verr *err)
{
	struct imgstore *s = calloc(1, sizeof(*s));
	char path[PATH_MAX];

	if (!s)
		return verr_set(err, "out of memory");
	if (strlen(dir) >= sizeof(s->dir)) {
		free(s);
		return verr_set(err, "image store path %s is too long", dir);
	}
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	for (const char *sub = "objects\0tmp\0refs\0"; *sub; sub += strlen(sub) + 1) {
		snprintf(path, sizeof(path), "%s/%s", dir, sub);
		if (mkdir_p(path, 0700, err) < 0) {
			free(s);
			return -1;
		}
	}
	*out = s;
	return 0;
}

void imgstore_close(struct imgstore *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->mu);
	free(s->pend);
	free(s);
}

static int cmp_pend(const void *a, const void *b)
{
	return strcmp(((const struct pending *)a)->sha, ((const struct pending *)b)->sha);
}

static struct pending *pend_find(struct imgstore *s, const char *sha)
{
	struct pending key;

	snprintf(key.sha, sizeof(key.sha), "%s", sha);
	return s->npend ? bsearch(&key, s->pend, s->npend, sizeof(*s->pend), cmp_pend) : NULL;
}

/* Expired entries out, the new ones in (or renewed); sorted again, each
 * name once.  Holds mu. */
static int pend_add(struct imgstore *s, const char *const *objs, int n, struct verr *err)
{
	time_t now = time(NULL), until = now + PUSH_GRACE_S;
	size_t k = 0;

	if (s->npend + (size_t)n > s->cappend) {
		size_t cap = s->npend + (size_t)n + 1024;
		struct pending *nv = realloc(s->pend, cap * sizeof(*nv));

		if (!nv)
			return verr_set(err, "out of memory");
		s->pend = nv;
		s->cappend = cap;
	}
	for (int i = 0; i < n; i++) {
		snprintf(s->pend[s->npend + (size_t)i].sha, 65, "%s", objs[i]);
		s->pend[s->npend + (size_t)i].until = until;
	}
	s->npend += (size_t)n;
	qsort(s->pend, s->npend, sizeof(*s->pend), cmp_pend);
	for (size_t i = 0; i < s->npend; i++) {
		if (s->pend[i].until <= now)
			continue;
		if (k && !strcmp(s->pend[k - 1].sha, s->pend[i].sha)) {
			if (s->pend[i].until > s->pend[k - 1].until)
				s->pend[k - 1].until = s->pend[i].until;
			continue;
		}
		s->pend[k++] = s->pend[i];
	}
	s->npend = k;
	return 0;
}

int imgstore_missing(struct imgstore *s, const char *const *objs, int n, bool *missing, struct verr *err)
{
	int rc;

	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];

		obj_path(s, objs[i], path, sizeof(path));
		missing[i] = access(path, F_OK) < 0;
	}
	/* Present or not, they are this push's until it tags them. */
	rc = pend_add(s, objs, n, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int finish_object(struct imgstore *s, const char *object, const char *part, struct verr *err)
{
	crypto_hash_sha256_state h;
	unsigned char buf[1 << 16], d[32];
	char hex[65], path[PATH_MAX];
	ssize_t n;
	int fd = open(part, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return verr_errno(err, "cannot read %s", part);
	crypto_hash_sha256_init(&h);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crypto_hash_sha256_update(&h, buf, (size_t)n);
	if (n < 0) {
		close(fd);
		return verr_errno(err, "cannot read %s", part);
	}
	close(fd);
	crypto_hash_sha256_final(&h, d);
	hex_encode(d, 32, hex);
	if (strcmp(hex, object)) {
		unlink(part);
		return verr_set(err, "object %.12s: the bytes sent hash to %.12s; dropped", object, hex);
	}
	snprintf(path, sizeof(path), "%s/objects/%.2s", s->dir, object);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "cannot create %s", path);
	obj_path(s, object, path, sizeof(path));
	if (chmod(part, 0400) < 0 || rename(part, path) < 0)
		return verr_errno(err, "cannot move %s to %s", part, path);
	return 0;
}

int imgstore_put(struct imgstore *s, const char *object, uint64_t size, uint64_t offset,
		 const uint8_t *data, size_t len, uint64_t *next, struct verr *err)
{
	char path[PATH_MAX], part[PATH_MAX];
	struct stat st;
	int fd, rc = -1;

	pthread_mutex_lock(&s->mu);
	obj_path(s, object, path, sizeof(path));
	if (stat(path, &st) == 0) {
		*next = size;
		rc = (uint64_t)st.st_size == size ? 0
			: verr_set(err, "object %.12s: the store holds %lld bytes of it, not %llu", object,
				   (long long)st.st_size, (unsigned long long)size);
		goto out;
	}
	part_path(s, object, part, sizeof(part));
	fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || fstat(fd, &st) < 0) {
		verr_errno(err, "cannot open %s", part);
		if (fd >= 0)
			close(fd);
		goto out;
	}
	*next = (uint64_t)st.st_size;
	if ((uint64_t)st.st_size > size) {
		/* A different upload of a name it does not match: start again. */
		close(fd);
		unlink(part);
		*next = 0;
		rc = 0;
		goto out;
	}
	if (offset != *next || len > size - offset) {
		close(fd);
		rc = len > size - offset && offset == *next
			? verr_set(err, "object %.12s: %zu bytes at %llu run past its size %llu", object, len,
				   (unsigned long long)offset, (unsigned long long)size)
			: 0;
		goto out;
	}
	if (pwrite(fd, data, len, (off_t)offset) != (ssize_t)len) {
		verr_errno(err, "cannot write %s", part);
		close(fd);
		goto out;
	}
	close(fd);
	*next = offset + len;
	if (*next == size && finish_object(s, object, part, err) < 0) {
		*next = 0;
		goto out;
	}
	rc = 0;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int imgstore_read(struct imgstore *s, const char *object, uint64_t offset, uint8_t *buf, size_t max,
		  size_t *len, uint64_t *size, struct verr *err)
{
	char path[PATH_MAX];
	struct stat st;
	ssize_t n = 0;
	int fd;

	obj_path(s, object, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? verr_set(err, "object %.12s is not in the image store", object)
				       : verr_errno(err, "cannot read %s", path);
	if (fstat(fd, &st) < 0) {
		close(fd);
		return verr_errno(err, "cannot read %s", path);
	}
	*size = (uint64_t)st.st_size;
	if (offset < *size) {
		size_t want = *size - offset < max ? (size_t)(*size - offset) : max;

		n = pread(fd, buf, want, (off_t)offset);
		if (n < 0) {
			close(fd);
			return verr_errno(err, "cannot read %s", path);
		}
	}
	close(fd);
	*len = (size_t)n;
	return 0;
}

static int read_object(struct imgstore *s, const char *object, size_t max, char **text, size_t *len,
		       struct verr *err)
{
	char path[PATH_MAX];

	obj_path(s, object, path, sizeof(path));
	return read_file(path, text, len, max, err);
}

/* ---------------------------------------------------------------- refs */

static const char *jstr(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
		? json_object_get_string(v) : NULL;
}

static int64_t jint(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : 0;
}

/* Our own files, read defensively all the same. */
static int ref_read(struct imgstore *s, const char *name, struct imgstore_ref *r, struct verr *err)
{
	char path[PATH_MAX], *text;
	struct json_object *o, *a;
	const char *id, *fmt, *rel;

	memset(r, 0, sizeof(*r));
	ref_path(s, name, path, sizeof(path));
	if (access(path, F_OK) < 0)
		return verr_set(err, "no image named '%s' in the cluster's image store (root pushes one: vhpc image push %s)",
				name, name);
	if (read_file(path, &text, NULL, 1 << 16, err) < 0)
		return -1;
	o = json_tokener_parse(text);
	free(text);
	id = o ? jstr(o, "id") : NULL;
	if (!id || !image_id_ok(id)) {
		json_object_put(o);
		return verr_set(err, "%s: no valid image id", path);
	}
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->id, sizeof(r->id), "%s", id);
	fmt = jstr(o, "format");
	rel = jstr(o, "kernel_release");
	snprintf(r->format, sizeof(r->format), "%s", fmt ? fmt : "tree");
	snprintf(r->kernel_release, sizeof(r->kernel_release), "%s", rel ? rel : "");
	r->pushed = jint(o, "pushed");
	r->uid = (uid_t)jint(o, "uid");
	r->bytes = (uint64_t)jint(o, "bytes");
	r->files = (long)jint(o, "files");
	r->kvm = json_object_object_get_ex(o, "kvm", &a) && json_object_get_boolean(a);
	if (json_object_object_get_ex(o, "previous", &a) && json_object_is_type(a, json_type_array))
		for (size_t i = 0; i < json_object_array_length(a) && r->nprev < IMGSTORE_HISTORY; i++) {
			const char *p = json_object_get_string(json_object_array_get_idx(a, i));

			if (p && image_id_ok(p))
				snprintf(r->prev[r->nprev++], 65, "%s", p);
		}
	json_object_put(o);
	return 0;
}

static int ref_write(struct imgstore *s, const struct imgstore_ref *r, struct verr *err)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	char path[PATH_MAX];
	const char *text;
	int rc;

	json_object_object_add(o, "id", json_object_new_string(r->id));
	json_object_object_add(o, "pushed", json_object_new_int64(r->pushed));
	json_object_object_add(o, "uid", json_object_new_int64(r->uid));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)r->bytes));
	json_object_object_add(o, "files", json_object_new_int64(r->files));
	json_object_object_add(o, "format", json_object_new_string(r->format));
	json_object_object_add(o, "kvm", json_object_new_boolean(r->kvm));
	json_object_object_add(o, "kernel_release", json_object_new_string(r->kernel_release));
	for (int i = 0; i < r->nprev; i++)
		json_object_array_add(a, json_object_new_string(r->prev[i]));
	json_object_object_add(o, "previous", a);
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
	ref_path(s, r->name, path, sizeof(path));
	rc = write_file_atomic(path, text, strlen(text), 0600, err);
	json_object_put(o);
	return rc;
}

/* What the manifest says about the image, and that every file is here;
 * its objects are no push's pending ones any more. */
static int describe(struct imgstore *s, const char *id, struct imgstore_ref *r, struct verr *err)
{
	struct image_mf m;
	char *text, path[PATH_MAX];
	size_t len;
	struct stat st;
	struct pending *p;
	int rc = -1;

	if (read_object(s, id, IMAGE_MF_TEXT_MAX, &text, &len, err) < 0)
		return verr_set(err, "image %.12s: its manifest is not in the store (push it first)", id);
	if ((p = pend_find(s, id)))
		p->until = 0;
	if (image_mf_parse(text, len, &m, err) < 0) {
		free(text);
		return verr_wrap(err, "image %.12s", id);
	}
	free(text);
	snprintf(r->format, sizeof(r->format), "%s", "");
	r->kvm = false;
	r->kernel_release[0] = 0;
	for (size_t i = 0; i < m.n; i++) {
		const struct image_mf_ent *e = &m.v[i];

		if (!strcmp(e->path, "/rootfs") && e->type == 'd')
			snprintf(r->format, sizeof(r->format), "tree");
		else if (!strcmp(e->path, "/rootfs.squashfs") && e->type == 'f')
			snprintf(r->format, sizeof(r->format), "squashfs");
		else if (!strcmp(e->path, "/rootfs.erofs") && e->type == 'f')
			snprintf(r->format, sizeof(r->format), "erofs");
		if (e->type != 'f')
			continue;
		if ((p = pend_find(s, e->sha)))
			p->until = 0;
		obj_path(s, e->sha, path, sizeof(path));
		if (stat(path, &st) < 0 || (uint64_t)st.st_size != e->size) {
			verr_set(err, "image %.12s: %s (object %.12s) is not in the store whole; push again", id, e->path, e->sha);
			goto out;
		}
		if (!strcmp(e->path, "/kvm/kernel.version") && e->size < sizeof(r->kernel_release)) {
			char *v;

			if (read_object(s, e->sha, sizeof(r->kernel_release) - 1, &v, NULL, err) < 0)
				goto out;
			v[strcspn(v, "\n")] = 0;
			snprintf(r->kernel_release, sizeof(r->kernel_release), "%s", v);
			free(v);
			r->kvm = true;
		}
	}
	if (!r->format[0]) {
		verr_set(err, "image %.12s holds no rootfs (folder, squashfs or erofs file)", id);
		goto out;
	}
	r->bytes = m.bytes;
	r->files = m.files;
	rc = 0;
out:
	image_mf_free(&m);
	return rc;
}

int imgstore_tag(struct imgstore *s, const char *name, const char *id, uid_t uid, int64_t now,
		 struct imgstore_ref *out, struct verr *err)
{
	struct imgstore_ref old, r = { 0 };
	struct verr ignore;
	int rc = -1;

	if (!ident_ok(name, 64))
		return verr_set(err, "image name '%.80s': use letters, digits, '.', '_' and '-'", name);
	pthread_mutex_lock(&s->mu);
	if (describe(s, id, &r, err) < 0)
		goto out;
	/* Every object on disk before a name points at them: one sync for
	 * the whole push rather than one per object. */
	{
		int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd < 0 || syncfs(dfd) < 0) {
			verr_errno(err, "syncing the image store %s", s->dir);
			if (dfd >= 0)
				close(dfd);
			goto out;
		}
		close(dfd);
	}
	snprintf(r.name, sizeof(r.name), "%s", name);
	snprintf(r.id, sizeof(r.id), "%s", id);
	r.pushed = now;
	r.uid = uid;
	/* The name's history: what it named before, newest first. */
	if (ref_read(s, name, &old, &ignore) == 0) {
		if (strcmp(old.id, id))
			snprintf(r.prev[r.nprev++], 65, "%s", old.id);
		for (int i = 0; i < old.nprev && r.nprev < IMGSTORE_HISTORY; i++)
			if (strcmp(old.prev[i], id))
				snprintf(r.prev[r.nprev++], 65, "%s", old.prev[i]);
	}
	if (ref_write(s, &r, err) < 0)
		goto out;
	if (out)
		*out = r;
	rc = 0;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int imgstore_lookup(struct imgstore *s, const char *name, struct imgstore_ref *out, struct verr *err)
{
	int rc;

	if (!ident_ok(name, 64))
		return verr_set(err, "image name '%.80s' is not a plain name", name);
	pthread_mutex_lock(&s->mu);
	rc = ref_read(s, name, out, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

bool imgstore_has_image(struct imgstore *s, const char *id)
{
	char path[PATH_MAX];

	if (!image_id_ok(id))
		return false;
	obj_path(s, id, path, sizeof(path));
	return access(path, F_OK) == 0;
}

int imgstore_untag(struct imgstore *s, const char *name, char id[65], struct verr *err)
{
	struct imgstore_ref r;
	char path[PATH_MAX];
	int rc = -1;

	if (!ident_ok(name, 64))
		return verr_set(err, "image name '%.80s' is not a plain name", name);
	pthread_mutex_lock(&s->mu);
	if (ref_read(s, name, &r, err) < 0)
		goto out;
	ref_path(s, name, path, sizeof(path));
	if (unlink(path) < 0) {
		verr_errno(err, "cannot remove %s", path);
		goto out;
	}
	snprintf(id, 65, "%s", r.id);
	rc = 0;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct imgstore_ref *)a)->name, ((const struct imgstore_ref *)b)->name);
}

/* strict: a ref that is there but cannot be read fails the listing (a
 * collection must not lose the image it names); else it is left out. */
static int refs_locked(struct imgstore *s, struct imgstore_ref **out, size_t *n, bool strict, struct verr *err)
{
	char path[PATH_MAX];
	struct imgstore_ref *v = NULL;
	size_t cnt = 0, cap = 0;
	DIR *d;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/refs", s->dir);
	if (!(d = opendir(path)))
		return verr_errno(err, "cannot list %s", path);
	for (struct dirent *e; (e = readdir(d));) {
		char name[70];
		size_t l = strlen(e->d_name);
		struct verr ignore;

		if (l < 6 || l > 69 || strcmp(e->d_name + l - 5, ".json"))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(l - 5), e->d_name);
		if (!ident_ok(name, 64))
			continue;
		if (cnt == cap) {
			struct imgstore_ref *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (!nv) {
				free(v);
				closedir(d);
				return verr_set(err, "out of memory");
			}
			v = nv;
		}
		if (ref_read(s, name, &v[cnt], strict ? err : &ignore) == 0) {
			cnt++;
		} else if (strict) {
			free(v);
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	if (cnt)
		qsort(v, cnt, sizeof(*v), by_name);
	*out = v;
	*n = cnt;
	return 0;
}

int imgstore_refs(struct imgstore *s, struct imgstore_ref **out, size_t *n, struct verr *err)
{
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = refs_locked(s, out, n, false, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* ---------------------------------------------------------- collection */

struct shaset {
	char (*v)[65];
	size_t n, cap;
};

static int set_add(struct shaset *st, const char *sha)
{
	if (st->n == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 4096;
		char (*nv)[65] = realloc(st->v, cap * sizeof(*nv));

		if (!nv)
			return -1;
		st->v = nv;
		st->cap = cap;
	}
	memcpy(st->v[st->n++], sha, 65);
	return 0;
}

static int cmp65(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The objects an image needs: its manifest and every file.  An id with no
 * object, or whose object is no manifest (a job may name any object),
 * keeps nothing but itself.  A manifest that is there but cannot be read
 * now (EMFILE, EIO, ENOMEM) is an error: guessing "nothing" would remove
 * the files of a named or running image. */
static int live_objects(struct imgstore *s, const char *id, struct shaset *set, struct verr *err)
{
	struct image_mf m;
	struct verr e;
	char *text, path[PATH_MAX];
	size_t len;

	if (set_add(set, id) < 0)
		return verr_set(err, "out of memory");
	obj_path(s, id, path, sizeof(path));
	if (access(path, F_OK) < 0 && errno == ENOENT)
		return 0;
	if (read_object(s, id, IMAGE_MF_TEXT_MAX, &text, &len, err) < 0)
		return verr_wrap(err, "image %.12s", id);
	if (image_mf_parse(text, len, &m, &e) < 0) {
		free(text);
		return 0;
	}
	free(text);
	for (size_t i = 0; i < m.n; i++)
		if (m.v[i].type == 'f' && set_add(set, m.v[i].sha) < 0) {
			image_mf_free(&m);
			return verr_set(err, "out of memory");
		}
	image_mf_free(&m);
	return 0;
}

/* Objects are kept by name only (a ref, a held id, a push under way), never
 * by age: a file's mtime can be a few ms ahead of time(NULL) (multigrain
 * timestamps), so no cut-off from the clock can mean "everything up to
 * now".  Parts are aged: older than before goes. */
static void sweep_dir(struct imgstore *s, const char *dir, const struct shaset *live, time_t before,
		      long *removed, uint64_t *freed, bool parts)
{
	time_t now = time(NULL);

	DIR *d = opendir(dir);

	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		char path[PATH_MAX], sha[65];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(sha, sizeof(sha), "%.64s", e->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || (parts && st.st_mtime >= before))
			continue;
		if (!parts && image_id_ok(e->d_name) && bsearch(sha, live->v, live->n, sizeof(*live->v), cmp65))
			continue;
		{
			const struct pending *p = pend_find(s, sha);

			if (p && p->until > now)
				continue;
		}
		if (unlink(path) == 0) {
			(*removed)++;
			*freed += (uint64_t)st.st_size;
		}
	}
	closedir(d);
}

int imgstore_gc(struct imgstore *s, const char *const *held, int nheld, long *removed, uint64_t *freed,
		struct verr *err)
{
	struct shaset live = { 0 };
	struct imgstore_ref *refs;
	size_t nrefs;
	char path[PATH_MAX];
	int rc = -1;

	*removed = 0;
	*freed = 0;
	pthread_mutex_lock(&s->mu);
	if (refs_locked(s, &refs, &nrefs, true, err) < 0)
		goto out;
	for (size_t i = 0; i < nrefs; i++)
		if (live_objects(s, refs[i].id, &live, err) < 0)
			goto done;
	for (int i = 0; i < nheld; i++)
		if (image_id_ok(held[i]) && live_objects(s, held[i], &live, err) < 0)
			goto done;
	qsort(live.v, live.n, sizeof(*live.v), cmp65);
	for (int hi = 0; hi < 256; hi++) {
		snprintf(path, sizeof(path), "%s/objects/%02x", s->dir, hi);
		sweep_dir(s, path, &live, 0, removed, freed, false);
		rmdir(path);
	}
	/* Uploads nobody finished in a day. */
	snprintf(path, sizeof(path), "%s/tmp", s->dir);
	sweep_dir(s, path, &live, time(NULL) - 86400, removed, freed, true);
	rc = 0;
done:
	free(refs);
out:
	free(live.v);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void imgstore_usage(struct imgstore *s, uint64_t *bytes, long *objects)
{
	char path[PATH_MAX];

	*bytes = 0;
	*objects = 0;
	pthread_mutex_lock(&s->mu);
	for (int hi = 0; hi < 256; hi++) {
		DIR *d;

		snprintf(path, sizeof(path), "%s/objects/%02x", s->dir, hi);
		if (!(d = opendir(path)))
			continue;
		for (struct dirent *e; (e = readdir(d));) {
			char p2[PATH_MAX + 80];
			struct stat st;

			snprintf(p2, sizeof(p2), "%s/%s", path, e->d_name);
			if (e->d_name[0] != '.' && stat(p2, &st) == 0 && S_ISREG(st.st_mode)) {
				*bytes += (uint64_t)st.st_size;
				(*objects)++;
			}
		}
		closedir(d);
	}
	pthread_mutex_unlock(&s->mu);
}
