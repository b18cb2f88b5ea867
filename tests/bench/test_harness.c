/* vhpc bench's harness without running benchmarks: statistics and ratios,
 * metrics from IMB output and from result lines (guest output: hostile),
 * JSON out and back in, size and --iter options, the mpi suite's command
 * lines, the ratio chart's data (and the chart, where gnuplot is
 * installed), and comparing two runs. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "tests/fixture.h"
#include <json-c/json.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/harness/bh.h"

static char *data_path(const char *name)
{
	static char buf[4096];
	const char *top = getenv("VHPC_TOP");

	snprintf(buf, sizeof(buf), "%s/tests/bench/data/%s", top ? top : ".", name);
	return buf;
}

#define NA NAN

/* ------------------------------------------------------------ statistics */

static void test_stat_odd_even_nan(void **state)
{
	double odd[] = { 5, 1, 3 }, even[] = { 4, 1, 3, 2 }, gaps[] = { NA, 7, NA, 1, 4 }, none[] = { NA, NA };
	struct bh_stat s;

	(void)state;
	assert_int_equal(bh_stat_compute(odd, 3, &s), 0);
	assert_int_equal(s.n, 3);
	assert_true(s.min == 1 && s.median == 3 && s.max == 5);
	assert_int_equal(bh_stat_compute(even, 4, &s), 0);
	assert_true(s.median == 2.5 && s.min == 1 && s.max == 4);
	/* Missing repetitions do not count. */
	assert_int_equal(bh_stat_compute(gaps, 5, &s), 0);
	assert_int_equal(s.n, 3);
	assert_true(s.min == 1 && s.median == 4 && s.max == 7);
	assert_int_equal(bh_stat_compute(none, 2, &s), -1);
	assert_int_equal(s.n, 0);
	assert_true(isnan(s.median));
	assert_true(bh_stat_best(&(struct bh_stat){ 3, 1, 2, 9 }, BH_LOWER) == 1);
	assert_true(bh_stat_best(&(struct bh_stat){ 3, 1, 2, 9 }, BH_HIGHER) == 9);
}

static void test_ratio(void **state)
{
	/* Times (lower is better): guest about 1.5x native. */
	double nat[] = { 2, 4, 3, NA }, gst[] = { 3, 5, 6, 9 };
	struct bh_stat ns, gs;
	struct bh_ratio r;

	(void)state;
	bh_stat_compute(nat, 4, &ns);
	bh_stat_compute(gst, 4, &gs);
	bh_ratio_compute(nat, gst, 4, &ns, &gs, BH_LOWER, &r);
	assert_true(r.ok);
	assert_true(fabs(r.median - 5.5 / 3.0) < 1e-12);  /* medians 3 and 5.5 */
	assert_true(fabs(r.best - 3.0 / 2.0) < 1e-12);    /* minima 2 and 3 */
	assert_int_equal(r.pairs, 3);                      /* rep 4 has no native */
	assert_true(fabs(r.pair_min - 1.25) < 1e-12);      /* 5/4 */
	assert_true(fabs(r.pair_max - 2.0) < 1e-12);       /* 6/3 */
	/* Rates (higher is better): best is the maximum. */
	bh_ratio_compute(nat, gst, 4, &ns, &gs, BH_HIGHER, &r);
	assert_true(fabs(r.best - 9.0 / 4.0) < 1e-12);
	/* A native side of zero has no ratio. */
	double z[] = { 0, 0 }, g2[] = { 1, 1 };

	bh_stat_compute(z, 2, &ns);
	bh_stat_compute(g2, 2, &gs);
	bh_ratio_compute(z, g2, 2, &ns, &gs, BH_LOWER, &r);
	assert_false(r.ok);
	/* ... and so has a guest side of zero. */
	bh_ratio_compute(g2, z, 2, &gs, &ns, BH_LOWER, &r);
	assert_false(r.ok);
}

/* --------------------------------------------------------------- metrics */

static const struct bh_desc pp_t = { "PingPong np=2", "t", "usec", "latency", BH_LOWER, 1024 };

static void test_add_rules(void **state)
{
	struct bh_results r;
	struct verr err;
	struct bh_desc d = pp_t;

	(void)state;
	bh_results_init(&r, 2);
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 0, 1.5, &err), 0);
	assert_int_equal(bh_add(&r, &d, BH_GUEST, 0, 2.0, &err), 0);
	/* Once per side and repetition. */
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 0, 1.6, &err), -1);
	assert_non_null(strstr(err.msg, "measured twice"));
	/* Repetitions and sides outside the run. */
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 2, 1.0, &err), -1);
	assert_int_equal(bh_add(&r, &d, (enum bh_side)7, 0, 1.0, &err), -1);
	/* Values a guest could send to poison tables. */
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, NAN, &err), -1);
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, INFINITY, &err), -1);
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, -1, &err), -1);
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, 1e30, &err), -1);
	/* The same metric with another unit or direction contradicts itself. */
	d.unit = "msec";
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, 1, &err), -1);
	assert_non_null(strstr(err.msg, "measured as usec"));
	d = pp_t;
	d.better = BH_HIGHER;
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, 1, &err), -1);
	/* Names that would break tables, JSON or gnuplot strings. */
	d = pp_t;
	d.group = "Ping\"Pong";
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, 1, &err), -1);
	d.group = "Ping\nPong";
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, 1, &err), -1);
	d.group = "";
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, 1, &err), -1);
	d.group = "A-very-long-benchmark-name-that-does-not-fit-in-the-group-field-at-all";
	assert_int_equal(bh_add(&r, &d, BH_NATIVE, 1, 1, &err), -1);
	assert_int_equal(r.n, 1);
	const struct bh_metric *m = bh_metric_find(&r, "PingPong np=2/t/1024");

	assert_non_null(m);
	assert_string_equal(m->label, "PingPong np=2 t 1K");
	assert_true(m->v[BH_NATIVE][0] == 1.5 && isnan(m->v[BH_NATIVE][1]));
	bh_results_free(&r);
}

static void test_fmt_x(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(bh_fmt_x(0, b, sizeof(b)), "0");
	assert_string_equal(bh_fmt_x(512, b, sizeof(b)), "512");
	assert_string_equal(bh_fmt_x(1000, b, sizeof(b)), "1000");
	assert_string_equal(bh_fmt_x(1024, b, sizeof(b)), "1K");
	assert_string_equal(bh_fmt_x(65536, b, sizeof(b)), "64K");
	assert_string_equal(bh_fmt_x(4194304, b, sizeof(b)), "4M");
	assert_string_equal(bh_fmt_x(1536.0 * 1048576, b, sizeof(b)), "1.5G");
	assert_string_equal(bh_fmt_x(1ull << 30, b, sizeof(b)), "1G");
	assert_string_equal(bh_fmt_x(-1, b, sizeof(b)), "-");
}

/* ------------------------------------------------------------ IMB output */

static void test_from_imb_sample(void **state)
{
	struct imb_output o;
	struct bh_results r;
	struct verr err;
	const struct bh_metric *m;

	(void)state;
	assert_int_equal(imb_parse_file(data_path("imb-sample.txt"), &o, &err), 0);
	bh_results_init(&r, 3);
	assert_int_equal(bh_from_imb(&r, BH_GUEST, 2, &o, &err), 0);
	/* 238 rows, 138 of them with bytes > 0 and Mbytes/sec (counted with
	 * vhpc-imbcheck -dump and awk). */
	assert_int_equal(r.n, 376);
	m = bh_metric_find(&r, "PingPong np=2/t/4194304");
	assert_non_null(m);
	assert_true(m->v[BH_GUEST][2] == 471.02 && isnan(m->v[BH_GUEST][0]) && isnan(m->v[BH_NATIVE][2]));
	m = bh_metric_find(&r, "PingPong np=2/bw/4194304");
	assert_non_null(m);
	assert_true(m->v[BH_GUEST][2] == 8904.66);
	assert_int_equal(m->better, BH_HIGHER);
	assert_string_equal(m->panel, "bandwidth");
	/* t_max of a three-time table; bandwidth from its column. */
	m = bh_metric_find(&r, "Sendrecv np=2/t/1024");
	assert_true(m && m->v[BH_GUEST][2] == 0.69);
	m = bh_metric_find(&r, "Sendrecv np=4/bw/1024");
	assert_non_null(m);
	/* No bandwidth at 0 bytes or for collectives; Barrier has no size. */
	assert_null(bh_metric_find(&r, "PingPong np=2/bw/0"));
	assert_non_null(bh_metric_find(&r, "PingPong np=2/t/0"));
	assert_null(bh_metric_find(&r, "Allreduce np=4/bw/1024"));
	m = bh_metric_find(&r, "Barrier np=4/t/-");
	assert_true(m && m->v[BH_GUEST][2] == 1.55 && m->x < 0);
	/* The same output twice in one repetition is refused. */
	assert_int_equal(bh_from_imb(&r, BH_GUEST, 2, &o, &err), -1);
	assert_non_null(strstr(err.msg, "measured twice"));
	bh_results_free(&r);
	imb_output_free(&o);
}

/* IMB 3.2 (Mbytes/sec in 2^20 bytes, as printed): PingPong at 2 of 8
 * processes, Sendrecv at 8. */
static void test_from_imb_v3(void **state)
{
	struct imb_output o;
	struct bh_results r;
	struct verr err;
	const struct bh_metric *m;

	(void)state;
	assert_int_equal(imb_parse_file(data_path("imb-v3-sample.txt"), &o, &err), 0);
	bh_results_init(&r, 1);
	assert_int_equal(bh_from_imb(&r, BH_NATIVE, 0, &o, &err), 0);
	assert_int_equal(r.n, 94);   /* 48 rows, 46 with bytes > 0 */
	m = bh_metric_find(&r, "PingPong np=2/bw/1024");
	assert_true(m && m->v[BH_NATIVE][0] == 489.22);
	m = bh_metric_find(&r, "Sendrecv np=8/t/1024");
	assert_true(m && m->v[BH_NATIVE][0] == 3.32);
	bh_results_free(&r);
	imb_output_free(&o);
}

static void test_from_imb_failed_sample(void **state)
{
	static const char text[] =
		"#---------------------------------------------------\n"
		"# Benchmarking PingPong \n"
		"# #processes = 2 \n"
		"#---------------------------------------------------\n"
		"       #bytes #repetitions      t[usec]   Mbytes/sec\n"
		"            0         1000         0.42         0.00\n"
		"      4194304 time-out.; Time limit (secs_per_sample * msg_sizes_list_len) is over;\n";
	struct imb_output o;
	struct bh_results r;
	struct verr err;

	(void)state;
	assert_int_equal(imb_parse("x", text, strlen(text), &o, &err), 0);
	bh_results_init(&r, 1);
	assert_int_equal(bh_from_imb(&r, BH_NATIVE, 0, &o, &err), 0);
	assert_int_equal(r.n, 1);
	assert_null(bh_metric_find(&r, "PingPong np=2/t/4194304"));
	bh_results_free(&r);
	imb_output_free(&o);
}

/* --------------------------------------------------------- result lines */

struct collected {
	int n;
	double v[8];
};

static int collect(void *ctx, struct json_object *o, struct verr *err)
{
	static const char *const tests[] = { "stream", "rr", NULL };
	struct collected *c = ctx;
	double v;

	if (bh_json_enum(o, "test", tests, err) < 0 || bh_json_num(o, "value", 0, 1e9, &v, err) < 0)
		return -1;
	c->v[c->n++] = v;
	return 0;
}

static void test_lines(void **state)
{
	static const char good[] =
		"# vhpc-netbench: rank 1 -> rank 0\n"
		"noise from a launcher\n"
		"vhpc-bench {\"test\":\"stream\",\"size\":1,\"value\":8.5}\n"
		"  vhpc-bench {\"test\":\"nope\"}   (not at the start: not ours)\n"
		"vhpc-bench {\"test\":\"rr\",\"value\":85}";   /* no final newline */
	struct collected c = { 0 };
	struct verr err;
	char big[6000];

	(void)state;
	assert_int_equal(bh_each_line("o", good, strlen(good), collect, &c, &err), 2);
	assert_true(c.n == 2 && c.v[0] == 8.5 && c.v[1] == 85);

#define BAD(text, what)                                                                         \
	do {                                                                                    \
		c.n = 0;                                                                        \
		assert_int_equal(bh_each_line("o", text, sizeof(text) - 1, collect, &c, &err), -1); \
		assert_non_null(strstr(err.msg, what));                                         \
	} while (0)
	BAD("vhpc-bench {\"test\":\"stream\",\"value\":1\n", "o:1: result line is not a JSON object");
	BAD("x\nvhpc-bench [1,2]\n", "o:2: result line is not a JSON object");
	BAD("vhpc-bench {\"test\":\"udp\",\"value\":1}\n", "unexpected value 'udp'");
	BAD("vhpc-bench {\"test\":\"rr\",\"value\":\"fast\"}\n", "\"value\" is missing or not a number");
	BAD("vhpc-bench {\"test\":\"rr\",\"value\":-3}\n", "outside");
	BAD("vhpc-bench {\"test\":\"rr\",\"value\":1e300}\n", "outside");
	BAD("vhpc-bench {\"test\":\"rr\"}\n", "\"value\" is missing");
	BAD("vhpc-bench {\"test\":\"rr\",\"value\":1\0}\n", "NUL byte");
	memset(big, ' ', sizeof(big));
	memcpy(big, "vhpc-bench {", 12);
	big[sizeof(big) - 2] = '}';
	big[sizeof(big) - 1] = '\n';
	assert_int_equal(bh_each_line("o", big, sizeof(big), collect, &c, &err), -1);
	assert_non_null(strstr(err.msg, "longer than"));
}

/* ------------------------------------------------------------------ JSON */

static void fill(struct bh_results *r)
{
	struct verr err;
	struct bh_desc bw = { "PingPong np=2", "bw", "Mbytes/sec", "bandwidth", BH_HIGHER, 65536 };
	struct bh_desc wall = { "whole run", "wall", "s", "", BH_LOWER, -1 };

	bh_results_init(r, 3);
	for (size_t k = 0; k < 3; k++) {
		assert_int_equal(bh_add(r, &pp_t, BH_NATIVE, k, 1.0 + (double)k, &err), 0);
		assert_int_equal(bh_add(r, &pp_t, BH_GUEST, k, 2.0 + 2.0 * (double)k, &err), 0);
		assert_int_equal(bh_add(r, &bw, BH_NATIVE, k, 1000 + (double)k, &err), 0);
		if (k != 1)
			assert_int_equal(bh_add(r, &bw, BH_GUEST, k, 900, &err), 0);
	}
	assert_int_equal(bh_add(r, &wall, BH_NATIVE, 0, 0.25, &err), 0);
	bh_results_finish(r);
}

static void test_json_roundtrip(void **state)
{
	struct bh_results r, back;
	struct json_object *j, *again;
	struct verr err;
	const char *text;

	(void)state;
	fill(&r);
	j = bh_results_to_json(&r);
	text = json_object_to_json_string(j);
	again = json_tokener_parse(text);
	assert_non_null(again);
	assert_int_equal(bh_results_from_json(again, 3, "t.json", &back, &err), 0);
	assert_int_equal(back.n, r.n);
	for (size_t i = 0; i < r.n; i++) {
		const struct bh_metric *a = &r.m[i], *b = bh_metric_find(&back, a->key);

		assert_non_null(b);
		assert_string_equal(a->label, b->label);
		for (int s = 0; s < BH_NSIDES; s++)
			for (size_t k = 0; k < 3; k++)
				assert_true((isnan(a->v[s][k]) && isnan(b->v[s][k])) || a->v[s][k] == b->v[s][k]);
		assert_int_equal(a->ratio.ok, b->ratio.ok);
		if (a->ratio.ok)
			assert_true(a->ratio.median == b->ratio.median && a->ratio.pairs == b->ratio.pairs);
	}
	/* What the file says about the metrics. */
	const struct bh_metric *t = bh_metric_find(&back, "PingPong np=2/t/1024");

	assert_true(t->st[BH_NATIVE].median == 2 && t->st[BH_GUEST].median == 4 && t->ratio.median == 2);
	const struct bh_metric *bw = bh_metric_find(&back, "PingPong np=2/bw/65536");

	assert_int_equal(bw->st[BH_GUEST].n, 2);
	assert_int_equal(bw->ratio.pairs, 2);
	assert_true(fabs(bw->ratio.best - 900.0 / 1002.0) < 1e-12);
	const struct bh_metric *w = bh_metric_find(&back, "whole run/wall/-");

	assert_false(w->ratio.ok);
	struct json_object *m0 = json_object_array_get_idx(j, 0), *ro, *x;

	assert_true(json_object_object_get_ex(m0, "ratio", &ro));
	assert_true(json_object_object_get_ex(ro, "median", &x));
	assert_true(json_object_get_double(x) == 2);
	bh_results_free(&back);
	json_object_put(again);
	json_object_put(j);
	bh_results_free(&r);
}

static void test_json_rejects(void **state)
{
	static const struct { const char *json, *what; } bad[] = {
		{ "{}", "is not an array" },
		{ "[1]", "not a metric" },
		{ "[{\"key\":\"a/b/-\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\"}]", "needs strings" },
		{ "[{\"key\":\"a/b/-\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"more\"}]", "expected lower or higher" },
		{ "[{\"key\":\"a/b/7\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"lower\","
		  "\"native\":{\"values\":[1]},\"guest\":{\"values\":[1]}}]", "does not match its fields" },
		{ "[{\"key\":\"a/b/-\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"lower\","
		  "\"native\":{\"values\":[1,2]},\"guest\":{\"values\":[1]}}]", "2 native values for 1 repetitions" },
		{ "[{\"key\":\"a/b/-\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"lower\","
		  "\"native\":{\"values\":[-1]},\"guest\":{\"values\":[1]}}]", "not a number >= 0" },
		{ "[{\"key\":\"a/b/-\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"lower\","
		  "\"native\":{\"values\":[\"x\"]},\"guest\":{\"values\":[1]}}]", "not a metric" },
		{ "[{\"key\":\"a/b/-\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"lower\","
		  "\"native\":{\"values\":[1]}}]", "no guest.values" },
		{ "[{\"key\":\"a/b/-\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"lower\","
		  "\"native\":{\"values\":[1]},\"guest\":{\"values\":[null]}},"
		  "{\"key\":\"a/b/-\",\"group\":\"a\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"lower\","
		  "\"native\":{\"values\":[1]},\"guest\":{\"values\":[1]}}]", "appears twice" },
		{ "[{\"key\":\"a/b/-\",\"group\":\"a\\\"\",\"name\":\"b\",\"unit\":\"s\",\"better\":\"lower\","
		  "\"native\":{\"values\":[1]},\"guest\":{\"values\":[1]}}]", "not printable" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json_object *j = json_tokener_parse(bad[i].json);
		struct bh_results r;
		struct verr err = { "" };

		assert_non_null(j);
		if (bh_results_from_json(j, 1, "f.json", &r, &err) != -1 || !strstr(err.msg, bad[i].what))
			fail_msg("case %zu: expected '%s', got '%s'", i, bad[i].what, err.msg);
		assert_non_null(strstr(err.msg, "f.json: "));
		json_object_put(j);
	}
}

/* ----------------------------------------------------------------- sizes */

static void test_sizes(void **state)
{
	long long *v;
	size_t n;
	int lo, hi;
	struct verr err;

	(void)state;
	assert_int_equal(bh_parse_sizes("--sizes", "64K,1,4M", 0, 1 << 30, &v, &n, &err), 0);
	assert_true(n == 3 && v[0] == 1 && v[1] == 65536 && v[2] == 4194304);
	free(v);
	assert_int_equal(bh_parse_sizes("--sizes", "1,2,1", 0, 100, &v, &n, &err), -1);
	assert_non_null(strstr(err.msg, "given twice"));
	assert_int_equal(bh_parse_sizes("--sizes", "1,2G", 0, 1 << 30, &v, &n, &err), -1);
	assert_non_null(strstr(err.msg, "expected sizes from 0 to 1G"));
	assert_int_equal(bh_parse_sizes("--sizes", ",,", 0, 100, &v, &n, &err), -1);
	assert_int_equal(bh_parse_sizes("--sizes", "x", 0, 100, &v, &n, &err), -1);
	assert_int_equal(bh_parse_msglog("3:10", 30, &lo, &hi, &err), 0);
	assert_true(lo == 3 && hi == 10);
	assert_int_equal(bh_parse_msglog("22", 30, &lo, &hi, &err), 0);
	assert_true(lo == 0 && hi == 22);
	assert_int_equal(bh_parse_msglog("10:3", 30, &lo, &hi, &err), -1);
	assert_int_equal(bh_parse_msglog("40", 30, &lo, &hi, &err), -1);
	assert_int_equal(bh_parse_msglog("a:b", 30, &lo, &hi, &err), -1);
}

/* ----------------------------------------------------------------- --iter */

static void test_iter(void **state)
{
	static const struct { const char *arg, *what; } bad[] = {
		{ "0", "N must be a whole number from 1 to 1000000000" },
		{ "-5", "N must be" },
		{ "1e3", "N must be" },
		{ "1000000001", "N must be" },
		{ "", "N must be" },
		{ ",40M", "N must be" },
		{ "123456789012345678901234567890", "expected N[,VOL]" },
		/* A bare number is bytes in vhpc-mpibench and MiB in IMB. */
		{ "1000,40", "VOL must be whole MiB from 1M to 2047M" },
		{ "1000,1536K", "VOL must be whole MiB" },
		{ "1000,2048M", "VOL must be whole MiB" },
		{ "1000,0M", "VOL must be whole MiB" },
		{ "1000,", "VOL must be whole MiB" },
		{ "1000,40M,100", "VOL must be whole MiB" },
	};
	struct bh_iter it;
	struct verr err;
	char buf[64];

	(void)state;
	assert_int_equal(bh_parse_iter("100000", &it, &err), 0);
	assert_true(it.set && it.n == 100000 && it.vol == 40LL << 20);
	assert_string_equal(bh_iter_arg(&it, false, buf, sizeof(buf)), "100000,40M");
	assert_string_equal(bh_iter_arg(&it, true, buf, sizeof(buf)), "100000,40");
	assert_int_equal(bh_parse_iter("500,2G", &it, &err), -1);
	assert_int_equal(bh_parse_iter("500,1G", &it, &err), 0);
	assert_true(it.n == 500 && it.vol == 1LL << 30);
	assert_string_equal(bh_iter_arg(&it, true, buf, sizeof(buf)), "500,1024");
	assert_int_equal(bh_parse_iter("1,2047M", &it, &err), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		if (bh_parse_iter(bad[i].arg, &it, &err) != -1 || !strstr(err.msg, bad[i].what) ||
		    strncmp(err.msg, "--iter", 6))
			fail_msg("'%s': expected '--iter ...%s', got '%s'", bad[i].arg, bad[i].what, err.msg);
		assert_false(it.set);
	}
}

/* ------------------------------------------------------ mpi command lines */

/* The mpi suite's context for plans of 2 guests with a rank each over
 * sizes[0..1], as vhpc bench would make it on a 2-core container host. */
static void mpi_ctx(struct bh_ctx *c, struct bench_opts *o, long long *sizes)
{
	memset(c, 0, sizeof(*c));
	c->o = o;
	c->s = &bh_suite_mpi;
	c->guests = c->ranks = c->ncores = 2;
	c->reps = 1;
	c->sizes = sizes;
	c->nsizes = 2;
	snprintf(c->dir, sizeof(c->dir), "/tmp/r");
	snprintf(c->self, sizeof(c->self), "/opt/vhpc/bin");
	snprintf(c->driver, sizeof(c->driver), "container");
}

/* A plan's two command lines as strings (NULL: none wanted), and the
 * plan freed. */
static void plan_take(struct bh_ctx *c, char *native, char *guest, size_t len)
{
	if (native)
		bh_argv_str(c->runs[0].argv, native, len);
	if (guest)
		bh_argv_str(c->runs[1].argv, guest, len);
	for (size_t i = 0; i < c->nruns; i++)
		bh_argv_free(c->runs[i].argv);
	free(c->runs);
	free(c->vmshm);
}

static void plan_fabric(const char *iter, const char *imb, const char *fabric, char *native, char *guest,
			size_t len)
{
	struct bench_opts o = { .suite = "mpi", .iter = iter, .fabric = fabric };
	long long sizes[] = { 0, 1024 };
	struct bh_ctx c;
	struct verr err;

	mpi_ctx(&c, &o, sizes);
	snprintf(c.imb, sizeof(c.imb), "%s", imb ? imb : "");
	if (iter)
		assert_int_equal(bh_parse_iter(iter, &c.iter, &err), 0);
	if (c.s->plan(&c, &err) < 0)
		fail_msg("plan: %s", err.msg);
	assert_int_equal(c.nruns, 2);
	assert_int_equal(c.runs[0].side, BH_NATIVE);
	plan_take(&c, native, guest, len);
}

static void plan_mpi(const char *iter, const char *imb, char *native, char *guest, size_t len)
{
	plan_fabric(iter, imb, NULL, native, guest, len);
}

static void test_mpi_commands(void **state)
{
	char n[4096], g[4096];

	(void)state;
	/* Both sides run the five benchmarks; no -iter unless asked. */
	plan_mpi(NULL, NULL, n, g, sizeof(n));
	assert_non_null(strstr(n, " /opt/vhpc/bin/vhpc-mpibench -msglen /tmp/r/msglen.txt -npmin 2 "
				  "PingPong Sendrecv Exchange Allreduce Bcast"));
	assert_non_null(strstr(g, "exec vhpc-mpibench -msglen $f -npmin 2 PingPong Sendrecv Exchange Allreduce Bcast"));
	assert_null(strstr(n, "-iter"));
	/* --iter reaches both: VOL as a size for vhpc-mpibench... */
	plan_mpi("100000", NULL, n, g, sizeof(n));
	assert_non_null(strstr(n, "vhpc-mpibench -msglen /tmp/r/msglen.txt -npmin 2 -iter 100000,40M PingPong "));
	assert_non_null(strstr(g, "exec vhpc-mpibench -msglen $f -npmin 2 -iter 100000,40M PingPong "));
	assert_null(strstr(n, "-time"));
	/* ... in MiB for IMB, with the run's time limit as its -time so its
	 * dynamic policy does not cut the count. */
	plan_mpi("5000,8M", "/opt/imb/IMB-MPI1", n, g, sizeof(n));
	assert_non_null(strstr(n, " /opt/imb/IMB-MPI1 -msglen /tmp/r/msglen.txt -npmin 2 -iter 5000,8 -time 600 "
				  "PingPong Sendrecv Exchange Allreduce Bcast"));
	assert_non_null(strstr(g, "exec /usr/local/bin/IMB-MPI1 -msglen $f -npmin 2 -iter 5000,8 -time 600 PingPong "));
	assert_null(strstr(n, "iter_policy"));
	/* Without --iter IMB keeps its defaults. */
	plan_mpi(NULL, "/opt/imb/IMB-MPI1", n, g, sizeof(n));
	assert_null(strstr(n, "-iter"));
	assert_null(strstr(n, "-time"));
	/* Without --fabric: vader natively, guests as vhpc run decides. */
	plan_mpi(NULL, NULL, n, g, sizeof(n));
	assert_non_null(strstr(n, "--mca btl self,vader,tcp "));
	assert_null(strstr(g, "rdma"));
	assert_null(strstr(g, "--no-vmshm"));
	/* --fabric rdma: every pair over verbs on both sides, as vhpc's jobs
	 * on the fabric talk between hosts. */
	plan_fabric(NULL, NULL, "rdma", n, g, sizeof(n));
	assert_non_null(strstr(n, "--mca btl self,ofi "));
	assert_non_null(strstr(n, "--mca btl_ofi_provider_include 'verbs;ofi_rxd' --mca btl_ofi_mode 2 "));
	assert_non_null(strstr(g, " --rdma --no-vmshm -- "));
	/* --fabric tcp: TCP on both sides. */
	plan_fabric(NULL, NULL, "tcp", n, g, sizeof(n));
	assert_non_null(strstr(n, "--mca btl self,tcp "));
	assert_null(strstr(n, "ofi"));
	assert_non_null(strstr(g, " --no-rdma --no-vmshm -- "));
}

/* --no-single-copy: the guests keep vmshm (its counters are asked for) and
 * lose only the pod's single copy; it says so where the transport is. */
static void test_mpi_no_single_copy(void **state)
{
	struct bench_opts o = { .suite = "mpi", .no_single_copy = true };
	long long sizes[] = { 0, 1024 };
	struct bh_vmshm_sent vs[1] = { { .seen = true, .bytes = 2000000, .guest0 = "g0", .guest1 = "g1" } }, *planned;
	struct bh_ctx c;
	struct verr err;
	char buf[4096];

	(void)state;
	mpi_ctx(&c, &o, sizes);
	assert_int_equal(c.s->plan(&c, &err), 0);
	assert_non_null(strstr(c.guest_how, ", --no-single-copy)"));
	bh_argv_str(c.runs[c.nruns - 1].argv, buf, sizeof(buf));
	assert_non_null(strstr(buf, " --no-single-copy -x OMPI_MCA_btl_vmshm_stats=1 -- sh -c "));
	assert_null(strstr(buf, "--no-vmshm"));
	planned = c.vmshm;
	c.vmshm = vs;
	assert_string_equal(bh_transport_str(&c, buf, sizeof(buf)),
			    "vmshm, shared memory between guests, without the single copy (--no-single-copy) (its counters: "
			    "rank 0 in g0 sent rank 1 in g1 2.0 MB through it in 1 of 1 guest runs)");
	c.vmshm = planned;
	plan_take(&c, NULL, NULL, 0);
}

/* --benchmarks: a subset, in IMB's order whatever the order given; bad and
 * repeated names are refused by name.  The guests' run asks for vmshm's
 * counters (what carried the pair) unless vmshm is left out. */
static int plan_opts(struct bench_opts *o, char *native, char *guest, size_t len, struct verr *err)
{
	long long sizes[] = { 0, 1024 };
	struct bh_ctx c;
	int rc;

	mpi_ctx(&c, o, sizes);
	rc = c.s->plan(&c, err);
	if (rc == 0)
		plan_take(&c, native, guest, len);
	else
		plan_take(&c, NULL, NULL, 0);
	return rc;
}

static void test_mpi_benchmarks(void **state)
{
	struct bench_opts o = { .suite = "mpi", .benchmarks = "sendrecv,PingPong" };
	char n[4096], g[4096];
	struct verr err;

	(void)state;
	assert_int_equal(plan_opts(&o, n, g, sizeof(n), &err), 0);
	assert_non_null(strstr(n, "-npmin 2 PingPong Sendrecv"));
	assert_null(strstr(n, "Exchange"));
	assert_non_null(strstr(g, "-npmin 2 PingPong Sendrecv'"));
	assert_non_null(strstr(g, " -x OMPI_MCA_btl_vmshm_stats=1 -- sh -c "));
	assert_null(strstr(n, "vmshm"));
	o.benchmarks = "PingPong,Barrier";
	assert_int_equal(plan_opts(&o, n, g, sizeof(n), &err), -1);
	assert_string_equal(err.msg, "--benchmarks: 'Barrier' is not one of PingPong, Sendrecv, Exchange, Allreduce, Bcast");
	o.benchmarks = "PingPong,pingpong";
	assert_int_equal(plan_opts(&o, n, g, sizeof(n), &err), -1);
	assert_string_equal(err.msg, "--benchmarks: PingPong is named twice");
	o.benchmarks = "PingPong,";
	assert_int_equal(plan_opts(&o, n, g, sizeof(n), &err), -1);
	assert_string_equal(err.msg, "--benchmarks: '' is not one of PingPong, Sendrecv, Exchange, Allreduce, Bcast");
	/* Without vmshm nothing asks for its counters. */
	o.benchmarks = NULL;
	o.no_vmshm = true;
	assert_int_equal(plan_opts(&o, n, g, sizeof(n), &err), 0);
	assert_null(strstr(g, "vmshm_stats"));
	assert_non_null(strstr(g, "-npmin 2 PingPong Sendrecv Exchange Allreduce Bcast'"));
}

/* vmshm's counters as btl_vmshm prints them, read from a guest's stderr
 * among other lines; anything not exactly so is not counted. */
static void test_vmshm_sent(void **state)
{
	static const char good[] =
		"vhpc: job 3b78db92: 2 guests x 1 vCPU, 2 ranks\n"
		"[vmshm g1:26 rank 1] vmshm-stats: peer 0 slot 0 tx_frags 4431 tx_bytes 69894 rx_frags 4415 rx_bytes 69542 ring_full 0\n"
		"[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 4415 tx_bytes 69542 rx_frags 4431 rx_bytes 69894 ring_full 0 gets 0\n"
		"[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes 999999 rx_frags 1\n";
	static const char *const bad[] = {
		"",
		"[vmshm g0:25 rank 0] vmshm-stats: peer 2 slot 1 tx_frags 1 tx_bytes 5\n",   /* another peer */
		"[vmshm g0:25 rank 3] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes 5\n",   /* another rank */
		"[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes 99999999999999999999\n",
		"[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes -5\n",
		"[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes 5x\n",
		"[vmshm host0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes 5\n", /* not a guest */
		"[vmshm g123456:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes 5\n",
		"x[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes 5\n",
		"[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1\n",
		"[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags 1 tx_bytes ",
	};
	struct bh_vmshm_sent s;

	(void)state;
	bh_vmshm_sent(good, sizeof(good) - 1, &s);
	assert_true(s.seen);
	assert_int_equal(s.bytes, 69542);    /* the first line for the pair */
	assert_string_equal(s.guest0, "g0");
	assert_string_equal(s.guest1, "g1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bh_vmshm_sent(bad[i], strlen(bad[i]), &s);
		if (s.seen || s.bytes)
			fail_msg("counted: '%s'", bad[i]);
	}
	/* Not NUL-terminated: the length is the end, in the middle of a number. */
	{
		const char *l0 = strstr(good, "[vmshm g0:25"), *b = strstr(l0, "tx_bytes 69542");

		bh_vmshm_sent(l0, (size_t)(b - l0) + strlen("tx_bytes 695"), &s);
		assert_true(s.seen);
		assert_int_equal(s.bytes, 695);
		bh_vmshm_sent(l0, (size_t)(b - l0) + strlen("tx_bytes "), &s);
		assert_false(s.seen);
	}
}

/* Where vmshm is left out, the line says what was asked for instead; where
 * no run printed counters, it does not claim vmshm. */
static void test_transport_str(void **state)
{
	struct bench_opts o = { .suite = "mpi" };
	struct bh_vmshm_sent vs[1] = { { .seen = false } };
	struct bh_ctx c;
	char buf[512];

	(void)state;
	memset(&c, 0, sizeof(c));
	c.o = &o;
	c.reps = 1;
	c.vmshm = vs;
	assert_string_equal(bh_transport_str(&c, buf, sizeof(buf)),
			    "not vmshm: no guest run showed bytes through it (its counters were not printed), so tcp");
	o.no_vmshm = true;
	assert_string_equal(bh_transport_str(&c, buf, sizeof(buf)), "tcp over the job network (--no-vmshm)");
	o.fabric = "rdma";
	assert_string_equal(bh_transport_str(&c, buf, sizeof(buf)),
			    "the RDMA fabric (ofi BTL) (--fabric rdma; vmshm left out)");
	o.fabric = "tcp";
	assert_string_equal(bh_transport_str(&c, buf, sizeof(buf)), "tcp (--fabric tcp; vmshm left out)");
}

/* --table imb: IMB's columns, native, guests and their ratio per size,
 * under the facts (cores, ranks per guest, transport). */
static void imb_table_text(int ranks, int ncores, bool vmshm_used, char **out)
{
	struct bench_opts o = { .suite = "mpi" };
	long long sizes[] = { 0, 1024 };
	struct bh_vmshm_sent vs[2] = { { .seen = vmshm_used, .bytes = vmshm_used ? 3000000 : 0, .guest0 = "g0",
					 .guest1 = "g1" },
				       { .seen = vmshm_used, .bytes = vmshm_used ? 3000000 : 0, .guest0 = "g0",
					 .guest1 = "g1" } };
	struct bh_ctx c;
	struct verr err;
	size_t len;
	FILE *f;

	memset(&c, 0, sizeof(c));
	c.o = &o;
	c.s = &bh_suite_mpi;
	c.guests = 2;
	c.ranks = ranks;
	c.ncores = ncores;
	c.reps = 2;
	c.sizes = sizes;
	c.nsizes = 2;
	c.benches[0] = "PingPong";
	c.benches[1] = "Allreduce";
	c.nbenches = 2;
	c.vmshm = vs;
	snprintf(c.native_how, sizeof(c.native_how), "mpirun -np %d", ranks);
	snprintf(c.guest_how, sizeof(c.guest_how), "vhpc run -N 2 -n %d", ranks);
	bh_results_init(&c.res, 2);
	for (size_t k = 0; k < 2; k++) {
		struct bh_desc t0 = { "PingPong np=2", "t", "usec", "latency", BH_LOWER, 0 };
		struct bh_desc t1 = { "PingPong np=2", "t", "usec", "latency", BH_LOWER, 1024 };
		struct bh_desc b1 = { "PingPong np=2", "bw", "Mbytes/sec", "bandwidth", BH_HIGHER, 1024 };
		struct bh_desc a1 = { "Allreduce np=2", "t", "usec", "latency", BH_LOWER, 1024 };
		char g[32];

		snprintf(g, sizeof(g), "Allreduce np=%d", ranks);
		a1.group = g;
		assert_int_equal(bh_add(&c.res, &t0, BH_NATIVE, k, 0.40 + 0.02 * (double)k, &err), 0);
		assert_int_equal(bh_add(&c.res, &t0, BH_GUEST, k, 0.36 + 0.02 * (double)k, &err), 0);
		assert_int_equal(bh_add(&c.res, &t1, BH_NATIVE, k, 1.0, &err), 0);
		assert_int_equal(bh_add(&c.res, &t1, BH_GUEST, k, 2.0, &err), 0);
		assert_int_equal(bh_add(&c.res, &b1, BH_NATIVE, k, 1024.0, &err), 0);
		assert_int_equal(bh_add(&c.res, &b1, BH_GUEST, k, 512.0, &err), 0);
		assert_int_equal(bh_add(&c.res, &a1, BH_NATIVE, k, 3.0, &err), 0);
		assert_int_equal(bh_add(&c.res, &a1, BH_GUEST, k, 3.3, &err), 0);
	}
	bh_results_finish(&c.res);
	f = open_memstream(out, &len);
	bh_imb_table(f, &c);
	fclose(f);
	bh_results_free(&c.res);
}

static void test_imb_table(void **state)
{
	char *t;

	(void)state;
	imb_table_text(2, 2, true, &t);
	assert_non_null(strstr(t, "\n# cores: 2; ranks: 2, no more than cores (a core each on both sides)\n"));
	assert_non_null(strstr(t, "\n# guests: vhpc run -N 2 -n 2, 1 rank per guest\n"));
	assert_non_null(strstr(t, "\n# between the guests: vmshm, shared memory between guests (its counters: rank 0 in g0 "
				  "sent rank 1 in g1 3.0 MB through it in 2 of 2 guest runs)\n"));
	assert_non_null(strstr(t, "\n# Benchmarking PingPong\n# #processes = 2\n"));
	assert_non_null(strstr(t, "\n       #bytes #repetitions     native     guests      ratio       native     guests    ratio\n"
				  "            0         1000       0.41       0.37      0.902         0.00       0.00        -\n"
				  "         1024         1000       1.00       2.00      2.000      1024.00     512.00    0.500\n"));
	/* A collective: t_max, no bandwidth. */
	assert_non_null(strstr(t, "\n# Benchmarking Allreduce\n# #processes = 2\n"));
	assert_non_null(strstr(t, "t_max[usec]"));
	assert_non_null(strstr(t, "\n       #bytes #repetitions     native     guests      ratio\n"
				  "         1024         1000       3.00       3.30      1.100\n"));
	free(t);
	/* More ranks than cores is said, loudly; ranks per guest as they fall;
	 * vmshm asked for but idle is not called vmshm. */
	imb_table_text(5, 2, false, &t);
	assert_non_null(strstr(t, "\n# cores: 2; ranks: 5, MORE THAN CORES: ranks share cores"));
	assert_non_null(strstr(t, "\n# guests: vhpc run -N 2 -n 5, 2-3 ranks per guest\n"));
	assert_non_null(strstr(t, "\n# between the guests: not vmshm: no guest run showed bytes through it (its counters were zero), so tcp\n"));
	assert_non_null(strstr(t, "\n# #processes = 2 (3 additional processes waiting in MPI_Barrier)\n"));
	assert_non_null(strstr(t, "\n# Benchmarking Allreduce\n# #processes = 5\n"));
	free(t);
}

/* ------------------------------------------------------------ ratio chart */

struct dat_row {
	char label[64];          /* bars: the metric; lines: "" */
	double x, ratio, lo, hi, best;
	unsigned pairs;
};

/* The rows of a ratio-*.dat file; -1 when it does not exist. */
static int read_dat(const char *dir, const char *name, struct dat_row *rows, int max)
{
	char path[512], line[512];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f) && n < max) {
		struct dat_row *r = &rows[n];
		const char *p = line;

		if (line[0] == '#')
			continue;
		memset(r, 0, sizeof(*r));
		if (line[0] == '"') {
			const char *q = strchr(line + 1, '"');

			assert_non_null(q);
			snprintf(r->label, sizeof(r->label), "%.*s", (int)(q - line - 1), line + 1);
			p = q + 1;
		} else {
			r->x = strtod(line, (char **)&p);
		}
		if (sscanf(p, "%lf %lf %lf %lf %u", &r->ratio, &r->lo, &r->hi, &r->best, &r->pairs) != 5)
			fail_msg("%s: bad row '%s'", path, line);
		n++;
	}
	fclose(f);
	return n;
}

static void expect_row(const struct dat_row *r, double x, double ratio, double lo, double hi, double best)
{
	if (r->x != x || fabs(r->ratio - ratio) > 1e-6 || fabs(r->lo - lo) > 1e-6 || fabs(r->hi - hi) > 1e-6 ||
	    fabs(r->best - best) > 1e-6 || r->pairs != 3)
		fail_msg("row at %g: got %g %g..%g best %g (%u pairs), expected %g %g..%g best %g (3 pairs)", r->x,
			 r->ratio, r->lo, r->hi, r->best, r->pairs, ratio, lo, hi, best);
}

static bool have_gnuplot(void)
{
	return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

static void expect_png(const char *dir)
{
	char path[512], *buf;
	size_t len;
	struct verr err;

	if (bh_gnuplot(dir, "ratio.gp", "ratio.png", &err) < 0)
		fail_msg("%s", err.msg);
	snprintf(path, sizeof(path), "%s/ratio.png", dir);
	assert_int_equal(read_file(path, &buf, &len, 16u << 20, &err), 0);
	assert_true(len > 2000 && !memcmp(buf, "\x89PNG\r\n\x1a\n", 8));
	free(buf);
}

/* The hand-written mpi results folder: its ratios worked out by hand in
 * the comments. */
static void test_ratio_chart(void **state)
{
	char dir[64], *gp;
	struct dat_row rows[8];
	struct bh_doc d;
	struct verr err;
	size_t len;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "bench-ratio"), 0);
	if (bh_doc_load(data_path("bench-mpi"), &d, &err) < 0)
		fail_msg("%s", err.msg);
	struct bh_chart ch = { dir, d.suite, d.driver, (int)d.reps, &d.res };

	if (bh_ratio_write(&ch, &err) < 0)
		fail_msg("%s", err.msg);
	/* PingPong t: 0 bytes native 2 4 1, guest 3 4 2: medians 3/2, per
	 * repetition 1.5 1 2, bests 2/1; 1K 4 4 4 and 5 4 6; 64K 10 8 16 and
	 * 10 10 20. */
	assert_int_equal(read_dat(dir, "ratio-time-1.dat", rows, 8), 3);
	expect_row(&rows[0], 0, 1.5, 1, 2, 2);
	expect_row(&rows[1], 1024, 1.25, 1, 1.5, 1);
	expect_row(&rows[2], 65536, 1, 1, 1.25, 1.25);
	/* Bcast t, its sizes sorted; at 0 bytes native measured 0.00: no
	 * ratio, no point.  1K 2 2 2 and 2 3 2.5; 64K 20 20 20 and 22 24 20. */
	assert_int_equal(read_dat(dir, "ratio-time-2.dat", rows, 8), 2);
	expect_row(&rows[0], 1024, 1.25, 1, 1.5, 1);
	expect_row(&rows[1], 65536, 1.1, 1, 1.2, 1);
	assert_int_equal(read_dat(dir, "ratio-time-3.dat", rows, 8), -1);
	/* PingPong bw, a rate (best: the maximum): 1K 256 256 256 and 200
	 * 256 128; 64K 6000 8000 4000 and 3000 6000 4000. */
	assert_int_equal(read_dat(dir, "ratio-rate-1.dat", rows, 8), 2);
	expect_row(&rows[0], 1024, 200.0 / 256, 0.5, 1, 1);
	expect_row(&rows[1], 65536, 4000.0 / 6000, 0.5, 1, 0.75);
	assert_int_equal(read_dat(dir, "ratio-rate-2.dat", rows, 8), -1);
	/* No bars: every plotted metric has a size; the wall time is left out. */
	assert_int_equal(read_dat(dir, "ratio-time.dat", rows, 8), -1);

	char path[600];

	snprintf(path, sizeof(path), "%s/ratio.gp", dir);
	assert_int_equal(read_file(path, &gp, &len, 1 << 20, &err), 0);
	assert_non_null(strstr(gp, "set output \"ratio.png\""));
	assert_non_null(strstr(gp, "set multiplot layout 2,1"));
	assert_non_null(strstr(gp, "set title \"guest/native of times (lower is better), against size\""));
	assert_non_null(strstr(gp, "set title \"guest/native of rates (higher is better), against size\""));
	/* 1.0 and the goals. */
	assert_non_null(strstr(gp, "first 1 to graph 1, first 1 nohead"));
	assert_non_null(strstr(gp, "first 0.95 to graph 1, first 0.95 nohead dt 2"));
	assert_non_null(strstr(gp, "first 1.1 to graph 1, first 1.1 nohead dt 2"));
	/* Size 0 half the smallest size, labelled 0; log x. */
	assert_non_null(strstr(gp, "zero = 512\n"));
	assert_non_null(strstr(gp, "\"0\" 512, \"1K\" 1024, \"64K\" 65536"));
	assert_non_null(strstr(gp, "set logscale x 2"));
	/* Error bars lo..hi; PingPong keeps its colour in both panels. */
	assert_non_null(strstr(gp, "\"ratio-time-1.dat\" using ($1 > 0 ? $1 : zero):2:3:4 with yerrorlines lc 1 "
				   "pt 7 ps 0.6 title \"PingPong np=2 t\""));
	assert_non_null(strstr(gp, "\"ratio-time-2.dat\" using ($1 > 0 ? $1 : zero):2:3:4 with yerrorlines lc 2 "
				   "pt 7 ps 0.6 title \"Bcast np=2 t\""));
	assert_non_null(strstr(gp, "\"ratio-rate-1.dat\" using ($1 > 0 ? $1 : zero):2:3:4 with yerrorlines lc 1 "
				   "pt 7 ps 0.6 title \"PingPong np=2 bw\""));
	assert_null(strstr(gp, "whole run"));
	free(gp);
	if (have_gnuplot())
		expect_png(dir);
	bh_doc_free(&d);
	assert_int_equal(fx_rmdir(dir), 0);
	if (!have_gnuplot())
		skip();
}

/* Metrics without sizes (the sys suite's loops) get bars of their ratios. */
static void test_ratio_bars(void **state)
{
	char dir[64], path[600], *gp;
	struct bh_desc one = { "Pipe Throughput", "1 copy", "loops/s", "rate", BH_HIGHER, -1 };
	struct bh_desc two = { "Pipe Throughput", "2 copies", "loops/s", "rate", BH_HIGHER, -1 };
	struct bh_desc wall = { "whole run", "wall", "s", "", BH_LOWER, -1 };
	struct dat_row rows[4];
	struct bh_results r;
	struct verr err;
	size_t len;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "bench-ratio"), 0);
	bh_results_init(&r, 3);
	for (size_t k = 0; k < 3; k++) {
		assert_int_equal(bh_add(&r, &one, BH_NATIVE, k, 100, &err), 0);
		assert_int_equal(bh_add(&r, &one, BH_GUEST, k, 90 + 5.0 * (double)k, &err), 0);  /* 90 95 100 */
		assert_int_equal(bh_add(&r, &two, BH_NATIVE, k, 200, &err), 0);
		assert_int_equal(bh_add(&r, &two, BH_GUEST, k, 100, &err), 0);
		assert_int_equal(bh_add(&r, &wall, BH_NATIVE, k, 1, &err), 0);
		assert_int_equal(bh_add(&r, &wall, BH_GUEST, k, 2, &err), 0);
	}
	bh_results_finish(&r);
	struct bh_chart ch = { dir, "sys", "container", 3, &r };

	assert_int_equal(bh_ratio_write(&ch, &err), 0);
	assert_int_equal(read_dat(dir, "ratio-rate.dat", rows, 4), 2);
	assert_string_equal(rows[0].label, "Pipe Throughput 1 copy");
	expect_row(&rows[0], 0, 0.95, 0.9, 1, 1);
	assert_string_equal(rows[1].label, "Pipe Throughput 2 copies");
	expect_row(&rows[1], 0, 0.5, 0.5, 0.5, 0.5);
	/* The wall time is not plotted, so there is no time panel. */
	assert_int_equal(read_dat(dir, "ratio-time.dat", rows, 4), -1);
	snprintf(path, sizeof(path), "%s/ratio.gp", dir);
	assert_int_equal(read_file(path, &gp, &len, 1 << 20, &err), 0);
	assert_non_null(strstr(gp, "set multiplot layout 1,1"));
	assert_non_null(strstr(gp, "set style histogram errorbars"));
	assert_non_null(strstr(gp, "\"ratio-rate.dat\" using 2:3:4:xtic(1)"));
	free(gp);
	if (have_gnuplot())
		expect_png(dir);
	bh_results_free(&r);
	assert_int_equal(fx_rmdir(dir), 0);
	if (!have_gnuplot())
		skip();
}

/* --------------------------------------------------------------- compare */

static void doc_from(struct bh_doc *d, const char *dir, double scale, double spread)
{
	struct bh_results r;
	struct verr err;
	struct json_object *root = json_object_new_object();
	struct bh_desc bw = { "TCP stream", "throughput", "Mbit/s", "bandwidth", BH_HIGHER, 1024 };

	bh_results_init(&r, 2);
	for (size_t k = 0; k < 2; k++) {
		double s = k ? 1 + spread : 1 - spread;

		assert_int_equal(bh_add(&r, &pp_t, BH_NATIVE, k, 10 * s, &err), 0);
		assert_int_equal(bh_add(&r, &pp_t, BH_GUEST, k, 20 * scale * s, &err), 0);
		assert_int_equal(bh_add(&r, &bw, BH_NATIVE, k, 100 * s, &err), 0);
		assert_int_equal(bh_add(&r, &bw, BH_GUEST, k, 50 * scale * s, &err), 0);
	}
	bh_results_finish(&r);
	json_object_object_add(root, "metrics", bh_results_to_json(&r));
	bh_results_free(&r);
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	snprintf(d->suite, sizeof(d->suite), "net");
	d->reps = 2;
	d->root = root;
	struct json_object *m;

	json_object_object_get_ex(root, "metrics", &m);
	assert_int_equal(bh_results_from_json(m, 2, dir, &d->res, &err), 0);
}

static void test_compare(void **state)
{
	struct bh_doc a, b;
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	struct verr err;
	struct json_object *j, *ms, *m, *side, *x;

	(void)state;
	/* B's guests take 1.5x the time and give 1.5x the rate; 1% noise on
	 * native (the same in both), so native is "same", guest past noise. */
	doc_from(&a, "A", 1.0, 0.01);
	doc_from(&b, "B", 1.5, 0.01);
	assert_int_equal(bh_compare(f, &a, &b, true, &err), 0);
	fclose(f);
	j = json_tokener_parse(buf);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "metrics", &ms));
	assert_int_equal(json_object_array_length(ms), 2);
	m = json_object_array_get_idx(ms, 0);
	json_object_object_get_ex(m, "native", &side);
	json_object_object_get_ex(side, "ratio", &x);
	assert_true(fabs(json_object_get_double(x) - 1.0) < 1e-12);
	json_object_object_get_ex(side, "lo", &x);
	assert_true(fabs(json_object_get_double(x) - 0.99 / 1.01) < 1e-12);
	json_object_object_get_ex(side, "change", &x);
	assert_string_equal(json_object_get_string(x), "same");
	json_object_object_get_ex(m, "guest", &side);
	json_object_object_get_ex(side, "ratio", &x);
	assert_true(fabs(json_object_get_double(x) - 1.5) < 1e-12);
	json_object_object_get_ex(side, "change", &x);
	assert_string_equal(json_object_get_string(x), "worse");     /* a time went up */
	m = json_object_array_get_idx(ms, 1);
	json_object_object_get_ex(m, "guest", &side);
	json_object_object_get_ex(side, "change", &x);
	assert_string_equal(json_object_get_string(x), "better");    /* a rate went up */
	json_object_object_get_ex(m, "ratio_b", &x);
	assert_true(fabs(json_object_get_double(x) - 0.75) < 1e-12);
	json_object_put(j);
	free(buf);

	/* A different suite is refused. */
	snprintf(b.suite, sizeof(b.suite), "mpi");
	f = open_memstream(&buf, &len);
	assert_int_equal(bh_compare(f, &a, &b, false, &err), -1);
	fclose(f);
	free(buf);
	assert_non_null(strstr(err.msg, "nothing to compare"));
	bh_doc_free(&a);
	bh_doc_free(&b);
}

static void test_doc_load_errors(void **state)
{
	char dir[64], path[256];
	struct bh_doc d;
	struct verr err;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "bench-unit"), 0);
	assert_int_equal(bh_doc_load("/nonexistent/vhpc-bench", &d, &err), -1);
	assert_non_null(strstr(err.msg, "No such file"));
	assert_int_equal(bh_doc_load(dir, &d, &err), -1);
	assert_non_null(strstr(err.msg, "no results.json here"));
	snprintf(path, sizeof(path), "%s/results.json", dir);
#define LOAD_BAD(text, what)                                                   \
	do {                                                                   \
		assert_int_equal(write_file(path, text, strlen(text), 0644, &err), 0); \
		assert_int_equal(bh_doc_load(dir, &d, &err), -1);              \
		if (!strstr(err.msg, what))                                    \
			fail_msg("expected '%s', got '%s'", what, err.msg);    \
	} while (0)
	LOAD_BAD("{\"format\":", "not JSON");
	LOAD_BAD("[]", "not a vhpc bench results file");
	LOAD_BAD("{\"format\":\"other/1\"}", "not a vhpc bench results file");
	LOAD_BAD("{\"format\":\"vhpc-bench/1\",\"suite\":\"gpu\"}", "\"suite\" is missing or unknown");
	LOAD_BAD("{\"format\":\"vhpc-bench/1\",\"suite\":\"net\",\"config\":{\"reps\":0}}", "config.reps");
	LOAD_BAD("{\"format\":\"vhpc-bench/1\",\"suite\":\"net\",\"config\":{\"reps\":1}}", "no \"metrics\"");
	LOAD_BAD("{\"format\":\"vhpc-bench/1\",\"suite\":\"net\",\"config\":{\"reps\":1},\"metrics\":[7]}",
		 "metrics[0]: not a metric");
	/* Well-formed, without metrics: it loads. */
	{
		const char *ok = "{\"format\":\"vhpc-bench/1\",\"suite\":\"net\",\"config\":{\"reps\":1},\"metrics\":[]}";

		assert_int_equal(write_file(path, ok, strlen(ok), 0644, &err), 0);
		assert_int_equal(bh_doc_load(dir, &d, &err), 0);
		assert_string_equal(d.suite, "net");
		assert_int_equal(d.reps, 1);
		bh_doc_free(&d);
	}
	unlink(path);
	fx_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stat_odd_even_nan),
		cmocka_unit_test(test_ratio),
		cmocka_unit_test(test_add_rules),
		cmocka_unit_test(test_fmt_x),
		cmocka_unit_test(test_from_imb_sample),
		cmocka_unit_test(test_from_imb_v3),
		cmocka_unit_test(test_from_imb_failed_sample),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_json_roundtrip),
		cmocka_unit_test(test_json_rejects),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_iter),
		cmocka_unit_test(test_mpi_commands),
		cmocka_unit_test(test_mpi_no_single_copy),
		cmocka_unit_test(test_mpi_benchmarks),
		cmocka_unit_test(test_vmshm_sent),
		cmocka_unit_test(test_imb_table),
		cmocka_unit_test(test_transport_str),
		cmocka_unit_test(test_ratio_chart),
		cmocka_unit_test(test_ratio_bars),
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_doc_load_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
