/*
 * Slurm's compact lists, as its environment variables carry them:
 * hostlists ("n[1-3,07-08],gpu1") and counts per node ("2(x3),1").  Own
 * code because vhpc-slurmjob and `vhpc mpirun` link no part of Slurm (and
 * neither does the plugin: its symbols are Slurm's to resolve).
 */
#include "slurm/slurm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOSTS   VS_MAX_NODES
#define MAX_NAME    64
#define MAX_GROUPS  4

struct names {
	char (*v)[MAX_NAME];
	int n;
};

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
	       c == '.';
}

static int add(struct names *o, const char *s, char *why, size_t len)
{
	if (o->n == MAX_HOSTS)
		return vs_fail(why, len, "more than %d hosts", MAX_HOSTS);
	if (!*s || strlen(s) >= MAX_NAME)
		return vs_fail(why, len, "host name '%.70s': empty or longer than %d", s, MAX_NAME - 1);
	snprintf(o->v[o->n++], MAX_NAME, "%s", s);
	return 0;
}

/* One decimal bound of a range; *width its digits (for zero padding). */
static int bound(const char **p, long *v, int *width)
{
	const char *s = *p;
	long x = 0;

	while (**p >= '0' && **p <= '9') {
		x = x * 10 + (**p - '0');
		if (x > 99999999)
			return -1;
		(*p)++;
	}
	if (*p == s)
		return -1;
	*v = x;
	*width = (int)(*p - s);
	return 0;
}

/* Expands expr (prefix[ranges]middle[ranges]...suffix) after what is
 * already in out[0..len). */
static int expand(const char *expr, char *out, size_t olen, struct names *o, int depth, char *why, size_t len)
{
	const char *lb = strchr(expr, '[');
	size_t pre;

	if (depth > MAX_GROUPS)
		return vs_fail(why, len, "more than %d [] groups in one host", MAX_GROUPS);
	if (!lb) {
		if (strchr(expr, ']'))
			return vs_fail(why, len, "']' without '['");
		if (olen + strlen(expr) >= MAX_NAME)
			return vs_fail(why, len, "host name longer than %d", MAX_NAME - 1);
		strcpy(out + olen, expr);
		return add(o, out, why, len);
	}
	pre = (size_t)(lb - expr);
	if (olen + pre >= MAX_NAME || memchr(expr, ']', pre))
		return vs_fail(why, len, "host name too long or ']' before '['");
	memcpy(out + olen, expr, pre);
	const char *p = lb + 1, *rb = strchr(p, ']');

	if (!rb)
		return vs_fail(why, len, "'[' without ']'");
	while (p < rb) {
		long lo, hi;
		int wlo, whi;

		(void)whi;

		if (bound(&p, &lo, &wlo) < 0)
			return vs_fail(why, len, "bad range in '[%.*s]'", (int)(rb - lb - 1), lb + 1);
		hi = lo;
		whi = wlo;
		if (*p == '-') {
			p++;
			if (bound(&p, &hi, &whi) < 0 || hi < lo)
				return vs_fail(why, len, "bad range in '[%.*s]'", (int)(rb - lb - 1), lb + 1);
		}
		if (*p != ',' && p != rb)
			return vs_fail(why, len, "bad range in '[%.*s]'", (int)(rb - lb - 1), lb + 1);
		if (*p == ',')
			p++;
		if (hi - lo >= MAX_HOSTS)
			return vs_fail(why, len, "more than %d hosts", MAX_HOSTS);
		for (long x = lo; x <= hi; x++) {
			int w = snprintf(out + olen + pre, MAX_NAME - olen - pre, "%0*ld", wlo, x);

			if (w < 0 || olen + pre + (size_t)w >= MAX_NAME)
				return vs_fail(why, len, "host name longer than %d", MAX_NAME - 1);
			if (expand(rb + 1, out, olen + pre + (size_t)w, o, depth + 1, why, len) < 0)
				return -1;
		}
	}
	return 0;
}

int vs_hostlist_expand(const char *s, char ***names, int *n, char *why, size_t len)
{
	struct names o = { 0 };
	char *copy, *p, buf[MAX_NAME];
	int depth = 0, rc = -1;
	char **v;

	*names = NULL;
	*n = 0;
	if (!s || !*s || strlen(s) > (1u << 20))
		return vs_fail(why, len, "empty or too long");
	for (p = (char *)s; *p; p++)
		if (!name_char(*p) && *p != '[' && *p != ']' && *p != ',')
			return vs_fail(why, len, "character '%c' (0x%02x) in a host list", *p > 32 && *p < 127 ? *p : '?',
				   (unsigned char)*p);
	if (!(o.v = malloc(sizeof(*o.v) * MAX_HOSTS)) || !(copy = strdup(s))) {
		free(o.v);
		return vs_fail(why, len, "out of memory");
	}
	/* Split at the commas outside brackets. */
	for (char *start = copy, *q = copy;; q++) {
		if (*q == '[')
			depth++;
		else if (*q == ']')
			depth--;
		if (depth < 0 || depth > 1) {
			vs_fail(why, len, "unbalanced brackets");
			goto out;
		}
		if ((*q == ',' && depth == 0) || !*q) {
			bool end = !*q;

			*q = 0;
			if (expand(start, buf, 0, &o, 0, why, len) < 0)
				goto out;
			if (end)
				break;
			start = q + 1;
		}
	}
	if (depth) {
		vs_fail(why, len, "unbalanced brackets");
		goto out;
	}
	/* One block: the pointers, then the names. */
	v = malloc(sizeof(char *) * (size_t)o.n + (size_t)o.n * MAX_NAME);
	if (!v) {
		vs_fail(why, len, "out of memory");
		goto out;
	}
	for (int i = 0; i < o.n; i++) {
		v[i] = (char *)(v + o.n) + (size_t)i * MAX_NAME;
		memcpy(v[i], o.v[i], MAX_NAME);
	}
	*names = v;
	*n = o.n;
	rc = 0;
out:
	free(copy);
	free(o.v);
	return rc;
}

int vs_cpus_per_node(const char *s, int *out, int max, int *n, char *why, size_t len)
{
	const char *p = s;

	*n = 0;
	if (!s || !*s)
		return vs_fail(why, len, "empty");
	for (;;) {
		long c, rep = 1;
		int w;

		if (bound(&p, &c, &w) < 0 || c < 1 || c > 1 << 20)
			return vs_fail(why, len, "'%.40s': expected COUNT[(xREPEAT)],...", s);
		if (*p == '(') {
			if (p[1] != 'x')
				return vs_fail(why, len, "'%.40s': expected (xREPEAT)", s);
			p += 2;
			if (bound(&p, &rep, &w) < 0 || rep < 1 || *p != ')')
				return vs_fail(why, len, "'%.40s': expected (xREPEAT)", s);
			p++;
		}
		if (rep > max - *n)
			return vs_fail(why, len, "'%.40s': more than %d nodes", s, max);
		for (long i = 0; i < rep; i++)
			out[(*n)++] = (int)c;
		if (!*p)
			return 0;
		if (*p++ != ',')
			return vs_fail(why, len, "'%.40s': expected ',' between counts", s);
	}
}
