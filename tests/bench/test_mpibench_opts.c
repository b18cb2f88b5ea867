/* vhpc-mpibench without MPI: command line, message sizes, repetitions,
 * process counts, and the data-check patterns. */
#include "lib/err.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bench/bench.h"
#include "bench/mpibench/opts.h"

static int parse(struct mb_opts *o, struct verr *err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = "vhpc-mpibench";
	va_start(ap, err);
	for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	memset(err, 0, sizeof(*err));
	return mb_parse_args(argc, argv, o, err);
}

static void sizes_of(const struct mb_opts *o, const long long *lens, size_t nlens,
		     long long **s, size_t *n)
{
	struct verr err;

	if (mb_sizes(o, lens, nlens, s, n, &err) < 0)
		fail_msg("%s", err.msg);
}

static void defaults_are_imbs(void **state)
{
	struct mb_opts o;
	struct verr err;
	long long *s;
	size_t n;

	(void)state;
	assert_int_equal(parse(&o, &err, NULL), 0);
	for (int b = 0; b < MB_NBENCH; b++)
		assert_true(o.run[b]);
	assert_int_equal(o.iter, 1000);
	assert_int_equal(o.overall_vol, 40LL << 20);
	assert_int_equal(o.npmin, 2);
	assert_false(o.check);
	sizes_of(&o, NULL, 0, &s, &n);
	assert_int_equal(n, 24);                 /* 0, 2^0 .. 2^22 */
	assert_int_equal(s[0], 0);
	assert_int_equal(s[1], 1);
	assert_int_equal(s[23], 4194304);
	free(s);
	assert_int_equal(mb_warmup_reps(1000), 100);
	assert_int_equal(mb_warmup_reps(10), 1);
	assert_int_equal(mb_warmup_reps(1), 1);
}

static void benchmarks_are_case_insensitive(void **state)
{
	struct mb_opts o;
	struct verr err;

	(void)state;
	assert_int_equal(parse(&o, &err, "PingPong", "SendRecv", NULL), 0);
	assert_true(o.run[MB_PINGPONG]);
	assert_true(o.run[MB_SENDRECV]);
	assert_false(o.run[MB_EXCHANGE]);
	assert_false(o.run[MB_BARRIER]);
	assert_int_equal(parse(&o, &err, "barrier", "-include", "bcast,ALLREDUCE", NULL), 0);
	assert_true(o.run[MB_BARRIER] && o.run[MB_BCAST] && o.run[MB_ALLREDUCE]);
	assert_false(o.run[MB_PINGPONG]);
	assert_int_equal(parse(&o, &err, "-exclude", "PingPong,pingping", NULL), 0);
	assert_false(o.run[MB_PINGPONG] || o.run[MB_PINGPING]);
	assert_true(o.run[MB_SENDRECV] && o.run[MB_BARRIER]);
	assert_int_equal(mb_bench_lookup("EXCHANGE"), MB_EXCHANGE);
	assert_int_equal(mb_bench_lookup("Alltoall"), -1);
}

static void sizes_narrow_as_asked(void **state)
{
	struct mb_opts o;
	struct verr err;
	long long *s;
	size_t n;

	(void)state;
	assert_int_equal(parse(&o, &err, "-msglog", "3:6", NULL), 0);
	sizes_of(&o, NULL, 0, &s, &n);
	assert_int_equal(n, 5);
	assert_int_equal(s[0], 0);
	assert_int_equal(s[1], 8);
	assert_int_equal(s[4], 64);
	free(s);

	assert_int_equal(parse(&o, &err, "--msglog=4", NULL), 0);
	sizes_of(&o, NULL, 0, &s, &n);
	assert_int_equal(n, 6);                  /* 0 1 2 4 8 16 */
	assert_int_equal(s[5], 16);
	free(s);

	assert_int_equal(parse(&o, &err, "-minsize", "1K", "-maxsize", "64K", NULL), 0);
	sizes_of(&o, NULL, 0, &s, &n);
	assert_int_equal(n, 7);                  /* 1K .. 64K, no 0 */
	assert_int_equal(s[0], 1024);
	assert_int_equal(s[6], 65536);
	free(s);

	assert_true(o.sync);                     /* IMB's default: -sync 1 */
	assert_int_equal(parse(&o, &err, "-sync", "0", NULL), 0);
	assert_false(o.sync);
	assert_int_equal(parse(&o, &err, "-sync", "on", NULL), 0);
	assert_true(o.sync);

	assert_int_equal(parse(&o, &err, "-msglog", "0:2", "-zero_size", "0", NULL), 0);
	sizes_of(&o, NULL, 0, &s, &n);
	assert_int_equal(n, 3);
	assert_int_equal(s[0], 1);
	free(s);

	assert_int_equal(parse(&o, &err, "-msglog", "0:2", "-minsize", "8", NULL), 0);
	assert_int_equal(mb_sizes(&o, NULL, 0, &s, &n, &err), -1);
	assert_non_null(strstr(err.msg, "no message sizes left"));
}

static void msglen_files_parse(void **state)
{
	struct mb_opts o;
	struct verr err;
	long long *lens, *s;
	size_t nl, n;

	(void)state;
	assert_int_equal(mb_parse_msglen("f", "# sizes\n4M\n\n1\n  64K  # middle\n1\n0\n", &lens, &nl, &err), 0);
	assert_int_equal(nl, 5);
	assert_int_equal(lens[0], 4194304);
	assert_int_equal(parse(&o, &err, "-msglen", "f", NULL), 0);
	sizes_of(&o, lens, nl, &s, &n);
	/* sorted and unique */
	assert_int_equal(n, 4);
	assert_int_equal(s[0], 0);
	assert_int_equal(s[1], 1);
	assert_int_equal(s[2], 65536);
	assert_int_equal(s[3], 4194304);
	free(s);
	free(lens);

	assert_int_equal(mb_parse_msglen("f", "1\n\nten\n", &lens, &nl, &err), -1);
	assert_non_null(strstr(err.msg, "f:3: length 'ten'"));
	assert_int_equal(mb_parse_msglen("f", "2G\n", &lens, &nl, &err), -1);
	assert_non_null(strstr(err.msg, "up to 1G"));
	assert_int_equal(mb_parse_msglen("f", "# nothing\n\n", &lens, &nl, &err), -1);
	assert_non_null(strstr(err.msg, "no message lengths"));
	assert_int_equal(mb_parse_msglen("f", "-5\n", &lens, &nl, &err), -1);
}

struct bad { const char *args[4]; const char *want; };

static void bad_arguments_are_named(void **state)
{
	static const struct bad cases[] = {
		{ { "Foo" }, "unknown benchmark 'Foo'" },
		{ { "-include", "PingPong,Nope" }, "unknown benchmark 'Nope'" },
		{ { "-msglog", "x" }, "-msglog: MAX 'x' must be an integer 0..30" },
		{ { "-msglog", "5:3" }, "MIN is larger than MAX" },
		{ { "-msglog", "a:3" }, "MIN must be an integer" },
		{ { "-msglog", "0:31" }, "must be an integer 0..30" },
		{ { "-msglog", "99999999999999999999:3" }, "expected [MIN:]MAX" },
		{ { "-msglog" }, "option -msglog needs a value" },
		{ { "-iter", "0" }, "N must be an integer 1..1000000000" },
		{ { "-iter", "10,zz" }, "VOL must be a size" },
		{ { "-iter", "10,0" }, "VOL must be a size" },
		{ { "-npmin", "-1" }, "-npmin '-1'" },
		{ { "-zero_size", "maybe" }, "expected 0 or 1" },
		{ { "-sync", "2" }, "-sync '2': expected 0 or 1" },
		{ { "-sync" }, "option -sync needs a value" },
		{ { "-minsize", "1.5K" }, "-minsize '1.5K'" },
		{ { "-maxsize", "4G" }, "up to 1G" },
		{ { "-minsize", "8K", "-maxsize", "4K" }, "-minsize 8192 is larger than -maxsize 4096" },
		{ { "-msglog", "3", "-msglen", "f" }, "either -msglog or -msglen" },
		{ { "-frobnicate" }, "unknown option '-frobnicate'" },
		{ { "-multi", "0" }, "IMB option -multi is not supported" },
		{ { "PingPong", "-exclude", "pingpong" }, "no benchmark left to run" },
		{ { "--check=yes" }, "option -check takes no value" },
		{ { "-" "-" }, "unknown option '--'" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct mb_opts o;
		struct verr err;
		int rc = parse(&o, &err, cases[i].args[0], cases[i].args[1], cases[i].args[2],
			       cases[i].args[3], NULL);

		if (rc == 0)
			fail_msg("case %zu (%s) was accepted", i, cases[i].args[0]);
		if (!strstr(err.msg, cases[i].want))
			fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].want);
	}
}

static void process_counts_like_imb(void **state)
{
	int c[64], n;

	(void)state;
	n = mb_proc_counts(4, 2, false, c, 64);
	assert_int_equal(n, 2);
	assert_int_equal(c[0], 2);
	assert_int_equal(c[1], 4);
	n = mb_proc_counts(11, 2, false, c, 64);
	assert_int_equal(n, 4);                  /* 2 4 8 11 */
	assert_int_equal(c[2], 8);
	assert_int_equal(c[3], 11);
	n = mb_proc_counts(12, 3, false, c, 64);
	assert_int_equal(n, 3);                  /* 3 6 12 */
	assert_int_equal(c[1], 6);
	n = mb_proc_counts(16, 2, true, c, 64);
	assert_int_equal(n, 1);
	assert_int_equal(c[0], 16);
	n = mb_proc_counts(1, 2, false, c, 64);
	assert_int_equal(n, 1);
	assert_int_equal(c[0], 1);
	n = mb_proc_counts(3, 8, false, c, 64);
	assert_int_equal(n, 1);
	assert_int_equal(c[0], 3);
	n = mb_proc_counts(1 << 20, 1, false, c, 4);
	assert_int_equal(n, 4);
	assert_int_equal(c[3], 1 << 20);
}

static void patterns_depend_on_sender_size_and_repetition(void **state)
{
	unsigned char a[1031], b[1031];
	long long first = -1;
	unsigned want = 0, got = 0;

	(void)state;
	mb_fill(a, sizeof(a), 3, sizeof(a), 7);
	assert_int_equal(mb_verify(a, sizeof(a), 3, sizeof(a), 7, &first, &want, &got), 0);
	/* another sender, repetition or size: nearly every byte differs */
	assert_true(mb_verify(a, sizeof(a), 2, sizeof(a), 7, &first, &want, &got) > 900);
	assert_true(mb_verify(a, sizeof(a), 3, sizeof(a), 8, &first, &want, &got) > 900);
	assert_true(mb_verify(a, sizeof(a), 3, 1030, 7, &first, &want, &got) > 900);
	/* one flipped byte, found where it is */
	memcpy(b, a, sizeof(a));
	b[1029] ^= 0x10;
	assert_int_equal(mb_verify(b, sizeof(b), 3, sizeof(b), 7, &first, &want, &got), 1);
	assert_int_equal(first, 1029);
	assert_int_equal(want ^ got, 0x10);
	assert_int_equal(want, a[1029]);
	/* odd lengths and zero */
	mb_fill(b, 5, 1, 5, 0);
	assert_int_equal(mb_verify(b, 5, 1, 5, 0, &first, &want, &got), 0);
	assert_int_equal(mb_verify(b, 0, 1, 0, 0, &first, &want, &got), 0);
}

static void reduction_sums_are_exact(void **state)
{
	float bufs[4][64], sum[64], sums[MB_RED_MOD];
	long long first = -1;
	unsigned want = 0, got = 0;
	unsigned char *p;

	(void)state;
	for (int r = 0; r < 4; r++)
		mb_red_fill(bufs[r], 64, r, 256, 5);
	for (int j = 0; j < 64; j++)
		sum[j] = bufs[3][j] + bufs[1][j] + bufs[0][j] + bufs[2][j];
	mb_red_sums(4, sums);
	assert_int_equal(mb_red_verify(sum, 64, sums, 256, 5, &first, &want, &got), 0);
	assert_true(mb_red_verify(sum, 64, sums, 256, 6, &first, &want, &got) > 0);
	p = (unsigned char *)sum;
	p[101] ^= 0xff;
	assert_int_equal(mb_red_verify(sum, 64, sums, 256, 5, &first, &want, &got), 1);
	assert_int_equal(first, 101);
	mb_red_sums(3, sums);
	p[101] ^= 0xff;
	assert_true(mb_red_verify(sum, 64, sums, 256, 5, &first, &want, &got) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_are_imbs),
		cmocka_unit_test(benchmarks_are_case_insensitive),
		cmocka_unit_test(sizes_narrow_as_asked),
		cmocka_unit_test(msglen_files_parse),
		cmocka_unit_test(bad_arguments_are_named),
		cmocka_unit_test(process_counts_like_imb),
		cmocka_unit_test(patterns_depend_on_sender_size_and_repetition),
		cmocka_unit_test(reduction_sums_are_exact),
	};

	return cmocka_run_group_tests_name("bench-mpibench-opts", tests, NULL, NULL);
}
