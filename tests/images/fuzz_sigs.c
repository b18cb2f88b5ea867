/*
 * An image's signatures file as a node gets it from the store: whatever
 * the bytes, the parser takes at most IMAGE_SIG_MAX signatures, no key
 * twice, each line of the one form (so the text it formats again is the
 * input, byte for byte), or says why not.
 */
#include "lib/err.h"
#include "images/images.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char text[IMAGE_SIG_TEXT_MAX + 1];
	struct image_sigs s;
	struct verr e = { "" };

	if (image_sigs_parse((const char *)data, size, &s, &e) < 0) {
		if (!e.msg[0])
			abort();
		return 0;
	}
	if (s.n < 0 || s.n > IMAGE_SIG_MAX)
		abort();
	for (int i = 0; i < s.n; i++)
		for (int k = 0; k < i; k++)
			if (!memcmp(s.v[i].key, s.v[k].key, 32))
				abort();
	image_sigs_format(&s, text);
	if (strlen(text) != size || memcmp(text, data, size))
		abort();
	return 0;
}
