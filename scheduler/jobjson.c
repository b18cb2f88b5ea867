#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/jf.h"
#include "lib/binds.h"
#include "lib/jobspec.h"
#include "jobjson.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

static void add_str(struct json_object *o, const char *k, const char *v)
{
	if (v)
		json_object_object_add(o, k, json_object_new_string(v));
}

struct json_object *job_spec_to_json(const struct job_spec *j)
{
	struct json_object *o = json_object_new_object(), *cmd = json_object_new_array();

	add_str(o, "name", j->name);
	json_object_object_add(o, "guests", json_object_new_int64(j->guests));
	if (j->ranks)
		json_object_object_add(o, "ranks", json_object_new_int64(j->ranks));
	if (j->vcpus)
		json_object_object_add(o, "vcpus", json_object_new_int64(j->vcpus));
	if (j->mem)
		json_object_object_add(o, "mem", json_object_new_int64((int64_t)j->mem));
	add_str(o, "image", j->image);
	add_str(o, "image_id", j->image_id);
	add_str(o, "tuning", j->tuning);
	add_str(o, "driver", vhpc_driver_name(j->driver));
	if (j->timeout)
		json_object_object_add(o, "timeout", json_object_new_int64(j->timeout));
	json_object_object_add(o, "oversubscribe", json_object_new_boolean(j->oversubscribe));
	add_str(o, "map_by", vhpc_map_by_names[j->map_by == MAP_BY_SLOT ? MAP_BY_SLOT : MAP_BY_NODE]);
	json_object_object_add(o, "vmshm", json_object_new_boolean(j->vmshm));
	json_object_object_add(o, "single_copy", json_object_new_boolean(j->single_copy));
	if (j->scratch)
		json_object_object_add(o, "scratch", json_object_new_int64((int64_t)j->scratch));
	for (size_t i = 0; i < j->command.n; i++)
		json_object_array_add(cmd, json_object_new_string(j->command.v[i]));
	json_object_object_add(o, "command", cmd);
	add_str(o, "workdir", j->workdir);
	if (j->binds.n) {
		struct json_object *b = json_object_new_array();

		for (size_t i = 0; i < j->binds.n; i++)
			json_object_array_add(b, json_object_new_string(j->binds.v[i]));
		json_object_object_add(o, "binds", b);
	}
	if (j->rdma)
		add_str(o, "rdma", job_rdma_names[j->rdma]);
	if (j->devices.n) {
		struct json_object *d = json_object_new_array();

		for (size_t i = 0; i < j->devices.n; i++)
			json_object_array_add(d, json_object_new_string(j->devices.v[i]));
		json_object_object_add(o, "devices", d);
	}
	if (j->env.n) {
		struct json_object *env = json_object_new_object();

		for (size_t i = 0; i < j->env.n; i++)
			json_object_object_add(env, j->env.key[i], json_object_new_string(j->env.val[i]));
		json_object_object_add(o, "env", env);
	}
	return o;
}

static int opt_name(struct json_object *o, const char *k, char **dst, struct verr *err)
{
	const char *s = NULL;

	if (jf_ident(o, k, false, 64, &s, err) < 0)
		return -1;
	if (s && !(*dst = strdup(s)))
		return verr_set(err, "out of memory");
	return 0;
}

static int enum_field(struct json_object *o, const char *k, const char *const *names, int *dst,
		      struct verr *err)
{
	const char *s = NULL;

	if (jf_str(o, k, false, 32, &s, err) < 0)
		return -1;
	if (!s)
		return 0;
	for (int i = 0; names[i]; i++)
		if (!strcmp(names[i], s)) {
			*dst = i;
			return 0;
		}
	return verr_set(err, "\"%s\": '%.32s' is not one of the accepted values", k, s);
}

static int parse(struct json_object *o, struct job_spec *j, struct verr *err)
{
	static const char *const fields[] = {
		"name", "guests", "ranks", "vcpus", "mem", "image", "image_id", "tuning", "driver", "timeout",
		"oversubscribe", "map_by", "vmshm", "single_copy", "scratch", "command", "env", "workdir", "binds",
		"rdma", "devices", NULL
	};
	struct json_object *env = NULL;
	const char *ws = NULL;
	long long v, mem = 0, scratch = 0;
	size_t bytes = 0;

	if (!json_object_is_type(o, json_type_object))
		return verr_set(err, "job: expected an object");
	if (jf_only(o, "job", fields, err) < 0 ||
	    jf_int(o, "guests", true, 1, 4096, &j->guests, err) < 0 ||
	    jf_int(o, "ranks", false, 1, 1 << 20, &j->ranks, err) < 0 ||
	    jf_int(o, "vcpus", false, 1, 512, &j->vcpus, err) < 0 ||
	    jf_int(o, "mem", false, 64ll << 20, 1ll << 42, &mem, err) < 0 ||
	    jf_int(o, "timeout", false, 1, 366 * 86400, &j->timeout, err) < 0 ||
	    jf_int(o, "scratch", false, (long long)JOB_SCRATCH_MIN, (long long)JOB_SCRATCH_MAX, &scratch, err) < 0 ||
	    jf_bool(o, "oversubscribe", false, &j->oversubscribe, err) < 0 ||
	    jf_bool(o, "vmshm", false, &j->vmshm, err) < 0 ||
	    jf_bool(o, "single_copy", false, &j->single_copy, err) < 0 ||
	    opt_name(o, "name", &j->name, err) < 0 || opt_name(o, "image", &j->image, err) < 0 ||
	    opt_name(o, "image_id", &j->image_id, err) < 0 ||
	    opt_name(o, "tuning", &j->tuning, err) < 0 ||
	    enum_field(o, "driver", vhpc_driver_names, &j->driver, err) < 0 ||
	    enum_field(o, "map_by", vhpc_map_by_names, &j->map_by, err) < 0 ||
	    enum_field(o, "rdma", job_rdma_names, &j->rdma, err) < 0)
		return -1;
	j->mem = (uint64_t)mem;
	j->scratch = (uint64_t)scratch;
	if (jf_strv(o, "command", true, JOB_MAX_ARGS, JOB_MAX_ARG_BYTES, &j->command.v, &j->command.n, err) < 0)
		return -1;
	for (size_t i = 0; i < j->command.n; i++)
		bytes += strlen(j->command.v[i]) + 1;
	if (j->command.n && !j->command.v[0][0])
		return verr_set(err, "\"command\"[0]: the program name is empty");
	if (jf_str(o, "workdir", false, BIND_PATH_MAX, &ws, err) < 0)
		return -1;
	if (ws && !(j->workdir = strdup(ws)))
		return verr_set(err, "out of memory");
	if (jf_strv(o, "binds", false, BIND_MAX, 3 * BIND_PATH_MAX, &j->binds.v, &j->binds.n, err) < 0)
		return -1;
	if (jf_strv(o, "devices", false, JOB_DEVICES_MAX, 24, &j->devices.v, &j->devices.n, err) < 0)
		return -1;
	if (jf_object(o, "env", false, &env, err) < 0)
		return -1;
	if (env) {
		size_t n = (size_t)json_object_object_length(env), k = 0;

		if (n > JOB_MAX_ENV)
			return verr_set(err, "\"env\": %zu variables; at most %d", n, JOB_MAX_ENV);
		j->env.key = calloc(n + 1, sizeof(char *));
		j->env.val = calloc(n + 1, sizeof(char *));
		if (!j->env.key || !j->env.val)
			return verr_set(err, "out of memory");
		json_object_object_foreach(env, key, val) {
			const char *s;

			if (!json_object_is_type(val, json_type_string))
				return verr_set(err, "\"env\".%.40s: expected a string", key);
			s = json_object_get_string(val);
			if ((size_t)json_object_get_string_len(val) != strlen(s))
				return verr_set(err, "\"env\".%.40s: contains a NUL character", key);
			bytes += strlen(key) + strlen(s) + 2;
			if (!(j->env.key[k] = strdup(key)) || !(j->env.val[k] = strdup(s)))
				return verr_set(err, "out of memory");
			j->env.n = ++k;
		}
	}
	if (bytes > JOB_MAX_ARG_BYTES)
		return verr_set(err, "job: command and environment exceed %u bytes", JOB_MAX_ARG_BYTES);
	(void)v;
	return job_spec_check(j, err);
}

int job_spec_from_json(struct json_object *o, struct job_spec *j, struct verr *err)
{
	job_spec_defaults(j);
	j->driver = -1;
	j->mem = 0;
	j->timeout = 0;
	if (parse(o, j, err) < 0) {
		job_spec_free(j);
		return -1;
	}
	return 0;
}
