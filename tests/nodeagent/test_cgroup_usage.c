/* What a guest used, from its cgroup files as the kernels lay them out: a
 * pure cgroup2 host (cpu.stat usage_usec, memory.peak: Debian 12's 6.1),
 * a hybrid one (cgroup2 cpu.stat, v1 memory.max_usage_in_bytes: this
 * development machine) and a v1 one (cpuacct.usage); files that are not
 * numbers, or are links, give unknown (-1), never 0. */
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
#include "nodeagent/jobdir/jobdir.h"

static char dir[64];

static void put(const char *mnt, const char *file, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s/vhpc/7x1/0", dir, mnt);
	for (char *s = p + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		mkdir(p, 0755);
		*s = '/';
	}
	mkdir(p, 0755);
	snprintf(p + strlen(p), sizeof(p) - strlen(p), "/%s", file);
	assert_non_null(f = fopen(p, "w"));
	fputs(text, f);
	fclose(f);
}

static void usage(const char *const *mnts, int n, int64_t *cpu, int64_t *mem)
{
	char *m[4];

	for (int i = 0; i < n; i++) {
		m[i] = malloc(300);
		snprintf(m[i], 300, "%s/%s", dir, mnts[i]);
	}
	na_cgroup_usage_in(m, n, "vhpc/7x1/0", cpu, mem);
	for (int i = 0; i < n; i++)
		free(m[i]);
}

static void layouts(void **state)
{
	static const char *const v2[] = { "unified" }, *const hybrid[] = { "cpu", "memory", "unified" },
			  *const v1[] = { "cpuacct", "memory1" }, *const none[] = { "nothing" };
	int64_t cpu, mem;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "cgusage"), 0);
	put("unified", "cpu.stat", "usage_usec 4408664\nuser_usec 4300000\nsystem_usec 108664\n"
				   "core_sched.force_idle_usec 0\nnr_periods 0\n");
	put("unified", "memory.peak", "72880128\n");
	usage(v2, 1, &cpu, &mem);
	assert_int_equal(cpu, 4408664);
	assert_int_equal(mem, 72880128);

	/* hybrid: v1's cpu controller has a cpu.stat without usage_usec */
	put("cpu", "cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n");
	put("memory", "memory.max_usage_in_bytes", "69500000\n");
	{
		char peak[300];

		snprintf(peak, sizeof(peak), "%s/unified/vhpc/7x1/0/memory.peak", dir);
		unlink(peak);
	}
	usage(hybrid, 3, &cpu, &mem);
	assert_int_equal(cpu, 4408664);
	assert_int_equal(mem, 69500000);

	put("cpuacct", "cpuacct.usage", "2000123456\n");
	put("memory1", "memory.max_usage_in_bytes", "1048576\n");
	usage(v1, 2, &cpu, &mem);
	assert_int_equal(cpu, 2000123);
	assert_int_equal(mem, 1048576);

	usage(none, 1, &cpu, &mem);
	assert_int_equal(cpu, -1);
	assert_int_equal(mem, -1);

	/* not numbers: unknown */
	put("nothing", "cpu.stat", "usage_usec x\n");
	put("nothing", "memory.peak", "-5\n");
	usage(none, 1, &cpu, &mem);
	assert_int_equal(cpu, -1);
	assert_int_equal(mem, -1);
	put("nothing", "cpu.stat", "usage_usec 99999999999999999999999\n");
	put("nothing", "memory.peak", "12abc\n");
	usage(none, 1, &cpu, &mem);
	assert_int_equal(cpu, -1);
	assert_int_equal(mem, -1);

	/* a link where a file was (the guest's user may own its cgroup): not followed */
	{
		char target[300], link[300];

		snprintf(link, sizeof(link), "%s/nothing/vhpc/7x1/0/memory.peak", dir);
		put("target", "memory.peak", "4096\n");
		unlink(link);
		snprintf(target, sizeof(target), "%s/target/vhpc/7x1/0/memory.peak", dir);
		assert_int_equal(symlink(target, link), 0);
		usage(none, 1, &cpu, &mem);
		assert_int_equal(mem, -1);
	}
	/* a path out of the hierarchy is refused */
	{
		char *m = dir;

		na_cgroup_usage_in(&m, 1, "../x", &cpu, &mem);
		assert_int_equal(cpu, -1);
		na_cgroup_usage_in(&m, 1, "/abs", &cpu, &mem);
		assert_int_equal(cpu, -1);
	}
	assert_int_equal(fx_rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layouts),
	};

	return cmocka_run_group_tests_name("cgroup-usage", tests, NULL, NULL);
}
