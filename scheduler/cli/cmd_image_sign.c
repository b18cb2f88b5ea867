/*
 * vhpc image keygen FILE: an ed25519 key pair for signing images, the
 * secret in FILE (0600) and the public key in FILE.pub, the line an admin
 * puts in the cluster file's images.trusted_keys.
 * vhpc image sign NAME --key FILE: signs a local image's id, after checking
 * that its files are what its id says; `vhpc image push` sends the
 * signature with it (images/README.md, "Signed images").
 */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/log.h"
#include "cli.h"
#include "images/images.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

static int keygen(int argc, char **argv)
{
	char pub[CLUSTER_KEY_TEXT];
	struct verr err;

	if (argc != 3 || argv[2][0] == '-')
		return usage_error("image keygen", "give the file for the secret key (the public one goes beside it, in FILE.pub)");
	if (image_key_generate(argv[2], pub, &err) < 0) {
		fprintf(stderr, "vhpc image keygen: %s\n", err.msg);
		return 1;
	}
	printf("secret key: %s (keep it to yourself: whoever has it signs images your nodes trust)\n"
	       "public key: %s.pub\n"
	       "to trust it, in the cluster file of every node:\n"
	       "  images:\n    trusted_keys: [%s]\n    require_signed: true\n", argv[2], argv[2], pub);
	return 0;
}

static int sign(int argc, char **argv)
{
	const char *name = NULL, *key = NULL;
	struct image_info img;
	struct image_sigs sigs;
	struct image_sig sig;
	uint8_t sk[64];
	char pub[CLUSTER_KEY_TEXT];
	struct verr err;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--key") && i + 1 < argc)
			key = argv[++i];
		else if (argv[i][0] == '-')
			return usage_error("image sign", "unknown option or missing value: '%s'", argv[i]);
		else if (name)
			return usage_error("image sign", "one image at a time ('%s' and '%s')", name, argv[i]);
		else
			name = argv[i];
	}
	if (!name || !key)
		return usage_error("image sign", "usage: vhpc image sign NAME --key FILE (a secret key of vhpc image keygen)");
	if (image_key_load(key, sk, &err) < 0) {
		fprintf(stderr, "vhpc image sign: %s\n", err.msg);
		return 1;
	}
	/* A signature says "this content": the content is checked first. */
	if (image_lookup(name, &img, &err) < 0 || image_verify(&img, &err) < 0 ||
	    image_sigs_read(img.dir, &sigs, &err) < 0) {
		sodium_memzero(sk, sizeof(sk));
		fprintf(stderr, "vhpc image sign: %s\n", err.msg);
		return 1;
	}
	image_sig_make(sk, img.id, &sig);
	sodium_memzero(sk, sizeof(sk));
	if (image_sigs_add(&sigs, &sig, &err) < 0 || image_sigs_write(img.dir, &sigs, &err) < 0) {
		fprintf(stderr, "vhpc image sign: image %s: %s\n", img.name, err.msg);
		return 1;
	}
	cluster_key_format(sig.key, pub);
	printf("signed image %s (%.12s) with key %s (%d signature%s); vhpc image push %s sends it\n", img.name, img.id,
	       pub, sigs.n, sigs.n == 1 ? "" : "s", img.name);
	return 0;
}

int cmd_image_sign(int argc, char **argv)
{
	return !strcmp(argv[1], "keygen") ? keygen(argc, argv) : sign(argc, argv);
}
