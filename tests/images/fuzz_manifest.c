/*
 * Manifests as a node gets them from the store: whatever the bytes, the
 * parser accepts only what it promises (paths inside the image, each below
 * a folder listed before it, sizes and hashes well formed) or says why not.
 */
#include "lib/err.h"
#include "images/images.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image_mf m;
	struct verr e = { "" };

	if (size > 1 << 20)
		return 0;
	if (image_mf_parse((const char *)data, size, &m, &e) < 0) {
		if (!e.msg[0])
			abort();
		return 0;
	}
	for (size_t i = 0; i < m.n; i++) {
		const struct image_mf_ent *x = &m.v[i];

		if (x->path[0] != '/' || strstr(x->path, "/../") || strstr(x->path, "//") ||
		    strlen(x->path) >= IMAGE_MF_PATH_MAX || x->mode > 07777)
			abort();
		if (x->type == 'f' && (!image_id_ok(x->sha) || x->size > IMAGE_MF_FILE_MAX || (x->mode & 06000)))
			abort();
		if (x->type == 'l' && (!x->target || !x->target[0]))
			abort();
		if (x->type != 'f' && x->type != 'd' && x->type != 'l')
			abort();
	}
	image_mf_free(&m);
	return 0;
}
