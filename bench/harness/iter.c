/* --iter N[,VOL]: the repetition rule of the mpi suite, min(N, VOL / size)
 * per message size, as both vhpc-mpibench and IMB-MPI1 take it. */
#include "lib/err.h"
#include "lib/parse.h"
#include <stdio.h>
#include <string.h>

#include "bench/harness/bh.h"

#define MIB (1LL << 20)

int bh_parse_iter(const char *s, struct bh_iter *it, struct verr *err)
{
	const char *comma = strchr(s, ',');
	char n[24];
	long long x;
	uint64_t vol = (uint64_t)IMB_OVERALL_VOL;

	memset(it, 0, sizeof(*it));
	if ((comma ? (size_t)(comma - s) : strlen(s)) >= sizeof(n))
		return verr_set(err, "--iter: expected N[,VOL] such as 100000 or 100000,40M, got '%s'", s);
	snprintf(n, sizeof(n), "%.*s", comma ? (int)(comma - s) : (int)strlen(s), s);
	if (parse_ll(n, 1, BH_MAX_ITER, &x) < 0)
		return verr_set(err, "--iter '%s': N must be a whole number from 1 to %lld", s, (long long)BH_MAX_ITER);
	/* IMB takes VOL in whole MiB and keeps it in bytes in an int; a bare
	 * number is bytes (as in vhpc-mpibench), so "40" is refused here
	 * rather than read as 40 bytes by one program and 40 MiB by the other. */
	if (comma && (parse_size(comma + 1, &vol) < 0 || vol % MIB || vol < MIB || vol > (uint64_t)BH_MAX_ITER_VOL))
		return verr_set(err, "--iter '%s': VOL must be whole MiB from 1M to %lldM, such as 40M", s,
				BH_MAX_ITER_VOL / MIB);
	it->set = true;
	it->n = x;
	it->vol = (long long)vol;
	return 0;
}

const char *bh_iter_arg(const struct bh_iter *it, bool imb, char *buf, size_t len)
{
	/* IMB-MPI1: -iter N,MiB.  vhpc-mpibench: -iter N,SIZE. */
	if (imb)
		snprintf(buf, len, "%lld,%lld", it->n, it->vol / MIB);
	else
		snprintf(buf, len, "%lld,%lldM", it->n, it->vol / MIB);
	return buf;
}
