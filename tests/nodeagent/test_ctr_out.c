/*
 * A container guest's output folder (nodeagent/drivers/container/out.c)
 * is the job user's: the guest can plant anything where guestd's output
 * was.  The attacks, performed: a symbolic link to a root-only file, a
 * FIFO nobody writes, a second name (hard link) of a root-only file, a
 * directory; the agent must not follow, hang, or put another file's
 * content into what it reads.  And the plain case: the last bytes of the
 * user's own file.  And its checkpoint: what is saved, and put back.
 */
#include "lib/err.h"
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <dirent.h>

#include "tests/fixture.h"

#include "nodeagent/drivers/container/container.h"

#define SECRET "root-only-secret-7f3a"

static char tmp[PATH_MAX], dir[PATH_MAX + 16], secret[PATH_MAX + 32], logp[PATH_MAX + 32];
/* The job's user: another than root when the test runs as root, so a
 * root-owned file is not the user's. */
static uid_t juid;

static int setup(void **state)
{
	int fd;

	(void)state;
	if (fx_tmpdir(tmp, sizeof(tmp), "ctrout") < 0)
		return -1;
	juid = geteuid() == 0 ? 65534 : geteuid();
	snprintf(dir, sizeof(dir), "%s/out0", tmp);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	snprintf(logp, sizeof(logp), "%s/guestd.log", dir);
	if (mkdir(dir, 0700) < 0)
		return -1;
	/* A file only root may read, on the same file system as the output
	 * (the worst case: the real folder is a tmpfs of its own, where no
	 * such file exists to link to). */
	fd = open(secret, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || write(fd, SECRET "\n", strlen(SECRET) + 1) < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(tmp);
}

static void plant_user_file(const char *text)
{
	int fd;

	unlink(logp);
	fd = open(logp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	if (geteuid() == 0)
		assert_int_equal(fchown(fd, juid, juid), 0);
	close(fd);
}

static void t_own_file(void **state)
{
	char *buf;
	size_t len;
	struct verr e;

	(void)state;
	plant_user_file("line 1\nline 2\nlast line\n");
	assert_int_equal(na_ctr_out_tail(dir, "guestd.log", juid, 1 << 10, &buf, &len, &e), 0);
	assert_string_equal(buf, "line 1\nline 2\nlast line\n");
	free(buf);
	/* Only the last max bytes. */
	assert_int_equal(na_ctr_out_tail(dir, "guestd.log", juid, 10, &buf, &len, &e), 0);
	assert_int_equal(len, 10);
	assert_string_equal(buf, "last line\n");
	free(buf);
}

static void t_symlink(void **state)
{
	char *buf = (char *)1;
	size_t len = 1;
	struct verr e;

	(void)state;
	unlink(logp);
	assert_int_equal(symlink(secret, logp), 0);
	assert_int_equal(na_ctr_out_tail(dir, "guestd.log", juid, 1 << 10, &buf, &len, &e), -1);
	assert_null(buf);
	assert_int_equal(len, 0);
	assert_non_null(strstr(e.msg, "symbolic link"));
	assert_null(strstr(e.msg, SECRET));
	/* Nor a link to the folder itself taken for it. */
	unlink(logp);
	assert_int_equal(symlink(".", logp), 0);
	assert_int_equal(na_ctr_out_open(dir, "guestd.log", juid, &e), -1);
	assert_non_null(strstr(e.msg, "symbolic link"));
	unlink(logp);
}

static void t_fifo(void **state)
{
	struct timespec a, b;
	char *buf = (char *)1;
	size_t len;
	struct verr e;

	(void)state;
	unlink(logp);
	assert_int_equal(mkfifo(logp, 0600), 0);
	/* No writer: a plain open would block for ever. */
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(na_ctr_out_tail(dir, "guestd.log", juid, 1 << 10, &buf, &len, &e), -1);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_true(b.tv_sec - a.tv_sec < 2);
	assert_null(buf);
	assert_non_null(strstr(e.msg, "not a regular file"));
	unlink(logp);
}

static void t_hardlink(void **state)
{
	char *buf = (char *)1;
	size_t len;
	struct verr e;

	(void)state;
	if (geteuid() != 0)
		skip();
	unlink(logp);
	assert_int_equal(link(secret, logp), 0);
	assert_int_equal(na_ctr_out_tail(dir, "guestd.log", juid, 1 << 10, &buf, &len, &e), -1);
	assert_null(buf);
	assert_non_null(strstr(e.msg, "owned by uid 0 with 2 names"));
	assert_null(strstr(e.msg, SECRET));
	unlink(logp);
}

/* A second name of the user's own file is refused too: the rule is one
 * name, whoever owns it. */
static void t_user_hardlink(void **state)
{
	char other[PATH_MAX + 40];
	struct verr e;

	(void)state;
	plant_user_file("mine\n");
	snprintf(other, sizeof(other), "%s/other", dir);
	unlink(other);
	assert_int_equal(link(logp, other), 0);
	assert_int_equal(na_ctr_out_open(dir, "guestd.log", juid, &e), -1);
	assert_non_null(strstr(e.msg, "with 2 names"));
	unlink(other);
	unlink(logp);
}

static void t_dir(void **state)
{
	struct verr e;

	(void)state;
	unlink(logp);
	assert_int_equal(mkdir(logp, 0700), 0);
	assert_int_equal(na_ctr_out_open(dir, "guestd.log", juid, &e), -1);
	assert_non_null(strstr(e.msg, "not a regular file"));
	rmdir(logp);
}

/* The folder itself swapped for a link (not possible for the guest, which
 * sees only its content, but the agent must not care). */
static void t_folder_link(void **state)
{
	char ln[PATH_MAX + 16];
	struct verr e;

	(void)state;
	plant_user_file("x\n");
	snprintf(ln, sizeof(ln), "%s/outlink", tmp);
	unlink(ln);
	assert_int_equal(symlink(dir, ln), 0);
	assert_int_equal(na_ctr_out_open(ln, "guestd.log", juid, &e), -1);
	assert_non_null(strstr(e.msg, "output folder"));
	unlink(ln);
	unlink(logp);
}

/* A checkpoint of the folder (na_ctr_out_save) takes the user's own
 * file only: not a link to the root-only file, not a second name of it,
 * not root's file itself, and a FIFO neither blocks it nor is taken.  Put
 * back (na_ctr_out_restore) into a new folder, the user's file is there
 * with its content and owner; a link planted in the checkpoint under a
 * saved name is not followed. */
static void t_save_restore(void **state)
{
	char save[PATH_MAX + 16], back[PATH_MAX + 16], p[PATH_MAX + 64], buf[64] = "";
	int sfd, bfd, fd, n = 0;
	struct verr e;
	struct stat st;
	DIR *d;
	time_t t0 = time(NULL);

	(void)state;
	plant_user_file("hello\n");
	snprintf(p, sizeof(p), "%s/ln", dir);
	assert_int_equal(symlink(secret, p), 0);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	if (geteuid() == 0) {
		snprintf(p, sizeof(p), "%s/hl", dir);
		assert_int_equal(link(secret, p), 0);
	}
	snprintf(save, sizeof(save), "%s/save", tmp);
	snprintf(back, sizeof(back), "%s/back", tmp);
	assert_int_equal(mkdir(save, 0700), 0);
	assert_int_equal(mkdir(back, 0700), 0);
	sfd = open(save, O_RDONLY | O_DIRECTORY);
	assert_true(sfd >= 0);
	assert_int_equal(na_ctr_out_save(dir, juid, sfd, &e), 0);
	assert_true(time(NULL) - t0 < 5);
	d = opendir(save);
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));)
		if (de->d_name[0] != '.') {
			n++;
			assert_string_equal(de->d_name, "vhpc-out.guestd.log");
		}
	closedir(d);
	assert_int_equal(n, 1);
	fd = openat(sfd, "vhpc-out.guestd.log", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf) - 1), 6);
	close(fd);
	assert_string_equal(buf, "hello\n");

	assert_int_equal(na_ctr_out_restore(sfd, back, juid, juid, &e), 0);
	bfd = open(back, O_RDONLY | O_DIRECTORY);
	assert_true(bfd >= 0);
	assert_int_equal(fstatat(bfd, "guestd.log", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode) && st.st_size == 6);
	if (geteuid() == 0)
		assert_int_equal(st.st_uid, juid);
	/* A link in the checkpoint, named as a saved file: not followed. */
	assert_int_equal(unlinkat(bfd, "guestd.log", 0), 0);
	assert_int_equal(symlinkat(secret, sfd, "vhpc-out.evil"), 0);
	assert_int_equal(na_ctr_out_restore(sfd, back, juid, juid, &e), -1);
	assert_non_null(strstr(e.msg, "vhpc-out.evil"));
	assert_int_equal(faccessat(bfd, "evil", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	close(bfd);
	close(sfd);
	snprintf(p, sizeof(p), "%s/ln", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/hl", dir);
	unlink(p);
	unlink(logp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_own_file),
		cmocka_unit_test(t_symlink),
		cmocka_unit_test(t_fifo),
		cmocka_unit_test(t_hardlink),
		cmocka_unit_test(t_user_hardlink),
		cmocka_unit_test(t_dir),
		cmocka_unit_test(t_folder_link),
		cmocka_unit_test(t_save_restore),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
