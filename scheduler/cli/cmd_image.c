/* vhpc image build|list|verify|fetch-kernel; push and rm: cmd_image_store.c */
#include "lib/err.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "cli.h"
#include "client.h"
#include "images/images.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void print_image(const struct image_info *img)
{
	char sz[32], when[32];
	time_t t = img->built;

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", localtime(&t));
	printf("%-16s %.12s  %6ld files  %10s  %-8s  %s%s%s\n", img->name, img->id, img->files,
	       fmt_size(img->bytes, sz, sizeof(sz)), img->format, when, img->kvm ? "  kvm: Linux " : "",
	       img->kvm ? img->kernel_release : "");
}

/* vhpc image import SOURCE [--name NAME] [--base IMAGE | --no-kvm] [--format F]
 *                   [--authfile FILE] [--cert-dir DIR] [--tls-verify=false] [--layer-cache-max SIZE] */
static int import(int argc, char **argv)
{
	struct image_import im = { 0 };
	struct image_info img, base;
	bool nokvm = false;
	struct verr err;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--name") && i + 1 < argc)
			im.name = argv[++i];
		else if (!strcmp(argv[i], "--base") && i + 1 < argc)
			im.base = argv[++i];
		else if (!strcmp(argv[i], "--no-kvm"))
			nokvm = true;
		else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			im.flags = image_format_flag(argv[++i]);
			if (!im.flags && strcmp(argv[i], "tree"))
				return usage_error("image import", "--format '%s': expected tree, squashfs or erofs", argv[i]);
		} else if (!strcmp(argv[i], "--authfile") && i + 1 < argc)
			im.registry.authfile = argv[++i];
		else if (!strcmp(argv[i], "--cert-dir") && i + 1 < argc)
			im.registry.cert_dir = argv[++i];
		else if (!strcmp(argv[i], "--tls-verify=false"))
			im.registry.tls_verify_off = true;
		else if (!strcmp(argv[i], "--layer-cache-max") && i + 1 < argc) {
			if (parse_size(argv[++i], &im.registry.cache_max) < 0 || !im.registry.cache_max)
				return usage_error("image import", "--layer-cache-max '%s': expected a size such as 10G", argv[i]);
		} else if (argv[i][0] == '-')
			return usage_error("image import", "unknown option or missing value: '%s'", argv[i]);
		else if (im.source)
			return usage_error("image import", "one image at a time ('%s' and '%s')", im.source, argv[i]);
		else
			im.source = argv[i];
	}
	if (!im.source)
		return usage_error("image import", "which image? oci:DIR[:TAG], docker-archive:FILE.tar or "
				   "docker://REGISTRY/REPO:TAG|@sha256:DIGEST");
	if ((im.registry.authfile || im.registry.cert_dir || im.registry.tls_verify_off || im.registry.cache_max) &&
	    strncmp(im.source, "docker://", 9))
		return usage_error("image import", "--authfile, --cert-dir, --tls-verify and --layer-cache-max are for "
				   "docker:// sources, not '%s'", im.source);
	if (nokvm && im.base)
		return usage_error("image import", "--base gives kvm parts; --no-kvm leaves them out: not both");
	/* kvm guests boot the default image's kernel unless told otherwise. */
	if (!nokvm && !im.base && image_lookup("default", &base, &err) == 0 && base.kvm)
		im.base = "default";
	else if (!nokvm && !im.base)
		fprintf(stderr, "vhpc image import: no kvm parts (no --base, and no local image 'default' with them): "
			"the image runs in container guests only\n");
	if (image_import(&im, &img, &err) < 0) {
		fprintf(stderr, "vhpc image import: %s\n", err.msg);
		return 1;
	}
	print_image(&img);
	return 0;
}

/* vhpc image build FILE [--force] [--format F] [--no-kvm] */
static int build_args(int argc, char **argv, const char **file, unsigned *flags)
{
	unsigned format = 0;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--force"))
			*flags |= IMAGE_FORCE;
		else if (!strcmp(argv[i], "--no-kvm"))
			*flags |= IMAGE_NO_KVM;
		else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			format = image_format_flag(argv[++i]);
			if (!format && strcmp(argv[i], "tree"))
				return usage_error("image build", "--format '%s': expected tree, squashfs or erofs", argv[i]);
		} else if (argv[i][0] == '-')
			return usage_error("image build", "unknown option '%s'", argv[i]);
		else if (*file)
			return usage_error("image build", "one image file at a time ('%s' and '%s')", *file, argv[i]);
		else
			*file = argv[i];
	}
	if (!*file)
		return usage_error("image build", "which image file? (e.g. configs/images/default.yaml)");
	*flags |= format;
	return 0;
}

static int build(int argc, char **argv)
{
	struct image_info img;
	struct verr err;
	const char *file = NULL;
	unsigned flags = 0;
	bool kvm = false;
	int rc;

	if ((rc = build_args(argc, argv, &file, &flags)))
		return rc;
	/* An admin's build makes everything the file describes, unless
	 * the kvm parts are not wanted (container-only nodes): then a
	 * stored build that has them is not reused, since every node
	 * would pull and check them for nothing (245 MiB against 65). */
	if (image_spec_wants_kvm(file, &kvm, &err) < 0) {
		log_err("%s", err.msg);
		return 1;
	}
	if (kvm && !(flags & IMAGE_NO_KVM))
		flags |= IMAGE_KVM;
	if (image_build(file, flags, &img, &err) < 0) {
		log_err("%s", err.msg);
		return 1;
	}
	print_image(&img);
	return 0;
}

static struct json_object *image_json(const struct image_info *img)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "name", json_object_new_string(img->name));
	json_object_object_add(o, "id", json_object_new_string(img->id));
	json_object_object_add(o, "files", json_object_new_int64(img->files));
	json_object_object_add(o, "bytes", json_object_new_int64(img->bytes));
	json_object_object_add(o, "built", json_object_new_int64(img->built));
	json_object_object_add(o, "rootfs", json_object_new_string(img->rootfs));
	json_object_object_add(o, "kvm", json_object_new_boolean(img->kvm));
	json_object_object_add(o, "format", json_object_new_string(img->format));
	if (img->blob[0])
		json_object_object_add(o, "blob", json_object_new_string(img->blob));
	if (img->kvm) {
		json_object_object_add(o, "kernel", json_object_new_string(img->kernel));
		json_object_object_add(o, "vmlinux", json_object_new_string(img->vmlinux));
		json_object_object_add(o, "initrd", json_object_new_string(img->initrd));
		json_object_object_add(o, "disk", json_object_new_string(img->disk));
		json_object_object_add(o, "kernel_release", json_object_new_string(img->kernel_release));
	}
	return o;
}

/* vhpc image list [--json] [--local] */
static int list(int argc, char **argv)
{
	bool json = false, local = false;
	struct image_info *v;
	struct verr err;
	char ctl[300];
	size_t n;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--local"))
			local = true;
		else
			return usage_error("image list", "unknown option '%s'", argv[i]);
	}
	/* With a cluster, its store and the nodes' caches; this
	 * machine's own builds with --local. */
	if (!local && client_controller(ctl, sizeof(ctl), &err) == 1)
		return cmd_image_store_list(ctl, json);
	if (image_list(&v, &n, &err) < 0) {
		log_err("%s", err.msg);
		return 1;
	}
	if (json) {
		struct json_object *a = json_object_new_array();

		for (size_t i = 0; i < n; i++)
			json_object_array_add(a, image_json(&v[i]));
		printf("%s\n", json_object_to_json_string_ext(a, JSON_C_TO_STRING_PRETTY));
		json_object_put(a);
	} else {
		printf("%-16s %-12s  %12s  %10s  %-8s  %s\n", "NAME", "ID", "FILES", "SIZE", "FORMAT", "BUILT");
		for (size_t i = 0; i < n; i++)
			print_image(&v[i]);
	}
	free(v);
	return 0;
}

static int fetch_kernel(int argc, char **argv)
{
	char tree[4096];
	struct verr err;

	if (argc != 3)
		return usage_error("image fetch-kernel", "give one linux-image-* package name");
	if (image_fetch_kernel(argv[2], tree, sizeof(tree), &err) < 0) {
		log_err("%s", err.msg);
		return 1;
	}
	printf("%s\n", tree);
	return 0;
}

static int verify(int argc, char **argv)
{
	struct image_info img;
	struct verr err;

	if (argc != 3)
		return usage_error("image verify", "give one image name or id");
	if (image_lookup(argv[2], &img, &err) < 0 || image_verify(&img, &err) < 0) {
		log_err("%s", err.msg);
		return 1;
	}
	printf("image %s (%.12s): content matches its id\n", img.name, img.id);
	return 0;
}

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} subcommands[] = {
	{ "build", build }, { "import", import }, { "push", cmd_image_store }, { "list", list },
	{ "rm", cmd_image_store }, { "verify", verify }, { "fetch-kernel", fetch_kernel },
};

int cmd_image(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help")) {
		printf("usage: vhpc image build FILE [--force] [--format tree|squashfs|erofs] [--no-kvm]\n"
		       "       vhpc image import oci:DIR[:TAG] | docker-archive:FILE [--name NAME] [--base IMAGE | --no-kvm]\n"
		       "                         [--format tree|squashfs|erofs]   an OCI image as a node image\n"
		       "       vhpc image import docker://REGISTRY/REPO:TAG|@sha256:DIGEST [those options] [--authfile FILE]\n"
		       "                         [--cert-dir DIR] [--tls-verify=false] [--layer-cache-max SIZE]   from a registry\n"
		       "       vhpc image push NAME [--as NAME]      (root) into the cluster's store\n"
		       "       vhpc image list [--json] [--local]    the cluster's store and nodes' caches; --local: this machine's\n"
		       "       vhpc image rm NAME[@VERSION]          (root) from the cluster's store (@: one earlier version)\n"
		       "       vhpc image verify NAME|ID | fetch-kernel PACKAGE\n");
		return argc < 2 ? EXIT_USAGE : 0;
	}
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].run(argc, argv);
	return usage_error("image", "unknown subcommand '%s' (build, import, push, list, rm, verify, fetch-kernel)", argv[1]);
}
