/*
 * Node images: built from a YAML spec (configs/images/), stored by
 * content id, verified, and the kvm parts (kernel, initramfs, root disk).
 * The node agent and the vhpc CLI both use them.
 */
#ifndef VHPC_IMAGES_H
#define VHPC_IMAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/err.h"

/*
 * Node images, content-addressed: the id is the sha256 of a manifest that
 * lists every file of the rootfs (type, mode, size, sha256 or link target,
 * path), so two builds of the same content get the same id and a node can
 * verify what it runs.  Stored under <state dir>/images/<id>/ with a name
 * reference in <state dir>/images/refs/<name>.json.
 */
struct image_info {
	char id[65];
	char name[65];
	char dir[512];          /* <state>/images/<id> */
	char rootfs[512];       /* <dir>/rootfs */
	uint64_t bytes;
	long files;
	long long built;        /* unix time */
	bool kvm;               /* has the kvm parts below */
	char kernel[512];       /* <dir>/kvm/vmlinuz (bzImage) */
	char vmlinux[512];      /* <dir>/kvm/vmlinux (ELF, PVH) */
	char initrd[512];       /* <dir>/kvm/initramfs.img */
	char disk[512];         /* <dir>/kvm/rootfs.ext4 */
	char kernel_release[128];
};

#define IMAGE_FORCE 1u   /* rebuild even when the sources are unchanged */
#define IMAGE_KVM   2u   /* with the kvm parts (kernel, initramfs, ext4 root) */

/* Builds the image a YAML file describes (configs/images/NAME.yaml); reuses
 * the stored one when its sources have not changed (and it has the kvm parts
 * if IMAGE_KVM asks for them). */
int image_build(const char *yaml_path, unsigned flags, struct image_info *out,
		struct verr *err);
/* Whether an image file describes kvm parts (kvm: section). */
int image_spec_wants_kvm(const char *yaml_path, bool *yes, struct verr *err);
/* The image a name refers to, building it from <config dir>/images/NAME.yaml
 * when it is missing or its sources changed. */
int image_ensure(const char *name, unsigned flags, struct image_info *out, struct verr *err);
/* The stored image a name or id refers to, without building. */
int image_lookup(const char *name_or_id, struct image_info *out, struct verr *err);
/* Every stored image, newest first; *out is malloc'd. */
int image_list(struct image_info **out, size_t *n, struct verr *err);
/* Downloads a Debian kernel package (following a metapackage such as
 * linux-image-cloud-amd64 to the real one) once into $VHPC_KERNEL_CACHE or
 * <state>/kernels, unpacked; *tree gets its root (boot/, lib/modules/). */
int image_fetch_kernel(const char *pkg, char *tree, size_t len, struct verr *err);
/* Recomputes the manifest of a stored image and compares it with its id. */
int image_verify(const struct image_info *img, struct verr *err);

#endif
