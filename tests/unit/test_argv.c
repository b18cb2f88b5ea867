#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/argv.h"
#include "lib/grow.h"

static void arrays_double_from_their_first_size(void **state)
{
	int *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(grow(&v, &cap, 1, sizeof(*v), 16), 0);
	assert_int_equal(cap, 16);
	assert_int_equal(grow(&v, &cap, 16, sizeof(*v), 16), 0);
	assert_int_equal(cap, 16);
	assert_int_equal(grow(&v, &cap, 17, sizeof(*v), 16), 0);
	assert_int_equal(cap, 32);
	v[31] = 7;
	assert_int_equal(grow(&v, &cap, 1000, sizeof(*v), 16), 0);
	assert_int_equal(cap, 1024);
	assert_int_equal(v[31], 7);
	/* Past what a size_t counts: refused, the array as it was. */
	assert_int_equal(grow(&v, &cap, SIZE_MAX / 2, sizeof(*v), 16), -1);
	assert_int_equal(cap, 1024);
	assert_int_equal(v[31], 7);
	free(v);
}

static void argv_words_are_formatted_and_terminated(void **state)
{
	struct argv_b a = { 0 };
	char **v;

	(void)state;
	for (int i = 0; i < 100; i++)
		argv_add(&a, "w%d", i);
	argv_add(&a, "%s=%llu", "mem", 512ull << 20);
	assert_non_null(v = argv_finish(&a));
	assert_string_equal(v[0], "w0");
	assert_string_equal(v[99], "w99");
	assert_string_equal(v[100], "mem=536870912");
	assert_null(v[101]);
	argv_free(v);
	/* An allocation that failed is remembered, and the end says so. */
	a = (struct argv_b){ 0 };
	argv_add(&a, "kept");
	a.oom = true;
	argv_add(&a, "lost");
	assert_null(argv_finish(&a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(arrays_double_from_their_first_size),
		cmocka_unit_test(argv_words_are_formatted_and_terminated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
