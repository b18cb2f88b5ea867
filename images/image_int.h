/* Internal to the image code of the node agent. */
#ifndef VHPC_NA_IMAGE_H
#define VHPC_NA_IMAGE_H

#include "lib/config.h"
#include "lib/err.h"
#include "images/images.h"

/* What a kvm guest boots: a kernel (a Debian package fetched with apt-get
 * download, or a file on this host), the modules its initramfs loads. */
struct image_kvm {
	char *kernel_package;
	char *kernel;                 /* bzImage on this host */
	char *release;                /* its release, when its name does not say */
	char *modules_root;           /* where lib/modules/<release> is; default / */
	struct cf_strlist modules;
	uint64_t rootfs_size;         /* 0 = from the content */
};

struct image_spec {
	char *name;
	char *description;
	struct cf_strlist packages;   /* Debian packages copied whole */
	struct cf_strlist files;      /* host paths */
	struct cf_strlist exclude;    /* path prefixes left out */
	struct cf_strlist programs;   /* vhpc programs -> /usr/local/bin */
	struct cf_strmap build_files; /* image path -> path under the build dir */
	struct cf_strmap copy;        /* image path -> host path (a program of the user's) */
	bool busybox;                 /* applets for what packages lack */
	struct image_kvm kvm;
};

static inline bool image_spec_has_kvm(const struct image_spec *s)
{
	return s->kvm.kernel_package || s->kvm.kernel;
}
extern const struct cf_schema image_spec_schema;

int image_spec_load(const char *path, struct image_spec *s, struct verr *err);
void image_spec_free(struct image_spec *s);
int image_fingerprint(const char *yaml_path, const struct image_spec *s, char out[65],
		      struct verr *err);
/* Fills an empty directory with the rootfs the spec describes. */
int image_stage_rootfs(const struct image_spec *s, const char *root, struct verr *err);
/* The manifest of a tree (malloc'd text) and its sha256.  At the top level,
 * "manifest", "info.json" and names starting with '.' are left out: the
 * image dir's own bookkeeping is not content. */
int image_manifest(const char *root, char **text, size_t *len, char id[65],
		   uint64_t *bytes, long *files, struct verr *err);
/* Makes <stage>/kvm/ (kernel, vmlinux, initramfs, rootfs.ext4) from the
 * spec and <stage>/rootfs; rootfs_id seeds the ext4 uuid. */
int image_kvm_stage(const struct image_spec *s, const char *stage, const char *rootfs_id,
		    struct verr *err);

#endif
