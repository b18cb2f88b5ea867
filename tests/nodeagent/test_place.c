/* Placement on hwloc synthetic and hand-written XML topologies. */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/log.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nodeagent/place/place.h"

#define HERE "synthetic:numa:1 core:2 pu:1"            /* this machine's shape */
#define BIG  "synthetic:pack:2 numa:2 core:8 pu:2"
#define GiB  (1ull << 30)
#define MiB  (1ull << 20)

static struct na_placement out[VHPC_MAX_GUESTS];

static struct na_topo *load(const char *spec)
{
	struct na_topo *t;
	struct verr e;

	if (na_topo_load(&t, spec, &e) < 0)
		fail_msg("%s", e.msg);
	return t;
}

static const char *asym_xml(void)
{
	static char path[4096];
	const char *top = getenv("VHPC_TOP");

	snprintf(path, sizeof(path), "%s/tests/nodeagent/asym.xml", top ? top : ".");
	return path;
}

static int place(struct na_topo *t, int n, int vcpus, uint64_t mem, bool over,
		 const int *busy, int nbusy, struct verr *e)
{
	struct na_place_req r = { .nguests = n, .vcpus = vcpus, .mem = mem,
				  .oversubscribe = over, .busy_cpus = busy, .nbusy = nbusy };

	return na_place(t, &r, out, e);
}

static void must_place(struct na_topo *t, int n, int vcpus, uint64_t mem, bool over,
		       const int *busy, int nbusy)
{
	struct verr e;

	if (place(t, n, vcpus, mem, over, busy, nbusy, &e) < 0)
		fail_msg("placement failed: %s", e.msg);
}

/* Synthetic topologies number PUs in order: with pu:2, core k has PUs 2k
 * and 2k+1; BIG has 16 PUs per NUMA node. */
static int big_node_of(int pu) { return pu / 16; }

/* No PU appears twice across guests or within one. */
static void assert_no_sharing(int n)
{
	int seen[1024] = { 0 };

	for (int g = 0; g < n; g++) {
		assert_false(out[g].shared);
		for (int i = 0; i < out[g].ncpus; i++) {
			assert_in_range(out[g].cpus[i], 0, 1023);
			assert_int_equal(seen[out[g].cpus[i]]++, 0);
		}
	}
}

static bool has_mem(int g, int node)
{
	for (int i = 0; i < out[g].nmems; i++)
		if (out[g].mems[i] == node)
			return true;
	return false;
}

/* ------------------------------------------------------- numa:1 core:2 */

static void here_two_guests_get_one_core_each(void **state)
{
	struct na_topo *t = load(HERE);

	(void)state;
	must_place(t, 2, 1, 512 * MiB, false, NULL, 0);
	assert_int_equal(out[0].ncpus, 1);
	assert_int_equal(out[1].ncpus, 1);
	assert_int_not_equal(out[0].cpus[0], out[1].cpus[0]);
	for (int g = 0; g < 2; g++) {
		assert_int_equal(out[g].nmems, 1);
		assert_int_equal(out[g].mems[0], 0);
		assert_false(out[g].split);
	}
	assert_no_sharing(2);
	must_place(t, 1, 2, 0, false, NULL, 0);
	assert_int_equal(out[0].cpus[0], 0);
	assert_int_equal(out[0].cpus[1], 1);
	na_topo_free(t);
}

static void here_too_many_guests_is_a_clear_error(void **state)
{
	struct na_topo *t = load(HERE);
	struct verr e;

	(void)state;
	assert_int_equal(place(t, 3, 1, 0, false, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "asked 3 guests x 1 vCPU"));
	assert_non_null(strstr(e.msg, "2 of 2 cores free"));
	assert_non_null(strstr(e.msg, "oversubscribe"));
	assert_int_equal(place(t, 1, 3, 0, false, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "3 cores"));
	na_topo_free(t);
}

static void here_busy_cpus_of_other_jobs_are_left_alone(void **state)
{
	struct na_topo *t = load(HERE);
	const int busy[] = { 0 };
	struct verr e;

	(void)state;
	must_place(t, 1, 1, 0, false, busy, 1);
	assert_int_equal(out[0].cpus[0], 1);
	assert_int_equal(place(t, 2, 1, 0, false, busy, 1, &e), -1);
	assert_non_null(strstr(e.msg, "1 of 2 cores free"));
	assert_non_null(strstr(e.msg, "cpus 1"));
	na_topo_free(t);
}

static void here_oversubscription_spreads_evenly_and_says_so(void **state)
{
	struct na_topo *t = load(HERE);
	int per_core[2] = { 0 };

	(void)state;
	must_place(t, 4, 1, 0, true, NULL, 0);
	for (int g = 0; g < 4; g++) {
		assert_int_equal(out[g].ncpus, 1);
		assert_true(out[g].shared);
		per_core[out[g].cpus[0]]++;
	}
	assert_int_equal(per_core[0], 2);
	assert_int_equal(per_core[1], 2);
	/* when it fits, oversubscribe changes nothing */
	must_place(t, 2, 1, 0, true, NULL, 0);
	assert_no_sharing(2);
	/* a guest larger than the machine wraps around its own cores */
	must_place(t, 1, 3, 0, true, NULL, 0);
	assert_int_equal(out[0].ncpus, 3);
	assert_true(out[0].shared);
	na_topo_free(t);
}

static void here_numa_info(void **state)
{
	struct na_topo *t = load(HERE);
	struct na_numa_info n[4];

	(void)state;
	assert_int_equal(na_topo_numa(t, n, 4), 1);
	assert_int_equal(n[0].os_index, 0);
	assert_int_equal(n[0].ncores, 2);
	assert_true(n[0].mem_bytes > 0);
	na_topo_free(t);
}

/* ------------------------------------------- pack:2 numa:2 core:8 pu:2 */

static void big_guests_stay_on_one_node_one_pu_per_core(void **state)
{
	struct na_topo *t = load(BIG);

	(void)state;
	must_place(t, 8, 4, 256 * MiB, false, NULL, 0);
	assert_no_sharing(8);
	for (int g = 0; g < 8; g++) {
		assert_int_equal(out[g].ncpus, 4);
		assert_int_equal(out[g].nmems, 1);
		assert_false(out[g].split);
		for (int i = 0; i < 4; i++) {
			assert_int_equal(big_node_of(out[g].cpus[i]), out[g].mems[0]);
			/* the first PU of a core; the SMT sibling stays idle */
			assert_int_equal(out[g].cpus[i] % 2, 0);
		}
	}
	/* the machine is full now: 4 nodes x 8 cores, 32 vCPUs */
	must_place(t, 4, 8, 0, false, NULL, 0);
	assert_no_sharing(4);
	for (int g = 0; g < 4; g++)
		for (int i = 0; i < 8; i++)
			assert_int_equal(big_node_of(out[g].cpus[i]), out[g].mems[0]);
	na_topo_free(t);
}

static void big_memory_steers_guests_to_nodes_that_hold_it(void **state)
{
	struct na_topo *t = load(BIG);

	(void)state;
	/* 1 GiB per node: two 600 MiB guests cannot share one */
	must_place(t, 4, 1, 600 * MiB, false, NULL, 0);
	for (int a = 0; a < 4; a++)
		for (int b = a + 1; b < 4; b++)
			assert_int_not_equal(out[a].mems[0], out[b].mems[0]);
	/* more memory than a node: cores stay together, memory spills within
	 * the package */
	must_place(t, 1, 4, 1536 * MiB, false, NULL, 0);
	assert_true(out[0].split);
	assert_int_equal(out[0].nmems, 2);
	for (int i = 0; i < 4; i++)
		assert_int_equal(big_node_of(out[0].cpus[i]), out[0].mems[0]);
	assert_int_equal(out[0].mems[0] / 2, out[0].mems[1] / 2);
	na_topo_free(t);
}

static void big_split_when_too_big_for_a_node(void **state)
{
	struct na_topo *t = load(BIG);
	struct verr e;

	(void)state;
	/* 12 cores: two nodes of one package */
	must_place(t, 1, 12, 0, false, NULL, 0);
	assert_true(out[0].split);
	assert_int_equal(out[0].nmems, 2);
	assert_int_equal(out[0].mems[0] / 2, out[0].mems[1] / 2);
	assert_no_sharing(1);
	/* 20 cores: more than a package */
	must_place(t, 1, 20, 0, false, NULL, 0);
	assert_true(out[0].split);
	assert_true(out[0].nmems >= 3);
	assert_no_sharing(1);
	/* two of them do not fit */
	assert_int_equal(place(t, 2, 20, 0, false, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "guest 2 of 2"));
	assert_non_null(strstr(e.msg, "32 of 32 cores free"));
	na_topo_free(t);
}

static void big_busy_sibling_makes_the_core_busy(void **state)
{
	struct na_topo *t = load(BIG);
	int busy[16];

	(void)state;
	/* PU 1 is the sibling of core 0's PU 0: node 0 has 7 free cores left */
	busy[0] = 1;
	must_place(t, 1, 8, 0, false, busy, 1);
	assert_int_not_equal(out[0].mems[0], 0);
	must_place(t, 1, 7, 0, false, busy, 1);
	assert_int_equal(out[0].mems[0], 0);
	for (int i = 0; i < 7; i++)
		assert_true(out[0].cpus[i] != 0 && out[0].cpus[i] != 1);
	/* all of node 0 busy */
	for (int i = 0; i < 16; i++)
		busy[i] = i;
	must_place(t, 4, 2, 0, false, busy, 16);
	for (int g = 0; g < 4; g++)
		for (int i = 0; i < 2; i++)
			assert_true(out[g].cpus[i] >= 16);
	na_topo_free(t);
}

static void big_memory_that_fits_nowhere_is_an_error(void **state)
{
	struct na_topo *t = load(BIG);
	struct verr e;

	(void)state;
	assert_int_equal(place(t, 1, 1, 100 * GiB, false, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "100 GiB"));
	assert_non_null(strstr(e.msg, "1 GiB of 1 GiB memory free"));
	assert_int_equal(place(t, 1, 1, 100 * GiB, true, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "not enough memory"));
	na_topo_free(t);
}

/* -------------------------------------------------------- asymmetric */

static void asym_topology_is_read_as_written(void **state)
{
	struct na_topo *t = load(asym_xml());
	struct na_numa_info n[8];

	(void)state;
	assert_int_equal(na_topo_numa(t, n, 8), 3);
	assert_int_equal(n[0].os_index, 0);
	assert_int_equal(n[0].ncores, 4);
	assert_int_equal(n[0].mem_bytes, 2 * GiB);
	assert_int_equal(n[1].ncores, 2);
	assert_int_equal(n[1].mem_bytes, 1 * GiB);
	assert_int_equal(n[2].os_index, 2);
	assert_int_equal(n[2].ncores, 0);        /* memory only */
	assert_int_equal(n[2].mem_bytes, 4 * GiB);
	na_topo_free(t);
}

static void asym_best_fit_and_split(void **state)
{
	struct na_topo *t = load(asym_xml());
	struct verr e;

	(void)state;
	/* 2 vCPUs fit node 1 exactly: the large node stays whole */
	must_place(t, 1, 2, 0, false, NULL, 0);
	assert_int_equal(out[0].mems[0], 1);
	assert_int_equal(out[0].cpus[0], 8);
	assert_int_equal(out[0].cpus[1], 9);
	/* 3 vCPUs: node 0, first PUs of cores 0-2 (PUs 4-7 are siblings) */
	must_place(t, 1, 3, GiB, false, NULL, 0);
	assert_int_equal(out[0].mems[0], 0);
	assert_int_equal(out[0].nmems, 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(out[0].cpus[i], i);
	/* three guests of two: node 1 holds one, node 0 two */
	must_place(t, 3, 2, 0, false, NULL, 0);
	assert_no_sharing(3);
	for (int g = 0; g < 3; g++) {
		assert_int_equal(out[g].nmems, 1);
		assert_int_not_equal(out[g].mems[0], 2);
		for (int i = 0; i < 2; i++)
			assert_true(out[g].mems[0] == 0 ? out[g].cpus[i] < 4 : out[g].cpus[i] >= 8);
	}
	/* 5 vCPUs: more than any node, split over both packages */
	must_place(t, 1, 5, 0, false, NULL, 0);
	assert_true(out[0].split);
	assert_true(has_mem(0, 0) && has_mem(0, 1) && !has_mem(0, 2));
	assert_no_sharing(1);
	/* 7 vCPUs: the machine has 6 cores */
	assert_int_equal(place(t, 1, 7, 0, false, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "6 of 6 cores free"));
	assert_non_null(strstr(e.msg, "node 2: 0 of 0 cores free"));
	na_topo_free(t);
}

static void asym_memory_only_node_takes_spilled_memory(void **state)
{
	struct na_topo *t = load(asym_xml());
	uint64_t cap = 0;

	(void)state;
	/* 3 GiB does not fit a node with cores; the guest still gets its core
	 * and its memory over several nodes */
	must_place(t, 2, 1, 3 * GiB, false, NULL, 0);
	for (int g = 0; g < 2; g++)
		assert_true(out[g].split);
	for (int n = 0; n < 3; n++)
		if (has_mem(0, n) || has_mem(1, n))
			cap += n == 0 ? 2 * GiB : n == 1 ? GiB : 4 * GiB;
	assert_true(cap >= 6 * GiB);
	assert_true(has_mem(0, 2) || has_mem(1, 2));
	na_topo_free(t);
}

static void asym_busy_sibling_and_busy_node(void **state)
{
	struct na_topo *t = load(asym_xml());
	const int sib[] = { 4 }, node0[] = { 0, 1, 2, 3 };
	struct verr e;

	(void)state;
	/* PU 4 is core 0's sibling: core 0 is taken, 4 vCPUs must split */
	must_place(t, 1, 4, 0, false, sib, 1);
	assert_true(out[0].split);
	for (int i = 0; i < 4; i++)
		assert_true(out[0].cpus[i] != 0 && out[0].cpus[i] != 4);
	assert_int_equal(place(t, 1, 3, 0, false, node0, 4, &e), -1);
	assert_non_null(strstr(e.msg, "2 of 6 cores free"));
	na_topo_free(t);
}

/* ------------------------------------------------------------- errors */

static void bad_requests_and_topologies(void **state)
{
	struct na_topo *t = load(HERE);
	struct verr e;

	(void)state;
	assert_int_equal(place(t, 0, 1, 0, false, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "0 guests"));
	assert_int_equal(place(t, 1, 0, 0, false, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "0 vCPUs"));
	assert_int_equal(place(t, VHPC_MAX_GUESTS + 1, 1, 0, false, NULL, 0, &e), -1);
	assert_int_equal(place(t, 1, VHPC_MAX_VCPUS + 1, 0, false, NULL, 0, &e), -1);
	na_topo_free(t);

	assert_int_equal(na_topo_load(&t, "numa:2", &e), -1);
	assert_non_null(strstr(e.msg, "expected 'synthetic:"));
	assert_int_equal(na_topo_load(&t, "synthetic:bogus:2", &e), -1);
	assert_non_null(strstr(e.msg, "synthetic description"));
	assert_int_equal(na_topo_load(&t, "/nonexistent/topo.xml", &e), -1);
	assert_non_null(strstr(e.msg, "/nonexistent/topo.xml"));
	assert_null(t);
}

static void this_machine_loads(void **state)
{
	struct na_topo *t = load(NULL);
	struct na_numa_info n[VHPC_MAX_NODES];
	int k;

	(void)state;
	k = na_topo_numa(t, n, VHPC_MAX_NODES);
	assert_true(k >= 1);
	assert_true(n[0].ncores >= 1);
	must_place(t, 1, 1, 0, false, NULL, 0);
	na_topo_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(here_two_guests_get_one_core_each),
		cmocka_unit_test(here_too_many_guests_is_a_clear_error),
		cmocka_unit_test(here_busy_cpus_of_other_jobs_are_left_alone),
		cmocka_unit_test(here_oversubscription_spreads_evenly_and_says_so),
		cmocka_unit_test(here_numa_info),
		cmocka_unit_test(big_guests_stay_on_one_node_one_pu_per_core),
		cmocka_unit_test(big_memory_steers_guests_to_nodes_that_hold_it),
		cmocka_unit_test(big_split_when_too_big_for_a_node),
		cmocka_unit_test(big_busy_sibling_makes_the_core_busy),
		cmocka_unit_test(big_memory_that_fits_nowhere_is_an_error),
		cmocka_unit_test(asym_topology_is_read_as_written),
		cmocka_unit_test(asym_best_fit_and_split),
		cmocka_unit_test(asym_memory_only_node_takes_spilled_memory),
		cmocka_unit_test(asym_busy_sibling_and_busy_node),
		cmocka_unit_test(bad_requests_and_topologies),
		cmocka_unit_test(this_machine_loads),
	};

	vlog_init("test-place");
	vlog_set_level(VLOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
