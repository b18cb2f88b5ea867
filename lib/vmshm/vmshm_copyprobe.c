/* Is memcpy at a short distance modulo 4 KiB slow here (vmshm_copyprobe.h)? */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmshm_copyprobe.h"

#define PROBE_SIZE (64u << 10)
#define PROBE_ROUNDS 9
#define PROBE_COPIES 8

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Time of PROBE_COPIES copies to `dist` bytes past the source's page offset. */
static double copy_time(unsigned char *dst, const unsigned char *src, unsigned dist)
{
	double t0 = now();

	for (int i = 0; i < PROBE_COPIES; i++) {
		memcpy(dst + dist, src, PROBE_SIZE);
		/* Keep the compiler from merging or dropping copies. */
		__asm__ volatile("" : : "r"(dst) : "memory");
	}
	return now() - t0;
}

bool vmshm_short_copies_slow(double *ratio)
{
	unsigned char *src = aligned_alloc(4096, PROBE_SIZE + 4096);
	unsigned char *dst = aligned_alloc(4096, PROBE_SIZE + 4096);
	double near = 1e9, far = 1e9;

	*ratio = 1.0;
	if (!src || !dst) {
		free(src);
		free(dst);
		return false;
	}
	memset(src, 0x5a, PROBE_SIZE + 4096);
	memset(dst, 0, PROBE_SIZE + 4096);
	for (int r = 0; r < PROBE_ROUNDS; r++) {
		double a = copy_time(dst, src, 16), b = copy_time(dst, src, 2048);

		near = a < near ? a : near;
		far = b < far ? b : far;
	}
	free(src);
	free(dst);
	if (far <= 0)
		return false;
	*ratio = near / far;
	return *ratio > 3.0;
}
