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
 * node-local /scratch.
 *
 * The vmshm region: grown to the power of two a PCI BAR must be.
 */
#include "nodeagent/nodeagent.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/jobspec.h"
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
#include <string.h>
#include <sys/stat.h>
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

int na_kvm_scratch_disk(const struct na_jobdir *jd, int index, uint64_t size, char *path, size_t len,
			struct verr *err)
{
	/* Lazy inode tables and journal: mke2fs writes a few MiB whatever the
	 * size, and the guest kernel initialises the rest as it goes. */
	const char *argv[] = {
		"mke2fs", "-q", "-F", "-t", "ext4", "-L", "vhpc-scratch", "-m", "0",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0", path, NULL
	};
	int fd;

	if (size < JOB_SCRATCH_MIN || size > JOB_SCRATCH_MAX)
		return verr_set(err, "scratch disk: %llu bytes is outside 16M..64T", (unsigned long long)size);
	if ((size_t)snprintf(path, len, "%s/scratch%d.ext4", jd->path, index) >= len)
		return verr_set(err, "scratch disk: path too long under %s", jd->path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return verr_errno(err, "scratch disk %s", path);
	if (ftruncate(fd, (off_t)size) < 0) {
		verr_errno(err, "scratch disk %s: cannot make it %llu bytes", path, (unsigned long long)size);
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	if (run_capture(argv, NULL, NULL, 1 << 16, 120000, err) != 0) {
		unlink(path);
		return verr_wrap(err, "making the scratch disk %s", path);
	}
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
