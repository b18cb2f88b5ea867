/* /init of the virtio-fs test's initramfs (tests/hv/virtio-fs.t): loads
 * the modules the test packed in /modules (virtio-pci, fuse and virtiofs
 * are modules in Debian's cloud kernel, in the order their names sort),
 * mounts the vhost-user-fs device by its tag, reads the file the test put
 * in the shared folder, checks a 1 MiB file of the test pattern, writes a
 * small file of known bytes and a 1 MiB pattern file, unmounts (so every
 * write has reached the host) and powers off.  Lines starting "VFS-" on
 * the console are what the test looks at.
 * Kernel command line: vfs.tag=TAG */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BIG (1u << 20)

static FILE *con;

/* The same formula as tests/hv/tools/hvt.c. */
static uint8_t pattern_byte(uint64_t o, unsigned seed)
{
	uint32_t x = (uint32_t)o * 2654435761u + seed * 40503u + (uint32_t)(o >> 32);

	return (uint8_t)(x >> 24 ^ x >> 11);
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void off(void)
{
	fflush(con);
	sync();
	reboot(RB_POWER_OFF);
	_exit(1);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static void load_modules(void)
{
	struct dirent **e;
	int n = scandir("/modules", &e, NULL, by_name);

	for (int i = 0; i < n; i++) {
		char p[300];
		int fd;

		if (e[i]->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/modules/%s", e[i]->d_name);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST))
			fprintf(con, "VFS-MODULE-FAILED %s: %s\n", e[i]->d_name, strerror(errno));
		else
			fprintf(con, "VFS-MODULE %s\n", e[i]->d_name);
		if (fd >= 0)
			close(fd);
	}
}

static const char *tag_arg(char *buf, size_t n)
{
	int fd = open("/proc/cmdline", O_RDONLY);
	ssize_t l = fd >= 0 ? read(fd, buf, n - 1) : -1;
	char *t;

	if (fd >= 0)
		close(fd);
	buf[l > 0 ? l : 0] = 0;
	if (!(t = strstr(buf, "vfs.tag=")))
		return NULL;
	t += 8;
	t[strcspn(t, " \n")] = 0;
	return t;
}

int main(void)
{
	char cmdline[1024], buf[256];
	const char *tag;
	uint8_t *big = malloc(BIG);
	int fd, r = -1;
	ssize_t got;
	double t0;

	mkdir("/dev", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	con = fopen("/dev/console", "w");
	if (!con)
		con = stderr;
	setvbuf(con, NULL, _IONBF, 0);
	mkdir("/proc", 0555);
	mount("proc", "/proc", "proc", 0, NULL);
	tag = tag_arg(cmdline, sizeof(cmdline));
	load_modules();
	mkdir("/mnt", 0755);
	/* The device shows up as the modules probe; give it a moment. */
	for (int i = 0; i < 100 && tag && (r = mount(tag, "/mnt", "virtiofs", 0, NULL)) < 0; i++)
		usleep(100000);
	if (r < 0) {
		fprintf(con, "VFS-MOUNT-FAILED %s: %s\n", tag ? tag : "(no vfs.tag=)", strerror(errno));
		off();
	}
	fprintf(con, "VFS-MOUNTED %s\n", tag);

	fd = open("/mnt/hello.txt", O_RDONLY);
	got = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	buf[got > 0 ? got : 0] = 0;
	buf[strcspn(buf, "\n")] = 0;
	fprintf(con, "VFS-READ %s\n", got > 0 ? buf : strerror(errno));
	if (fd >= 0)
		close(fd);

	t0 = now_ms();
	fd = open("/mnt/big.bin", O_RDONLY);
	got = 0;
	while (fd >= 0 && got < (ssize_t)BIG) {
		ssize_t k = read(fd, big + got, BIG - (size_t)got);

		if (k <= 0)
			break;
		got += k;
	}
	if (fd >= 0)
		close(fd);
	{
		uint32_t bad = got == BIG ? 0 : 1;

		for (uint32_t i = 0; !bad && i < BIG; i++)
			bad = big[i] != pattern_byte(i, 11);
		fprintf(con, "VFS-BIG-READ %s (%zd bytes, %.0f ms)\n", bad ? "wrong" : "ok", got, now_ms() - t0);
	}

	fd = open("/mnt/fromguest.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || dprintf(fd, "guest saw [%s]\n", buf) < 0 || fsync(fd) < 0)
		fprintf(con, "VFS-WRITE-FAILED: %s\n", strerror(errno));
	else
		fprintf(con, "VFS-WROTE fromguest.txt\n");
	if (fd >= 0)
		close(fd);

	for (uint32_t i = 0; i < BIG; i++)
		big[i] = pattern_byte(i, 12);
	t0 = now_ms();
	fd = open("/mnt/big-out.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	got = 0;
	while (fd >= 0 && got < (ssize_t)BIG) {
		ssize_t k = write(fd, big + got, BIG - (size_t)got);

		if (k <= 0)
			break;
		got += k;
	}
	if (fd < 0 || got != BIG || fsync(fd) < 0 || close(fd) < 0)
		fprintf(con, "VFS-BIG-WRITE-FAILED: %s\n", strerror(errno));
	else
		fprintf(con, "VFS-BIG-WROTE (%zd bytes, %.0f ms)\n", got, now_ms() - t0);

	if (umount("/mnt") < 0)
		fprintf(con, "VFS-UMOUNT-FAILED: %s\n", strerror(errno));
	fprintf(con, "VFS-DONE\n");
	off();
	return 1;
}
