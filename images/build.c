/*
 * Building a node image's rootfs from this host's installed Debian packages,
 * files and vhpc's own programs, with the shared libraries each ELF file
 * needs.  The result is content-addressed (image_manifest.c) so identical
 * inputs give an identical id on every node.
 */
#include "lib/bytes.h"
#include "lib/config.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/fsutil.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "lib/proc.h"
#include "image_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define K(f) offsetof(struct image_kvm, f)
static const struct cf_field kvm_fields[] = {
	{ .key = "kernel_package", .kind = CF_STR, .off = K(kernel_package) },
	{ .key = "kernel", .kind = CF_STR, .off = K(kernel) },
	{ .key = "release", .kind = CF_STR, .off = K(release) },
	{ .key = "modules_root", .kind = CF_STR, .off = K(modules_root) },
	{ .key = "modules", .kind = CF_STRLIST, .off = K(modules) },
	{ .key = "rootfs_size", .kind = CF_SIZE, .off = K(rootfs_size), .min = 16 << 20, .max = 1ll << 40 },
	{ 0 }
};
static const struct cf_schema kvm_schema = { "kvm", sizeof(struct image_kvm), kvm_fields };

#define S(f) offsetof(struct image_spec, f)
static const struct cf_field spec_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = S(name), .flags = CF_REQUIRED },
	{ .key = "description", .kind = CF_STR, .off = S(description) },
	{ .key = "packages", .kind = CF_STRLIST, .off = S(packages) },
	{ .key = "files", .kind = CF_STRLIST, .off = S(files) },
	{ .key = "exclude", .kind = CF_STRLIST, .off = S(exclude) },
	{ .key = "programs", .kind = CF_STRLIST, .off = S(programs) },
	{ .key = "build_files", .kind = CF_STRMAP, .off = S(build_files) },
	{ .key = "copy", .kind = CF_STRMAP, .off = S(copy) },
	{ .key = "busybox", .kind = CF_BOOL, .off = S(busybox) },
	{ .key = "format", .kind = CF_STR, .off = S(format) },
	{ .key = "kvm", .kind = CF_STRUCT, .off = S(kvm), .sub = &kvm_schema },
	{ 0 }
};
const struct cf_schema image_spec_schema = { "image", sizeof(struct image_spec), spec_fields };

static bool abs_path_ok(const char *p)
{
	return p[0] == '/' && !strstr(p, "/../") && !strstr(p, "/./") &&
	       strcmp(p + strlen(p) - (strlen(p) >= 3 ? 3 : 0), "/..") &&
	       !strchr(p, '\n') && strlen(p) < 1024;
}

int image_spec_load(const char *path, struct image_spec *s, struct verr *err)
{
	memset(s, 0, sizeof(*s));
	if (cf_bind_file(path, &image_spec_schema, s, err) < 0)
		goto fail;
	if (!ident_ok(s->name, 64)) {
		verr_set(err, "%s: name '%s': use letters, digits, '.', '_' and '-'", path, s->name);
		goto fail;
	}
	for (size_t i = 0; i < s->packages.n; i++)
		if (!ident_ok(s->packages.v[i], 128) || strchr(s->packages.v[i], '/')) {
			verr_set(err, "%s: packages[%zu] '%s' is not a Debian package name", path, i, s->packages.v[i]);
			goto fail;
		}
	for (size_t i = 0; i < s->files.n; i++)
		if (!abs_path_ok(s->files.v[i])) {
			verr_set(err, "%s: files[%zu] '%s' is not a plain absolute path", path, i, s->files.v[i]);
			goto fail;
		}
	for (size_t i = 0; i < s->exclude.n; i++)
		if (!abs_path_ok(s->exclude.v[i])) {
			verr_set(err, "%s: exclude[%zu] '%s' is not a plain absolute path", path, i, s->exclude.v[i]);
			goto fail;
		}
	for (size_t i = 0; i < s->programs.n; i++)
		if (!ident_ok(s->programs.v[i], 64)) {
			verr_set(err, "%s: programs[%zu] '%s' is not a program name", path, i, s->programs.v[i]);
			goto fail;
		}
	for (size_t i = 0; i < s->build_files.n; i++)
		if (!abs_path_ok(s->build_files.key[i]) || s->build_files.val[i][0] == '/' ||
		    strstr(s->build_files.val[i], "..")) {
			verr_set(err, "%s: build_files: '%s: %s' needs an absolute image path and a path inside the build directory",
				 path, s->build_files.key[i], s->build_files.val[i]);
			goto fail;
		}
	for (size_t i = 0; i < s->copy.n; i++)
		if (!abs_path_ok(s->copy.key[i]) || !abs_path_ok(s->copy.val[i])) {
			verr_set(err, "%s: copy: '%s: %s' needs an absolute image path and an absolute host path",
				 path, s->copy.key[i], s->copy.val[i]);
			goto fail;
		}
	if (s->format && strcmp(s->format, "tree") && !image_format_flag(s->format)) {
		verr_set(err, "%s: format '%s' is not tree, squashfs or erofs", path, s->format);
		goto fail;
	}
	if (s->kvm.kernel_package && s->kvm.kernel) {
		verr_set(err, "%s: kvm: give kernel_package or kernel, not both", path);
		goto fail;
	}
	if (s->kvm.kernel_package && (!ident_ok(s->kvm.kernel_package, 128) || strncmp(s->kvm.kernel_package, "linux-image-", 12))) {
		verr_set(err, "%s: kvm.kernel_package '%s' is not a linux-image-* package name", path, s->kvm.kernel_package);
		goto fail;
	}
	if ((s->kvm.kernel && !abs_path_ok(s->kvm.kernel)) || (s->kvm.modules_root && !abs_path_ok(s->kvm.modules_root))) {
		verr_set(err, "%s: kvm.kernel and kvm.modules_root must be plain absolute paths", path);
		goto fail;
	}
	for (size_t i = 0; i < s->kvm.modules.n; i++)
		if (!ident_ok(s->kvm.modules.v[i], 64)) {
			verr_set(err, "%s: kvm.modules[%zu] '%s' is not a module name", path, i, s->kvm.modules.v[i]);
			goto fail;
		}
	if (s->kvm.modules.n && !image_spec_has_kvm(s)) {
		verr_set(err, "%s: kvm.modules without kvm.kernel_package or kvm.kernel", path);
		goto fail;
	}
	return 0;
fail:
	image_spec_free(s);
	return -1;
}

void image_spec_free(struct image_spec *s)
{
	cf_release(&image_spec_schema, s);
}

/* ------------------------------------------------------------ file set */

enum ent_kind { ENT_COPY, ENT_LINK, ENT_DATA };

struct ent {
	char *dst;          /* absolute path inside the image */
	enum ent_kind kind;
	char *src;          /* ENT_COPY: host path; ENT_LINK: link text; ENT_DATA: content */
	mode_t mode;
};

struct fileset {
	struct ent *v;
	size_t n, cap;
	struct cf_strlist *exclude;
	char **elf;         /* host paths of ELF files whose libraries to add */
	size_t nelf, capelf;
};

static bool excluded(const struct fileset *fs, const char *p)
{
	for (size_t i = 0; fs->exclude && i < fs->exclude->n; i++) {
		size_t n = strlen(fs->exclude->v[i]);

		if (!strncmp(p, fs->exclude->v[i], n) && (p[n] == 0 || p[n] == '/'))
			return true;
	}
	return false;
}

static struct ent *find_ent(struct fileset *fs, const char *dst)
{
	for (size_t i = 0; i < fs->n; i++)
		if (!strcmp(fs->v[i].dst, dst))
			return &fs->v[i];
	return NULL;
}

static int add_ent(struct fileset *fs, const char *dst, enum ent_kind k,
		   const char *src, mode_t mode, struct verr *err)
{
	struct ent *e;

	if (find_ent(fs, dst))
		return 0;
	if (grow(&fs->v, &fs->cap, fs->n + 1, sizeof(*fs->v), 1024) < 0)
		return verr_set(err, "out of memory");
	e = &fs->v[fs->n];
	e->dst = strdup(dst);
	e->src = strdup(src);
	e->kind = k;
	e->mode = mode;
	if (!e->dst || !e->src) {
		free(e->dst);
		free(e->src);
		return verr_set(err, "out of memory");
	}
	fs->n++;
	return 0;
}

static int add_elf(struct fileset *fs, const char *host, struct verr *err)
{
	if (grow(&fs->elf, &fs->capelf, fs->nelf + 1, sizeof(*fs->elf), 256) < 0)
		return verr_set(err, "out of memory");
	if (!(fs->elf[fs->nelf] = strdup(host)))
		return verr_set(err, "out of memory");
	fs->nelf++;
	return 0;
}

static void fileset_free(struct fileset *fs)
{
	for (size_t i = 0; i < fs->n; i++) {
		free(fs->v[i].dst);
		free(fs->v[i].src);
	}
	for (size_t i = 0; i < fs->nelf; i++)
		free(fs->elf[i]);
	free(fs->v);
	free(fs->elf);
}

static bool is_elf(const char *path)
{
	unsigned char m[4];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool r;

	if (fd < 0)
		return false;
	r = read(fd, m, 4) == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';
	close(fd);
	return r;
}

/* The image keeps the host's layout, but files go under their canonical
 * directory (/bin/sh is stored as /usr/bin/sh behind the merged-/usr links),
 * so nothing is ever written through a symlink inside the staging tree. */
static int canonical_dst(const char *host, char *out, size_t len)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(host, '/');

	if (!slash)
		return -1;
	if (slash == host)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - host), host);
	if (!realpath(dir, real))
		return -1;
	snprintf(out, len, "%s%s%s", strcmp(real, "/") ? real : "", "/", slash + 1);
	return 0;
}

/* Adds a host path (file, or symlink with everything its chain points at).
 * Directories are made as parents of what they hold. */
static int add_host_path(struct fileset *fs, const char *host, int depth, bool required,
			 struct verr *err)
{
	char dst[PATH_MAX];
	struct stat st;

	if (depth > 16)
		return verr_set(err, "symlink chain at %s is too long", host);
	if (excluded(fs, host))
		return 0;
	if (lstat(host, &st) < 0) {
		if (!required)
			return 0;
		return verr_errno(err, "%s", host);
	}
	if (S_ISDIR(st.st_mode))
		return 0;
	if (canonical_dst(host, dst, sizeof(dst)) < 0)
		return required ? verr_errno(err, "cannot resolve the directory of %s", host) : 0;
	if (find_ent(fs, dst))
		return 0;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX], next[PATH_MAX * 2];
		ssize_t n = readlink(host, target, sizeof(target) - 1);

		if (n < 0)
			return verr_errno(err, "readlink %s", host);
		target[n] = 0;
		if (add_ent(fs, dst, ENT_LINK, target, 0777, err) < 0)
			return -1;
		if (target[0] == '/')
			snprintf(next, sizeof(next), "%s", target);
		else
			snprintf(next, sizeof(next), "%.*s/%s", (int)(strrchr(dst, '/') - dst), dst, target);
		return add_host_path(fs, next, depth + 1, false, err);
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	if (add_ent(fs, dst, ENT_COPY, host, st.st_mode & 0777, err) < 0)
		return -1;
	if (is_elf(host) && add_elf(fs, host, err) < 0)
		return -1;
	return 0;
}

static int add_package(struct fileset *fs, const char *pkg, struct verr *err)
{
	char path[PATH_MAX], *buf, *line, *save = NULL;
	struct utsname u;
	const char *arch = "amd64";
	size_t len;

	uname(&u);
	if (!strcmp(u.machine, "aarch64"))
		arch = "arm64";
	snprintf(path, sizeof(path), "/var/lib/dpkg/info/%s.list", pkg);
	if (access(path, R_OK) < 0)
		snprintf(path, sizeof(path), "/var/lib/dpkg/info/%s:%s.list", pkg, arch);
	if (access(path, R_OK) < 0)
		return verr_set(err, "Debian package %s is not installed on this host (apt-get install %s)", pkg, pkg);
	if (read_file(path, &buf, &len, 64 << 20, err) < 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] != '/' || !strcmp(line, "/."))
			continue;
		if (add_host_path(fs, line, 0, false, err) < 0) {
			free(buf);
			return verr_wrap(err, "package %s", pkg);
		}
	}
	free(buf);
	return 0;
}

/* ldd over many files at once: one process per batch rather than per file. */
static int add_libraries(struct fileset *fs, struct verr *err)
{
	for (size_t done = 0; done < fs->nelf;) {
		const char *argv[66];
		size_t n = 0, total = fs->nelf;
		char *out = NULL, *line, *save = NULL;
		struct verr lerr;

		argv[n++] = "ldd";
		while (done < total && n < 65)
			argv[n++] = fs->elf[done++];
		argv[n] = NULL;
		/* ldd exits non-zero when one of the files is static; its
		 * output for the others is still complete. */
		if (run_capture(argv, &out, NULL, 16 << 20, 60000, &lerr) < 0)
			return verr_set(err, "ldd: %s", lerr.msg);
		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *p = strstr(line, "=> "), *end;

			/* Library lines are indented; "FILE:" headers are not. */
			if (line[0] != '\t')
				continue;

			if (p)
				p += 3;
			else
				for (p = line; *p == ' ' || *p == '\t'; p++)
					;
			if (*p != '/') {
				if (strstr(line, "not found"))
					log_warn("image: a library is missing on this host: %s", line);
				continue;
			}
			end = strstr(p, " (");
			if (end)
				*end = 0;
			if (add_host_path(fs, p, 0, true, err) < 0) {
				free(out);
				return -1;
			}
		}
		free(out);
	}
	return 0;
}

static int add_busybox(struct fileset *fs, struct verr *err)
{
	const char *argv[] = { "/bin/busybox", "--list", NULL };
	char *out = NULL, *line, *save = NULL, dst[PATH_MAX], sdst[PATH_MAX];

	if (add_host_path(fs, "/bin/busybox", 0, true, err) < 0)
		return verr_wrap(err, "busybox: true needs Debian's busybox-static");
	if (run_capture(argv, &out, NULL, 1 << 20, 10000, err) != 0)
		return -1;
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!ident_ok(line, 64))
			continue;
		snprintf(dst, sizeof(dst), "/usr/bin/%s", line);
		snprintf(sdst, sizeof(sdst), "/usr/sbin/%s", line);
		/* Real programs from packages win over applets. */
		if (find_ent(fs, dst) || find_ent(fs, sdst))
			continue;
		if (add_ent(fs, dst, ENT_LINK, "busybox", 0777, err) < 0) {
			free(out);
			return -1;
		}
	}
	free(out);
	return 0;
}

static const char etc_passwd[] =
	"root:x:0:0:root:/root:/bin/sh\n"
	"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\nnogroup:x:65534:\n";
static const char etc_nsswitch[] =
	"passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n";
/* Replaced per job by a bind mount; present so the mount point exists. */
static const char etc_hosts[] = "127.0.0.1 localhost\n";

static int add_generated(struct fileset *fs, const struct image_spec *s, struct verr *err)
{
	char info[512];

	snprintf(info, sizeof(info), "name=%s\nbuilder=vhpc %s\n", s->name, VHPC_VERSION);
	if (add_ent(fs, "/etc/passwd", ENT_DATA, etc_passwd, 0644, err) < 0 ||
	    add_ent(fs, "/etc/group", ENT_DATA, etc_group, 0644, err) < 0 ||
	    add_ent(fs, "/etc/nsswitch.conf", ENT_DATA, etc_nsswitch, 0644, err) < 0 ||
	    add_ent(fs, "/etc/hosts", ENT_DATA, etc_hosts, 0644, err) < 0 ||
	    add_ent(fs, "/etc/hostname", ENT_DATA, "guest\n", 0644, err) < 0 ||
	    add_ent(fs, "/etc/resolv.conf", ENT_DATA, "", 0644, err) < 0 ||
	    add_ent(fs, "/etc/vhpc-image", ENT_DATA, info, 0644, err) < 0)
		return -1;
	return 0;
}

static int add_programs(struct fileset *fs, const struct image_spec *s, struct verr *err)
{
	char src[PATH_MAX], dst[PATH_MAX];

	for (size_t i = 0; i < s->programs.n; i++) {
		struct stat st;

		snprintf(src, sizeof(src), "%s/%s", self_dir(), s->programs.v[i]);
		snprintf(dst, sizeof(dst), "/usr/local/bin/%s", s->programs.v[i]);
		if (stat(src, &st) < 0)
			return verr_errno(err, "program %s (looked for %s; make builds it, make install installs it)", s->programs.v[i], src);
		if (add_ent(fs, dst, ENT_COPY, src, st.st_mode & 0755, err) < 0 ||
		    add_elf(fs, src, err) < 0)
			return -1;
	}
	/* Host files put where the image wants them: under /tmp or /run they
	 * would be hidden by the guests' tmpfs. */
	for (size_t i = 0; i < s->copy.n; i++) {
		struct stat st;

		if (stat(s->copy.val[i], &st) < 0 || !S_ISREG(st.st_mode))
			return verr_errno(err, "copy: %s", s->copy.val[i]);
		if (add_ent(fs, s->copy.key[i], ENT_COPY, s->copy.val[i], st.st_mode & 0755, err) < 0)
			return -1;
		if (is_elf(s->copy.val[i]) && add_elf(fs, s->copy.val[i], err) < 0)
			return -1;
	}
	for (size_t i = 0; i < s->build_files.n; i++) {
		struct stat st;

		snprintf(src, sizeof(src), "%s/../%s", self_dir(), s->build_files.val[i]);
		if (stat(src, &st) < 0)
			return verr_errno(err, "build file %s (looked for %s)", s->build_files.val[i], src);
		if (add_ent(fs, s->build_files.key[i], ENT_COPY, src, st.st_mode & 0755, err) < 0)
			return -1;
		if (is_elf(src) && add_elf(fs, src, err) < 0)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ staging */

static int copy_file(const char *src, const char *dst, mode_t mode, struct verr *err)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out;
	char buf[1 << 16];

	if (in < 0)
		return verr_errno(err, "cannot read %s", src);
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (out < 0) {
		close(in);
		return verr_errno(err, "cannot create %s", dst);
	}
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);

		if (n == 0)
			break;
		if (n < 0) {
			/* Across filesystems that cannot do it, copy by hand. */
			if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
				goto fail;
			while ((n = read(in, buf, sizeof(buf))) > 0)
				if (write_full(out, buf, n) < 0)
					goto fail;
			if (n < 0)
				goto fail;
			break;
		}
	}
	close(in);
	fchmod(out, mode);
	if (close(out) < 0)
		return verr_errno(err, "cannot write %s", dst);
	return 0;
fail:
	verr_errno(err, "copying %s to %s", src, dst);
	close(in);
	close(out);
	return -1;
}

static int stage(const struct fileset *fs, const char *root, struct verr *err)
{
	static const char *const dirs[] = {
		"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/local/bin", "/etc",
		"/proc", "/sys", "/dev", "/tmp", "/run", "/var/tmp", "/root", "/home", "/vhpc",
		"/dev/shm", "/mnt", "/scratch", NULL
	};
	static const char *const links[][2] = {
		{ "/bin", "usr/bin" }, { "/sbin", "usr/sbin" }, { "/lib", "usr/lib" }, { "/lib64", "usr/lib64" },
	};
	char path[PATH_MAX];

	for (int i = 0; dirs[i]; i++) {
		snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
		if (mkdir_p(path, 0755, err) < 0)
			return -1;
	}
	chmod(strcat(strcpy(path, root), "/tmp"), 01777);
	/* runc gives a tmpfs the mode of the folder it covers, whatever the
	 * mount's mode= option says. */
	chmod(strcat(strcpy(path, root), "/scratch"), 01777);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", root, links[i][0]);
		if (symlink(links[i][1], path) < 0)
			return verr_errno(err, "symlink %s", path);
	}
	for (size_t i = 0; i < fs->n; i++) {
		const struct ent *e = &fs->v[i];
		char *slash;

		/* The merged-/usr links are already there. */
		if (e->kind == ENT_LINK && (!strcmp(e->dst, "/bin") || !strcmp(e->dst, "/sbin") ||
					    !strcmp(e->dst, "/lib") || !strcmp(e->dst, "/lib64")))
			continue;
		snprintf(path, sizeof(path), "%s%s", root, e->dst);
		slash = strrchr(path, '/');
		*slash = 0;
		if (mkdir_p(path, 0755, err) < 0)
			return -1;
		*slash = '/';
		switch (e->kind) {
		case ENT_COPY:
			if (copy_file(e->src, path, e->mode & ~(mode_t)06000, err) < 0)
				return -1;
			break;
		case ENT_LINK:
			if (symlink(e->src, path) < 0)
				return verr_errno(err, "symlink %s", path);
			break;
		case ENT_DATA:
			if (write_file(path, e->src, strlen(e->src), e->mode, err) < 0)
				return -1;
			break;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ fingerprint */

static void fp_stat(crypto_hash_sha256_state *h, const char *path)
{
	struct stat st;
	char line[PATH_MAX + 96];

	if (stat(path, &st) < 0)
		snprintf(line, sizeof(line), "%s missing\n", path);
	else
		snprintf(line, sizeof(line), "%s %lld %lld.%09ld\n", path, (long long)st.st_size,
			 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	crypto_hash_sha256_update(h, (const unsigned char *)line, strlen(line));
}

/* What every image holds whatever its spec (stage()'s folders, the kvm
 * initramfs's own modules): a change there must rebuild images made before
 * it.  3: /scratch, mode 1777; 4: squashfs and erofs in the initramfs. */
#define IMAGE_LAYOUT "layout 4"

/* What the build reads, cheaply: the spec, the package database (any
 * install or upgrade changes it), and every named file and program.  Equal
 * fingerprints mean a rebuild would produce the same image. */
int image_fingerprint(const char *yaml_path, const struct image_spec *s, const char *format,
		      char out[65], struct verr *err)
{
	crypto_hash_sha256_state h;
	unsigned char d[32];
	char *yaml, path[PATH_MAX];
	size_t len;

	if (read_file(yaml_path, &yaml, &len, CF_MAX_FILE, err) < 0)
		return -1;
	crypto_hash_sha256_init(&h);
	crypto_hash_sha256_update(&h, (const unsigned char *)VHPC_VERSION, strlen(VHPC_VERSION));
	crypto_hash_sha256_update(&h, (const unsigned char *)IMAGE_LAYOUT, strlen(IMAGE_LAYOUT));
	crypto_hash_sha256_update(&h, (const unsigned char *)yaml, len);
	crypto_hash_sha256_update(&h, (const unsigned char *)format, strlen(format));
	free(yaml);
	fp_stat(&h, "/var/lib/dpkg/status");
	for (size_t i = 0; i < s->files.n; i++)
		fp_stat(&h, s->files.v[i]);
	for (size_t i = 0; i < s->programs.n; i++) {
		snprintf(path, sizeof(path), "%s/%s", self_dir(), s->programs.v[i]);
		fp_stat(&h, path);
	}
	for (size_t i = 0; i < s->build_files.n; i++) {
		snprintf(path, sizeof(path), "%s/../%s", self_dir(), s->build_files.val[i]);
		fp_stat(&h, path);
	}
	for (size_t i = 0; i < s->copy.n; i++)
		fp_stat(&h, s->copy.val[i]);
	if (s->kvm.kernel)
		fp_stat(&h, s->kvm.kernel);
	snprintf(path, sizeof(path), "%s/../share/vhpc/initramfs-init", self_dir());
	fp_stat(&h, path);
	crypto_hash_sha256_final(&h, d);
	hex_encode(d, 32, out);
	return 0;
}

int image_stage_rootfs(const struct image_spec *s, const char *root, struct verr *err)
{
	struct fileset fs = { .exclude = (struct cf_strlist *)&s->exclude };
	int r = -1;

	for (size_t i = 0; i < s->packages.n; i++)
		if (add_package(&fs, s->packages.v[i], err) < 0)
			goto out;
	for (size_t i = 0; i < s->files.n; i++)
		if (add_host_path(&fs, s->files.v[i], 0, true, err) < 0)
			goto out;
	if (add_programs(&fs, s, err) < 0 || add_libraries(&fs, err) < 0 ||
	    add_generated(&fs, s, err) < 0)
		goto out;
	if (s->busybox && add_busybox(&fs, err) < 0)
		goto out;
	r = stage(&fs, root, err);
out:
	fileset_free(&fs);
	return r;
}
