/* lib/mpibtl.c: the BTLs a job's ranks take, one rule for `vhpc run`'s
 * mpirun line and for tasks under Slurm. */
#include "lib/mpibtl.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

static void each_transport_where_the_job_has_it(void **state)
{
	char b[64];

	(void)state;
	mpibtl_list(b, sizeof(b), true, false, false);
	assert_string_equal(b, "self,vader,tcp");
	mpibtl_list(b, sizeof(b), true, true, false);
	assert_string_equal(b, "self,vader,vmshm,tcp");
	mpibtl_list(b, sizeof(b), true, true, true);
	assert_string_equal(b, "self,vader,vmshm,ofi,tcp");
	/* Under Slurm without a vmshm region and with guests sharing a
	 * node: no vader, which would join ranks of two guests and crash. */
	mpibtl_list(b, sizeof(b), false, false, true);
	assert_string_equal(b, "self,ofi,tcp");
	mpibtl_list(b, sizeof(b), false, false, false);
	assert_string_equal(b, "self,tcp");
	/* Cut short, never overrun. */
	mpibtl_list(b, 8, true, true, true);
	assert_int_equal(strlen(b), 7);
}

static void the_fabric_takes_rxd_over_verbs_both_sided(void **state)
{
	int n = 0;

	(void)state;
	for (; mpibtl_fabric_mca[n][0]; n++)
		assert_non_null(mpibtl_fabric_mca[n][1]);
	assert_int_equal(n, 2);
	assert_string_equal(mpibtl_fabric_mca[0][0], "btl_ofi_provider_include");
	assert_string_equal(mpibtl_fabric_mca[0][1], "verbs;ofi_rxd");
	assert_string_equal(mpibtl_fabric_mca[1][0], "btl_ofi_mode");
	assert_string_equal(mpibtl_fabric_mca[1][1], "2");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(each_transport_where_the_job_has_it),
		cmocka_unit_test(the_fabric_takes_rxd_over_verbs_both_sided),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
