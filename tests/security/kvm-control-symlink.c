/*
 * The attack on the kvm driver's control connection: vhpc-hv's control
 * socket sits in hv/, a folder the job's user owns, and the agent (root)
 * connects to <hv>/ctl.  The user replaces ctl with a symlink to a socket
 * only root may reach (here: one this test, as root, listens on in a
 * folder of mode 0700).  kvm_control must refuse, and that socket must see
 * no connection; vhpc-hv's own socket at ctl still answers.
 *
 * The real path (the driver starting vhpc-hv and asking it for "status")
 * runs in the lab: tests/kvm/driver.t and tests/cluster/kvm.t.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "lib/fsutil.h"
#include "nodeagent/drivers/kvm/kvm_int.h"

/* A listening socket at path whose child answers one line to each client
 * for 2 s, then exits with the number of clients it had. */
static pid_t serve(const char *path, const char *line)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 4), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pollfd p = { .fd = l, .events = POLLIN };
		int n = 0;

		while (poll(&p, 1, 2000) == 1) {
			int c = accept(l, NULL, NULL);
			char buf[256];

			if (c < 0)
				continue;
			n++;
			if (read(c, buf, sizeof(buf)) > 0 && write(c, line, strlen(line)) < 0)
				n += 100;
			close(c);
		}
		_exit(n);
	}
	close(l);
	return pid;
}

static int clients(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void planted_symlink_to_roots_socket(void **state)
{
	char dir[64], priv[128], target[160], hv[128], ctl[160];
	char *reply = NULL;
	struct verr err;
	pid_t root_srv;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "kvmctl"), 0);
	snprintf(priv, sizeof(priv), "%s/root-only", dir);
	snprintf(target, sizeof(target), "%s/service.sock", priv);
	snprintf(hv, sizeof(hv), "%s/hv", dir);
	snprintf(ctl, sizeof(ctl), "%s/ctl", hv);
	assert_int_equal(mkdir(priv, 0700), 0);
	assert_int_equal(mkdir(hv, 0700), 0);
	assert_int_equal(chown(hv, 65534, 65534), 0);
	root_srv = serve(target, "{\"ok\":true,\"from\":\"root's service\"}\n");
	/* What the job's user does in their own folder. */
	assert_int_equal(symlink(target, ctl), 0);
	assert_int_equal(lchown(ctl, 65534, 65534), 0);

	if (kvm_control(ctl, "{\"cmd\":\"status\"}", &reply, 1000, &err) == 0)
		fail_msg("the planted symlink led root's connection to %s, which answered %s", target, reply);
	assert_non_null(strstr(err.msg, "not a socket"));
	assert_non_null(strstr(err.msg, ctl));
	assert_int_equal(clients(root_srv), 0);

	/* vhpc-hv's own socket at ctl is reached as before. */
	assert_int_equal(unlink(ctl), 0);
	root_srv = serve(ctl, "{\"ok\":true,\"state\":\"running\"}\n");
	assert_int_equal(kvm_control(ctl, "{\"cmd\":\"status\"}", &reply, 2000, &err), 0);
	assert_string_equal(reply, "{\"ok\":true,\"state\":\"running\"}");
	free(reply);
	assert_int_equal(clients(root_srv), 1);
	assert_int_equal(fx_rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(planted_symlink_to_roots_socket),
	};

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (a folder of the test's own user nobody)\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
