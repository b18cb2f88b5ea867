/*
 * `vhpc image import`: an OCI image (an OCI layout folder, or a Docker
 * archive) made into a node image.  Debian's skopeo copies it into a
 * layout of our own (checking every blob's digest on the way) and umoci
 * unpacks its layers into a rootfs (whiteouts and all): no layer is
 * unpacked by hand.  The rootfs is then made fit for a node image: owners
 * root, no setuid bits, no device files, the mount points guests need;
 * vhpc's guest programs and the vmshm BTL go in (oci_vhpc.c), and, from a
 * base node image, a kernel and an initramfs for kvm guests.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/proc.h"
#include "image_int.h"
#include "images/images.h"
#include "images/registry_int.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A local source, or a registry's image (registry.c). */
static int check_source(const char *src, char *name, size_t nlen, struct verr *err)
{
	const char *path, *tag = NULL, *base;
	char file[PATH_MAX], index[PATH_MAX + 16];
	struct stat st;

	if (!strncmp(src, "oci:", 4)) {
		path = src + 4;
		tag = strchr(path, ':');
		snprintf(file, sizeof(file), "%.*s", tag ? (int)(tag - path) : (int)strlen(path), path);
		if (tag)
			tag++;
		if (stat(file, &st) < 0 || !S_ISDIR(st.st_mode))
			return verr_set(err, "%s: %s is not an OCI layout folder", src, file);
		snprintf(index, sizeof(index), "%s/index.json", file);
		if (access(index, R_OK) < 0)
			return verr_set(err, "%s: no index.json there: not an OCI layout", src);
	} else if (!strncmp(src, "docker-archive:", 15)) {
		snprintf(file, sizeof(file), "%s", src + 15);
		if (stat(file, &st) < 0 || !S_ISREG(st.st_mode))
			return verr_set(err, "%s: %s is not a file (docker save makes one)", src, file);
	} else if (!strncmp(src, "docker://", 9)) {
		struct image_reg_ref r;

		if (image_reg_ref_parse(src, &r, err) < 0)
			return -1;
		/* The repository's last component names it. */
		if (!name[0])
			snprintf(name, nlen, "%s", strrchr(r.repo, '/') ? strrchr(r.repo, '/') + 1 : r.repo);
		if (!ident_ok(name, 64))
			return verr_set(err, "%s: no usable image name from it ('%s'): give one with --name", src, name);
		return 0;
	} else {
		return verr_set(err, "'%s': import takes oci:DIR[:TAG], docker-archive:FILE.tar or "
				"docker://REGISTRY/REPO:TAG|@sha256:DIGEST", src);
	}
	if (!name[0]) {
		/* The tag, else the file or folder's name without its extension. */
		const char *slash;

		if (tag && *tag) {
			snprintf(name, nlen, "%s", tag);
		} else {
			snprintf(file, sizeof(file), "%s", !strncmp(src, "oci:", 4) ? src + 4 : src + 15);
			file[strcspn(file, ":")] = 0;
			while (strlen(file) > 1 && file[strlen(file) - 1] == '/')
				file[strlen(file) - 1] = 0;
			slash = strrchr(file, '/');
			base = slash ? slash + 1 : file;
			snprintf(name, nlen, "%.*s", (int)strcspn(base, "."), base);
		}
		if (!ident_ok(name, 64))
			return verr_set(err, "%s: no usable image name from it ('%s'): give one with --name", src, name);
	}
	return 0;
}

/* skopeo copy into <stage>/.oci (its digests checked), umoci unpack into
 * <stage>/.bundle; the image's PATH from its config out. */
static int unpack(const struct image_import *im, const char *stage, struct image_registry_pull *pull, char *path_env,
		  size_t plen, struct verr *err)
{
	const char *src = im->source;
	char policy[PATH_MAX], dst[PATH_MAX], bundle[PATH_MAX], cfg[PATH_MAX], *text;
	/* Local sources carry no signatures to check; the policy says so
	 * rather than depend on the host's /etc/containers/policy.json. */
	static const char pol[] = "{\"default\":[{\"type\":\"insecureAcceptAnything\"}]}\n";
	struct json_object *o, *proc, *env;

	snprintf(policy, sizeof(policy), "%s/.policy.json", stage);
	snprintf(dst, sizeof(dst), "oci:%s/.oci:vhpc", stage);
	snprintf(bundle, sizeof(bundle), "%s/.bundle", stage);
	if (write_file(policy, pol, strlen(pol), 0600, err) < 0)
		return -1;
	if (!strncmp(src, "docker://", 9)) {
		/* A site's signature policy for registries holds when it has one. */
		const char *site = "/etc/containers/policy.json";

		if (image_registry_fetch(src, &im->registry, stage, access(site, R_OK) == 0 ? site : policy, pull, err) < 0)
			return -1;
	} else {
		const char *argv[] = { "skopeo", "--policy", policy, "copy", "--quiet", src, dst, NULL };

		if (run_capture(argv, NULL, NULL, 1 << 20, 1800000, err) != 0)
			return verr_wrap(err, "skopeo copy %s", src);
	}
	snprintf(dst, sizeof(dst), "%s/.oci:vhpc", stage);
	{
		const char *argv[] = { "umoci", "unpack", "--image", dst, bundle, NULL };

		if (run_capture(argv, NULL, NULL, 1 << 20, 1800000, err) != 0)
			return verr_wrap(err, "umoci could not unpack the image's layers (is one not a tar archive?)");
	}
	snprintf(cfg, sizeof(cfg), "%s/config.json", bundle);
	path_env[0] = 0;
	if (read_file(cfg, &text, NULL, 16 << 20, err) < 0)
		return -1;
	o = json_tokener_parse(text);
	free(text);
	if (o && json_object_object_get_ex(o, "process", &proc) && json_object_object_get_ex(proc, "env", &env) &&
	    json_object_is_type(env, json_type_array))
		for (size_t i = 0; i < json_object_array_length(env); i++) {
			const char *e = json_object_get_string(json_object_array_get_idx(env, i));

			if (e && !strncmp(e, "PATH=", 5))
				snprintf(path_env, plen, "%s", e + 5);
		}
	json_object_put(o);
	return 0;
}

/* ------------------------------------------------------------ the rootfs */

static struct {
	struct verr *err;
	const char *root;
	long dropped, suid;
} fit;

/* Per entry: owners root (as a node's pull would make them), no setuid or
 * setgid, no device, fifo or socket (a guest gets its own /dev), no name a
 * manifest cannot hold. */
static int fit_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (strchr(path + strlen(fit.root), '\n'))
		return verr_set(fit.err, "the image holds a name with a newline: %s", path + strlen(fit.root));
	if (flag == FTW_SL) {
		char t[PATH_MAX];
		ssize_t n = readlink(path, t, sizeof(t) - 1);

		if (n < 0)
			return verr_errno(fit.err, "readlink %s", path);
		t[n] = 0;
		if (!n || strchr(t, ' ') || strchr(t, '\n'))
			return verr_set(fit.err, "the image's symlink %s points at '%s': vhpc images cannot hold targets with spaces",
					path + strlen(fit.root), t);
	} else if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
		fit.dropped++;
		if (unlink(path) < 0)
			return verr_errno(fit.err, "cannot remove %s", path);
		return 0;
	}
	if (lchown(path, 0, 0) < 0)
		return verr_errno(fit.err, "chown %s", path);
	if (S_ISREG(st->st_mode) && (st->st_mode & 06000)) {
		fit.suid++;
		if (chmod(path, st->st_mode & 01777) < 0)
			return verr_errno(fit.err, "chmod %s", path);
	}
	return 0;
}

/* A folder or file under the rootfs, made only where missing and never
 * through a symlink of the image (which may point anywhere on this host). */
static int make_in_root(int rootfd, const char *rel, bool file, mode_t mode, struct verr *err)
{
	char buf[PATH_MAX], *save = NULL, *c, *next;
	int fd = dup(rootfd);

	if (fd < 0)
		return verr_errno(err, "dup");
	snprintf(buf, sizeof(buf), "%s", rel);
	for (c = strtok_r(buf, "/", &save); c; c = next) {
		struct stat st;
		int sub;

		next = strtok_r(NULL, "/", &save);
		if (fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT) {
				close(fd);
				return verr_errno(err, "%s", rel);
			}
			if (!next && file) {
				int f = openat(fd, c, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);

				close(fd);
				if (f < 0)
					return verr_errno(err, "cannot create %s in the image", rel);
				close(f);
				return 0;
			}
			if (mkdirat(fd, c, next ? 0755 : mode) < 0) {
				close(fd);
				return verr_errno(err, "cannot create %s in the image", rel);
			}
		} else if (S_ISLNK(st.st_mode) || (next && !S_ISDIR(st.st_mode))) {
			/* The guest's runtime resolves it inside the rootfs. */
			close(fd);
			return 0;
		}
		if (!next)
			break;
		sub = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (sub < 0)
			return verr_errno(err, "%s in the image", rel);
		fd = sub;
	}
	close(fd);
	return 0;
}

/* What guests mount on, as a built image has it (build.c's stage()). */
static int add_layout(const char *root, struct verr *err)
{
	static const char *const dirs[] = {
		"proc", "sys", "dev", "dev/shm", "tmp", "run", "var/tmp", "root", "home", "vhpc", "mnt", "scratch",
		"etc", "usr/local/bin", NULL
	};
	static const char *const files[] = { "etc/hosts", "etc/hostname", "etc/resolv.conf", NULL };
	int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (rfd < 0)
		return verr_errno(err, "cannot open %s", root);
	for (int i = 0; dirs[i] && rc == 0; i++)
		rc = make_in_root(rfd, dirs[i], false,
				  !strcmp(dirs[i], "tmp") || !strcmp(dirs[i], "var/tmp") || !strcmp(dirs[i], "scratch")
				  ? 01777 : 0755, err);
	for (int i = 0; files[i] && rc == 0; i++)
		rc = make_in_root(rfd, files[i], true, 0644, err);
	/* The tmpfs runc puts there takes the folder's mode. */
	if (rc == 0) {
		struct stat st;

		if (fstatat(rfd, "scratch", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
			fchmodat(rfd, "scratch", 01777, 0);
	}
	close(rfd);
	return rc;
}

static int fit_rootfs(const char *stage, struct verr *err)
{
	char bundle_root[PATH_MAX], root[PATH_MAX];

	snprintf(bundle_root, sizeof(bundle_root), "%s/.bundle/rootfs", stage);
	snprintf(root, sizeof(root), "%s/rootfs", stage);
	if (rename(bundle_root, root) < 0)
		return verr_errno(err, "cannot move %s to %s", bundle_root, root);
	memset(&fit, 0, sizeof(fit));
	fit.err = err;
	fit.root = root;
	err->msg[0] = 0;
	if (nftw(root, fit_one, 64, FTW_PHYS) != 0)
		return err->msg[0] ? -1 : verr_errno(err, "walking %s", root);
	if (fit.dropped || fit.suid)
		log_info("image import: %ld device files, fifos or sockets left out; setuid/setgid taken from %ld files",
			 fit.dropped, fit.suid);
	return add_layout(root, err);
}

int image_import(const struct image_import *im, struct image_info *out, struct verr *err)
{
	char stage[PATH_MAX + 64] = "", name[65] = "", path_env[4096], dot[PATH_MAX + 80];
	struct image_registry_pull pull = { .digest = "" };
	struct image_info base;
	unsigned flags = im->flags & (IMAGE_SQUASHFS | IMAGE_EROFS);
	int lock = -1, r = -1;

	if (im->name && !ident_ok(im->name, 64))
		return verr_set(err, "--name '%s': use letters, digits, '.', '_' and '-'", im->name);
	snprintf(name, sizeof(name), "%s", im->name ? im->name : "");
	if (check_source(im->source, name, sizeof(name), err) < 0)
		return -1;
	if (im->base) {
		if (image_lookup(im->base, &base, err) < 0)
			return verr_wrap(err, "--base");
		if (!base.kvm)
			return verr_set(err, "--base %s (%.12s) has no kvm parts: build it with its kvm: section, or import with --no-kvm",
					im->base, base.id);
		flags |= IMAGE_KVM;
	}
	if ((lock = image_stage_begin(stage, sizeof(stage), err)) < 0)
		return -1;
	log_info("importing %s as image '%s'", im->source, name);
	if (unpack(im, stage, &pull, path_env, sizeof(path_env), err) < 0 || fit_rootfs(stage, err) < 0)
		goto out;
	snprintf(dot, sizeof(dot), "%s/rootfs", stage);
	if (image_oci_add_vhpc(dot, path_env[0] ? path_env : NULL, err) < 0)
		goto out;
	for (const char *d = ".oci\0.bundle\0"; *d; d += strlen(d) + 1) {
		snprintf(dot, sizeof(dot), "%s/%s", stage, d);
		if (rm_rf(dot, err) < 0)
			goto out;
	}
	snprintf(dot, sizeof(dot), "%s/.policy.json", stage);
	unlink(dot);
	if (image_stage_finish(stage, flags, NULL, im->base ? &base : NULL, err) < 0)
		goto out;
	{
		char desc[300];
		struct image_meta meta = { .name = name, .description = desc, .flags = flags, .fingerprint = "",
					   .source = im->source, .digest = pull.digest[0] ? pull.digest : NULL };

		snprintf(desc, sizeof(desc), "imported from %s%s%s", im->source, pull.digest[0] ? " pinned to " : "",
			 pull.digest);
		r = image_stage_commit(stage, &meta, out, err);
	}
	if (r == 0)
		stage[0] = 0;
out:
	image_stage_abort(stage, lock);
	return r;
}
