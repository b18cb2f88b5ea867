/*
 * vmshm region and ring, without Open MPI: formatting and validating the
 * region, slots, records through many wraps, a full ring, and the damage
 * a hostile guest can do (which must end in an error, never a bad read:
 * the rings here are malloc'ed to their exact size, under ASan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/vmshm/vmshm_region.h"
#include "lib/vmshm/vmshm_ring.h"

/* ------------------------------------------------------------- region */

static void *zeroed(size_t n)
{
	void *p = calloc(1, n);
	assert_non_null(p);
	return p;
}

static void plan_fits_slots_and_shrinks_rings_for_the_platform(void **state)
{
	struct vmshm_geom g;
	char err[256];

	(void)state;
	assert_int_equal(vmshm_geom_plan(vmshm_region_size_for(4, 1 << 20), 1 << 20, 0, &g,
					 err, sizeof(err)), 0);
	assert_int_equal(g.nslots, 4);
	assert_int_equal(g.ring_size, 1 << 20);
	assert_int_equal(g.ring_shift, 20);
	/* 8 ranks asked for in room for 4 with 1 MiB rings: 4 times as many
	 * rings, each with its 4 KiB control page: 128 KiB rings. */
	assert_int_equal(vmshm_geom_plan(vmshm_region_size_for(4, 1 << 20), 1 << 20, 8, &g,
					 err, sizeof(err)), 0);
	assert_int_equal(g.nslots, 8);
	assert_int_equal(g.ring_size, 128 << 10);
	assert_int_equal(vmshm_geom_plan(1 << 20, 1 << 20, 0, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too small"));
	assert_int_equal(vmshm_geom_plan(64 << 20, 3000, 0, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "power of two"));
	assert_int_equal(vmshm_geom_plan(64 << 20, 1 << 20, 300, &g, err, sizeof(err)), -1);
	assert_int_equal(vmshm_geom_plan(64 << 20, 1 << 20, 200, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too small for 200 slots"));
}

#define RSIZE (vmshm_region_size_for(4, 4096))

static void attach_formats_once_then_validates(void **state)
{
	struct vmshm_attach_opts o = { .ring_size = 4096, .timeout_ms = 100 };
	struct vmshm_geom g1, g2;
	char err[256];
	void *base = zeroed(RSIZE);

	(void)state;
	assert_int_equal(vmshm_region_attach(base, RSIZE, &o, &g1, err, sizeof(err)), 0);
	assert_int_equal(g1.nslots, 4);
	/* A second attacher with other wishes adopts the region as it is. */
	o.ring_size = 1 << 20;
	assert_int_equal(vmshm_region_attach(base, RSIZE, &o, &g2, err, sizeof(err)), 0);
	assert_memory_equal(&g1, &g2, sizeof(g1));
	/* The uuid is random: two regions never look like one. */
	void *other = zeroed(RSIZE);
	o.ring_size = 4096;
	assert_int_equal(vmshm_region_attach(other, RSIZE, &o, &g2, err, sizeof(err)), 0);
	assert_memory_not_equal(g1.uuid, g2.uuid, sizeof(g1.uuid));
	free(other);
	free(base);
}

static void attach_rejects_every_bad_header_field(void **state)
{
	struct vmshm_attach_opts o = { .ring_size = 4096, .timeout_ms = 100 };
	struct vmshm_geom g;
	char err[256];
	void *base = zeroed(RSIZE);
	struct vmshm_region_hdr *h = base, good;
	static const struct {
		size_t off;
		uint64_t val;
		int width;
		const char *msg;
	} bad[] = {
		{ offsetof(struct vmshm_region_hdr, magic), 0x1234, 8, "not a vmshm region" },
		{ offsetof(struct vmshm_region_hdr, version), 2, 4, "layout version" },
		{ offsetof(struct vmshm_region_hdr, hdr_size), 8192, 4, "header size" },
		{ offsetof(struct vmshm_region_hdr, region_size), 1ull << 40, 8, "are mapped" },
		{ offsetof(struct vmshm_region_hdr, nslots), 1, 4, "slot count" },
		{ offsetof(struct vmshm_region_hdr, nslots), 5, 4, "need" },
		{ offsetof(struct vmshm_region_hdr, nslots), 100000, 4, "slot count" },
		{ offsetof(struct vmshm_region_hdr, ring_size), 6000, 4, "power of two" },
		{ offsetof(struct vmshm_region_hdr, ring_size), 1024, 4, "power of two" },
		{ offsetof(struct vmshm_region_hdr, ring_size), 1u << 31, 4, "power of two" },
		{ offsetof(struct vmshm_region_hdr, slots_off), 0, 8, "table offsets" },
		{ offsetof(struct vmshm_region_hdr, rings_off), 1ull << 50, 8, "table offsets" },
		{ offsetof(struct vmshm_region_hdr, ring_stride), 4096, 8, "ring stride" },
	};

	(void)state;
	assert_int_equal(vmshm_region_attach(base, RSIZE, &o, &g, err, sizeof(err)), 0);
	good = *h;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		*h = good;
		memcpy((uint8_t *)h + bad[i].off, &bad[i].val, (size_t)bad[i].width);
		err[0] = 0;
		assert_int_equal(vmshm_region_attach(base, RSIZE, &o, &g, err, sizeof(err)), -1);
		if (!strstr(err, bad[i].msg))
			fail_msg("case %zu: '%s' does not mention '%s'", i, err, bad[i].msg);
	}
	/* Too small to hold even the tables. */
	assert_int_equal(vmshm_region_attach(base, 4096, &o, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "smaller than its tables"));
	free(base);
}

static void attach_gives_up_on_a_formatter_that_died(void **state)
{
	struct vmshm_attach_opts o = { .ring_size = 4096, .timeout_ms = 50 };
	struct vmshm_geom g;
	char err[256];
	void *base = zeroed(RSIZE);

	(void)state;
	((struct vmshm_region_hdr *)base)->magic = VMSHM_FORMATTING;
	assert_int_equal(vmshm_region_attach(base, RSIZE, &o, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "still being formatted"));
	free(base);
}

static void slots_are_unique_released_and_reset(void **state)
{
	struct vmshm_attach_opts o = { .ring_size = 4096, .timeout_ms = 100 };
	struct vmshm_geom g;
	char err[256];
	void *base = zeroed(RSIZE);
	uint32_t s[5], e[5];

	(void)state;
	assert_int_equal(vmshm_region_attach(base, RSIZE, &o, &g, err, sizeof(err)), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(vmshm_slot_claim(base, &g, 100 + (uint64_t)i, &s[i], &e[i]), 0);
		assert_int_equal(e[i], 1);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(s[i], s[j]);
	}
	assert_int_equal(vmshm_slot_claim(base, &g, 200, &s[4], &e[4]), -1);
	assert_int_equal(vmshm_slot_claim(base, &g, 0, &s[4], &e[4]), -1);

	/* A producer announces itself and leaves a tail behind. */
	vmshm_slot_mark_active(base, s[1], s[0]);
	assert_int_equal(vmshm_slot_active_word(base, &g, s[1], 0), 1ull << s[0]);
	assert_int_equal(vmshm_slot_active_word(base, &g, s[1], 1), 0);
	*(uint64_t *)vmshm_ring_ctrl(base, &g, s[0], s[1]) = 12345;

	/* Only the holder gives a slot back; the next claimer starts clean. */
	vmshm_slot_release(base, &g, s[1], 999);
	assert_int_equal(vmshm_slot_claim(base, &g, 300, &s[4], &e[4]), -1);
	vmshm_slot_release(base, &g, s[1], 101);
	assert_int_equal(vmshm_slot_claim(base, &g, 300, &s[4], &e[4]), 0);
	assert_int_equal(s[4], s[1]);
	assert_int_equal(e[4], 2);
	assert_int_equal(vmshm_slot_active_word(base, &g, s[4], 0), 0);
	assert_int_equal(*(uint64_t *)vmshm_ring_ctrl(base, &g, s[0], s[4]), 0);
	free(base);
}

static void active_words_ignore_bits_beyond_the_slots(void **state)
{
	struct vmshm_geom g = { .nslots = 70 };
	void *base = zeroed(VMSHM_RINGS_OFF);

	(void)state;
	vmshm_slot_at(base, 0)->active[1] = ~0ull;
	vmshm_slot_at(base, 0)->active[2] = ~0ull;
	assert_int_equal(vmshm_slot_active_word(base, &g, 0, 1), (1ull << 6) - 1);
	assert_int_equal(vmshm_slot_active_word(base, &g, 0, 2), 0);
	assert_int_equal(vmshm_slot_active_word_mask(&g, 0), ~0ull);
	free(base);
}

/* --------------------------------------------------------------- ring */

struct ring {
	uint64_t tail;
	uint8_t *data;
	uint32_t size, shift;
	struct vmshm_prod p;
	struct vmshm_cons c;
};

static void ring_open(struct ring *r, uint32_t size, uint64_t key)
{
	memset(r, 0, sizeof(*r));
	r->size = size;
	while ((1u << r->shift) < size)
		r->shift++;
	r->data = malloc(size);
	assert_non_null(r->data);
	/* Leftovers of an earlier life must never read as records. */
	memset(r->data, 0xa5, size);
	vmshm_ring_reset(&r->tail);
	vmshm_prod_init(&r->p, &r->tail, r->data, size, r->shift, key);
	vmshm_cons_init(&r->c, &r->tail, r->data, size, r->shift, key);
}

static void fillpat(uint8_t *b, uint32_t n, uint64_t seq)
{
	for (uint32_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 7 + seq * 13);
}

static void records_arrive_in_order_through_many_wraps(void **state)
{
	struct ring r;
	char err[256];
	uint64_t sent = 0, got = 0;
	unsigned rnd = 1;

	(void)state;
	ring_open(&r, 4096, 0x1234);
	while (got < 20000) {
		/* Produce until full, consume a random share: wraps at every offset. */
		for (;;) {
			uint32_t len = (sent * 37) % (vmshm_ring_max_payload(4096) + 1);
			void *dst;
			int rc = vmshm_prod_reserve(&r.p, len, &dst);
			if (rc == -EAGAIN)
				break;
			assert_int_equal(rc, 0);
			fillpat(dst, len, sent);
			vmshm_prod_commit(&r.p, len, (uint8_t)sent);
			sent++;
		}
		rnd = rnd * 1103515245 + 12345;
		unsigned take = 1 + (rnd >> 16) % 8;
		for (unsigned k = 0; k < take; k++) {
			struct vmshm_msg m;
			int rc = vmshm_cons_peek(&r.c, &m, err, sizeof(err));
			if (rc == 0)
				break;
			assert_int_equal(rc, 1);
			assert_int_equal(m.len, (got * 37) % (vmshm_ring_max_payload(4096) + 1));
			assert_int_equal(m.tag, (uint8_t)got);
			uint8_t want[4096];
			fillpat(want, m.len, got);
			assert_memory_equal(m.payload, want, m.len);
			vmshm_cons_pop(&r.c);
			got++;
		}
		vmshm_cons_publish(&r.c);
	}
	assert_true(r.c.tail > 100ull * 4096);
	free(r.data);
}

static void full_ring_waits_and_oversize_is_refused(void **state)
{
	struct ring r;
	char err[256];
	void *dst;
	struct vmshm_msg m;
	int n = 0;

	(void)state;
	ring_open(&r, 4096, 7);
	assert_int_equal(vmshm_prod_reserve(&r.p, vmshm_ring_max_payload(4096) + 1, &dst),
			 -EMSGSIZE);
	while (vmshm_prod_reserve(&r.p, 100, &dst) == 0) {
		vmshm_prod_commit(&r.p, 100, 1);
		n++;
	}
	assert_int_equal(n, 4096 / 128);
	/* Consumed but not published: the producer still sees a full ring. */
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	vmshm_cons_pop(&r.c);
	assert_int_equal(vmshm_prod_reserve(&r.p, 100, &dst), -EAGAIN);
	vmshm_cons_publish(&r.c);
	assert_int_equal(vmshm_prod_reserve(&r.p, 100, &dst), 0);
	free(r.data);
}

static void a_consumer_that_keeps_up_stays_in_the_hot_window(void **state)
{
	struct ring r;
	char err[256];
	struct vmshm_msg m;
	void *dst;
	uint64_t maxpos = 0;

	(void)state;
	ring_open(&r, 1 << 20, 42);
	for (int i = 0; i < 5000; i++) {
		assert_int_equal(vmshm_prod_reserve(&r.p, 100, &dst), 0);
		fillpat(dst, 100, (uint64_t)i);
		vmshm_prod_commit(&r.p, 100, 1);
		if ((r.p.res & ((1 << 20) - 1)) > maxpos)
			maxpos = r.p.res & ((1 << 20) - 1);
		assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
		uint8_t want[100];
		fillpat(want, 100, (uint64_t)i);
		assert_memory_equal(m.payload, want, 100);
		vmshm_cons_pop(&r.c);
		vmshm_cons_publish(&r.c);
	}
	assert_true(maxpos < VMSHM_HOT_WINDOW + 128);
	assert_true(r.c.tail > 4ull << 20);   /* it did go round, by rewinding */
	/* Large records (a rendezvous fragment among small ones) keep their
	 * lap from rewinding: they would rewrite lines just read. */
	maxpos = 0;
	for (int i = 0; i < 200; i++) {
		uint32_t len = i % 2 ? 100 : 16000;
		assert_int_equal(vmshm_prod_reserve(&r.p, len, &dst), 0);
		vmshm_prod_commit(&r.p, len, 1);
		if ((r.p.res & ((1 << 20) - 1)) > maxpos)
			maxpos = r.p.res & ((1 << 20) - 1);
		assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
		assert_int_equal(m.len, len);
		vmshm_cons_pop(&r.c);
		vmshm_cons_publish(&r.c);
	}
	assert_true(maxpos > (1u << 20) / 2);
	/* A consumer that falls behind gets the whole ring. */
	int n = 0;
	while (vmshm_prod_reserve(&r.p, 100, &dst) == 0) {
		vmshm_prod_commit(&r.p, 100, 1);
		n++;
	}
	assert_true(n > (1 << 20) / 128 - 2);
	free(r.data);
}

/* One record of len bytes; tracks the furthest offset written. */
static void put_rec(struct ring *r, uint32_t len, uint64_t *maxpos)
{
	void *dst;

	assert_int_equal(vmshm_prod_reserve(&r->p, len, &dst), 0);
	vmshm_prod_commit(&r->p, len, 1);
	if ((r->p.res & (r->size - 1)) > *maxpos)
		*maxpos = r->p.res & (r->size - 1);
}

/* Takes every record there is and publishes the tail. */
static void take_all(struct ring *r)
{
	char err[256];
	struct vmshm_msg m;

	while (vmshm_cons_peek(&r->c, &m, err, sizeof(err)) == 1) {
		vmshm_cons_pop(&r->c);
		vmshm_cons_publish(&r->c);
	}
}

/* Sendrecv's pattern: both sides send before they receive, so the consumer
 * is often a record behind when the producer looks; and a look that finds
 * it further behind is repeated a little later, not a lap later. */
static void a_consumer_a_record_behind_stays_in_the_hot_window(void **state)
{
	struct ring r;
	char err[256];
	struct vmshm_msg m;
	uint64_t maxpos = 0;

	(void)state;
	ring_open(&r, 1 << 20, 7);
	put_rec(&r, 1, &maxpos);
	for (int i = 1; i < 5000; i++) {
		put_rec(&r, 1, &maxpos);
		/* Take the record before the one just sent. */
		assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
		vmshm_cons_pop(&r.c);
		vmshm_cons_publish(&r.c);
	}
	assert_true(maxpos < VMSHM_HOT_WINDOW + 128);
	assert_true(r.c.tail > 4ull * VMSHM_HOT_WINDOW);

	/* 2 KiB behind at the first look past the window: no rewind there;
	 * caught up, the next look 4 KiB on rewinds. */
	free(r.data);
	ring_open(&r, 1 << 20, 8);
	maxpos = 0;
	for (uint32_t i = 0; i < 4 * VMSHM_HOT_WINDOW / VMSHM_REC_ALIGN; i++) {
		put_rec(&r, 1, &maxpos);
		if (r.p.head < VMSHM_HOT_WINDOW - 2048 || r.p.head > VMSHM_HOT_WINDOW + 4096)
			take_all(&r);
	}
	assert_true(maxpos >= VMSHM_HOT_WINDOW + VMSHM_HOT_RETRY);
	assert_true(maxpos < VMSHM_HOT_WINDOW + 2 * VMSHM_HOT_RETRY + 128);
	assert_true(r.c.tail > (1u << 20));   /* it went round, by rewinding */
	free(r.data);
}

static void wrong_key_or_stale_lap_is_not_a_record(void **state)
{
	struct ring r, other;
	char err[256];
	struct vmshm_msg m;
	void *dst;

	(void)state;
	ring_open(&r, 4096, 1);
	ring_open(&other, 4096, 2);
	/* A record stamped for another consumer key. */
	assert_int_equal(vmshm_prod_reserve(&other.p, 10, &dst), 0);
	vmshm_prod_commit(&other.p, 10, 3);
	memcpy(r.data, other.data, 4096);
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 0);
	/* A whole lap later, yesterday's record at offset 0 is not today's. */
	assert_int_equal(vmshm_prod_reserve(&r.p, 10, &dst), 0);
	vmshm_prod_commit(&r.p, 10, 3);
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	vmshm_cons_pop(&r.c);
	r.c.tail = 4096;   /* as if the consumer were one lap further */
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 0);
	free(r.data);
	free(other.data);
}

/* Overwrites the header the consumer will read next, keeping its stamp. */
static struct vmshm_rec *next_rec(struct ring *r)
{
	return (struct vmshm_rec *)(r->data + (r->c.tail & (r->size - 1)));
}

static void damaged_records_are_errors_not_reads(void **state)
{
	struct ring r;
	char err[256];
	struct vmshm_msg m;
	void *dst;

	(void)state;
	ring_open(&r, 4096, 99);
	/* (more than a short record holds: the 16-byte header) */
	assert_int_equal(vmshm_prod_reserve(&r.p, VMSHM_SHORT_MAX + 1, &dst), 0);
	vmshm_prod_commit(&r.p, VMSHM_SHORT_MAX + 1, 3);
	next_rec(&r)->len = 4096 - 16 + 1;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "past the end"));
	next_rec(&r)->len = 0xffffffffu;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	next_rec(&r)->len = 10;
	next_rec(&r)->type = 0x77;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "unknown type 0x77"));
	/* A pad that does not end where the ring ends. */
	next_rec(&r)->type = VMSHM_REC_PAD;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "pad record"));
	/* A record that fits exactly at the end is fine: the bound is exact. */
	next_rec(&r)->type = VMSHM_REC_DATA;
	next_rec(&r)->len = 4096 - 16;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	assert_int_equal(m.len, 4096 - 16);
	free(r.data);
}

/* A payload of up to VMSHM_SHORT_MAX bytes (ob1's 14-byte header and 8
 * bytes) takes 32 bytes, from offset 8, with its length and tag at the end;
 * one byte more takes the 16-byte header and a line.  A long reservation
 * committed short stays long. */
static void short_records_hold_ob1s_header_and_8_bytes(void **state)
{
	struct ring r;
	char err[256];
	struct vmshm_msg m;
	void *dst;

	(void)state;
	assert_int_equal(VMSHM_SHORT_MAX, 14 + 8);
	ring_open(&r, 4096, 77);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(vmshm_prod_reserve(&r.p, VMSHM_SHORT_MAX, &dst), 0);
		assert_ptr_equal(dst, r.data + i * VMSHM_REC_ALIGN + 8);
		memset(dst, 0xa0 + i, VMSHM_SHORT_MAX);
		vmshm_prod_commit(&r.p, VMSHM_SHORT_MAX - i, (uint8_t)(7 + i));
	}
	assert_int_equal(r.p.head, VMSHM_LINE);
	assert_int_equal(vmshm_prod_reserve(&r.p, VMSHM_SHORT_MAX + 1, &dst), 0);
	assert_ptr_equal(dst, r.data + VMSHM_LINE + VMSHM_REC_HDR);
	memset(dst, 0xb0, VMSHM_SHORT_MAX + 1);
	vmshm_prod_commit(&r.p, VMSHM_SHORT_MAX + 1, 9);
	assert_int_equal(r.p.head, 2 * VMSHM_LINE);
	assert_int_equal(vmshm_prod_reserve(&r.p, 100, &dst), 0);
	vmshm_prod_commit(&r.p, 5, 10);
	assert_int_equal(r.p.head, 2 * VMSHM_LINE + VMSHM_REC_ALIGN);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
		assert_int_equal(m.len, VMSHM_SHORT_MAX - i);
		assert_int_equal(m.tag, 7 + i);
		assert_ptr_equal(m.payload, r.data + i * VMSHM_REC_ALIGN + 8);
		assert_int_equal(((const uint8_t *)m.payload)[m.len - 1], 0xa0 + i);
		vmshm_cons_pop(&r.c);
	}
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	assert_int_equal(m.len, VMSHM_SHORT_MAX + 1);
	assert_int_equal(m.tag, 9);
	assert_int_equal(((const uint8_t *)m.payload)[VMSHM_SHORT_MAX], 0xb0);
	vmshm_cons_pop(&r.c);
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	assert_int_equal(m.len, 5);
	assert_int_equal(m.tag, 10);
	vmshm_cons_pop(&r.c);
	assert_int_equal(r.c.tail, r.p.head);
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 0);

	/* A short record that claims more than it holds: an error, not a read. */
	assert_int_equal(vmshm_prod_reserve(&r.p, 3, &dst), 0);
	vmshm_prod_commit(&r.p, 3, 1);
	((uint8_t *)next_rec(&r))[VMSHM_REC_ALIGN - 2] = VMSHM_SHORT_MAX + 1;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "short record at offset 160 claims 23 bytes"));
	/* Its stamp with the other form's bit, or a lap old: not a record. */
	((uint8_t *)next_rec(&r))[VMSHM_REC_ALIGN - 2] = 3;
	next_rec(&r)->stamp ^= VMSHM_SHORT_BIT;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	next_rec(&r)->stamp = vmshm_stamp(77, r.c.tail + 4096, 12) ^ VMSHM_SHORT_BIT;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 0);
	next_rec(&r)->stamp = vmshm_stamp(77, r.c.tail, 12) ^ VMSHM_SHORT_BIT;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	assert_int_equal(m.len, 3);
	free(r.data);
}

/* Two 1-byte messages in one cache line (one line for the consumer to
 * fetch, as with vader's fast boxes); a record longer than 32 bytes starts
 * on a line of its own, after a 32-byte pad that the consumer steps over.
 * A 32-byte pad anywhere but mid-line is an error. */
static void small_records_share_a_line_large_ones_start_on_one(void **state)
{
	struct ring r;
	char err[256];
	struct vmshm_msg m;
	void *dst;

	(void)state;
	ring_open(&r, 4096, 42);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(vmshm_prod_reserve(&r.p, 1, &dst), 0);
		vmshm_prod_commit(&r.p, 1, 1);
	}
	assert_int_equal(r.p.head, 3 * VMSHM_REC_ALIGN);
	assert_int_equal(vmshm_prod_reserve(&r.p, 100, &dst), 0);
	assert_int_equal(((uintptr_t)dst - VMSHM_REC_HDR - (uintptr_t)r.data) % VMSHM_LINE, 0);
	memset(dst, 0x5a, 100);
	vmshm_prod_commit(&r.p, 100, 2);
	assert_int_equal(r.p.res, 2 * VMSHM_LINE);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
		assert_int_equal(m.len, 1);
		vmshm_cons_pop(&r.c);
	}
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	assert_int_equal(m.len, 100);
	assert_int_equal(m.tag, 2);
	assert_int_equal(((const uint8_t *)m.payload)[99], 0x5a);
	vmshm_cons_pop(&r.c);
	assert_int_equal(r.c.tail, r.p.head);
	free(r.data);

	/* A line-sized pad at a line's start: hostile, refused. */
	ring_open(&r, 4096, 43);
	assert_int_equal(vmshm_prod_reserve(&r.p, 40, &dst), 0);
	vmshm_prod_commit(&r.p, 40, 1);
	next_rec(&r)->type = VMSHM_REC_PAD;
	next_rec(&r)->len = VMSHM_REC_ALIGN - VMSHM_REC_HDR;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "pad record at offset 0"));
	free(r.data);
}

static void impossible_tail_is_an_error_for_the_producer(void **state)
{
	struct ring r;
	void *dst;

	(void)state;
	ring_open(&r, 4096, 5);
	while (vmshm_prod_reserve(&r.p, 1000, &dst) == 0)
		vmshm_prod_commit(&r.p, 1000, 1);
	r.tail = r.p.head + 64;                 /* ahead of the producer */
	assert_int_equal(vmshm_prod_reserve(&r.p, 1000, &dst), -EPROTO);
	r.tail = 0;                             /* fine: nothing consumed */
	assert_int_equal(vmshm_prod_reserve(&r.p, 1000, &dst), -EAGAIN);
	r.tail = r.p.head;                      /* all consumed */
	assert_int_equal(vmshm_prod_reserve(&r.p, 1000, &dst), 0);
	vmshm_prod_commit(&r.p, 1000, 1);
	/* Went backwards from what the producer saw last. */
	r.p.tail_seen = r.p.head - 4096 + 64;
	r.tail = r.p.tail_seen - 64;
	assert_int_equal(vmshm_prod_reserve(&r.p, 1000, &dst), -EPROTO);
	free(r.data);
}

/* Large payloads land at the page offset asked for, through wraps, and
 * arrive whole; small ones, and ones too large to leave room for a page of
 * skew, are placed as before. */
static void large_payloads_land_at_their_source_page_offset(void **state)
{
	struct ring r;
	char err[256];
	struct vmshm_msg m;
	void *dst;
	uint64_t sent = 0, got = 0;

	(void)state;
	ring_open(&r, 64 << 10, 77);
	while (got < 300) {
		for (;;) {
			uint32_t len = VMSHM_MATCH_MIN + (uint32_t)(sent * 997) % 12000;
			uint32_t off = (uint32_t)(sent * 4093) % VMSHM_PAGE;
			int rc = vmshm_prod_reserve_at(&r.p, len, off, &dst);
			if (rc == -EAGAIN)
				break;
			assert_int_equal(rc, 0);
			assert_int_equal((uintptr_t)dst % VMSHM_PAGE, off);
			assert_true((uint8_t *)dst + len <= r.data + r.size);
			fillpat(dst, len, sent);
			vmshm_prod_commit(&r.p, len, (uint8_t)sent);
			sent++;
		}
		while (vmshm_cons_peek(&r.c, &m, err, sizeof(err)) == 1) {
			uint8_t want[VMSHM_MATCH_MIN + 12000];
			assert_int_equal(m.len, VMSHM_MATCH_MIN + (uint32_t)(got * 997) % 12000);
			assert_int_equal((uintptr_t)m.payload % VMSHM_PAGE, (got * 4093) % VMSHM_PAGE);
			fillpat(want, m.len, got);
			assert_memory_equal(m.payload, want, m.len);
			vmshm_cons_pop(&r.c);
			got++;
		}
		vmshm_cons_publish(&r.c);
	}
	assert_true(r.c.tail > 20ull * r.size);
	/* What the BTL asks for: half a page from the source, past headers. */
	assert_int_equal(vmshm_page_off_for((void *)0x7f0000001010, 16), 2048);
	assert_int_equal(vmshm_page_off_for((void *)0x7f0000001810, 16), 0);
	assert_int_equal(vmshm_page_off_for((void *)0x7f0000000008, 40), 4096 - 32 - 2048);
	/* Below the threshold: on the line, as without a page offset. */
	assert_int_equal(vmshm_prod_reserve_at(&r.p, VMSHM_MATCH_MIN - 1, 5, &dst), 0);
	assert_int_equal(((uintptr_t)dst - VMSHM_REC_HDR - (uintptr_t)r.data) % VMSHM_LINE, 0);
	free(r.data);
	/* 16 KiB ring: 8 KiB payloads at most, no room for a page of skew. */
	ring_open(&r, 16 << 10, 78);
	uint32_t big = vmshm_ring_max_payload(16 << 10);
	assert_int_equal(vmshm_prod_reserve_at(&r.p, big, 5, &dst), 0);
	assert_ptr_equal(dst, r.data + VMSHM_REC_HDR);
	free(r.data);
}

/* A record counts as large for the hot window by its bytes, not its skew:
 * 7000-byte records 3000 bytes after their headers still rewind to the
 * window's start while the consumer keeps up. */
static void a_skew_does_not_make_a_record_large(void **state)
{
	struct ring r;
	char err[256];
	struct vmshm_msg m;
	void *dst;

	(void)state;
	ring_open(&r, 256 << 10, 80);
	assert_int_equal(r.p.hot, VMSHM_HOT_WINDOW);
	for (int i = 0; i < 200; i++) {
		uint64_t at = VMSHM_ALIGN_UP(r.p.head & (r.size - 1), VMSHM_LINE);
		uint32_t off = (uint32_t)(((uintptr_t)r.data + at + VMSHM_REC_HDR + 3000) % VMSHM_PAGE);

		assert_int_equal(vmshm_prod_reserve_at(&r.p, 7000, off, &dst), 0);
		vmshm_prod_commit(&r.p, 7000, 1);
		assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
		vmshm_cons_pop(&r.c);
		vmshm_cons_publish(&r.c);
	}
	assert_true(r.p.rewinds > 0);
	assert_true(r.p.rewinds + 2 >= r.p.laps);
	free(r.data);
}

/* The skew is hostile too: more than a page, or one that carries the
 * payload past the ring's end, is an error before any read. */
/* Every destination offset within two lines, header and payload sizes
 * around one and two lines: the bytes are the header then the payload,
 * and nothing before or after them is touched. */
static void copy_lines_last_first_writes_exactly_header_then_payload(void **state)
{
	(void)state;
	uint8_t hdr[80], src[300], want[400];
	uint8_t *buf = aligned_alloc(VMSHM_LINE, 512);

	assert_non_null(buf);
	for (unsigned i = 0; i < sizeof(hdr); i++)
		hdr[i] = (uint8_t)(0x40 + i);
	for (unsigned i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(0x80 + i * 7);
	for (size_t off = 0; off < 2 * VMSHM_LINE; off++)
		for (size_t hs = 0; hs <= 72; hs++)
			for (size_t n = 0; n <= 200; n += (n < 140 ? 1 : 29)) {
				memset(buf, 0xee, 512);
				vmshm_copy_lines_last_first(buf + off, hdr, hs, src, n);
				memcpy(want, hdr, hs);
				memcpy(want + hs, src, n);
				if (memcmp(buf + off, want, hs + n) != 0)
					fail_msg("offset %zu, header %zu, payload %zu: wrong bytes", off, hs, n);
				for (size_t k = 0; k < 512; k++)
					if ((k < off || k >= off + hs + n) && buf[k] != 0xee)
						fail_msg("offset %zu, header %zu, payload %zu: byte %zu outside written",
							 off, hs, n, k);
			}
	free(buf);
}

static void a_hostile_skew_is_an_error(void **state)
{
	struct ring r;
	char err[256];
	struct vmshm_msg m;
	void *dst;

	(void)state;
	ring_open(&r, 16 << 10, 79);
	assert_int_equal(vmshm_prod_reserve_at(&r.p, 3000, 100, &dst), 0);
	vmshm_prod_commit(&r.p, 3000, 1);
	uint16_t skew = next_rec(&r)->skew;
	assert_true(skew > 0 && skew < VMSHM_PAGE);
	next_rec(&r)->skew = VMSHM_PAGE;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "more than a page"));
	next_rec(&r)->skew = VMSHM_PAGE - 1;
	next_rec(&r)->len = (16 << 10) - VMSHM_REC_HDR - (VMSHM_PAGE - 1) + 1;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "after a skew of 4095, past the end"));
	/* Exactly to the end is fine. */
	next_rec(&r)->len -= 1;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	assert_ptr_equal(m.payload, r.data + VMSHM_REC_HDR + VMSHM_PAGE - 1);
	next_rec(&r)->skew = skew;
	next_rec(&r)->len = 3000;
	assert_int_equal(vmshm_cons_peek(&r.c, &m, err, sizeof(err)), 1);
	assert_int_equal((uintptr_t)m.payload % VMSHM_PAGE, 100);
	free(r.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_fits_slots_and_shrinks_rings_for_the_platform),
		cmocka_unit_test(attach_formats_once_then_validates),
		cmocka_unit_test(attach_rejects_every_bad_header_field),
		cmocka_unit_test(attach_gives_up_on_a_formatter_that_died),
		cmocka_unit_test(slots_are_unique_released_and_reset),
		cmocka_unit_test(active_words_ignore_bits_beyond_the_slots),
		cmocka_unit_test(records_arrive_in_order_through_many_wraps),
		cmocka_unit_test(full_ring_waits_and_oversize_is_refused),
		cmocka_unit_test(a_consumer_that_keeps_up_stays_in_the_hot_window),
		cmocka_unit_test(a_consumer_a_record_behind_stays_in_the_hot_window),
		cmocka_unit_test(wrong_key_or_stale_lap_is_not_a_record),
		cmocka_unit_test(damaged_records_are_errors_not_reads),
		cmocka_unit_test(impossible_tail_is_an_error_for_the_producer),
		cmocka_unit_test(short_records_hold_ob1s_header_and_8_bytes),
		cmocka_unit_test(small_records_share_a_line_large_ones_start_on_one),
		cmocka_unit_test(large_payloads_land_at_their_source_page_offset),
		cmocka_unit_test(a_hostile_skew_is_an_error),
		cmocka_unit_test(copy_lines_last_first_writes_exactly_header_then_payload),
		cmocka_unit_test(a_skew_does_not_make_a_record_large),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
