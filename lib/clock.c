/*
 * The monotonic clock.
 */
#include "lib/clock.h"

#include <time.h>

double now_s(void)
{
	return now_ns() / 1e9;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}
