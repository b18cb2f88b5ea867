/* write_file_atomic (lib/fsutil.c): the data is synced before the rename
 * and the folder after it, so that a power loss leaves the old file or
 * the new one, whole, never an empty or half-written one under the name.
 * Linked with --wrap=fsync and --wrap=rename: the calls are recorded in
 * order, with what each fsync was of. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

enum ev { EV_SYNC_FILE = 1, EV_SYNC_DIR, EV_RENAME };

static enum ev evs[16];
static ino_t ev_ino[16];
static int nev;
static int fail_sync;                     /* errno the next fsync fails with */

int __real_fsync(int fd);
int __real_rename(const char *from, const char *to);
int __wrap_fsync(int fd);
int __wrap_rename(const char *from, const char *to);

int __wrap_fsync(int fd)
{
	struct stat st;

	if (nev < 16 && fstat(fd, &st) == 0) {
		ev_ino[nev] = st.st_ino;
		evs[nev++] = S_ISDIR(st.st_mode) ? EV_SYNC_DIR : EV_SYNC_FILE;
	}
	if (fail_sync) {
		errno = fail_sync;
		fail_sync = 0;
		return -1;
	}
	return __real_fsync(fd);
}

int __wrap_rename(const char *from, const char *to)
{
	if (nev < 16)
		evs[nev++] = EV_RENAME;
	return __real_rename(from, to);
}

static char dir[64];
static char path[300];

static int setup(void **state)
{
	(void)state;
	if (fx_tmpdir(dir, sizeof(dir), "atomic") < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/state.json", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(dir);
}

static char *slurp(const char *p)
{
	char *buf = NULL;
	struct verr err;

	return read_file(p, &buf, NULL, 4096, &err) == 0 ? buf : NULL;
}

static void data_synced_before_rename_and_folder_after(void **state)
{
	struct stat d;
	struct verr err;
	char *got;

	(void)state;
	nev = 0;
	assert_int_equal(write_file_atomic(path, "one", 3, 0600, &err), 0);
	assert_int_equal(stat(dir, &d), 0);
	assert_int_equal(nev, 3);
	assert_int_equal(evs[0], EV_SYNC_FILE);
	assert_int_equal(evs[1], EV_RENAME);
	assert_int_equal(evs[2], EV_SYNC_DIR);
	assert_int_equal(ev_ino[2], d.st_ino);
	assert_non_null(got = slurp(path));
	assert_string_equal(got, "one");
	free(got);
}

/* A failed sync: an error, the old content under the name, no tmp left. */
static void failed_sync_keeps_the_old_file(void **state)
{
	struct verr err;
	char *got, tmp[400];

	(void)state;
	assert_int_equal(write_file_atomic(path, "old", 3, 0600, &err), 0);
	fail_sync = EIO;
	assert_int_equal(write_file_atomic(path, "new", 3, 0600, &err), -1);
	assert_non_null(strstr(err.msg, "Input/output error"));
	assert_non_null(got = slurp(path));
	assert_string_equal(got, "old");
	free(got);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	assert_int_equal(access(tmp, F_OK), -1);
}

/* A link planted at the temporary name is replaced, not followed. */
static void planted_link_is_not_followed(void **state)
{
	struct verr err;
	char tmp[400], target[400], *got;

	(void)state;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	snprintf(target, sizeof(target), "%s/target", dir);
	assert_int_equal(symlink(target, tmp), 0);
	assert_int_equal(write_file_atomic(path, "mine", 4, 0600, &err), 0);
	assert_int_equal(access(target, F_OK), -1);
	assert_non_null(got = slurp(path));
	assert_string_equal(got, "mine");
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(data_synced_before_rename_and_folder_after),
		cmocka_unit_test(failed_sync_keeps_the_old_file),
		cmocka_unit_test(planted_link_is_not_followed),
	};
	return cmocka_run_group_tests_name("atomic_write", tests, setup, teardown);
}
