/*
 * The image store's record of its images (imgstore_rec.h), one JSON file
 * per id: {"names": [...], "was": NAME, "kvm": BOOL}.  Written whole
 * beside the old one and renamed over it, synced, never through a symlink.
 */
#include "lib/err.h"
#include "lib/parse.h"
#include "images/images.h"
#include "imgstore_rec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int imgstore_rec_read(int tfd, const char *id, struct imgstore_rec *r, struct verr *err)
{
	char name[80], *text;
	struct json_object *o, *a, *v;

	memset(r, 0, sizeof(*r));
	snprintf(name, sizeof(name), "%s.json", id);
	if (faccessat(tfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		return 1;
	if (image_read_at(tfd, name, 1 << 16, &text, NULL, err) < 0)
		return verr_wrap(err, "the image store's record of %.12s", id);
	o = json_tokener_parse(text);
	free(text);
	if (!o || !json_object_object_get_ex(o, "names", &a) || !json_object_is_type(a, json_type_array)) {
		json_object_put(o);
		return verr_set(err, "the image store's record of %.12s (tagged/%s) does not parse", id, name);
	}
	for (size_t i = 0; i < json_object_array_length(a) && r->n < IMGSTORE_REC_NAMES; i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(a, i));

		if (s && ident_ok(s, 64))
			snprintf(r->names[r->n++], 65, "%s", s);
	}
	if (json_object_object_get_ex(o, "was", &v) && ident_ok(json_object_get_string(v), 64))
		snprintf(r->was, sizeof(r->was), "%s", json_object_get_string(v));
	r->kvm = json_object_object_get_ex(o, "kvm", &v) && json_object_get_boolean(v);
	json_object_put(o);
	return 0;
}

int imgstore_rec_write(int tfd, const char *id, const struct imgstore_rec *r, struct verr *err)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	const char *text;
	char name[80];
	int rc;

	for (int i = 0; i < r->n; i++)
		json_object_array_add(a, json_object_new_string(r->names[i]));
	json_object_object_add(o, "names", a);
	json_object_object_add(o, "was", json_object_new_string(r->was));
	json_object_object_add(o, "kvm", json_object_new_boolean(r->kvm));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
	snprintf(name, sizeof(name), "%s.json", id);
	rc = image_write_at(tfd, name, text, strlen(text), 0600, true, err);
	json_object_put(o);
	return rc;
}

bool imgstore_rec_has(const struct imgstore_rec *r, const char *name)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->names[i], name))
			return true;
	return false;
}

int imgstore_rec_add(int tfd, const char *id, const char *name, bool kvm, struct verr *err)
{
	struct imgstore_rec r;
	int k = 1;

	if (imgstore_rec_read(tfd, id, &r, err) < 0)
		return -1;
	if (!imgstore_rec_has(&r, name) && r.n == IMGSTORE_REC_NAMES)
		return verr_set(err, "image %.12s has %d names already", id, r.n);
	/* Newest first: this name, then the others. */
	for (int i = 0; i < r.n; i++)
		if (strcmp(r.names[i], name))
			memcpy(r.names[k++], r.names[i], 65);
	snprintf(r.names[0], 65, "%s", name);
	r.n = k;
	snprintf(r.was, sizeof(r.was), "%s", name);
	r.kvm = kvm;
	return imgstore_rec_write(tfd, id, &r, err);
}

int imgstore_rec_each(int tfd, int (*fn)(const char *id, struct imgstore_rec *r, void *arg), void *arg,
		      struct verr *err)
{
	int dfd = openat(tfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	DIR *d;

	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		return verr_errno(err, "cannot list the image store's records");
	}
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		char id[65];
		struct imgstore_rec r;
		int what;

		if (strlen(e->d_name) != 69 || strcmp(e->d_name + 64, ".json"))
			continue;
		snprintf(id, sizeof(id), "%.64s", e->d_name);
		if (!image_id_ok(id) || (what = imgstore_rec_read(tfd, id, &r, err)) == 1)
			continue;
		if (what < 0 || (what = fn(id, &r, arg)) < 0)
			rc = -1;
		else if (what == 1 && imgstore_rec_write(tfd, id, &r, err) < 0)
			rc = -1;
		else if (what == 2 && unlinkat(tfd, e->d_name, 0) < 0 && errno != ENOENT)
			rc = verr_errno(err, "cannot remove the image store's record of %.12s", id);
	}
	closedir(d);
	return rc;
}
