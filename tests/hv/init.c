/* /init of the userspace test's initramfs: print a marker on the console
 * and power the guest off (which must end vhpc-hv with status 0). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/reboot.h>
#include <unistd.h>

int main(void)
{
	int fd = open("/dev/console", O_WRONLY);

	if (fd >= 0) {
		dprintf(fd, "VHPC-USERSPACE-MARKER pid=%d\n", (int)getpid());
		close(fd);
	}
	sync();
	reboot(RB_POWER_OFF);
	return 1;
}
