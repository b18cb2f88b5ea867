#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "lib/binds.h"

static char why[512];

static void specs_parse_into_source_destination_and_mode(void **state)
{
	struct bind b;

	(void)state;
	assert_int_equal(bind_parse("/scratch", &b, why, sizeof(why)), 0);
	assert_string_equal(b.src, "/scratch");
	assert_string_equal(b.dst, "/scratch");
	assert_false(b.ro);
	assert_int_equal(bind_parse("/opt/apps:ro", &b, why, sizeof(why)), 0);
	assert_string_equal(b.dst, "/opt/apps");
	assert_true(b.ro);
	assert_int_equal(bind_parse("/data/x:/input:ro", &b, why, sizeof(why)), 0);
	assert_string_equal(b.src, "/data/x");
	assert_string_equal(b.dst, "/input");
	assert_true(b.ro);
	assert_int_equal(bind_parse("/data/x:/input:rw", &b, why, sizeof(why)), 0);
	assert_false(b.ro);
	assert_int_equal(bind_parse("/data/x:/input", &b, why, sizeof(why)), 0);
	assert_string_equal(b.dst, "/input");
}

static void bad_specs_are_refused_by_name(void **state)
{
	struct bind b;

	(void)state;
	assert_int_equal(bind_parse("data", &b, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not an absolute path"));
	assert_int_equal(bind_parse("/data/../etc", &b, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "\"..\""));
	assert_int_equal(bind_parse("/data/./x", &b, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "\".\""));
	assert_int_equal(bind_parse("/data//x", &b, why, sizeof(why)), -1);
	assert_int_equal(bind_parse("/data/", &b, why, sizeof(why)), -1);
	assert_int_equal(bind_parse("/data:/x:ro:rw", &b, why, sizeof(why)), -1);
	assert_int_equal(bind_parse("/data:/x:maybe", &b, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "ro or rw"));
	assert_int_equal(bind_parse("/da ta", &b, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "character ' '"));
	/* virtiofsd's -o source= would split at a comma. */
	assert_int_equal(bind_parse("/a,b", &b, why, sizeof(why)), -1);
	assert_int_equal(bind_parse("/", &b, why, sizeof(why)), -1);
	assert_int_equal(bind_parse("/data:/usr/lib", &b, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "/usr"));
	assert_int_equal(bind_parse("/etc", &b, why, sizeof(why)), -1);
	assert_int_equal(bind_parse("/data:/vhpc/x", &b, why, sizeof(why)), -1);
	assert_int_equal(bind_parse("/data:/tmp", &b, why, sizeof(why)), -1);
	assert_int_equal(bind_parse("/data:", &b, why, sizeof(why)), -1);
	/* Below /tmp is the guest's own tmpfs. */
	assert_int_equal(bind_parse("/data:/tmp/in", &b, why, sizeof(why)), 0);
	char longp[400];

	memset(longp, 'a', sizeof(longp));
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	assert_int_equal(bind_parse(longp, &b, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "longer than"));
}

static void under_is_by_component(void **state)
{
	(void)state;
	assert_true(bind_path_under("/home/a", "/home"));
	assert_true(bind_path_under("/home", "/home"));
	assert_false(bind_path_under("/homes/a", "/home"));
	assert_true(bind_path_under("/x", "/"));
}

static void plan_adds_home_and_workdir_unless_shared_and_orders_parents_first(void **state)
{
	const char *site[] = { "/home", "/opt/apps:ro" };
	const char *user[] = { "/data/in:/home/u/in:ro" };
	struct bind_req r = { .site = site, .nsite = 2, .user = user, .nuser = 1,
			      .home = "/home/u", .workdir = "/home/u/run" };
	struct bind_list l;
	char wdir[256], note[256];

	(void)state;
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), 0);
	/* /home holds the home and the workdir at their own paths. */
	assert_int_equal(l.n, 3);
	assert_string_equal(l.v[0].dst, "/home");
	assert_string_equal(l.v[1].dst, "/opt/apps");
	assert_true(l.v[1].ro);
	assert_string_equal(l.v[2].dst, "/home/u/in");
	assert_string_equal(wdir, "/home/u/run");
	assert_string_equal(note, "");

	r.nsite = 0;
	r.nuser = 0;
	r.workdir = "/tmp/job1";
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.v[0].src, "/home/u");
	assert_string_equal(l.v[1].src, "/tmp/job1");
	assert_string_equal(wdir, "/tmp/job1");

	/* A workdir the guest keeps for itself: not shared, the job runs in /tmp. */
	r.workdir = "/usr/share";
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(wdir, "/tmp");
	assert_non_null(strstr(note, "/usr"));
	r.workdir = "/";
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), 0);
	assert_string_equal(wdir, "/tmp");
}

static void plan_enforces_bind_allow_and_unique_destinations(void **state)
{
	const char *site[] = { "/scratch" };
	const char *allow[] = { "/data", "/projects" };
	const char *user[] = { "/etc-copy" };
	const char *user2[] = { "/scratch/u/x:/in" };
	const char *dup[] = { "/data/a:/in", "/data/b:/in" };
	struct bind_req r = { .site = site, .nsite = 1, .allow = allow, .nallow = 2, .user = user, .nuser = 1 };
	struct bind_list l;
	char wdir[256], note[256];

	(void)state;
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), -1);
	assert_non_null(strstr(why, "/data, /projects"));
	assert_non_null(strstr(why, "/etc-copy"));
	/* Below a site bind is allowed too. */
	r.user = user2;
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), 0);
	assert_int_equal(l.n, 2);
	r.user = dup;
	r.nuser = 2;
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), -1);
	assert_non_null(strstr(why, "already the destination"));
}

static void plan_has_a_limit(void **state)
{
	const char *user[BIND_MAX + 1];
	char paths[BIND_MAX + 1][32];
	struct bind_req r = { .user = user, .nuser = BIND_MAX + 1 };
	struct bind_list l;
	char wdir[256], note[256];

	(void)state;
	for (int i = 0; i <= BIND_MAX; i++) {
		snprintf(paths[i], sizeof(paths[i]), "/d/%d", i);
		user[i] = paths[i];
	}
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), -1);
	assert_non_null(strstr(why, "at most"));
	r.nuser = BIND_MAX;
	assert_int_equal(bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)), 0);
	assert_int_equal(l.n, BIND_MAX);
	assert_ptr_equal(bind_holding(&l, "/d/3/x"), &l.v[3]);
	assert_null(bind_holding(&l, "/e"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(specs_parse_into_source_destination_and_mode),
		cmocka_unit_test(bad_specs_are_refused_by_name),
		cmocka_unit_test(under_is_by_component),
		cmocka_unit_test(plan_adds_home_and_workdir_unless_shared_and_orders_parents_first),
		cmocka_unit_test(plan_enforces_bind_allow_and_unique_destinations),
		cmocka_unit_test(plan_has_a_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
