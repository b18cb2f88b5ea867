/*
 * The client's end of vhpc-ctld's exec: the reply (sealed to this uid by
 * munge) carries the job key, the stream's key, and the folder and
 * environment of the ranks; the connection then carries the stream,
 * sealed (lib/wirepipe.h) by a thread between it and one end of a
 * socketpair, whose other end runs the guestd channel.
 */
#include "lib/argv.h"
#include "lib/bytes.h"
#include "lib/wire.h"
#include "client.h"
#include "exec_stream.h"

#include <errno.h>
#include <json-c/json.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HANDSHAKE_MS 15000

static void *pump(void *arg)
{
	struct exec_stream *x = arg;

	wpipe_relay(x->sv[1], x->conn, x->pk, true);
	return NULL;
}

/* The reply's parts, checked: it is the controller's, but a field that
 * is not what it should be is an error here, not a crash. */
static int take_reply(struct json_object *rep, struct exec_stream *x, uint8_t key[CHAN_KEY_LEN],
		      struct verr *err)
{
	const char *k = client_str(rep, "key", ""), *pk = client_str(rep, "pipe_key", "");
	const char *cwd = client_str(rep, "cwd", ""), *node = client_str(rep, "node", "");
	struct json_object *ev;
	size_t n;

	if (strcmp(client_str(rep, "type", ""), "exec_ready"))
		return verr_set(err, "vhpc-ctld answered '%.40s', not exec_ready", client_str(rep, "type", ""));
	if (hex_decode(k, key, CHAN_KEY_LEN) < 0 || hex_decode(pk, x->pk, sizeof(x->pk)) < 0)
		return verr_set(err, "vhpc-ctld's exec_ready: \"key\" and \"pipe_key\" must be %d hex digits",
				2 * CHAN_KEY_LEN);
	if (cwd[0] != '/' || strlen(cwd) >= sizeof(x->cwd))
		return verr_set(err, "vhpc-ctld's exec_ready: \"cwd\" must be an absolute path");
	snprintf(x->cwd, sizeof(x->cwd), "%s", cwd);
	snprintf(x->node, sizeof(x->node), "%s", node);
	if (!json_object_object_get_ex(rep, "env", &ev) || !json_object_is_type(ev, json_type_array))
		return verr_set(err, "vhpc-ctld's exec_ready: \"env\" must be an array");
	n = json_object_array_length(ev);
	x->env = calloc(n + 1, sizeof(char *));
	if (!x->env)
		return verr_set(err, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(ev, i);
		const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";

		if (!strchr(s, '=') || s[0] == '=' || !(x->env[i] = strdup(s)))
			return verr_set(err, "vhpc-ctld's exec_ready: \"env\"[%zu] is not NAME=VALUE", i);
	}
	return 0;
}

int exec_stream_open(const char *ctl, int64_t id, int guest, struct exec_stream *x, struct verr *err)
{
	struct json_object *req = json_object_new_object(), *rep = NULL;
	uint8_t key[CHAN_KEY_LEN];
	struct wire_peer peer = { .uid = 1 };
	const char *e;
	int rc;

	memset(x, 0, sizeof(*x));
	x->conn = x->sv[0] = x->sv[1] = -1;
	json_object_object_add(req, "type", json_object_new_string("exec"));
	json_object_object_add(req, "id", json_object_new_int64(id));
	json_object_object_add(req, "guest", json_object_new_int(guest));
	rc = wire_call_open(ctl, req, &rep, &peer, 30000, &x->conn, err);
	json_object_put(req);
	if (rc < 0)
		return verr_wrap(err, "vhpc-ctld");
	if (peer.uid != 0) {
		verr_set(err, "vhpc-ctld at %s: the reply comes from uid %u, not root: refusing it", ctl,
			 (unsigned)peer.uid);
		goto fail;
	}
	if ((e = wire_error_text(rep))) {
		verr_set(err, "%s", e);
		goto fail;
	}
	if (take_reply(rep, x, key, err) < 0)
		goto fail;
	json_object_put(rep);
	rep = NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x->sv) < 0) {
		verr_errno(err, "socketpair");
		goto fail;
	}
	if (pthread_create(&x->pump, NULL, pump, x) != 0) {
		verr_set(err, "cannot start the stream's thread");
		goto fail;
	}
	x->pumping = true;
	if (chan_client(&x->c, x->sv[0], key, HANDSHAKE_MS, err) < 0) {
		verr_wrap(err, "guest g%d of job %lld (node %s)", guest, (long long)id, x->node);
		goto fail;
	}
	sodium_memzero(key, sizeof(key));
	return 0;
fail:
	sodium_memzero(key, sizeof(key));
	json_object_put(rep);
	if (x->sv[0] >= 0)
		close(x->sv[0]);
	x->sv[0] = -1;
	x->c.fd = -1;
	exec_stream_close(x);
	return -1;
}

void exec_stream_close(struct exec_stream *x)
{
	if (x->c.fd >= 0 && x->pumping)
		chan_close(&x->c);
	x->c.fd = -1;
	if (x->pumping) {
		struct timespec ts;

		/* The far end winds down in one round trip; past that, cut it. */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 5;
		if (pthread_timedjoin_np(x->pump, NULL, &ts) != 0) {
			shutdown(x->conn, SHUT_RDWR);
			shutdown(x->sv[1], SHUT_RDWR);
			pthread_join(x->pump, NULL);
		}
		x->pumping = false;
	}
	if (x->sv[1] >= 0)
		close(x->sv[1]);
	if (x->conn >= 0)
		close(x->conn);
	x->sv[1] = x->conn = -1;
	argv_free(x->env);
	x->env = NULL;
	sodium_memzero(x->pk, sizeof(x->pk));
}

int exec_job_guests(const char *ctl, int64_t id, int *n, struct verr *err)
{
	struct json_object *req = json_object_new_object(), *rep = NULL, *job;

	json_object_object_add(req, "type", json_object_new_string("job"));
	json_object_object_add(req, "id", json_object_new_int64(id));
	if (client_call(ctl, req, &rep, 30000, err) < 0) {
		json_object_put(req);
		return -1;
	}
	json_object_put(req);
	*n = json_object_object_get_ex(rep, "job", &job) ? (int)client_int(job, "guests", 0) : 0;
	json_object_put(rep);
	if (*n < 1 || *n > 4096)
		return verr_set(err, "vhpc-ctld's record of job %lld has no valid \"guests\"", (long long)id);
	return 0;
}
