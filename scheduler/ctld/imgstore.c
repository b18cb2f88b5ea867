/*
 * The cluster's image store on vhpc-ctld's disk (imgstore.h).  Objects are
 * immutable once named: an upload grows in tmp/<sha>.part and is renamed
 * into objects/ only when its bytes hash to its name.  A ref is written
 * atomically.  Which objects are images is tagged/'s to say
 * (imgstore_rec.c), not the objects': a file of an image is an object
 * named by its sha256 as a manifest is.  Whether an object was changed on
 * disk afterwards is not this file's to judge: nodes check every file they
 * pull against the manifest, which hashes to the id they were given.
 * Everything is reached from the store folder's descriptor, never through
 * a symlink (images/nofollow.c).
 */
#include "lib/bytes.h"
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "images/images.h"
#include "imgstore.h"
#include "imgstore_rec.h"

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
	int dfd;                       /* dir */
	int tfd, rfd;                  /* tagged/, refs/ */
	int sfd;                       /* signatures/ (images/sign.c): <id>, the image's */
	struct pending *pend;          /* sorted by sha */
	size_t npend, cappend;
};

/* Paths from dir. */
static void obj_rel(const char *sha, char *buf, size_t len)
{
	snprintf(buf, len, "objects/%.2s/%s", sha, sha);
}

static void part_rel(const char *sha, char *buf, size_t len)
{
	snprintf(buf, len, "tmp/%s.part", sha);
}

/* An object's size; -1 (errno) when it is none: ENOENT when nothing is
 * there, EINVAL for anything but a file (a symlink too). */
static int obj_stat(const struct imgstore *s, const char *sha, struct stat *st)
{
	char rel[100];
	int fd, r;

	obj_rel(sha, rel, sizeof(rel));
	if ((fd = image_openat(s->dfd, rel, O_PATH, 0, NULL)) < 0)
		return -1;
	r = fstat(fd, st);
	close(fd);
	if (r == 0 && !S_ISREG(st->st_mode)) {
		errno = EINVAL;   /* there, but no object: not ENOENT */
		r = -1;
	}
	return r;
}

static bool obj_there(const struct imgstore *s, const char *sha)
{
	struct stat st;

	return obj_stat(s, sha, &st) == 0;
}

static void reconcile(struct imgstore *s, bool fresh);

int imgstore_open(struct imgstore **out, const char *dir, struct verr *err)
{
	struct imgstore *s = calloc(1, sizeof(*s));
	char path[PATH_MAX];
	bool fresh;

	if (!s)
		return verr_set(err, "out of memory");
	if (strlen(dir) >= sizeof(s->dir)) {
		free(s);
		return verr_set(err, "image store path %s is too long", dir);
	}
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	s->dfd = s->tfd = s->rfd = s->sfd = -1;
	snprintf(path, sizeof(path), "%s/tagged", dir);
	fresh = access(path, F_OK) < 0;
	for (const char *sub = "objects\0tmp\0refs\0tagged\0signatures\0"; *sub; sub += strlen(sub) + 1) {
		snprintf(path, sizeof(path), "%s/%s", dir, sub);
		if (mkdir_p(path, 0700, err) < 0) {
			imgstore_close(s);
			return -1;
		}
	}
	if ((s->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (s->tfd = image_openat(s->dfd, "tagged", O_RDONLY | O_DIRECTORY, 0, err)) < 0 ||
	    (s->rfd = image_openat(s->dfd, "refs", O_RDONLY | O_DIRECTORY, 0, err)) < 0 ||
	    (s->sfd = image_openat(s->dfd, "signatures", O_RDONLY | O_DIRECTORY, 0, err)) < 0) {
		if (s->dfd < 0)
			verr_errno(err, "cannot open %s", dir);
		imgstore_close(s);
		return verr_wrap(err, "image store %s", dir);
	}
	reconcile(s, fresh);
	*out = s;
	return 0;
}

void imgstore_close(struct imgstore *s)
{
	if (!s)
		return;
	for (int *fd = &s->dfd; fd <= &s->sfd; fd++)
		if (*fd >= 0)
			close(*fd);
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
	for (int i = 0; i < n; i++)
		missing[i] = !obj_there(s, objs[i]);
	/* Present or not, they are this push's until it tags them. */
	rc = pend_add(s, objs, n, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int finish_object(struct imgstore *s, const char *object, const char *part, struct verr *err)
{
	crypto_hash_sha256_state h;
	unsigned char buf[1 << 16], d[32];
	char hex[65], rel[100];
	ssize_t n;
	int fd = image_openat(s->dfd, part, O_RDONLY, 0, err);

	if (fd < 0)
		return -1;
	crypto_hash_sha256_init(&h);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crypto_hash_sha256_update(&h, buf, (size_t)n);
	if (n < 0 || fchmod(fd, 0400) < 0) {
		verr_errno(err, "cannot read %s", part);
		close(fd);
		return -1;
	}
	close(fd);
	crypto_hash_sha256_final(&h, d);
	hex_encode(d, 32, hex);
	if (strcmp(hex, object)) {
		unlinkat(s->dfd, part, 0);
		return verr_set(err, "object %.12s: the bytes sent hash to %.12s; dropped", object, hex);
	}
	snprintf(rel, sizeof(rel), "objects/%.2s", object);
	if (mkdirat(s->dfd, rel, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "cannot create %s/%s", s->dir, rel);
	obj_rel(object, rel, sizeof(rel));
	if (renameat(s->dfd, part, s->dfd, rel) < 0)
		return verr_errno(err, "cannot move %s to %s in %s", part, rel, s->dir);
	return 0;
}

int imgstore_put(struct imgstore *s, const char *object, uint64_t size, uint64_t offset,
		 const uint8_t *data, size_t len, uint64_t *next, struct verr *err)
{
	char part[100];
	struct stat st;
	int fd, rc = -1;

	pthread_mutex_lock(&s->mu);
	if (obj_stat(s, object, &st) == 0) {
		*next = size;
		rc = (uint64_t)st.st_size == size ? 0
			: verr_set(err, "object %.12s: the store holds %lld bytes of it, not %llu", object,
				   (long long)st.st_size, (unsigned long long)size);
		goto out;
	}
	part_rel(object, part, sizeof(part));
	fd = image_openat(s->dfd, part, O_WRONLY, 0, NULL);
	if (fd < 0 && errno == ENOENT)
		fd = image_openat(s->dfd, part, O_WRONLY | O_CREAT | O_EXCL, 0600, NULL);
	if (fd < 0 || fstat(fd, &st) < 0) {
		verr_errno(err, "cannot open %s in %s", part, s->dir);
		if (fd >= 0)
			close(fd);
		goto out;
	}
	*next = (uint64_t)st.st_size;
	if ((uint64_t)st.st_size > size) {
		/* A different upload of a name it does not match: start again. */
		close(fd);
		unlinkat(s->dfd, part, 0);
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
		verr_errno(err, "cannot write %s in %s", part, s->dir);
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
	char path[100];
	struct stat st;
	ssize_t n = 0;
	int fd;

	obj_rel(object, path, sizeof(path));
	fd = image_openat(s->dfd, path, O_RDONLY, 0, err);
	if (fd < 0)
		return errno == ENOENT ? verr_set(err, "object %.12s is not in the image store", object) : -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
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
	char path[100];

	obj_rel(object, path, sizeof(path));
	return image_read_at(s->dfd, path, max, text, len, err);
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
	snprintf(path, sizeof(path), "%s.json", name);
	if (faccessat(s->rfd, path, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return verr_set(err, "no image named '%s' in the cluster's image store (root pushes one: vhpc image push %s)",
				name, name);
	if (image_read_at(s->rfd, path, 1 << 16, &text, NULL, err) < 0)
		return verr_wrap(err, "%s/refs", s->dir);
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
	snprintf(path, sizeof(path), "%s.json", r->name);
	rc = image_write_at(s->rfd, path, text, strlen(text), 0600, true, err);
	json_object_put(o);
	return rc;
}

/* What the manifest says about the image, and that every file is here;
 * its objects are no push's pending ones any more. */
static int describe(struct imgstore *s, const char *id, struct imgstore_ref *r, struct verr *err)
{
	struct image_mf m;
	char *text;
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
		if (obj_stat(s, e->sha, &st) < 0 || (uint64_t)st.st_size != e->size) {
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
	if (syncfs(s->dfd) < 0) {
		verr_errno(err, "syncing the image store %s", s->dir);
		goto out;
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
	/* An image from now on, then named: a ref never names an id that is
	 * not recorded as an image. */
	if (imgstore_rec_add(s->tfd, id, name, r.kvm, err) < 0 || ref_write(s, &r, err) < 0)
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

int imgstore_image(struct imgstore *s, const char *id, const char *name, struct imgstore_image *out,
		   struct verr *err)
{
	struct imgstore_rec r;
	int rc = -1, got;

	memset(out, 0, sizeof(*out));
	if (!image_id_ok(id))
		return verr_set(err, "image_id '%.80s' is not an image id (64 lowercase hex digits)", id);
	pthread_mutex_lock(&s->mu);
	/* The same words whether or not some file has that sha256: they tell
	 * nobody what the store holds. */
	if ((got = imgstore_rec_read(s->tfd, id, &r, err)) == 1)
		verr_set(err, "image_id %s: the cluster's image store holds no image with this id "
			 "(images are what root pushed; vhpc image list shows them)", id);
	else if (got == 0 && !r.n)
		verr_set(err, "image_id %s: image %s was removed from the cluster's image store (vhpc image rm): "
			 "the jobs queued before keep it, no new one may name it", id, r.was);
	else if (got == 0 && name && !imgstore_rec_has(&r, name))
		verr_set(err, "image_id %s is not image %s (it is %s)", id, name, r.names[0]);
	else if (got == 0 && !obj_there(s, id))
		verr_set(err, "image_id %s: this version of image %s is no longer in the cluster's image store "
			 "(no job held it when the store was collected)", id, r.names[0]);
	else if (got == 0) {
		snprintf(out->name, sizeof(out->name), "%s", name ? name : r.names[0]);
		out->kvm = r.kvm;
		rc = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

bool imgstore_is_image(struct imgstore *s, const char *id)
{
	struct imgstore_rec r;
	struct verr e;
	bool yes;

	if (!image_id_ok(id))
		return false;
	pthread_mutex_lock(&s->mu);
	yes = imgstore_rec_read(s->tfd, id, &r, &e) == 0 && obj_there(s, id);
	pthread_mutex_unlock(&s->mu);
	return yes;
}

/* Takes a name out of the records that list it. */
static int drop_name(const char *id, struct imgstore_rec *r, void *arg)
{
	const char *name = arg;
	int k = 0;

	(void)id;
	if (!imgstore_rec_has(r, name))
		return 0;
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->names[i], name))
			memcpy(r->names[k++], r->names[i], 65);
	r->n = k;
	return 1;
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
	/* Every id the name had stops being one a job may name, then the
	 * name goes: a failure between leaves the name, and a restart
	 * (reconcile) puts its id back. */
	if (imgstore_rec_each(s->tfd, drop_name, (void *)name, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s.json", name);
	if (unlinkat(s->rfd, path, 0) < 0) {
		verr_errno(err, "cannot remove %s/refs/%s", s->dir, path);
		goto out;
	}
	snprintf(id, 65, "%s", r.id);
	rc = 0;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

struct retire { const char *id, *name; };

/* Takes the name out of one id's record. */
static int drop_name_of(const char *id, struct imgstore_rec *r, void *arg)
{
	const struct retire *x = arg;

	return strcmp(id, x->id) ? 0 : drop_name(id, r, (void *)x->name);
}

int imgstore_retire(struct imgstore *s, const char *name, const char *version, char id[65], struct verr *err)
{
	struct retire x = { .name = name };
	struct imgstore_ref r;
	size_t vl = strlen(version);
	int rc = -1, k = 0, hit = -1;

	if (!ident_ok(name, 64))
		return verr_set(err, "image name '%.80s' is not a plain name", name);
	if (vl < 12 || vl > 64 || strspn(version, "0123456789abcdef") != vl)
		return verr_set(err, "version '%.80s' of image %s: give at least 12 and at most 64 of its id's lowercase "
				"hex digits (vhpc image list)", version, name);
	pthread_mutex_lock(&s->mu);
	if (ref_read(s, name, &r, err) < 0)
		goto out;
	if (!strncmp(r.id, version, vl)) {
		verr_set(err, "%.12s is the version image %s names now: vhpc image rm %s removes the name (and every "
			 "earlier version with it), or push another version first", r.id, name, name);
		goto out;
	}
	for (int i = 0; i < r.nprev; i++)
		if (!strncmp(r.prev[i], version, vl)) {
			if (hit >= 0) {
				verr_set(err, "version %s of image %s: more than one earlier id starts so; give more digits",
					 version, name);
				goto out;
			}
			hit = i;
		}
	if (hit < 0) {
		verr_set(err, "image %s had no earlier version %s (vhpc image list --json shows its \"previous\" ids)",
			 name, version);
		goto out;
	}
	x.id = r.prev[hit];
	snprintf(id, 65, "%s", x.id);
	/* The id stops being one a job may name as this image first, then
	 * the history forgets it: a failure between leaves it listed, and
	 * retiring it again finishes the job. */
	if (imgstore_rec_each(s->tfd, drop_name_of, &x, err) < 0)
		goto out;
	for (int i = 0; i < r.nprev; i++)
		if (i != hit)
			memmove(r.prev[k++], r.prev[i], 65);
	r.nprev = k;
	rc = ref_write(s, &r, err);
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* A folder below dirfd, to list. */
static DIR *dir_at(int dirfd, const char *rel)
{
	int fd = strcmp(rel, ".") ? image_openat(dirfd, rel, O_RDONLY | O_DIRECTORY, 0, NULL)
		: openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	if (!(d = fdopendir(fd)))
		close(fd);
	return d;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct imgstore_ref *)a)->name, ((const struct imgstore_ref *)b)->name);
}

/* strict: a ref that is there but cannot be read fails the listing (a
 * collection must not lose the image it names); else it is left out. */
static int refs_locked(struct imgstore *s, struct imgstore_ref **out, size_t *n, bool strict, struct verr *err)
{
	struct imgstore_ref *v = NULL;
	size_t cnt = 0, cap = 0;
	DIR *d = dir_at(s->rfd, ".");

	*out = NULL;
	*n = 0;
	if (!d)
		return verr_errno(err, "cannot list %s/refs", s->dir);
	for (struct dirent *e; (e = readdir(d));) {
		char name[70];
		size_t l = strlen(e->d_name);
		struct verr ignore;

		if (l < 6 || l > 69 || strcmp(e->d_name + l - 5, ".json"))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(l - 5), e->d_name);
		if (!ident_ok(name, 64))
			continue;
		if (grow(&v, &cap, cnt + 1, sizeof(*v), 16) < 0) {
			free(v);
			closedir(d);
			return verr_set(err, "out of memory");
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

/* ------------------------------------------------ the record of images */

struct named {
	const struct imgstore_ref *refs;
	size_t n;
};

/* A record keeps the names that still have a ref. */
static int keep_named(const char *id, struct imgstore_rec *r, void *arg)
{
	const struct named *c = arg;
	int k = 0;

	(void)id;
	for (int i = 0; i < r->n; i++)
		for (size_t j = 0; j < c->n; j++)
			if (!strcmp(c->refs[j].name, r->names[i])) {
				memcpy(r->names[k++], r->names[i], 65);
				break;
			}
	if (k == r->n)
		return 0;
	r->n = k;
	return 1;
}

/* The record of images agrees with the names after a crash between the
 * two (a tag writes the record first, a removal changes it first): every
 * name's id is an image of that name, and a name without a ref tags
 * nothing.  A store from before the record (fresh) gets one: the ids its
 * names have and had, those whose manifest is still here. */
static void reconcile(struct imgstore *s, bool fresh)
{
	struct imgstore_ref *refs;
	struct imgstore_rec r;
	struct named c;
	size_t n;
	struct verr e;
	long added = 0;

	if (refs_locked(s, &refs, &n, false, &e) < 0) {
		log_warn("image store: %s; its record of images is as it was", e.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int got = imgstore_rec_read(s->tfd, refs[i].id, &r, &e);

		if (got < 0 || ((got == 1 || !imgstore_rec_has(&r, refs[i].name)) &&
				imgstore_rec_add(s->tfd, refs[i].id, refs[i].name, refs[i].kvm, &e) < 0))
			log_warn("image store: %s", e.msg);
		else
			added += got == 1;
		for (int k = 0; fresh && k < refs[i].nprev; k++) {
			struct imgstore_ref old;

			if (!obj_there(s, refs[i].prev[k]) || describe(s, refs[i].prev[k], &old, &e) < 0)
				continue;
			if (imgstore_rec_add(s->tfd, refs[i].prev[k], refs[i].name, old.kvm, &e) < 0)
				log_warn("image store: %s", e.msg);
			else
				added++;
		}
	}
	c.refs = refs;
	c.n = n;
	if (imgstore_rec_each(s->tfd, keep_named, &c, &e) < 0)
		log_warn("image store: %s", e.msg);
	free(refs);
	if (added)
		log_info("image store %s: %ld images recorded from their names", s->dir, added);
}

/* ---------------------------------------------------------- collection */

struct shaset {
	char (*v)[65];
	size_t n, cap;
};

static int set_add(struct shaset *st, const char *sha)
{
	if (grow(&st->v, &st->cap, st->n + 1, sizeof(*st->v), 4096) < 0)
		return -1;
	memcpy(st->v[st->n++], sha, 65);
	return 0;
}

static int cmp65(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The objects an image needs: its manifest and every file.  An id with no
 * object, or whose object is no manifest (a job queued before the store
 * kept its record of images could name any object), keeps nothing but
 * itself.  A manifest that is there but cannot be read now (EMFILE, EIO,
 * ENOMEM) is an error: guessing "nothing" would remove the files of a
 * named or running image. */
static int live_objects(struct imgstore *s, const char *id, struct shaset *set, struct verr *err)
{
	struct image_mf m;
	struct verr e;
	struct stat st;
	char *text;
	size_t len;

	if (set_add(set, id) < 0)
		return verr_set(err, "out of memory");
	if (obj_stat(s, id, &st) < 0 && errno == ENOENT)
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
	DIR *d = dir_at(s->dfd, dir);

	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		char sha[65];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(sha, sizeof(sha), "%.64s", e->d_name);
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
		    (parts && st.st_mtime >= before))
			continue;
		if (!parts && image_id_ok(e->d_name) && live->n && bsearch(sha, live->v, live->n, sizeof(*live->v), cmp65))
			continue;
		{
			const struct pending *p = pend_find(s, sha);

			if (p && p->until > now)
				continue;
		}
		if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
			(*removed)++;
			*freed += (uint64_t)st.st_size;
		}
	}
	closedir(d);
}

/* A record whose manifest went in the collection (an earlier version no
 * job held) names no image any more. */
static int drop_collected(const char *id, struct imgstore_rec *r, void *arg)
{
	struct stat st;

	(void)r;
	return obj_stat(arg, id, &st) == 0 || errno != ENOENT ? 0 : 2;
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
	if (live.n)
		qsort(live.v, live.n, sizeof(*live.v), cmp65);
	for (int hi = 0; hi < 256; hi++) {
		snprintf(path, sizeof(path), "objects/%02x", hi);
		sweep_dir(s, path, &live, 0, removed, freed, false);
		unlinkat(s->dfd, path, AT_REMOVEDIR);
	}
	/* Uploads nobody finished in a day. */
	sweep_dir(s, "tmp", &live, time(NULL) - 86400, removed, freed, true);
	{
		long nsig = 0;
		uint64_t sigbytes = 0;

		/* The signatures of images collected: not objects, not counted. */
		sweep_dir(s, "signatures", &live, 0, &nsig, &sigbytes, false);
	}
	rc = imgstore_rec_each(s->tfd, drop_collected, s, err);
done:
	free(refs);
out:
	free(live.v);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int imgstore_sigs(struct imgstore *s, const char *id, struct image_sigs *out, struct verr *err)
{
	char *text;
	size_t len;
	int r;

	memset(out, 0, sizeof(*out));
	if (!image_id_ok(id))
		return verr_set(err, "'%.70s' is not an image id", id);
	pthread_mutex_lock(&s->mu);
	r = image_read_at(s->sfd, id, IMAGE_SIG_TEXT_MAX + 1, &text, &len, err);
	pthread_mutex_unlock(&s->mu);
	if (r < 0)
		return errno == ENOENT ? 0 : verr_wrap(err, "image store: signatures of %.12s", id);
	r = image_sigs_parse(text, len, out, err);
	free(text);
	return r < 0 ? verr_wrap(err, "image store: signatures of %.12s", id) : 0;
}

int imgstore_sign(struct imgstore *s, const char *id, const struct image_sigs *add, int *total, struct verr *err)
{
	struct image_sigs have;
	char text[IMAGE_SIG_TEXT_MAX + 1];
	int r = 0;

	for (int i = 0; i < add->n; i++)
		if (!image_sig_valid(&add->v[i], id)) {
			char key[CLUSTER_KEY_TEXT];

			cluster_key_format(add->v[i].key, key);
			return verr_set(err, "signature %d (key %.24s...) is not a signature of image %.12s; refused", i + 1, key, id);
		}
	if (!imgstore_is_image(s, id))
		return verr_set(err, "image %.12s is not an image of the store; refused", id);
	/* Those it has, and the new ones (a key's new signature replaces its old). */
	if (imgstore_sigs(s, id, &have, err) < 0)
		return -1;
	for (int i = 0; i < add->n && r == 0; i++)
		r = image_sigs_add(&have, &add->v[i], err);
	if (r < 0)
		return verr_wrap(err, "image %.12s", id);
	image_sigs_format(&have, text);
	pthread_mutex_lock(&s->mu);
	r = image_write_at(s->sfd, id, text, strlen(text), 0600, true, err);
	pthread_mutex_unlock(&s->mu);
	if (total)
		*total = have.n;
	return r;
}

void imgstore_usage(struct imgstore *s, uint64_t *bytes, long *objects)
{
	char path[PATH_MAX];

	*bytes = 0;
	*objects = 0;
	pthread_mutex_lock(&s->mu);
	for (int hi = 0; hi < 256; hi++) {
		DIR *d;

		snprintf(path, sizeof(path), "objects/%02x", hi);
		if (!(d = dir_at(s->dfd, path)))
			continue;
		for (struct dirent *e; (e = readdir(d));) {
			struct stat st;

			if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISREG(st.st_mode)) {
				*bytes += (uint64_t)st.st_size;
				(*objects)++;
			}
		}
		closedir(d);
	}
	pthread_mutex_unlock(&s->mu);
}
