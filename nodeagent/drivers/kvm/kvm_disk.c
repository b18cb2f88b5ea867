/*
 * The files a kvm job gives its guests as disks and BARs.
 *
 * The config disk: what container guests get as a read-only bind mount at
 * /vhpc (the job key, hosts, hostfile), plus the environment vhpc-guestd
 * starts with and the tuning profile's sysctls, as a small ext4 image made
 * by mke2fs -d (no loop mount).  A disk, not the kernel command line: the
 * command line is in every host user's view of the process list, and the
 * key must never be.
 *
 * A scratch disk: an empty writable ext4 per guest, for jobs that want a
 * node-local /scratch, in the node's scratch folder on disk.  It was a
 * sparse file in the job dir, under the run dir, which is a tmpfs: what a
 * guest wrote there took the node's memory.
 *
 * The vmshm region: grown to the power of two a PCI BAR must be.
 */
#include "nodeagent/job.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/bytes.h"
#include "lib/cluster.h"
#include "lib/jobspec.h"
#include "lib/paths.h"
#include "lib/proc.h"
#include "lib/tuning.h"
#include "kvm_int.h"
#include "nodeagent/drivers/kvm/kvm.h"
#include "nodeagent/jobdir/jobdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bytes the files of dir take, plus room for each entry's metadata. */
static int dir_bytes(const char *dir, uint64_t *bytes, int *entries, struct verr *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	*bytes = 0;
	*entries = 0;
	if (!d)
		return verr_errno(err, "%s", dir);
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			uint64_t b;
			int e;

			if (dir_bytes(path, &b, &e, err) < 0) {
				closedir(d);
				return -1;
			}
			*bytes += b;
			*entries += e;
		}
		*bytes += (uint64_t)st.st_size + 4096;
		(*entries)++;
	}
	closedir(d);
	return 0;
}

int na_kvm_config_disk(const struct na_jobdir *jd, const char *src_dir,
		       const char *const *env, const struct tuning *tuning,
		       char *path, size_t len, struct verr *err)
{
	char file[PATH_MAX], size[32], inodes[16], *text = NULL;
	uint64_t bytes;
	int entries, fd;
	const char *argv[] = {
		"mke2fs", "-q", "-F", "-t", "ext4", "-d", src_dir, "-L", "vhpc-config", "-m", "0",
		"-N", inodes, "-O", "^has_journal,^resize_inode", "-E", "root_owner=0:0", path, size, NULL
	};

	snprintf(path, len, "%s/config.ext4", jd->path);
	snprintf(file, sizeof(file), "%s/env", src_dir);
	if (na_kvm_env_text(env, &text, err) < 0)
		return -1;
	if (write_file(file, text, strlen(text), 0644, err) < 0) {
		free(text);
		return -1;
	}
	free(text);
	snprintf(file, sizeof(file), "%s/sysctl.conf", src_dir);
	if (na_kvm_sysctl_text(tuning, &text, err) < 0)
		return -1;
	if (write_file(file, text, strlen(text), 0644, err) < 0) {
		free(text);
		return -1;
	}
	free(text);
	if (dir_bytes(src_dir, &bytes, &entries, err) < 0)
		return -1;
	/* Twice the content and 1 MiB for the file system itself, whole MiB. */
	bytes = (bytes * 2 + (2u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	snprintf(size, sizeof(size), "%lluk", (unsigned long long)(bytes >> 10));
	snprintf(inodes, sizeof(inodes), "%d", entries + 32);
	/* Made 0600 before mke2fs writes the key into it. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return verr_errno(err, "config disk %s", path);
	close(fd);
	if (run_capture(argv, NULL, NULL, 1 << 16, 60000, err) != 0) {
		unlink(path);
		return verr_wrap(err, "making the config disk %s", path);
	}
	return 0;
}

int na_kvm_scratch_dir(char *buf, size_t len, struct verr *err)
{
	struct cluster_cfg cl;
	int n;

	if (cluster_load(NULL, &cl, err) < 0)
		return verr_wrap(err, "where scratch disks go (scratch_dir)");
	if (cl.scratch_dir)
		n = snprintf(buf, len, "%s", cl.scratch_dir);
	else
		n = snprintf(buf, len, "%s/scratch", vhpc_state_dir());
	cluster_free(&cl);
	if (n < 0 || (size_t)n >= len)
		return verr_set(err, "scratch folder %.60s...: path too long", buf);
	return 0;
}

/* Only root may add, remove or swap names in it: no one can put a name
 * of theirs where the disk is made. */
static int scratch_dir_open(const char *dir, struct verr *err)
{
	struct stat st;
	int dfd;

	if (dir[0] != '/')
		return verr_set(err, "scratch folder '%s': not an absolute path", dir);
	if (mkdir_p(dir, 0700, err) < 0)
		return verr_wrap(err, "scratch folder");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return verr_errno(err, "scratch folder %s", dir);
	if (fstat(dfd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		verr_set(err, "scratch folder %s: must be root's and writable by root only (it is uid %u, mode %03o)",
			 dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
		close(dfd);
		return -1;
	}
	return dfd;
}

#define SCRATCH_TMP ".vhpc-scratch-"

/* Where a file system cannot make unnamed files (FUSE before Linux 6.3,
 * NFS): a name for the moment between creating and unlinking, and names
 * an agent killed in that moment left, removed once they are a minute
 * old (another agent's may be in its moment now). */
static int named_then_gone(int dfd)
{
	char name[64];
	uint8_t rnd[8];
	DIR *d;
	int fd, e;

	if ((fd = dup(dfd)) >= 0 && (d = fdopendir(fd))) {
		struct dirent *de;
		struct stat st;

		while ((de = readdir(d)))
			if (!strncmp(de->d_name, SCRATCH_TMP, strlen(SCRATCH_TMP)) &&
			    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mtime < time(NULL) - 60)
				unlinkat(dfd, de->d_name, 0);
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
	random_bytes(rnd, sizeof(rnd));
	snprintf(name, sizeof(name), SCRATCH_TMP "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
		 rnd[4], rnd[5], rnd[6], rnd[7]);
	fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	e = errno;
	if (fd >= 0)
		unlinkat(dfd, name, 0);
	errno = e;
	return fd;
}

int na_kvm_scratch_disk(const char *dir, uint64_t size, int *fdp, struct verr *err)
{
	/* Lazy inode tables and journal: mke2fs writes a few MiB whatever the
	 * size, and the guest kernel initialises the rest as it goes. */
	char self[64];
	const char *argv[] = {
		"mke2fs", "-q", "-F", "-t", "ext4", "-L", "vhpc-scratch", "-m", "0",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0", self, NULL
	};
	int dfd, fd, e;

	*fdp = -1;
	if (size < JOB_SCRATCH_MIN || size > JOB_SCRATCH_MAX)
		return verr_set(err, "scratch disk: %llu bytes is outside 16M..64T", (unsigned long long)size);
	if ((dfd = scratch_dir_open(dir, err)) < 0)
		return -1;
	fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
		fd = named_then_gone(dfd);
	e = errno;
	close(dfd);
	if (fd < 0) {
		errno = e;
		return verr_errno(err, "scratch folder %s", dir);
	}
	if (fallocate(fd, 0, 0, (off_t)size) < 0) {
		e = errno;
		if (e != EOPNOTSUPP) {
			close(fd);
			errno = e;
			return verr_errno(err, "scratch disk of %llu MiB in %s%s", (unsigned long long)(size >> 20), dir,
					  e == ENOSPC ? " (the scratch folder has no room for it)" : "");
		}
		/* A file system without fallocate: sparse, as good as it gets. */
		if (ftruncate(fd, (off_t)size) < 0) {
			verr_errno(err, "scratch disk in %s: cannot make it %llu bytes", dir, (unsigned long long)size);
			close(fd);
			return -1;
		}
	}
	/* mke2fs reaches the unnamed file through this process's descriptor. */
	snprintf(self, sizeof(self), "/proc/%d/fd/%d", (int)getpid(), fd);
	if (run_capture(argv, NULL, NULL, 1 << 16, 120000, err) != 0) {
		close(fd);
		return verr_wrap(err, "making a scratch disk in %s", dir);
	}
	*fdp = fd;
	return 0;
}

int na_kvm_vmshm_fit(const char *path, uint64_t *size, struct verr *err)
{
	struct stat st;
	uint64_t want = 4096;
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return verr_errno(err, "vmshm region %s", path);
	if (fstat(fd, &st) < 0) {
		close(fd);
		return verr_errno(err, "vmshm region %s", path);
	}
	while (want < (uint64_t)st.st_size)
		want <<= 1;
	if (want != (uint64_t)st.st_size && ftruncate(fd, (off_t)want) < 0) {
		close(fd);
		return verr_errno(err, "vmshm region %s: cannot grow it to %llu bytes (a power of two, as a PCI BAR)",
				  path, (unsigned long long)want);
	}
	close(fd);
	*size = want;
	return 0;
}
