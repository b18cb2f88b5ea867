/*
 * A node's copy of an image, by its id, from the cluster's store.  The
 * manifest comes first and must hash to the id; every file is then fetched
 * (or copied from another cached image that holds the same content) and
 * checked, size and sha256, as it is written.  All of it goes into a
 * .pull-* folder that becomes <cache>/<id> by one rename once it is whole
 * and on disk, so a pull that is killed, or that finds a changed or
 * truncated file in the store, leaves nothing a job could start from
 * (image_cache_sweep removes the remains).
 */
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/fsutil.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "image_int.h"
#include "images/images.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FETCH_BATCH 256          /* objects named in one request */

/* Content this node has already: the files of its other cached images. */
struct local_obj {
	char sha[65];
	char *path;                  /* <id>/rootfs/..., from the cache folder */
};

static int by_sha(const void *a, const void *b)
{
	return strcmp(((const struct local_obj *)a)->sha, ((const struct local_obj *)b)->sha);
}

static void local_free(struct local_obj *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

/* Every file of every other complete image in the cache, by sha256.  Best
 * effort: what cannot be read is simply fetched. */
static void local_index(const char *cache, int cfd, const char *skip_id, struct local_obj **out, size_t *nout)
{
	struct image_cached *c;
	size_t nc, n = 0, cap = 0;
	struct local_obj *v = NULL;
	struct verr e;

	*out = NULL;
	*nout = 0;
	if (image_cache_list(cache, &c, &nc, &e) < 0)
		return;
	for (size_t i = 0; i < nc; i++) {
		char path[80], *text;
		size_t len;
		struct image_mf m;

		if (!strcmp(c[i].id, skip_id))
			continue;
		snprintf(path, sizeof(path), "%s/manifest", c[i].id);
		if (image_read_at(cfd, path, IMAGE_MF_TEXT_MAX, &text, &len, &e) < 0)
			continue;
		if (image_mf_parse(text, len, &m, &e) < 0) {
			free(text);
			continue;
		}
		free(text);
		for (size_t k = 0; k < m.n; k++) {
			if (m.v[k].type != 'f' || !m.v[k].size)
				continue;
			if (grow(&v, &cap, n + 1, sizeof(*v), 1024) < 0)
				break;
			snprintf(v[n].sha, sizeof(v[n].sha), "%s", m.v[k].sha);
			if (asprintf(&v[n].path, "%s%s", c[i].id, m.v[k].path) < 0)
				break;
			n++;
		}
		image_mf_free(&m);
	}
	free(c);
	if (n)
		qsort(v, n, sizeof(*v), by_sha);
	*out = v;
	*nout = n;
}

struct pull {
	const char *cache, *id;
	int cfd;                     /* the cache folder */
	int dfd;                     /* the staging folder in it */
	char *mtext;                 /* the manifest as fetched */
	size_t mlen;
	struct image_mf mf;
	image_fetch_fn fetch;
	void *arg;
	struct image_pull_stats *st;
};

static void hash_hex(crypto_hash_sha256_state *h, char hex[65])
{
	unsigned char d[32];

	crypto_hash_sha256_final(h, d);
	hex_encode(d, 32, hex);
}

static int refuse(const struct pull *p, const struct image_mf_ent *e, struct verr *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(const struct pull *p, const struct image_mf_ent *e, struct verr *err, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return verr_set(err, "image %.12s: %s: %s: the store's copy was changed or damaged; refused",
			p->id, e->path, what);
}

/* The manifest, whole, and only if it hashes to the id. */
static int fetch_manifest(struct pull *p, struct verr *err)
{
	const char *objs[1] = { p->id };
	uint8_t *buf = NULL;
	uint64_t have = 0, size = UINT64_MAX;
	crypto_hash_sha256_state h;
	char hex[65];

	crypto_hash_sha256_init(&h);
	while (have < size) {
		struct image_chunk *c;
		int n;

		if (p->fetch(p->arg, objs, 1, have, true, &c, &n, err) < 0) {
			free(buf);
			return verr_wrap(err, "image %.12s: its manifest", p->id);
		}
		if (n < 1 || strcmp(c[0].object, p->id) || c[0].offset != have ||
		    (size != UINT64_MAX && c[0].size != size) || c[0].size > IMAGE_MF_TEXT_MAX ||
		    c[0].len > c[0].size - have || (!c[0].len && c[0].size > have)) {
			image_chunks_free(c, n);
			free(buf);
			return verr_set(err, "image %.12s: the store's answer for its manifest does not fit (no progress, or past its end)", p->id);
		}
		if (size == UINT64_MAX) {
			size = c[0].size;
			if (!(buf = malloc(size + 1))) {
				image_chunks_free(c, n);
				return verr_set(err, "out of memory");
			}
		}
		memcpy(buf + have, c[0].data, c[0].len);
		crypto_hash_sha256_update(&h, c[0].data, c[0].len);
		have += c[0].len;
		p->st->fetched += c[0].len;
		image_chunks_free(c, n);
	}
	hash_hex(&h, hex);
	if (strcmp(hex, p->id)) {
		free(buf);
		return verr_set(err, "image %.12s: the store's manifest hashes to %.12s, not to the image's id: changed or damaged; refused",
				p->id, hex);
	}
	p->mtext = (char *)buf;
	p->mlen = size;
	if (image_mf_parse(p->mtext, size, &p->mf, err) < 0)
		return verr_wrap(err, "image %.12s", p->id);
	return 0;
}

static int create_at(struct pull *p, const struct image_mf_ent *e, struct verr *err)
{
	int fd = image_openat(p->dfd, e->path + 1, O_WRONLY | O_CREAT | O_EXCL, 0600, err);

	if (fd < 0)
		return verr_wrap(err, "image %.12s: cannot create it in the pull folder", p->id);
	return fd;
}

/* Copies a file this node already has (src from the folder dirfd),
 * checking it on the way: a local copy that does not match is not used
 * (-1, nothing said; it is fetched). */
static int copy_local(struct pull *p, const struct image_mf_ent *e, int dirfd, const char *src)
{
	crypto_hash_sha256_state h;
	unsigned char buf[1 << 16];
	uint64_t total = 0;
	char hex[65];
	ssize_t n;
	struct verr err;
	int in = image_openat(dirfd, src, O_RDONLY, 0, NULL), out;

	if (in < 0)
		return -1;
	if ((out = create_at(p, e, &err)) < 0) {
		close(in);
		return -1;
	}
	crypto_hash_sha256_init(&h);
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		crypto_hash_sha256_update(&h, buf, (size_t)n);
		total += (uint64_t)n;
		if (write_full(out, buf, (size_t)n) < 0)
			break;
	}
	close(in);
	hash_hex(&h, hex);
	if (n != 0 || total != e->size || strcmp(hex, e->sha) || close(out) < 0) {
		if (n != 0)
			close(out);
		unlinkat(p->dfd, e->path + 1, 0);
		return -1;
	}
	p->st->copied += total;
	return 0;
}

/* The files to fetch, in manifest order, each content once. */
struct want {
	const struct image_mf_ent **v;
	size_t n;
};

static int fetch_files(struct pull *p, const struct want *w, struct verr *err)
{
	size_t idx = 0;
	uint64_t off = 0;
	crypto_hash_sha256_state h;
	int fd = -1, rc = -1, bad = 0;

	while (idx < w->n) {
		const char *objs[FETCH_BATCH];
		struct image_chunk *c;
		int nobj = 0, n;

		for (size_t k = idx; k < w->n && nobj < FETCH_BATCH; k++)
			objs[nobj++] = w->v[k]->sha;
		if (p->fetch(p->arg, objs, nobj, off, false, &c, &n, err) < 0)
			goto out;
		if (n < 1) {
			image_chunks_free(c, n);
			verr_set(err, "image %.12s: the store sent nothing for %s", p->id, w->v[idx]->path);
			goto out;
		}
		for (int i = 0; i < n && !bad; i++) {
			const struct image_mf_ent *e = idx < w->n ? w->v[idx] : NULL;

			if (!e || strcmp(c[i].object, e->sha) || c[i].offset != off) {
				bad = verr_set(err, "image %.12s: the store answered with other bytes than asked for", p->id);
				break;
			}
			if (c[i].size != e->size) {
				bad = refuse(p, e, err, "the store holds %llu bytes of it where the manifest says %llu",
					     (unsigned long long)c[i].size, (unsigned long long)e->size);
				break;
			}
			if (c[i].len > e->size - off || (!c[i].len && off < e->size)) {
				bad = verr_set(err, "image %.12s: %s: the store's answer runs past its end, or makes no progress",
					       p->id, e->path);
				break;
			}
			if (fd < 0) {
				if ((fd = create_at(p, e, err)) < 0) {
					bad = -1;
					break;
				}
				crypto_hash_sha256_init(&h);
			}
			crypto_hash_sha256_update(&h, c[i].data, c[i].len);
			if (write_full(fd, c[i].data, c[i].len) < 0) {
				bad = verr_errno(err, "writing %s%s", p->id, e->path);
				break;
			}
			off += c[i].len;
			p->st->fetched += c[i].len;
			if (off == e->size) {
				char hex[65];

				hash_hex(&h, hex);
				if (close(fd) < 0) {
					fd = -1;
					bad = verr_errno(err, "writing %s%s", p->id, e->path);
					break;
				}
				fd = -1;
				if (strcmp(hex, e->sha)) {
					bad = refuse(p, e, err, "its content hashes to %.12s, the manifest says %.12s", hex, e->sha);
					break;
				}
				p->st->objects++;
				idx++;
				off = 0;
			}
		}
		image_chunks_free(c, n);
		if (bad)
			goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

static int copy_within(struct pull *p, const struct image_mf_ent *from, const struct image_mf_ent *to,
		       struct verr *err)
{
	if (copy_local(p, to, p->dfd, from->path + 1) < 0)
		return verr_set(err, "image %.12s: cannot copy %s to %s in the pull folder", p->id, from->path, to->path);
	p->st->copied -= to->size;
	return 0;
}

/* By content, and equal contents in manifest order. */
static int by_ent_sha(const void *a, const void *b)
{
	const struct image_mf_ent *x = *(const struct image_mf_ent *const *)a, *y = *(const struct image_mf_ent *const *)b;
	int c = strcmp(x->sha, y->sha);

	return c ? c : (x > y) - (x < y);
}

/* The first file of the manifest with e's content. */
static const struct image_mf_ent *first_of(const struct image_mf_ent **bysha, size_t n, const struct image_mf_ent *e)
{
	const struct image_mf_ent **slot = bsearch(&e, bysha, n, sizeof(*bysha), by_ent_sha);

	while (slot > bysha && !strcmp(slot[-1]->sha, e->sha))
		slot--;
	return *slot;
}

/* The folder that holds e, opened without following a symlink (the
 * manifest's checks leave none on the way; this does not rely on them),
 * and e's name in it. */
static int parent_at(const struct pull *p, const struct image_mf_ent *e, const char **name, struct verr *err)
{
	const char *slash = strrchr(e->path, '/');
	char dir[IMAGE_MF_PATH_MAX];
	int fd;

	*name = slash + 1;
	if (slash == e->path)
		fd = fcntl(p->dfd, F_DUPFD_CLOEXEC, 0);
	else {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - e->path - 1), e->path + 1);
		fd = image_openat(p->dfd, dir, O_RDONLY | O_DIRECTORY, 0, err);
	}
	if (fd < 0)
		return verr_wrap(err, "image %.12s: %s", p->id, e->path);
	return fd;
}

/* One entry's folder, symlink or mode, made through its parent. */
static int make_at(const struct pull *p, const struct image_mf_ent *e, char what, struct verr *err)
{
	const char *name;
	int pfd = parent_at(p, e, &name, err), fd, r = 0;

	if (pfd < 0)
		return -1;
	if (what == 'd' && mkdirat(pfd, name, 0700) < 0)
		r = verr_errno(err, "cannot create %s%s in the pull folder", p->id, e->path);
	else if (what == 'l' && symlinkat(e->target, pfd, name) < 0)
		r = verr_errno(err, "cannot create the symlink %s%s", p->id, e->path);
	else if (what == 'm') {
		/* A file or folder this pull made (O_EXCL, mkdirat), never a
		 * link: fchmod on what is open. */
		fd = image_openat(pfd, name, O_RDONLY | (e->type == 'd' ? O_DIRECTORY : 0), 0, err);
		if (fd < 0 || fchmod(fd, e->mode) < 0)
			r = fd < 0 ? verr_wrap(err, "image %.12s", p->id) : verr_errno(err, "chmod %s%s", p->id, e->path);
		if (fd >= 0)
			close(fd);
	}
	close(pfd);
	return r;
}

/* Folders, then every file's content (once per sha256: from this node's
 * other images when they hold it, else from the store), then the
 * duplicates, symlinks and modes. */
static int materialize(struct pull *p, struct verr *err)
{
	const struct image_mf *m = &p->mf;
	const struct image_mf_ent **bysha = calloc(m->n + 1, sizeof(*bysha));
	struct want w = { calloc(m->n + 1, sizeof(*w.v)), 0 };
	struct local_obj *loc = NULL;
	size_t nloc = 0, nfiles = 0;
	int rc = -1;

	if (!bysha || !w.v) {
		verr_set(err, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].type == 'd' && make_at(p, &m->v[i], 'd', err) < 0)
			goto out;
		if (m->v[i].type == 'f')
			bysha[nfiles++] = &m->v[i];
	}
	qsort(bysha, nfiles, sizeof(*bysha), by_ent_sha);
	local_index(p->cache, p->cfd, p->id, &loc, &nloc);
	for (size_t i = 0; i < m->n; i++) {
		const struct image_mf_ent *e = &m->v[i];
		struct local_obj lk, *hit;

		if (e->type != 'f' || first_of(bysha, nfiles, e) != e)
			continue;
		if (!e->size) {
			int fd = create_at(p, e, err);

			if (fd < 0)
				goto out;
			close(fd);
			continue;
		}
		snprintf(lk.sha, sizeof(lk.sha), "%s", e->sha);
		hit = nloc ? bsearch(&lk, loc, nloc, sizeof(*loc), by_sha) : NULL;
		if (hit && copy_local(p, e, p->cfd, hit->path) == 0)
			continue;
		w.v[w.n++] = e;
	}
	if (fetch_files(p, &w, err) < 0)
		goto out;
	/* Duplicates, symlinks, then modes: folders last and deepest first,
	 * so none is closed to writing before what it holds is in. */
	for (size_t i = 0; i < m->n; i++) {
		const struct image_mf_ent *e = &m->v[i], *first;

		if (e->type == 'f' && (first = first_of(bysha, nfiles, e)) != e && copy_within(p, first, e, err) < 0)
			goto out;
		if ((e->type == 'l' || e->type == 'f') && make_at(p, e, e->type == 'l' ? 'l' : 'm', err) < 0)
			goto out;
	}
	for (size_t i = m->n; i-- > 0;)
		if (m->v[i].type == 'd' && make_at(p, &m->v[i], 'm', err) < 0)
			goto out;
	rc = 0;
out:
	free(bysha);
	free(w.v);
	local_free(loc, nloc);
	return rc;
}

/* What the manifest says the image is: its format, and kvm parts. */
static int describe(const struct pull *p, const char *name, struct verr *err)
{
	const char *format = NULL;
	bool kvm = false;
	char rel[128] = "";
	struct json_object *info;
	const char *s;
	int r;

	for (size_t i = 0; i < p->mf.n; i++) {
		const struct image_mf_ent *e = &p->mf.v[i];

		if (!strcmp(e->path, "/rootfs") && e->type == 'd')
			format = "tree";
		else if (!strcmp(e->path, "/rootfs.squashfs") && e->type == 'f')
			format = "squashfs";
		else if (!strcmp(e->path, "/rootfs.erofs") && e->type == 'f')
			format = "erofs";
		else if (!strcmp(e->path, "/kvm/kernel.version") && e->type == 'f')
			kvm = true;
	}
	if (!format)
		return verr_set(err, "image %.12s holds no rootfs (folder, squashfs or erofs file)", p->id);
	if (kvm) {
		char *v;
		size_t vl;

		if (image_read_at(p->dfd, "kvm/kernel.version", 127, &v, &vl, err) < 0)
			return verr_wrap(err, "image %.12s", p->id);
		v[strcspn(v, "\n")] = 0;
		snprintf(rel, sizeof(rel), "%s", v);
		free(v);
	}
	info = json_object_new_object();
	json_object_object_add(info, "id", json_object_new_string(p->id));
	json_object_object_add(info, "name", json_object_new_string(name));
	json_object_object_add(info, "built", json_object_new_int64(time(NULL)));
	json_object_object_add(info, "bytes", json_object_new_int64((int64_t)p->mf.bytes));
	json_object_object_add(info, "files", json_object_new_int64(p->mf.files));
	json_object_object_add(info, "format", json_object_new_string(format));
	json_object_object_add(info, "kvm", json_object_new_boolean(kvm));
	if (kvm)
		json_object_object_add(info, "kernel_release", json_object_new_string(rel));
	s = json_object_to_json_string_ext(info, JSON_C_TO_STRING_PRETTY);
	/* New files, O_EXCL: the manifest may not have put anything there. */
	r = image_write_at(p->dfd, "info.json", s, strlen(s), 0644, false, err);
	json_object_put(info);
	if (r < 0 || image_write_at(p->dfd, "manifest", p->mtext, p->mlen, 0644, false, err) < 0)
		return verr_wrap(err, "image %.12s", p->id);
	return 0;
}

int image_pull(const struct image_pull_req *rq, struct image_pull_stats *st, struct image_info *out,
	       struct verr *err)
{
	struct pull p = { .cache = rq->cache, .id = rq->id, .cfd = -1, .dfd = -1, .fetch = rq->fetch, .arg = rq->arg,
			  .st = st };
	char name[80], rnd[9], stage[PATH_MAX + 80];
	double t0 = now_s();
	int rc = -1;

	memset(st, 0, sizeof(*st));
	if (!image_id_ok(rq->id))
		return verr_set(err, "'%.80s' is not an image id", rq->id);
	if (mkdir_p(rq->cache, 0700, err) < 0)
		return -1;
	if ((p.cfd = open(rq->cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return verr_errno(err, "cannot open %s", rq->cache);
	random_bytes(rnd, 4);
	hex_encode(rnd, 4, rnd);
	snprintf(name, sizeof(name), ".pull-%.12s-%d-%s", rq->id, (int)getpid(), rnd);
	snprintf(stage, sizeof(stage), "%s/%s", rq->cache, name);
	if (mkdirat(p.cfd, name, 0700) < 0) {
		verr_errno(err, "cannot create %s", stage);
		close(p.cfd);
		return -1;
	}
	if ((p.dfd = image_openat(p.cfd, name, O_RDONLY | O_DIRECTORY, 0, err)) < 0)
		goto out;
	if (fetch_manifest(&p, err) < 0)
		goto out;
	if (rq->make_room && rq->make_room(rq->arg, p.mf.bytes, err) < 0)
		goto out;
	if (materialize(&p, err) < 0 || describe(&p, rq->name, err) < 0)
		goto out;
	/* On disk before it has its name: a crash then finds it whole or
	 * not at all. */
	if (syncfs(p.dfd) < 0) {
		verr_errno(err, "syncing %s", stage);
		goto out;
	}
	if (renameat(p.cfd, name, p.cfd, rq->id) < 0) {
		if (errno != EEXIST && errno != ENOTEMPTY) {
			verr_errno(err, "cannot move %s to %s/%s", stage, rq->cache, rq->id);
			goto out;
		}
		/* Another pull got there first: its copy is as good. */
	}
	st->seconds = now_s() - t0;
	rc = image_load(rq->cache, rq->id, out, err);
out:
	if (p.dfd >= 0)
		close(p.dfd);
	image_mf_free(&p.mf);
	free(p.mtext);
	if (faccessat(p.cfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		struct verr e2;

		if (rm_rf(stage, &e2) < 0)
			log_warn("image pull: %s", e2.msg);
	}
	close(p.cfd);
	return rc;
}
