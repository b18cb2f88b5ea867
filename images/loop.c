/*
 * A loop device over a file the caller opened (and checked), for mounting
 * a compact image.  mount(8) would do it from a path, and it reopens the
 * backing file by that path once it has resolved it (traced on util-linux
 * 2.38: openat(AT_FDCWD, "<the real path>")), so what it mounts need not
 * be the file that was checked; LOOP_CONFIGURE takes the descriptor itself.
 */
#include "lib/err.h"
#include "image_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int image_loop_attach(int fd, const char *name, char *dev, size_t len, struct verr *err)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

	if (ctl < 0)
		return verr_errno(err, "cannot open /dev/loop-control");
	/* Another process may take the free device first: ask again. */
	for (int tries = 0; tries < 16; tries++) {
		struct loop_config cfg = { .fd = (unsigned)fd };
		int n = ioctl(ctl, LOOP_CTL_GET_FREE), lfd;

		if (n < 0) {
			verr_errno(err, "no free loop device");
			break;
		}
		snprintf(dev, len, "/dev/loop%d", n);
		if ((lfd = open(dev, O_RDONLY | O_CLOEXEC)) < 0) {
			verr_errno(err, "cannot open %s", dev);
			break;
		}
		/* Read-only; detached by the kernel once unmounted and closed. */
		cfg.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
		snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", name);
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) {
			close(ctl);
			return lfd;
		}
		if (errno != EBUSY) {
			verr_errno(err, "cannot set up %s over %s", dev, name);
			close(lfd);
			break;
		}
		close(lfd);
		if (tries == 15)
			verr_set(err, "no loop device stayed free for %s", name);
	}
	close(ctl);
	return -1;
}
