/*
 * Whole-file and directory helpers.
 */
#ifndef VHPC_LIB_FSUTIL_H
#define VHPC_LIB_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "lib/err.h"

/* Whole-file helpers; read_file NUL-terminates and caps at max bytes. */
int read_file(const char *path, char **buf, size_t *len, size_t max,
	      struct verr *err);
int write_file(const char *path, const void *buf, size_t len, mode_t mode,
	       struct verr *err);
/* Writes to path.tmp.<pid>, fsyncs it, renames it over path and fsyncs
 * the folder: readers never see half a file, and after a crash or power
 * loss path holds the old content or the new, whole. */
int write_file_atomic(const char *path, const void *buf, size_t len,
		      mode_t mode, struct verr *err);
int mkdir_p(const char *path, mode_t mode, struct verr *err);
/* rm -rf that does not cross mount points and refuses "/" and "". */
int rm_rf(const char *path, struct verr *err);
/* Writes a string to a sysfs/procfs/cgroup file. */
/* name (one component) under dirfd and everything below it, never
 * following a link or crossing a mount; a missing name is no error. */
int rm_rf_at_fd(int dirfd, const char *name, struct verr *err);
int write_str(const char *path, const char *s, struct verr *err);
/* name (a plain name, never a path) is an entry of the folder dir; a
 * link counts as itself, never followed (sysfs: a device is there). */
bool fs_entry_exists(const char *dir, const char *name);

#endif
