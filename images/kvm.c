/*
 * The kvm parts of a node image, next to its rootfs:
 *
 *   kvm/vmlinuz         the kernel as shipped (bzImage)
 *   kvm/vmlinux         the ELF inside it, for PVH boots (no decompressor
 *                       to run, which matters under instruction emulation)
 *   kvm/initramfs.img   busybox, the init of guest/initramfs/, and the
 *                       kernel modules the spec names with every module
 *                       they depend on, in load order
 *   kvm/rootfs.ext4     the rootfs, made by mke2fs -d (no loop mounts); a
 *                       compact image's root disk is its rootfs.squashfs
 *                       or rootfs.erofs instead (compact.c)
 *   kvm/kernel.version  the kernel's release string
 *
 * Everything is made reproducible (fixed times, uuid and hash seed derived
 * from the content, sorted archives), so the image id stays the same when
 * the same inputs are built again.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "lib/proc.h"
#include "image_int.h"
#include "images/images.h"

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

/* Releases are also path components: keep them plain. */
static bool release_ok(const char *r)
{
	if (!*r || strlen(r) > 100)
		return false;
	for (const char *p = r; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '_' || *p == '+'))
			return false;
	return true;
}

static int run_ok(const char *const *argv, int timeout_ms, struct verr *err)
{
	int r = run_capture(argv, NULL, NULL, 1 << 20, timeout_ms, err);

	return r == 0 ? 0 : -1;
}

int image_fetch_kernel(const char *pkg, char *tree, size_t len, struct verr *err)
{
	char dir[PATH_MAX], marker[PATH_MAX + 16], cmd[PATH_MAX * 2 + 512];
	const char *sh[] = { "sh", "-c", cmd, NULL };
	const char *cache = getenv("VHPC_KERNEL_CACHE");
	struct stat st;

	if (!ident_ok(pkg, 128) || strncmp(pkg, "linux-image-", 12))
		return verr_set(err, "'%s' is not a linux-image-* package name", pkg);
	if (cache && *cache)
		snprintf(dir, sizeof(dir), "%s/%s", cache, pkg);
	else
		snprintf(dir, sizeof(dir), "%s/kernels/%s", vhpc_state_dir(), pkg);
	if (strchr(dir, '\''))
		return verr_set(err, "state directory %s has a quote in its name", dir);
	snprintf(tree, len, "%s/x", dir);
	snprintf(marker, sizeof(marker), "%s/.complete", dir);
	if (stat(marker, &st) == 0)
		return 0;
	if (rm_rf(dir, err) < 0 || mkdir_p(dir, 0755, err) < 0)
		return -1;
	/* apt-get download writes to the current directory: a shell of its own
	 * keeps this process where it is.  The named package may be a
	 * metapackage: follow its first dependency to the linux-image-*. */
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; apt-get -q download '%s' >apt.log 2>&1 || { tail -n 3 apt.log >&2; exit 1; }; "
		 "deb=$(ls '%s'_*.deb); dep=$(dpkg-deb -f \"$deb\" Depends | sed 's/[ ,(].*//'); "
		 "case \"$dep\" in linux-image-[a-z0-9]*) apt-get -q download \"$dep\" >>apt.log 2>&1 || "
		 "{ tail -n 3 apt.log >&2; exit 1; }; deb=$(ls \"$dep\"_*.deb);; esac; "
		 "dpkg-deb -x \"$deb\" x; rm -f ./*.deb; : > .complete", dir, pkg, pkg);
	if (run_capture(sh, NULL, NULL, 1 << 20, 900000, err) != 0)
		return verr_wrap(err, "fetching kernel package %s", pkg);
	return 0;
}

/* The only kernel release under <tree>/lib/modules. */
static int find_release(const char *tree, char *rel, size_t len, struct verr *err)
{
	char dir[PATH_MAX];
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/lib/modules", tree);
	d = opendir(dir);
	if (!d)
		return verr_errno(err, "%s", dir);
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(rel, len, "%s", e->d_name);
		n++;
	}
	closedir(d);
	if (n != 1)
		return verr_set(err, "%s holds %d kernel releases; expected one", dir, n);
	if (!release_ok(rel))
		return verr_set(err, "kernel release '%s' has odd characters", rel);
	return 0;
}

/* ----------------------------------------------------------- modules */

struct moddep {
	char **name, **path;     /* short name (virtio_net), path relative to the release dir */
	char ***deps;            /* paths */
	size_t *ndeps;
	size_t n;
};

static void moddep_free(struct moddep *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->name[i]);
		free(m->path[i]);
		for (size_t j = 0; j < m->ndeps[i]; j++)
			free(m->deps[i][j]);
		free(m->deps[i]);
	}
	free(m->name);
	free(m->path);
	free(m->deps);
	free(m->ndeps);
}

static char *short_name(const char *path)
{
	const char *b = strrchr(path, '/');
	char *s = strdup(b ? b + 1 : path), *dot;

	if (!s)
		return NULL;
	dot = strstr(s, ".ko");
	if (dot)
		*dot = 0;
	/* modprobe treats - and _ alike; so do we. */
	for (char *p = s; *p; p++)
		if (*p == '-')
			*p = '_';
	return s;
}

/* modules.dep: "path: dep dep ..." per module (made by depmod -b). */
static int moddep_load(const char *file, struct moddep *m, struct verr *err)
{
	char *buf, *line, *save = NULL;
	size_t len, cap[4] = { 0 };

	memset(m, 0, sizeof(*m));
	if (read_file(file, &buf, &len, 64 << 20, err) < 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':'), *tok, *s2 = NULL;

		if (!colon)
			continue;
		*colon = 0;
		/* Four arrays of one length: each keeps its own room, so one
		 * that could not grow leaves the others usable to free. */
		if (grow(&m->name, &cap[0], m->n + 1, sizeof(*m->name), 1024) < 0 ||
		    grow(&m->path, &cap[1], m->n + 1, sizeof(*m->path), 1024) < 0 ||
		    grow(&m->deps, &cap[2], m->n + 1, sizeof(*m->deps), 1024) < 0 ||
		    grow(&m->ndeps, &cap[3], m->n + 1, sizeof(*m->ndeps), 1024) < 0) {
			free(buf);
			return verr_set(err, "out of memory");
		}
		m->path[m->n] = strdup(line);
		m->name[m->n] = short_name(line);
		m->deps[m->n] = NULL;
		m->ndeps[m->n] = 0;
		for (tok = strtok_r(colon + 1, " ", &s2); tok; tok = strtok_r(NULL, " ", &s2)) {
			char **nd = realloc(m->deps[m->n], (m->ndeps[m->n] + 1) * sizeof(char *));

			if (!nd) {
				free(buf);
				return verr_set(err, "out of memory");
			}
			m->deps[m->n] = nd;
			nd[m->ndeps[m->n]++] = strdup(tok);
		}
		m->n++;
	}
	free(buf);
	return 0;
}

static long mod_by(const struct moddep *m, const char *key, bool by_path)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(by_path ? m->path[i] : m->name[i], key))
			return (long)i;
	return -1;
}

/* Depth-first: a module after everything it needs. */
static int mod_order(const struct moddep *m, size_t i, unsigned char *state, size_t *order,
		     size_t *n, int depth, struct verr *err)
{
	if (state[i] == 2)
		return 0;
	if (state[i] == 1 || depth > 64)
		return verr_set(err, "module dependency cycle at %s", m->name[i]);
	state[i] = 1;
	for (size_t j = 0; j < m->ndeps[i]; j++) {
		long k = mod_by(m, m->deps[i][j], true);

		if (k < 0)
			return verr_set(err, "module %s needs %s, which modules.dep does not list",
					m->name[i], m->deps[i][j]);
		if (mod_order(m, (size_t)k, state, order, n, depth + 1, err) < 0)
			return -1;
	}
	state[i] = 2;
	order[(*n)++] = i;
	return 0;
}

static int copy_into(const char *src, const char *dst, mode_t mode, struct verr *err)
{
	char *buf;
	size_t len;
	char dir[PATH_MAX];
	int r;

	snprintf(dir, sizeof(dir), "%s", dst);
	*strrchr(dir, '/') = 0;
	if (mkdir_p(dir, 0755, err) < 0 || read_file(src, &buf, &len, 256u << 20, err) < 0)
		return -1;
	r = write_file(dst, buf, len, mode, err);
	free(buf);
	return r;
}

/* Sets every entry's times to the epoch, so archives and file systems made
 * from the tree do not depend on when it was built. */
static int fix_times(const char *root, struct verr *err)
{
	const char *argv[] = { "find", root, "-exec", "touch", "-h", "-d", "@0", "{}", "+", NULL };

	return run_ok(argv, 120000, err);
}

/* Loaded when the kernel has them as modules: the file systems a compact
 * root disk may hold, whatever format the image itself has (an imported
 * image's kvm parts come from another image). */
static const char *const root_modules[] = { "squashfs", "erofs", NULL };

static int make_initramfs(const struct image_spec *s, const char *tree, const char *rel,
			  const char *out, const char *work, struct verr *err)
{
	char path[PATH_MAX + 256], src[PATH_MAX + 256], *order_txt = NULL;
	struct moddep m;
	size_t *order = NULL, n = 0, olen = 0;
	unsigned char *state = NULL;
	int r = -1;

	/* depmod writes modules.dep into the unpacked tree, once. */
	snprintf(path, sizeof(path), "%s/lib/modules/%s/modules.dep", tree, rel);
	if (access(path, R_OK) < 0) {
		const char *dm[] = { "depmod", "-b", tree, rel, NULL };

		if (run_ok(dm, 120000, err) < 0)
			return verr_wrap(err, "depmod");
	}
	if (moddep_load(path, &m, err) < 0)
		return -1;
	order = calloc(m.n + 1, sizeof(size_t));
	state = calloc(m.n + 1, 1);
	if (!order || !state) {
		verr_set(err, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < s->kvm.modules.n + sizeof(root_modules) / sizeof(*root_modules) - 1; i++) {
		bool optional = i >= s->kvm.modules.n;
		const char *name = optional ? root_modules[i - s->kvm.modules.n] : s->kvm.modules.v[i];
		char *want = short_name(name);
		long k = want ? mod_by(&m, want, false) : -1;

		free(want);
		if (k < 0 && optional)
			continue;
		if (k < 0) {
			verr_set(err, "kernel %s has no module '%s' (is it built in, or misspelt?)", rel, name);
			goto out;
		}
		if (mod_order(&m, (size_t)k, state, order, &n, 0, err) < 0)
			goto out;
	}
	if (rm_rf(work, err) < 0 || mkdir_p(work, 0755, err) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(m.path[order[i]]);
		char *no;

		snprintf(src, sizeof(src), "%s/lib/modules/%s/%s", tree, rel, m.path[order[i]]);
		snprintf(path, sizeof(path), "%s/lib/modules/%s", work, m.path[order[i]]);
		if (copy_into(src, path, 0644, err) < 0)
			goto out;
		no = realloc(order_txt, olen + l + 2);
		if (!no) {
			verr_set(err, "out of memory");
			goto out;
		}
		order_txt = no;
		memcpy(order_txt + olen, m.path[order[i]], l);
		olen += l;
		order_txt[olen++] = '\n';
		order_txt[olen] = 0;
	}
	snprintf(path, sizeof(path), "%s/lib/modules/load-order", work);
	if (write_file(path, order_txt ? order_txt : "", olen, 0644, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/bin/busybox", work);
	if (copy_into("/bin/busybox", path, 0755, err) < 0)
		goto out;
	snprintf(src, sizeof(src), "%s/../share/vhpc/initramfs-init", self_dir());
	snprintf(path, sizeof(path), "%s/init", work);
	if (copy_into(src, path, 0755, err) < 0)
		goto out;
	for (const char *const *dname = (const char *const[]){ "proc", "sys", "dev", "newroot", "run", NULL };
	     *dname; dname++) {
		snprintf(path, sizeof(path), "%s/%s", work, *dname);
		if (mkdir_p(path, 0755, err) < 0)
			goto out;
	}
	if (fix_times(work, err) < 0)
		goto out;
	{
		/* Sorted names and --reproducible: the same bytes every time. */
		char cmd[PATH_MAX * 2 + 256];
		const char *sh[] = { "sh", "-c", cmd, NULL };

		snprintf(cmd, sizeof(cmd),
			 "set -e; cd '%s'; find . -mindepth 1 | LC_ALL=C sort | "
			 "cpio --quiet -o -H newc --reproducible -R 0:0 | gzip -n -9 > '%s'", work, out);
		if (run_ok(sh, 300000, err) < 0)
			goto out;
	}
	log_info("image: initramfs with %zu modules for %s", n, rel);
	r = 0;
out:
	free(order);
	free(state);
	free(order_txt);
	moddep_free(&m);
	return r;
}

/* The ELF kernel inside a bzImage: the setup header says where the
 * compressed payload is; the first bytes say how it is compressed. */
static int extract_vmlinux(const char *bz, const char *out, const char *tmp, struct verr *err)
{
	char *buf, *elf = NULL;
	size_t len, elen;
	uint32_t off, plen;
	const char *tool;
	int r;

	if (read_file(bz, &buf, &len, 256u << 20, err) < 0)
		return -1;
	if (len < 0x250 || memcmp(buf + 0x202, "HdrS", 4)) {
		free(buf);
		return verr_set(err, "%s is not a bzImage", bz);
	}
	memcpy(&off, buf + 0x248, 4);
	memcpy(&plen, buf + 0x24c, 4);
	off += ((uint8_t)buf[0x1f1] + 1) * 512;
	if ((uint64_t)off + plen > len || plen < 4) {
		free(buf);
		return verr_set(err, "%s: payload outside the file", bz);
	}
	if (!memcmp(buf + off, "\x02\x21\x4c\x18", 4))
		tool = "lz4";
	else if (!memcmp(buf + off, "\x1f\x8b", 2))
		tool = "gzip";
	else if (!memcmp(buf + off, "\xfd" "7zXZ", 4))
		tool = "xz";
	else if (!memcmp(buf + off, "\x28\xb5\x2f\xfd", 4))
		tool = "zstd";
	else {
		free(buf);
		return verr_set(err, "%s: unknown kernel compression", bz);
	}
	r = write_file(tmp, buf + off, plen, 0644, err);
	free(buf);
	if (r < 0)
		return -1;
	{
		const char *argv[] = { tool, "-dc", tmp, NULL };
		struct verr ignore;

		/* The payload ends with the uncompressed size, which some tools
		 * call trailing garbage: judge by what comes out. */
		run_capture(argv, &elf, &elen, 512u << 20, 300000, &ignore);
	}
	unlink(tmp);
	if (!elf || elen < 4 || memcmp(elf, "\x7f" "ELF", 4)) {
		free(elf);
		return verr_set(err, "could not extract the ELF kernel from %s with %s", bz, tool);
	}
	r = write_file(out, elf, elen, 0644, err);
	free(elf);
	return r;
}

static uint64_t tree_bytes(const char *root)
{
	const char *argv[] = { "du", "-sb", root, NULL };
	char *out = NULL;
	struct verr e;
	uint64_t v = 0;

	if (run_capture(argv, &out, NULL, 4096, 60000, &e) == 0)
		v = strtoull(out, NULL, 10);
	free(out);
	return v;
}

/* mke2fs -d copies each inode's change and access times (reading the tree
 * updates the latter, and no one can set the former on the source files);
 * debugfs clears all times afterwards, so the disk's bytes depend on the
 * content alone.  (e2fsprogs 1.47.1 would do it with SOURCE_DATE_EPOCH.) */
static int clear_ctimes(const char *rootfs, const char *image, struct verr *err)
{
	char cmd[PATH_MAX * 2 + 256];
	const char *sh[] = { "sh", "-c", cmd, NULL };

	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; find . | LC_ALL=C sort | "
		 "sed -e 's|^\\.||' -e 's|^$|/|' -e 's|.*|sif \"&\" ctime 0\\nsif \"&\" atime 0\\nsif \"&\" mtime 0|' | "
		 "E2FSPROGS_FAKE_TIME=1 debugfs -w -f - '%s' >/dev/null", rootfs, image);
	return run_ok(sh, 600000, err) < 0 ? verr_wrap(err, "clearing change times in %s", image) : 0;
}

/* bytes: the disk's size; 0: the content and room for metadata. */
static int make_ext4(uint64_t bytes, const char *rootfs, const char *out, const char *manifest_id,
		     struct verr *err)
{
	char size[32], uuid[40], opts[128];
	const char *argv[] = {
		"mke2fs", "-q", "-F", "-t", "ext4", "-d", rootfs, "-L", "vhpc-root", "-m", "0",
		"-U", uuid, "-E", opts, "-O", "^has_journal", out, size, NULL
	};
	int r;

	if (!bytes) {
		/* Content, plus room for metadata, in whole MiB. */
		bytes = tree_bytes(rootfs) * 5 / 4 + (32u << 20);
		bytes = (bytes + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	}
	snprintf(size, sizeof(size), "%lluk", (unsigned long long)(bytes >> 10));
	/* uuid and hash seed from the content: same content, same bytes. */
	snprintf(uuid, sizeof(uuid), "%.8s-%.4s-%.4s-%.4s-%.12s", manifest_id, manifest_id + 8,
		 manifest_id + 12, manifest_id + 16, manifest_id + 20);
	snprintf(opts, sizeof(opts), "root_owner=0:0,hash_seed=%s", uuid);
	setenv("E2FSPROGS_FAKE_TIME", "1", 1);
	r = run_ok(argv, 600000, err);
	unsetenv("E2FSPROGS_FAKE_TIME");
	if (r < 0)
		return verr_wrap(err, "making %s", out);
	return clear_ctimes(rootfs, out, err);
}

int image_kvm_stage(const struct image_spec *s, const char *stage, const char *rootfs_id,
		    unsigned flags, struct verr *err)
{
	char tree[PATH_MAX], rel[128], kdir[PATH_MAX + 8], path[PATH_MAX + 64], work[PATH_MAX + 64];
	char rootfs[PATH_MAX + 16];

	if (s->kvm.kernel_package) {
		if (image_fetch_kernel(s->kvm.kernel_package, tree, sizeof(tree), err) < 0)
			return -1;
		if (find_release(tree, rel, sizeof(rel), err) < 0)
			return -1;
		snprintf(path, sizeof(path), "%s/boot/vmlinuz-%s", tree, rel);
	} else {
		/* A kernel on this host: its modules are under /lib/modules. */
		const char *slash;

		snprintf(tree, sizeof(tree), "%s", s->kvm.modules_root ? s->kvm.modules_root : "/");
		slash = strrchr(s->kvm.kernel, '-');
		if (s->kvm.release)
			snprintf(rel, sizeof(rel), "%s", s->kvm.release);
		else if (slash && !strncmp(strrchr(s->kvm.kernel, '/') ? strrchr(s->kvm.kernel, '/') + 1 : s->kvm.kernel, "vmlinuz-", 8))
			snprintf(rel, sizeof(rel), "%s", strstr(s->kvm.kernel, "vmlinuz-") + 8);
		else
			return verr_set(err, "kvm.kernel %s: name the kernel release with kvm.release", s->kvm.kernel);
		if (!release_ok(rel))
			return verr_set(err, "kernel release '%s' has odd characters", rel);
		snprintf(path, sizeof(path), "%s", s->kvm.kernel);
	}
	snprintf(kdir, sizeof(kdir), "%s/kvm", stage);
	if (mkdir_p(kdir, 0755, err) < 0)
		return -1;
	snprintf(work, sizeof(work), "%s/vmlinuz", kdir);
	if (copy_into(path, work, 0644, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/vmlinux", kdir);
	snprintf(work, sizeof(work), "%s/.payload", stage);
	{
		char bz[PATH_MAX + 16];

		snprintf(bz, sizeof(bz), "%s/vmlinuz", kdir);
		if (extract_vmlinux(bz, path, work, err) < 0)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/kernel.version", kdir);
	{
		char line[160];

		snprintf(line, sizeof(line), "%s\n", rel);
		if (write_file(path, line, strlen(line), 0644, err) < 0)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/initramfs.img", kdir);
	snprintf(work, sizeof(work), "%s/.initramfs", stage);
	if (make_initramfs(s, tree, rel, path, work, err) < 0)
		return -1;
	if (rm_rf(work, err) < 0)
		return -1;
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", stage);
	if (fix_times(rootfs, err) < 0)
		return -1;
	if (flags & (IMAGE_SQUASHFS | IMAGE_EROFS))
		return fix_times(kdir, err);
	snprintf(path, sizeof(path), "%s/rootfs.ext4", kdir);
	if (make_ext4(s->kvm.rootfs_size, rootfs, path, rootfs_id, err) < 0)
		return -1;
	return fix_times(kdir, err);
}

int image_kvm_from_base(const struct image_info *base, const char *stage, const char *rootfs_id, unsigned flags,
			struct verr *err)
{
	char kdir[PATH_MAX + 8], path[PATH_MAX + 64], src[PATH_MAX + 64];
	static const char *const parts[] = { "vmlinuz", "vmlinux", "initramfs.img", "kernel.version", NULL };

	if (!base->kvm)
		return verr_set(err, "image %s (%.12s) has no kvm parts to give: build it with its kvm: section", base->name,
				base->id);
	snprintf(kdir, sizeof(kdir), "%s/kvm", stage);
	if (mkdir_p(kdir, 0755, err) < 0)
		return -1;
	for (int i = 0; parts[i]; i++) {
		snprintf(src, sizeof(src), "%s/kvm/%s", base->dir, parts[i]);
		snprintf(path, sizeof(path), "%s/%s", kdir, parts[i]);
		if (copy_into(src, path, 0644, err) < 0)
			return -1;
	}
	snprintf(src, sizeof(src), "%s/rootfs", stage);
	if (fix_times(src, err) < 0)
		return -1;
	if (!(flags & (IMAGE_SQUASHFS | IMAGE_EROFS))) {
		snprintf(path, sizeof(path), "%s/rootfs.ext4", kdir);
		if (make_ext4(0, src, path, rootfs_id, err) < 0)
			return -1;
	}
	return fix_times(kdir, err);
}
