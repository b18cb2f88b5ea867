/*
 * `vhpc image import docker://REGISTRY/REPO:TAG|@sha256:DIGEST`: the image
 * a registry holds, copied by Debian's skopeo into the import's OCI layout
 * (oci.c unpacks it from there as it does a local one).
 *
 * - What is imported is pinned: the manifest is fetched first, its sha256
 *   taken here (skopeo's `inspect --raw` does not check it against a
 *   digest it was asked for), compared with the pin when there is one,
 *   and the copy then asks for that digest, so a tag moved in between
 *   cannot change what comes; the digest goes into the image's record.
 * - The manifest says how many blobs of what size will come: too many or
 *   too big is refused before a layer is fetched, and skopeo runs under a
 *   file size limit of the largest, so a blob longer than it said stops
 *   there.
 * - Credentials come from the file skopeo and podman use (--authfile,
 *   REGISTRY_AUTH_FILE, else skopeo's default): never on a command line,
 *   which any user reads in /proc.  TLS is verified; plain HTTP or an
 *   unchecked certificate only with --tls-verify=false.
 * - Layers go into the layer cache (registry_cache.c) and are fetched only
 *   when it lacks them.
 */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/proc.h"
#include "images/images.h"
#include "images/registry_int.h"

#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define SKOPEO_TIMEOUT_MS 1800000

/* This host's architecture as OCI names it. */
static const char *oci_arch(void)
{
	static struct utsname u;

	if (uname(&u) < 0 || !strcmp(u.machine, "x86_64"))
		return "amd64";
	if (!strcmp(u.machine, "aarch64"))
		return "arm64";
	if (!strcmp(u.machine, "ppc64le") || !strcmp(u.machine, "s390x") || !strcmp(u.machine, "riscv64"))
		return u.machine;
	return "amd64";
}

static void sha256_digest(const char *text, size_t len, char out[72])
{
	unsigned char d[32];

	crypto_hash_sha256(d, (const unsigned char *)text, len);
	memcpy(out, "sha256:", 7);
	for (int i = 0; i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

/* The first line says which failure it is; skopeo's words follow. */
void image_reg_explain(const struct image_reg_ref *r, const char *what, const char *say, struct verr *err)
{
	static const struct {
		const char *needle, *say;
	} known[] = {
		{ "does not match", "manifest digest mismatch: what the registry sent is not the digest asked for" },
		{ "unauthorized", "the registry refused the credentials (wrong user or password, or none: give them with "
				  "--authfile FILE or REGISTRY_AUTH_FILE, as skopeo login writes them)" },
		{ "authentication required", NULL },
		{ "denied", NULL },
		{ "manifest unknown", "no such image in the registry: unknown tag, digest or repository" },
		{ "name unknown", NULL },
		{ "x509:", "the registry's TLS certificate is not trusted (give its CA with --cert-dir DIR, or put it in "
			   "/etc/containers/certs.d/REGISTRY/ca.crt)" },
		{ "tls:", NULL },
		{ "HTTP response to HTTPS client", "the registry speaks plain HTTP: vhpc uses HTTPS unless told "
						   "--tls-verify=false" },
		{ "connection refused", "cannot reach the registry (connection refused)" },
		{ "no such host", "cannot reach the registry (unknown host)" },
		{ "network is unreachable", "cannot reach the registry (network unreachable)" },
		{ "file too large", "a blob is larger than the manifest says: refused" },
		{ "killed by signal 25", NULL },
		{ "unexpected EOF", "the registry stopped answering during the pull" },
		{ "connection reset", NULL },
		{ "broken pipe", NULL },
		{ "EOF", NULL },
		{ "i/o timeout", "the registry stopped answering during the pull (timed out)" },
		{ "did not finish within", NULL },
	};
	char orig[sizeof(err->msg)], *skopeo;
	snprintf(orig, sizeof(orig), "%s", err->msg);
	/* Go's log line: the message is what tells, unquoted. */
	if ((skopeo = strstr(orig, "msg=\""))) {
		char *w = skopeo, *c = skopeo + 5;

		for (; *c; c++) {
			if (c[0] == '\\' && c[1]) {
				c++;
				*w++ = *c == 'n' || *c == 't' ? ' ' : *c;
			} else if (*c == '"' && !c[1]) {
				break;
			} else {
				*w++ = *c;
			}
		}
		*w = 0;
	}
	skopeo = skopeo ? skopeo : orig;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && !say; i++)
		if (strstr(orig, known[i].needle)) {
			size_t j = i;

			while (!known[j].say)
				j--;
			say = known[j].say;
		}
	if (!say)
		say = "skopeo could not copy the image";
	verr_set(err, "docker://%s/%s%s%s: %s\n  (%s) %s", r->registry, r->repo, r->tag[0] ? ":" : "@",
		 r->tag[0] ? r->tag : r->digest, say, what, skopeo);
}

/* The options both skopeo commands take.  cert is the option's name for
 * the CA folder (inspect: --cert-dir, copy: --src-cert-dir). */
static int transport_args(const struct image_registry_opts *o, const char **argv, int n, bool copy)
{
	if (o->authfile) {
		argv[n++] = "--authfile";
		argv[n++] = o->authfile;
	}
	if (o->cert_dir) {
		argv[n++] = copy ? "--src-cert-dir" : "--cert-dir";
		argv[n++] = o->cert_dir;
	}
	if (o->tls_verify_off)
		argv[n++] = copy ? "--src-tls-verify=false" : "--tls-verify=false";
	return n;
}

/* The manifest ref names, its sha256 into digest. */
static int fetch_manifest(const struct image_reg_ref *r, const struct image_registry_opts *o, const char *ref,
			  char **text, size_t *len, char digest[72], struct verr *err)
{
	const char *argv[16] = { "skopeo", "inspect", "--raw" };
	int n = transport_args(o, argv, 3, false);

	argv[n++] = ref;
	argv[n] = NULL;
	/* One byte more than a manifest may have: run_capture keeps that
	 * much and drops the rest, so more is seen and refused below. */
	if (run_capture(argv, text, len, IMAGE_REG_MAX_MANIFEST + 1, SKOPEO_TIMEOUT_MS, err) != 0) {
		image_reg_explain(r, "fetching its manifest", NULL, err);
		return -1;
	}
	if (*len > IMAGE_REG_MAX_MANIFEST) {
		free(*text);
		return verr_set(err, "%s: the registry sent a manifest of more than %u bytes", ref, IMAGE_REG_MAX_MANIFEST);
	}
	sha256_digest(*text, *len, digest);
	return 0;
}

/* The image's manifest (an index's entry for this host) checked and
 * bounded; top gets the digest the reference stands for. */
static int resolve(const struct image_reg_ref *r, const struct image_registry_opts *o, struct image_reg_manifest *m,
		   char top[72], struct verr *err)
{
	char ref[800], *text = NULL, got[72];
	size_t len = 0;
	const char *arch = oci_arch();

	snprintf(ref, sizeof(ref), "docker://%s/%s%s%s", r->registry, r->repo, r->tag[0] ? ":" : "@",
		 r->tag[0] ? r->tag : r->digest);
	if (fetch_manifest(r, o, ref, &text, &len, top, err) < 0)
		return -1;
	if (r->digest[0] && strcmp(top, r->digest)) {
		free(text);
		return verr_set(err, "%s: manifest digest mismatch: the registry sent a manifest whose sha256 is %s, not the "
				"pinned %s; nothing imported", ref, top, r->digest);
	}
	if (image_reg_manifest_parse(text, len, arch, m, err) < 0) {
		free(text);
		return verr_wrap(err, "%s (%s)", ref, top);
	}
	free(text);
	if (!m->index)
		return 0;
	/* An index: the entry skopeo will copy, fetched and checked too. */
	image_reg_ref_pinned(r, m->instance.digest, ref, sizeof(ref));
	if (fetch_manifest(r, o, ref, &text, &len, got, err) < 0)
		return -1;
	if (strcmp(got, m->instance.digest) || len != m->instance.size) {
		free(text);
		return verr_set(err, "%s: manifest digest mismatch: the index's linux/%s entry is %s (%llu bytes); the "
				"registry sent %s (%zu bytes)", ref, arch, m->instance.digest,
				(unsigned long long)m->instance.size, got, len);
	}
	if (image_reg_manifest_parse(text, len, arch, m, err) < 0 || m->index) {
		free(text);
		if (m->index)
			verr_set(err, "an index inside an index");
		image_reg_manifest_free(m);
		return verr_wrap(err, "%s", ref);
	}
	free(text);
	return 0;
}

/* A credentials file must be a file; one others can read is named. */
static int check_authfile(const char *path, const char *how, struct verr *err)
{
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || access(path, R_OK) < 0)
		return verr_set(err, "%s %s: not a readable file (skopeo login --authfile FILE writes one)", how, path);
	if (st.st_mode & 077)
		log_warn("%s %s is open to other users (mode %o): it holds registry passwords; chmod 600 it", how, path,
			 st.st_mode & 0777);
	return 0;
}

int image_registry_fetch(const char *src, const struct image_registry_opts *o, const char *stage,
			 const char *policy, struct image_registry_pull *out, struct verr *err)
{
	struct image_reg_ref r;
	struct image_reg_manifest m = { 0 };
	char cache[PATH_MAX], from[800], dst[PATH_MAX + 32], fsize[64], sz1[32], sz2[32];
	const char *env = getenv("REGISTRY_AUTH_FILE");
	uint64_t max = o->cache_max ? o->cache_max : IMAGE_LAYER_CACHE_DEFAULT;
	struct verr e2;
	int rc = -1;
	double t0;

	memset(out, 0, sizeof(*out));
	if (image_reg_ref_parse(src, &r, err) < 0)
		return -1;
	if (o->authfile ? check_authfile(o->authfile, "--authfile", err) < 0
			: env && *env && check_authfile(env, "REGISTRY_AUTH_FILE", err) < 0)
		return -1;
	if (o->cert_dir) {
		struct stat st;

		if (stat(o->cert_dir, &st) < 0 || !S_ISDIR(st.st_mode))
			return verr_set(err, "--cert-dir %s: not a folder (it holds the registry's CA as *.crt)", o->cert_dir);
	}
	if (resolve(&r, o, &m, out->digest, err) < 0)
		return -1;
	if (image_reg_cache_dir(cache, sizeof(cache), err) < 0)
		goto out;
	for (size_t i = 0; i < m.nlayers; i++) {
		bool have = image_reg_cache_has(cache, m.layers[i].digest);

		out->layers++;
		out->cached_layers += have;
		*(have ? &out->cached : &out->fetched) += m.layers[i].size;
	}
	out->fetched += m.config.size;
	image_reg_ref_pinned(&r, out->digest, from, sizeof(from));
	snprintf(dst, sizeof(dst), "oci:%s/.oci:vhpc", stage);
	/* No file skopeo writes may outgrow the largest blob the manifest
	 * named (the manifests it writes are smaller than that cap). */
	snprintf(fsize, sizeof(fsize), "--fsize=%llu",
		 (unsigned long long)(m.largest > IMAGE_REG_MAX_MANIFEST ? m.largest : IMAGE_REG_MAX_MANIFEST) + 1);
	{
		const char *argv[24] = { "prlimit", fsize, "--", "skopeo", "--policy", policy, "copy", "--quiet" };
		int n = transport_args(o, argv, 8, true);

		argv[n++] = "--dest-shared-blob-dir";
		argv[n++] = cache;
		argv[n++] = from;
		argv[n++] = dst;
		argv[n] = NULL;
		t0 = now_s();
		if (run_capture(argv, NULL, NULL, 1 << 20, SKOPEO_TIMEOUT_MS, err) != 0) {
			/* The manifest the tag gave, asked for by its own digest. */
			bool unserved = r.tag[0] && strstr(err->msg, "manifest unknown");

			image_reg_explain(&r, "copying its layers", unserved
					  ? "manifest digest mismatch: the registry does not serve the manifest it sent for the tag "
					    "under that manifest's digest (changed in its storage, or the tag moved)" : NULL, err);
			goto trim;
		}
	}
	snprintf(dst, sizeof(dst), "%s/.oci", stage);
	if (image_reg_cache_link(cache, dst, err) < 0)
		goto trim;
	out->seconds = now_s() - t0;
	log_info("%s: manifest %s; %zu of %zu layers fetched (%s), %zu from the layer cache (%s); copied in %.2f s",
		 src, out->digest, out->layers - out->cached_layers, out->layers, fmt_size(out->fetched, sz1, sizeof(sz1)),
		 out->cached_layers, fmt_size(out->cached, sz2, sizeof(sz2)), out->seconds);
	rc = 0;
trim:
	/* This import's blobs are linked into its layout already. */
	if (image_reg_cache_trim(cache, max, &e2) < 0)
		log_warn("layer cache: %s", e2.msg);
out:
	image_reg_manifest_free(&m);
	return rc;
}
