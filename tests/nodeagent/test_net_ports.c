/*
 * A restored job's network (na_net_req.ports_down): its guests' veths on
 * the bridge stay down, so nothing crosses between two guests while CRIU
 * gives them back their TCP sockets one at a time, until na_net_ports_up
 * at job_resume; and na_net_ports_up on a job started as usual changes
 * nothing.  Needs root (network namespaces); skipped otherwise.
 */
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char rundir[] = "/tmp/vhpc-netports.XXXXXX";
/* What a test made, for its teardown: a failed check must not leave a
 * namespace behind. */
static struct na_jobdir jd;
static struct na_net n;
static bool have_jd, have_net;

/* The first line `sh -c cmd` prints ("" when none). */
static void line_of(const char *cmd, char *buf, size_t len)
{
	FILE *f = popen(cmd, "r");

	buf[0] = 0;
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = 0;
	pclose(f);
}

/* Whether guest 0 reaches guest 1's address over the job network. */
static int pings(const char *job, const char *addr)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "ip netns exec vhpc-%s-0 ping -c1 -W1 -q %s >/dev/null 2>&1", job, addr);
	return system(cmd) == 0;
}

static int port_up(const char *job, int i)
{
	char cmd[256], line[512];

	snprintf(cmd, sizeof(cmd), "ip -n vhpc-%s -o link show v%d", job, i);
	line_of(cmd, line, sizeof(line));
	assert_non_null(strstr(line, "master br0"));
	return strstr(line, ",UP") || strstr(line, "<UP");
}

static void one_job(const char *job, int third, bool down)
{
	struct verr e;
	struct na_net_req r = { .job = job, .nguests = 2, .ports_down = down };
	char addr1[32];

	r.subnet.addr = (10u << 24) | (213u << 16) | ((unsigned)third << 8);
	r.subnet.prefix = 24;
	snprintf(addr1, sizeof(addr1), "10.213.%d.3", third);
	assert_int_equal(na_jobdir_create(&jd, job, &e), 0);
	have_jd = true;
	if (na_net_create(&r, &n, &e) < 0)
		fail_msg("na_net_create: %s", e.msg);
	have_net = true;
	if (down) {
		assert_false(port_up(job, 0));
		assert_false(port_up(job, 1));
		/* No frame crosses: a guest that answered before its socket is
		 * back would reset its peer's connection. */
		assert_false(pings(job, addr1));
	} else {
		assert_true(port_up(job, 0));
		assert_true(pings(job, addr1));
	}
	if (na_net_ports_up(&n, &e) < 0)
		fail_msg("na_net_ports_up: %s", e.msg);
	assert_true(port_up(job, 0));
	assert_true(port_up(job, 1));
	assert_true(pings(job, addr1));
}

static int teardown(void **state)
{
	struct verr e;
	int rc = 0;

	(void)state;
	if (have_net && na_net_destroy(&n, &e) < 0) {
		fprintf(stderr, "na_net_destroy: %s\n", e.msg);
		rc = -1;
	}
	if (have_jd && na_jobdir_remove(&jd, &e) < 0) {
		fprintf(stderr, "na_jobdir_remove: %s\n", e.msg);
		rc = -1;
	}
	have_net = have_jd = false;
	return rc;
}

static void t_restore_ports_down_until_up(void **state)
{
	char job[32];

	(void)state;
	if (geteuid() != 0)
		skip();
	snprintf(job, sizeof(job), "np%da", (int)getpid() % 100000);
	one_job(job, 251, true);
}

static void t_ports_up_on_a_started_job_changes_nothing(void **state)
{
	char job[32];

	(void)state;
	if (geteuid() != 0)
		skip();
	snprintf(job, sizeof(job), "np%db", (int)getpid() % 100000);
	one_job(job, 252, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(t_restore_ports_down_until_up, teardown),
		cmocka_unit_test_teardown(t_ports_up_on_a_started_job_changes_nothing, teardown),
	};
	int rc;

	if (!mkdtemp(rundir))
		return 1;
	setenv("VHPC_RUN_DIR", rundir, 1);
	char rm[64];

	rc = cmocka_run_group_tests(tests, NULL, NULL);
	/* What the job dirs leave (jobs/, its lock files): ours, from mkdtemp. */
	snprintf(rm, sizeof(rm), "rm -rf %s", rundir);
	if (system(rm) != 0)
		rc = 1;
	return rc;
}
