/* A site secret file (secret.h). */
#include "lib/err.h"
#include "lib/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

int secret_load(const char *path, uint8_t *buf, size_t max, size_t *len, struct verr *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	ssize_t r;

	if (fd < 0)
		return verr_errno(err, "the site secret %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077)) {
		close(fd);
		return verr_set(err, "the site secret %s must be a file of root's that only root reads (mode 0600)", path);
	}
	r = read(fd, buf, max);
	close(fd);
	if (r < 16)
		return verr_set(err, "the site secret %s holds %zd bytes: at least 16 expected (e.g. head -c 64 /dev/urandom)",
				path, r < 0 ? (ssize_t)0 : r);
	*len = (size_t)r;
	return 0;
}
