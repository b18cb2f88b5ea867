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

#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"

static void sizes_parse_with_units_and_reject_junk(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(parse_size("64K", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(parse_size("512M", &v), 0);
	assert_int_equal(v, 512ull << 20);
	assert_int_equal(parse_size("2GiB", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(parse_size("1T", &v), 0);
	assert_int_equal(v, 1ull << 40);
	assert_int_equal(parse_size("2gb", &v), -1);
	assert_int_equal(parse_size("", &v), -1);
	assert_int_equal(parse_size("-1", &v), -1);
	assert_int_equal(parse_size("1X", &v), -1);
	assert_int_equal(parse_size("1.5G", &v), -1);
	assert_int_equal(parse_size("99999999999999999999", &v), -1);
	assert_int_equal(parse_size("17179869184G", &v), -1);
}

static void integers_parse_whole_string_within_bounds(void **state)
{
	long long v;

	(void)state;
	assert_int_equal(parse_ll("42", 0, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(parse_ll("42x", 0, 100, &v), -1);
	assert_int_equal(parse_ll("101", 0, 100, &v), -1);
	assert_int_equal(parse_ll("", 0, 100, &v), -1);
	assert_int_equal(parse_ll("-5", -10, 100, &v), 0);
	assert_int_equal(v, -5);
}

static void cpulists_round_trip(void **state)
{
	int ids[64];
	size_t n;
	char buf[128];

	(void)state;
	assert_int_equal(cpulist_parse("0-3,8,10-11\n", ids, 64, &n), 0);
	assert_int_equal(n, 7);
	assert_string_equal(cpulist_format(ids, n, buf, sizeof(buf)), "0-3,8,10-11");
	assert_int_equal(cpulist_parse("5,1,3,1", ids, 64, &n), 0);
	assert_string_equal(cpulist_format(ids, n, buf, sizeof(buf)), "1,3,5");
	assert_int_equal(cpulist_parse("3-1", ids, 64, &n), -1);
	assert_int_equal(cpulist_parse("a", ids, 64, &n), -1);
	assert_int_equal(cpulist_parse("0-100", ids, 64, &n), -1);
	assert_int_equal(cpulist_parse("", ids, 64, &n), 0);
	assert_int_equal(n, 0);
}

static void identifiers_are_checked(void **state)
{
	(void)state;
	assert_true(ident_ok("job-1.a_b", 32));
	assert_false(ident_ok("-job", 32));
	assert_false(ident_ok("a/b", 32));
	assert_false(ident_ok("", 32));
	assert_false(ident_ok("abcdef", 5));
	assert_false(ident_ok("../x", 32));
}

static void files_write_read_and_remove(void **state)
{
	char dir[64], path[256], *buf;
	size_t len;
	struct verr err;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "unit"), 0);
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	assert_int_equal(mkdir_p(path, 0755, &err), 0);
	snprintf(path, sizeof(path), "%s/a/b/c/f", dir);
	assert_int_equal(write_file_atomic(path, "hello", 5, 0600, &err), 0);
	assert_int_equal(read_file(path, &buf, &len, 100, &err), 0);
	assert_int_equal(len, 5);
	assert_string_equal(buf, "hello");
	free(buf);
	assert_int_equal(read_file(path, &buf, &len, 3, &err), -1);
	assert_non_null(strstr(err.msg, "larger than 3 bytes"));
	assert_int_equal(rm_rf(dir, &err), 0);
	assert_int_equal(access(dir, F_OK), -1);
	assert_int_equal(rm_rf("/", &err), -1);
	assert_int_equal(rm_rf("", &err), -1);
}

static void hex_round_trips_and_rejects_bad_digits(void **state)
{
	uint8_t in[4] = { 0x00, 0xab, 0x7f, 0xff }, out[4];
	char hex[9];

	(void)state;
	hex_encode(in, 4, hex);
	assert_string_equal(hex, "00ab7fff");
	assert_int_equal(hex_decode(hex, out, 4), 0);
	assert_memory_equal(in, out, 4);
	assert_int_equal(hex_decode("00ab7fzz", out, 4), -1);
	assert_int_equal(hex_decode("00ab", out, 4), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sizes_parse_with_units_and_reject_junk),
		cmocka_unit_test(integers_parse_whole_string_within_bounds),
		cmocka_unit_test(cpulists_round_trip),
		cmocka_unit_test(identifiers_are_checked),
		cmocka_unit_test(files_write_read_and_remove),
		cmocka_unit_test(hex_round_trips_and_rejects_bad_digits),
	};
	return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
