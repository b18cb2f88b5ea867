/*
 * bind-symlink-swap.t's attack on the kvm driver's side, which needs no
 * KVM: the job's folder is checked and opened as the user, then the user
 * swaps a folder on its path for a symlink to a folder only root can
 * reach, then the guest's virtiofsd starts (kvm_fs_start).  The daemon
 * must serve the folder that was checked: its root (it chroots into what
 * it serves) holds the user's file, not root's.  Before the driver served
 * the descriptor, it handed virtiofsd the path, which it looked up again.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "lib/fsutil.h"
#include "nodeagent/drivers/kvm/kvm_int.h"

#define NOBODY 65534

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void virtiofsd_serves_the_checked_folder(void **state)
{
	char top[64], p[5][256], served[300], got[64] = "";
	struct bind_list l = { .n = 1 };
	struct na_hbind hb[1];
	struct verr e;
	int conn = -1;
	pid_t pid = 0;

	(void)state;
	assert_int_equal(fx_tmpdir(top, sizeof(top), "kvmfs"), 0);
	assert_int_equal(chmod(top, 0755), 0);
	/* root's: locked (0700) / inner / data / f */
	snprintf(p[0], sizeof(p[0]), "%s/locked/inner/data", top);
	assert_int_equal(mkdir_p(p[0], 0755, &e), 0);
	snprintf(p[1], sizeof(p[1]), "%s/locked/inner/data/f", top);
	put(p[1], "ROOTONLY\n");
	snprintf(p[1], sizeof(p[1]), "%s/locked", top);
	assert_int_equal(chmod(p[1], 0700), 0);
	/* the user's: u/sw/data/f, and u/alt -> root's inner */
	snprintf(p[2], sizeof(p[2]), "%s/u/sw/data", top);
	assert_int_equal(mkdir_p(p[2], 0755, &e), 0);
	snprintf(p[3], sizeof(p[3]), "%s/u/sw/data/f", top);
	put(p[3], "PUBLIC\n");
	snprintf(p[3], sizeof(p[3]), "%s/u/alt", top);
	snprintf(p[4], sizeof(p[4]), "%s/locked/inner", top);
	assert_int_equal(symlink(p[4], p[3]), 0);
	snprintf(p[4], sizeof(p[4]), "%s/u/sw", top);

	snprintf(l.v[0].src, sizeof(l.v[0].src), "%s", p[2]);
	snprintf(l.v[0].dst, sizeof(l.v[0].dst), "/data");
	assert_int_equal(na_binds_check(&l, NOBODY, NOBODY, hb, &e), 0);
	/* The swap, after the check: the path now leads to root's folder. */
	assert_int_equal(renameat2(AT_FDCWD, p[4], AT_FDCWD, p[3], RENAME_EXCHANGE), 0);
	snprintf(served, sizeof(served), "%s/u/kvm", top);
	assert_int_equal(mkdir(served, 0700), 0);
	assert_int_equal(kvm_fs_start(served, 0, &hb[0], NOBODY, NOBODY, NULL, 0, &conn, &pid, &e), 0);
	/* Its root is what it serves once it has chrooted. */
	snprintf(served, sizeof(served), "/proc/%d/root/f", (int)pid);
	for (int i = 0; i < 100; i++) {
		int fd = open(served, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			ssize_t n = read(fd, got, sizeof(got) - 1);

			got[n > 0 ? n : 0] = 0;
			close(fd);
			if (!strcmp(got, "PUBLIC\n") || !strcmp(got, "ROOTONLY\n"))
				break;
		}
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(conn);
	na_binds_close(hb, 1);
	if (strcmp(got, "PUBLIC\n")) {
		char log[320], *t = NULL;
		size_t n;

		snprintf(log, sizeof(log), "%s/u/kvm/fs0.log", top);
		read_file(log, &t, &n, 4096, &e);
		fail_msg("virtiofsd served '%s' (its log: %s)", got, t ? t : "none");
	}
	assert_int_equal(fx_rmdir(top), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(virtiofsd_serves_the_checked_folder),
	};

	if (geteuid() != 0 || access(kvm_virtiofsd_path(), X_OK) < 0) {
		printf("1..0 # SKIP needs root and %s (qemu-system-common)\n", kvm_virtiofsd_path());
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
