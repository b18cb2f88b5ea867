/*
 * vhpc image push|list|rm against the cluster's image store, which
 * vhpc-ctld keeps (scheduler/PROTOCOL.md, "Images"): push sends what the
 * store lacks of a local image (image_have, image_put) and names it
 * (image_tag); list shows the store, what jobs still hold and what each
 * node has cached; rm removes a name.  Pushing and removing are root's.
 */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/imgwire.h"
#include "lib/jf.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/wire.h"
#include "cli.h"
#include "client.h"
#include "images/images.h"

#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One object of the push: its content's name, size and local file. */
struct obj {
	const char *sha;
	uint64_t size;
	char path[PATH_MAX];
};

/* The image's manifest and each distinct file, the manifest first. */
static int objects_of(const struct image_info *img, const struct image_mf *m, struct obj **out, size_t *n,
		      struct verr *err)
{
	struct obj *v = calloc(m->n + 1, sizeof(*v));
	size_t cnt = 0;

	if (!v)
		return verr_set(err, "out of memory");
	v[cnt].sha = img->id;
	snprintf(v[cnt].path, sizeof(v[cnt].path), "%s/manifest", img->dir);
	cnt++;
	for (size_t i = 0; i < m->n; i++) {
		bool dup = false;

		if (m->v[i].type != 'f')
			continue;
		for (size_t k = 1; k < cnt && !dup; k++)
			dup = !strcmp(v[k].sha, m->v[i].sha);
		if (dup)
			continue;
		v[cnt].sha = m->v[i].sha;
		v[cnt].size = m->v[i].size;
		snprintf(v[cnt].path, sizeof(v[cnt].path), "%s%s", img->dir, m->v[i].path);
		cnt++;
	}
	*out = v;
	*n = cnt;
	return 0;
}

/* Which of them the store lacks (missing[i]). */
static int ask_missing(const char *ctl, struct obj *v, size_t n, bool *missing, struct verr *err)
{
	for (size_t at = 0; at < n; at += IMGWIRE_MAX_NAMES) {
		size_t k = n - at < IMGWIRE_MAX_NAMES ? n - at : IMGWIRE_MAX_NAMES;
		const char **names = calloc(k, sizeof(*names));
		struct json_object *req = json_object_new_object(), *rep;
		char (*miss)[65] = NULL;
		int nmiss = 0;

		if (!names) {
			json_object_put(req);
			return verr_set(err, "out of memory");
		}
		for (size_t i = 0; i < k; i++)
			names[i] = v[at + i].sha;
		json_object_object_add(req, "type", json_object_new_string("image_have"));
		json_object_object_add(req, "objects", imgwire_sha_array(names, (int)k));
		free(names);
		if (client_call(ctl, req, &rep, 60000, err) < 0) {
			json_object_put(req);
			return -1;
		}
		json_object_put(req);
		if (!json_object_object_get_ex(rep, "missing", NULL) ||
		    imgwire_shas(rep, "missing", false, (int)k, &miss, &nmiss, err) < 0) {
			if (!json_object_object_get_ex(rep, "missing", NULL))
				verr_set(err, "no \"missing\" list");
			json_object_put(rep);
			return verr_wrap(err, "vhpc-ctld's image_missing");
		}
		for (int j = 0; j < nmiss; j++)
			for (size_t i = 0; i < k; i++)
				if (!strcmp(v[at + i].sha, miss[j]))
					missing[at + i] = true;
		free(miss);
		json_object_put(rep);
	}
	return 0;
}

/* Sends the missing objects, a message's worth of parts at a time; the
 * store says how much of each it holds, and the next part goes on from there. */
static int send_objects(const char *ctl, const struct image_info *img, struct obj *v, size_t n, const bool *missing,
			uint64_t *sent, struct verr *err)
{
	size_t cur = 0;
	uint64_t off = 0;
	uint8_t *buf = malloc(IMGWIRE_CHUNK);

	if (!buf)
		return verr_set(err, "out of memory");
	while (cur < n && !missing[cur])
		cur++;
	while (cur < n) {
		struct json_object *req = json_object_new_object(), *parts = json_object_new_array(), *rep, *a;
		size_t room = IMGWIRE_CHUNK, used = 0, i = cur;
		uint64_t o = off;
		int np = 0;

		json_object_object_add(req, "type", json_object_new_string("image_put"));
		json_object_object_add(req, "parts", parts);
		for (; i < n && np < IMGWIRE_MAX_PARTS && (room > 0 || v[i].size == o); i++, o = 0) {
			size_t len = v[i].size - o < room ? (size_t)(v[i].size - o) : room;
			ssize_t got = 0;
			int fd;

			if (!missing[i])
				continue;
			/* The image's own file, not what a symlink in its place
			 * would point at. */
			if ((fd = image_open_part(img, v[i].path, err)) < 0) {
				json_object_put(req);
				free(buf);
				return -1;
			}
			if (len)
				got = pread(fd, buf + used, len, (off_t)o);
			close(fd);
			if (got != (ssize_t)len) {
				json_object_put(req);
				free(buf);
				return verr_set(err, "%s: shorter than its manifest says (changed since it was built? vhpc image verify)",
						v[i].path);
			}
			json_object_array_add(parts, imgwire_part(v[i].sha, v[i].size, o, len));
			np++;
			used += len;
			room -= len;
			*sent += len;
			if (o + len < v[i].size)
				break;
		}
		json_object_object_add(req, WIRE_DATA, json_object_new_string_len((const char *)buf, (int)used));
		if (client_call(ctl, req, &rep, 60000, err) < 0) {
			json_object_put(req);
			free(buf);
			return -1;
		}
		json_object_put(req);
		/* Go on where the store says it is: after the last part, or
		 * from the first part it did not take whole. */
		if (!json_object_object_get_ex(rep, "parts", &a) || !json_object_is_type(a, json_type_array) ||
		    (int)json_object_array_length(a) != np) {
			json_object_put(rep);
			free(buf);
			return verr_set(err, "vhpc-ctld's image_stored does not answer every part");
		}
		{
			size_t k = cur;
			bool moved = false;

			for (int p = 0; p < np; p++) {
				struct json_object *e = json_object_array_get_idx(a, p);
				long long next;
				struct verr e2;

				while (!missing[k])
					k++;
				if (jf_int(e, "next", true, 0, (long long)v[k].size, &next, &e2) < 0) {
					json_object_put(rep);
					free(buf);
					return verr_set(err, "vhpc-ctld's image_stored: %s", e2.msg);
				}
				if ((uint64_t)next < v[k].size) {
					cur = k;
					off = (uint64_t)next;
					moved = true;
					break;
				}
				k++;
			}
			if (!moved) {
				cur = k;
				off = 0;
			}
		}
		json_object_put(rep);
		while (cur < n && !missing[cur])
			cur++;
	}
	free(buf);
	return 0;
}

int image_push_to(const char *ctl, const char *name, const char *as, bool quiet, struct verr *err)
{
	struct image_info img;
	struct image_mf m = { 0 };
	struct obj *v = NULL;
	bool *missing = NULL;
	size_t n = 0, nmiss = 0, len;
	uint64_t sent = 0, want = 0;
	char *text = NULL, path[PATH_MAX], a[32], b[32];
	struct json_object *req, *rep;
	double t0 = now_s();
	int rc = -1, nsigs = 0;

	if (image_lookup(name, &img, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/manifest", img.dir);
	if (read_file(path, &text, &len, IMAGE_MF_TEXT_MAX, err) < 0)
		return -1;
	if (image_mf_parse(text, len, &m, err) < 0 || objects_of(&img, &m, &v, &n, err) < 0)
		goto out;
	v[0].size = len;
	if (!(missing = calloc(n, sizeof(bool)))) {
		verr_set(err, "out of memory");
		goto out;
	}
	if (ask_missing(ctl, v, n, missing, err) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (missing[i]) {
			nmiss++;
			want += v[i].size;
		}
	if (!quiet)
		fprintf(stderr, "vhpc: pushing %s (%.12s, %s, %ld files): the store lacks %zu of its %zu objects (%s)\n",
			img.name, img.id, img.format, m.files, nmiss, n, fmt_size(want, a, sizeof(a)));
	if (send_objects(ctl, &img, v, n, missing, &sent, err) < 0)
		goto out;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("image_tag"));
	json_object_object_add(req, "name", json_object_new_string(as ? as : img.name));
	json_object_object_add(req, "id", json_object_new_string(img.id));
	/* Its signatures go with it (images/sign.c; the store checks them). */
	{
		struct image_sigs sigs;
		char stext[IMAGE_SIG_TEXT_MAX + 1];

		if (image_sigs_read(img.dir, &sigs, err) < 0) {
			json_object_put(req);
			goto out;
		}
		image_sigs_format(&sigs, stext);
		if (sigs.n)
			json_object_object_add(req, "signatures", json_object_new_string(stext));
		nsigs = sigs.n;
	}
	rc = client_call(ctl, req, &rep, 120000, err);
	json_object_put(req);
	if (rc < 0)
		goto out;
	json_object_put(rep);
	if (!quiet)
		printf("pushed %s as %s: %.12s, %s sent in %.1f s (%s in all)%s\n", img.name, as ? as : img.name, img.id,
		       fmt_size(sent, a, sizeof(a)), now_s() - t0, fmt_size(img.bytes, b, sizeof(b)),
		       nsigs ? ", with its signatures" : "");
out:
	image_mf_free(&m);
	free(text);
	free(v);
	free(missing);
	return rc;
}

static int push(int argc, char **argv)
{
	const char *name = NULL, *as = NULL;
	char ctl[300];
	struct verr err;
	int rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--as") && i + 1 < argc)
			as = argv[++i];
		else if (argv[i][0] == '-')
			return usage_error("image push", "unknown option '%s'", argv[i]);
		else if (name)
			return usage_error("image push", "one image at a time ('%s' and '%s')", name, argv[i]);
		else
			name = argv[i];
	}
	if (!name)
		return usage_error("image push", "which image? give the name of one in vhpc image list --local");
	if (as && !ident_ok(as, 64))
		return usage_error("image push", "--as '%s': use letters, digits, '.', '_' and '-'", as);
	if ((rc = client_need_controller("image push", ctl, sizeof(ctl))))
		return rc;
	if (image_push_to(ctl, name, as, false, &err) < 0) {
		fprintf(stderr, "vhpc image push: %s\n", err.msg);
		return 1;
	}
	return 0;
}

static const char *when(long long t, char *buf, size_t len)
{
	time_t tt = (time_t)t;

	if (!t)
		return "-";
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", localtime(&tt));
	return buf;
}

static void print_store(struct json_object *rep)
{
	struct json_object *a, *e;
	char sz[32], w[32];

	printf("%-16s %-12s  %-8s  %7s  %10s  %s\n", "IMAGE", "ID", "FORMAT", "FILES", "SIZE", "PUSHED");
	if (json_object_object_get_ex(rep, "images", &a))
		for (size_t i = 0; i < json_object_array_length(a); i++) {
			e = json_object_array_get_idx(a, i);
			long long nsig = client_int(e, "signatures", 0);

			printf("%-16s %.12s  %-8s  %7lld  %10s  %s%s%s", client_str(e, "name", "?"),
			       client_str(e, "id", "?"), client_str(e, "format", "?"), client_int(e, "files", 0),
			       fmt_size((uint64_t)client_int(e, "bytes", 0), sz, sizeof(sz)),
			       when(client_int(e, "pushed", 0), w, sizeof(w)),
			       json_object_get_boolean(json_object_object_get(e, "kvm")) ? "  kvm: Linux " : "",
			       client_str(e, "kernel_release", ""));
			if (nsig)
				printf("  signed (%lld signature%s)", nsig, nsig == 1 ? "" : "s");
			printf("\n");
		}
	if (json_object_object_get_ex(rep, "held", &a))
		for (size_t i = 0; i < json_object_array_length(a); i++) {
			e = json_object_array_get_idx(a, i);
			printf("%-16s %.12s  held by job %lld (no name points at it any more)\n", client_str(e, "name", "?"),
			       client_str(e, "id", "?"), client_int(e, "job", 0));
		}
	printf("the store holds %lld objects, %s\n\n", client_int(rep, "store_objects", 0),
	       fmt_size((uint64_t)client_int(rep, "store_bytes", 0), sz, sizeof(sz)));
	printf("%-12s %-16s %-12s  %10s  %-19s  %s\n", "NODE", "CACHED", "ID", "SIZE", "LAST USED", "IN USE");
	if (json_object_object_get_ex(rep, "nodes", &a))
		for (size_t i = 0; i < json_object_array_length(a); i++) {
			struct json_object *c;

			e = json_object_array_get_idx(a, i);
			if (!json_object_object_get_ex(e, "images", &c) || !json_object_array_length(c)) {
				printf("%-12s %s\n", client_str(e, "node", "?"), "(nothing cached)");
				continue;
			}
			for (size_t k = 0; k < json_object_array_length(c); k++) {
				struct json_object *ce = json_object_array_get_idx(c, k);

				printf("%-12s %-16s %.12s  %10s  %-19s  %s\n", k ? "" : client_str(e, "node", "?"),
				       client_str(ce, "name", "-"), client_str(ce, "id", "?"),
				       fmt_size((uint64_t)client_int(ce, "bytes", 0), sz, sizeof(sz)),
				       when(client_int(ce, "used", 0), w, sizeof(w)),
				       json_object_get_boolean(json_object_object_get(ce, "in_use")) ? "yes" : "no");
			}
		}
}

int cmd_image_store_list(const char *ctl, bool json)
{
	struct json_object *req = json_object_new_object(), *rep;
	struct verr err;
	int rc;

	json_object_object_add(req, "type", json_object_new_string("image_list"));
	rc = client_call(ctl, req, &rep, 30000, &err);
	json_object_put(req);
	if (rc < 0) {
		fprintf(stderr, "vhpc image list: %s\n", err.msg);
		return 1;
	}
	json_object_object_del(rep, "type");
	if (json)
		client_print_json(rep);
	else
		print_store(rep);
	json_object_put(rep);
	return 0;
}

/* vhpc image rm NAME removes the name (and every version it had);
 * NAME@VERSION retires one earlier version, named by at least 12 hex
 * digits of its id, so no new job can name it (one found bad, say). */
static int rm(int argc, char **argv)
{
	struct json_object *req, *rep;
	char ctl[300], name[65];
	const char *at, *version = NULL;
	struct verr err;
	long long held;
	size_t nl;
	int rc;

	if (argc != 3 || argv[2][0] == '-')
		return usage_error("image rm", "give one image name, or NAME@VERSION for an earlier version (vhpc image list)");
	at = strchr(argv[2], '@');
	nl = at ? (size_t)(at - argv[2]) : strlen(argv[2]);
	if (nl >= sizeof(name))
		return usage_error("image rm", "'%s' is not an image name", argv[2]);
	memcpy(name, argv[2], nl);
	name[nl] = 0;
	if (!ident_ok(name, 64))
		return usage_error("image rm", "'%s' is not an image name", argv[2]);
	if (at) {
		size_t vl = strlen(at + 1);

		version = at + 1;
		if (vl < 12 || vl > 64 || strspn(version, "0123456789abcdef") != vl)
			return usage_error("image rm",
					   "'%s': after the '@', at least 12 and at most 64 lowercase hex digits of the "
					   "version's id", argv[2]);
	}
	if ((rc = client_need_controller("image rm", ctl, sizeof(ctl))))
		return rc;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("image_rm"));
	json_object_object_add(req, "name", json_object_new_string(name));
	if (version)
		json_object_object_add(req, "version", json_object_new_string(version));
	rc = client_call(ctl, req, &rep, 120000, &err);
	json_object_put(req);
	if (rc < 0) {
		fprintf(stderr, "vhpc image rm: %s\n", err.msg);
		return 1;
	}
	held = client_int(rep, "held_by_jobs", 0);
	if (version)
		printf("removed version %.12s of image %s: no new job may name it", client_str(rep, "id", "?"), name);
	else
		printf("removed image %s (%.12s) from the store", name, client_str(rep, "id", "?"));
	if (held)
		printf("; %lld job%s not yet ended still hold%s it: its content stays until they end", held,
		       held == 1 ? "" : "s", held == 1 ? "s" : "");
	printf("\n");
	json_object_put(rep);
	return 0;
}

int cmd_image_store(int argc, char **argv)
{
	if (!strcmp(argv[1], "push"))
		return push(argc, argv);
	return rm(argc, argv);
}
