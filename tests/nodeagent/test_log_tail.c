/*
 * The tail of a failed guest's log, put into the node's log by root
 * (na_log_tail, nodeagent/drivers/support.c).  A kvm guest's console is
 * written by vhpc-hv as the job's user, in a folder that user owns: the
 * attacks, performed: a symbolic link to a root-only file where the
 * console was, a FIFO nobody writes, and terminal escapes in what the
 * guest printed.  And the plain case: the last bytes, not the first.
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

#include "lib/log.h"
#include "nodeagent/drivers/drivers.h"

#define SECRET "root-only-secret-51c9"

static char tmp[PATH_MAX], secret[PATH_MAX + 16], console[PATH_MAX + 16], logged[PATH_MAX + 16];

static int put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int rc = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;

	if (fd >= 0)
		close(fd);
	return rc;
}

static int setup(void **state)
{
	(void)state;
	if (fx_tmpdir(tmp, sizeof(tmp), "logtail") < 0)
		return -1;
	snprintf(secret, sizeof(secret), "%s/secret", tmp);
	snprintf(console, sizeof(console), "%s/serial", tmp);
	snprintf(logged, sizeof(logged), "%s/node.log", tmp);
	return put(secret, SECRET "\n");
}

/* Each test's console, new: one that failed leaves its own behind. */
static int fresh(void **state)
{
	(void)state;
	return unlink(console) < 0 && errno != ENOENT ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(tmp);
}

/* What na_log_tail(console) wrote to the node's log (stderr), in a buffer
 * the caller frees; the seconds it took in *secs. */
static char *tail_logged(double *secs)
{
	int fd = open(logged, O_RDWR | O_CREAT | O_TRUNC, 0600), saved = dup(STDERR_FILENO);
	struct timespec a, b;
	char *buf = calloc(1, 8192);
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0 && buf);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	clock_gettime(CLOCK_MONOTONIC, &a);
	na_log_tail(console, "the guest's console");
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	n = pread(fd, buf, 8191, 0);
	close(fd);
	assert_true(n >= 0);
	if (secs)
		*secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	return buf;
}

static void the_last_bytes(void **state)
{
	static const char last[] = "Kernel panic - not syncing: LAST\n";
	char text[6001], *got;

	(void)state;
	memset(text, 'a', sizeof(text) - 1);
	text[sizeof(text) - 1] = 0;
	memcpy(text, "FIRST", 5);
	memcpy(text + sizeof(text) - sizeof(last), last, sizeof(last) - 1);
	assert_int_equal(put(console, text), 0);
	got = tail_logged(NULL);
	assert_non_null(strstr(got, "last lines of the guest's console"));
	assert_non_null(strstr(got, "not syncing: LAST"));
	assert_null(strstr(got, "FIRST"));
	free(got);
}

static void a_link_is_not_followed(void **state)
{
	char *got;

	(void)state;
	assert_int_equal(symlink(secret, console), 0);
	got = tail_logged(NULL);
	assert_null(strstr(got, SECRET));
	assert_non_null(strstr(got, "symbolic link: not followed"));
	free(got);
}

static void a_fifo_does_not_hold_it(void **state)
{
	double secs;
	char *got;

	(void)state;
	assert_int_equal(mkfifo(console, 0600), 0);
	got = tail_logged(&secs);
	assert_true(secs < 2.0);
	assert_non_null(strstr(got, "not a regular file"));
	free(got);
}

static void escapes_are_not_passed_on(void **state)
{
	char *got;

	(void)state;
	assert_int_equal(put(console, "oops\x1b]0;owned\x07\x1b[2J\rend\x7f\n"), 0);
	got = tail_logged(NULL);
	assert_null(strchr(got, 0x1b));
	assert_null(strchr(got, 0x07));
	assert_null(strchr(got, '\r'));
	assert_null(strchr(got, 0x7f));
	assert_non_null(strstr(got, "oops?]0;owned??[2J?end?\n"));
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(the_last_bytes, fresh),
		cmocka_unit_test_setup(a_link_is_not_followed, fresh),
		cmocka_unit_test_setup(a_fifo_does_not_hold_it, fresh),
		cmocka_unit_test_setup(escapes_are_not_passed_on, fresh),
	};

	vlog_init("vhpcd");
	return cmocka_run_group_tests(tests, setup, teardown);
}
