/*
 * The monotonic clock.
 */
#ifndef VHPC_LIB_CLOCK_H
#define VHPC_LIB_CLOCK_H

#include <stdint.h>

/* Monotonic clock in seconds / nanoseconds. */
double now_s(void);
uint64_t now_ns(void);

#endif
