/*
 * vhpc-ctld's image store requests (scheduler/PROTOCOL.md, "Images"):
 * root pushes an image (image_have: which objects the store lacks;
 * image_put: their bytes; image_tag: the name) and removes names
 * (image_rm); node agents fetch what they lack (image_get); anyone lists
 * the store and the nodes' caches (image_list).  A job's image name is
 * resolved to an id at submit, so it runs that content whatever is pushed
 * after; a job that names an id names an image (imgstore_image), and the
 * objects of an image stay while a job not yet ended holds it.
 */
#include "lib/err.h"
#include "images/images.h"
#include "lib/imgwire.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/wire.h"
#include "ctld.h"
#include "imgstore.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct json_object *do_have(struct ctld *ctl, const struct cmsg *m)
{
	bool *missing = calloc((size_t)m->nobjects, sizeof(bool));
	const char **names = calloc((size_t)m->nobjects, sizeof(char *));
	struct json_object *r;
	struct verr e;
	int n = 0;

	if (!missing || !names) {
		free(missing);
		free(names);
		return ctld_error("internal", "out of memory");
	}
	for (int i = 0; i < m->nobjects; i++)
		names[i] = m->objects[i];
	if (imgstore_missing(ctl->images, names, m->nobjects, missing, &e) < 0) {
		free(missing);
		free(names);
		return ctld_error("internal", "%s", e.msg);
	}
	for (int i = 0; i < m->nobjects; i++)
		if (missing[i])
			names[n++] = m->objects[i];
	r = ctld_reply("image_missing");
	json_object_object_add(r, "missing", imgwire_sha_array(names, n));
	free(missing);
	free(names);
	return r;
}

static struct json_object *do_put(struct ctld *ctl, const struct cmsg *m)
{
	struct json_object *r = ctld_reply("image_stored"), *a = json_object_new_array();

	json_object_object_add(r, "parts", a);
	for (int i = 0; i < m->nparts; i++) {
		const struct image_chunk *c = &m->parts[i];
		struct json_object *o;
		uint64_t next;
		struct verr e;

		if (imgstore_put(ctl->images, c->object, c->size, c->offset, c->data, c->len, &next, &e) < 0) {
			json_object_put(r);
			log_warn("image_put: %s", e.msg);
			return ctld_error("invalid", "%s", e.msg);
		}
		o = json_object_new_object();
		json_object_object_add(o, "object", json_object_new_string(c->object));
		json_object_object_add(o, "next", json_object_new_int64((int64_t)next));
		json_object_array_add(a, o);
	}
	return r;
}

static struct json_object *ref_json(const struct imgstore_ref *ref)
{
	struct json_object *o = json_object_new_object(), *prev = json_object_new_array();

	json_object_object_add(o, "name", json_object_new_string(ref->name));
	json_object_object_add(o, "id", json_object_new_string(ref->id));
	json_object_object_add(o, "pushed", json_object_new_int64(ref->pushed));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)ref->bytes));
	json_object_object_add(o, "files", json_object_new_int64(ref->files));
	json_object_object_add(o, "format", json_object_new_string(ref->format));
	json_object_object_add(o, "kvm", json_object_new_boolean(ref->kvm));
	if (ref->kvm)
		json_object_object_add(o, "kernel_release", json_object_new_string(ref->kernel_release));
	for (int i = 0; i < ref->nprev; i++)
		json_object_array_add(prev, json_object_new_string(ref->prev[i]));
	json_object_object_add(o, "previous", prev);
	return o;
}

static struct json_object *do_tag(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	struct imgstore_ref ref;
	struct json_object *r;
	struct verr e;

	struct image_sigs sigs = { .n = 0 };
	int nsigs = 0;

	/* Signatures that do not parse, or do not sign this id, refuse the
	 * push before the name moves. */
	if (m->signatures && image_sigs_parse(m->signatures, strlen(m->signatures), &sigs, &e) < 0)
		return ctld_error("invalid", "the signatures of image %.12s: %s", m->image_id, e.msg);
	for (int i = 0; i < sigs.n; i++)
		if (!image_sig_valid(&sigs.v[i], m->image_id))
			return ctld_error("invalid", "signature %d of image %.12s does not verify for that id "
					  "(a signature of another image, or a damaged one); refused", i + 1, m->image_id);
	if (imgstore_tag(ctl->images, m->name, m->image_id, uid, ctld_wall_s(), &ref, &e) < 0)
		return ctld_error("invalid", "%s", e.msg);
	if (sigs.n && imgstore_sign(ctl->images, ref.id, &sigs, &nsigs, &e) < 0)
		return ctld_error("invalid", "%s", e.msg);
	log_info("image %s is now %.12s (%s, %ld files), pushed by uid %u%s", ref.name, ref.id, ref.format,
		 ref.files, (unsigned)uid, nsigs ? ", signed" : "");
	r = ctld_reply("image_tagged");
	json_object_object_add(r, "image", ref_json(&ref));
	if (nsigs)
		json_object_object_add(json_object_object_get(r, "image"), "signatures", json_object_new_int(nsigs));
	return r;
}

/* The bytes of objects[0] from offset on, then of the next ones, up to
 * one message's worth, as the reply's data. */
static struct json_object *do_get(struct ctld *ctl, const struct cmsg *m)
{
	uint8_t *buf = malloc(IMGWIRE_CHUNK);
	struct json_object *r, *parts;
	size_t used = 0;
	uint64_t off = (uint64_t)m->offset;

	if (!buf)
		return ctld_error("internal", "out of memory");
	/* A node pulls an image's manifest: only one the store took as an
	 * image, never a file that merely has the id's sha256. */
	if (m->manifest && !imgstore_is_image(ctl->images, m->objects[0])) {
		free(buf);
		return ctld_error("not_found", "image %s is not an image of the cluster's store (no manifest pushed and tagged has that id); refused",
				  m->objects[0]);
	}
	r = ctld_reply("image_data");
	parts = json_object_new_array();
	json_object_object_add(r, "parts", parts);
	for (int i = 0; i < m->nobjects && used < IMGWIRE_CHUNK; i++, off = 0) {
		size_t len;
		uint64_t size;
		struct verr e;

		if (imgstore_read(ctl->images, m->objects[i], off, buf + used, IMGWIRE_CHUNK - used, &len, &size, &e) < 0) {
			free(buf);
			json_object_put(r);
			return ctld_error("not_found", "%s", e.msg);
		}
		if (off > size) {
			free(buf);
			json_object_put(r);
			return ctld_error("invalid", "object %.12s holds %llu bytes: nothing at %llu", m->objects[i],
					  (unsigned long long)size, (unsigned long long)off);
		}
		json_object_array_add(parts, imgwire_part(m->objects[i], size, off, len));
		used += len;
		/* A part that does not reach its object's end fills the message. */
		if (off + len < size)
			break;
	}
	json_object_object_add(r, WIRE_DATA, json_object_new_string_len((const char *)buf, (int)used));
	free(buf);
	/* An image's signatures go with its manifest (a node that asks at
	 * the manifest's end gets only them); the node checks them against
	 * its own keys (images/sign.c). */
	if (m->manifest) {
		struct image_sigs sigs;
		char text[IMAGE_SIG_TEXT_MAX + 1];
		struct verr e;

		if (imgstore_sigs(ctl->images, m->objects[0], &sigs, &e) < 0)
			log_warn("image %.12s: %s; sent without signatures", m->objects[0], e.msg);
		else if (sigs.n) {
			image_sigs_format(&sigs, text);
			json_object_object_add(r, "signatures", json_object_new_string(text));
		}
	}
	ctld_metrics_image_sent(ctl, m->manifest && m->offset == 0, used);
	return r;
}

static void free_ids(const char **v, int n)
{
	for (int i = 0; i < n; i++)
		free((char *)v[i]);
	free(v);
}

/* Ids that jobs not yet ended and checkpoints hold (a restart runs the
 * content its guests ran); -1 when out of memory (an empty list would let
 * a collection take their images).  Takes ctl->mu. */
static int held_ids(struct ctld *ctl, const char ***out)
{
	struct ckpt_row *cv = NULL;
	size_t nc = 0;
	struct verr e;
	const char **v;
	int n = 0;

	pthread_mutex_lock(&ctl->mu);
	if (store_ckpt_list(ctl->st, -1, &cv, &nc, &e) < 0) {
		pthread_mutex_unlock(&ctl->mu);
		log_warn("image store: %s", e.msg);
		return -1;
	}
	v = calloc((size_t)ctl->njobs + nc + 1, sizeof(*v));
	for (size_t i = 0; v && i < nc; i++) {
		struct json_object *rec = json_tokener_parse(cv[i].record), *id;

		if (rec && json_object_object_get_ex(rec, "image_id", &id) && json_object_get_string_len(id) == 64 &&
		    !(v[n++] = strdup(json_object_get_string(id)))) {
			free_ids(v, n);
			v = NULL;
		}
		json_object_put(rec);
	}
	store_ckpt_rows_free(cv, nc);
	for (int i = 0; v && i < ctl->njobs; i++)
		if (!store_job_state_final(ctl->jobs[i]->state) && ctl->jobs[i]->image_id[0] &&
		    !(v[n++] = strdup(ctl->jobs[i]->image_id))) {
			free_ids(v, n);
			v = NULL;
		}
	pthread_mutex_unlock(&ctl->mu);
	*out = v;
	return v ? n : -1;
}

void ctld_image_gc(struct ctld *ctl)
{
	const char **held;
	int nheld = held_ids(ctl, &held), still = 0;
	long removed;
	uint64_t freed;
	struct verr e;

	if (nheld < 0 || imgstore_gc(ctl->images, held, nheld, &removed, &freed, &e) < 0) {
		log_warn("image store: collecting: %s; trying again later", nheld < 0 ? "out of memory" : e.msg);
		if (nheld >= 0)
			free_ids(held, nheld);
		pthread_mutex_lock(&ctl->mu);
		ctl->img_gc_pending = true;
		pthread_mutex_unlock(&ctl->mu);
		return;
	}
	if (removed) {
		char sz[32];

		log_info("image store: removed %ld objects (%s) no image needs any more", removed,
			 fmt_size(freed, sz, sizeof(sz)));
	}
	/* Held ids no name points at keep the collection pending. */
	{
		struct imgstore_ref *refs;
		size_t nrefs = 0;

		if (imgstore_refs(ctl->images, &refs, &nrefs, &e) == 0) {
			for (int i = 0; i < nheld; i++) {
				bool named = false;

				for (size_t k = 0; k < nrefs && !named; k++)
					named = !strcmp(refs[k].id, held[i]);
				still += !named;
			}
			free(refs);
		}
	}
	pthread_mutex_lock(&ctl->mu);
	ctl->img_gc_pending = still > 0;
	pthread_mutex_unlock(&ctl->mu);
	free_ids(held, nheld);
}

static struct json_object *do_rm(struct ctld *ctl, const struct cmsg *m, uid_t uid)
{
	char id[65];
	struct json_object *r;
	struct verr e;
	int held = 0;

	if (m->image_id[0] ? imgstore_retire(ctl->images, m->name, m->image_id, id, &e) < 0
			   : imgstore_untag(ctl->images, m->name, id, &e) < 0)
		return ctld_error("not_found", "%s", e.msg);
	pthread_mutex_lock(&ctl->mu);
	for (int i = 0; i < ctl->njobs; i++)
		held += !store_job_state_final(ctl->jobs[i]->state) && !strcmp(ctl->jobs[i]->image_id, id);
	pthread_mutex_unlock(&ctl->mu);
	log_info("image %s%s (%.12s) removed by uid %u%s", m->name, m->image_id[0] ? ", an earlier version" : "", id,
		 (unsigned)uid, held ? "; its content stays while jobs hold it" : "");
	ctld_image_gc(ctl);
	r = ctld_reply("image_removed");
	json_object_object_add(r, "name", json_object_new_string(m->name));
	json_object_object_add(r, "id", json_object_new_string(id));
	json_object_object_add(r, "held_by_jobs", json_object_new_int(held));
	return r;
}

static struct json_object *do_list(struct ctld *ctl)
{
	struct json_object *r = ctld_reply("images"), *imgs = json_object_new_array(),
		*held = json_object_new_array(), *nodes = json_object_new_array();
	struct imgstore_ref *refs = NULL;
	size_t nrefs = 0;
	uint64_t bytes;
	long objects;
	struct verr e;

	if (imgstore_refs(ctl->images, &refs, &nrefs, &e) < 0) {
		json_object_put(r);
		json_object_put(imgs);
		json_object_put(held);
		json_object_put(nodes);
		return ctld_error("internal", "%s", e.msg);
	}
	for (size_t i = 0; i < nrefs; i++) {
		struct json_object *o = ref_json(&refs[i]);
		struct image_sigs sigs;

		/* How many signatures: which keys, and whether a node trusts
		 * them, is each node's cluster file's to say. */
		if (imgstore_sigs(ctl->images, refs[i].id, &sigs, &e) == 0 && sigs.n)
			json_object_object_add(o, "signatures", json_object_new_int(sigs.n));
		json_object_array_add(imgs, o);
	}
	imgstore_usage(ctl->images, &bytes, &objects);
	pthread_mutex_lock(&ctl->mu);
	/* Ids jobs hold that no name points at any more (removed, or pushed over). */
	for (int i = 0; i < ctl->njobs; i++) {
		const struct cjob *j = ctl->jobs[i];
		bool named = false;

		if (store_job_state_final(j->state) || !j->image_id[0])
			continue;
		for (size_t k = 0; k < nrefs && !named; k++)
			named = !strcmp(refs[k].id, j->image_id);
		if (!named) {
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "id", json_object_new_string(j->image_id));
			json_object_object_add(o, "name", json_object_new_string(j->image));
			json_object_object_add(o, "job", json_object_new_int64(j->id));
			json_object_array_add(held, o);
		}
	}
	for (int i = 0; i < ctl->nnodes; i++) {
		const struct cnode *n = &ctl->nodes[i];
		struct json_object *o = json_object_new_object(), *c = json_object_new_array();

		json_object_object_add(o, "node", json_object_new_string(n->name));
		json_object_object_add(o, "state", json_object_new_string(n->up ? "up" : "down"));
		for (int k = 0; k < n->ncache; k++) {
			struct json_object *ce = json_object_new_object();

			json_object_object_add(ce, "id", json_object_new_string(n->cache[k].id));
			json_object_object_add(ce, "name", json_object_new_string(n->cache[k].name));
			json_object_object_add(ce, "bytes", json_object_new_int64((int64_t)n->cache[k].bytes));
			json_object_object_add(ce, "used", json_object_new_int64(n->cache[k].used));
			json_object_object_add(ce, "in_use", json_object_new_boolean(n->cache[k].in_use));
			json_object_array_add(c, ce);
		}
		json_object_object_add(o, "images", c);
		json_object_array_add(nodes, o);
	}
	pthread_mutex_unlock(&ctl->mu);
	free(refs);
	json_object_object_add(r, "images", imgs);
	json_object_object_add(r, "held", held);
	json_object_object_add(r, "store_bytes", json_object_new_int64((int64_t)bytes));
	json_object_object_add(r, "store_objects", json_object_new_int64(objects));
	json_object_object_add(r, "nodes", nodes);
	return r;
}

struct json_object *ctld_image_handle(struct ctld *ctl, const struct cmsg *m, const struct wire_peer *peer)
{
	switch (m->type) {
	case CM_IMAGE_HAVE: return do_have(ctl, m);
	case CM_IMAGE_PUT: return do_put(ctl, m);
	case CM_IMAGE_TAG: return do_tag(ctl, m, peer->uid);
	case CM_IMAGE_GET: return do_get(ctl, m);
	case CM_IMAGE_LIST: return do_list(ctl);
	case CM_IMAGE_RM: return do_rm(ctl, m, peer->uid);
	default: return ctld_error("invalid", "not an image message");
	}
}

/* A job that asks for kvm by name needs an image with a kernel; under
 * "auto" a node may still pick containers, so the node says. */
static bool wants_kvm(const struct job_spec *js)
{
	const char *d = vhpc_driver_name(js->driver);

	return d && !strcmp(d, "kvm");
}

int ctld_image_resolve(struct ctld *ctl, struct json_object *spec, const struct job_spec *js, struct verr *err)
{
	const char *name = js->image ? js->image : ctl->cl.default_image;
	struct imgstore_ref ref;

	if (js->image_id) {
		struct imgstore_image im;

		/* An image root pushed, by its id: never any object of the
		 * store, nor one removed since. */
		if (imgstore_image(ctl->images, js->image_id, js->image, &im, err) < 0)
			return -1;
		if (wants_kvm(js) && !im.kvm)
			return verr_set(err, "image %s (%.12s) has no kvm parts (kernel, initramfs)", im.name, js->image_id);
		if (!js->image)
			json_object_object_add(spec, "image", json_object_new_string(im.name));
		return 0;
	}
	if (imgstore_lookup(ctl->images, name, &ref, err) < 0)
		return -1;
	if (wants_kvm(js) && !ref.kvm)
		return verr_set(err, "image %s (%.12s) has no kvm parts (kernel, initramfs): build it with a kvm: section and push it again",
				name, ref.id);
	json_object_object_add(spec, "image", json_object_new_string(name));
	json_object_object_add(spec, "image_id", json_object_new_string(ref.id));
	return 0;
}

void ctld_image_cache_update(struct cnode *n, const struct cmsg *m)
{
	struct cmsg_cached *c;

	if (!m->have_cache)
		return;
	c = m->ncache ? malloc((size_t)m->ncache * sizeof(*c)) : NULL;
	if (m->ncache && !c)
		return;
	if (c)
		memcpy(c, m->cache, (size_t)m->ncache * sizeof(*c));
	free(n->cache);
	n->cache = c;
	n->ncache = m->ncache;
}
