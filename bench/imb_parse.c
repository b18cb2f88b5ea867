/*
 * IMB-MPI1 output -> tables.
 *
 * IMB's output is line oriented: comment lines start with '#', a table opens
 * with "# Benchmarking NAME", a few comment lines describe the processes,
 * then one line of column names and one line per message size.  Real
 * outputs also carry launcher noise (warnings from mpirun, MPI startup
 * chatter), so lines that are plainly not IMB's are counted and skipped;
 * anything that claims to be part of a table must be well formed.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include <stdarg.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"

static const char *const col_names[IMB_NCOLS] = {
	[IMB_COL_GROUP] = "Group",
	[IMB_COL_BYTES] = "#bytes",
	[IMB_COL_REPS] = "#repetitions",
	[IMB_COL_T] = "t[usec]",
	[IMB_COL_TMIN] = "t_min[usec]",
	[IMB_COL_TMAX] = "t_max[usec]",
	[IMB_COL_TAVG] = "t_avg[usec]",
	[IMB_COL_MBPS] = "Mbytes/sec",
	[IMB_COL_MSGRATE] = "Msg/sec",
	[IMB_COL_DEFECTS] = "defects",
	[IMB_COL_T_OVRL] = "t_ovrl[usec]",
	[IMB_COL_T_PURE] = "t_pure[usec]",
	[IMB_COL_T_CPU] = "t_CPU[usec]",
	[IMB_COL_OVERLAP] = "overlap[%]",
};

const char *imb_col_name(enum imb_col c)
{
	return (unsigned)c < IMB_NCOLS ? col_names[c] : "?";
}

/* Integer columns; the others are fixed-point numbers. */
static bool col_is_int(enum imb_col c)
{
	return c == IMB_COL_GROUP || c == IMB_COL_BYTES || c == IMB_COL_REPS;
}

/* Texts IMB prints instead of numbers when a sample could not run. */
static const char *const failure_words[] = { "out-of-mem", "int-overflow", "time-out", NULL };

enum state { S_OUTSIDE, S_HEADER, S_ROWS };

struct parser {
	const char *name;
	struct imb_output *out;
	size_t cap_tables, cap_rows;
	enum state state;
	int line;
	struct verr *err;
};

static struct imb_table *cur(struct parser *p)
{
	return &p->out->tables[p->out->ntables - 1];
}

static int perr(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct parser *p, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return verr_set(p->err, "%s:%d: %s", p->name, p->line, msg);
}

static char *skip_ws(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

static void rtrim(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = 0;
}

/* Whether a token starts like a number (a row) rather than like a word. */
static bool numeric_start(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	if (*s == '.')
		s++;
	return isdigit((unsigned char)*s);
}

static int parse_value(struct parser *p, const char *tok, enum imb_col c, double *v)
{
	const struct imb_table *t = cur(p);
	char *end;

	if (col_is_int(c)) {
		long long x;

		for (const char *q = tok; *q; q++)
			if (!isdigit((unsigned char)*q))
				return perr(p, "%s: %s '%s' is not a non-negative integer",
					    t->name, col_names[c], tok);
		if (strlen(tok) > 15)
			return perr(p, "%s: %s '%s' is too large", t->name, col_names[c], tok);
		errno = 0;
		x = strtoll(tok, &end, 10);
		if (errno || *end)
			return perr(p, "%s: bad %s '%s'", t->name, col_names[c], tok);
		*v = (double)x;
		return 0;
	}
	/* strtod alone would take "nan", "inf" and hex floats; IMB prints none. */
	for (const char *q = tok; *q; q++)
		if (!isdigit((unsigned char)*q) && !strchr(".eE+-", *q))
			return perr(p, "%s: %s '%s' is not a number", t->name, col_names[c], tok);
	errno = 0;
	*v = strtod(tok, &end);
	if (errno || *end || end == tok || !isfinite(*v))
		return perr(p, "%s: %s '%s' is not a number", t->name, col_names[c], tok);
	if (*v < 0)
		return perr(p, "%s: %s %s is negative", t->name, col_names[c], tok);
	return 0;
}

static int new_table(struct parser *p, char *rest)
{
	struct imb_output *o = p->out;
	struct imb_table *t;
	char *name = skip_ws(rest), *e;
	bool multi = false;

	rtrim(name);
	if (!strncasecmp(name, "Multi-", 6)) {
		multi = true;
		name += 6;
	}
	for (e = name; *e && (isalnum((unsigned char)*e) || *e == '_' || *e == '-'); e++)
		;
	if (e == name || *e || e - name >= (long)sizeof(t->name))
		return perr(p, "'# Benchmarking' needs a benchmark name (letters, digits, '_', '-'), got '%.64s'",
			    name);
	if (o->ntables >= IMB_MAX_TABLES)
		return perr(p, "more than %d tables", IMB_MAX_TABLES);
	if (o->ntables == p->cap_tables) {
		size_t nc = p->cap_tables ? 2 * p->cap_tables : 8;
		struct imb_table *nt = realloc(o->tables, nc * sizeof(*nt));

		if (!nt)
			return perr(p, "out of memory");
		o->tables = nt;
		p->cap_tables = nc;
	}
	t = &o->tables[o->ntables++];
	memset(t, 0, sizeof(*t));
	memcpy(t->name, name, (size_t)(e - name));
	t->multi = multi;
	t->ngroups = 1;
	t->line = p->line;
	p->cap_rows = 0;
	p->state = S_HEADER;
	return 0;
}

/* "N" at the start of s, 1..1e9; returns the rest via *end. */
static int count_at(const char *s, int *v, const char **end)
{
	long x;
	char *e;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	x = strtol(s, &e, 10);
	if (errno || x < 0 || x > 1000000000)
		return -1;
	*v = (int)x;
	*end = e;
	return 0;
}

/* Comment lines between "# Benchmarking" and the column header. */
static int header_comment(struct parser *p, char *body)
{
	struct imb_table *t = cur(p);
	const char *e;
	int n, m;

	if (!strncmp(body, "#processes", 10)) {
		const char *s = skip_ws(body + 10);

		if (*s != '=' || count_at(skip_ws((char *)s + 1), &n, &e) < 0 || n < 1)
			return perr(p, "%s: malformed '#processes' line", t->name);
		t->nprocs = n;
		return 0;
	}
	if (*body == '(') {
		const char *s = skip_ws(body + 1);

		if (count_at(s, &n, &e) < 0)
			return 0;
		s = skip_ws((char *)e);
		if (!strncmp(s, "additional process", 18)) {
			t->waiting = n;
		} else if (!strncmp(s, "groups of ", 10) &&
			   count_at(s + 10, &m, &e) == 0 && m >= 1) {
			t->ngroups = n;
			t->nprocs = m;
		}
	}
	/* Group member lists, "MODE:" blocks, rules: nothing to keep. */
	return 0;
}

static int column_header(struct parser *p, char *line)
{
	struct imb_table *t = cur(p);
	char *save = NULL, *tok;

	for (tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		int c;

		for (c = 0; c < IMB_NCOLS; c++)
			if (!strcasecmp(tok, col_names[c]))
				break;
		if (c == IMB_NCOLS)
			return perr(p, "%s: unknown column '%.40s' (IMB's are #bytes, #repetitions, t[usec], t_min[usec], t_max[usec], t_avg[usec], Mbytes/sec, ...)",
				    t->name, tok);
		if (imb_has(t, (enum imb_col)c))
			return perr(p, "%s: column '%s' appears twice", t->name, col_names[c]);
		t->cols[t->ncols++] = (enum imb_col)c;
		t->has |= 1u << c;
	}
	if (!imb_has(t, IMB_COL_REPS))
		return perr(p, "%s: column header has no #repetitions", t->name);
	p->state = S_ROWS;
	return 0;
}

static bool is_failure_text(const char *s)
{
	for (int i = 0; failure_words[i]; i++)
		if (!strncmp(s, failure_words[i], strlen(failure_words[i])))
			return true;
	return false;
}

static int add_row(struct parser *p, char *line)
{
	struct imb_table *t = cur(p);
	struct imb_row r;
	char *s = line;
	int i;

	memset(&r, 0, sizeof(r));
	for (i = 0; i < IMB_NCOLS; i++)
		r.v[i] = -1;
	r.line = p->line;
	for (i = 0;; i++) {
		char *tok, *e;

		s = skip_ws(s);
		if (!*s)
			break;
		for (e = s; *e && *e != ' ' && *e != '\t'; e++)
			;
		tok = s;
		if (i > 0 && !numeric_start(tok) && is_failure_text(tok)) {
			r.failure = strndup(tok, 200);
			if (!r.failure)
				return perr(p, "out of memory");
			break;
		}
		if (i >= t->ncols)
			return perr(p, "%s: row has more values than the %d columns of its header",
				    t->name, t->ncols);
		if (*e)
			*e++ = 0;
		if (parse_value(p, tok, t->cols[i], &r.v[t->cols[i]]) < 0)
			return -1;
		s = e;
	}
	if (!r.failure && i < t->ncols)
		return perr(p, "%s: row has %d values, its header has %d columns",
			    t->name, i, t->ncols);
	if (t->nrows >= IMB_MAX_ROWS) {
		free(r.failure);
		return perr(p, "%s: more than %d rows", t->name, IMB_MAX_ROWS);
	}
	if (t->nrows == p->cap_rows) {
		size_t nc = p->cap_rows ? 2 * p->cap_rows : 32;
		struct imb_row *nr = realloc(t->rows, nc * sizeof(*nr));

		if (!nr) {
			free(r.failure);
			return perr(p, "out of memory");
		}
		t->rows = nr;
		p->cap_rows = nc;
	}
	t->rows[t->nrows++] = r;
	return 0;
}

/* A title such as "Intel(R) MPI Benchmarks 2021.3, MPI-1 part". */
static void maybe_suite(struct parser *p, char *body)
{
	if (p->out->suite[0] || p->out->ntables)
		return;
	if (!strncasecmp(body, "Benchmarking", 12) || !strncasecmp(body, "List of", 7))
		return;
	if (!strcasestr(body, "Benchmark") && !strcasestr(body, "mpibench"))
		return;
	snprintf(p->out->suite, sizeof(p->out->suite), "%s", body);
}

static bool first_token_is(const char *s, const char *word)
{
	size_t n = strlen(word);

	return !strncasecmp(s, word, n) && (s[n] == 0 || s[n] == ' ' || s[n] == '\t');
}

static int end_table_check(struct parser *p)
{
	if (p->state == S_HEADER) {
		const struct imb_table *t = cur(p);

		return verr_set(p->err, "%s:%d: table %s has no column header before line %d",
				p->name, t->line, t->name, p->line);
	}
	return 0;
}

static int one_line(struct parser *p, char *line)
{
	char *s = skip_ws(line);

	rtrim(s);
	if (!*s)
		return 0;       /* blank lines separate groups in -multi tables */
	if (*s == '#') {
		char *body = skip_ws(s + 1);

		if (p->state == S_HEADER && (first_token_is(s, "#bytes") ||
					     first_token_is(s, "#repetitions")))
			return column_header(p, s);
		if (!strncmp(body, "Benchmarking ", 13) || !strcmp(body, "Benchmarking")) {
			if (end_table_check(p) < 0)
				return -1;
			return new_table(p, body + 12);
		}
		if (first_token_is(s, "#bytes") || first_token_is(s, "#repetitions"))
			return perr(p, "column header outside a table (no '# Benchmarking' before it)");
		if (p->state == S_ROWS)
			p->state = S_OUTSIDE;
		if (p->state == S_HEADER)
			return header_comment(p, body);
		maybe_suite(p, body);
		return 0;
	}
	if (p->state == S_HEADER && first_token_is(s, "Group"))
		return column_header(p, s);
	if (p->state == S_ROWS && numeric_start(s))
		return add_row(p, s);
	p->out->ignored_lines++;
	return 0;
}

void imb_output_free(struct imb_output *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->ntables; i++) {
		for (size_t j = 0; j < o->tables[i].nrows; j++)
			free(o->tables[i].rows[j].failure);
		free(o->tables[i].rows);
	}
	free(o->tables);
	memset(o, 0, sizeof(*o));
}

int imb_parse(const char *name, const char *text, size_t len,
	      struct imb_output *out, struct verr *err)
{
	struct parser p = { .name = name ? name : "<input>", .out = out, .err = err };
	const char *nul;
	char *buf, *line, *nl;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	snprintf(out->source, sizeof(out->source), "%s", p.name);
	if (len > IMB_MAX_INPUT)
		return verr_set(err, "%s: input of %zu bytes is larger than %u", p.name, len,
				IMB_MAX_INPUT);
	nul = memchr(text, 0, len);
	if (nul)
		return verr_set(err, "%s: binary data (NUL byte at offset %zu), not IMB output",
				p.name, (size_t)(nul - text));
	buf = malloc(len + 1);
	if (!buf)
		return verr_set(err, "%s: out of memory", p.name);
	memcpy(buf, text, len);
	buf[len] = 0;
	for (line = buf; line && rc == 0; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = 0;
		if (!*line && !nl)
			break;
		p.line++;
		if (*line && line[strlen(line) - 1] == '\r')
			line[strlen(line) - 1] = 0;
		rc = one_line(&p, line);
	}
	if (rc == 0) {
		p.line++;
		rc = end_table_check(&p);
	}
	if (rc == 0 && out->ntables == 0)
		rc = verr_set(err, "%s: no IMB benchmark table found (no '# Benchmarking' line)", p.name);
	free(buf);
	if (rc < 0) {
		imb_output_free(out);
		snprintf(out->source, sizeof(out->source), "%s", p.name);
	}
	return rc;
}

int imb_parse_file(const char *path, struct imb_output *out, struct verr *err)
{
	const char *name = strcmp(path, "-") ? path : "<stdin>";
	char *buf;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	if (read_file(strcmp(path, "-") ? path : "/dev/stdin", &buf, &len, IMB_MAX_INPUT, err) < 0)
		return -1;
	rc = imb_parse(name, buf, len, out, err);
	free(buf);
	return rc;
}

const struct imb_table *imb_find(const struct imb_output *o, const char *bench, int nprocs)
{
	for (size_t i = 0; i < o->ntables; i++)
		if (!strcasecmp(o->tables[i].name, bench) &&
		    (nprocs == 0 || o->tables[i].nprocs == nprocs))
			return &o->tables[i];
	return NULL;
}

double imb_row_tmax(const struct imb_table *t, const struct imb_row *r)
{
	if (imb_has(t, IMB_COL_TMAX))
		return r->v[IMB_COL_TMAX];
	if (imb_has(t, IMB_COL_T))
		return r->v[IMB_COL_T];
	return -1;
}

long long imb_row_bytes(const struct imb_table *t, const struct imb_row *r)
{
	return imb_has(t, IMB_COL_BYTES) ? (long long)r->v[IMB_COL_BYTES] : -1;
}
