/*
 * Listening unix sockets that appear at their path only once they accept.
 *
 * bind() makes the file before listen() makes it connectable, so a node
 * agent that waits for the file can connect in between and be refused
 * (seen in the virtualization lab, where vhpc-hv runs slowly enough for
 * the window to matter).  Binding a temporary name and renaming it into
 * place after listen() closes that window: rename is atomic, and a bound
 * socket keeps working under its new name.
 */
#include "lib/err.h"
#include "vm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int uds_listen(const char *path, int type, int backlog, struct verr *err)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd;

	if (snprintf(a.sun_path, sizeof(a.sun_path), "%s.new", path) >= (int)sizeof(a.sun_path))
		return verr_set(err, "socket path %s is too long", path);
	/* A socket left by a dead vhpc-hv may be replaced; anything else not. */
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
		return verr_set(err, "%s exists and is not a socket", path);
	if (lstat(a.sun_path, &st) == 0 && !S_ISSOCK(st.st_mode))
		return verr_set(err, "%s exists and is not a socket", a.sun_path);
	unlink(a.sun_path);
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verr_errno(err, "socket for %s", path);
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		umask(old);
		verr_errno(err, "binding %s", a.sun_path);
		close(fd);
		return -1;
	}
	umask(old);
	if (listen(fd, backlog) < 0 || rename(a.sun_path, path) < 0) {
		verr_errno(err, "listening on %s", path);
		unlink(a.sun_path);
		close(fd);
		return -1;
	}
	return fd;
}
