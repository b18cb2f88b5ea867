/*
 * TCP plumbing and field validation for the cluster's wire messages
 * (vhpc-ctld <-> vhpcd <-> vhpc): addresses, one-request calls, and getters
 * that check every field a peer sends, naming the field when it is wrong.
 */
#include "vhpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int ipv4_parse(const char *s, uint32_t *out)
{
	struct in_addr a;
	char canon[INET_ADDRSTRLEN];

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -1;
	/* inet_pton accepts only dotted quads; insist on the canonical form
	 * so an address names one thing. */
	if (!inet_ntop(AF_INET, &a, canon, sizeof(canon)) || strcmp(canon, s))
		return -1;
	*out = ntohl(a.s_addr);
	return 0;
}

int hostport_parse(const char *s, bool allow_zero, char *host, size_t hlen, int *port)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	long long p;
	size_t n;

	if (!colon)
		return -1;
	n = (size_t)(colon - s);
	if (n >= hlen || memchr(s, ':', n))
		return -1;
	if (parse_ll(colon + 1, allow_zero ? 0 : 1, 65535, &p) < 0)
		return -1;
	memcpy(host, s, n);
	host[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (!((host[i] >= 'a' && host[i] <= 'z') || (host[i] >= 'A' && host[i] <= 'Z') ||
		      (host[i] >= '0' && host[i] <= '9') || host[i] == '.' || host[i] == '-' ||
		      (host[i] == '*' && n == 1)))
			return -1;
	*port = (int)p;
	return 0;
}

int tcp_listen(const char *spec, int *port, struct verr *err)
{
	char host[256];
	int p, fd, one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	uint32_t a = 0;

	if (hostport_parse(spec, true, host, sizeof(host), &p) < 0)
		return verr_set(err, "listen address '%s': expected ADDR:PORT (an IPv4 address, * or nothing, and a port)", spec);
	if (host[0] && strcmp(host, "*") && ipv4_parse(host, &a) < 0)
		return verr_set(err, "listen address '%s': '%s' is not an IPv4 address", spec, host);
	sa.sin_addr.s_addr = htonl(a);
	sa.sin_port = htons((uint16_t)p);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verr_errno(err, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1024) < 0) {
		verr_errno(err, "listen on %s", spec);
		close(fd);
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	if (port)
		*port = ntohs(sa.sin_port);
	return fd;
}

int tcp_connect(const char *hostport, int timeout_ms, struct verr *err)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res;
	char host[256], ps[8];
	int port, r, fd, fl, one = 1, soerr = 0;
	socklen_t sl = sizeof(soerr);
	struct pollfd p;

	if (hostport_parse(hostport, false, host, sizeof(host), &port) < 0)
		return verr_set(err, "'%s' is not HOST:PORT", hostport);
	snprintf(ps, sizeof(ps), "%d", port);
	r = getaddrinfo(host, ps, &hints, &res);
	if (r)
		return verr_set(err, "cannot resolve '%s': %s", host, gai_strerror(r));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return verr_errno(err, "socket");
	}
	fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	r = connect(fd, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (r < 0 && errno != EINPROGRESS) {
		verr_errno(err, "cannot connect to %s", hostport);
		close(fd);
		return -1;
	}
	if (r < 0) {
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		do
			r = poll(&p, 1, timeout_ms > 0 ? timeout_ms : -1);
		while (r < 0 && errno == EINTR);
		if (r == 0)
			errno = ETIMEDOUT;
		if (r <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
			if (r > 0)
				errno = soerr;
			verr_errno(err, "cannot connect to %s", hostport);
			close(fd);
			return -1;
		}
	}
	fcntl(fd, F_SETFL, fl);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int wire_call(const char *hostport, struct json_object *req, struct json_object **reply,
	      struct wire_peer *peer, int timeout_ms, struct verr *err)
{
	struct wire_peer ignore;
	int fd = tcp_connect(hostport, timeout_ms < 10000 && timeout_ms > 0 ? timeout_ms : 10000, err);
	int r;

	*reply = NULL;
	if (fd < 0)
		return -1;
	if (wire_send(fd, req, err) < 0) {
		close(fd);
		return verr_wrap(err, "%s", hostport);
	}
	r = wire_recv(fd, reply, peer ? peer : &ignore, timeout_ms, err);
	close(fd);
	if (r == 1)
		return verr_set(err, "%s closed the connection without a reply", hostport);
	if (r < 0)
		return verr_wrap(err, "%s", hostport);
	return 0;
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

/* ------------------------------------------------------------- fields */

static struct json_object *field(struct json_object *o, const char *key, bool required,
				 int *rc, struct verr *err)
{
	struct json_object *v;

	*rc = 0;
	if (!json_object_object_get_ex(o, key, &v) || !v) {
		if (required)
			*rc = verr_set(err, "missing \"%s\"", key);
		return NULL;
	}
	return v;
}

int jf_int(struct json_object *o, const char *key, bool required, long long min, long long max,
	   long long *out, struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);
	int64_t n;

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_int))
		return verr_set(err, "\"%s\": expected an integer", key);
	n = json_object_get_int64(v);
	/* json-c saturates; the bounds used are far inside int64. */
	if (n < min || n > max)
		return verr_set(err, "\"%s\": %lld is outside %lld..%lld", key, (long long)n, min, max);
	*out = n;
	return 0;
}

int jf_bool(struct json_object *o, const char *key, bool required, bool *out, struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_boolean))
		return verr_set(err, "\"%s\": expected true or false", key);
	*out = json_object_get_boolean(v);
	return 0;
}

int jf_str(struct json_object *o, const char *key, bool required, size_t max, const char **out,
	   struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);
	const char *s;

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_string))
		return verr_set(err, "\"%s\": expected a string", key);
	s = json_object_get_string(v);
	if ((size_t)json_object_get_string_len(v) != strlen(s))
		return verr_set(err, "\"%s\": contains a NUL character", key);
	if (strlen(s) > max)
		return verr_set(err, "\"%s\": longer than %zu bytes", key, max);
	*out = s;
	return 0;
}

int jf_ident(struct json_object *o, const char *key, bool required, size_t max, const char **out,
	     struct verr *err)
{
	const char *s = NULL;

	if (jf_str(o, key, required, max, &s, err) < 0)
		return -1;
	if (!s)
		return 0;
	if (!ident_ok(s, max))
		return verr_set(err, "\"%s\": '%.40s' is not a plain name (letters, digits, '.', '_', '-')", key, s);
	*out = s;
	return 0;
}

int jf_array(struct json_object *o, const char *key, bool required, size_t max,
	     struct json_object **out, struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_array))
		return verr_set(err, "\"%s\": expected an array", key);
	if (json_object_array_length(v) > max)
		return verr_set(err, "\"%s\": %zu entries; at most %zu", key,
				json_object_array_length(v), max);
	*out = v;
	return 0;
}

int jf_object(struct json_object *o, const char *key, bool required, struct json_object **out,
	      struct verr *err)
{
	int rc;
	struct json_object *v = field(o, key, required, &rc, err);

	if (!v)
		return rc;
	if (!json_object_is_type(v, json_type_object))
		return verr_set(err, "\"%s\": expected an object", key);
	*out = v;
	return 0;
}

int jf_only(struct json_object *o, const char *what, const char *const *allowed, struct verr *err)
{
	json_object_object_foreach(o, key, val) {
		bool ok = !strcmp(key, "v") || !strcmp(key, "type");

		(void)val;
		for (const char *const *a = allowed; !ok && a && *a; a++)
			ok = !strcmp(*a, key);
		if (!ok)
			return verr_set(err, "%s: unknown field \"%.40s\"", what, key);
	}
	return 0;
}

void jf_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

int jf_strv(struct json_object *o, const char *key, bool required, size_t max, size_t maxlen,
	    char ***out, size_t *n, struct verr *err)
{
	struct json_object *a = NULL;
	size_t len;
	char **v;

	if (jf_array(o, key, required, max, &a, err) < 0)
		return -1;
	if (!a)
		return 0;
	len = json_object_array_length(a);
	v = calloc(len + 1, sizeof(*v));
	if (!v)
		return verr_set(err, "out of memory");
	for (size_t i = 0; i < len; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *s;

		if (!json_object_is_type(e, json_type_string)) {
			jf_strv_free(v);
			return verr_set(err, "\"%s\"[%zu]: expected a string", key, i);
		}
		s = json_object_get_string(e);
		if ((size_t)json_object_get_string_len(e) != strlen(s) || strlen(s) > maxlen) {
			jf_strv_free(v);
			return verr_set(err, "\"%s\"[%zu]: contains a NUL or is longer than %zu bytes", key, i, maxlen);
		}
		if (!(v[i] = strdup(s))) {
			jf_strv_free(v);
			return verr_set(err, "out of memory");
		}
	}
	*out = v;
	if (n)
		*n = len;
	return 0;
}
