/*
 * Data-check patterns.  Every byte of a message depends on who sent it, the
 * message size and the repetition, so a message delivered to the wrong
 * receive, a stale buffer from the previous repetition or a flipped bit all
 * show up as wrong bytes.
 */
#include <string.h>

#include "opts.h"

static uint64_t mix(uint64_t x)
{
	/* splitmix64 finaliser: cheap, and nearby inputs give unrelated words */
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t seed(int src, long long size, long long rep)
{
	return mix(mix(mix((uint64_t)(unsigned)src) ^ (uint64_t)size) ^ (uint64_t)rep);
}

static void word_bytes(uint64_t w, unsigned char out[8])
{
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(w >> (8 * i));
}

void mb_fill(void *buf, long long len, int src, long long size, long long rep)
{
	unsigned char *p = buf, w[8];
	uint64_t s = seed(src, size, rep);

	for (long long off = 0; off < len; off += 8) {
		long long n = len - off < 8 ? len - off : 8;

		word_bytes(mix(s + (uint64_t)(off / 8)), w);
		memcpy(p + off, w, (size_t)n);
	}
}

long long mb_verify(const void *buf, long long len, int src, long long size, long long rep,
		    long long *first, unsigned *want, unsigned *got)
{
	const unsigned char *p = buf;
	unsigned char w[8];
	uint64_t s = seed(src, size, rep);
	long long bad = 0;

	for (long long off = 0; off < len; off += 8) {
		long long n = len - off < 8 ? len - off : 8;

		word_bytes(mix(s + (uint64_t)(off / 8)), w);
		if (!memcmp(p + off, w, (size_t)n))
			continue;
		for (long long i = 0; i < n; i++) {
			if (p[off + i] == w[i])
				continue;
			if (!bad) {
				*first = off + i;
				*want = w[i];
				*got = p[off + i];
			}
			bad++;
		}
	}
	return bad;
}

/* (31 r + k) mod 199 with k from the element, size and repetition: values
 * stay below 199, so a float sum over up to 2^24 / 199 ranks is exact in
 * any order MPI adds them. */
static long long red_key(long long j, long long size, long long rep)
{
	return (j * 7 + rep * 13 + size) % MB_RED_MOD;
}

float mb_red_value(int rank, long long j, long long size, long long rep)
{
	return (float)((31LL * rank + red_key(j, size, rep)) % MB_RED_MOD);
}

void mb_red_fill(float *buf, long long count, int rank, long long size, long long rep)
{
	for (long long j = 0; j < count; j++)
		buf[j] = mb_red_value(rank, j, size, rep);
}

void mb_red_sums(int n, float sums[MB_RED_MOD])
{
	for (int k = 0; k < MB_RED_MOD; k++) {
		double s = 0;

		for (int r = 0; r < n; r++)
			s += (double)((31LL * r + k) % MB_RED_MOD);
		sums[k] = (float)s;
	}
}

long long mb_red_verify(const float *buf, long long count, const float sums[MB_RED_MOD],
			long long size, long long rep, long long *first, unsigned *want,
			unsigned *got)
{
	long long bad = 0;

	for (long long j = 0; j < count; j++) {
		float e = sums[red_key(j, size, rep)];
		unsigned char eb[sizeof(float)], gb[sizeof(float)];

		/* Compare bits: a flipped byte may still be a valid float. */
		memcpy(eb, &e, sizeof(e));
		memcpy(gb, &buf[j], sizeof(e));
		if (!memcmp(eb, gb, sizeof(e)))
			continue;
		for (size_t i = 0; i < sizeof(float); i++) {
			if (eb[i] == gb[i])
				continue;
			if (!bad) {
				*first = j * (long long)sizeof(float) + (long long)i;
				*want = eb[i];
				*got = gb[i];
			}
			bad++;
		}
	}
	return bad;
}
