#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "lib/wire.h"
#include "client.h"
#include "cli.h"

#include <json-c/json.h>
#include <limits.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int client_controller(char *buf, size_t len, struct verr *err)
{
	const char *env = getenv("VHPC_CONTROLLER");
	struct cluster_cfg cl;
	char host[256];
	int port, rc = 0;

	if (env && *env) {
		if (hostport_parse(env, false, host, sizeof(host), &port) < 0)
			return verr_set(err, "$VHPC_CONTROLLER '%s': expected HOST:PORT", env);
		snprintf(buf, len, "%s", env);
		return 1;
	}
	/* Without a readable cluster file there is no controller either;
	 * the embedded path reports what is wrong with the file. */
	if (cluster_load(NULL, &cl, err) < 0)
		return service_controller(buf, len);
	if (cl.controller) {
		if (hostport_parse(cl.controller, false, host, sizeof(host), &port) < 0)
			rc = verr_set(err, "cluster file: controller '%s': expected HOST:PORT", cl.controller);
		else {
			snprintf(buf, len, "%s", cl.controller);
			rc = 1;
		}
	}
	cluster_free(&cl);
	return rc ? rc : service_controller(buf, len);
}

int service_controller(char *buf, size_t len)
{
	char path[PATH_MAX], *txt = NULL, host[256];
	size_t n;
	int port, rc = 0;
	struct stat st;
	struct verr e;

	snprintf(path, sizeof(path), "%s/controller", vhpc_service_dir());
	/* Root's file only: anyone else's would point users' jobs (and
	 * their munge credentials) somewhere else. */
	if (stat(path, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022) || read_file(path, &txt, &n, 300, &e) < 0)
		return 0;
	txt[strcspn(txt, "\n")] = 0;
	if (hostport_parse(txt, false, host, sizeof(host), &port) == 0) {
		snprintf(buf, len, "%s", txt);
		rc = 1;
	}
	free(txt);
	return rc;
}

int client_need_controller(const char *cmd, char *buf, size_t len)
{
	struct verr e;
	int r = client_controller(buf, len, &e);

	if (r < 0) {
		fprintf(stderr, "vhpc %s: %s\n", cmd, e.msg);
		return EXIT_USAGE;
	}
	if (r == 0) {
		fprintf(stderr, "vhpc %s: no cluster is configured: set `controller: HOST:PORT` in the cluster file "
			"(%s/cluster.yaml or $VHPC_CLUSTER) or $VHPC_CONTROLLER\n", cmd, vhpc_config_dir());
		return EXIT_USAGE;
	}
	return 0;
}

int client_call(const char *ctl, struct json_object *req, struct json_object **reply,
		int timeout_ms, struct verr *err)
{
	struct wire_peer peer;
	const char *e;

	if (wire_call(ctl, req, reply, &peer, timeout_ms, err) < 0)
		return verr_wrap(err, "vhpc-ctld");
	if (peer.uid != 0) {
		json_object_put(*reply);
		*reply = NULL;
		return verr_set(err, "vhpc-ctld at %s: the reply comes from uid %u, not root: refusing it",
				ctl, (unsigned)peer.uid);
	}
	if ((e = wire_error_text(*reply))) {
		verr_set(err, "%s", e);
		json_object_put(*reply);
		*reply = NULL;
		return -1;
	}
	return 0;
}

long long client_int(struct json_object *o, const char *key, long long dflt)
{
	struct json_object *v;

	return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int)
		? json_object_get_int64(v) : dflt;
}

const char *client_str(struct json_object *o, const char *key, const char *dflt)
{
	struct json_object *v;

	return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		? json_object_get_string(v) : dflt;
}

const char *client_user_name(long long uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid((uid_t)uid);

	if (pw)
		snprintf(buf, len, "%s", pw->pw_name);
	else
		snprintf(buf, len, "%lld", uid);
	return buf;
}

void client_print_json(struct json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
}

int client_job_id(const char *cmd, const char *s, int64_t *id)
{
	long long v;

	if (!s)
		return usage_error(cmd, "which job? give its id (see vhpc queue)");
	if (parse_ll(s, 1, INT64_MAX / 2, &v) < 0)
		return usage_error(cmd, "'%s' is not a job id (a positive number, see vhpc queue)", s);
	*id = v;
	return 0;
}

int client_job_status(struct json_object *job)
{
	const char *st = client_str(job, "state", "?");

	if (!strcmp(st, "COMPLETED"))
		return (int)client_int(job, "exit_status", EXIT_VHPC);
	if (!strcmp(st, "TIMEOUT"))
		return EXIT_TIMEOUT;
	if (!strcmp(st, "CANCELLED"))
		return 128 + 15;
	if (!strcmp(st, "CHECKPOINTED"))
		return 75;   /* EX_TEMPFAIL: restart it from its checkpoint */
	return EXIT_VHPC;
}

/* Asks for output from *offset on; writes it to fd.  Returns 1 when the
 * job has ended and all of its output was written, 0 otherwise, -1 on a
 * failed call (err). */
int client_output_step(const char *ctl, int64_t id, int64_t *offset, int fd, char *state,
		       size_t slen, struct verr *err)
{
	struct json_object *req = json_object_new_object(), *rep;
	const char *b64;
	uint8_t *buf;
	size_t blen, n = 0;
	int rc;

	json_object_object_add(req, "type", json_object_new_string("output"));
	json_object_object_add(req, "id", json_object_new_int64(id));
	json_object_object_add(req, "offset", json_object_new_int64(*offset));
	rc = client_call(ctl, req, &rep, 30000, err);
	json_object_put(req);
	if (rc < 0)
		return -1;
	b64 = client_str(rep, "data", "");
	blen = strlen(b64) / 4 * 3 + 3;
	buf = malloc(blen);
	if (!buf || sodium_base642bin(buf, blen, b64, strlen(b64), NULL, &n, NULL,
				      sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(buf);
		json_object_put(rep);
		return verr_set(err, "vhpc-ctld sent output that is not base64");
	}
	if (n && write_full(fd, buf, n) < 0) {
		free(buf);
		json_object_put(rep);
		return verr_errno(err, "writing the job's output");
	}
	free(buf);
	*offset += (int64_t)n;
	if (state)
		snprintf(state, slen, "%s", client_str(rep, "state", "?"));
	rc = json_object_get_boolean(json_object_object_get(rep, "final")) ? 1 : 0;
	/* More is waiting: ask again at once. */
	if (!rc && *offset < client_int(rep, "size", 0))
		rc = 2;
	json_object_put(rep);
	return rc;
}

