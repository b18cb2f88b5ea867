/*
 * Exact-length I/O on file descriptors, with deadlines.
 */
#include "lib/fdio.h"
#include "lib/clock.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

int read_full(int fd, void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t r = read(fd, (char *)buf + off, len - off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			if (off == 0)
				return 1;
			errno = EPIPE;
			return -1;
		}
		off += r;
	}
	return 0;
}

int write_full(int fd, const void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t r = write(fd, (const char *)buf + off, len - off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		off += r;
	}
	return 0;
}

int send_full(int fd, const void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t r = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL);

		if (r < 0 && errno == ENOTSOCK)
			return write_full(fd, (const char *)buf + off, len - off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		off += r;
	}
	return 0;
}

int fd_wait(int fd, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = now_ns();
		int r;

		if (deadline && now >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		r = poll(&p, 1, deadline ? (int)((deadline - now + 999999) / 1000000) : -1);
		if (r > 0)
			return 0;
		if (r == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (errno != EINTR)
			return -1;
	}
}

int send_full_deadline(int fd, const void *buf, size_t len, uint64_t deadline)
{
	size_t off = 0;

	while (off < len) {
		ssize_t r;

		if (fd_wait(fd, POLLOUT, deadline) < 0)
			return -1;
		/* Never blocks past the deadline, even on a blocking socket. */
		r = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0 && errno == ENOTSOCK)
			r = write(fd, (const char *)buf + off, len - off);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -1;
		}
		off += r;
	}
	return 0;
}

int read_full_deadline(int fd, void *buf, size_t len, uint64_t deadline, bool *eof_at_start)
{
	size_t off = 0;

	*eof_at_start = false;
	while (off < len) {
		ssize_t r;

		if (deadline && fd_wait(fd, POLLIN, deadline) < 0)
			return -1;
		r = read(fd, (char *)buf + off, len - off);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -1;
		}
		if (r == 0) {
			*eof_at_start = off == 0;
			errno = EPIPE;
			return -1;
		}
		off += r;
	}
	return 0;
}

int wait_readable(int fd, int timeout_ms)
{
	if (fd_wait(fd, POLLIN, timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0) == 0)
		return 0;
	return errno == ETIMEDOUT ? 1 : -1;
}
