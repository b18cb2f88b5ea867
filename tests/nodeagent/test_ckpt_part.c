/*
 * A node's part of a checkpoint (nodeagent/job_ckpt_save.c, ckpt_dir.c)
 * on the host: the job level's layout, part file and clean-up, with a
 * driver of this test in place of kvm's (whose save needs vhpc-hv in the
 * lab: tests/kvm/test_kvm_ckpt.c, tests/cluster/kvm-pause.t).  The
 * driver writes what a real one would (a few files in its guest's dir)
 * and can be told to fail half-way.  Also the attacks: a checkpoint
 * folder swapped for a link, a guest's folder swapped for one, a part
 * file that names a path outside, a folder others may write.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "nodeagent/drivers/drivers.h"
#include "nodeagent/job.h"
#include "nodeagent/nodeagent.h"

static char tmp[PATH_MAX], dir[PATH_MAX + 16], region[PATH_MAX + 16];
static bool fail_save, paused = true;
static int saved;

static int t_ok(const struct na_job *j, struct verr *err)
{
	(void)j;
	(void)err;
	return 0;
}

static int t_op(struct na_job *j, int k, struct verr *err)
{
	(void)j;
	(void)k;
	(void)err;
	return 0;
}

static bool t_paused(struct na_job *j, int k)
{
	(void)j;
	(void)k;
	return paused;
}

/* What kvm's save writes, in small: a snapshot and a sparse disk. */
static int t_save(struct na_job *j, int k, int dirfd, struct verr *err)
{
	char text[64];
	int fd = openat(dirfd, "snapshot", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);

	if (fd < 0)
		return verr_errno(err, "snapshot");
	snprintf(text, sizeof(text), "guest %d's state\n", j->g[k].index);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	saved++;
	if (fail_save && k == 1) {
		errno = ENOSPC;
		return verr_errno(err, "scratch.img: writing at 0");
	}
	fd = openat(dirfd, "scratch.img", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	if (fd < 0)
		return verr_errno(err, "scratch.img");
	assert_int_equal(pwrite(fd, "data", 4, 1 << 20), 4);
	close(fd);
	return 0;
}

static const struct na_driver tdrv = {
	.name = "test", .ckpt_check = t_ok, .pause = t_op, .resume = t_op, .paused = t_paused,
	.save = t_save, .restore = t_save,
};

static struct na_job job;
static struct na_guest guests[2];
static int idx[2] = { 0, 1 };

static int setup(void **state)
{
	(void)state;
	if (fx_tmpdir(tmp, sizeof(tmp), "ckpt") < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s/ck", tmp);
	snprintf(region, sizeof(region), "%s/region", tmp);
	int fd = open(region, O_RDWR | O_CREAT, 0600);

	if (fd < 0 || pwrite(fd, "ring", 4, 2 << 20) != 4 || ftruncate(fd, 4 << 20) < 0)
		return -1;
	close(fd);
	memset(&job, 0, sizeof(job));
	job.drv = &tdrv;
	job.s.nguests = 2;
	job.s.ntotal = 2;
	job.s.index = idx;
	job.g = guests;
	for (int k = 0; k < 2; k++) {
		guests[k].index = k;
		guests[k].priv = &guests[k];
		guests[k].drv = &tdrv;
	}
	snprintf(job.vmshm, sizeof(job.vmshm), "%s", region);
	fail_save = false;
	paused = true;
	saved = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(tmp);
}

static bool exists(const char *rel)
{
	char p[PATH_MAX * 2];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0;
}

static int open_ck(const char *name)
{
	struct verr e;
	int root = na_ckpt_root_open(dir, false, &e), c;

	assert_true(root >= 0);
	c = na_ckpt_open(root, name, false, &e);
	close(root);
	return c;
}

static void save_ok(struct na_ckpt_saved *s)
{
	struct verr e;

	if (na_job_ckpt_save(&job, dir, "7.1", s, &e) < 0)
		fail_msg("save: %s", e.msg);
}

static void test_save_layout(void **state)
{
	struct na_ckpt_saved s;
	struct verr e;
	struct stat st;
	int c;

	(void)state;
	save_ok(&s);
	assert_int_equal(s.nguests, 2);
	assert_int_equal(s.g[1].index, 1);
	assert_true(s.g[0].bytes > 0 && s.bytes >= s.g[0].bytes + s.g[1].bytes);
	assert_true(exists("7.1/g0/snapshot") && exists("7.1/g1/scratch.img") && exists("7.1/vmshm.g0") &&
		    exists("7.1/part.g0.sha256"));
	/* root's, closed to others; the region's holes stay holes */
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	snprintf(region, sizeof(region), "%s/7.1/vmshm.g0", dir);
	assert_int_equal(stat(region, &st), 0);
	assert_int_equal(st.st_size, 4 << 20);
	assert_true(st.st_blocks * 512 < (1 << 20));
	c = open_ck("7.1");
	assert_true(c >= 0);
	if (na_ckpt_part_verify(c, 0, &e) < 0)
		fail_msg("verify: %s", e.msg);
	close(c);
	/* Again (a repeated job_checkpoint): the same part, not an error. */
	save_ok(&s);
	assert_int_equal(saved, 4);
}

/* One byte of a saved file changed, one truncated, one gone: each
 * refused naming it. */
static void test_verify_refuses(void **state)
{
	struct na_ckpt_saved s;
	struct verr e;
	char p[PATH_MAX * 2];
	int c, fd;

	(void)state;
	save_ok(&s);
	c = open_ck("7.1");
	snprintf(p, sizeof(p), "%s/7.1/g1/snapshot", dir);
	fd = open(p, O_WRONLY);
	assert_int_equal(pwrite(fd, "G", 1, 0), 1);
	close(fd);
	assert_int_equal(na_ckpt_part_verify(c, 0, &e), -1);
	assert_non_null(strstr(e.msg, "g1/snapshot"));
	assert_non_null(strstr(e.msg, "sha256"));
	assert_int_equal(truncate(p, 3), 0);
	assert_int_equal(na_ckpt_part_verify(c, 0, &e), -1);
	assert_non_null(strstr(e.msg, "g1/snapshot"));
	assert_non_null(strstr(e.msg, "truncated"));
	assert_int_equal(unlink(p), 0);
	assert_int_equal(na_ckpt_part_verify(c, 0, &e), -1);
	assert_non_null(strstr(e.msg, "g1/snapshot"));
	/* Another node's part (first guest 1) was never written. */
	assert_int_equal(na_ckpt_part_verify(c, 1, &e), -1);
	assert_non_null(strstr(e.msg, "part.g1.sha256"));
	close(c);
}

/* A verify that runs out of descriptors says it could not check (-2),
 * not that the part is damaged (-1): the controller tries such a restart
 * again, and fails a damaged one at once.  The part then verifies. */
static void test_verify_short(void **state)
{
	struct na_ckpt_saved s;
	struct rlimit was, now;
	struct verr e;
	int c, rc, top;

	(void)state;
	save_ok(&s);
	c = open_ck("7.1");
	assert_true(c >= 0);
	/* no descriptor above the highest one open now */
	top = dup(0);
	assert_true(top >= 0);
	close(top);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
	now = was;
	now.rlim_cur = (rlim_t)top;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &now), 0);
	rc = na_ckpt_part_verify(c, 0, &e);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_int_equal(rc, -2);
	assert_non_null(strstr(e.msg, "Too many open files"));
	if (na_ckpt_part_verify(c, 0, &e) < 0)
		fail_msg("verify: %s", e.msg);
	assert_true(na_ckpt_short_errno(EMFILE) && na_ckpt_short_errno(ENOMEM) && !na_ckpt_short_errno(ENOENT) &&
		    !na_ckpt_short_errno(ELOOP));
	close(c);
}

/* A part file that names a path outside its folder, or through a link,
 * is refused, and nothing outside is read. */
static void test_verify_paths(void **state)
{
	struct na_ckpt_saved s;
	struct verr e;
	char p[PATH_MAX * 2];
	int c;

	(void)state;
	save_ok(&s);
	c = open_ck("7.1");
	snprintf(p, sizeof(p), "%s/7.1/part.g0.sha256", dir);
	assert_int_equal(write_file(p, "0000000000000000000000000000000000000000000000000000000000000000  ../../x\n",
				    75, 0600, &e), 0);
	assert_int_equal(na_ckpt_part_verify(c, 0, &e), -1);
	assert_non_null(strstr(e.msg, "not a sha256 and a name"));
	close(c);
	/* g0 swapped for a link to a folder elsewhere: not followed */
	save_ok(&s);
	c = open_ck("7.1");
	snprintf(p, sizeof(p), "%s/elsewhere", tmp);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(rm_rf_at_fd(c, "g0", &e), 0);
	assert_int_equal(symlinkat(p, c, "g0"), 0);
	assert_int_equal(na_ckpt_part_verify(c, 0, &e), -1);
	assert_non_null(strstr(e.msg, "g0"));
	close(c);
}

/* The checkpoint's folder, or a guest's in it, made a link to a folder
 * the attacker chose: a save neither follows nor writes through it. */
static void test_save_links(void **state)
{
	struct na_ckpt_saved s;
	struct verr e;
	char target[PATH_MAX * 2], p[PATH_MAX * 2];

	(void)state;
	snprintf(target, sizeof(target), "%s/target", tmp);
	assert_int_equal(mkdir(target, 0700), 0);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(p, sizeof(p), "%s/7.1", dir);
	assert_int_equal(symlink(target, p), 0);
	assert_int_equal(na_job_ckpt_save(&job, dir, "7.1", &s, &e), -1);
	assert_non_null(strstr(e.msg, "7.1"));
	assert_non_null(strstr(e.msg, "link is never followed"));
	assert_false(fs_entry_exists(target, "g0"));
	assert_int_equal(unlink(p), 0);
	/* A guest's folder a link planted before the save: removed, not
	 * entered. */
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/7.1/g1", dir);
	assert_int_equal(symlink(target, p), 0);
	save_ok(&s);
	assert_false(fs_entry_exists(target, "snapshot"));
	assert_true(exists("7.1/g1/snapshot"));
	/* A name is never a path. */
	assert_int_equal(na_job_ckpt_save(&job, dir, "../x", &s, &e), -1);
	assert_non_null(strstr(e.msg, "not a checkpoint name"));
}

/* The job's user owns its vmshm region: a link or a FIFO put in its
 * place is neither followed nor waited on, and the save fails clean. */
static void test_region_swapped(void **state)
{
	struct na_ckpt_saved s;
	struct verr e;
	char secret[PATH_MAX + 16];

	(void)state;
	snprintf(secret, sizeof(secret), "%s/secret", tmp);
	assert_int_equal(write_file(secret, "root's\n", 7, 0600, &e), 0);
	assert_int_equal(unlink(region), 0);
	assert_int_equal(symlink(secret, region), 0);
	assert_int_equal(na_job_ckpt_save(&job, dir, "7.1", &s, &e), -1);
	assert_non_null(strstr(e.msg, "vmshm region"));
	assert_false(exists("7.1"));
	assert_int_equal(unlink(region), 0);
	assert_int_equal(mkfifo(region, 0600), 0);
	assert_int_equal(na_job_ckpt_save(&job, dir, "7.1", &s, &e), -1);
	assert_non_null(strstr(e.msg, "not a regular file"));
	assert_false(exists("7.1"));
}

/* A folder others could write (and so swap things in) is refused. */
static void test_root_mode(void **state)
{
	struct na_ckpt_saved s;
	struct verr e;

	(void)state;
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(na_job_ckpt_save(&job, dir, "7.1", &s, &e), -1);
	assert_non_null(strstr(e.msg, "0700"));
	assert_int_equal(saved, 0);
}

/* A save that fails half-way (a full disk at guest 1) leaves none of the
 * node's files, names the path and the reason. */
static void test_save_fails_clean(void **state)
{
	struct na_ckpt_saved s;
	struct verr e;

	(void)state;
	fail_save = true;
	assert_int_equal(na_job_ckpt_save(&job, dir, "7.1", &s, &e), -1);
	assert_non_null(strstr(e.msg, "7.1/g1"));
	assert_non_null(strstr(e.msg, "No space left on device"));
	assert_non_null(strstr(e.msg, dir));
	assert_false(exists("7.1"));
	/* Not paused: refused before anything is written. */
	fail_save = false;
	paused = false;
	saved = 0;
	assert_int_equal(na_job_ckpt_save(&job, dir, "7.1", &s, &e), -1);
	assert_non_null(strstr(e.msg, "not paused"));
	assert_int_equal(saved, 0);
}

int main(void)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test_setup_teardown(test_save_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify_short, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_root_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_region_swapped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_fails_clean, setup, teardown),
	};

	return cmocka_run_group_tests(t, NULL, NULL);
}
