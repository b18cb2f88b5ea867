/*
 * Exact-length reads and writes on file descriptors.
 */
#ifndef VHPC_LIB_FDIO_H
#define VHPC_LIB_FDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads/writes exactly len bytes, retrying on EINTR and short I/O.
 * read_full returns 0 on success, 1 on EOF before any byte, -1 otherwise. */
int read_full(int fd, void *buf, size_t len);
int write_full(int fd, const void *buf, size_t len);
/* write_full for sockets: a peer that hung up costs EPIPE, not SIGPIPE. */
int send_full(int fd, const void *buf, size_t len);
/* Waits until fd has one of events (POLLIN, POLLOUT) or a CLOCK_MONOTONIC
 * deadline in ns passes (0 = none): 0, or -1 with errno (ETIMEDOUT). */
int fd_wait(int fd, short events, uint64_t deadline);
/* send_full bounded by a CLOCK_MONOTONIC deadline in ns (0 = none):
 * ETIMEDOUT once it passes, however slowly the peer takes the bytes. */
int send_full_deadline(int fd, const void *buf, size_t len, uint64_t deadline);
/* read_full bounded by a CLOCK_MONOTONIC deadline in ns (0 = none);
 * ETIMEDOUT when it passes; *eof_at_start when the peer closed cleanly. */
int read_full_deadline(int fd, void *buf, size_t len, uint64_t deadline, bool *eof_at_start);
/* Waits until fd is readable; 0 ready, 1 timeout, -1 error. */
int wait_readable(int fd, int timeout_ms);

#endif
