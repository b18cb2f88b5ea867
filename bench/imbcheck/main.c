/*
 * vhpc-imbcheck: parse IMB-MPI1 output (real IMB or vhpc-mpibench) and check
 * every table for sanity; one message per violation, exit status 1 if any.
 */
#include "lib/err.h"
#include "lib/parse.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define ME "vhpc-imbcheck"

static void usage(FILE *f)
{
	fprintf(f,
"usage: vhpc-imbcheck [options] FILE...   (FILE \"-\" = stdin)\n"
"Parses IMB-MPI1 output (Intel's IMB-MPI1 or vhpc-mpibench) and checks each\n"
"table: message sizes grow, times are positive (0.00 allowed for a collective\n"
"at 0 bytes, which may not communicate) and t_min <= t_avg <= t_max,\n"
"Mbytes/sec = factor x bytes / t_max within rounding (PingPong/PingPing 1,\n"
"Sendrecv 2, Exchange 4), repetitions = min(N, max(1, VOL / bytes)), no\n"
"failed samples or data-check defects.\n"
"\n"
"  -mb auto|1e6|1048576  bytes per MB in Mbytes/sec (auto: 1048576 for the\n"
"                        old \"MPI Benchmark Suite V3/V4\" outputs, else 10^6)\n"
"  -iter N[,VOL]         the run's repetition rule (default 1000,40M)\n"
"  -fewer-reps-ok        allow fewer repetitions (IMB's -time cut them down)\n"
"  -expect NAME[@NP]     fail unless a table NAME (with NP processes) exists;\n"
"                        may be repeated\n"
"  -dump                 print the parsed tables\n"
"  -json                 print the parsed tables as JSON\n"
"  -q                    print only problems\n"
"Exit status: 0 all sane, 1 violations, 2 bad arguments or unreadable input.\n");
}

struct ctx {
	const char *file;
	size_t n;
};

static void on_violation(void *vctx, const struct imb_table *t, const struct imb_row *r,
			 const char *msg)
{
	struct ctx *c = vctx;

	c->n++;
	fprintf(stderr, "%s:%d: %s (#processes = %d): %s\n", c->file, r ? r->line : t->line,
		t->name, t->nprocs, msg);
}

static void dump(const struct imb_output *o)
{
	printf("source %s\nsuite %s\ntables %zu\nignored_lines %zu\n", o->source,
	       o->suite[0] ? o->suite : "?", o->ntables, o->ignored_lines);
	for (size_t i = 0; i < o->ntables; i++) {
		const struct imb_table *t = &o->tables[i];

		printf("table %s%s nprocs=%d waiting=%d line=%d columns=", t->multi ? "Multi-" : "",
		       t->name, t->nprocs, t->waiting, t->line);
		for (int c = 0; c < t->ncols; c++)
			printf("%s%s", c ? "," : "", imb_col_name(t->cols[c]));
		printf("\n");
		for (size_t j = 0; j < t->nrows; j++) {
			const struct imb_row *r = &t->rows[j];

			printf(" ");
			for (int c = 0; c < t->ncols; c++) {
				double v = r->v[t->cols[c]];

				if (v < 0)
					continue;
				if (t->cols[c] <= IMB_COL_REPS)
					printf(" %lld", (long long)v);
				else
					printf(" %.2f", v);
			}
			if (r->failure)
				printf(" FAILED: %s", r->failure);
			printf("\n");
		}
	}
}

static int parse_expect(const char *s, char *name, size_t len, int *np)
{
	const char *at = strchr(s, '@');
	long long v = 0;

	snprintf(name, len, "%.*s", at ? (int)(at - s) : (int)strlen(s), s);
	if (!*name)
		return -1;
	if (at && parse_ll(at + 1, 1, 1000000000, &v) < 0)
		return -1;
	*np = (int)v;
	return 0;
}

struct args {
	struct imb_check_opts opts;
	const char *files[256], *expects[64];
	size_t nfiles, nexpects;
	bool want_dump, want_json, quiet, mb_auto;
};

static int opt_mb(struct args *a, const char *v)
{
	if (!strcmp(v, "auto")) {
		a->mb_auto = true;
	} else if (!strcmp(v, "1e6") || !strcmp(v, "1000000")) {
		a->mb_auto = false;
		a->opts.mbyte = 1e6;
	} else if (!strcmp(v, "1048576")) {
		a->mb_auto = false;
		a->opts.mbyte = 1048576;
	} else {
		fprintf(stderr, ME ": -mb '%s': expected auto, 1e6 or 1048576\n", v);
		return -1;
	}
	return 0;
}

static int opt_iter(struct args *a, const char *v)
{
	const char *comma = strchr(v, ',');
	char n[24];
	long long x;
	uint64_t vol;

	snprintf(n, sizeof(n), "%.*s", comma ? (int)(comma - v) : (int)strlen(v), v);
	if (parse_ll(n, 1, 1000000000, &x) < 0 ||
	    (comma && (parse_size(comma + 1, &vol) < 0 || vol < 1))) {
		fprintf(stderr, ME ": -iter '%s': expected N[,VOL], e.g. 1000,40M\n", v);
		return -1;
	}
	a->opts.max_reps = x;
	if (comma)
		a->opts.overall_vol = (long long)vol;
	return 0;
}

static int opt_expect(struct args *a, const char *v)
{
	char name[64];
	int np;

	if (parse_expect(v, name, sizeof(name), &np) < 0) {
		fprintf(stderr, ME ": -expect '%s': expected NAME or NAME@NP\n", v);
		return -1;
	}
	if (a->nexpects == sizeof(a->expects) / sizeof(a->expects[0])) {
		fprintf(stderr, ME ": too many -expect\n");
		return -1;
	}
	a->expects[a->nexpects++] = v;
	return 0;
}

/* The options that take the next argument: 1 if O is none of them. */
static int opt_value(struct args *a, const char *o, const char *v)
{
	if (!strcmp(o, "-mb"))
		return opt_mb(a, v);
	if (!strcmp(o, "-iter"))
		return opt_iter(a, v);
	if (!strcmp(o, "-expect"))
		return opt_expect(a, v);
	return 1;
}

static bool *opt_flag(struct args *a, const char *o)
{
	if (!strcmp(o, "-fewer-reps-ok"))
		return &a->opts.fewer_reps_ok;
	if (!strcmp(o, "-dump"))
		return &a->want_dump;
	if (!strcmp(o, "-json"))
		return &a->want_json;
	if (!strcmp(o, "-q"))
		return &a->quiet;
	return NULL;
}

/* 0 to go on, 1 after -help, -1 on a bad argument (said). */
static int parse_args(struct args *a, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const char *o = arg[0] == '-' && arg[1] == '-' ? arg + 1 : arg;
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool *flag = opt_flag(a, o);
		int r;

		if (!strcmp(o, "-h") || !strcmp(o, "-help")) {
			usage(stdout);
			return 1;
		} else if (v && (r = opt_value(a, o, v)) <= 0) {
			if (r < 0)
				return -1;
			i++;
		} else if (flag) {
			*flag = true;
		} else if (arg[0] == '-' && arg[1]) {
			fprintf(stderr, ME ": %s option '%s' (see -help)\n",
				!strcmp(o, "-mb") || !strcmp(o, "-iter") || !strcmp(o, "-expect")
					? "missing value for" : "unknown", arg);
			return -1;
		} else if (a->nfiles == sizeof(a->files) / sizeof(a->files[0])) {
			fprintf(stderr, ME ": too many files\n");
			return -1;
		} else {
			a->files[a->nfiles++] = arg;
		}
	}
	if (a->nfiles == 0) {
		fprintf(stderr, ME ": no input file (see -help)\n");
		return -1;
	}
	return 0;
}

/* Counts the -expect tables that FILE's output lacks, saying which. */
static void check_expects(const struct args *a, const struct imb_output *out, struct ctx *c)
{
	for (size_t e = 0; e < a->nexpects; e++) {
		char name[64];
		int np = 0;

		parse_expect(a->expects[e], name, sizeof(name), &np);
		if (!imb_find(out, name, np)) {
			fprintf(stderr, "%s: no table %s%s%.0d found\n", c->file, name,
				np ? " with #processes = " : "", np);
			c->n++;
		}
	}
}

/* The exit status for one file: 0 sane, 1 violations, 2 unreadable. */
static int check_file(struct args *a, const char *file)
{
	struct imb_output out;
	struct verr err;
	struct ctx c = { .file = strcmp(file, "-") ? file : "<stdin>" };
	size_t rows = 0;

	if (imb_parse_file(file, &out, &err) < 0) {
		fprintf(stderr, ME ": %s\n", err.msg);
		return 2;
	}
	if (a->mb_auto)
		a->opts.mbyte = imb_guess_mbyte(&out);
	if (a->want_dump)
		dump(&out);
	if (a->want_json) {
		char *js = imb_output_json(&out);

		if (js)
			printf("%s\n", js);
		free(js);
	}
	imb_check(&out, &a->opts, on_violation, &c);
	check_expects(a, &out, &c);
	for (size_t t = 0; t < out.ntables; t++)
		rows += out.tables[t].nrows;
	if (c.n)
		printf("%s: %zu problem(s) in %zu tables, %zu rows\n", c.file, c.n,
		       out.ntables, rows);
	else if (!a->quiet)
		printf("%s: %zu tables, %zu rows: sane\n", c.file, out.ntables, rows);
	imb_output_free(&out);
	return c.n ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct args a = { .mb_auto = true };
	int status = 0, r;

	imb_check_defaults(&a.opts);
	r = parse_args(&a, argc, argv);
	if (r)
		return r > 0 ? 0 : 2;
	for (size_t f = 0; f < a.nfiles; f++) {
		r = check_file(&a, a.files[f]);
		if (r > status)
			status = r;
	}
	return status;
}
