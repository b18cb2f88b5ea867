/* The data and the fold of ckpt_cksum (cksum_fold.h). */
#include "cksum_fold.h"

#include <string.h>

/* splitmix64's finalizer: every input bit moves about half the output. */
static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t ck_seed(enum ck_kind kind, uint64_t round, uint64_t a, uint64_t b)
{
	/* "ckpt_cks" in ASCII, so the streams are this program's own. */
	uint64_t x = mix(0x636b70745f636b73ull ^ (uint64_t)kind);

	x = mix(x ^ round);
	x = mix(x ^ a);
	return mix(x ^ b);
}

uint64_t ck_next(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return mix(*state);
}

void ck_fill(uint64_t seed, unsigned char *buf, size_t len)
{
	uint64_t st = seed;

	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = ck_next(&st);

		for (size_t k = 0; k < 8 && i + k < len; k++)
			buf[i + k] = (unsigned char)(w >> (8 * k));
	}
}

uint64_t ck_fnv(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * CK_FNV_PRIME;
	return h;
}

uint64_t ck_fnv_u64(uint64_t h, uint64_t v)
{
	for (int k = 0; k < 8; k++)
		h = (h ^ ((v >> (8 * k)) & 0xff)) * CK_FNV_PRIME;
	return h;
}

size_t ck_mismatch(uint64_t seed, const unsigned char *data, size_t len)
{
	uint64_t st = seed;

	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = ck_next(&st);

		for (size_t k = 0; k < 8 && i + k < len; k++)
			if (data[i + k] != (unsigned char)(w >> (8 * k)))
				return i + k;
	}
	return (size_t)-1;
}

uint64_t ck_combine(const uint64_t *h, int ranks)
{
	uint64_t c = CK_FNV_OFFSET;

	for (int r = 0; r < ranks; r++)
		c = ck_fnv_u64(c, h[r]);
	return c;
}
