/*
 * What a registry sends, as the pull parses it before fetching a layer:
 * whatever the bytes, a manifest accepted is within the limits (layers,
 * sizes, total) with sha256 digests, and a reference accepted names a
 * registry and a tag or a digest.
 */
#include "lib/err.h"
#include "images/registry_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image_reg_manifest m;
	struct image_reg_ref r;
	struct verr e = { "" };
	char *s;

	if (size > IMAGE_REG_MAX_MANIFEST + 1 || !(s = malloc(size + 1)))
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	if (image_reg_manifest_parse(s, size, "amd64", &m, &e) == 0) {
		uint64_t total = 0;

		if (m.index) {
			if (!image_reg_digest_ok(m.instance.digest) || m.instance.size > IMAGE_REG_MAX_MANIFEST || m.layers)
				abort();
		} else {
			if (!m.nlayers || m.nlayers > IMAGE_REG_MAX_LAYERS || !image_reg_digest_ok(m.config.digest))
				abort();
			for (size_t i = 0; i < m.nlayers; i++) {
				if (!image_reg_digest_ok(m.layers[i].digest) || m.layers[i].size > IMAGE_REG_MAX_BLOB ||
				    m.layers[i].size > m.largest)
					abort();
				total += m.layers[i].size;
			}
			if (total != m.total || total > IMAGE_REG_MAX_TOTAL)
				abort();
		}
		image_reg_manifest_free(&m);
	} else if (!e.msg[0] || m.layers) {
		abort();
	}
	if (image_reg_ref_parse(s, &r, &e) == 0) {
		if (strncmp(s, "docker://", 9) || !r.registry[0] || !r.repo[0] || !r.tag[0] == !r.digest[0] ||
		    (r.digest[0] && !image_reg_digest_ok(r.digest)) || strchr(r.repo, ':') || strchr(r.repo, '@'))
			abort();
	}
	free(s);
	return 0;
}
