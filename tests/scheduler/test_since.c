/* `vhpc history --since`: ages, dates, times and unix times, and errors
 * that name the value and the forms taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "scheduler/cli/since.h"

static const time_t now = 1796500000;    /* 2026-12-05T19:46:40Z */

static int64_t at(const char *t)
{
	char why[400];
	int64_t v = -1;

	if (since_parse(t, now, &v, why, sizeof(why)) < 0)
		fail_msg("'%s' refused: %s", t, why);
	return v;
}

static void refused(const char *t, const char *want)
{
	char why[400] = "";
	int64_t v;

	if (since_parse(t, now, &v, why, sizeof(why)) == 0)
		fail_msg("'%s' accepted as %lld", t, (long long)v);
	if (!strstr(why, want) || !strstr(why, "expected an age"))
		fail_msg("'%s': '%s' lacks '%s' or the forms", t, why, want);
}

static void ages(void **state)
{
	(void)state;
	assert_int_equal(at("90s"), now - 90);
	assert_int_equal(at("30m"), now - 1800);
	assert_int_equal(at("2h"), now - 7200);
	assert_int_equal(at("1d"), now - 86400);
	assert_int_equal(at("1w"), now - 7 * 86400);
	assert_int_equal(at("1h30m"), now - 5400);
	assert_int_equal(at("0s"), now);
	refused("5x", "'5x'");
	refused("2", "'2'");
	refused("h", "'h'");
	refused("-2h", "'-2h'");
	refused("2h ", "'2h '");
	refused("99999999999999999999d", "hundred years");
	refused("36600d1d", "hundred years");
	refused("", "empty");
}

static void dates_and_times(void **state)
{
	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	assert_int_equal(at("2026-12-05"), 1796428800);
	assert_int_equal(at("2026-12-05T19:46"), 1796500000 - 40);
	assert_int_equal(at("2026-12-05 19:46:40"), 1796500000);
	assert_int_equal(at("2026-12-05T19:46:40Z"), 1796500000);
	assert_int_equal(at("@1796500000"), 1796500000);
	/* local time is the TZ's */
	setenv("TZ", "CET-1", 1);
	tzset();
	assert_int_equal(at("2026-12-05T20:46:40"), 1796500000);
	assert_int_equal(at("2026-12-05T19:46:40Z"), 1796500000);
	refused("2026-02-30", "no such date");
	refused("2026-13-01", "no such date");
	refused("2026-12-05T24:00", "no such date");
	refused("2026-12-05T20:61", "no such date");
	refused("2026-12-05T2:00", "HH:MM");
	refused("2026-12-05T20:26:4", "HH:MM");
	refused("2026-12-05T20:26Zx", "follows");
	refused("2026-1-05", "not a time");
	refused("@", "seconds since 1970");
	refused("@12x", "seconds since 1970");
	refused("@99999999999999", "seconds since 1970");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ages),
		cmocka_unit_test(dates_and_times),
	};

	return cmocka_run_group_tests_name("since", tests, NULL, NULL);
}
