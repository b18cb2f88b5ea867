/* vhpc-mpibench command line, message sizes and process counts. */
#include "lib/err.h"
#include "lib/parse.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/bench.h"
#include "opts.h"

const char *const mb_bench_names[MB_NBENCH] = {
	"PingPong", "PingPing", "Sendrecv", "Exchange", "Allreduce", "Bcast", "Barrier",
};

int mb_bench_lookup(const char *name)
{
	for (int i = 0; i < MB_NBENCH; i++)
		if (!strcasecmp(name, mb_bench_names[i]))
			return i;
	return -1;
}

void mb_opts_defaults(struct mb_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->msglog_min = 0;
	o->msglog_max = IMB_MAX_MSGLOG;
	o->max_size = -1;
	o->zero_size = true;
	o->sync = true;
	o->iter = IMB_MSGS_PER_SAMPLE;
	o->overall_vol = IMB_OVERALL_VOL;
	o->npmin = 2;
}

void mb_usage(FILE *f)
{
	fprintf(f,
"usage: vhpc-mpibench [options] [benchmark ...]\n"
"IMB-MPI1-compatible MPI benchmarks; run under mpirun.  Benchmarks (case-\n"
"insensitive; default all): PingPong PingPing Sendrecv Exchange Allreduce\n"
"Bcast Barrier.  Output is IMB-MPI1's format.\n"
"\n"
"  -msglog [MIN:]MAX   message sizes 0, 2^MIN .. 2^MAX (default 0:22, MAX <= %d)\n"
"  -msglen FILE        message sizes from FILE, one per line (K/M/G suffixes)\n"
"  -minsize SIZE       drop sizes below SIZE (e.g. 1, 64K)\n"
"  -maxsize SIZE       drop sizes above SIZE (e.g. 4M)\n"
"  -zero_size 0|1      whether to run size 0 (default 1)\n"
"  -sync 0|1           MPI_Barrier after each Allreduce and Bcast, outside\n"
"                      the time (default 1, as IMB)\n"
"  -iter N[,VOL]       repetitions per size: min(N, VOL / size), at least 1\n"
"                      (default 1000,40M)\n"
"  -npmin P            run multi-process benchmarks on P, 2P, 4P, ... and np\n"
"                      processes (default 2)\n"
"  -np-only            run multi-process benchmarks only on all np processes\n"
"  -include A[,B..]    add benchmarks;  -exclude A[,B..]  leave benchmarks out\n"
"  -check              fill every message with a pattern of (sender, size,\n"
"                      repetition), verify every received byte; a \"defects\"\n"
"                      column counts wrong bytes; exit 1 on any\n"
"  -show-hosts         print each rank's host, namespaces, CPU and pid\n"
"  -h, -help           this text\n"
"\n"
"Each size: a warm-up (10%% of the repetitions), two MPI_Barrier, then the\n"
"timed repetitions; Allreduce and Bcast time each call alone, as IMB does,\n"
"so the barrier after it is not counted; t_min/t_max/t_avg are over the\n"
"active ranks;\n"
"Mbytes/sec = factor x bytes / t_max with 10^6 bytes per MB (PingPong and\n"
"PingPing 1, Sendrecv 2, Exchange 4).  PingPong reports half a round trip.\n"
"Exit status: 0 ok, 1 data check failed or a run error, 2 bad arguments.\n",
		MB_MAX_MSGLOG);
}

static int bench_list(const char *list, struct mb_opts *o, bool on, struct verr *err)
{
	char *dup = strdup(list), *save = NULL, *tok;
	int rc = 0;

	if (!dup)
		return verr_set(err, "out of memory");
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int b = mb_bench_lookup(tok);

		if (b < 0) {
			rc = verr_set(err, "unknown benchmark '%s' (known: PingPong, PingPing, Sendrecv, Exchange, Allreduce, Bcast, Barrier)",
				      tok);
			break;
		}
		o->run[b] = on;
	}
	free(dup);
	return rc;
}

static int parse_msglog(const char *v, struct mb_opts *o, struct verr *err)
{
	const char *colon = strchr(v, ':');
	long long a = 0, b;
	char lo[16];

	if (colon) {
		if ((size_t)(colon - v) >= sizeof(lo))
			return verr_set(err, "-msglog '%s': expected [MIN:]MAX, e.g. 0:22", v);
		memcpy(lo, v, (size_t)(colon - v));
		lo[colon - v] = 0;
		if (parse_ll(lo, 0, MB_MAX_MSGLOG, &a) < 0)
			return verr_set(err, "-msglog '%s': MIN must be an integer 0..%d", v, MB_MAX_MSGLOG);
		v = colon + 1;
	}
	if (parse_ll(v, 0, MB_MAX_MSGLOG, &b) < 0)
		return verr_set(err, "-msglog: MAX '%s' must be an integer 0..%d", v, MB_MAX_MSGLOG);
	if (a > b)
		return verr_set(err, "-msglog %lld:%lld: MIN is larger than MAX", a, b);
	o->msglog_min = (int)a;
	o->msglog_max = (int)b;
	o->msglog_set = true;
	return 0;
}

static int size_arg(const char *opt, const char *v, long long *out, struct verr *err)
{
	uint64_t s;

	if (parse_size(v, &s) < 0 || s > (uint64_t)MB_MAX_SIZE)
		return verr_set(err, "%s '%s': expected a size in bytes up to 1G (e.g. 4096, 64K, 4M)",
				opt, v);
	*out = (long long)s;
	return 0;
}

static int parse_iter(const char *v, struct mb_opts *o, struct verr *err)
{
	const char *comma = strchr(v, ',');
	char n[24];
	uint64_t vol;
	long long x;

	if (comma && (size_t)(comma - v) >= sizeof(n))
		return verr_set(err, "-iter '%s': expected N[,VOL], e.g. 1000,40M", v);
	snprintf(n, sizeof(n), "%.*s", comma ? (int)(comma - v) : (int)strlen(v), v);
	if (parse_ll(n, 1, 1000000000, &x) < 0)
		return verr_set(err, "-iter '%s': N must be an integer 1..1000000000", v);
	o->iter = x;
	if (comma) {
		if (parse_size(comma + 1, &vol) < 0 || vol < 1 || vol > (1ULL << 50))
			return verr_set(err, "-iter '%s': VOL must be a size in bytes (e.g. 40M)", v);
		o->overall_vol = (long long)vol;
	}
	return 0;
}

enum { A_NONE, A_VALUE };
static const struct { const char *name; int arg; } options[] = {
	{ "h", A_NONE }, { "help", A_NONE }, { "msglog", A_VALUE }, { "msglen", A_VALUE },
	{ "minsize", A_VALUE }, { "maxsize", A_VALUE }, { "zero_size", A_VALUE },
	{ "sync", A_VALUE }, { "iter", A_VALUE }, { "npmin", A_VALUE }, { "np-only", A_NONE },
	{ "include", A_VALUE }, { "exclude", A_VALUE }, { "check", A_NONE },
	{ "show-hosts", A_NONE },
};

/* IMB-MPI1 options this program does not implement: named as such, so an
 * IMB command line fails with a reason rather than "unknown option". */
static const char *const imb_unsupported[] = {
	"time", "mem", "multi", "off_cache", "map", "input", "root_shift",
	"imb_barrier", "thread_level", "iter_policy", "data_type", "red_data_type",
	"contig_type", "warm_up", "mem_alloc_type", "msgsz", NULL,
};

static int one_option(const char *name, const char *v, struct mb_opts *o, bool *any_bench,
		      struct verr *err)
{
	long long x;

	if (!strcmp(name, "h") || !strcmp(name, "help")) {
		o->help = true;
	} else if (!strcmp(name, "msglog")) {
		return parse_msglog(v, o, err);
	} else if (!strcmp(name, "msglen")) {
		if (!*v)
			return verr_set(err, "-msglen needs a file name");
		o->msglen_file = v;
	} else if (!strcmp(name, "minsize")) {
		return size_arg("-minsize", v, &o->min_size, err);
	} else if (!strcmp(name, "maxsize")) {
		return size_arg("-maxsize", v, &o->max_size, err);
	} else if (!strcmp(name, "zero_size") || !strcmp(name, "sync")) {
		bool *flag = name[0] == 'z' ? &o->zero_size : &o->sync;

		if (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes"))
			*flag = true;
		else if (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no"))
			*flag = false;
		else
			return verr_set(err, "-%s '%s': expected 0 or 1", name, v);
	} else if (!strcmp(name, "iter")) {
		return parse_iter(v, o, err);
	} else if (!strcmp(name, "npmin")) {
		if (parse_ll(v, 1, 1000000, &x) < 0)
			return verr_set(err, "-npmin '%s': expected an integer 1..1000000", v);
		o->npmin = (int)x;
	} else if (!strcmp(name, "np-only")) {
		o->np_only = true;
	} else if (!strcmp(name, "include") || !strcmp(name, "exclude")) {
		bool inc = name[0] == 'i';

		/* -exclude alone means "all but these"; -include adds to a list. */
		if (!inc && !*any_bench)
			for (int b = 0; b < MB_NBENCH; b++)
				o->run[b] = true;
		*any_bench = true;
		return bench_list(v, o, inc, err);
	} else if (!strcmp(name, "check")) {
		o->check = true;
	} else if (!strcmp(name, "show-hosts")) {
		o->show_hosts = true;
	}
	return 0;
}

/* The option's row in options[], or -1 (said) for one it does not have. */
static int find_option(const char *name, const char *word, struct verr *err)
{
	for (size_t k = 0; k < sizeof(options) / sizeof(options[0]); k++)
		if (!strcmp(options[k].name, name))
			return (int)k;
	for (int u = 0; imb_unsupported[u]; u++)
		if (!strcmp(imb_unsupported[u], name))
			return verr_set(err, "IMB option -%s is not supported by vhpc-mpibench (see -help)",
					name);
	return verr_set(err, "unknown option '%.40s' (see -help)", word);
}

/* One -name, --name, -name=VALUE or -name VALUE; *i advances past a
 * separate value. */
static int option_word(int argc, char **argv, int *i, struct mb_opts *o, bool *any_bench,
		       struct verr *err)
{
	const char *a = argv[*i];
	char name[32];
	const char *n = a + (a[1] == '-' ? 2 : 1), *eq = strchr(n, '='), *v = NULL;
	size_t len = eq ? (size_t)(eq - n) : strlen(n);
	int k;

	if (len == 0 || len >= sizeof(name))
		return verr_set(err, "unknown option '%.40s' (see -help)", a);
	memcpy(name, n, len);
	name[len] = 0;
	if ((k = find_option(name, a, err)) < 0)
		return -1;
	if (options[k].arg == A_VALUE) {
		if (eq)
			v = eq + 1;
		else if (*i + 1 < argc)
			v = argv[++*i];
		else
			return verr_set(err, "option -%s needs a value (see -help)", name);
	} else if (eq) {
		return verr_set(err, "option -%s takes no value", name);
	}
	return one_option(name, v, o, any_bench, err);
}

/* What is left to run, and options that each make sense but not together. */
static int check_combination(struct mb_opts *o, bool any_bench, struct verr *err)
{
	int n = 0;

	if (!any_bench)
		for (int b = 0; b < MB_NBENCH; b++)
			o->run[b] = true;
	for (int b = 0; b < MB_NBENCH; b++)
		n += o->run[b];
	if (n == 0)
		return verr_set(err, "no benchmark left to run (-exclude removed all that were named)");
	if (o->msglen_file && o->msglog_set)
		return verr_set(err, "give either -msglog or -msglen, not both");
	if (o->max_size >= 0 && o->min_size > o->max_size)
		return verr_set(err, "-minsize %lld is larger than -maxsize %lld", o->min_size,
				o->max_size);
	return 0;
}

int mb_parse_args(int argc, char **argv, struct mb_opts *o, struct verr *err)
{
	bool any_bench = false;

	mb_opts_defaults(o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (a[0] == '-' && a[1]) {
			if (option_word(argc, argv, &i, o, &any_bench, err) < 0)
				return -1;
			continue;
		}
		if (bench_list(a, o, true, err) < 0)
			return -1;
		any_bench = true;
	}
	return check_combination(o, any_bench, err);
}

int mb_parse_msglen(const char *name, const char *text, long long **lens, size_t *n,
		    struct verr *err)
{
	char *dup = strdup(text), *line, *save = NULL;
	long long *v = NULL;
	size_t cnt = 0;
	int lineno = 0, rc = 0;

	*lens = NULL;
	*n = 0;
	if (!dup)
		return verr_set(err, "out of memory");
	/* strtok_r would merge empty lines and lose the line numbers. */
	for (line = dup; line; line = save) {
		char *e, *hash;
		long long x = 0;

		save = strchr(line, '\n');
		if (save)
			*save++ = 0;
		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		while (*line && isspace((unsigned char)*line))
			line++;
		for (e = line + strlen(line); e > line && isspace((unsigned char)e[-1]); e--)
			;
		*e = 0;
		if (!*line)
			continue;
		if (size_arg("length", line, &x, err) < 0) {
			rc = verr_wrap(err, "%s:%d", name, lineno);
			break;
		}
		if (cnt >= MB_MAX_SIZES) {
			rc = verr_set(err, "%s:%d: more than %d lengths", name, lineno, MB_MAX_SIZES);
			break;
		}
		if (cnt % 64 == 0) {
			long long *nv = realloc(v, (cnt + 64) * sizeof(*v));

			if (!nv) {
				rc = verr_set(err, "out of memory");
				break;
			}
			v = nv;
		}
		v[cnt++] = x;
	}
	free(dup);
	if (rc == 0 && cnt == 0)
		rc = verr_set(err, "%s: no message lengths in the file", name);
	if (rc < 0) {
		free(v);
		return -1;
	}
	*lens = v;
	*n = cnt;
	return 0;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

int mb_sizes(const struct mb_opts *o, const long long *lens, size_t nlens,
	     long long **sizes, size_t *n, struct verr *err)
{
	long long *v = malloc((nlens + MB_MAX_MSGLOG + 2) * sizeof(*v));
	size_t cnt = 0, out = 0;

	*sizes = NULL;
	*n = 0;
	if (!v)
		return verr_set(err, "out of memory");
	if (lens) {
		memcpy(v, lens, nlens * sizeof(*v));
		cnt = nlens;
	} else {
		v[cnt++] = 0;
		for (int l = o->msglog_min; l <= o->msglog_max; l++)
			v[cnt++] = 1LL << l;
	}
	qsort(v, cnt, sizeof(*v), cmp_ll);
	for (size_t i = 0; i < cnt; i++) {
		if (out && v[out - 1] == v[i])
			continue;
		if (v[i] == 0 && !o->zero_size)
			continue;
		if (v[i] < o->min_size || (o->max_size >= 0 && v[i] > o->max_size))
			continue;
		v[out++] = v[i];
	}
	if (out == 0) {
		free(v);
		return verr_set(err, "no message sizes left to run (check -msglog/-msglen, -minsize, -maxsize, -zero_size)");
	}
	*sizes = v;
	*n = out;
	return 0;
}

int mb_proc_counts(int np, int npmin, bool np_only, int *counts, int max)
{
	int n = 0;

	if (max < 1)
		return 0;
	if (!np_only)
		for (long long p = npmin; p < np && n < max - 1; p *= 2)
			counts[n++] = (int)p;
	counts[n++] = np;
	return n;
}

long long mb_warmup_reps(long long reps)
{
	return reps / 10 > 1 ? reps / 10 : 1;
}
