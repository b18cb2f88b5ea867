#include "lib/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog_name = "vhpc";
static enum vlog_level cur_level = VLOG_INFO;
static const char *const level_names[] = { "error", "warning", "info", "debug" };

void vlog_init(const char *prog)
{
	const char *env = getenv("VHPC_LOG");
	const char *slash;

	if (prog) {
		slash = strrchr(prog, '/');
		prog_name = slash ? slash + 1 : prog;
	}
	if (!env)
		return;
	if (!strcmp(env, "err") || !strcmp(env, "error"))
		cur_level = VLOG_ERR;
	else if (!strcmp(env, "warn") || !strcmp(env, "warning"))
		cur_level = VLOG_WARN;
	else if (!strcmp(env, "info"))
		cur_level = VLOG_INFO;
	else if (!strcmp(env, "debug"))
		cur_level = VLOG_DEBUG;
}

void vlog_set_level(enum vlog_level lvl) { cur_level = lvl; }
enum vlog_level vlog_get_level(void) { return cur_level; }

void vlogv(enum vlog_level lvl, const char *fmt, va_list ap)
{
	char line[2048];
	int n;

	if (lvl > cur_level)
		return;
	/* One write per line so lines from concurrent processes do not mix. */
	if (cur_level >= VLOG_DEBUG) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		n = snprintf(line, sizeof(line), "%ld.%03ld %s[%d]: %s: ",
			     (long)ts.tv_sec, ts.tv_nsec / 1000000, prog_name,
			     (int)getpid(), level_names[lvl]);
	} else {
		n = snprintf(line, sizeof(line), "%s: %s%s", prog_name,
			     lvl == VLOG_INFO ? "" : level_names[lvl],
			     lvl == VLOG_INFO ? "" : ": ");
	}
	if (n < 0)
		return;
	if ((size_t)n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if ((size_t)n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

void vlog(enum vlog_level lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlogv(lvl, fmt, ap);
	va_end(ap);
}
