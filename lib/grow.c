#include "lib/grow.h"

#include <stdint.h>
#include <stdlib.h>

int grow(void *vp, size_t *cap, size_t need, size_t size, size_t first)
{
	void **v = vp, *nv;
	size_t ncap = *cap ? *cap : (first ? first : 1);

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -1;
		ncap *= 2;
	}
	if (size && ncap > SIZE_MAX / size)
		return -1;
	if (!(nv = realloc(*v, ncap * size)))
		return -1;
	*v = nv;
	*cap = ncap;
	return 0;
}
