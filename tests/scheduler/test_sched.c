/* Gang scheduling, packing, NUMA capacity and EASY backfill decisions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "scheduler/ctld/sched.h"

#define G (1ull << 30)

static struct sched_node node(int nnuma, int cores_per_numa, uint64_t mem_per_numa)
{
	struct sched_node n = { .up = true, .nnuma = nnuma };

	for (int k = 0; k < nnuma; k++) {
		n.cores[k] = cores_per_numa;
		n.mem[k] = mem_per_numa;
	}
	return n;
}

static struct sched_guest gbuf[64];

static void guests_pack_onto_fewest_nodes(void **state)
{
	struct sched_node n[3] = { node(2, 4, 16 * G), node(2, 4, 16 * G), node(2, 4, 16 * G) };
	struct sched_req r = { .nguests = 4, .vcpus = 2, .mem = G };
	struct sched_alloc a = { .g = gbuf };

	(void)state;
	n[0].used_cores[0] = 1; /* a little busy: the empty nodes are fuller fits */
	assert_int_equal(sched_fit(n, 3, &r, &a), 0);
	assert_int_equal(sched_nodes_used(&a), 1);
	assert_int_not_equal(a.g[0].node, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(a.g[i].ntakes, 1);
	/* 6 guests x 4 cores need 3 nodes of 8 cores. */
	r = (struct sched_req){ .nguests = 6, .vcpus = 4, .mem = G };
	n[0].used_cores[0] = 0;
	assert_int_equal(sched_fit(n, 3, &r, &a), 0);
	assert_int_equal(sched_nodes_used(&a), 3);
}

static void numa_capacity_is_respected(void **state)
{
	struct sched_node n[1] = { node(2, 4, 1 * G) };
	struct sched_req r = { .nguests = 2, .vcpus = 3, .mem = 512u << 20 };
	struct sched_alloc a = { .g = gbuf };

	(void)state;
	/* Two 3-core guests: one per NUMA node, never straddling. */
	assert_int_equal(sched_fit(n, 1, &r, &a), 0);
	assert_int_equal(a.g[0].ntakes, 1);
	assert_int_equal(a.g[1].ntakes, 1);
	assert_int_not_equal(a.g[0].take[0].numa, a.g[1].take[0].numa);
	/* Memory binds too: two 768M guests cannot share a 1G node. */
	r = (struct sched_req){ .nguests = 2, .vcpus = 1, .mem = 768u << 20 };
	assert_int_equal(sched_fit(n, 1, &r, &a), 0);
	assert_int_not_equal(a.g[0].take[0].numa, a.g[1].take[0].numa);
	r = (struct sched_req){ .nguests = 3, .vcpus = 1, .mem = 768u << 20 };
	assert_int_equal(sched_fit(n, 1, &r, &a), -1);
	/* A guest bigger than a NUMA node spans the node's NUMA nodes. */
	r = (struct sched_req){ .nguests = 1, .vcpus = 6, .mem = 1 * G };
	assert_int_equal(sched_fit(n, 1, &r, &a), 0);
	assert_int_equal(a.g[0].ntakes, 2);
	assert_int_equal(a.g[0].take[0].cores + a.g[0].take[1].cores, 6);
	assert_int_equal(a.g[0].take[0].mem + a.g[0].take[1].mem, 1 * G);
}

static void gang_all_or_nothing_and_down_nodes(void **state)
{
	struct sched_node n[2] = { node(1, 8, 0), node(1, 8, 0) };
	struct sched_req r = { .nguests = 9, .vcpus = 2, .mem = 0 };
	struct sched_alloc a = { .g = gbuf };

	(void)state;
	assert_int_equal(sched_fit(n, 2, &r, &a), -1);
	assert_int_equal(n[0].used_cores[0], 0);
	assert_false(sched_feasible(n, 2, &r));
	r.nguests = 8;
	assert_true(sched_feasible(n, 2, &r));
	n[1].up = false;
	assert_false(sched_feasible(n, 2, &r));
	assert_int_equal(sched_fit(n, 2, &r, &a), -1);
}

static void apply_and_release_balance(void **state)
{
	struct sched_node n[2] = { node(2, 4, 8 * G), node(2, 4, 8 * G) };
	struct sched_req r = { .nguests = 3, .vcpus = 3, .mem = G };
	struct sched_alloc a = { .g = gbuf };

	(void)state;
	assert_int_equal(sched_fit(n, 2, &r, &a), 0);
	sched_apply(n, &r, &a, +1);
	assert_int_equal(n[0].used_cores[0] + n[0].used_cores[1] + n[1].used_cores[0] + n[1].used_cores[1], 9);
	sched_apply(n, &r, &a, -1);
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++) {
			assert_int_equal(n[i].used_cores[k], 0);
			assert_int_equal(n[i].used_mem[k], 0);
		}
}

static struct sched_guest pbuf[8][16];

static void fifo_with_easy_backfill(void **state)
{
	/* One 8-core node; R holds 6 cores until t=100. */
	struct sched_node n[1] = { node(1, 8, 0) };
	struct sched_running run = { { .nguests = 1, .vcpus = 6, .mem = 0 }, { 0 }, 100 };
	struct sched_guest rg[1];
	struct sched_pending q[4] = {
		{ .req = { 1, 8, 0 }, .limit = 50 },   /* head: needs the whole node */
		{ .req = { 1, 2, 0 }, .limit = 500 },  /* would hold 2 cores past t=100 */
		{ .req = { 1, 2, 0 }, .limit = 50 },   /* done by t=50: backfills */
		{ .req = { 1, 16, 0 }, .limit = 10 },  /* can never fit: skipped */
	};
	int64_t head;

	(void)state;
	run.alloc.g = rg;
	assert_int_equal(sched_fit(n, 1, &run.req, &run.alloc), 0);
	sched_apply(n, &run.req, &run.alloc, +1);
	for (int i = 0; i < 4; i++)
		q[i].alloc.g = pbuf[i];
	assert_int_equal(sched_pass(n, 1, &run, 1, q, 4, 0, &head), 1);
	assert_false(q[0].start);
	assert_false(q[1].start);
	assert_true(q[2].start);
	assert_false(q[3].start);
	assert_int_equal(head, 100);
	assert_int_equal(n[0].used_cores[0], 8);
}

static void head_starts_first_when_it_fits(void **state)
{
	struct sched_node n[2] = { node(1, 4, 0), node(1, 4, 0) };
	struct sched_pending q[3] = {
		{ .req = { 2, 4, 0 }, .limit = 50 },
		{ .req = { 1, 1, 0 }, .limit = 50 },
		{ .req = { 1, 1, 0 }, .limit = 50 },
	};
	int64_t head;

	(void)state;
	for (int i = 0; i < 3; i++)
		q[i].alloc.g = pbuf[i];
	assert_int_equal(sched_pass(n, 2, NULL, 0, q, 3, 0, &head), 1);
	assert_true(q[0].start);
	assert_false(q[1].start);
	assert_false(q[2].start);
	/* The next in line becomes the head, reserved for when q[0] ends. */
	assert_int_equal(head, 50);
}

static void backfill_goes_where_the_head_will_not(void **state)
{
	/* A busy until 100, B free, C half busy for long.  The head needs two
	 * whole nodes (A and B at t=100); a long small job must go to C. */
	struct sched_node n[3] = { node(1, 4, 0), node(1, 4, 0), node(1, 4, 0) };
	struct sched_running run[2] = { { { .nguests = 1, .vcpus = 4, .mem = 0 }, { 0 }, 100 }, { { .nguests = 1, .vcpus = 2, .mem = 0 }, { 0 }, 100000 } };
	struct sched_guest rg[2][1];
	struct sched_pending q[2] = {
		{ .req = { 2, 4, 0 }, .limit = 50 },
		{ .req = { 1, 2, 0 }, .limit = 5000 },
	};
	int64_t head;

	(void)state;
	run[0].alloc = (struct sched_alloc){ 1, rg[0] };
	rg[0][0] = (struct sched_guest){ .node = 0, .ntakes = 1, .take = { { 0, 4, 0 } } };
	run[1].alloc = (struct sched_alloc){ 1, rg[1] };
	rg[1][0] = (struct sched_guest){ .node = 2, .ntakes = 1, .take = { { 0, 2, 0 } } };
	sched_apply(n, &run[0].req, &run[0].alloc, +1);
	sched_apply(n, &run[1].req, &run[1].alloc, +1);
	for (int i = 0; i < 2; i++)
		q[i].alloc.g = pbuf[i];
	assert_int_equal(sched_pass(n, 3, run, 2, q, 2, 0, &head), 1);
	assert_false(q[0].start);
	assert_true(q[1].start);
	assert_int_equal(q[1].alloc.g[0].node, 2);
	assert_int_equal(head, 100);
}

static void add_dev(struct sched_node *n, const char *cls, int total)
{
	snprintf(n->dev[n->ndev].cls, sizeof(n->dev[n->ndev].cls), "%s", cls);
	n->dev[n->ndev].total = total;
	n->dev[n->ndev++].used = 0;
}

/* Functions are resources like cores: a guest that asks for N of a class
 * goes only where N of that class are free, and holds them. */
static void devices_decide_placement(void **state)
{
	struct sched_node n[3] = { node(1, 8, 16 * G), node(1, 8, 16 * G), node(1, 8, 16 * G) };
	struct sched_req r = { .nguests = 2, .vcpus = 1, .mem = G, .ndev = 1, .dev = { { "gpu", 2 } } };
	struct sched_alloc a = { .g = gbuf };

	(void)state;
	add_dev(&n[0], "nic", 4);
	add_dev(&n[1], "gpu", 2);
	add_dev(&n[2], "gpu", 4);
	add_dev(&n[2], "nic", 1);
	/* two guests x 2 gpus: node 2 holds both (node 0 has none, node 1 one guest's) */
	assert_int_equal(sched_fit(n, 3, &r, &a), 0);
	assert_int_equal(a.g[0].node, 2);
	assert_int_equal(a.g[1].node, 2);
	sched_apply(n, &r, &a, +1);
	assert_int_equal(n[2].dev[0].used, 4);
	/* node 2's gpus are all held: the next guest with a gpu goes to node 1 */
	r.nguests = 1;
	assert_int_equal(sched_fit(n, 3, &r, &a), 0);
	assert_int_equal(a.g[0].node, 1);
	sched_apply(n, &r, &a, +1);
	/* no gpu is free now: a further one waits, though cores are free */
	assert_int_equal(sched_fit(n, 3, &r, &a), -1);
	assert_true(sched_feasible(n, 3, &r));
	/* a class no node offers, or more per guest than any node has, never fits */
	r.dev[0] = (struct sched_devreq){ "fpga", 1 };
	assert_false(sched_feasible(n, 3, &r));
	r.dev[0] = (struct sched_devreq){ "gpu", 5 };
	assert_false(sched_feasible(n, 3, &r));
	/* two classes at once: only node 2 has both */
	r.ndev = 2;
	r.dev[0] = (struct sched_devreq){ "gpu", 1 };
	r.dev[1] = (struct sched_devreq){ "nic", 1 };
	assert_int_equal(sched_fit(n, 3, &r, &a), -1);
	assert_true(sched_feasible(n, 3, &r));
	/* releasing gives them back */
	a.nguests = 2;
	a.g[0] = (struct sched_guest){ .node = 2, .ntakes = 1, .take = { { 0, 1, G } } };
	a.g[1] = a.g[0];
	r = (struct sched_req){ .nguests = 2, .vcpus = 1, .mem = G, .ndev = 1, .dev = { { "gpu", 2 } } };
	sched_apply(n, &r, &a, -1);
	assert_int_equal(n[2].dev[0].used, 0);
	r = (struct sched_req){ .nguests = 1, .vcpus = 1, .mem = G, .ndev = 2, .dev = { { "gpu", 1 }, { "nic", 1 } } };
	assert_int_equal(sched_fit(n, 3, &r, &a), 0);
	assert_int_equal(a.g[0].node, 2);
}

/* --rdma: only nodes with the fabric; without it, any node. */
static void rdma_jobs_wait_for_fabric_nodes(void **state)
{
	struct sched_node n[2] = { node(1, 4, 16 * G), node(1, 4, 16 * G) };
	struct sched_req r = { .nguests = 2, .vcpus = 4, .mem = G, .rdma = true };
	struct sched_alloc a = { .g = gbuf };

	(void)state;
	n[1].fabric = true;
	assert_int_equal(sched_fit(n, 2, &r, &a), -1);
	assert_false(sched_feasible(n, 2, &r));
	r.nguests = 1;
	assert_int_equal(sched_fit(n, 2, &r, &a), 0);
	assert_int_equal(a.g[0].node, 1);
	r.rdma = false;
	r.nguests = 2;
	assert_int_equal(sched_fit(n, 2, &r, &a), 0);
}

/* A restart's parts: each whole on a node of its own, home first; others
 * only when anywhere; guests land at their own indices. */
static void restart_parts_go_home_or_anywhere(void **state)
{
	struct sched_node n[3] = { node(1, 4, 0), node(1, 4, 0), node(1, 4, 0) };
	int g0[] = { 0, 2 }, g1[] = { 1 };
	struct sched_part part[2] = { { 2, 2, g0 }, { 0, 1, g1 } };
	struct sched_parts pp = { false, 2, part };
	struct sched_req r = { .nguests = 3, .vcpus = 2 };
	struct sched_alloc a = { 0, gbuf };

	(void)state;
	assert_int_equal(sched_fit_parts(n, 3, &r, &pp, &a), 0);
	assert_int_equal(a.nguests, 3);
	assert_int_equal(gbuf[0].node, 2);
	assert_int_equal(gbuf[2].node, 2);
	assert_int_equal(gbuf[1].node, 0);
	/* Home 2 down: without anywhere it waits, with it node 1 takes it
	 * (0 is part 1's), and not with part 1's guest. */
	n[2].up = false;
	assert_int_equal(sched_fit_parts(n, 3, &r, &pp, &a), -1);
	assert_false(sched_feasible_parts(n, 3, &r, &pp));
	pp.anywhere = true;
	assert_true(sched_feasible_parts(n, 3, &r, &pp));
	assert_int_equal(sched_fit_parts(n, 3, &r, &pp, &a), 0);
	assert_int_equal(gbuf[0].node, 1);
	assert_int_equal(gbuf[2].node, 1);
	assert_int_equal(gbuf[1].node, 0);
	/* Two parts never share a node, even where both would fit. */
	n[1].up = false;
	assert_int_equal(sched_fit_parts(n, 3, &r, &pp, &a), -1);
	/* A part whose guest index is out of range is refused. */
	n[1].up = n[2].up = true;
	g1[0] = 3;
	assert_int_equal(sched_fit_parts(n, 3, &r, &pp, &a), -1);
}

/* A restart is in the queue like any job: behind a head that waits, it
 * starts only when it cannot delay the head's reservation. */
static void restart_waits_behind_the_reservation(void **state)
{
	/* Node 0 busy until 100; node 1 free.  The head needs both at t=100. */
	struct sched_node n[2] = { node(1, 4, 0), node(1, 4, 0) };
	struct sched_running run = { { .nguests = 1, .vcpus = 4, .mem = 0 }, { 0 }, 100 };
	struct sched_guest rg[1] = { { .node = 0, .ntakes = 1, .take = { { 0, 4, 0 } } } };
	int g[] = { 0 };
	struct sched_part part = { 1, 1, g };
	struct sched_parts pp = { false, 1, &part };
	struct sched_pending q[2] = {
		{ .req = { 2, 4, 0 }, .limit = 50 },
		{ .req = { 1, 4, 0 }, .limit = 5000, .parts = &pp },  /* saved on node 1, would hold it past 100 */
	};
	int64_t head;

	(void)state;
	run.alloc = (struct sched_alloc){ 1, rg };
	sched_apply(n, &run.req, &run.alloc, +1);
	for (int i = 0; i < 2; i++)
		q[i].alloc.g = pbuf[i];
	assert_int_equal(sched_pass(n, 2, &run, 1, q, 2, 0, &head), 0);
	assert_false(q[0].start);
	assert_false(q[1].start);
	assert_int_equal(head, 100);
	assert_int_equal(n[1].used_cores[0], 0);
	/* Short enough to be done by the head's start: it backfills, home. */
	q[1].limit = 100;
	assert_int_equal(sched_pass(n, 2, &run, 1, q, 2, 0, &head), 1);
	assert_true(q[1].start);
	assert_int_equal(q[1].alloc.g[0].node, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(guests_pack_onto_fewest_nodes),
		cmocka_unit_test(numa_capacity_is_respected),
		cmocka_unit_test(gang_all_or_nothing_and_down_nodes),
		cmocka_unit_test(apply_and_release_balance),
		cmocka_unit_test(fifo_with_easy_backfill),
		cmocka_unit_test(head_starts_first_when_it_fits),
		cmocka_unit_test(backfill_goes_where_the_head_will_not),
		cmocka_unit_test(devices_decide_placement),
		cmocka_unit_test(rdma_jobs_wait_for_fabric_nodes),
		cmocka_unit_test(restart_parts_go_home_or_anywhere),
		cmocka_unit_test(restart_waits_behind_the_reservation),
	};
	return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
