/* Job specifications and the cluster file: the two configs every component
 * reads, so their schemas live here once. */
#include "lib/bytes.h"
#include "lib/jobspec.h"
#include "lib/binds.h"
#include "lib/cluster.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/inet.h"
#include "lib/parse.h"
#include "lib/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const vhpc_map_by_names[] = { "node", "slot", NULL };

#define J(f) offsetof(struct job_spec, f)
static const struct cf_field job_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = J(name) },
	{ .key = "guests", .kind = CF_INT, .off = J(guests), .min = 1, .max = 4096, .flags = CF_REQUIRED },
	{ .key = "ranks", .kind = CF_INT, .off = J(ranks), .min = 1, .max = 1 << 20 },
	{ .key = "vcpus", .kind = CF_INT, .off = J(vcpus), .min = 1, .max = 512 },
	{ .key = "mem", .kind = CF_SIZE, .off = J(mem), .min = 64 << 20, .max = 1ll << 42 },
	{ .key = "image", .kind = CF_STR, .off = J(image) },
	{ .key = "image_id", .kind = CF_STR, .off = J(image_id) },
	{ .key = "tuning", .kind = CF_STR, .off = J(tuning) },
	{ .key = "driver", .kind = CF_ENUM, .off = J(driver), .names = vhpc_driver_names },
	{ .key = "timeout", .kind = CF_INT, .off = J(timeout), .min = 1, .max = 366 * 86400, .what = "seconds" },
	{ .key = "oversubscribe", .kind = CF_BOOL, .off = J(oversubscribe) },
	{ .key = "map_by", .kind = CF_ENUM, .off = J(map_by), .names = vhpc_map_by_names },
	{ .key = "vmshm", .kind = CF_BOOL, .off = J(vmshm) },
	{ .key = "single_copy", .kind = CF_BOOL, .off = J(single_copy) },
	{ .key = "scratch", .kind = CF_SIZE, .off = J(scratch), .min = JOB_SCRATCH_MIN, .max = JOB_SCRATCH_MAX },
	{ .key = "command", .kind = CF_STRLIST, .off = J(command), .flags = CF_REQUIRED },
	{ .key = "env", .kind = CF_STRMAP, .off = J(env) },
	{ .key = "workdir", .kind = CF_STR, .off = J(workdir) },
	{ .key = "binds", .kind = CF_STRLIST, .off = J(binds) },
	{ .key = "rdma", .kind = CF_ENUM, .off = J(rdma), .names = job_rdma_names },
	{ .key = "devices", .kind = CF_STRLIST, .off = J(devices) },
	{ 0 }
};
const struct cf_schema job_spec_schema = { "job", sizeof(struct job_spec), job_fields };

void job_spec_defaults(struct job_spec *j)
{
	memset(j, 0, sizeof(*j));
	j->guests = 1;
	j->mem = 512ull << 20;
	j->timeout = 3600;
	j->vmshm = true;
	j->single_copy = true;
	j->map_by = MAP_BY_NODE;
}

int job_spec_check(const struct job_spec *j, struct verr *err)
{
	char why[512];

	if (j->name && !ident_ok(j->name, 64))
		return verr_set(err, "job name '%s': use letters, digits, '.', '_' and '-' (at most 64)", j->name);
	if (j->image && !ident_ok(j->image, 64))
		return verr_set(err, "image name '%s' is not a plain name", j->image);
	if (j->image_id && !sha256_hex_ok(j->image_id))
		return verr_set(err, "image id '%.80s' is not 64 lowercase hex digits (a sha256)", j->image_id);
	if (j->tuning && !ident_ok(j->tuning, 64))
		return verr_set(err, "tuning profile '%s' is not a plain name", j->tuning);
	if (j->ranks && j->ranks < j->guests)
		return verr_set(err, "%lld ranks cannot fill %lld guests: give at least one rank per guest",
				j->ranks, j->guests);
	if (j->command.n == 0)
		return verr_set(err, "no command to run");
	if (j->workdir && bind_path_check("workdir", j->workdir, why, sizeof(why)) < 0)
		return verr_set(err, "%s", why);
	if (j->binds.n > BIND_MAX)
		return verr_set(err, "%zu binds: a job has at most %d", j->binds.n, BIND_MAX);
	for (size_t i = 0; i < j->binds.n; i++) {
		struct bind b;

		if (bind_parse(j->binds.v[i], &b, why, sizeof(why)) < 0)
			return verr_set(err, "%s", why);
	}
	if (j->devices.n > JOB_DEVICES_MAX)
		return verr_set(err, "%zu devices: a job names at most %d classes", j->devices.n, JOB_DEVICES_MAX);
	for (size_t i = 0; i < j->devices.n; i++) {
		char cls[FABRIC_CLASS_MAX + 1], other[FABRIC_CLASS_MAX + 1];
		int n;

		if (job_device_parse(j->devices.v[i], cls, &n, why, sizeof(why)) < 0)
			return verr_set(err, "%s", why);
		for (size_t k = 0; k < i; k++)
			if (job_device_parse(j->devices.v[k], other, &n, why, sizeof(why)) == 0 && !strcmp(cls, other))
				return verr_set(err, "device class %s is asked for twice ('%s' and '%s'): give it once, with the count per guest",
						cls, j->devices.v[k], j->devices.v[i]);
	}
	if (j->rdma < JOB_RDMA_AUTO || j->rdma > JOB_RDMA_OFF)
		return verr_set(err, "rdma: expected auto, on or off");
	for (size_t i = 0; i < j->env.n; i++) {
		const char *k = j->env.key[i];

		if (!*k || strchr(k, '=') || strlen(k) > 128)
			return verr_set(err, "environment variable name '%s' is not valid", k);
		for (const char *p = k; *p; p++)
			if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			      (*p >= '0' && *p <= '9') || *p == '_'))
				return verr_set(err, "environment variable name '%s' is not valid", k);
	}
	return 0;
}

int job_spec_load(const char *path, struct job_spec *j, struct verr *err)
{
	job_spec_defaults(j);
	if (cf_bind_file(path, &job_spec_schema, j, err) < 0 || job_spec_check(j, err) < 0) {
		if (!strstr(err->msg, path))
			verr_wrap(err, "%s", path);
		job_spec_free(j);
		return -1;
	}
	return 0;
}

void job_spec_free(struct job_spec *j)
{
	cf_release(&job_spec_schema, j);
}

static int parse_pool(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	const char *s = cf_scalar(n);
	struct ipv4net *net = dst;

	if (!s || ipv4net_parse(s, false, net) < 0)
		return cf_error(d, n, err, "job_network.pool: expected an IPv4 network such as 10.213.0.0/16 (host bits zero), got %s",
				s ? s : "a list or mapping");
	if (net->prefix < 8 || net->prefix > 28)
		return cf_error(d, n, err, "job_network.pool: prefix /%d is outside /8../28", net->prefix);
	return 0;
}

/* A node's WireGuard address is the pool's network with its underlay
 * address's host bits: a /16 holds any underlay whose nodes differ in
 * their last two bytes. */
static int parse_wg_pool(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	const char *s = cf_scalar(n);
	struct ipv4net *net = dst;

	if (!s || ipv4net_parse(s, false, net) < 0 || net->prefix < 8 || net->prefix > 24)
		return cf_error(d, n, err, "job_network.underlay_encryption.pool: expected an IPv4 network /8../24 such as 10.254.0.0/16 (host bits zero), got %s",
				s ? s : "a list or mapping");
	return 0;
}

#define C(f) offsetof(struct cluster_cfg, f)
static const struct cf_field wg_fields[] = {
	{ .key = "key", .kind = CF_STR, .off = C(wg.key) - C(wg), .what = "a root-only file", .flags = CF_REQUIRED },
	{ .key = "pool", .kind = CF_CUSTOM, .off = C(wg.pool) - C(wg), .parse = parse_wg_pool, .flags = CF_REQUIRED },
	{ .key = "port", .kind = CF_INT, .off = C(wg.port) - C(wg), .min = 1, .max = 65535 },
	{ 0 }
};
static const struct cf_schema wg_schema = { "underlay_encryption", 0, wg_fields };

struct job_network { struct ipv4net pool; long long prefix; long long port; };
static const struct cf_field jobnet_fields[] = {
	{ .key = "pool", .kind = CF_CUSTOM, .off = C(job_pool) - C(job_pool), .parse = parse_pool, .flags = CF_REQUIRED },
	{ .key = "prefix", .kind = CF_INT, .off = C(job_prefix) - C(job_pool), .min = 16, .max = 29 },
	{ .key = "guest_port", .kind = CF_INT, .off = C(guest_port) - C(job_pool), .min = 1, .max = 65535 },
	{ .key = "underlay_encryption", .kind = CF_STRUCT, .off = C(wg) - C(job_pool), .sub = &wg_schema },
	{ 0 }
};
/* job_pool, job_prefix and guest_port sit together in struct cluster_cfg. */
static const struct cf_schema jobnet_schema = { "job_network", 0, jobnet_fields };

static const struct cf_field defaults_fields[] = {
	{ .key = "image", .kind = CF_STR, .off = C(default_image) - C(default_image) },
	{ .key = "tuning", .kind = CF_STR, .off = C(default_tuning) - C(default_image) },
	{ .key = "driver", .kind = CF_ENUM, .off = C(default_driver) - C(default_image), .names = vhpc_driver_names },
	{ .key = "mem", .kind = CF_SIZE, .off = C(default_mem) - C(default_image), .min = 64 << 20, .max = 1ll << 42 },
	{ .key = "timeout", .kind = CF_INT, .off = C(default_timeout) - C(default_image), .min = 1, .max = 366 * 86400 },
	{ 0 }
};
static const struct cf_schema defaults_schema = { "defaults", 0, defaults_fields };

/* ctld_spool .. ctld_keep_ended sit together in struct cluster_cfg. */
static const struct cf_field ctld_fields[] = {
	{ .key = "spool", .kind = CF_STR, .off = C(ctld_spool) - C(ctld_spool), .what = "an absolute path" },
	{ .key = "output_limit", .kind = CF_SIZE, .off = C(ctld_output_limit) - C(ctld_spool),
	  .min = CLUSTER_OUTPUT_LIMIT_MIN, .max = 1ll << 50 },
	{ .key = "max_jobs_per_user", .kind = CF_INT, .off = C(ctld_max_jobs_per_user) - C(ctld_spool),
	  .min = 1, .max = 1000000 },
	{ .key = "keep_ended", .kind = CF_INT, .off = C(ctld_keep_ended) - C(ctld_spool), .min = 1,
	  .max = 366 * 86400, .what = "seconds" },
	{ 0 }
};
static const struct cf_schema ctld_schema = { "ctld", 0, ctld_fields };

static const struct cf_field ckpt_fields[] = {
	{ .key = "dir", .kind = CF_STR, .off = C(ckpt.dir) - C(ckpt), .what = "an absolute path" },
	{ .key = "shared", .kind = CF_BOOL, .off = C(ckpt.shared) - C(ckpt) },
	{ 0 }
};
static const struct cf_schema ckpt_schema = { "checkpoints", 0, ckpt_fields };

/* A list of paths, each checked where it is written. */
static int parse_pathlist(const cf_doc *d, const cf_node *n, void *dst, struct verr *err, bool specs)
{
	struct cf_strlist *l = dst;
	size_t len;

	if (cf_node_type(n) != CF_NODE_SEQ)
		return cf_error(d, n, err, "expected a list of paths such as [/home, /scratch]");
	len = cf_seq_len(d, n);
	if (len > BIND_MAX)
		return cf_error(d, n, err, "%zu paths: at most %d", len, BIND_MAX);
	if (!(l->v = calloc(len + 1, sizeof(char *))))
		return verr_set(err, "out of memory");
	for (size_t i = 0; i < len; i++) {
		const cf_node *e = cf_seq_at(d, n, i);
		const char *s = cf_scalar(e);
		char why[512];
		struct bind b;

		if (!s)
			return cf_error(d, e, err, "expected a path, got a list or mapping");
		if (specs ? bind_parse(s, &b, why, sizeof(why)) < 0 : bind_path_check("path", s, why, sizeof(why)) < 0)
			return cf_error(d, e, err, "%s", why);
		if (!(l->v[i] = strdup(s)))
			return verr_set(err, "out of memory");
		l->n = i + 1;
	}
	return 0;
}

static int parse_binds(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	return parse_pathlist(d, n, dst, err, true);
}

static int parse_allow(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	return parse_pathlist(d, n, dst, err, false);
}

static void release_pathlist(void *dst)
{
	struct cf_strlist *l = dst;

	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static const struct cf_field cluster_fields[] = {
	{ .key = "binds", .kind = CF_CUSTOM, .off = C(binds), .parse = parse_binds, .release = release_pathlist },
	{ .key = "bind_allow", .kind = CF_CUSTOM, .off = C(bind_allow), .parse = parse_allow, .release = release_pathlist },
	{ .key = "bind_home", .kind = CF_BOOL, .off = C(bind_home) },
	{ .key = "bind_workdir", .kind = CF_BOOL, .off = C(bind_workdir) },
	{ .key = "scratch_dir", .kind = CF_STR, .off = C(scratch_dir), .what = "an absolute path" },
	{ .key = "name", .kind = CF_STR, .off = C(name), .flags = CF_REQUIRED },
	{ .key = "controller", .kind = CF_STR, .off = C(controller), .what = "host:port" },
	{ .key = "job_network", .kind = CF_STRUCT, .off = C(job_pool), .sub = &jobnet_schema, .flags = CF_REQUIRED },
	{ .key = "defaults", .kind = CF_STRUCT, .off = C(default_image), .sub = &defaults_schema },
	{ .key = "ctld", .kind = CF_STRUCT, .off = C(ctld_spool), .sub = &ctld_schema },
	{ .key = "fabric", .kind = CF_STRUCT, .off = C(fabric), .sub = &cluster_fabric_schema },
	{ .key = "images", .kind = CF_STRUCT, .off = C(images), .sub = &cluster_images_schema },
	{ .key = "checkpoints", .kind = CF_STRUCT, .off = C(ckpt), .sub = &ckpt_schema },
	{ 0 }
};
const struct cf_schema cluster_schema = { "cluster", sizeof(struct cluster_cfg), cluster_fields };

int cluster_load(const char *path, struct cluster_cfg *c, struct verr *err)
{
	char buf[PATH_MAX];

	memset(c, 0, sizeof(*c));
	c->job_prefix = 24;
	c->guest_port = 7707;
	c->default_mem = 512ull << 20;
	c->default_timeout = 3600;
	c->bind_home = true;
	c->bind_workdir = true;
	c->ctld_output_limit = CLUSTER_OUTPUT_LIMIT;
	c->ctld_max_jobs_per_user = CLUSTER_MAX_JOBS_PER_USER;
	c->ctld_keep_ended = CLUSTER_KEEP_ENDED;
	c->wg.port = 51820;
	c->fabric.prefix = 24;
	if (!path)
		path = getenv("VHPC_CLUSTER");
	if (!path || !*path) {
		snprintf(buf, sizeof(buf), "%s/cluster.yaml", vhpc_config_dir());
		path = buf;
	}
	if (cf_bind_file(path, &cluster_schema, c, err) < 0) {
		cluster_free(c);
		return -1;
	}
	if (c->job_prefix <= c->job_pool.prefix) {
		verr_set(err, "%s: job_network.prefix /%lld must be longer than the pool's /%d",
			 path, c->job_prefix, c->job_pool.prefix);
		cluster_free(c);
		return -1;
	}
	if (cluster_fabric_check(c, path, err) < 0) {
		cluster_free(c);
		return -1;
	}
	if (c->images.require_signed && !c->images.nkeys) {
		verr_set(err, "%s: images.require_signed is true but images.trusted_keys lists no key: no image could start",
			 path);
		cluster_free(c);
		return -1;
	}
	if (c->ctld_spool && (c->ctld_spool[0] != '/' || strlen(c->ctld_spool) >= CLUSTER_SPOOL_MAX)) {
		verr_set(err, "%s: ctld.spool '%s': expected an absolute path of at most %d bytes",
			 path, c->ctld_spool, CLUSTER_SPOOL_MAX - 1);
		cluster_free(c);
		return -1;
	}
	if (c->ckpt.dir && (c->ckpt.dir[0] != '/' || strlen(c->ckpt.dir) >= CLUSTER_SPOOL_MAX)) {
		verr_set(err, "%s: checkpoints.dir '%s': expected an absolute path of at most %d bytes",
			 path, c->ckpt.dir, CLUSTER_SPOOL_MAX - 1);
		cluster_free(c);
		return -1;
	}
	if (!c->default_image)
		c->default_image = strdup("default");
	if (!c->default_tuning)
		c->default_tuning = strdup("hpc");
	if (!c->default_image || !c->default_tuning) {
		cluster_free(c);
		return verr_set(err, "out of memory");
	}
	return 0;
}

const char *cluster_ckpt_dir(const struct cluster_cfg *c)
{
	return c->ckpt.dir ? c->ckpt.dir : CLUSTER_CKPT_DIR;
}

void cluster_free(struct cluster_cfg *c)
{
	cf_release(&cluster_schema, c);
}
