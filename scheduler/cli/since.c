/* Ages, dates and times for `vhpc history --since` (since.h). */
#include "since.h"

#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ages beyond a century are typos. */
#define AGE_MAX (100ll * 366 * 86400)

static const char forms[] = "an age (90s, 30m, 2h, 1d, 1w, 1h30m), a date (2026-12-05), a date and time "
			    "(2026-12-05T14:30[:SS], local time, or UTC with Z) or @UNIXTIME";

static int bad(const char *t, const char *what, char *why, size_t len)
{
	snprintf(why, len, "'%.80s': %s; expected %s", t, what, forms);
	return -1;
}

static int age(const char *t, time_t now, int64_t *out, char *why, size_t len)
{
	long long total = 0;
	const char *p = t;

	while (*p) {
		long long n = 0, unit;

		if (!isdigit((unsigned char)*p))
			return bad(t, "an age is numbers each followed by s, m, h, d or w", why, len);
		while (isdigit((unsigned char)*p)) {
			n = n * 10 + (*p++ - '0');
			if (n > AGE_MAX)
				return bad(t, "more than a hundred years ago", why, len);
		}
		switch (*p++) {
		case 's': unit = 1; break;
		case 'm': unit = 60; break;
		case 'h': unit = 3600; break;
		case 'd': unit = 86400; break;
		case 'w': unit = 7 * 86400; break;
		default: return bad(t, "an age is numbers each followed by s, m, h, d or w", why, len);
		}
		total += n * unit;
		if (total > AGE_MAX)
			return bad(t, "more than a hundred years ago", why, len);
	}
	*out = (int64_t)now - total;
	return 0;
}

/* YYYY-MM-DD[(T| )HH:MM[:SS]][Z], checked by converting back. */
static int date_time(const char *t, int64_t *out, char *why, size_t len)
{
	int y, mo, d, h = 0, mi = 0, s = 0, used = 0, n;
	struct tm tm = { 0 }, back;
	bool utc = false;
	const char *p;
	time_t v;

	if (sscanf(t, "%4d-%2d-%2d%n", &y, &mo, &d, &used) != 3 || used != 10)
		return bad(t, "not a time", why, len);
	p = t + used;
	if ((*p == 'T' || *p == ' ') && p[1]) {
		n = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &h, &mi, &n) != 2 || n != 5)
			return bad(t, "the time of day is HH:MM or HH:MM:SS", why, len);
		p += 1 + n;
		if (*p == ':') {
			n = 0;
			if (sscanf(p + 1, "%2d%n", &s, &n) != 1 || n != 2)
				return bad(t, "the time of day is HH:MM or HH:MM:SS", why, len);
			p += 1 + n;
		}
	}
	if (*p == 'Z') {
		utc = true;
		p++;
	}
	if (*p)
		return bad(t, "something follows the date and time", why, len);
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	tm.tm_isdst = -1;
	back = tm;
	v = utc ? timegm(&back) : mktime(&back);
	/* mktime moves 2026-02-30 to March: such a date does not exist.  (A
	 * local time in a daylight-saving gap moves by the shift: the hour
	 * is then compared as what it became.) */
	if (v == (time_t)-1 || back.tm_year != tm.tm_year || back.tm_mon != tm.tm_mon || back.tm_mday != tm.tm_mday ||
	    back.tm_min != tm.tm_min || back.tm_sec != tm.tm_sec || h > 23)
		return bad(t, "no such date or time", why, len);
	*out = (int64_t)v;
	return 0;
}

int since_parse(const char *t, time_t now, int64_t *out, char *why, size_t len)
{
	if (!t || !*t)
		return bad(t ? t : "", "empty", why, len);
	if (t[0] == '@') {
		char *end;
		long long v;

		if (!isdigit((unsigned char)t[1]))
			return bad(t, "@ is followed by seconds since 1970", why, len);
		v = strtoll(t + 1, &end, 10);
		if (*end || v > (1ll << 40))
			return bad(t, "@ is followed by seconds since 1970", why, len);
		*out = v;
		return 0;
	}
	if (strspn(t, "0123456789") == 4 && t[4] == '-')
		return date_time(t, out, why, len);
	return age(t, now, out, why, len);
}
