/*
 * Sizes, integers, cpulists and identifiers from and to text.
 */
#include "lib/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int parse_ll(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 0: break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -1;
	}
	if (shift) {
		if (!strcmp(end, "i") || !strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
	} else if (!strcmp(end, "B")) {
		end++;
	}
	if (*end)
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.*f %s", v == (long long)v ? 0 : 1, v, units[u]);
	return buf;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

int cpulist_parse(const char *s, int *ids, size_t max, size_t *n)
{
	size_t cnt = 0;
	const char *p = s;

	while (*p == ' ' || *p == '\n')
		p++;
	while (*p && *p != '\n') {
		char *end;
		long a, b;

		errno = 0;
		a = strtol(p, &end, 10);
		if (end == p || errno || a < 0 || a > 65535)
			return -1;
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			b = strtol(p, &end, 10);
			if (end == p || errno || b < a || b > 65535)
				return -1;
			p = end;
		}
		for (long i = a; i <= b; i++) {
			if (cnt == max)
				return -1;
			ids[cnt++] = (int)i;
		}
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -1;
	}
	qsort(ids, cnt, sizeof(*ids), cmp_int);
	size_t u = 0;
	for (size_t i = 0; i < cnt; i++)
		if (u == 0 || ids[u - 1] != ids[i])
			ids[u++] = ids[i];
	*n = u;
	return 0;
}

const char *cpulist_format(const int *ids, size_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		int w;

		while (j + 1 < n && ids[j + 1] == ids[j] + 1)
			j++;
		if (j == i)
			w = snprintf(buf + off, len - off, "%s%d", off ? "," : "", ids[i]);
		else
			w = snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", ids[i], ids[j]);
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += w;
		i = j + 1;
	}
	return buf;
}

bool ident_ok(const char *s, size_t max)
{
	size_t n;

	if (!s || !*s)
		return false;
	n = strlen(s);
	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
			return false;
	}
	return true;
}
