/*
 * vhpc's part of an imported image.  A job runs mpirun from the image, so
 * the image must bring Open MPI; vhpc adds its guest programs and the vmshm
 * BTL, and checks, by running the image's own ompi_info, that this Open MPI
 * is the version the BTL was built for and does load it.
 *
 * vhpc-mpibench and the other bench programs go in as they are, and stay
 * only where they start on the image's libraries (add_tools).
 *
 * vhpc-guestd and vhpc-rsh go in with every library they need, the
 * dynamic loader included (/usr/local/lib/vhpc/sys), started through
 * vhpc-sysexec (static): an image's C library may be older than this
 * host's.  The BTL cannot do that (it is loaded into the image's Open MPI
 * processes), which is what the check is for.
 *
 * The image's programs run in a sandbox: chrooted into the rootfs, as
 * nobody without capabilities or a way to gain any (no new privileges; the
 * import took every setuid bit away first), in mount, pid, network, IPC
 * and UTS namespaces of their own (util-linux's setpriv and unshare).
 */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/proc.h"
#include "image_int.h"
#include "images/images.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SYS_DIR "/usr/local/lib/vhpc/sys"
#define GUEST_PATH VHPC_GUEST_BIN ":/usr/bin:/usr/sbin:/bin:/sbin"
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Runs cmd in the image (sandboxed) with env, stdout and stderr together
 * in *out; its exit status returned, -1 when it could not run. */
static int in_image(const char *root, const char *const *env, const char *const *cmd, char **out, struct verr *err)
{
	const char *argv[64];
	char rootopt[PATH_MAX + 16];
	int n = 0, rc;

	snprintf(rootopt, sizeof(rootopt), "--root=%s", root);
	argv[n++] = "sh";
	argv[n++] = "-c";
	argv[n++] = "exec \"$@\" 2>&1";
	argv[n++] = "sh";
	argv[n++] = "env";
	argv[n++] = "-i";
	for (int i = 0; env && env[i] && n < 30; i++)
		argv[n++] = env[i];
	/* chroot as root (the rootfs may be below folders only root may
	 * pass), then nobody with no capability and no way to gain one. */
	for (const char *const *a = (const char *const[]){ "setpriv", "--no-new-privs", "unshare", "--mount", "--pid",
			"--fork", "--net", "--ipc", "--uts", "--mount-proc", "--setgid=65534", "--setuid=65534", NULL }; *a; a++)
		argv[n++] = *a;
	argv[n++] = rootopt;
	for (int i = 0; cmd[i] && n < 63; i++)
		argv[n++] = cmd[i];
	argv[n] = NULL;
	*out = NULL;
	rc = run_capture(argv, out, NULL, 4 << 20, 120000, err);
	if (rc > 0 && !*out)
		*out = strdup("");
	return rc;
}

/* A path in the image as the image sees it, symlinks followed inside the
 * rootfs only; *exec: an executable file. */
static int resolve(int rootfd, const char *root, const char *rel, char *out, size_t len, bool *exec)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	char link[64], real[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd = (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));

	if (fd < 0)
		return -1;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, real, sizeof(real) - 1);
	*exec = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
	close(fd);
	if (n < 0)
		return -1;
	real[n] = 0;
	if (strncmp(real, root, strlen(root)) || (real[strlen(root)] != '/' && real[strlen(root)] != 0))
		return -1;
	snprintf(out, len, "%s", real[strlen(root)] ? real + strlen(root) : "/");
	return 0;
}

/* prog along path (the image's), as the image sees it. */
static int find_prog(int rootfd, const char *root, const char *path, const char *prog, char *out, size_t len)
{
	char buf[4096], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char rel[PATH_MAX];
		bool exec;

		if (d[0] != '/')
			continue;
		snprintf(rel, sizeof(rel), "%s/%s", d, prog);
		if (resolve(rootfd, root, rel, out, len, &exec) == 0 && exec)
			return 0;
	}
	return -1;
}

/* Open MPI's programs where guests look for them (their PATH is vhpc's):
 * a link in /usr/local/bin for those the image keeps elsewhere. */
static int link_programs(int rootfd, const char *root, const char *path, char *ompi_info, size_t len,
			 struct verr *err)
{
	static const char *const progs[] = { "ompi_info", "mpirun", "orted", NULL };

	for (int i = 0; progs[i]; i++) {
		char where[PATH_MAX], there[PATH_MAX + 64];

		if (find_prog(rootfd, root, path, progs[i], where, sizeof(where)) < 0)
			return verr_set(err, "the image has no Open MPI: %s is not on its PATH (%s); vhpc runs a job's mpirun, "
					"orted and ranks with the image's own Open MPI", progs[i], path);
		if (i == 0)
			snprintf(ompi_info, len, "%s", where);
		if (find_prog(rootfd, root, GUEST_PATH, progs[i], there, sizeof(there)) == 0)
			continue;
		snprintf(there, sizeof(there), "%s%s/%s", root, VHPC_GUEST_BIN, progs[i]);
		if (symlink(where, there) < 0)
			return verr_errno(err, "cannot link %s to %s in the image", there, where);
		log_info("image import: %s%s/%s -> %s (guests look for it there)", "", VHPC_GUEST_BIN, progs[i], where);
	}
	return 0;
}

/* "key:value" lines of ompi_info --parsable: the value of the first key. */
static int parsable(const char *text, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl)) {
			snprintf(out, len, "%.*s", (int)strcspn(l + kl, "\n"), l + kl);
			return 0;
		}
	return -1;
}

static bool same_minor(const char *a, const char *b)
{
	int a1, a2, b1, b2;

	return sscanf(a, "%d.%d", &a1, &a2) == 2 && sscanf(b, "%d.%d", &b1, &b2) == 2 && a1 == b1 && a2 == b2;
}

/* The lines of out that name what, for a message (at most a few). */
static void quote_lines(const char *out, const char *what, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (const char *l = out; l && *l && n + 2 < len; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		int ll = (int)strcspn(l, "\n");

		if (memmem(l, (size_t)ll, what, strlen(what)))
			n += (size_t)snprintf(buf + n, len - n, "%s%.*s", n ? " / " : "", ll > 300 ? 300 : ll, l);
	}
}

/* The image's Open MPI: the version the BTL was built for (this host's),
 * its components where vhpc's launch looks (Debian's folder, linked to
 * the image's own), and the vmshm BTL loaded from the image. */
static int check_ompi(int rootfd, const char *root, const char *ompi_info, struct verr *err)
{
	static const char *const env_pl[] = { "PATH=" DEFAULT_PATH, "HOME=/tmp", NULL };
	static const char *const env_btl[] = {
		"PATH=" DEFAULT_PATH, "HOME=/tmp",
		"OMPI_MCA_mca_base_component_path=" VHPC_GUEST_OMPI_COMPONENTS ":" VHPC_GUEST_VMSHM_DIR,
		"OMPI_MCA_mca_base_component_show_load_errors=1", NULL
	};
	const char *cmd_pl[] = { ompi_info, "--parsable", "--path", "pkglibdir", NULL };
	const char *cmd_all[] = { ompi_info, "--parsable", NULL };
	const char *host_cmd[] = { "ompi_info", "--parsable", NULL };
	char *out = NULL, pkglib[PATH_MAX], mine[64], theirs[64], why[1024];
	bool exec;
	int rc;

	if (run_capture(host_cmd, &out, NULL, 4 << 20, 60000, err) != 0 ||
	    parsable(out, "ompi:version:full:", mine, sizeof(mine)) < 0) {
		free(out);
		return verr_set(err, "this host's ompi_info does not say its version (openmpi-bin, which the vmshm BTL was built with)");
	}
	free(out);
	rc = in_image(root, env_pl, cmd_pl, &out, err);
	if (rc != 0 || parsable(out, "path:pkglibdir:", pkglib, sizeof(pkglib)) < 0 || pkglib[0] != '/') {
		if (rc == 0)
			verr_set(err, "it says no pkglibdir: %.300s", out ? out : "");
		free(out);
		return verr_wrap(err, "the image's %s", ompi_info);
	}
	free(out);
	/* vhpc's launch names Debian's component folder: a link there when
	 * the image keeps its components elsewhere. */
	{
		char where[PATH_MAX];

		if (resolve(rootfd, root, VHPC_GUEST_OMPI_COMPONENTS, where, sizeof(where), &exec) < 0) {
			char dir[PATH_MAX], link[PATH_MAX + 64];

			snprintf(dir, sizeof(dir), "%s", VHPC_GUEST_OMPI_COMPONENTS);
			*strrchr(dir, '/') = 0;
			snprintf(link, sizeof(link), "%s%s", root, dir);
			if (mkdir_p(link, 0755, err) < 0)
				return -1;
			snprintf(link, sizeof(link), "%s%s", root, VHPC_GUEST_OMPI_COMPONENTS);
			if (symlink(pkglib, link) < 0)
				return verr_errno(err, "cannot link %s to the image's components %s", VHPC_GUEST_OMPI_COMPONENTS, pkglib);
			log_info("image import: %s -> %s (Open MPI's components)", VHPC_GUEST_OMPI_COMPONENTS, pkglib);
		}
	}
	rc = in_image(root, env_btl, cmd_all, &out, err);
	if (rc != 0) {
		free(out);
		return verr_wrap(err, "the image's %s", ompi_info);
	}
	if (parsable(out, "ompi:version:full:", theirs, sizeof(theirs)) < 0) {
		free(out);
		return verr_set(err, "the image's %s does not say its version", ompi_info);
	}
	if (!same_minor(theirs, mine)) {
		free(out);
		return verr_set(err, "the image's Open MPI is %s; vhpc's vmshm BTL is built for Open MPI %s (this host's), and "
				"Open MPI loads components built for its own version only: this image's Open MPI cannot load the BTL",
				theirs, mine);
	}
	if (!strstr(out, "\nmca:btl:vmshm:version:")) {
		quote_lines(out, "vmshm", why, sizeof(why));
		free(out);
		return verr_set(err, "the image's Open MPI %s cannot load vhpc's vmshm BTL: %s", theirs,
				why[0] ? why : "ompi_info does not list it");
	}
	if (!strstr(out, "\nmca:plm:rsh:version:") || !strstr(out, "\nmca:btl:tcp:version:")) {
		free(out);
		return verr_set(err, "the image's Open MPI %s has no rsh launcher or tcp BTL where vhpc's launch looks (%s)",
				theirs, pkglib);
	}
	log_info("image import: Open MPI %s in the image loads the vmshm BTL", theirs);
	free(out);
	return 0;
}

static int copy_to(const char *src, const char *root, const char *dst, mode_t mode, struct verr *err)
{
	char path[PATH_MAX], *buf;
	size_t len;
	int rc;

	snprintf(path, sizeof(path), "%s%s", root, dst);
	unlink(path);
	if (read_file(src, &buf, &len, 256u << 20, err) < 0)
		return -1;
	rc = write_file(path, buf, len, mode, err);
	free(buf);
	return rc;
}

/* vhpc-guestd and vhpc-rsh with their libraries and this host's loader,
 * and vhpc-sysexec as each of them in /usr/local/bin. */
static int add_programs(const char *root, struct verr *err)
{
	static const char *const progs[] = { "vhpc-guestd", "vhpc-rsh", NULL };
	char dir[PATH_MAX], src[PATH_MAX], dst[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s%s", root, SYS_DIR);
	if (mkdir_p(dir, 0755, err) < 0)
		return -1;
	for (int i = 0; progs[i]; i++) {
		const char *argv[] = { "ldd", src, NULL };
		char *out = NULL, *line, *save = NULL;

		snprintf(src, sizeof(src), "%s/%s", self_dir(), progs[i]);
		snprintf(dst, sizeof(dst), "%s/%s", SYS_DIR, progs[i]);
		if (copy_to(src, root, dst, 0755, err) < 0)
			return verr_wrap(err, "%s, vhpc's guest program, is missing beside vhpc (make builds it, make install installs it)",
					 progs[i]);
		if (run_capture(argv, &out, NULL, 1 << 20, 30000, err) != 0)
			return verr_wrap(err, "ldd %s", src);
		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *p = strstr(line, "=> "), *end;
			const char *name;

			p = p ? p + 3 : line + strspn(line, " \t");
			if (*p != '/')
				continue;
			if ((end = strstr(p, " (")))
				*end = 0;
			name = strstr(p, "/ld-linux") ? "ld.so" : strrchr(p, '/') + 1;
			snprintf(dst, sizeof(dst), "%s/%s", SYS_DIR, name);
			if (copy_to(p, root, dst, 0755, err) < 0) {
				free(out);
				return -1;
			}
		}
		free(out);
		snprintf(src, sizeof(src), "%s/vhpc-sysexec", self_dir());
		snprintf(dst, sizeof(dst), "%s/%s", VHPC_GUEST_BIN, progs[i]);
		if (copy_to(src, root, dst, 0755, err) < 0)
			return verr_wrap(err, "vhpc-sysexec, which starts vhpc's guest programs in an image, is missing beside vhpc "
					 "(make builds it, make install installs it)");
	}
	return 0;
}

/* vhpc's own MPI tools, which the README tells users to run, as the
 * default image has them: vhpc-mpibench and the native sides of `vhpc
 * bench`.  Unlike the guest agent they are the job's ranks, so they run on
 * the image's own Open MPI and C library, as any MPI program of the image
 * does; the import has checked that Open MPI is this host's major.minor,
 * which they were built with.  Each must start there with every symbol
 * bound (LD_BIND_NOW: a libmpi without one they call, a C library older
 * than this host's); one that does not is left out, saying why, and a job
 * that names it is told it is not in the image (scheduler/launch.c). */
static int add_tools(const char *root, struct verr *err)
{
	static const char *const tools[] = { "vhpc-mpibench", "vhpc-netbench", "vhpc-sysbench", NULL };
	static const char *const env[] = { "PATH=" GUEST_PATH, "HOME=/tmp", "LD_BIND_NOW=1", NULL };

	for (int i = 0; tools[i]; i++) {
		char src[PATH_MAX], dst[PATH_MAX], path[PATH_MAX + 64], why[512], *out = NULL;
		const char *cmd[] = { dst, "--help", NULL };
		int rc;

		snprintf(src, sizeof(src), "%s/%s", self_dir(), tools[i]);
		snprintf(dst, sizeof(dst), "%s/%s", VHPC_GUEST_BIN, tools[i]);
		if (copy_to(src, root, dst, 0755, err) < 0)
			return verr_wrap(err, "%s, vhpc's benchmark, is missing beside vhpc (make builds it, make install installs it)",
					 tools[i]);
		rc = in_image(root, env, cmd, &out, err);
		if (rc == 0) {
			free(out);
			continue;
		}
		snprintf(why, sizeof(why), "%s", rc < 0 ? err->msg : out ? out : "");
		why[strcspn(why, "\n")] = 0;
		free(out);
		snprintf(path, sizeof(path), "%s%s", root, dst);
		if (unlink(path) < 0)
			return verr_errno(err, "cannot remove %s", path);
		log_warn("image import: %s is left out: it does not start on the image's libraries (%s); a job that "
			 "runs it is told it is not in the image", tools[i], why[0] ? why : "no reason given");
	}
	return 0;
}

int image_oci_add_vhpc(const char *root, const char *path_env, struct verr *err)
{
	static const char *const env[] = { "PATH=" GUEST_PATH, "HOME=/tmp", NULL };
	const char *cmd[] = { VHPC_GUEST_BIN "/vhpc-guestd", "--version", NULL };
	char ompi_info[PATH_MAX], src[PATH_MAX], dir[PATH_MAX], *out = NULL;
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1;

	if (rootfd < 0)
		return verr_errno(err, "cannot open %s", root);
	if (link_programs(rootfd, root, path_env ? path_env : DEFAULT_PATH, ompi_info, sizeof(ompi_info), err) < 0)
		goto out;
	snprintf(dir, sizeof(dir), "%s%s", root, VHPC_GUEST_VMSHM_DIR);
	snprintf(src, sizeof(src), "%s/../lib/vhpc/openmpi/mca_btl_vmshm.so", self_dir());
	if (mkdir_p(dir, 0755, err) < 0 ||
	    copy_to(src, root, VHPC_GUEST_VMSHM_DIR "/mca_btl_vmshm.so", 0644, err) < 0 ||
	    check_ompi(rootfd, root, ompi_info, err) < 0 || add_programs(root, err) < 0 || add_tools(root, err) < 0)
		goto out;
	/* The guest agent must start in this image, whatever its C library. */
	if (in_image(root, env, cmd, &out, err) != 0) {
		verr_wrap(err, "vhpc-guestd does not start in the image (%.200s)", out ? out : "");
		goto out;
	}
	rc = 0;
out:
	free(out);
	close(rootfd);
	return rc;
}
