/*
 * Manifests as a node gets them from the store: whatever the bytes, the
 * parser accepts only what it promises (paths inside the image, each below
 * a folder listed before it, sizes and hashes well formed, nothing at the
 * top but the image's parts, each of its type, and rootfs/'s content) or
 * says why not.
 */
#include "lib/err.h"
#include "images/images.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where an entry may be: under /rootfs/, or one of the parts as its type.
 * Written apart from the parser's table on purpose. */
static bool placed(const struct image_mf_ent *x)
{
	static const char *const parts[] = { "d/rootfs", "f/rootfs.squashfs", "f/rootfs.erofs", "d/kvm",
		"f/kvm/vmlinuz", "f/kvm/vmlinux", "f/kvm/initramfs.img", "f/kvm/kernel.version",
		"f/kvm/rootfs.ext4" };

	if (!strncmp(x->path, "/rootfs/", 8))
		return true;
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (parts[i][0] == x->type && !strcmp(parts[i] + 1, x->path))
			return true;
	return false;
}

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
		if (!placed(x))
			abort();
	}
	image_mf_free(&m);
	return 0;
}
