/*
 * A site secret: a file of root's that only root reads, the same on every
 * node (as munge's key), from which nodes derive what they must agree on
 * without talking (Slurm jobs' VNIs and keys, WireGuard keys).
 */
#ifndef VHPC_LIB_SECRET_H
#define VHPC_LIB_SECRET_H

#include <stddef.h>
#include <stdint.h>
#include "lib/err.h"

/* Reads at most max bytes of path into buf (at least 16 are needed); the
 * file must be a regular file owned by root with no group or other
 * rights, and is opened without following a symlink. */
int secret_load(const char *path, uint8_t *buf, size_t max, size_t *len, struct verr *err);

#endif
