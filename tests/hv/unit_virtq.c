/* Unit tests of the split-virtqueue code (hv/virtq.c) against guest memory
 * without KVM: ring set-up checks, chains as a driver builds them, and
 * every hostile shape the issue names (loops, chains too long, buffers
 * outside RAM, nested or ragged indirect tables, ring indexes running
 * ahead), plus event-index notification and the copy helpers. */
#include "lib/err.h"
#include "lib/log.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "hv/virtq.h"
#include "tests/hv/flat_mem.h"

#define MEM (16u << 20)
#define QS 8
#define DESC 0x1000ull
#define AVAIL 0x2000ull
#define USED 0x3000ull

static struct guest_mem mem;
static struct virtq q;
static uint16_t avail_idx;

static int setup(void **state)
{
	(void)state;
	if (flat_mem(&mem, MEM) < 0)
		return -1;
	avail_idx = 0;
	return vq_setup(&q, &mem, QS, DESC, AVAIL, USED, true, true);
}

static int teardown(void **state)
{
	(void)state;
	vq_reset(&q);
	mem_destroy(&mem);
	return 0;
}

static void desc(uint64_t table, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	struct vring_desc d = { addr, len, flags, next };

	assert_int_equal(gm_write(&mem, table + 16ull * i, &d, sizeof(d)), 0);
}

static void publish(uint16_t head)
{
	uint16_t *a = gm_ptr(&mem, AVAIL, 6 + 2 * QS);

	a[2 + avail_idx % QS] = head;
	a[1] = ++avail_idx;
}

static struct vring_used_elem used_elem(uint16_t i)
{
	struct vring_used_elem e;

	gm_read(&mem, USED + 4 + 8ull * i, &e, sizeof(e));
	return e;
}

static uint16_t used_idx(void)
{
	return ((uint16_t *)gm_ptr(&mem, USED, 4))[1];
}

static void setup_rejects_bad_rings(void **state)
{
	struct virtq t;

	(void)state;
	assert_int_equal(vq_setup(&t, &mem, 6, DESC, AVAIL, USED, false, false), -1);      /* not 2^n */
	assert_int_equal(vq_setup(&t, &mem, 2048, DESC, AVAIL, USED, false, false), -1);   /* too big */
	assert_int_equal(vq_setup(&t, &mem, QS, DESC + 8, AVAIL, USED, false, false), -1); /* misaligned */
	assert_int_equal(vq_setup(&t, &mem, QS, DESC, AVAIL + 1, USED, false, false), -1);
	assert_int_equal(vq_setup(&t, &mem, QS, DESC, AVAIL, USED + 2, false, false), -1);
	assert_int_equal(vq_setup(&t, &mem, QS, MEM - 64, AVAIL, USED, false, false), -1); /* past RAM */
	assert_int_equal(vq_setup(&t, &mem, QS, DESC, AVAIL, 0xfffffffffffffff0ull, false, false), -1);
	assert_false(t.ready);
}

static void pops_a_driver_chain(void **state)
{
	struct vq_chain c = { 0 };

	(void)state;
	desc(DESC, 0, 0x10000, 16, VRING_DESC_F_NEXT, 1);
	desc(DESC, 1, 0x20000, 512, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	desc(DESC, 2, 0x30000, 1, VRING_DESC_F_WRITE, 0);
	publish(0);
	assert_int_equal(vq_pop(&q, &c), 1);
	assert_int_equal(c.head, 0);
	assert_int_equal(c.nout, 1);
	assert_int_equal(c.nin, 2);
	assert_int_equal(c.out_len, 16);
	assert_int_equal(c.in_len, 513);
	assert_ptr_equal(c.iov[1].iov_base, gm_ptr(&mem, 0x20000, 512));
	assert_int_equal(vq_pop(&q, &c), 0);
	vq_push(&q, c.head, 513);
	assert_int_equal(used_idx(), 0);          /* not yet published */
	vq_publish(&q);
	assert_int_equal(used_idx(), 1);
	assert_int_equal(used_elem(0).id, 0);
	assert_int_equal(used_elem(0).len, 513);
}

/* A malformed chain is completed with length 0 and the next one is served. */
static void expect_refused(uint16_t head)
{
	struct vq_chain c = { 0 };
	unsigned long bad = q.bad_chains;

	desc(DESC, 7, 0x10000, 4, 0, 0);
	publish(head);
	publish(7);
	assert_int_equal(vq_pop(&q, &c), 1);
	assert_int_equal(c.head, 7);
	assert_int_equal(q.bad_chains, bad + 1);
	vq_publish(&q);
	assert_int_equal(used_elem((uint16_t)(used_idx() - 1)).id, head);
	assert_int_equal(used_elem((uint16_t)(used_idx() - 1)).len, 0);
	vq_push(&q, c.head, 0);
}

static void refuses_a_loop(void **state)
{
	(void)state;
	desc(DESC, 0, 0x10000, 16, VRING_DESC_F_NEXT, 1);
	desc(DESC, 1, 0x10000, 16, VRING_DESC_F_NEXT, 0);
	expect_refused(0);
	desc(DESC, 0, 0x10000, 16, VRING_DESC_F_NEXT, 0);   /* a self loop */
	expect_refused(0);
}

static void refuses_bad_buffers(void **state)
{
	(void)state;
	desc(DESC, 0, MEM - 8, 16, 0, 0);                     /* runs past RAM */
	expect_refused(0);
	desc(DESC, 0, 0xfffffffffffff000ull, 0x2000, 0, 0);    /* wraps */
	expect_refused(0);
	desc(DESC, 0, 0x10000, 16, VRING_DESC_F_NEXT, 9);      /* next beyond the table */
	expect_refused(0);
	desc(DESC, 0, 0x10000, 16, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	desc(DESC, 1, 0x10000, 16, 0, 0);                      /* readable after writable */
	expect_refused(0);
}

static void refuses_bad_indirect_tables(void **state)
{
	uint64_t t = 0x40000;

	(void)state;
	desc(t, 0, 0x10000, 16, VRING_DESC_F_NEXT, 1);
	desc(t, 1, 0x20000, 16, VRING_DESC_F_WRITE, 0);
	desc(DESC, 0, t, 32, VRING_DESC_F_INDIRECT, 0);
	publish(0);
	{
		struct vq_chain c = { 0 };

		assert_int_equal(vq_pop(&q, &c), 1);
		assert_int_equal(c.nout + c.nin, 2);
		vq_push(&q, c.head, 0);
	}
	desc(t, 1, t, 32, VRING_DESC_F_INDIRECT, 0);           /* nested */
	expect_refused(0);
	desc(DESC, 0, t, 24, VRING_DESC_F_INDIRECT, 0);        /* not whole descriptors */
	expect_refused(0);
	desc(DESC, 0, t, 32, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, 1);
	expect_refused(0);
	desc(DESC, 0, MEM - 16, 32, VRING_DESC_F_INDIRECT, 0); /* table past RAM */
	expect_refused(0);
	desc(t, 0, 0x10000, 16, VRING_DESC_F_NEXT, 0);         /* a loop inside the table */
	desc(DESC, 0, t, 16, VRING_DESC_F_INDIRECT, 0);
	expect_refused(0);
	q.indirect = false;                                    /* not negotiated */
	desc(t, 0, 0x10000, 16, 0, 0);
	expect_refused(0);
}

static void refuses_a_huge_indirect_chain(void **state)
{
	uint64_t t = 0x100000;

	(void)state;
	for (uint16_t i = 0; i < VQ_MAX_CHAIN + 1; i++)
		desc(t, i, 0x10000, 1, VRING_DESC_F_NEXT, (uint16_t)(i + 1));
	desc(DESC, 0, t, 16 * (VQ_MAX_CHAIN + 1), VRING_DESC_F_INDIRECT, 0);
	expect_refused(0);
}

static void a_runaway_index_breaks_the_ring(void **state)
{
	uint16_t *a = gm_ptr(&mem, AVAIL, 6 + 2 * QS);
	struct vq_chain c = { 0 };

	(void)state;
	a[1] = QS + 1;                         /* more than the ring holds */
	assert_int_equal(vq_pop(&q, &c), -1);
	assert_true(q.broken);
	assert_int_equal(vq_pop(&q, &c), -1);  /* and stays so until reset */
}

static void a_head_beyond_the_ring_breaks_it(void **state)
{
	struct vq_chain c = { 0 };

	(void)state;
	publish(QS);
	assert_int_equal(vq_pop(&q, &c), -1);
	assert_true(q.broken);
}

static void event_index_decides_interrupts(void **state)
{
	uint16_t *a = gm_ptr(&mem, AVAIL, 6 + 2 * QS);
	struct vq_chain c = { 0 };

	(void)state;
	assert_false(vq_should_notify(&q));    /* nothing completed */
	desc(DESC, 0, 0x10000, 16, 0, 0);
	for (int i = 0; i < 3; i++)
		publish(0);
	a[2 + QS] = 1;                         /* used_event: interrupt once used passes 1 */
	assert_int_equal(vq_pop(&q, &c), 1);
	vq_push(&q, c.head, 0);
	assert_false(vq_should_notify(&q));    /* used 1: not past 1 yet */
	assert_int_equal(vq_pop(&q, &c), 1);
	vq_push(&q, c.head, 0);
	assert_true(vq_should_notify(&q));     /* used 2: passed */
	assert_int_equal(vq_pop(&q, &c), 1);
	vq_push(&q, c.head, 0);
	assert_false(vq_should_notify(&q));    /* used_event still 1 */
}

static void no_interrupt_flag_without_event_index(void **state)
{
	uint16_t *a = gm_ptr(&mem, AVAIL, 6 + 2 * QS);
	struct vq_chain c = { 0 };

	(void)state;
	q.event_idx = false;
	desc(DESC, 0, 0x10000, 16, 0, 0);
	publish(0);
	publish(0);
	a[0] = VRING_AVAIL_F_NO_INTERRUPT;
	assert_int_equal(vq_pop(&q, &c), 1);
	vq_push(&q, c.head, 0);
	assert_false(vq_should_notify(&q));
	a[0] = 0;
	assert_int_equal(vq_pop(&q, &c), 1);
	vq_push(&q, c.head, 0);
	assert_true(vq_should_notify(&q));
}

static void kicks_are_asked_for_at_the_right_index(void **state)
{
	uint16_t *u = gm_ptr(&mem, USED, 6 + 8 * QS);
	struct vq_chain c = { 0 };

	(void)state;
	desc(DESC, 0, 0x10000, 16, 0, 0);
	publish(0);
	publish(0);
	assert_int_equal(vq_pop(&q, &c), 1);
	assert_true(vq_enable_kicks(&q));      /* one more is waiting */
	assert_int_equal(u[2 + 4 * QS], 1);     /* avail_event = what we consumed */
	assert_false(vq_kick_on_more(&q));    /* nothing new since */
	assert_int_equal(u[2 + 4 * QS], 2);     /* ... or the next one to come */
	vq_unpop(&q, 1);
	assert_int_equal(vq_pop(&q, &c), 1);
	assert_int_equal(vq_pop(&q, &c), 1);
	assert_false(vq_enable_kicks(&q));
	assert_false(vq_full(&q));
}

static void copies_across_buffers(void **state)
{
	struct vq_chain c = { 0 };
	struct iovec s[4];
	char out[16] = { 0 };

	(void)state;
	desc(DESC, 0, 0x10000, 3, VRING_DESC_F_NEXT, 1);
	desc(DESC, 1, 0x10010, 5, VRING_DESC_F_NEXT, 2);
	desc(DESC, 2, 0x20000, 4, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 3);
	desc(DESC, 3, 0x20010, 4, VRING_DESC_F_WRITE, 0);
	gm_write(&mem, 0x10000, "abc", 3);
	gm_write(&mem, 0x10010, "defgh", 5);
	publish(0);
	assert_int_equal(vq_pop(&q, &c), 1);
	assert_int_equal(vq_copy_from(&c, 2, out, 100), 6);
	assert_string_equal(out, "cdefgh");
	assert_int_equal(vq_copy_to(&c, 3, "WXYZ", 4), 4);
	assert_memory_equal(gm_ptr(&mem, 0x20003, 1), "W", 1);
	assert_memory_equal(gm_ptr(&mem, 0x20010, 3), "XYZ", 3);
	assert_int_equal(vq_copy_to(&c, 6, "0123", 4), 2);     /* only 8 writable bytes */
	assert_int_equal(vq_iov_slice(&c, false, 1, 4, s, 4), 2);
	assert_int_equal(s[0].iov_len, 2);
	assert_int_equal(s[1].iov_len, 2);
}

static void a_chain_longer_than_the_caller_allows(void **state)
{
	struct iovec few[2];
	struct vq_chain c = { .iov = few, .max = 2 };

	(void)state;
	desc(DESC, 0, 0x10000, 1, VRING_DESC_F_NEXT, 1);
	desc(DESC, 1, 0x10000, 1, VRING_DESC_F_NEXT, 2);
	desc(DESC, 2, 0x10000, 1, 0, 0);
	publish(0);
	assert_int_equal(vq_pop(&q, &c), 0);   /* refused (length 0) and nothing else */
	assert_int_equal(q.bad_chains, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(setup_rejects_bad_rings, setup, teardown),
		cmocka_unit_test_setup_teardown(pops_a_driver_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_a_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_bad_buffers, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_bad_indirect_tables, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_a_huge_indirect_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(a_runaway_index_breaks_the_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(a_head_beyond_the_ring_breaks_it, setup, teardown),
		cmocka_unit_test_setup_teardown(event_index_decides_interrupts, setup, teardown),
		cmocka_unit_test_setup_teardown(no_interrupt_flag_without_event_index, setup, teardown),
		cmocka_unit_test_setup_teardown(kicks_are_asked_for_at_the_right_index, setup, teardown),
		cmocka_unit_test_setup_teardown(copies_across_buffers, setup, teardown),
		cmocka_unit_test_setup_teardown(a_chain_longer_than_the_caller_allows, setup, teardown),
	};

	vlog_init("unit-hv-virtq");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
