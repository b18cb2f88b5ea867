/* File options of vhpc-hv name a path or /dev/fd/N (see hv.h): N is a
 * descriptor the starter opened, so a confined vhpc-hv needs no access to
 * the file itself. */
#ifndef HV_FDPATH_H
#define HV_FDPATH_H

#include "lib/err.h"
#include <stddef.h>

/* An fd of its own (close-on-exec) for path, opened with flags (O_RDONLY
 * or O_RDWR, plus O_CREAT and such for a real path).  For /dev/fd/N it is
 * a duplicate of N, which must be open with an access mode that allows
 * flags.  -1 with errno set otherwise. */
int hv_open(const char *path, int flags, unsigned mode);
/* The whole file from offset 0, NUL-terminated, at most max bytes. */
int hv_read_whole(const char *path, const char *what, char **buf, size_t *len, size_t max, struct verr *err);

#endif
