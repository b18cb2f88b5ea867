/* /init of the userspace test's initramfs: print a marker on the console
 * and power the guest off (which must end vhpc-hv with status 0). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/reboot.h>
#include <termios.h>
#include <unistd.h>

int main(void)
{
	int fd = open("/dev/console", O_WRONLY);

	if (fd >= 0) {
		dprintf(fd, "VHPC-USERSPACE-MARKER pid=%d\n", (int)getpid());
		/* The write only queues the line for the serial port; powering
		 * off before the UART has sent it loses it (seen once in the lab:
		 * exit 0, no marker).  Wait until it has gone out. */
		tcdrain(fd);
		close(fd);
	}
	sync();
	reboot(RB_POWER_OFF);
	return 1;
}
