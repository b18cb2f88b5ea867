/* IMB tables: the repetition rule, parsing real IMB-MPI1 output (hand-written
 * samples of IMB 2021 and IMB 3.2 output, and vhpc-mpibench's own), what the
 * parser tolerates and rejects, the sanity checks, and JSON. */
#include "lib/err.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <json-c/json.h>

#include "bench/bench.h"

static char *data_path(const char *name)
{
	static char buf[4096];
	const char *top = getenv("VHPC_TOP");

	snprintf(buf, sizeof(buf), "%s/tests/bench/data/%s", top ? top : ".", name);
	return buf;
}

static int parse_str(const char *text, struct imb_output *o, struct verr *err)
{
	return imb_parse("t.txt", text, strlen(text), o, err);
}

/* Collects violation messages for assertions. */
struct seen {
	size_t n;
	char msgs[32][512];
};

static void collect(void *ctx, const struct imb_table *t, const struct imb_row *r, const char *msg)
{
	struct seen *s = ctx;

	(void)t;
	(void)r;
	if (s->n < 32)
		snprintf(s->msgs[s->n], sizeof(s->msgs[0]), "%s", msg);
	s->n++;
}

static bool seen_has(const struct seen *s, const char *needle)
{
	for (size_t i = 0; i < s->n && i < 32; i++)
		if (strstr(s->msgs[i], needle))
			return true;
	return false;
}

static void reps_follow_imb_rule(void **state)
{
	(void)state;
	assert_int_equal(imb_reps(0, 1000, IMB_OVERALL_VOL), 1000);
	assert_int_equal(imb_reps(1, 1000, IMB_OVERALL_VOL), 1000);
	assert_int_equal(imb_reps(32768, 1000, IMB_OVERALL_VOL), 1000);
	assert_int_equal(imb_reps(65536, 1000, IMB_OVERALL_VOL), 640);
	assert_int_equal(imb_reps(1 << 20, 1000, IMB_OVERALL_VOL), 40);
	assert_int_equal(imb_reps(4 << 20, 1000, IMB_OVERALL_VOL), 10);
	assert_int_equal(imb_reps(3 << 20, 1000, IMB_OVERALL_VOL), 13);
	/* Larger than the whole volume: still one repetition. */
	assert_int_equal(imb_reps(1LL << 30, 1000, IMB_OVERALL_VOL), 1);
	assert_int_equal(imb_reps(64, 20, IMB_OVERALL_VOL), 20);
	assert_int_equal(imb_reps(1024, 1000, 4096), 4);
	assert_int_equal(imb_reps(0, 0, 1), 1);
}

static void factors_are_imbs(void **state)
{
	(void)state;
	assert_true(imb_bw_factor("PingPong") == 1);
	assert_true(imb_bw_factor("pingping") == 1);
	assert_true(imb_bw_factor("Sendrecv") == 2);
	assert_true(imb_bw_factor("SENDRECV") == 2);
	assert_true(imb_bw_factor("Multi-Exchange") == 4);
	assert_true(imb_bw_factor("Allreduce") == 0);
	assert_true(imb_bw_factor("Barrier") == 0);
	assert_true(imb_is_pair("PingPongAnySource"));
	assert_false(imb_is_pair("Sendrecv"));
}

static void parses_imb_2021_sample(void **state)
{
	struct imb_output o;
	struct verr err;
	const struct imb_table *t;
	struct seen s = { 0 };
	struct imb_check_opts opts;

	(void)state;
	if (imb_parse_file(data_path("imb-sample.txt"), &o, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(o.suite, "Intel(R) MPI Benchmarks 2021.3, MPI-1 part");
	assert_int_equal(o.ntables, 12);
	assert_int_equal(o.ignored_lines, 0);

	t = imb_find(&o, "pingpong", 0);
	assert_non_null(t);
	assert_string_equal(t->name, "PingPong");
	assert_int_equal(t->nprocs, 2);
	assert_int_equal(t->waiting, 2);
	assert_int_equal(t->ncols, 4);
	assert_int_equal(t->cols[0], IMB_COL_BYTES);
	assert_int_equal(t->cols[2], IMB_COL_T);
	assert_int_equal(t->nrows, 24);
	assert_int_equal(imb_row_bytes(t, &t->rows[0]), 0);
	assert_int_equal(imb_row_bytes(t, &t->rows[23]), 4194304);
	assert_true(t->rows[23].v[IMB_COL_REPS] == 10);
	assert_true(imb_row_tmax(t, &t->rows[23]) == 471.02);
	assert_true(t->rows[23].v[IMB_COL_MBPS] == 8904.66);
	assert_int_equal(t->rows[23].line, t->line + 28);

	t = imb_find(&o, "Sendrecv", 4);
	assert_non_null(t);
	assert_int_equal(t->waiting, 0);
	assert_true(imb_has(t, IMB_COL_TMIN) && imb_has(t, IMB_COL_TMAX) &&
		    imb_has(t, IMB_COL_TAVG) && imb_has(t, IMB_COL_MBPS));
	assert_false(imb_has(t, IMB_COL_T));
	assert_null(imb_find(&o, "Sendrecv", 8));

	t = imb_find(&o, "Allreduce", 2);
	assert_non_null(t);
	assert_false(imb_has(t, IMB_COL_MBPS));
	assert_int_equal(t->nrows, 22);   /* 0, then 4 .. 4 MiB: no 1- and 2-byte floats */

	t = imb_find(&o, "Barrier", 4);
	assert_non_null(t);
	assert_false(imb_has(t, IMB_COL_BYTES));
	assert_int_equal(imb_row_bytes(t, &t->rows[0]), -1);
	assert_int_equal(t->nrows, 1);

	imb_check_defaults(&opts);
	assert_true(imb_guess_mbyte(&o) == 1e6);
	assert_int_equal(imb_check(&o, &opts, collect, &s), 0);
	imb_output_free(&o);
}

static void parses_old_imb_with_launcher_noise(void **state)
{
	struct imb_output o;
	struct verr err;
	struct imb_check_opts opts;
	struct seen s = { 0 };
	const struct imb_table *t;

	(void)state;
	if (imb_parse_file(data_path("imb-v3-sample.txt"), &o, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(o.suite, "Intel (R) MPI Benchmark Suite V3.2.4, MPI-1 part");
	assert_int_equal(o.ntables, 2);
	assert_int_equal(o.ignored_lines, 7);   /* the MPI startup lines */
	t = imb_find(&o, "PingPong", 2);
	assert_non_null(t);
	assert_int_equal(t->waiting, 6);
	assert_non_null(imb_find(&o, "Sendrecv", 8));

	/* IMB 3.x counted 2^20 bytes per MB. */
	imb_check_defaults(&opts);
	opts.mbyte = imb_guess_mbyte(&o);
	assert_true(opts.mbyte == 1048576);
	assert_int_equal(imb_check(&o, &opts, collect, &s), 0);
	opts.mbyte = 1e6;
	assert_true(imb_check(&o, &opts, collect, &s) > 30);
	assert_true(seen_has(&s, "Mbytes/sec"));
	imb_output_free(&o);
}

static void parses_our_own_output(void **state)
{
	struct imb_output o;
	struct verr err;
	struct imb_check_opts opts;
	struct seen s = { 0 };
	const struct imb_table *t;

	(void)state;
	if (imb_parse_file(data_path("mpibench-sample.txt"), &o, &err) < 0)
		fail_msg("%s", err.msg);
	assert_non_null(strstr(o.suite, "vhpc-mpibench"));
	assert_int_equal(o.ignored_lines, 0);
	assert_int_equal(o.ntables, 12);
	t = imb_find(&o, "PingPong", 2);
	assert_non_null(t);
	assert_int_equal(t->waiting, 2);
	assert_true(imb_has(t, IMB_COL_DEFECTS));
	assert_int_equal(t->nrows, 18);   /* 0, 1 .. 64 KiB */
	t = imb_find(&o, "Barrier", 4);
	assert_non_null(t);
	assert_false(imb_has(t, IMB_COL_DEFECTS));
	imb_check_defaults(&opts);
	assert_int_equal(imb_check(&o, &opts, collect, &s), 0);
	imb_output_free(&o);
}

static const char tolerant[] =
	"mpirun: warning: something\r\n"
	"#---\r\n"
	"# Benchmarking Multi-PingPong \r\n"
	"# ( 2 groups of 2 processes each running simultaneous ) \r\n"
	"# Group  0:     0    1 \r\n"
	"#\r\n"
	"#    MODE: AGGREGATE \r\n"
	"#\r\n"
	"        Group       #bytes #repetitions      t[usec]   Mbytes/sec\r\n"
	"\r\n"
	"            0            0         1000         0.50         0.00\r\n"
	"            1            0         1000         0.52         0.00\r\n"
	"[node1:123] a warning in the middle\r\n"
	"\r\n"
	"            0            1         1000         0.50         2.00\r\n"
	"            1            1         1000         0.51         1.96\r\n"
	"\n"
	"#-----\n"
	"# Benchmarking Alltoall\n"
	"# #processes = 4; rank order (rowwise): \n"
	"#     0    1 \n"
	"#-----\n"
	"       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]\n"
	"            0         1000         0.03         0.04         0.03\n"
	"      4194304 time-out.; Time limit (secs_per_sample * msg_sizes_list_len) is over\n"
	"# All processes entering MPI_Finalize";   /* no final newline */

static void tolerates_imb_variants(void **state)
{
	struct imb_output o;
	struct verr err;
	const struct imb_table *t;
	struct imb_check_opts opts;
	struct seen s = { 0 };

	(void)state;
	if (parse_str(tolerant, &o, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(o.ntables, 2);
	assert_int_equal(o.ignored_lines, 2);
	t = &o.tables[0];
	assert_string_equal(t->name, "PingPong");
	assert_true(t->multi);
	assert_int_equal(t->ngroups, 2);
	assert_int_equal(t->nprocs, 2);
	assert_int_equal(t->cols[0], IMB_COL_GROUP);
	assert_int_equal(t->nrows, 4);
	assert_true(t->rows[3].v[IMB_COL_GROUP] == 1);
	assert_true(t->rows[3].v[IMB_COL_T] == 0.51);
	t = &o.tables[1];
	assert_string_equal(t->name, "Alltoall");
	assert_int_equal(t->nprocs, 4);
	assert_int_equal(t->nrows, 2);
	assert_non_null(t->rows[1].failure);
	assert_non_null(strstr(t->rows[1].failure, "time-out"));
	assert_true(t->rows[1].v[IMB_COL_BYTES] == 4194304);
	assert_true(t->rows[1].v[IMB_COL_REPS] < 0);
	assert_int_equal(t->rows[1].line, 25);

	imb_check_defaults(&opts);
	assert_int_equal(imb_check(&o, &opts, collect, &s), 1);
	assert_true(seen_has(&s, "sample failed: time-out"));
	imb_output_free(&o);
}

struct bad { const char *text; const char *want; };

static void rejects_garbage_with_line_numbers(void **state)
{
	static const struct bad cases[] = {
		{ "", "no IMB benchmark table" },
		{ "hello\nworld\n", "no IMB benchmark table" },
		{ "# Benchmarking PingPong\n# #processes = 2\n", "t.txt:1: table PingPong has no column header" },
		{ "# Benchmarking PingPong\n# Benchmarking Sendrecv\n#bytes #repetitions t[usec]\n",
		  "t.txt:1: table PingPong has no column header before line 2" },
		{ "# Benchmarking PingPong\n #bytes #repetitions furlongs\n", "t.txt:2: PingPong: unknown column 'furlongs'" },
		{ "# Benchmarking PingPong\n #bytes #bytes #repetitions\n", "column '#bytes' appears twice" },
		{ "# Benchmarking PingPong\n #bytes t[usec]\n", "no #repetitions" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 0 1000 0.2 7\n",
		  "t.txt:3: PingPong: row has more values than the 3 columns" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 0 1000\n",
		  "t.txt:3: PingPong: row has 2 values, its header has 3 columns" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 0 1000 -0.5\n", "is negative" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 0 1000 nan\n", "'nan' is not a number" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 0 1000 0x1p3\n", "is not a number" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 0 1000 1e999\n", "is not a number" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 0 1e3 0.2\n",
		  "#repetitions '1e3' is not a non-negative integer" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 9999999999999999 1 0.2\n", "too large" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 12 abc 3\n", "'abc' is not a non-negative integer" },
		{ "# Benchmarking PingPong\n #bytes #repetitions t[usec]\n 12 1 3..4\n", "is not a number" },
		{ "#bytes #repetitions t[usec]\n", "t.txt:1: column header outside a table" },
		{ "# Benchmarking\n", "needs a benchmark name" },
		{ "# Benchmarking Ping Pong\n", "needs a benchmark name" },
		{ "# Benchmarking PingPong\n# #processes = many\n", "t.txt:2: PingPong: malformed '#processes' line" },
		{ "# Benchmarking PingPong\n# #processes = 0\n", "malformed '#processes'" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct imb_output o;
		struct verr err;

		memset(&err, 0, sizeof(err));
		if (parse_str(cases[i].text, &o, &err) == 0)
			fail_msg("case %zu parsed: %s", i, cases[i].text);
		if (!strstr(err.msg, cases[i].want))
			fail_msg("case %zu: message '%s' lacks '%s'", i, err.msg, cases[i].want);
		assert_int_equal(o.ntables, 0);
		assert_null(o.tables);
	}
	{
		static const char bin[] = "# Benchmarking PingPong\n\0\x01\x02";
		struct imb_output o;
		struct verr err;

		assert_int_equal(imb_parse("b", bin, sizeof(bin), &o, &err), -1);
		assert_non_null(strstr(err.msg, "NUL byte at offset 24"));
	}
	{
		struct imb_output o;
		struct verr err;

		assert_int_equal(imb_parse_file("/nonexistent/imb.txt", &o, &err), -1);
		assert_non_null(strstr(err.msg, "/nonexistent/imb.txt"));
	}
}

#define HDR_SR "# Benchmarking Sendrecv\n# #processes = 2\n" \
	"       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]   Mbytes/sec\n"

static size_t check_text(const char *text, const struct imb_check_opts *opts, struct seen *s)
{
	struct imb_output o;
	struct verr err;
	size_t n;

	memset(s, 0, sizeof(*s));
	if (parse_str(text, &o, &err) < 0)
		fail_msg("%s", err.msg);
	n = imb_check(&o, opts, collect, s);
	imb_output_free(&o);
	return n;
}

static void checks_find_each_violation(void **state)
{
	struct imb_check_opts opts;
	struct seen s;

	(void)state;
	imb_check_defaults(&opts);
	/* 2 x 65536 / 20.00 = 6553.60; printed times carry +-0.005 */
	assert_int_equal(check_text(HDR_SR "        65536          640        19.00        20.00        19.50      6553.60\n",
				    &opts, &s), 0);
	assert_int_equal(check_text(HDR_SR "        65536          640        19.00        20.00        19.50      6555.20\n",
				    &opts, &s), 0);   /* t_max could be 19.995 */
	assert_int_equal(check_text(HDR_SR "        65536          640        19.00        20.00        19.50      6560.00\n",
				    &opts, &s), 1);
	assert_true(seen_has(&s, "65536 bytes: Mbytes/sec 6560.00 does not match 2 x 65536 bytes / t_max 20.00"));
	/* Half the factor: a Sendrecv that reports PingPong bandwidth. */
	assert_int_equal(check_text(HDR_SR "        65536          640        19.00        20.00        19.50      3276.80\n",
				    &opts, &s), 1);

	assert_int_equal(check_text(HDR_SR "        65536         1000        19.00        20.00        19.50      6553.60\n",
				    &opts, &s), 1);
	assert_true(seen_has(&s, "1000 repetitions; the rule min(1000, max(1, 41943040 / bytes)) gives 640"));
	opts.fewer_reps_ok = true;
	assert_int_equal(check_text(HDR_SR "        65536          100        19.00        20.00        19.50      6553.60\n",
				    &opts, &s), 0);
	assert_int_equal(check_text(HDR_SR "        65536          641        19.00        20.00        19.50      6553.60\n",
				    &opts, &s), 1);
	opts.fewer_reps_ok = false;
	opts.max_reps = 100;
	assert_int_equal(check_text(HDR_SR "        65536          100        19.00        20.00        19.50      6553.60\n",
				    &opts, &s), 0);
	imb_check_defaults(&opts);

	assert_int_equal(check_text(HDR_SR
				    "         1024         1000         1.00         1.10         1.05      1861.82\n"
				    "          512         1000         1.00         1.10         1.05       930.91\n",
				    &opts, &s), 1);
	assert_true(seen_has(&s, "512 bytes: message size does not grow (previous row: 1024 bytes)"));
	assert_int_equal(check_text(HDR_SR
				    "         1024         1000         1.00         1.10         1.05      1861.82\n"
				    "         1024         1000         1.00         1.10         1.05      1861.82\n",
				    &opts, &s), 1);

	assert_int_equal(check_text(HDR_SR "            0         1000         0.00         0.00         0.00         0.00\n",
				    &opts, &s), 1);
	assert_true(seen_has(&s, "time 0.00 usec is not positive"));
	/* A 0-byte collective may not communicate at all: 0.00 is honest
	 * there, and only there. */
	assert_int_equal(check_text("# Benchmarking Bcast\n# #processes = 4\n"
				    " #bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n"
				    " 0 1000 0.00 0.00 0.00\n 1 1000 0.05 1.42 0.42\n", &opts, &s), 0);
	assert_int_equal(check_text("# Benchmarking Bcast\n# #processes = 4\n"
				    " #bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n"
				    " 0 1000 0.00 0.00 0.00\n 1 1000 0.00 0.00 0.00\n", &opts, &s), 1);
	assert_true(seen_has(&s, "1 bytes: time 0.00 usec is not positive"));
	assert_int_equal(check_text("# Benchmarking Barrier\n# #processes = 2\n"
				    " #repetitions t_min[usec] t_max[usec] t_avg[usec]\n 1000 0.00 0.00 0.00\n",
				    &opts, &s), 1);
	assert_int_equal(check_text(HDR_SR "            0         1000         2.00         1.00         1.50         0.00\n",
				    &opts, &s), 1);
	assert_true(seen_has(&s, "t_min 2.00 <= t_avg 1.50 <= t_max 1.00 does not hold"));
	/* Rounding: t_min 1.01 and t_avg 1.00 may both come from 1.005. */
	assert_int_equal(check_text(HDR_SR "            0         1000         1.01         1.02         1.00         0.00\n",
				    &opts, &s), 0);

	assert_int_equal(check_text("# Benchmarking PingPong\n# #processes = 4\n"
				    " #bytes #repetitions t[usec] Mbytes/sec\n 0 1000 0.5 0.00\n",
				    &opts, &s), 1);
	assert_true(seen_has(&s, "PingPong runs between 2 processes, the table says #processes = 4"));
	assert_int_equal(check_text("# Benchmarking Bcast\n # #processes = 2\n"
				    " #bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n", &opts, &s), 1);
	assert_true(seen_has(&s, "table has no rows"));
	assert_int_equal(check_text("# Benchmarking Bcast\n"
				    " #bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n 0 1000 1 1 1\n",
				    &opts, &s), 1);
	assert_true(seen_has(&s, "no '# #processes = N' line"));
	assert_int_equal(check_text("# Benchmarking PingPong\n# #processes = 2\n"
				    " #bytes #repetitions t[usec] Mbytes/sec defects\n 64 1000 0.5 128.00 3.00\n",
				    &opts, &s), 1);
	assert_true(seen_has(&s, "data check found defects (3.00)"));
	/* Barrier: no sizes, repetitions are the maximum. */
	assert_int_equal(check_text("# Benchmarking Barrier\n# #processes = 2\n"
				    " #repetitions t_min[usec] t_max[usec] t_avg[usec]\n 999 1 1 1\n",
				    &opts, &s), 1);
	/* Unknown benchmarks: no bandwidth rule to apply. */
	assert_int_equal(check_text("# Benchmarking Uniband\n# #processes = 2\n"
				    " #bytes #repetitions Mbytes/sec Msg/sec\n 64 1000 300.00 5000000\n",
				    &opts, &s), 0);
}

static void json_has_tables_and_rows(void **state)
{
	struct imb_output o;
	struct verr err;
	json_object *j, *tables, *t0, *rows, *r, *v;
	char *s;

	(void)state;
	if (imb_parse_file(data_path("imb-sample.txt"), &o, &err) < 0)
		fail_msg("%s", err.msg);
	s = imb_output_json(&o);
	assert_non_null(s);
	j = json_tokener_parse(s);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "tables", &tables));
	assert_int_equal(json_object_array_length(tables), 12);
	t0 = json_object_array_get_idx(tables, 0);
	assert_true(json_object_object_get_ex(t0, "name", &v));
	assert_string_equal(json_object_get_string(v), "PingPong");
	assert_true(json_object_object_get_ex(t0, "bw_factor", &v));
	assert_true(json_object_get_double(v) == 1);
	assert_true(json_object_object_get_ex(t0, "rows", &rows));
	r = json_object_array_get_idx(rows, 23);
	assert_true(json_object_object_get_ex(r, "bytes", &v));
	assert_int_equal(json_object_get_int64(v), 4194304);
	assert_true(json_object_object_get_ex(r, "t_usec", &v));
	assert_true(json_object_get_double(v) == 471.02);
	assert_non_null(strstr(s, "471.02"));
	assert_null(strstr(s, "471.0199"));
	json_object_put(j);
	free(s);
	imb_output_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reps_follow_imb_rule),
		cmocka_unit_test(factors_are_imbs),
		cmocka_unit_test(parses_imb_2021_sample),
		cmocka_unit_test(parses_old_imb_with_launcher_noise),
		cmocka_unit_test(parses_our_own_output),
		cmocka_unit_test(tolerates_imb_variants),
		cmocka_unit_test(rejects_garbage_with_line_numbers),
		cmocka_unit_test(checks_find_each_violation),
		cmocka_unit_test(json_has_tables_and_rows),
	};

	return cmocka_run_group_tests_name("bench-imb", tests, NULL, NULL);
}
