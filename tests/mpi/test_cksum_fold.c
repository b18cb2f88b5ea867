/* ckpt_cksum's fold (tests/mpi/cksum_fold.h) against published vectors
 * (FNV-1a 64's, splitmix64's from state 0), its byte order and cut,
 * the mismatch finder, and the reference's bookkeeping on runs small
 * enough to fold by hand; under the sanitizers, as unit tests are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tests/mpi/cksum_fold.h"

static void fnv1a_vectors(void **state)
{
	(void)state;
	assert_true(ck_fnv(CK_FNV_OFFSET, "", 0) == 0xcbf29ce484222325ull);
	assert_true(ck_fnv(CK_FNV_OFFSET, "a", 1) == 0xaf63dc4c8601ec8cull);
	assert_true(ck_fnv(CK_FNV_OFFSET, "foobar", 6) == 0x85944171f73967e8ull);
	/* A word folds as its 8 bytes, low first. */
	assert_true(ck_fnv_u64(CK_FNV_OFFSET, 0x0807060504030201ull) ==
		    ck_fnv(CK_FNV_OFFSET, "\x01\x02\x03\x04\x05\x06\x07\x08", 8));
}

static void splitmix64_vectors(void **state)
{
	uint64_t st = 0;

	(void)state;
	assert_true(ck_next(&st) == 0xe220a8397b1dcdafull);
	assert_true(ck_next(&st) == 0x6e789e6aa1b965f4ull);
	assert_true(ck_next(&st) == 0x06c45d188009454full);
	assert_true(ck_next(&st) == 0xf88bb8a8724c81ecull);
}

static void fill_is_the_stream_little_endian_and_cut(void **state)
{
	unsigned char buf[13], guard[4] = { 0xee, 0xee, 0xee, 0xee };
	unsigned char big[sizeof(buf) + sizeof(guard)];
	uint64_t st = 0, w0, w1;

	(void)state;
	w0 = ck_next(&st);
	w1 = ck_next(&st);
	memcpy(big + sizeof(buf), guard, sizeof(guard));
	ck_fill(0, big, sizeof(buf));
	memcpy(buf, big, sizeof(buf));
	for (int k = 0; k < 8; k++)
		assert_int_equal(buf[k], (unsigned char)(w0 >> (8 * k)));
	for (int k = 0; k < 5; k++)
		assert_int_equal(buf[8 + k], (unsigned char)(w1 >> (8 * k)));
	/* Not a byte past the length. */
	assert_memory_equal(big + sizeof(buf), guard, sizeof(guard));
}

static void mismatch_names_the_first_wrong_byte(void **state)
{
	unsigned char buf[100];
	uint64_t seed = ck_seed(CK_MSG, 3, 1, 2);

	(void)state;
	ck_fill(seed, buf, sizeof(buf));
	assert_true(ck_mismatch(seed, buf, sizeof(buf)) == (size_t)-1);
	buf[77] ^= 0x10;
	buf[90] ^= 1;
	assert_int_equal(ck_mismatch(seed, buf, sizeof(buf)), 77);
	/* Another round's data is not this round's. */
	ck_fill(ck_seed(CK_MSG, 4, 1, 2), buf, sizeof(buf));
	assert_true(ck_mismatch(seed, buf, sizeof(buf)) != (size_t)-1);
}

static void seeds_differ_in_every_argument(void **state)
{
	uint64_t base = ck_seed(CK_MSG, 5, 1, 2);

	(void)state;
	assert_true(ck_seed(CK_ALLRED, 5, 1, 2) != base);
	assert_true(ck_seed(CK_MSG, 6, 1, 2) != base);
	assert_true(ck_seed(CK_MSG, 5, 2, 1) != base); /* direction counts */
	assert_true(ck_seed(CK_MSG, 5, 1, 3) != base);
	assert_true(ck_seed(CK_MSG, 5, 1, 2) == base);
}

struct seen {
	uint64_t rounds[8], sums[8];
	int n;
};

static void record(uint64_t round, uint64_t sum, void *arg)
{
	struct seen *s = arg;

	if (s->n < 8) {
		s->rounds[s->n] = round;
		s->sums[s->n] = sum;
	}
	s->n++;
}

/* One rank receives nothing: each round folds only the allreduce (its own
 * 4 words) and, with scratch, its block. */
static void reference_by_hand_one_rank(void **state)
{
	struct ck_params p = { .rounds = 3, .bytes = 10, .every = 2, .ranks = 1, .scratch = 1 };
	struct seen s = { .n = 0 };
	const char *err = NULL;
	unsigned char blk[10];
	uint64_t h = CK_FNV_OFFSET, want2 = 0, got;

	(void)state;
	for (uint64_t r = 1; r <= 3; r++) {
		uint64_t st = ck_seed(CK_ALLRED, r, 0, 0);

		for (int i = 0; i < CK_ALLRED_WORDS; i++)
			h = ck_fnv_u64(h, ck_next(&st));
		ck_fill(ck_seed(CK_DISK, r, 0, 0), blk, sizeof(blk));
		h = ck_fnv(h, blk, sizeof(blk));
		if (r == 2)
			want2 = ck_combine(&h, 1);
	}
	got = ck_reference(&p, record, &s, &err);
	assert_null(err);
	assert_true(got == ck_combine(&h, 1));
	/* Progress at round 2 (every 2) and the last, 3. */
	assert_int_equal(s.n, 2);
	assert_true(s.rounds[0] == 2 && s.sums[0] == want2);
	assert_true(s.rounds[1] == 3 && s.sums[1] == got);
}

/* Two ranks, one round: each folds the other's message to it, then the
 * allreduce's sums, and the job's sum is the fold of both in rank order. */
static void reference_by_hand_two_ranks(void **state)
{
	struct ck_params p = { .rounds = 1, .bytes = 33, .every = 5, .ranks = 2 };
	unsigned char m[33];
	uint64_t h[2], sum[CK_ALLRED_WORDS] = { 0 }, got;
	const char *err = NULL;

	(void)state;
	for (int q = 0; q < 2; q++) {
		uint64_t st = ck_seed(CK_ALLRED, 1, (uint64_t)q, 0);

		for (int i = 0; i < CK_ALLRED_WORDS; i++)
			sum[i] += ck_next(&st);
	}
	for (int s = 0; s < 2; s++) {
		ck_fill(ck_seed(CK_MSG, 1, (uint64_t)(1 - s), (uint64_t)s), m, sizeof(m));
		h[s] = ck_fnv(CK_FNV_OFFSET, m, sizeof(m));
		for (int i = 0; i < CK_ALLRED_WORDS; i++)
			h[s] = ck_fnv_u64(h[s], sum[i]);
	}
	got = ck_reference(&p, NULL, NULL, &err);
	assert_null(err);
	assert_true(got == ck_fnv_u64(ck_fnv_u64(CK_FNV_OFFSET, h[0]), h[1]));
	/* The ranks' order counts. */
	assert_true(got != ck_fnv_u64(ck_fnv_u64(CK_FNV_OFFSET, h[1]), h[0]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fnv1a_vectors),
		cmocka_unit_test(splitmix64_vectors),
		cmocka_unit_test(fill_is_the_stream_little_endian_and_cut),
		cmocka_unit_test(mismatch_names_the_first_wrong_byte),
		cmocka_unit_test(seeds_differ_in_every_argument),
		cmocka_unit_test(reference_by_hand_one_rank),
		cmocka_unit_test(reference_by_hand_two_ranks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
