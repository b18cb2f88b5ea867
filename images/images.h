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
#include <sys/types.h>
#include "lib/err.h"
#include "lib/imgwire.h"

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
	char dir[512];          /* <state>/images/<id>, or a node cache's <cache>/<id> */
	char rootfs[512];       /* <dir>/rootfs; a compact image's mount point <dir>/.mnt */
	char format[12];        /* "tree", "squashfs" or "erofs" */
	char blob[512];         /* a compact image's file system, <dir>/rootfs.<format> */
	uint64_t bytes;
	long files;
	long long built;        /* unix time */
	bool kvm;               /* has the kvm parts below */
	char kernel[512];       /* <dir>/kvm/vmlinuz (bzImage) */
	char vmlinux[512];      /* <dir>/kvm/vmlinux (ELF, PVH) */
	char initrd[512];       /* <dir>/kvm/initramfs.img */
	char disk[512];         /* <dir>/kvm/rootfs.ext4; a compact image's blob */
	char kernel_release[128];
};

#define IMAGE_FORCE 1u   /* rebuild even when the sources are unchanged */
#define IMAGE_KVM   2u   /* with the kvm parts (kernel, initramfs, ext4 root) */
#define IMAGE_SQUASHFS 4u /* the rootfs as one read-only squashfs file */
#define IMAGE_EROFS 8u   /* the rootfs as one read-only erofs file */
#define IMAGE_NO_KVM 16u /* without the kvm parts, even if a stored build has them */

/* Builds the image a YAML file describes (configs/images/NAME.yaml); reuses
 * the stored one when its sources have not changed (and it has the kvm parts
 * if IMAGE_KVM asks for them, none if IMAGE_NO_KVM does). */
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
/* An image of a directory of images (the local store's <state>/images, or
 * a node's cache) by id. */
int image_load(const char *base, const char *id, struct image_info *out, struct verr *err);
/* The local store's directory, <state>/images. */
const char *image_store_dir(char *buf, size_t len);
/* Whether s is an image id (64 lowercase hex digits). */
bool image_id_ok(const char *s);

/* A registry pull's options (images/registry.c): credentials from the
 * file skopeo and podman use, TLS checked unless told. */
#define IMAGE_LAYER_CACHE_DEFAULT (10ull << 30)
struct image_registry_opts {
	const char *authfile;   /* NULL: $REGISTRY_AUTH_FILE, else skopeo's default */
	const char *cert_dir;   /* the registry's CA (*.crt); NULL: the system's, /etc/containers/certs.d */
	bool tls_verify_off;    /* no certificate check, plain HTTP allowed */
	uint64_t cache_max;     /* bytes the layer cache keeps; 0: IMAGE_LAYER_CACHE_DEFAULT */
};
/* An OCI image as a node image (`vhpc image import`): its rootfs (skopeo
 * and umoci), vhpc's guest programs and the vmshm BTL, checked against the
 * image's Open MPI (refused, saying why, when it cannot load the BTL), and
 * with a base, the base's kvm kernel and initramfs and a root disk. */
struct image_import {
	const char *source;     /* oci:DIR[:TAG], docker-archive:FILE, docker://REGISTRY/REPO:TAG|@sha256:D */
	const char *name;       /* NULL: the tag, else the file or folder name (docker://: the repository's last part) */
	const char *base;       /* the node image whose kvm parts it gets; NULL: none */
	unsigned flags;         /* IMAGE_SQUASHFS, IMAGE_EROFS */
	struct image_registry_opts registry; /* docker:// sources */
};
int image_import(const struct image_import *im, struct image_info *out, struct verr *err);

/* --------------------------------- files root opens in stores and caches */

/*
 * An image's content is a user's, symlinks and all: root reaches the files
 * of the image store and of a node's cache only through a folder's
 * descriptor, and no component below it may be a symlink or leave it
 * (openat2, RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH; nofollow.c).  err may
 * be NULL; errno is the open's either way.
 */
int image_openat(int dirfd, const char *rel, int flags, mode_t mode, struct verr *err);
/* A regular file of at most max bytes, whole and NUL-terminated (*buf
 * malloc'd; len may be NULL). */
int image_read_at(int dirfd, const char *rel, size_t max, char **buf, size_t *len, struct verr *err);
/* A new file name (a plain name) in dirfd's folder, on disk when this
 * returns: created O_EXCL, or with replace, written beside it and renamed
 * over it (readers see one or the other whole). */
int image_write_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode, bool replace,
		   struct verr *err);
/* One of img's files (path inside img->dir: its kernel, initramfs or root
 * disk), opened read-only for a guest: refused unless it is a regular file
 * reached without a symlink from the folder that holds img->dir. */
int image_open_part(const struct image_info *img, const char *path, struct verr *err);

/* ------------------------------------------------------------ manifests */

/*
 * A manifest as text (an image's id is the sha256 of it), parsed and
 * checked: one entry per line, paths inside the image, each below a folder
 * listed before it, none twice, no setuid or setgid file, and at the top
 * only the image's parts (IMAGE_MF_PARTS, each of its type) and what is
 * under /rootfs/: every other name in an image's folder is the node's own.
 * Manifests come over the network, so every field is checked (fuzzed:
 * fuzz-image-manifest).
 */
#define IMAGE_MF_PARTS "rootfs/ (a folder), rootfs.squashfs, rootfs.erofs, kvm/vmlinuz, kvm/vmlinux, " \
	"kvm/initramfs.img, kvm/kernel.version, kvm/rootfs.ext4"
#define IMAGE_MF_PATH_MAX    4096
#define IMAGE_MF_FILE_MAX    (1ull << 40)
#define IMAGE_MF_TEXT_MAX    (256u << 20)
#define IMAGE_MF_ENTRIES_MAX 2000000u
struct image_mf_ent {
	char type;              /* 'd' folder, 'f' file, 'l' symlink */
	unsigned mode;
	uint64_t size;          /* f */
	const char *sha;        /* f: 64 hex digits */
	const char *target;     /* l */
	const char *path;       /* "/rootfs/usr/bin/sh" */
};
struct image_mf {
	char *text;             /* the parsed copy the entries point into */
	struct image_mf_ent *v;
	size_t n;
	uint64_t bytes;         /* of all files */
	long files;             /* files and symlinks */
};
int image_mf_parse(const char *text, size_t len, struct image_mf *m, struct verr *err);
void image_mf_free(struct image_mf *m);

/* ------------------------------------------------- compact file systems */

/* Mounts a compact image's file system read-only on img->rootfs, once per
 * machine: a later call finds it mounted.  Nothing to do for a tree. */
int image_mount(const struct image_info *img, struct verr *err);
/* Unmounts it again (gone or never mounted: nothing to do). */
int image_unmount(const struct image_info *img, struct verr *err);
/* "squashfs" -> IMAGE_SQUASHFS, "erofs" -> IMAGE_EROFS, else 0 ("tree"). */
unsigned image_format_flag(const char *name);
/* The name of the format flags ask for: "squashfs", "erofs" or "tree". */
const char *image_format_name(unsigned flags);

/* ------------------------------------------------------- a node's cache */

/*
 * A node's copies of the cluster's images, by id, in a directory of its
 * own (vhpcd --image-cache).  The store is elsewhere (vhpc-ctld): what the
 * node lacks comes through a fetch function, and is checked against the
 * manifest on the way in.
 */

/* The bytes of objs[0] from offset on, then of objs[1], ..., as many as
 * one answer holds; *chunks is malloc'd (image_chunks_free).  manifest:
 * objs[0] (alone) is the image's id, asked for as an image: the store
 * answers only for a manifest it took as one (pushed and tagged), never
 * for a file that merely has that sha256. */
typedef int (*image_fetch_fn)(void *arg, const char *const *objs, int nobjs, uint64_t offset, bool manifest,
			      struct image_chunk **chunks, int *nchunks, struct verr *err);

struct image_pull_req {
	const char *cache;      /* the cache directory */
	const char *id;         /* what to pull */
	const char *name;       /* what the job called it (information) */
	image_fetch_fn fetch;
	/* Called once the manifest says how big the image is, before any
	 * file is written: makes room (evicting) or refuses. */
	int (*make_room)(void *arg, uint64_t bytes, struct verr *err);
	void *arg;              /* of both */
};
struct image_pull_stats {
	double seconds;
	uint64_t fetched;       /* bytes from the store, manifest included */
	uint64_t copied;        /* bytes this node's other images already held */
	long objects;           /* files fetched */
};
/* Makes <cache>/<id> whole: the manifest must hash to the id and every
 * file match it (size and sha256) or the pull is refused, naming the file;
 * nothing is visible under <cache>/<id> until all of it is there. */
int image_pull(const struct image_pull_req *rq, struct image_pull_stats *st, struct image_info *out,
	       struct verr *err);

struct image_cached {
	char id[65];
	char name[65];
	uint64_t bytes;
	long long used;         /* unix time a job last started from it */
};
/* The complete images of a cache, least recently used first. */
int image_cache_list(const char *cache, struct image_cached **out, size_t *n, struct verr *err);
/* A job starts from img now. */
void image_cache_touch(const struct image_info *img);
/* Removes least recently used images, except those in keep[] (in use),
 * until the cache holds at most limit - room bytes; fails, saying so,
 * when the kept ones leave no such room. */
int image_cache_evict(const char *cache, uint64_t limit, uint64_t room, const char *const *keep, int nkeep,
		      struct verr *err);
/* Removes one image (unmounted first). */
int image_cache_remove(const char *cache, const char *id, struct verr *err);
/* Unmounts every compact image of the cache (before it is removed). */
int image_cache_unmount_all(const char *cache, struct verr *err);
/* Removes what interrupted pulls and evictions left (.pull-*, .evict-*);
 * only while no pull runs. */
int image_cache_sweep(const char *cache, struct verr *err);

#endif
