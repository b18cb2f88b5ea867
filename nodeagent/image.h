/* Internal to the image code of the node agent. */
#ifndef VHPC_NA_IMAGE_H
#define VHPC_NA_IMAGE_H

#include "nodeagent/vhpcd.h"

struct image_spec {
	char *name;
	char *description;
	struct cf_strlist packages;   /* Debian packages copied whole */
	struct cf_strlist files;      /* host paths */
	struct cf_strlist exclude;    /* path prefixes left out */
	struct cf_strlist programs;   /* vhpc programs -> /usr/local/bin */
	struct cf_strmap build_files; /* image path -> path under the build dir */
	bool busybox;                 /* applets for what packages lack */
};
extern const struct cf_schema image_spec_schema;

int image_spec_load(const char *path, struct image_spec *s, struct verr *err);
void image_spec_free(struct image_spec *s);
int image_fingerprint(const char *yaml_path, const struct image_spec *s, char out[65],
		      struct verr *err);
/* Fills an empty directory with the rootfs the spec describes. */
int image_stage_rootfs(const struct image_spec *s, const char *root, struct verr *err);
/* The manifest of a rootfs (malloc'd text) and its sha256 (the image id). */
int image_manifest(const char *root, char **text, size_t *len, char id[65],
		   uint64_t *bytes, long *files, struct verr *err);

#endif
