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
	char *format;                 /* tree (default), squashfs or erofs */
	struct image_kvm kvm;
};

static inline bool image_spec_has_kvm(const struct image_spec *s)
{
	return s->kvm.kernel_package || s->kvm.kernel;
}
extern const struct cf_schema image_spec_schema;

int image_spec_load(const char *path, struct image_spec *s, struct verr *err);
void image_spec_free(struct image_spec *s);
/* format: the format the build makes (a --format may override the spec's). */
int image_fingerprint(const char *yaml_path, const struct image_spec *s, const char *format,
		      char out[65], struct verr *err);

/* Making an image in the local store, for a build and an import alike:
 * begin locks the store and makes an empty <store>/.build-* folder (its
 * lock fd returned); the caller fills <stage>/rootfs; finish adds the kvm
 * parts (IMAGE_KVM: from the spec, or an import's from base) and the
 * compact file system (flags);
 * commit names it (manifest, info.json, the ref of meta->name) and loads
 * it into out; abort removes what is left and unlocks. */
struct image_meta {
	const char *name, *description;
	unsigned flags;                /* IMAGE_SQUASHFS / IMAGE_EROFS */
	const char *fingerprint;       /* of the sources, for reuse ("" none) */
	const char *source;            /* what it was made from */
	const char *digest;            /* a registry pull's manifest digest, or NULL */
};
int image_stage_begin(char *stage, size_t len, struct verr *err);
/* An exclusive flock on path (made if missing, never through a symlink);
 * its fd, to close. */
int image_lock_file(const char *path, struct verr *err);
/* An exclusive flock on fd; fd, or -1 with fd closed. */
int image_lock_fd(int fd, struct verr *err);
/* A read-only loop device over the open file fd (name: what losetup shows
 * for it), which the kernel detaches once it is unmounted and closed;
 * *dev gets its /dev path.  Its fd: close it once it is mounted. */
int image_loop_attach(int fd, const char *name, char *dev, size_t len, struct verr *err);
int image_stage_finish(const char *stage, unsigned flags, const struct image_spec *s, const struct image_info *base,
		       struct verr *err);
int image_stage_commit(const char *stage, const struct image_meta *meta, struct image_info *out,
		       struct verr *err);
void image_stage_abort(const char *stage, int lock);
/* Fills an empty directory with the rootfs the spec describes. */
int image_stage_rootfs(const struct image_spec *s, const char *root, struct verr *err);
/* The manifest of a tree (malloc'd text) and its sha256.  At the top level,
 * "manifest", "info.json" and names starting with '.' are left out: the
 * image dir's own bookkeeping is not content. */
int image_manifest(const char *root, char **text, size_t *len, char id[65],
		   uint64_t *bytes, long *files, struct verr *err);
/* Makes <stage>/kvm/ (kernel, vmlinux, initramfs, and for a tree the
 * rootfs.ext4) from the spec and <stage>/rootfs; rootfs_id seeds the ext4
 * uuid.  The initramfs has the squashfs and erofs modules besides the
 * spec's, for compact root disks. */
int image_kvm_stage(const struct image_spec *s, const char *stage, const char *rootfs_id,
		    unsigned flags, struct verr *err);
/* vhpc's part of an imported rootfs (oci_vhpc.c): its guest programs with
 * their own libraries and loader, the vmshm BTL, links for an Open MPI
 * outside Debian's layout; refused when the image's Open MPI is missing,
 * of another version than the BTL's, or cannot load it.  path_env: the
 * image's PATH (NULL: the usual one). */
int image_oci_add_vhpc(const char *root, const char *path_env, struct verr *err);
/* An imported image's kvm parts: the kernel and initramfs of base, a root
 * disk made from <stage>/rootfs (ext4 for a tree; a compact format's file
 * is its own). */
int image_kvm_from_base(const struct image_info *base, const char *stage, const char *rootfs_id, unsigned flags,
			struct verr *err);
/* The rootfs tree as one squashfs or erofs file (flags say which);
 * rootfs_id seeds its uuid. */
int image_compact_make(unsigned flags, const char *rootfs, const char *out, const char *rootfs_id,
		       struct verr *err);

#endif
