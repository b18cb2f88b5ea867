/*
 * vhpc-guestd's request handling under hostile input.  The input is read as
 * a sequence of frames (type byte, 16-bit length, payload) fed through the
 * dispatcher with the session's state machine (an accepted exec makes the
 * session "running" until a made-up frame type 0xee says the command ended),
 * plus the whole input as one JSON request, as a window-size frame and as
 * a kernel command line.
 * Every reply must be valid JSON and every accepted request must satisfy
 * the limits the parser promises.
 */
#include "lib/err.h"
#include "lib/parse.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_req(const struct greq *r)
{
	size_t bytes = 0;

	switch (r->op) {
	case GREQ_EXEC:
		if (!r->argv || r->argc == 0 || r->argc > GD_MAX_ARGS || !r->argv[0][0] ||
		    r->argv[r->argc] != NULL)
			abort();
		for (size_t i = 0; i < r->argc; i++)
			bytes += strlen(r->argv[i]) + 1;
		for (size_t i = 0; i < r->envc; i++) {
			const char *eq = strchr(r->env[i], '=');

			if (!eq || eq == r->env[i])
				abort();
			bytes += strlen(r->env[i]) + 1;
		}
		if (r->cwd && r->cwd[0] != '/')
			abort();
		if (bytes > GD_MAX_ARG_BYTES || r->timeout_ms < 0 || r->timeout_ms > GD_MAX_TIMEOUT_MS)
			abort();
		/* a pty has a size, a plain TERM, and no stdin pipe besides */
		if (r->pty && (r->rows < 1 || r->rows > GD_PTY_MAX_DIM || r->cols < 1 || r->cols > GD_PTY_MAX_DIM ||
			       r->stdin_pipe || strlen(r->term) > GD_TERM_MAX || strpbrk(r->term, "=/ ;\n")))
			abort();
		if (!r->pty && (r->rows || r->cols || r->term[0]))
			abort();
		break;
	case GREQ_SIGNAL:
		if (r->sig < 1 || r->sig > SIGRTMAX)
			abort();
		break;
	case GREQ_SPAWN:
		if (!r->argv || r->argc == 0 || !r->argv[0][0] || r->argv[r->argc] != NULL)
			abort();
		/* fall through */
	case GREQ_STATUS:
	case GREQ_WAIT:
	case GREQ_KILL:
		if (!ident_ok(r->id, GD_ID_MAX) || strchr(r->id, '.') || strchr(r->id, '/'))
			abort();
		if (r->wait_ms < 0 || r->wait_ms > GD_MAX_WAIT_MS)
			abort();
		if (r->op == GREQ_KILL && (r->sig < 1 || r->sig > SIGRTMAX))
			abort();
		break;
	case GREQ_HELLO:
	case GREQ_SHUTDOWN:
		break;
	default:
		abort();
	}
}

static void step(enum gd_state *st, uint8_t type, const char *buf, size_t len)
{
	struct gd_step s;

	if (type == 0xee) {
		*st = GD_IDLE;
		return;
	}
	gd_dispatch(*st, type, buf, len, &s);
	if (s.act == GD_ACT_REPLY) {
		struct json_object *o = json_tokener_parse(s.reply);

		if (!o || !s.why.msg[0])
			abort();
		json_object_put(o);
	} else {
		check_req(&s.req);
		if (s.act == GD_ACT_EXEC) {
			if (*st != GD_IDLE)
				abort();
			*st = GD_RUNNING;
		}
		if (s.act == GD_ACT_SIGNAL && *st != GD_RUNNING)
			abort();
		if ((s.act == GD_ACT_SPAWN || s.act == GD_ACT_STATUS || s.act == GD_ACT_KILL) &&
		    *st != GD_IDLE)
			abort();
	}
	gd_step_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum gd_state st = GD_IDLE;
	struct greq r;
	struct verr e;
	size_t off = 0;
	char *copy;

	if (size > GD_MAX_REQUEST + 16)
		return 0;
	/* The whole input as one request. */
	if (greq_parse((const char *)data, size, &r, &e) == 0) {
		check_req(&r);
		greq_free(&r);
	}
	/* As a WINSIZE frame's payload. */
	{
		unsigned short rows = 0, cols = 0;

		if (gd_winsize_parse((const char *)data, size, &rows, &cols, &e) == 0 &&
		    (size != 4 || rows < 1 || rows > GD_PTY_MAX_DIM || cols < 1 || cols > GD_PTY_MAX_DIM))
			abort();
	}
	/* As a sequence of frames. */
	while (off + 3 <= size) {
		uint8_t type = data[off];
		size_t len = (size_t)data[off + 1] << 8 | data[off + 2];

		off += 3;
		if (len > size - off)
			len = size - off;
		/* Payloads arrive NUL-terminated from chan_recv. */
		copy = malloc(len + 1);
		memcpy(copy, data + off, len);
		copy[len] = 0;
		step(&st, type, copy, len);
		free(copy);
		off += len;
	}
	/* As a kernel command line. */
	copy = malloc(size + 1);
	memcpy(copy, data, size);
	copy[size] = 0;
	{
		struct gd_opts o;

		gd_opts_defaults(&o);
		if (gd_opts_apply_cmdline(&o, copy, "fuzz", &e) == 0 && o.nlisten > GD_MAX_LISTEN)
			abort();
	}
	free(copy);
	return 0;
}
