/* Drawing a chart: gnuplot on a script in the results folder, and a check
 * that what it left is a PNG (gnuplot can exit 0 having drawn nothing);
 * size tics both charts share. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void bh_gp_size_tics(FILE *f, double *xs, size_t n, double zero)
{
	size_t u = 0, step;
	char lab[32];

	qsort(xs, n, sizeof(double), cmp_double);
	for (size_t i = 0; i < n; i++)
		if (u == 0 || xs[i] != xs[u - 1])
			xs[u++] = xs[i];
	n = u;
	/* At most 16 labels, or they run into each other. */
	step = n > 16 ? (n + 15) / 16 : 1;
	if (n > 0)
		fprintf(f, "set xrange [%.17g:%.17g]\n", (xs[0] > 0 ? xs[0] : zero) / 1.25, (xs[n - 1] > 0 ? xs[n - 1] : zero) * 1.25);
	fputs("set xtics (", f);
	for (size_t i = 0; i < n; i += step)
		fprintf(f, "%s\"%s\" %.17g", i ? ", " : "", bh_fmt_x(xs[i], lab, sizeof(lab)), xs[i] > 0 ? xs[i] : zero);
	fputs(")\n", f);
}

static const char png_magic[8] = { (char)0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

int bh_gnuplot(const char *dir, const char *script, const char *png, struct verr *err)
{
	char path[PATH_MAX + 64], logp[PATH_MAX + 64], pngp[PATH_MAX + 64], cd[PATH_MAX + 16];
	const char *dot = strrchr(script, '.');
	struct bh_proc p;
	char *buf;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", dir, script);
	snprintf(logp, sizeof(logp), "%s/%.*s.log", dir, dot ? (int)(dot - script) : (int)strlen(script), script);
	snprintf(pngp, sizeof(pngp), "%s/%s", dir, png);
	/* The scripts name their data files relative to the folder, so that
	 * `gnuplot plot.gp` there redraws them. */
	snprintf(cd, sizeof(cd), "cd '%s'", dir);
	char *argv[] = { "gnuplot", "-e", cd, path, NULL };

	if (bh_spawn(argv, "/dev/null", logp, 60, &p, err) < 0)
		return -1;
	if (p.status != 0)
		return verr_set(err, "gnuplot %s failed (exit status %d%s; see %s)", path, p.status,
				p.status == 127 ? ": is gnuplot installed? apt-get install gnuplot-nox" : "", logp);
	if (read_file(pngp, &buf, &len, 64u << 20, err) < 0)
		return -1;
	if (len < sizeof(png_magic) || memcmp(buf, png_magic, sizeof(png_magic))) {
		free(buf);
		return verr_set(err, "%s is not a PNG file (see %s)", pngp, logp);
	}
	free(buf);
	return 0;
}
