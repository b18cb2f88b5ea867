/*
 * A container guest's output folder (nodeagent/drivers/container/out.c)
 * is the job user's: the guest can plant anything where guestd's output
 * was.  The attacks, performed: a symbolic link to a root-only file, a
 * FIFO nobody writes, a second name (hard link) of a root-only file, a
 * directory; the agent must not follow, hang, or put another file's
 * content into what it reads.  And the plain case: the last bytes of the
 * user's own file.
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
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
