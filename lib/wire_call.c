/*
 * One wire request and its reply on a fresh TCP connection.
 */
#include "lib/bytes.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/wire.h"

#include <json-c/json.h>
#include <string.h>
#include <unistd.h>

static int call(const char *hostport, struct json_object *req, struct json_object **reply,
		struct wire_peer *peer, int timeout_ms, int *keep, struct verr *err)
{
	struct wire_peer ignore;
	/* The daemons run as root; the reply must name this request's id. */
	struct wire_to to = { .uid = 0 };
	uint8_t id[WIRE_ID_HEX / 2];
	int fd = tcp_connect(hostport, timeout_ms < 10000 && timeout_ms > 0 ? timeout_ms : 10000, err);
	int r;

	*reply = NULL;
	if (fd < 0)
		return -1;
	random_bytes(id, sizeof(id));
	hex_encode(id, sizeof(id), to.id);
	if (wire_send(fd, req, &to, timeout_ms, err) < 0) {
		close(fd);
		return verr_wrap(err, "%s", hostport);
	}
	r = wire_recv(fd, reply, peer ? peer : &ignore, to.id, timeout_ms, err);
	if (keep && r == 0 && !wire_error_text(*reply))
		*keep = fd;
	else
		close(fd);
	if (r == 1)
		return verr_set(err, "%s closed the connection without a reply", hostport);
	if (r < 0)
		return verr_wrap(err, "%s", hostport);
	return 0;
}

int wire_call(const char *hostport, struct json_object *req, struct json_object **reply,
	      struct wire_peer *peer, int timeout_ms, struct verr *err)
{
	return call(hostport, req, reply, peer, timeout_ms, NULL, err);
}

int wire_call_open(const char *hostport, struct json_object *req, struct json_object **reply,
		   struct wire_peer *peer, int timeout_ms, int *fd, struct verr *err)
{
	*fd = -1;
	return call(hostport, req, reply, peer, timeout_ms, fd, err);
}

const char *wire_error_text(struct json_object *reply)
{
	struct json_object *e;

	if (strcmp(wire_type(reply), "error"))
		return NULL;
	if (json_object_object_get_ex(reply, "error", &e) && json_object_is_type(e, json_type_string))
		return json_object_get_string(e);
	return "(no reason given)";
}

const char *wire_error_code(struct json_object *reply)
{
	struct json_object *c;

	if (!reply || strcmp(wire_type(reply), "error"))
		return NULL;
	if (json_object_object_get_ex(reply, "code", &c) && json_object_is_type(c, json_type_string))
		return json_object_get_string(c);
	return NULL;
}
