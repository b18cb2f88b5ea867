/*
 * vhpcd's image cache: a job names its image by the id vhpc-ctld resolved
 * at submit, and this node pulls what it lacks from the controller's store
 * (image_get over the munge channel; the manifest asked for as an image's,
 * which the store gives only for an image it was pushed), checks every file
 * against the manifest (images/pull.c), and keeps it in --image-cache, least recently
 * used images going first when --image-cache-size would be passed, never
 * one a job here holds (and so never one still mounted for a job).
 *
 * Locks: pull_mu serializes pulls; cache_mu guards the cache's folders
 * (lookups, mounts, evictions) and is taken before vd.mu, never after.
 */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/cluster.h"
#include "lib/fsutil.h"
#include "lib/jf.h"
#include "lib/imgwire.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/wire.h"
#include "daemon.h"
#include "images/images.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t pull_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

int vd_image_init(struct verr *err)
{
	char path[600];
	int fd;

	if (mkdir_p(vd.cache, 0700, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/.lock", vd.cache);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return verr_errno(err, "cannot open %s", path);
	/* Held for the daemon's life: two agents pulling into one cache
	 * would sweep each other's pulls. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return verr_set(err, "image cache %s is used by another vhpcd (--image-cache gives each its own)", vd.cache);
	}
	return image_cache_sweep(vd.cache, err);
}

/* Copies of the ids the jobs of this node hold (room for one more), with
 * pointers to them in *ptrs.  Holds cache_mu; takes vd.mu. */
static int held(char (**ids)[65], const char ***ptrs)
{
	int n = 0;

	pthread_mutex_lock(&vd.mu);
	*ids = calloc((size_t)vd.njobs + 1, sizeof(**ids));
	*ptrs = calloc((size_t)vd.njobs + 1, sizeof(**ptrs));
	for (int i = 0; *ids && *ptrs && i < vd.njobs; i++) {
		memcpy((*ids)[n], vd.jobs[i]->p.image_id, 65);
		(*ptrs)[n] = (*ids)[n];
		n++;
	}
	pthread_mutex_unlock(&vd.mu);
	if (!*ids || !*ptrs) {
		free(*ids);
		free(*ptrs);
		return -1;
	}
	return n;
}

/* A pull's: the image, and the signatures the store sent with its
 * manifest (images/sign.c), kept beside it in the cache. */
struct pull_ctx {
	const char *id;
	char sigs[IMAGE_SIG_TEXT_MAX + 2];
	bool got_sigs;
};

static int fetch(void *arg, const char *const *objs, int nobjs, uint64_t offset, bool manifest,
		 struct image_chunk **chunks, int *nchunks, struct verr *err)
{
	struct json_object *req = json_object_new_object(), *rep = NULL;
	struct pull_ctx *px = arg;
	const char *e, *sigs = NULL;
	int rc;

	json_object_object_add(req, "type", json_object_new_string("image_get"));
	json_object_object_add(req, "objects", imgwire_sha_array(objs, nobjs));
	json_object_object_add(req, "offset", json_object_new_int64((int64_t)offset));
	/* The store's word that it is an image, not a file with that sha256. */
	if (manifest)
		json_object_object_add(req, "manifest", json_object_new_boolean(true));
	rc = vd_call(req, &rep, 60000, err);
	json_object_put(req);
	if (rc < 0)
		return -1;
	if ((e = wire_error_text(rep)))
		rc = verr_set(err, "vhpc-ctld: %s", e);
	else if ((rc = vimg_data_parse(rep, chunks, nchunks, err)) == 0 && manifest) {
		/* Not checked here: the node checks them at each job's start
		 * against its own keys, and a bad file is named then. */
		if (jf_str(rep, "signatures", false, IMAGE_SIG_TEXT_MAX + 1, &sigs, err) < 0) {
			image_chunks_free(*chunks, *nchunks);
			*chunks = NULL;
			rc = verr_wrap(err, "image_data");
		} else {
			snprintf(px->sigs, sizeof(px->sigs), "%s", sigs ? sigs : "");
			px->got_sigs = true;
		}
	}
	json_object_put(rep);
	return rc;
}

/* The signatures the store sent, beside the image in the cache (an image
 * without any: an empty file, so a later signing is fetched again). */
static void keep_sigs(const struct vjob *j, const struct image_info *img, const struct pull_ctx *px)
{
	const char *slash = strrchr(img->dir, '/');
	char parent[512];
	struct verr e;
	int pfd, dfd;

	if (!px->got_sigs || !slash)
		return;
	snprintf(parent, sizeof(parent), "%.*s", (int)(slash - img->dir), img->dir);
	if ((pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	dfd = image_openat(pfd, slash + 1, O_RDONLY | O_DIRECTORY, 0, &e);
	close(pfd);
	if (dfd < 0 || image_write_at(dfd, IMAGE_SIG_FILE, px->sigs, strlen(px->sigs), 0644, true, &e) < 0)
		log_warn("job %lld: image %.12s: keeping its signatures: %s", (long long)j->id, img->id, e.msg);
	if (dfd >= 0)
		close(dfd);
}

/* A cached image this node would refuse for want of a valid signature
 * may have been signed and pushed again since it was pulled: its
 * signatures are asked for again (the manifest from its end: no bytes,
 * only them), and the job's start checks what came. */
static void refresh_sigs(const struct vjob *j, const struct image_info *img)
{
	const char *objs[1] = { img->id };
	struct pull_ctx px = { .id = img->id };
	struct image_chunk *c = NULL;
	char path[600];
	struct stat st;
	struct verr e;
	int n = 0;

	if (!vd.cl.images.require_signed || image_sig_require(img, &vd.cl.images, &e) == 0)
		return;
	snprintf(path, sizeof(path), "%s/manifest", img->dir);
	if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		st.st_size = 0;
	if (fetch(&px, objs, 1, (uint64_t)st.st_size, true, &c, &n, &e) < 0) {
		log_warn("job %lld: image %.12s: asking vhpc-ctld for its signatures: %s", (long long)j->id, img->id, e.msg);
		return;
	}
	image_chunks_free(c, n);
	keep_sigs(j, img, &px);
}

/* Room for bytes more: least recently used images go, those jobs here hold
 * and the one being pulled (arg, its id) stay. */
static int make_room(void *arg, uint64_t bytes, struct verr *err)
{
	struct pull_ctx *px = arg;
	const char **keep;
	char (*ids)[65];
	int n, rc;

	pthread_mutex_lock(&cache_mu);
	if ((n = held(&ids, &keep)) < 0) {
		pthread_mutex_unlock(&cache_mu);
		return verr_set(err, "out of memory");
	}
	keep[n++] = px->id;
	rc = image_cache_evict(vd.cache, vd.cache_size, bytes, keep, n, err);
	pthread_mutex_unlock(&cache_mu);
	free(keep);
	free(ids);
	return rc;
}

/* A cached image, marked used (na_job_start mounts a compact one for
 * the drivers that need it mounted).  Holds cache_mu. */
static int use(const char *id, struct image_info *out, struct verr *err)
{
	if (image_load(vd.cache, id, out, err) < 0)
		return -1;
	image_cache_touch(out);
	return 0;
}

int vd_image_get(const struct vjob *j, struct image_info *out, struct verr *err)
{
	static struct pull_ctx px;   /* under pull_mu */
	struct image_pull_req rq = {
		.cache = vd.cache, .id = j->p.image_id, .name = j->p.image, .fetch = fetch,
		.make_room = make_room, .arg = &px,
	};
	struct image_pull_stats st;
	struct verr miss;
	char a[32], b[32];
	int rc;

	pthread_mutex_lock(&cache_mu);
	rc = use(j->p.image_id, out, &miss);
	pthread_mutex_unlock(&cache_mu);
	if (rc == 0) {
		refresh_sigs(j, out);
		return 0;
	}
	pthread_mutex_lock(&pull_mu);
	pthread_mutex_lock(&cache_mu);
	rc = use(j->p.image_id, out, &miss);
	pthread_mutex_unlock(&cache_mu);
	if (rc == 0) {
		/* Pulled meanwhile for another job. */
		pthread_mutex_unlock(&pull_mu);
		refresh_sigs(j, out);
		return 0;
	}
	log_info("job %lld: image %s (%.12s) is not in this node's cache; pulling it from vhpc-ctld",
		 (long long)j->id, j->p.image, j->p.image_id);
	memset(&px, 0, sizeof(px));
	px.id = j->p.image_id;
	rc = image_pull(&rq, &st, out, err);
	if (rc == 0) {
		keep_sigs(j, out, &px);
		log_info("job %lld: pulled image %s (%.12s) in %.2f s: %s fetched, %s reused from other images here, %ld files",
			 (long long)j->id, j->p.image, j->p.image_id, st.seconds, fmt_size(st.fetched, a, sizeof(a)),
			 fmt_size(st.copied, b, sizeof(b)), st.objects);
		pthread_mutex_lock(&cache_mu);
		rc = use(j->p.image_id, out, err);
		pthread_mutex_unlock(&cache_mu);
	}
	pthread_mutex_unlock(&pull_mu);
	return rc;
}

struct json_object *vd_images_json(void)
{
	struct json_object *a = json_object_new_array();
	struct image_cached *v;
	const char **keep = NULL;
	char (*ids)[65] = NULL;
	struct verr e;
	size_t n;
	int nkeep;

	pthread_mutex_lock(&cache_mu);
	if (image_cache_list(vd.cache, &v, &n, &e) < 0) {
		pthread_mutex_unlock(&cache_mu);
		log_warn("image cache: %s", e.msg);
		return a;
	}
	nkeep = held(&ids, &keep);
	pthread_mutex_unlock(&cache_mu);
	for (size_t i = 0; i < n && i < 256; i++) {
		struct json_object *o = json_object_new_object();
		bool in_use = false;

		for (int k = 0; k < nkeep && !in_use; k++)
			in_use = !strcmp(keep[k], v[i].id);
		json_object_object_add(o, "id", json_object_new_string(v[i].id));
		if (ident_ok(v[i].name, 64))
			json_object_object_add(o, "name", json_object_new_string(v[i].name));
		json_object_object_add(o, "bytes", json_object_new_int64((int64_t)v[i].bytes));
		json_object_object_add(o, "used", json_object_new_int64(v[i].used));
		json_object_object_add(o, "in_use", json_object_new_boolean(in_use));
		json_object_array_add(a, o);
	}
	if (nkeep >= 0) {
		free(keep);
		free(ids);
	}
	free(v);
	return a;
}
