/*
 * ckpt_cksum --reference: the checksum of a run of P ranks computed in one
 * process, without MPI: what each rank would receive, in the order it
 * folds it.  A test compares an MPI run's final line with this one's.
 */
#include "cksum_fold.h"

#include <stdlib.h>

uint64_t ck_reference(const struct ck_params *p, void (*emit)(uint64_t, uint64_t, void *), void *arg,
		      const char **err)
{
	unsigned char *buf = malloc(p->bytes ? p->bytes : 1);
	uint64_t *h = malloc(sizeof(*h) * (size_t)p->ranks);
	uint64_t sum[CK_ALLRED_WORDS], c = 0;

	if (!buf || !h) {
		free(buf);
		free(h);
		*err = "out of memory";
		return 0;
	}
	for (int s = 0; s < p->ranks; s++)
		h[s] = CK_FNV_OFFSET;
	for (uint64_t r = 1; r <= p->rounds; r++) {
		for (int i = 0; i < CK_ALLRED_WORDS; i++)
			sum[i] = 0;
		for (int q = 0; q < p->ranks; q++) {
			uint64_t st = ck_seed(CK_ALLRED, r, (uint64_t)q, 0);

			for (int i = 0; i < CK_ALLRED_WORDS; i++)
				sum[i] += ck_next(&st);
		}
		for (int s = 0; s < p->ranks; s++) {
			for (int d = 0; d < p->ranks; d++) {
				if (d == s)
					continue;
				ck_fill(ck_seed(CK_MSG, r, (uint64_t)d, (uint64_t)s), buf, p->bytes);
				h[s] = ck_fnv(h[s], buf, p->bytes);
			}
			for (int i = 0; i < CK_ALLRED_WORDS; i++)
				h[s] = ck_fnv_u64(h[s], sum[i]);
			if (p->scratch) {
				ck_fill(ck_seed(CK_DISK, r, (uint64_t)s, 0), buf, p->bytes);
				h[s] = ck_fnv(h[s], buf, p->bytes);
			}
		}
		if (r % p->every == 0 || r == p->rounds) {
			c = ck_combine(h, p->ranks);
			if (emit)
				emit(r, c, arg);
		}
	}
	free(buf);
	free(h);
	return c;
}
