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

int main(int argc, char **argv)
{
	struct imb_check_opts opts;
	const char *files[256], *expects[64];
	size_t nfiles = 0, nexpects = 0;
	bool want_dump = false, want_json = false, quiet = false, mb_auto = true;
	int status = 0;

	imb_check_defaults(&opts);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *o = a[0] == '-' && a[1] == '-' ? a + 1 : a;
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "-h") || !strcmp(o, "-help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(o, "-mb") && v) {
			i++;
			if (!strcmp(v, "auto")) {
				mb_auto = true;
			} else if (!strcmp(v, "1e6") || !strcmp(v, "1000000")) {
				mb_auto = false;
				opts.mbyte = 1e6;
			} else if (!strcmp(v, "1048576")) {
				mb_auto = false;
				opts.mbyte = 1048576;
			} else {
				fprintf(stderr, ME ": -mb '%s': expected auto, 1e6 or 1048576\n", v);
				return 2;
			}
		} else if (!strcmp(o, "-iter") && v) {
			const char *comma = strchr(v, ',');
			char n[24];
			long long x;
			uint64_t vol;

			i++;
			snprintf(n, sizeof(n), "%.*s", comma ? (int)(comma - v) : (int)strlen(v), v);
			if (parse_ll(n, 1, 1000000000, &x) < 0 ||
			    (comma && (parse_size(comma + 1, &vol) < 0 || vol < 1))) {
				fprintf(stderr, ME ": -iter '%s': expected N[,VOL], e.g. 1000,40M\n", v);
				return 2;
			}
			opts.max_reps = x;
			if (comma)
				opts.overall_vol = (long long)vol;
		} else if (!strcmp(o, "-fewer-reps-ok")) {
			opts.fewer_reps_ok = true;
		} else if (!strcmp(o, "-expect") && v) {
			char name[64];
			int np;

			i++;
			if (parse_expect(v, name, sizeof(name), &np) < 0) {
				fprintf(stderr, ME ": -expect '%s': expected NAME or NAME@NP\n", v);
				return 2;
			}
			if (nexpects == sizeof(expects) / sizeof(expects[0])) {
				fprintf(stderr, ME ": too many -expect\n");
				return 2;
			}
			expects[nexpects++] = v;
		} else if (!strcmp(o, "-dump")) {
			want_dump = true;
		} else if (!strcmp(o, "-json")) {
			want_json = true;
		} else if (!strcmp(o, "-q")) {
			quiet = true;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, ME ": %s option '%s' (see -help)\n",
				!strcmp(o, "-mb") || !strcmp(o, "-iter") || !strcmp(o, "-expect")
					? "missing value for" : "unknown", a);
			return 2;
		} else {
			if (nfiles == sizeof(files) / sizeof(files[0])) {
				fprintf(stderr, ME ": too many files\n");
				return 2;
			}
			files[nfiles++] = a;
		}
	}
	if (nfiles == 0) {
		fprintf(stderr, ME ": no input file (see -help)\n");
		return 2;
	}
	for (size_t f = 0; f < nfiles; f++) {
		struct imb_output out;
		struct verr err;
		struct ctx c = { .file = strcmp(files[f], "-") ? files[f] : "<stdin>" };
		size_t rows = 0;

		if (imb_parse_file(files[f], &out, &err) < 0) {
			fprintf(stderr, ME ": %s\n", err.msg);
			status = 2;
			continue;
		}
		if (mb_auto)
			opts.mbyte = imb_guess_mbyte(&out);
		if (want_dump)
			dump(&out);
		if (want_json) {
			char *js = imb_output_json(&out);

			if (js)
				printf("%s\n", js);
			free(js);
		}
		imb_check(&out, &opts, on_violation, &c);
		for (size_t e = 0; e < nexpects; e++) {
			char name[64];
			int np = 0;

			parse_expect(expects[e], name, sizeof(name), &np);
			if (!imb_find(&out, name, np)) {
				fprintf(stderr, "%s: no table %s%s%.0d found\n", c.file, name,
					np ? " with #processes = " : "", np);
				c.n++;
			}
		}
		for (size_t t = 0; t < out.ntables; t++)
			rows += out.tables[t].nrows;
		if (c.n && status < 1)
			status = 1;
		if (c.n)
			printf("%s: %zu problem(s) in %zu tables, %zu rows\n", c.file, c.n,
			       out.ntables, rows);
		else if (!quiet)
			printf("%s: %zu tables, %zu rows: sane\n", c.file, out.ntables, rows);
		imb_output_free(&out);
	}
	return status;
}
