/*
 * Requests as they arrive from a client that holds the job key.  Holding
 * the key does not make a request well-formed, so everything is checked
 * here and every rejection names the field and what was expected.
 */
#include "lib/chan.h"
#include "lib/err.h"
#include "lib/parse.h"
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *const op_names[] = {
	[GREQ_HELLO] = "hello", [GREQ_EXEC] = "exec",
	[GREQ_SIGNAL] = "signal", [GREQ_SHUTDOWN] = "shutdown",
	[GREQ_SPAWN] = "spawn", [GREQ_STATUS] = "status", [GREQ_WAIT] = "wait",
	[GREQ_KILL] = "kill", [GREQ_OUTPUT] = "output",
};
#define OP_LIST "hello, exec, signal, shutdown, spawn, status, wait, kill or output"

const char *greq_op_name(enum greq_op op)
{
	return op >= GREQ_HELLO && op <= GREQ_MAX ? op_names[op] : "?";
}

void greq_free(struct greq *r)
{
	if (r->argv)
		for (size_t i = 0; i < r->argc; i++)
			free(r->argv[i]);
	if (r->env)
		for (size_t i = 0; i < r->envc; i++)
			free(r->env[i]);
	free(r->argv);
	free(r->env);
	free(r->cwd);
	memset(r, 0, sizeof(*r));
}

/* A JSON string without embedded NULs, as a C string. */
static const char *get_cstr(struct json_object *v, const char *what, struct verr *err)
{
	const char *s;

	if (!json_object_is_type(v, json_type_string)) {
		verr_set(err, "%s: expected a string", what);
		return NULL;
	}
	s = json_object_get_string(v);
	if ((size_t)json_object_get_string_len(v) != strlen(s)) {
		verr_set(err, "%s: contains a NUL character", what);
		return NULL;
	}
	return s;
}

static int get_int(struct json_object *v, const char *what, long long min, long long max,
		   long long *out, struct verr *err)
{
	int64_t n;

	if (!json_object_is_type(v, json_type_int))
		return verr_set(err, "%s: expected an integer", what);
	n = json_object_get_int64(v);
	/* json-c saturates out-of-range numbers to INT64_MIN/MAX; the bounds
	 * below are far inside, so saturation is rejected too. */
	if (n < min || n > max)
		return verr_set(err, "%s: %lld is outside %lld..%lld", what, (long long)n, min, max);
	*out = n;
	return 0;
}

/* Copies a JSON array of strings into a NULL-terminated vector. */
static int get_strv(struct json_object *v, const char *what, bool need_one, bool is_env,
		    char ***out, size_t *n, size_t *bytes, struct verr *err)
{
	size_t len;
	char **vec;

	if (!json_object_is_type(v, json_type_array))
		return verr_set(err, "%s: expected an array of strings", what);
	len = json_object_array_length(v);
	if (need_one && len == 0)
		return verr_set(err, "%s: must not be empty", what);
	if (len > GD_MAX_ARGS)
		return verr_set(err, "%s: %zu entries exceed the limit of %d", what, len, GD_MAX_ARGS);
	vec = calloc(len + 1, sizeof(*vec));
	if (!vec)
		return verr_set(err, "out of memory");
	*out = vec;
	for (size_t i = 0; i < len; i++) {
		char name[32];
		const char *s;

		snprintf(name, sizeof(name), "%s[%zu]", what, i);
		s = get_cstr(json_object_array_get_idx(v, i), name, err);
		if (!s)
			return -1;
		*bytes += strlen(s) + 1;
		if (*bytes > GD_MAX_ARG_BYTES)
			return verr_set(err, "%s: argv, env and cwd together exceed %u bytes", name,
					GD_MAX_ARG_BYTES);
		if (is_env) {
			const char *eq = strchr(s, '=');

			if (!eq || eq == s)
				return verr_set(err, "%s: expected NAME=VALUE, got '%.60s'", name, s);
		}
		if (need_one && i == 0 && !*s)
			return verr_set(err, "%s: the program name is empty", name);
		vec[i] = strdup(s);
		if (!vec[i])
			return verr_set(err, "out of memory");
		*n = i + 1;
	}
	return 0;
}

static bool key_allowed(enum greq_op op, const char *key)
{
	static const char *const common[] = { "v", "op", NULL };
	static const char *const exec[] = { "argv", "env", "cwd", "timeout_ms", "stdin", "pty", NULL };
	static const char *const sig[] = { "signal", NULL };
	static const char *const spawn[] = { "argv", "env", "cwd", "timeout_ms", "id", NULL };
	static const char *const status[] = { "id", NULL };
	static const char *const wait[] = { "id", "timeout_ms", NULL };
	static const char *const kill[] = { "id", "signal", NULL };
	static const char *const output[] = { "id", "offset", "max", NULL };
	const char *const *extra = op == GREQ_EXEC ? exec : op == GREQ_SIGNAL ? sig :
		op == GREQ_SPAWN ? spawn : op == GREQ_STATUS ? status : op == GREQ_WAIT ? wait :
		op == GREQ_KILL ? kill : op == GREQ_OUTPUT ? output : NULL;

	for (const char *const *k = common; *k; k++)
		if (!strcmp(*k, key))
			return true;
	for (const char *const *k = extra; k && *k; k++)
		if (!strcmp(*k, key))
			return true;
	return false;
}

static int parse_exec(struct json_object *obj, const char *op, struct greq *r, struct verr *err)
{
	struct json_object *v;
	size_t bytes = 0;

	if (!json_object_object_get_ex(obj, "argv", &v))
		return verr_set(err, "%s: missing \"argv\" (an array of strings)", op);
	if (get_strv(v, "argv", true, false, &r->argv, &r->argc, &bytes, err) < 0)
		return -1;
	if (json_object_object_get_ex(obj, "env", &v) &&
	    get_strv(v, "env", false, true, &r->env, &r->envc, &bytes, err) < 0)
		return -1;
	if (json_object_object_get_ex(obj, "cwd", &v)) {
		const char *cwd = get_cstr(v, "cwd", err);

		if (!cwd)
			return -1;
		if (cwd[0] != '/')
			return verr_set(err, "cwd: '%.60s' is not an absolute path", cwd);
		if (strlen(cwd) >= PATH_MAX)
			return verr_set(err, "cwd: longer than %d bytes", PATH_MAX - 1);
		bytes += strlen(cwd);
		if (bytes > GD_MAX_ARG_BYTES)
			return verr_set(err, "cwd: argv, env and cwd together exceed %u bytes", GD_MAX_ARG_BYTES);
		r->cwd = strdup(cwd);
		if (!r->cwd)
			return verr_set(err, "out of memory");
	}
	if (json_object_object_get_ex(obj, "timeout_ms", &v) &&
	    get_int(v, "timeout_ms", 0, GD_MAX_TIMEOUT_MS, &r->timeout_ms, err) < 0)
		return -1;
	return 0;
}

/* exec's "pty": {"rows":R,"cols":C[,"term":"xterm-256color"]}.  TERM is
 * a plain terminfo name, so it cannot smuggle anything into the
 * command's environment. */
static int parse_pty(struct json_object *v, struct greq *r, struct verr *err)
{
	struct json_object *f;
	long long n;

	if (!json_object_is_type(v, json_type_object))
		return verr_set(err, "pty: expected an object {\"rows\", \"cols\", \"term\"}");
	json_object_object_foreach(v, key, val) {
		(void)val;
		if (strcmp(key, "rows") && strcmp(key, "cols") && strcmp(key, "term"))
			return verr_set(err, "pty: unknown field \"%.40s\"", key);
	}
	if (!json_object_object_get_ex(v, "rows", &f))
		return verr_set(err, "pty: missing \"rows\" (1..%d)", GD_PTY_MAX_DIM);
	if (get_int(f, "pty.rows", 1, GD_PTY_MAX_DIM, &n, err) < 0)
		return -1;
	r->rows = (unsigned short)n;
	if (!json_object_object_get_ex(v, "cols", &f))
		return verr_set(err, "pty: missing \"cols\" (1..%d)", GD_PTY_MAX_DIM);
	if (get_int(f, "pty.cols", 1, GD_PTY_MAX_DIM, &n, err) < 0)
		return -1;
	r->cols = (unsigned short)n;
	if (json_object_object_get_ex(v, "term", &f)) {
		const char *t = get_cstr(f, "pty.term", err);

		if (!t)
			return -1;
		if (!*t || strlen(t) > GD_TERM_MAX)
			return verr_set(err, "pty.term: must be 1..%d characters", GD_TERM_MAX);
		for (const char *c = t; *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			      strchr("._+-", *c)))
				return verr_set(err, "pty.term: '%.40s' is not a terminal name (letters, digits, '.', '_', '+', '-')", t);
		snprintf(r->term, sizeof(r->term), "%s", t);
	}
	r->pty = true;
	return 0;
}

int gd_winsize_parse(const char *buf, size_t len, unsigned short *rows, unsigned short *cols,
		     struct verr *err)
{
	const unsigned char *b = (const unsigned char *)buf;
	unsigned rr, cc;

	if (len != 4)
		return verr_set(err, "window size: %zu bytes, expected 4 (rows, columns)", len);
	rr = (unsigned)b[0] << 8 | b[1];
	cc = (unsigned)b[2] << 8 | b[3];
	if (rr < 1 || rr > GD_PTY_MAX_DIM || cc < 1 || cc > GD_PTY_MAX_DIM)
		return verr_set(err, "window size: %ux%u is outside 1..%d", rr, cc, GD_PTY_MAX_DIM);
	*rows = (unsigned short)rr;
	*cols = (unsigned short)cc;
	return 0;
}

/* A detached command's id: it names files in the spool dir, so it must be
 * a plain name that cannot step out of it. */
static int parse_id(struct json_object *obj, const char *op, struct greq *r, struct verr *err)
{
	struct json_object *v;
	const char *id;

	if (!json_object_object_get_ex(obj, "id", &v))
		return verr_set(err, "%s: missing \"id\" (the detached command's name)", op);
	id = get_cstr(v, "id", err);
	if (!id)
		return -1;
	if (!ident_ok(id, GD_ID_MAX) || strchr(id, '.'))
		return verr_set(err, "id: '%.40s' is not a plain name (letters, digits, '_' and '-', at most %d)",
				id, GD_ID_MAX);
	snprintf(r->id, sizeof(r->id), "%s", id);
	return 0;
}

static int parse_obj(struct json_object *obj, struct greq *r, struct verr *err)
{
	struct json_object *v;
	long long ver, n;
	const char *op;

	if (!json_object_is_type(obj, json_type_object))
		return verr_set(err, "request: expected a JSON object");
	if (!json_object_object_get_ex(obj, "v", &v))
		return verr_set(err, "request: missing \"v\" (the protocol version, %d)", GD_PROTO_VERSION);
	if (get_int(v, "v", 0, INT32_MAX, &ver, err) < 0)
		return -1;
	if (ver < GD_PROTO_MIN || ver > GD_PROTO_VERSION)
		return verr_set(err, "request: protocol version %lld is not supported (this guestd speaks %d..%d)",
				ver, GD_PROTO_MIN, GD_PROTO_VERSION);
	if (!json_object_object_get_ex(obj, "op", &v))
		return verr_set(err, "request: missing \"op\" (" OP_LIST ")");
	op = get_cstr(v, "op", err);
	if (!op)
		return -1;
	for (int i = GREQ_HELLO; i <= GREQ_MAX; i++)
		if (!strcmp(op, op_names[i]))
			r->op = i;
	if (!r->op)
		return verr_set(err, "op: unknown operation '%.40s' (expected " OP_LIST ")", op);
	json_object_object_foreach(obj, key, val) {
		(void)val;
		if (!key_allowed(r->op, key))
			return verr_set(err, "%s: unknown field \"%.40s\"", op, key);
	}
	switch (r->op) {
	case GREQ_EXEC:
		if (json_object_object_get_ex(obj, "stdin", &v)) {
			if (!json_object_is_type(v, json_type_boolean))
				return verr_set(err, "stdin: expected true or false");
			r->stdin_pipe = json_object_get_boolean(v);
		}
		if (json_object_object_get_ex(obj, "pty", &v)) {
			if (ver < 2)
				return verr_set(err, "pty: needs protocol version 2 (the request says %lld)", ver);
			if (parse_pty(v, r, err) < 0)
				return -1;
			if (r->stdin_pipe)
				return verr_set(err, "exec: \"stdin\" and \"pty\" exclude each other (a pty is the command's stdin)");
		}
		return parse_exec(obj, op, r, err);
	case GREQ_SIGNAL:
		if (!json_object_object_get_ex(obj, "signal", &v))
			return verr_set(err, "signal: missing \"signal\" (a signal number)");
		if (get_int(v, "signal", 1, SIGRTMAX, &n, err) < 0)
			return -1;
		r->sig = (int)n;
		return 0;
	case GREQ_SPAWN:
		if (parse_id(obj, op, r, err) < 0)
			return -1;
		return parse_exec(obj, op, r, err);
	case GREQ_STATUS:
		return parse_id(obj, op, r, err);
	case GREQ_WAIT:
		if (parse_id(obj, op, r, err) < 0)
			return -1;
		if (!json_object_object_get_ex(obj, "timeout_ms", &v))
			return verr_set(err, "wait: missing \"timeout_ms\" (how long to wait, 0..%d)", GD_MAX_WAIT_MS);
		return get_int(v, "timeout_ms", 0, GD_MAX_WAIT_MS, &r->wait_ms, err);
	case GREQ_KILL:
		if (parse_id(obj, op, r, err) < 0)
			return -1;
		if (!json_object_object_get_ex(obj, "signal", &v))
			return verr_set(err, "kill: missing \"signal\" (a signal number)");
		if (get_int(v, "signal", 1, SIGRTMAX, &n, err) < 0)
			return -1;
		r->sig = (int)n;
		return 0;
	case GREQ_OUTPUT:
		if (parse_id(obj, op, r, err) < 0)
			return -1;
		if (!json_object_object_get_ex(obj, "offset", &v))
			return verr_set(err, "output: missing \"offset\" (the byte to start from)");
		if (get_int(v, "offset", 0, INT64_MAX / 2, &r->offset, err) < 0)
			return -1;
		if (!json_object_object_get_ex(obj, "max", &v))
			return verr_set(err, "output: missing \"max\" (bytes to return, 1..%u)", GD_MAX_OUTPUT);
		return get_int(v, "max", 1, GD_MAX_OUTPUT, &r->max, err);
	default:
		return 0;
	}
}

int greq_parse(const char *buf, size_t len, struct greq *r, struct verr *err)
{
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error jerr;
	size_t end;
	int ret;

	memset(r, 0, sizeof(*r));
	if (len > GD_MAX_REQUEST)
		return verr_set(err, "request of %zu bytes exceeds the %u-byte limit", len, GD_MAX_REQUEST);
	if (memchr(buf, 0, len))
		return verr_set(err, "request is not valid JSON: it contains a NUL byte");
	tok = json_tokener_new_ex(GD_JSON_DEPTH);
	if (!tok)
		return verr_set(err, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	obj = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!obj || jerr != json_tokener_success) {
		json_object_put(obj);
		if (jerr == json_tokener_success)   /* the JSON value null */
			return verr_set(err, "request: expected a JSON object");
		if (jerr == json_tokener_continue)
			return verr_set(err, "request is not valid JSON: it ends early (%zu bytes)", len);
		return verr_set(err, "request is not valid JSON: %s at byte %zu",
				json_tokener_error_desc(jerr), end);
	}
	for (size_t i = end; i < len; i++)
		if (!strchr(" \t\r\n", buf[i])) {
			json_object_put(obj);
			return verr_set(err, "request is not valid JSON: unexpected data after the object at byte %zu", i);
		}
	ret = parse_obj(obj, r, err);
	json_object_put(obj);
	if (ret < 0)
		greq_free(r);
	return ret;
}

static char *finish(struct json_object *o)
{
	char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));

	json_object_put(o);
	return s;
}

static struct json_object *reply_base(const char *op, bool ok)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "v", json_object_new_int(GD_PROTO_VERSION));
	if (op)
		json_object_object_add(o, "op", json_object_new_string(op));
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	return o;
}

char *gd_reply_error(const char *op, const char *msg)
{
	struct json_object *o = reply_base(op, false);

	json_object_object_add(o, "error", json_object_new_string(msg));
	return finish(o);
}

char *gd_reply_ok(const char *op, struct json_object *extra)
{
	struct json_object *o = reply_base(op, true);

	if (extra) {
		json_object_object_foreach(extra, k, v)
			json_object_object_add(o, k, json_object_get(v));
		json_object_put(extra);
	}
	return finish(o);
}

char *gd_exit_json(int wstatus, bool timed_out)
{
	struct json_object *o = json_object_new_object();

	if (WIFSIGNALED(wstatus)) {
		json_object_object_add(o, "signal", json_object_new_int(WTERMSIG(wstatus)));
		if (WCOREDUMP(wstatus))
			json_object_object_add(o, "core", json_object_new_boolean(true));
	} else {
		json_object_object_add(o, "status", json_object_new_int(WEXITSTATUS(wstatus)));
	}
	if (timed_out)
		json_object_object_add(o, "timeout", json_object_new_boolean(true));
	return finish(o);
}

static void reject(struct gd_step *out, const char *op, const struct verr *why)
{
	out->act = GD_ACT_REPLY;
	out->why = *why;
	out->reply = gd_reply_error(op, why->msg);
}

void gd_dispatch(enum gd_state st, uint8_t type, const char *buf, size_t len,
		 struct gd_step *out)
{
	struct verr e;

	memset(out, 0, sizeof(*out));
	if (type == CHAN_STDIN) {
		verr_set(&e, "stdin frames are not accepted: a command's stdin is /dev/null unless its exec asks for stdin");
		reject(out, NULL, &e);
		return;
	}
	if (type != CHAN_JSON) {
		verr_set(&e, "unexpected frame type %u from a client (only requests, type %d, are accepted)",
			 type, CHAN_JSON);
		reject(out, NULL, &e);
		return;
	}
	if (greq_parse(buf, len, &out->req, &e) < 0) {
		reject(out, NULL, &e);
		return;
	}
	switch (out->req.op) {
	case GREQ_HELLO:
		out->act = GD_ACT_HELLO;
		return;
	case GREQ_SHUTDOWN:
		out->act = GD_ACT_SHUTDOWN;
		return;
	case GREQ_EXEC:
		if (st == GD_RUNNING) {
			greq_free(&out->req);
			verr_set(&e, "exec: a command is already running on this connection");
			reject(out, "exec", &e);
			return;
		}
		out->act = GD_ACT_EXEC;
		return;
	case GREQ_SIGNAL:
		if (st != GD_RUNNING) {
			greq_free(&out->req);
			verr_set(&e, "signal: no command is running on this connection");
			reject(out, "signal", &e);
			return;
		}
		out->act = GD_ACT_SIGNAL;
		return;
	case GREQ_SPAWN:
	case GREQ_STATUS:
	case GREQ_WAIT:
	case GREQ_KILL:
	case GREQ_OUTPUT:
		/* One request at a time: an exec's output owns the connection
		 * until it ends. */
		if (st == GD_RUNNING) {
			const char *op = greq_op_name(out->req.op);

			greq_free(&out->req);
			verr_set(&e, "%s: a command is running on this connection; use another connection", op);
			reject(out, op, &e);
			return;
		}
		out->act = out->req.op == GREQ_SPAWN ? GD_ACT_SPAWN :
			   out->req.op == GREQ_KILL ? GD_ACT_KILL : GD_ACT_STATUS;
		return;
	}
}

void gd_step_free(struct gd_step *s)
{
	free(s->reply);
	greq_free(&s->req);
	memset(s, 0, sizeof(*s));
}
