/* Size lists: --sizes 1,64K,4M and --msglog [MIN:]MAX. */
#include "lib/err.h"
#include "lib/parse.h"
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

int bh_parse_sizes(const char *what, const char *list, long long min, long long max,
		   long long **out, size_t *n, struct verr *err)
{
	char *buf = strdup(list), *save = NULL;
	long long *v = NULL;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!buf)
		return verr_set(err, "out of memory");
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t s;
		long long *nv;

		if (k == 64) {
			verr_set(err, "%s: at most 64 sizes", what);
			goto fail;
		}
		if (parse_size(t, &s) < 0 || (long long)s < min || (long long)s > max) {
			char a[32], b[32];

			verr_set(err, "%s: expected sizes from %s to %s (such as 64K, 1M), got '%s'", what,
				 bh_fmt_x((double)min, a, sizeof(a)), bh_fmt_x((double)max, b, sizeof(b)), t);
			goto fail;
		}
		nv = realloc(v, (k + 1) * sizeof(*v));
		if (!nv) {
			verr_set(err, "out of memory");
			goto fail;
		}
		v = nv;
		v[k++] = (long long)s;
	}
	if (k == 0) {
		verr_set(err, "%s: expected SIZE[,SIZE...], got '%s'", what, list);
		goto fail;
	}
	qsort(v, k, sizeof(*v), cmp_ll);
	for (size_t i = 1; i < k; i++)
		if (v[i] == v[i - 1]) {
			verr_set(err, "%s: size %lld given twice", what, v[i]);
			goto fail;
		}
	free(buf);
	*out = v;
	*n = k;
	return 0;
fail:
	free(buf);
	free(v);
	return -1;
}

int bh_parse_msglog(const char *s, int maxlog, int *lo, int *hi, struct verr *err)
{
	const char *colon = strchr(s, ':');
	char a[16];
	long long x, y;

	if (colon) {
		snprintf(a, sizeof(a), "%.*s", (int)(colon - s), s);
		if (parse_ll(a, 0, maxlog, &x) < 0 || parse_ll(colon + 1, 0, maxlog, &y) < 0 || x > y)
			return verr_set(err, "--msglog: expected [MIN:]MAX with 0 <= MIN <= MAX <= %d, got '%s'", maxlog, s);
	} else {
		x = 0;
		if (parse_ll(s, 0, maxlog, &y) < 0)
			return verr_set(err, "--msglog: expected [MIN:]MAX with 0 <= MIN <= MAX <= %d, got '%s'", maxlog, s);
	}
	*lo = (int)x;
	*hi = (int)y;
	return 0;
}

/* A comma list of the sizes, for the native and guest programs. */
const char *bh_sizes_str(const long long *v, size_t n, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "", v[i]);
	return buf;
}
