/* vhpc-guestd's pure parts: request parsing and validation, the per-frame
 * dispatcher, replies, options (command line and kernel command line),
 * environment merging. */
#include "lib/chan.h"
#include "lib/err.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "guest/internal.h"

static int parse(const char *json, struct greq *r, struct verr *e)
{
	return greq_parse(json, strlen(json), r, e);
}

/* The request must be rejected with a message containing want. */
static void rejects(const char *json, const char *want)
{
	struct greq r;
	struct verr e = { "" };

	if (parse(json, &r, &e) == 0) {
		greq_free(&r);
		fail_msg("accepted: %s", json);
	}
	if (!strstr(e.msg, want))
		fail_msg("for %s: message '%s' lacks '%s'", json, e.msg, want);
	/* A rejected request leaves nothing allocated behind. */
	assert_null(r.argv);
	assert_null(r.env);
	assert_null(r.cwd);
}

static void valid_requests_parse(void **state)
{
	struct greq r;
	struct verr e;

	(void)state;
	assert_int_equal(parse("{\"v\":1,\"op\":\"hello\"}", &r, &e), 0);
	assert_int_equal(r.op, GREQ_HELLO);
	greq_free(&r);
	assert_int_equal(parse(" {\"op\":\"shutdown\",\"v\":1}\n", &r, &e), 0);
	assert_int_equal(r.op, GREQ_SHUTDOWN);
	greq_free(&r);
	assert_int_equal(parse("{\"v\":1,\"op\":\"signal\",\"signal\":15}", &r, &e), 0);
	assert_int_equal(r.op, GREQ_SIGNAL);
	assert_int_equal(r.sig, 15);
	greq_free(&r);
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"/bin/echo\",\"a b\",\"\"],"
			       "\"env\":[\"A=1\",\"B=x=y\",\"C=\"],\"cwd\":\"/tmp\",\"timeout_ms\":5000}",
			       &r, &e), 0);
	assert_int_equal(r.op, GREQ_EXEC);
	assert_int_equal(r.argc, 3);
	assert_string_equal(r.argv[0], "/bin/echo");
	assert_string_equal(r.argv[1], "a b");
	assert_string_equal(r.argv[2], "");
	assert_null(r.argv[3]);
	assert_int_equal(r.envc, 3);
	assert_string_equal(r.env[1], "B=x=y");
	assert_null(r.env[3]);
	assert_string_equal(r.cwd, "/tmp");
	assert_int_equal(r.timeout_ms, 5000);
	assert_false(r.stdin_pipe);
	greq_free(&r);
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"cat\"],\"stdin\":true}", &r, &e), 0);
	assert_true(r.stdin_pipe);
	greq_free(&r);
	/* Unicode escapes are fine as long as they are not NUL. */
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"echo\",\"\\u00e9\"]}", &r, &e), 0);
	assert_string_equal(r.argv[1], "\xc3\xa9");
	assert_null(r.cwd);
	assert_int_equal(r.timeout_ms, 0);
	greq_free(&r);
}

static void detached_requests_parse(void **state)
{
	struct greq r;
	struct verr e;
	struct gd_step st;
	const char *spawn = "{\"v\":1,\"op\":\"spawn\",\"id\":\"job\",\"argv\":[\"mpirun\"],\"timeout_ms\":9}";

	(void)state;
	assert_int_equal(parse(spawn, &r, &e), 0);
	assert_int_equal(r.op, GREQ_SPAWN);
	assert_string_equal(r.id, "job");
	assert_string_equal(r.argv[0], "mpirun");
	assert_int_equal(r.timeout_ms, 9);
	greq_free(&r);
	assert_int_equal(parse("{\"v\":1,\"op\":\"wait\",\"id\":\"a-1_b\",\"timeout_ms\":60000}", &r, &e), 0);
	assert_int_equal(r.op, GREQ_WAIT);
	assert_int_equal(r.wait_ms, 60000);
	greq_free(&r);
	assert_int_equal(parse("{\"v\":1,\"op\":\"kill\",\"id\":\"job\",\"signal\":2}", &r, &e), 0);
	assert_int_equal(r.sig, 2);
	greq_free(&r);
	rejects("{\"v\":1,\"op\":\"spawn\",\"argv\":[\"x\"]}", "spawn: missing \"id\"");
	rejects("{\"v\":1,\"op\":\"spawn\",\"id\":\"j\"}", "spawn: missing \"argv\"");
	rejects("{\"v\":1,\"op\":\"status\",\"id\":\"../etc/passwd\"}", "not a plain name");
	rejects("{\"v\":1,\"op\":\"status\",\"id\":\"\"}", "not a plain name");
	rejects("{\"v\":1,\"op\":\"status\",\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "not a plain name");
	rejects("{\"v\":1,\"op\":\"status\",\"id\":7}", "id: expected a string");
	rejects("{\"v\":1,\"op\":\"wait\",\"id\":\"j\",\"timeout_ms\":-1}", "outside 0..60000");
	rejects("{\"v\":1,\"op\":\"kill\",\"id\":\"j\"}", "kill: missing \"signal\"");
	rejects("{\"v\":1,\"op\":\"kill\",\"id\":\"j\",\"signal\":0}", "outside 1..");
	rejects("{\"v\":1,\"op\":\"status\",\"id\":\"j\",\"signal\":1}", "status: unknown field");
	/* Detached requests wait until an exec on the connection ended. */
	gd_dispatch(GD_IDLE, CHAN_JSON, spawn, strlen(spawn), &st);
	assert_int_equal(st.act, GD_ACT_SPAWN);
	gd_step_free(&st);
	gd_dispatch(GD_RUNNING, CHAN_JSON, spawn, strlen(spawn), &st);
	assert_int_equal(st.act, GD_ACT_REPLY);
	assert_non_null(strstr(st.reply, "a command is running on this connection"));
	gd_step_free(&st);
}

static void malformed_json_is_rejected(void **state)
{
	(void)state;
	rejects("", "ends early");
	rejects("{\"v\":1,\"op\":", "ends early");
	rejects("{\"v\":1,\"op\":\"hello\"", "ends early");
	rejects("{\"v\":1,\"op\":\"hello\"} x", "at byte 21");
	rejects("{\"v\":1,\"op\":\"hello\"}{}", "at byte 20");
	rejects("{v:1}", "not valid JSON");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"\xff\xfe\"]}", "not valid JSON");
	rejects("{\"v\":1,\"op\":\"hello\",}", "not valid JSON");
	rejects("[1,2]", "expected a JSON object");
	rejects("\"hello\"", "expected a JSON object");
	rejects("42 ", "expected a JSON object");
	rejects("42", "ends early");
	rejects("null ", "expected a JSON object");
	/* Nesting deeper than any request needs. */
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[[[[[[[\"x\"]]]]]]]}", "not valid JSON");
	{
		struct greq r;
		struct verr e;
		static const char nul[] = "{\"v\":1,\0\"op\":\"hello\"}";

		assert_int_equal(greq_parse(nul, sizeof(nul) - 1, &r, &e), -1);
		assert_non_null(strstr(e.msg, "NUL byte"));
	}
}

static void fields_are_validated(void **state)
{
	(void)state;
	rejects("{\"op\":\"hello\"}", "missing \"v\"");
	rejects("{\"v\":\"1\",\"op\":\"hello\"}", "v: expected an integer");
	rejects("{\"v\":1.0,\"op\":\"hello\"}", "v: expected an integer");
	rejects("{\"v\":3,\"op\":\"hello\"}", "version 3 is not supported");
	rejects("{\"v\":0,\"op\":\"hello\"}", "version 0 is not supported");
	rejects("{\"v\":1}", "missing \"op\"");
	rejects("{\"v\":1,\"op\":7}", "op: expected a string");
	rejects("{\"v\":1,\"op\":\"reboot\"}", "unknown operation 'reboot'");
	rejects("{\"v\":1,\"op\":\"hello\",\"argv\":[\"x\"]}", "hello: unknown field \"argv\"");
	rejects("{\"v\":1,\"op\":\"exec\"}", "missing \"argv\"");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":\"ls\"}", "argv: expected an array");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[]}", "argv: must not be empty");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"\"]}", "argv[0]: the program name is empty");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\",3]}", "argv[1]: expected a string");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\",\"a\\u0000b\"]}", "argv[1]: contains a NUL");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"env\":[\"NOEQUALS\"]}", "env[0]: expected NAME=VALUE");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"env\":[\"=v\"]}", "env[0]: expected NAME=VALUE");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"env\":{\"A\":\"1\"}}", "env: expected an array");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"cwd\":\"tmp\"}", "not an absolute path");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"cwd\":[]}", "cwd: expected a string");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"timeout_ms\":-1}", "timeout_ms: -1 is outside");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"timeout_ms\":1e3}", "timeout_ms: expected an integer");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"timeout_ms\":99999999999999999999999}",
		"timeout_ms");
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\"],\"stdin\":\"x\"}", "stdin: expected true or false");
	rejects("{\"v\":1,\"op\":\"spawn\",\"id\":\"a\",\"argv\":[\"ls\"],\"stdin\":true}", "spawn: unknown field \"stdin\"");
	rejects("{\"v\":1,\"op\":\"signal\"}", "missing \"signal\"");
	rejects("{\"v\":1,\"op\":\"signal\",\"signal\":0}", "signal: 0 is outside");
	rejects("{\"v\":1,\"op\":\"signal\",\"signal\":65}", "signal: 65 is outside");
	rejects("{\"v\":1,\"op\":\"signal\",\"signal\":\"TERM\"}", "signal: expected an integer");
}

static char *exec_with(size_t nargs, size_t arglen)
{
	size_t cap = 64 + nargs * (arglen + 3);
	char *s = malloc(cap), *p = s;

	p += sprintf(p, "{\"v\":1,\"op\":\"exec\",\"argv\":[");
	for (size_t i = 0; i < nargs; i++) {
		*p++ = i ? ',' : ' ';
		*p++ = '"';
		memset(p, 'a', arglen);
		p += arglen;
		*p++ = '"';
	}
	strcpy(p, "]}");
	return s;
}

/* Protocol 2: exec on a pty, and the window-size frame. */
static void pty_requests_parse(void **state)
{
	struct greq r;
	struct verr e;
	unsigned short rows = 0, cols = 0;

	(void)state;
	assert_int_equal(parse("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],"
			       "\"pty\":{\"rows\":30,\"cols\":100,\"term\":\"xterm-256color\"}}", &r, &e), 0);
	assert_true(r.pty);
	assert_int_equal(r.rows, 30);
	assert_int_equal(r.cols, 100);
	assert_string_equal(r.term, "xterm-256color");
	assert_false(r.stdin_pipe);
	greq_free(&r);
	assert_int_equal(parse("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"rows\":1,\"cols\":4096}}", &r, &e), 0);
	assert_string_equal(r.term, "");
	greq_free(&r);
	/* a version-1 request is served as before, and cannot ask for a pty */
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"true\"]}", &r, &e), 0);
	assert_false(r.pty);
	greq_free(&r);
	rejects("{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"rows\":3,\"cols\":3}}",
		"pty: needs protocol version 2");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"stdin\":true,\"pty\":{\"rows\":3,\"cols\":3}}",
		"exclude each other");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":true}", "pty: expected an object");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"cols\":3}}", "missing \"rows\"");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"rows\":3}}", "missing \"cols\"");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"rows\":0,\"cols\":3}}", "pty.rows: 0 is outside 1..4096");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"rows\":3,\"cols\":4097}}", "pty.cols: 4097 is outside");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"rows\":3,\"cols\":3,\"x\":1}}", "pty: unknown field \"x\"");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"rows\":3,\"cols\":3,\"term\":\"x;rm -rf /\"}}",
		"is not a terminal name");
	rejects("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"pty\":{\"rows\":3,\"cols\":3,\"term\":\"\"}}", "pty.term: must be 1..64");
	rejects("{\"v\":2,\"op\":\"spawn\",\"id\":\"a\",\"argv\":[\"sh\"],\"pty\":{\"rows\":3,\"cols\":3}}",
		"spawn: unknown field \"pty\"");
	/* WINSIZE frames: exactly rows and columns, each 1..4096 */
	assert_int_equal(gd_winsize_parse("\x00\x28\x00\x78", 4, &rows, &cols, &e), 0);
	assert_int_equal(rows, 40);
	assert_int_equal(cols, 120);
	assert_int_equal(gd_winsize_parse("\x00\x28\x00", 3, &rows, &cols, &e), -1);
	assert_non_null(strstr(e.msg, "3 bytes, expected 4"));
	assert_int_equal(gd_winsize_parse("\x00\x28\x00\x78\x00", 5, &rows, &cols, &e), -1);
	assert_int_equal(gd_winsize_parse("\x00\x00\x00\x78", 4, &rows, &cols, &e), -1);
	assert_int_equal(gd_winsize_parse("\x10\x01\x00\x78", 4, &rows, &cols, &e), -1);
	assert_non_null(strstr(e.msg, "4097x120 is outside"));
}

static void sizes_are_limited(void **state)
{
	struct greq r;
	struct verr e;
	char *s;

	(void)state;
	/* At the entry limit: fine; one more: rejected. */
	s = exec_with(GD_MAX_ARGS, 1);
	assert_int_equal(parse(s, &r, &e), 0);
	assert_int_equal(r.argc, GD_MAX_ARGS);
	greq_free(&r);
	free(s);
	s = exec_with(GD_MAX_ARGS + 1, 1);
	rejects(s, "entries exceed the limit");
	free(s);
	/* Total bytes. */
	s = exec_with(4, GD_MAX_ARG_BYTES / 4);
	rejects(s, "together exceed");
	free(s);
	/* Whole request. */
	s = malloc(GD_MAX_REQUEST + 2);
	memset(s, ' ', GD_MAX_REQUEST + 1);
	s[GD_MAX_REQUEST + 1] = 0;
	rejects(s, "exceeds the");
	free(s);
}

static void check_json(const char *text, const char *want)
{
	assert_non_null(text);
	if (!strstr(text, want))
		fail_msg("'%s' lacks '%s'", text, want);
	struct json_object *o = json_tokener_parse(text);
	assert_non_null(o);
	json_object_put(o);
}

static void dispatcher_follows_the_state(void **state)
{
	struct gd_step st;
	static const char ex[] = "{\"v\":1,\"op\":\"exec\",\"argv\":[\"true\"]}";
	static const char sig[] = "{\"v\":1,\"op\":\"signal\",\"signal\":2}";

	(void)state;
	gd_dispatch(GD_IDLE, CHAN_JSON, ex, strlen(ex), &st);
	assert_int_equal(st.act, GD_ACT_EXEC);
	assert_string_equal(st.req.argv[0], "true");
	gd_step_free(&st);
	gd_dispatch(GD_RUNNING, CHAN_JSON, ex, strlen(ex), &st);
	assert_int_equal(st.act, GD_ACT_REPLY);
	check_json(st.reply, "already running");
	check_json(st.reply, "\"ok\":false");
	gd_step_free(&st);
	gd_dispatch(GD_IDLE, CHAN_JSON, sig, strlen(sig), &st);
	assert_int_equal(st.act, GD_ACT_REPLY);
	check_json(st.reply, "no command is running");
	gd_step_free(&st);
	gd_dispatch(GD_RUNNING, CHAN_JSON, sig, strlen(sig), &st);
	assert_int_equal(st.act, GD_ACT_SIGNAL);
	assert_int_equal(st.req.sig, 2);
	gd_step_free(&st);
	gd_dispatch(GD_RUNNING, CHAN_JSON, "{\"v\":1,\"op\":\"hello\"}", 20, &st);
	assert_int_equal(st.act, GD_ACT_HELLO);
	gd_step_free(&st);
	gd_dispatch(GD_IDLE, CHAN_STDIN, "data", 4, &st);
	assert_int_equal(st.act, GD_ACT_REPLY);
	check_json(st.reply, "stdin is /dev/null");
	gd_step_free(&st);
	gd_dispatch(GD_IDLE, CHAN_EXIT, "{}", 2, &st);
	assert_int_equal(st.act, GD_ACT_REPLY);
	check_json(st.reply, "unexpected frame type 6");
	gd_step_free(&st);
	gd_dispatch(GD_IDLE, CHAN_JSON, "{\"v\":1,\"op\":", 12, &st);
	assert_int_equal(st.act, GD_ACT_REPLY);
	check_json(st.reply, "not valid JSON");
	assert_non_null(strstr(st.why.msg, "ends early"));
	gd_step_free(&st);
}

static void replies_are_json(void **state)
{
	char *s;

	(void)state;
	/* Error text with quotes and control characters stays valid JSON. */
	s = gd_reply_error("exec", "bad \"thing\"\n\x01 here");
	check_json(s, "\"ok\":false");
	free(s);
	s = gd_exit_json(3 << 8, false);
	assert_string_equal(s, "{\"status\":3}");
	free(s);
	s = gd_exit_json(SIGKILL, false);
	assert_string_equal(s, "{\"signal\":9}");
	free(s);
	s = gd_exit_json(SIGTERM, true);
	assert_string_equal(s, "{\"signal\":15,\"timeout\":true}");
	free(s);
}

static void listen_addresses_parse(void **state)
{
	struct gd_listen l;
	struct verr e;

	(void)state;
	assert_int_equal(gd_listen_parse("127.0.0.1:7707", &l, &e), 0);
	assert_int_equal(l.kind, GD_LISTEN_TCP);
	assert_string_equal(l.host, "127.0.0.1");
	assert_string_equal(l.port, "7707");
	assert_int_equal(gd_listen_parse("*:0", &l, &e), 0);
	assert_string_equal(l.host, "");
	assert_string_equal(l.port, "0");
	assert_int_equal(gd_listen_parse("8000", &l, &e), 0);
	assert_string_equal(l.host, "");
	assert_int_equal(gd_listen_parse("[::1]:99", &l, &e), 0);
	assert_string_equal(l.host, "::1");
	assert_string_equal(l.port, "99");
	assert_int_equal(gd_listen_parse("vsock:5000", &l, &e), 0);
	assert_int_equal(l.kind, GD_LISTEN_VSOCK);
	assert_int_equal(l.vsock_port, 5000);
	assert_int_equal(gd_listen_parse("10.0.0.2", &l, &e), 0);
	assert_string_equal(l.host, "10.0.0.2");
	assert_string_equal(l.port, "7707");
	assert_int_equal(gd_listen_parse("[fd00::2]", &l, &e), 0);
	assert_string_equal(l.host, "fd00::2");
	assert_string_equal(l.port, "7707");
	assert_int_equal(gd_listen_parse("host:70000", &l, &e), -1);
	assert_non_null(strstr(e.msg, "not a number 0..65535"));
	assert_int_equal(gd_listen_parse("::1:80", &l, &e), -1);
	assert_non_null(strstr(e.msg, "[ADDR]:PORT"));
	assert_int_equal(gd_listen_parse("[::1]80", &l, &e), -1);
	assert_int_equal(gd_listen_parse("vsock:x", &l, &e), -1);
	assert_int_equal(gd_listen_parse("a:", &l, &e), -1);
}

static int parse_argv(struct gd_opts *o, struct verr *e, ...)
{
	char *argv[32] = { "vhpc-guestd" };
	int argc = 1;
	va_list ap;

	va_start(ap, e);
	while ((argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	gd_opts_defaults(o);
	return gd_opts_parse(o, argc, argv, e);
}

static void options_parse_and_complain(void **state)
{
	struct gd_opts o;
	struct verr e;

	(void)state;
	assert_int_equal(parse_argv(&o, &e, "--name", "g0", "--listen", "10.0.0.2:7707",
				    "--listen=127.0.0.1:0", "--control", "/run/g.sock", "--key", "/k",
				    "--init", "--max-sessions", "3", "--kill-grace=100", NULL), 0);
	assert_string_equal(o.name, "g0");
	assert_int_equal(o.nlisten, 2);
	assert_string_equal(o.listen[1].host, "127.0.0.1");
	assert_string_equal(o.control, "/run/g.sock");
	assert_string_equal(o.key, "/k");
	assert_true(o.init);
	assert_int_equal(o.max_sessions, 3);
	assert_int_equal(o.grace_ms, 100);
	assert_int_equal(o.handshake_ms, 10000);

	assert_int_equal(parse_argv(&o, &e, "--bogus", NULL), -1);
	assert_non_null(strstr(e.msg, "unknown option '--bogus'"));
	assert_int_equal(parse_argv(&o, &e, "--name", NULL), -1);
	assert_non_null(strstr(e.msg, "needs a value"));
	assert_int_equal(parse_argv(&o, &e, "--init=1", NULL), -1);
	assert_non_null(strstr(e.msg, "takes no value"));
	assert_int_equal(parse_argv(&o, &e, "--max-sessions", "0", NULL), -1);
	assert_non_null(strstr(e.msg, "--max-sessions '0'"));
	assert_int_equal(parse_argv(&o, &e, "--name", "a b", NULL), -1);
	assert_int_equal(parse_argv(&o, &e, "stray", NULL), -1);
	assert_non_null(strstr(e.msg, "unexpected argument 'stray'"));
	assert_int_equal(parse_argv(&o, &e, "--cmdline", "/nonexistent/cmdline", NULL), -1);
	assert_non_null(strstr(e.msg, "/nonexistent/cmdline"));

	/* Nothing to listen on: the default port on every address. */
	assert_int_equal(parse_argv(&o, &e, NULL), 0);
	assert_int_equal(gd_opts_finish(&o, &e), 0);
	assert_int_equal(o.nlisten, 1);
	assert_string_equal(o.listen[0].port, "7707");
	assert_true(o.name[0] != 0);
}

static void kernel_cmdline_sets_options(void **state)
{
	struct gd_opts o;
	struct verr e;

	(void)state;
	gd_opts_defaults(&o);
	assert_int_equal(gd_opts_apply_cmdline(&o, "BOOT_IMAGE=/vmlinuz console=ttyS0 vhpc.name=g1 "
					       "quiet vhpc.listen=0.0.0.0:7707 vhpc.listen=vsock:7707 "
					       "vhpc.key=\"/vhpc/job key\" vhpc.init vhpc.kill-grace=500\n",
					       "/proc/cmdline", &e), 0);
	assert_string_equal(o.name, "g1");
	assert_int_equal(o.nlisten, 2);
	assert_int_equal(o.listen[1].kind, GD_LISTEN_VSOCK);
	assert_string_equal(o.key, "/vhpc/job key");
	assert_true(o.init);
	assert_int_equal(o.grace_ms, 500);

	gd_opts_defaults(&o);
	assert_int_equal(gd_opts_apply_cmdline(&o, "vhpc.colour=blue", "/proc/cmdline", &e), -1);
	assert_non_null(strstr(e.msg, "/proc/cmdline: unknown setting 'vhpc.colour=blue'"));
	assert_int_equal(gd_opts_apply_cmdline(&o, "vhpc.name", "cl", &e), -1);
	assert_non_null(strstr(e.msg, "needs a value"));
	assert_int_equal(gd_opts_apply_cmdline(&o, "vhpc.init=no", "cl", &e), -1);
	assert_int_equal(gd_opts_apply_cmdline(&o, "vhpc.cmdline=/proc/cmdline", "cl", &e), -1);
	assert_int_equal(gd_opts_apply_cmdline(&o, "vhpc.listen=h:99999", "cl", &e), -1);
	assert_non_null(strstr(e.msg, "cl: "));
	/* Words of other programs are left alone. */
	assert_int_equal(gd_opts_apply_cmdline(&o, "vhpcx=1 novhpc.name=x", "cl", &e), 0);
}

static void environment_merges(void **state)
{
	char *base[] = { "PATH=/bin", "HOME=/root", "A=1", NULL };
	char *add[] = { "A=2", "NEW=x", "HOME=/tmp", "NEW=y", NULL };
	char **m = gd_merge_env(base, add);
	size_t n = 0;
	bool path = false, a2 = false, newy = false, home = false;

	(void)state;
	for (; m[n]; n++) {
		path |= !strcmp(m[n], "PATH=/bin");
		a2 |= !strcmp(m[n], "A=2");
		newy |= !strcmp(m[n], "NEW=y");
		home |= !strcmp(m[n], "HOME=/tmp");
		assert_string_not_equal(m[n], "A=1");
		assert_string_not_equal(m[n], "NEW=x");
		assert_string_not_equal(m[n], "HOME=/root");
	}
	assert_int_equal(n, 4);
	assert_true(path && a2 && newy && home);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(valid_requests_parse),
		cmocka_unit_test(detached_requests_parse),
		cmocka_unit_test(malformed_json_is_rejected),
		cmocka_unit_test(fields_are_validated),
		cmocka_unit_test(pty_requests_parse),
		cmocka_unit_test(sizes_are_limited),
		cmocka_unit_test(dispatcher_follows_the_state),
		cmocka_unit_test(replies_are_json),
		cmocka_unit_test(listen_addresses_parse),
		cmocka_unit_test(options_parse_and_complain),
		cmocka_unit_test(kernel_cmdline_sets_options),
		cmocka_unit_test(environment_merges),
	};
	return cmocka_run_group_tests_name("guestd", tests, NULL, NULL);
}
