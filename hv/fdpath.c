/* /dev/fd/N is taken as descriptor N itself, not reopened through
 * /proc/self/fd: a reopen checks the file's permissions against the
 * (unprivileged) caller, which is exactly what passing the fd avoids. */
#include "fdpath.h"
#include "lib/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FD_PREFIX "/dev/fd/"

int hv_open(const char *path, int flags, unsigned mode)
{
	long long n;
	int fl, want = flags & O_ACCMODE;

	if (strncmp(path, FD_PREFIX, strlen(FD_PREFIX)) != 0)
		return open(path, flags | O_CLOEXEC, mode);
	if (parse_ll(path + strlen(FD_PREFIX), 0, 1 << 20, &n) < 0) {
		errno = EINVAL;
		return -1;
	}
	fl = fcntl((int)n, F_GETFL);
	if (fl < 0)
		return -1;   /* EBADF: not open */
	if ((fl & O_ACCMODE) != O_RDWR && (fl & O_ACCMODE) != want) {
		errno = EACCES;
		return -1;
	}
	return fcntl((int)n, F_DUPFD_CLOEXEC, 3);
}

int hv_read_whole(const char *path, const char *what, char **buf, size_t *len, size_t max, struct verr *err)
{
	struct stat st;
	char *b;
	size_t got = 0;
	int fd = hv_open(path, O_RDONLY, 0);

	if (fd < 0)
		return verr_errno(err, "%s %s", what, path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return verr_set(err, "%s %s: not a regular file", what, path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return verr_set(err, "%s %s: %lld bytes, more than the %zu allowed", what, path,
				(long long)st.st_size, max);
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		close(fd);
		return verr_set(err, "%s %s: out of memory", what, path);
	}
	/* pread from 0: a passed descriptor shares its offset with the starter. */
	while (got < (size_t)st.st_size) {
		ssize_t r = pread(fd, b + got, (size_t)st.st_size - got, (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;

			free(b);
			close(fd);
			errno = e;
			return verr_errno(err, "%s %s: reading", what, path);
		}
		got += (size_t)r;
	}
	close(fd);
	b[got] = 0;
	*buf = b;
	*len = got;
	return 0;
}
