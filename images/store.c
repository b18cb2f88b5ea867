/* The image store: <state>/images/<id>/{rootfs,manifest,info.json} and
 * name references in <state>/images/refs/<name>.json.  Builds run under an
 * exclusive lock, so concurrent `vhpc run`s build an image once. */
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "image_int.h"
#include "images/images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *image_store_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s/images", vhpc_state_dir());
	return buf;
}

int image_lock_fd(int fd, struct verr *err)
{
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			verr_errno(err, "cannot lock it");
			close(fd);
			return -1;
		}
	return fd;
}

int image_lock_file(const char *path, struct verr *err)
{
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0)
		return verr_errno(err, "cannot open %s", path);
	return image_lock_fd(fd, err) < 0 ? verr_wrap(err, "%s", path) : fd;
}

static int lock_store(struct verr *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];

	image_store_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/refs", dir);
	if (mkdir_p(path, 0755, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/.lock", dir);
	return image_lock_file(path, err);
}

static int parse_json(char *buf, const char *path, struct json_object **out, struct verr *err)
{
	*out = json_tokener_parse(buf);
	free(buf);
	if (!*out || !json_object_is_type(*out, json_type_object)) {
		json_object_put(*out);
		return verr_set(err, "%s is not a JSON object", path);
	}
	return 0;
}

static int read_json(const char *path, struct json_object **out, struct verr *err)
{
	char *buf;
	size_t len;

	if (read_file(path, &buf, &len, 1 << 20, err) < 0)
		return -1;
	return parse_json(buf, path, out, err);
}

/* What dir/id holds at rel, through dir's descriptor: a folder, a file or
 * nothing (a symlink counts as nothing). */
static mode_t kind_at(int dfd, const char *id, const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", id, rel);
	if ((fd = image_openat(dfd, p, O_PATH, 0, NULL)) < 0)
		return 0;
	if (fstat(fd, &st) < 0)
		st.st_mode = 0;
	close(fd);
	return st.st_mode & S_IFMT;
}

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static long long jint(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

int image_load(const char *dir, const char *id, struct image_info *out, struct verr *err)
{
	char path[PATH_MAX + 80], *buf;
	struct json_object *o;
	const char *name, *fmt, *rel;
	struct json_object *k;
	bool compact;
	int dfd, r;

	memset(out, 0, sizeof(*out));
	if (!image_id_ok(id))
		return verr_set(err, "'%.80s' is not an image id", id);
	snprintf(path, sizeof(path), "%s/%s/info.json", dir, id);
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return verr_errno(err, "cannot open %s", dir);
	if (image_read_at(dfd, path + strlen(dir) + 1, 1 << 20, &buf, NULL, err) < 0 ||
	    parse_json(buf, path, &o, err) < 0) {
		close(dfd);
		return -1;
	}
	name = jstr(o, "name");
	fmt = jstr(o, "format");
	rel = jstr(o, "kernel_release");
	if (fmt && strcmp(fmt, "tree") && strcmp(fmt, "squashfs") && strcmp(fmt, "erofs")) {
		json_object_put(o);
		return verr_set(err, "%s: format '%.20s' is not tree, squashfs or erofs", path, fmt);
	}
	compact = fmt && strcmp(fmt, "tree");
	snprintf(out->id, sizeof(out->id), "%s", id);
	snprintf(out->name, sizeof(out->name), "%s", name ? name : "");
	snprintf(out->format, sizeof(out->format), "%s", fmt ? fmt : "tree");
	snprintf(out->dir, sizeof(out->dir), "%s/%s", dir, id);
	snprintf(out->rootfs, sizeof(out->rootfs), "%s/%s/%s", dir, id, compact ? ".mnt" : "rootfs");
	if (compact)
		snprintf(out->blob, sizeof(out->blob), "%s/%s/rootfs.%s", dir, id, fmt);
	out->bytes = jint(o, "bytes");
	out->files = jint(o, "files");
	out->built = jint(o, "built");
	out->kvm = json_object_object_get_ex(o, "kvm", &k) && json_object_get_boolean(k);
	snprintf(out->kernel_release, sizeof(out->kernel_release), "%s", rel ? rel : "");
	snprintf(out->kernel, sizeof(out->kernel), "%s/%s/kvm/vmlinuz", dir, id);
	snprintf(out->vmlinux, sizeof(out->vmlinux), "%s/%s/kvm/vmlinux", dir, id);
	snprintf(out->initrd, sizeof(out->initrd), "%s/%s/kvm/initramfs.img", dir, id);
	if (compact)
		snprintf(out->disk, sizeof(out->disk), "%s", out->blob);
	else
		snprintf(out->disk, sizeof(out->disk), "%s/%s/kvm/rootfs.ext4", dir, id);
	json_object_put(o);
	r = compact ? kind_at(dfd, id, out->blob + strlen(out->dir) + 1) == S_IFREG
		    : kind_at(dfd, id, "rootfs") == S_IFDIR;
	close(dfd);
	if (!r)
		return verr_set(err, "image %.12s has no rootfs at %s", id, compact ? out->blob : out->rootfs);
	return 0;
}

static int load_info(const char *id, struct image_info *out, struct verr *err)
{
	char dir[PATH_MAX];

	return image_load(image_store_dir(dir, sizeof(dir)), id, out, err);
}

int image_lookup(const char *name_or_id, struct image_info *out, struct verr *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 80];
	struct json_object *o;
	const char *id;
	int r;

	if (image_id_ok(name_or_id))
		return load_info(name_or_id, out, err);
	if (!ident_ok(name_or_id, 64))
		return verr_set(err, "'%s' is neither an image name nor an image id", name_or_id);
	image_store_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/refs/%s.json", dir, name_or_id);
	if (access(path, F_OK) < 0)
		return verr_set(err, "no image named '%s' (build it with: vhpc image build FILE)", name_or_id);
	if (read_json(path, &o, err) < 0)
		return -1;
	id = jstr(o, "id");
	if (!id || !image_id_ok(id)) {
		json_object_put(o);
		return verr_set(err, "%s: no valid image id", path);
	}
	r = load_info(id, out, err);
	json_object_put(o);
	return r;
}

/* Anything staged under the lock by a build that died is garbage now. */
static void remove_stale_staging(const char *dir)
{
	DIR *d = opendir(dir);
	struct verr err;

	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		char path[PATH_MAX + 300];

		if (strncmp(e->d_name, ".build-", 7))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (rm_rf(path, &err) < 0)
			log_warn("image: %s", err.msg);
	}
	closedir(d);
}

static int write_json(const char *path, struct json_object *o, struct verr *err)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);

	return write_file_atomic(path, s, strlen(s), 0644, err);
}

int image_spec_wants_kvm(const char *yaml_path, bool *yes, struct verr *err)
{
	struct image_spec s;

	if (image_spec_load(yaml_path, &s, err) < 0)
		return -1;
	*yes = image_spec_has_kvm(&s);
	image_spec_free(&s);
	return 0;
}

int image_stage_begin(char *stage, size_t len, struct verr *err)
{
	char dir[PATH_MAX], rnd[9];
	int lock = lock_store(err);

	if (lock < 0)
		return -1;
	image_store_dir(dir, sizeof(dir));
	remove_stale_staging(dir);
	random_bytes(rnd, 4);
	hex_encode(rnd, 4, rnd);
	snprintf(stage, len, "%s/.build-%d-%s", dir, (int)getpid(), rnd);
	if (mkdir_p(stage, 0755, err) < 0) {
		close(lock);
		return -1;
	}
	return lock;
}

/* A compact format replaces the rootfs tree by its file system file. */
static int stage_compact(const char *stage, unsigned flags, const char *rid, struct verr *err)
{
	char root[PATH_MAX + 80], blob[PATH_MAX + 80];

	if (!(flags & (IMAGE_SQUASHFS | IMAGE_EROFS)))
		return 0;
	snprintf(root, sizeof(root), "%s/rootfs", stage);
	snprintf(blob, sizeof(blob), "%s/rootfs.%s", stage, image_format_name(flags));
	if (image_compact_make(flags, root, blob, rid, err) < 0)
		return -1;
	return rm_rf(root, err);
}

int image_stage_finish(const char *stage, unsigned flags, const struct image_spec *s, const struct image_info *base,
		       struct verr *err)
{
	char root[PATH_MAX + 80], rid[65], *text = NULL;
	size_t len;

	if (!(flags & (IMAGE_KVM | IMAGE_SQUASHFS | IMAGE_EROFS)))
		return 0;
	snprintf(root, sizeof(root), "%s/rootfs", stage);
	/* The rootfs's own hash seeds the file systems' uuids: same content,
	 * same bytes. */
	if (image_manifest(root, &text, &len, rid, NULL, NULL, err) < 0)
		return -1;
	free(text);
	if ((flags & IMAGE_KVM) && (base ? image_kvm_from_base(base, stage, rid, flags, err)
					   : image_kvm_stage(s, stage, rid, flags, err)) < 0)
		return -1;
	return stage_compact(stage, flags, rid, err);
}

int image_stage_commit(const char *stage, const struct image_meta *meta, struct image_info *out,
		       struct verr *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 80], id[65], *manifest = NULL, kernel_release[128] = "";
	uint64_t bytes;
	size_t mlen;
	long files;
	bool kvm;
	int r = -1;

	image_store_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/kvm/kernel.version", stage);
	kvm = access(path, F_OK) == 0;
	if (kvm) {
		char *v;
		size_t vl;

		if (read_file(path, &v, &vl, 127, err) < 0)
			return -1;
		v[strcspn(v, "\n")] = 0;
		snprintf(kernel_release, sizeof(kernel_release), "%s", v);
		free(v);
	}
	/* The id covers everything the image holds: rootfs and kvm/. */
	if (image_manifest(stage, &manifest, &mlen, id, &bytes, &files, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/manifest", stage);
	if (write_file(path, manifest, mlen, 0644, err) < 0)
		goto out;
	{
		struct json_object *info = json_object_new_object();

		json_object_object_add(info, "id", json_object_new_string(id));
		json_object_object_add(info, "name", json_object_new_string(meta->name));
		json_object_object_add(info, "description", json_object_new_string(meta->description ? meta->description : ""));
		json_object_object_add(info, "built", json_object_new_int64(time(NULL)));
		json_object_object_add(info, "bytes", json_object_new_int64(bytes));
		json_object_object_add(info, "files", json_object_new_int64(files));
		json_object_object_add(info, "format", json_object_new_string(image_format_name(meta->flags)));
		json_object_object_add(info, "kvm", json_object_new_boolean(kvm));
		if (kvm)
			json_object_object_add(info, "kernel_release", json_object_new_string(kernel_release));
		snprintf(path, sizeof(path), "%s/info.json", stage);
		r = write_json(path, info, err);
		json_object_put(info);
		if (r < 0)
			goto out;
		r = -1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, id);
	if (access(path, F_OK) == 0) {
		/* Same content made before: keep the stored copy. */
		if (rm_rf(stage, err) < 0)
			goto out;
	} else if (rename(stage, path) < 0) {
		verr_errno(err, "cannot move %s to %s", stage, path);
		goto out;
	}
	{
		struct json_object *ref = json_object_new_object();

		json_object_object_add(ref, "id", json_object_new_string(id));
		json_object_object_add(ref, "fingerprint", json_object_new_string(meta->fingerprint ? meta->fingerprint : ""));
		json_object_object_add(ref, "spec", json_object_new_string(meta->source ? meta->source : ""));
		if (meta->digest)
			json_object_object_add(ref, "digest", json_object_new_string(meta->digest));
		snprintf(path, sizeof(path), "%s/refs/%s.json", dir, meta->name);
		r = write_json(path, ref, err);
		json_object_put(ref);
		if (r < 0)
			goto out;
	}
	r = load_info(id, out, err);
out:
	free(manifest);
	return r;
}

void image_stage_abort(const char *stage, int lock)
{
	struct verr e2;

	if (stage && stage[0] && access(stage, F_OK) == 0)
		rm_rf(stage, &e2);
	if (lock >= 0)
		close(lock);
}

/* The format a build makes: what the flags ask for, else the spec's. */
static unsigned build_format(const struct image_spec *s, unsigned flags)
{
	if (flags & (IMAGE_SQUASHFS | IMAGE_EROFS))
		return flags & (IMAGE_SQUASHFS | IMAGE_EROFS);
	return s->format ? image_format_flag(s->format) : 0;
}

int image_build(const char *yaml_path, unsigned flags, struct image_info *out,
		struct verr *err)
{
	bool force = flags & IMAGE_FORCE, want_kvm = flags & IMAGE_KVM, no_kvm = flags & IMAGE_NO_KVM;
	struct image_spec s;
	char dir[PATH_MAX], stage[PATH_MAX + 64] = "", root[PATH_MAX + 80], path[PATH_MAX + 80];
	char fp[65];
	int lock = -1, r = -1;
	double t0 = now_s();

	if (image_spec_load(yaml_path, &s, err) < 0)
		return -1;
	flags = (flags & ~(IMAGE_SQUASHFS | IMAGE_EROFS)) | build_format(&s, flags);
	if (want_kvm && !image_spec_has_kvm(&s)) {
		verr_set(err, "%s has no kvm: section (kernel and modules for kvm guests)", yaml_path);
		goto out;
	}
	lock = image_stage_begin(stage, sizeof(stage), err);
	if (lock < 0)
		goto out;
	image_store_dir(dir, sizeof(dir));
	if (image_fingerprint(yaml_path, &s, image_format_name(flags), fp, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/refs/%s.json", dir, s.name);
	if (!force && access(path, F_OK) == 0) {
		struct json_object *o;
		struct verr ignore;

		if (read_json(path, &o, &ignore) == 0) {
			const char *old_fp = jstr(o, "fingerprint"), *old_id = jstr(o, "id");

			if (old_fp && old_id && !strcmp(old_fp, fp) && image_id_ok(old_id) &&
			    load_info(old_id, out, &ignore) == 0 && (!want_kvm || out->kvm) && !(no_kvm && out->kvm)) {
				json_object_put(o);
				r = 0;
				goto out;
			}
			json_object_put(o);
		}
	}
	log_info("building image '%s' from %s (%s)", s.name, yaml_path, image_format_name(flags));
	snprintf(root, sizeof(root), "%s/rootfs", stage);
	if (mkdir_p(root, 0755, err) < 0 || image_stage_rootfs(&s, root, err) < 0 ||
	    image_stage_finish(stage, flags, &s, NULL, err) < 0)
		goto out;
	{
		struct image_meta meta = { .name = s.name, .description = s.description, .flags = flags,
					   .fingerprint = fp, .source = yaml_path };

		r = image_stage_commit(stage, &meta, out, err);
	}
	if (r == 0) {
		char sz[32];

		stage[0] = 0;
		log_info("image '%s' is %.12s: %ld files, %s, built in %.1f s", s.name, out->id, out->files,
			 fmt_size(out->bytes, sz, sizeof(sz)), now_s() - t0);
	}
out:
	image_stage_abort(stage, lock);
	image_spec_free(&s);
	return r;
}

int image_ensure(const char *name, unsigned flags, struct image_info *out, struct verr *err)
{
	char path[PATH_MAX];

	if (!ident_ok(name, 64))
		return verr_set(err, "image name '%s' is not a plain name", name);
	snprintf(path, sizeof(path), "%s/images/%s.yaml", vhpc_config_dir(), name);
	if (access(path, F_OK) == 0)
		return image_build(path, flags & ~IMAGE_FORCE, out, err);
	if (image_lookup(name, out, err) < 0)
		return -1;
	if ((flags & IMAGE_KVM) && !out->kvm)
		return verr_set(err, "image '%s' has no kvm parts and no %s to build them from", name, path);
	return 0;
}

static int by_built(const void *a, const void *b)
{
	const struct image_info *x = a, *y = b;

	return (y->built > x->built) - (y->built < x->built);
}

int image_list(struct image_info **out, size_t *n, struct verr *err)
{
	char dir[PATH_MAX];
	struct image_info *v = NULL;
	size_t cnt = 0, cap = 0;
	DIR *d;

	image_store_dir(dir, sizeof(dir));
	*out = NULL;
	*n = 0;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : verr_errno(err, "cannot list %s", dir);
	for (struct dirent *e; (e = readdir(d));) {
		struct verr ignore;

		if (!image_id_ok(e->d_name))
			continue;
		if (grow(&v, &cap, cnt + 1, sizeof(*v), 16) < 0) {
			free(v);
			closedir(d);
			return verr_set(err, "out of memory");
		}
		if (load_info(e->d_name, &v[cnt], &ignore) == 0)
			cnt++;
	}
	closedir(d);
	qsort(v, cnt, sizeof(*v), by_built);
	*out = v;
	*n = cnt;
	return 0;
}

int image_verify(const struct image_info *img, struct verr *err)
{
	char *text, id[65];
	size_t len;

	if (image_manifest(img->dir, &text, &len, id, NULL, NULL, err) < 0)
		return -1;
	free(text);
	if (strcmp(id, img->id))
		return verr_set(err, "image %.12s was modified: its content now hashes to %.12s", img->id, id);
	return 0;
}
