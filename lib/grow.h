/*
 * Growing arrays: room for one more element, doubling, the same way
 * everywhere (it was written out at 22 places).
 */
#ifndef VHPC_LIB_GROW_H
#define VHPC_LIB_GROW_H

#include <stddef.h>

/* Makes *(T **)vp, of *cap elements of `size` bytes, hold at least `need`:
 * it doubles, starting at `first`.  0, or -1 when out of memory or past
 * SIZE_MAX bytes, with the array and *cap as they were. */
int grow(void *vp, size_t *cap, size_t need, size_t size, size_t first);

#endif
