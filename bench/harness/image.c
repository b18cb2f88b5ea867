/* --imb PATH: guests do not see the host's files, so the IMB binary goes
 * into a node image of its own: the guests' usual image YAML with PATH
 * added to its files (the image build copies the shared libraries it
 * needs), built with `vhpc image build`. */
#include "lib/bytes.h"
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/paths.h"
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "bench/harness/bh.h"

/* Deep copy of a node of src into dst; the new node's id, or 0. */
static int copy_node(yaml_document_t *src, int id, yaml_document_t *dst, int depth)
{
	yaml_node_t *n = yaml_document_get_node(src, id);
	int nid = 0;

	if (!n || depth > 32)
		return 0;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return yaml_document_add_scalar(dst, NULL, n->data.scalar.value, (int)n->data.scalar.length,
						YAML_ANY_SCALAR_STYLE);
	case YAML_SEQUENCE_NODE:
		nid = yaml_document_add_sequence(dst, NULL, YAML_BLOCK_SEQUENCE_STYLE);
		for (yaml_node_item_t *i = n->data.sequence.items.start; nid && i < n->data.sequence.items.top; i++) {
			int c = copy_node(src, *i, dst, depth + 1);

			if (!c || !yaml_document_append_sequence_item(dst, nid, c))
				return 0;
		}
		return nid;
	case YAML_MAPPING_NODE:
		nid = yaml_document_add_mapping(dst, NULL, YAML_BLOCK_MAPPING_STYLE);
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; nid && p < n->data.mapping.pairs.top; p++) {
			int k = copy_node(src, p->key, dst, depth + 1), v = copy_node(src, p->value, dst, depth + 1);

			if (!k || !v || !yaml_document_append_mapping_pair(dst, nid, k, v))
				return 0;
		}
		return nid;
	default:
		return 0;
	}
}

static bool scalar_is(yaml_document_t *d, int id, const char *s)
{
	yaml_node_t *n = yaml_document_get_node(d, id);

	return n && n->type == YAML_SCALAR_NODE && !strcmp((const char *)n->data.scalar.value, s);
}

static int scalar(yaml_document_t *d, const char *s)
{
	return yaml_document_add_scalar(d, NULL, (yaml_char_t *)s, (int)strlen(s), YAML_ANY_SCALAR_STYLE);
}

/* base's mapping with name replaced and imb copied to BH_IMB_GUEST_PATH; without
 * the kvm: section unless the guests are kvm's (building its kernel parts
 * needs a kernel package that container guests do not). */
static int derive(yaml_document_t *base, yaml_document_t *out, const char *name, const char *imb,
		  bool kvm, struct verr *err)
{
	yaml_node_t *root = yaml_document_get_root_node(base);
	int nroot;

	if (!root || root->type != YAML_MAPPING_NODE)
		return verr_set(err, "the image YAML is not a mapping");
	if (!yaml_document_initialize(out, NULL, NULL, NULL, 1, 1))
		return verr_set(err, "out of memory");
	nroot = yaml_document_add_mapping(out, NULL, YAML_BLOCK_MAPPING_STYLE);
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; nroot && p < root->data.mapping.pairs.top; p++) {
		int k, v;

		if (!kvm && scalar_is(base, p->key, "kvm"))
			continue;
		if (scalar_is(base, p->key, "name")) {
			k = scalar(out, "name");
			v = scalar(out, name);
		} else {
			if (scalar_is(base, p->key, "copy")) {
				yaml_document_delete(out);
				return verr_set(err, "the image YAML has its own copy: section");
			}
			k = copy_node(base, p->key, out, 0);
			v = copy_node(base, p->value, out, 0);
		}
		if (!k || !v || !yaml_document_append_mapping_pair(out, nroot, k, v))
			goto oom;
	}
	{
		/* copy: puts it at a fixed path: its own may be under /tmp,
		 * which guests have a tmpfs on. */
		int k = scalar(out, "copy"), m = yaml_document_add_mapping(out, NULL, YAML_BLOCK_MAPPING_STYLE);
		int dk = scalar(out, BH_IMB_GUEST_PATH), dv = scalar(out, imb);

		if (!k || !m || !dk || !dv || !yaml_document_append_mapping_pair(out, m, dk, dv) ||
		    !yaml_document_append_mapping_pair(out, nroot, k, m))
			goto oom;
	}
	return 0;
oom:
	yaml_document_delete(out);
	return verr_set(err, "out of memory building the image YAML");
}

static int load_yaml(const char *path, yaml_document_t *doc, struct verr *err)
{
	yaml_parser_t p;
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return verr_errno(err, "%s", path);
	yaml_parser_initialize(&p);
	yaml_parser_set_input_file(&p, f);
	ok = yaml_parser_load(&p, doc);
	if (!ok)
		verr_set(err, "%s:%zu: %s", path, p.problem_mark.line + 1, p.problem ? p.problem : "bad YAML");
	yaml_parser_delete(&p);
	fclose(f);
	return ok ? 0 : -1;
}

static int dump_yaml(const char *path, yaml_document_t *doc, struct verr *err)
{
	yaml_emitter_t e;
	FILE *f = fopen(path, "w");
	int ok;

	if (!f) {
		yaml_document_delete(doc);
		return verr_errno(err, "%s", path);
	}
	yaml_emitter_initialize(&e);
	yaml_emitter_set_output_file(&e, f);
	/* yaml_emitter_dump deletes the document, whatever happens. */
	ok = yaml_emitter_open(&e);
	if (ok)
		ok = yaml_emitter_dump(&e, doc) && yaml_emitter_close(&e);
	else
		yaml_document_delete(doc);
	yaml_emitter_delete(&e);
	if (fclose(f) != 0 || !ok)
		return verr_set(err, "%s: cannot write the image YAML", path);
	return 0;
}

void bh_imb_image_name(struct bh_ctx *c)
{
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[2 * crypto_hash_sha256_BYTES + 1];

	/* One image per IMB binary, so concurrent runs with different ones
	 * do not replace each other's. */
	crypto_hash_sha256(h, (const unsigned char *)c->imb, strlen(c->imb));
	hex_encode(h, sizeof(h), hex);
	snprintf(c->image, sizeof(c->image), "bench-imb-%.12s", hex);
}

int bh_imb_image(struct bh_ctx *c, struct verr *err)
{
	char base_yaml[PATH_MAX + 64], yaml[PATH_MAX + 32], out[PATH_MAX + 32], errp[PATH_MAX + 32];
	char prog[PATH_MAX];
	const char *base = c->o->image, *name = c->image;
	struct cluster_cfg cl;
	yaml_document_t bd, nd;
	struct bh_proc p;
	char **argv;
	int rc;

	memset(&cl, 0, sizeof(cl));
	if (!base) {
		if (cluster_load(NULL, &cl, err) < 0)
			return verr_wrap(err, "--imb");
		base = cl.default_image;
	}
	snprintf(base_yaml, sizeof(base_yaml), "%s/images/%s.yaml", vhpc_config_dir(), base);
	rc = load_yaml(base_yaml, &bd, err);
	if (rc == 0) {
		rc = derive(&bd, &nd, name, c->imb, !strcmp(c->driver, "kvm"), err);
		yaml_document_delete(&bd);
	}
	if (cl.name || cl.default_image)
		cluster_free(&cl);
	if (rc < 0)
		return verr_wrap(err, "--imb: the guests' image with IMB in it");
	snprintf(yaml, sizeof(yaml), "%s/image-imb.yaml", c->dir);
	if (dump_yaml(yaml, &nd, err) < 0)
		return -1;
	snprintf(out, sizeof(out), "%s/raw/image-build.out", c->dir);
	snprintf(errp, sizeof(errp), "%s/raw/image-build.err", c->dir);
	argv = bh_argv(bh_prog(c, "vhpc", prog, sizeof(prog)), "image", "build", yaml, NULL);
	if (!argv)
		return verr_set(err, "out of memory");
	rc = bh_spawn(argv, out, errp, 600, &p, err);
	bh_argv_free(argv);
	if (rc < 0)
		return -1;
	if (p.status != 0 || p.interrupted)
		return verr_set(err, "--imb: `vhpc image build %s` failed (exit status %d); see %s", yaml, p.status, errp);
	return 0;
}
