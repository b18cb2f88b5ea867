/*
 * Options of vhpc-guestd.  One table serves both the command line
 * (--name NAME, --name=NAME) and a kernel command line (vhpc.name=NAME),
 * because inside a VM guestd is started from an initramfs and finds its
 * settings in /proc/cmdline: dotted words there are module parameters to
 * the kernel and never reach init's argv.
 */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/gexec.h"
#include "lib/parse.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct opt {
	const char *name;
	bool has_arg;
	const char *arg;
	const char *help;
};

static const struct opt opts[] = {
	{ "name", true, "NAME", "guest name for logs and hello (default: the hostname)" },
	{ "listen", true, "ADDR:PORT", "listener, repeatable: ADDR[:PORT], :PORT, [V6]:PORT, vsock:PORT\n                               (port 7707 unless given; 0 picks a free one)" },
	{ "control", true, "PATH", "unix socket (mode 0600) for the node agent" },
	{ "key", true, "FILE", "per-job key, 64 hex digits, mode 0600 (default " GUEST_KEY_PATH_DEFAULT ")" },
	{ "log", true, "FILE", "append log lines here instead of stderr" },
	{ "stdio", true, "FILE", "stdin from /dev/null, stdout and stderr appended to FILE, both opened here\n                               (a container guest's own files, which a checkpoint can save)" },
	{ "init", false, NULL, "act as a container's PID 1: reap orphans, forward SIGTERM, exit cleanly" },
	{ "max-sessions", true, "N", "connections served at once; more wait in the backlog (default 64)" },
	{ "handshake-timeout", true, "MS", "time a new connection has to authenticate (default 10000)" },
	{ "kill-grace", true, "MS", "SIGTERM to SIGKILL delay when a command must stop (default 2000)" },
	{ "cmdline", true, "FILE", "apply vhpc.OPTION=VALUE words from FILE (e.g. /proc/cmdline)" },
	{ "spool", true, "DIR", "directory for detached commands' output and state (spawn)" },
	{ NULL, false, NULL, NULL },
};

void gd_usage(FILE *f)
{
	fprintf(f, "usage: vhpc-guestd [OPTION]...\n"
		"Serves command execution for the vhpc launcher inside a guest over an\n"
		"authenticated channel (per-job key); see guest/PROTOCOL.md.\n\n");
	for (const struct opt *p = opts; p->name; p++) {
		char lhs[48];

		snprintf(lhs, sizeof(lhs), "--%s%s%s", p->name, p->arg ? " " : "", p->arg ? p->arg : "");
		fprintf(f, "  %-28s %s\n", lhs, p->help);
	}
	fprintf(f, "  %-28s %s\n  %-28s %s\n", "--help", "this text", "--version", "print the version");
}

void gd_opts_defaults(struct gd_opts *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->key, sizeof(o->key), "%s", GUEST_KEY_PATH_DEFAULT);
	o->max_sessions = 64;
	o->handshake_ms = 10000;
	o->grace_ms = 2000;
}

int gd_listen_parse(const char *spec, struct gd_listen *l, struct verr *err)
{
	const char *colon, *port;
	char default_port[8];
	long long n;
	size_t hlen;

	snprintf(default_port, sizeof(default_port), "%d", GUEST_PORT_DEFAULT);

	memset(l, 0, sizeof(*l));
	if (strlen(spec) >= sizeof(l->spec))
		return verr_set(err, "listen address '%.40s...' is too long", spec);
	snprintf(l->spec, sizeof(l->spec), "%s", spec);
	if (!strncmp(spec, "vsock:", 6)) {
		if (parse_ll(spec + 6, 1, 0xfffffffeLL, &n) < 0)
			return verr_set(err, "listen address '%s': expected vsock:PORT with PORT 1..4294967294", spec);
		l->kind = GD_LISTEN_VSOCK;
		l->vsock_port = (unsigned)n;
		return 0;
	}
	l->kind = GD_LISTEN_TCP;
	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || (close[1] != ':' && close[1] != 0))
			return verr_set(err, "listen address '%s': expected [IPV6]:PORT", spec);
		hlen = (size_t)(close - spec - 1);
		if (hlen == 0 || hlen >= sizeof(l->host))
			return verr_set(err, "listen address '%s': bad IPv6 address", spec);
		memcpy(l->host, spec + 1, hlen);
		port = close[1] ? close + 2 : default_port;
	} else {
		colon = strrchr(spec, ':');
		if (!colon && parse_ll(spec, 0, 65535, &n) == 0) {
			/* A bare number is a port on every address. */
			port = spec;
			hlen = 0;
		} else if (!colon) {
			/* A bare address gets the default port. */
			port = default_port;
			hlen = strlen(spec);
		} else {
			hlen = (size_t)(colon - spec);
			port = colon + 1;
			if (memchr(spec, ':', hlen))
				return verr_set(err, "listen address '%s': write IPv6 addresses as [ADDR]:PORT", spec);
		}
		if (hlen >= sizeof(l->host))
			return verr_set(err, "listen address '%s': host part is too long", spec);
		memcpy(l->host, spec, hlen);
		if (!strcmp(l->host, "*"))
			l->host[0] = 0;
	}
	if (parse_ll(port, 0, 65535, &n) < 0)
		return verr_set(err, "listen address '%s': port '%s' is not a number 0..65535", spec, port);
	snprintf(l->port, sizeof(l->port), "%lld", n);
	return 0;
}

/* vhpc.* words the kvm guest's initramfs /init acts on before guestd starts
 * (guest/initramfs/init): known, so not errors, and not guestd's. */
static const char *const init_keys[] = { "addr", "mtu", "job", "index", "scratch", "rootfs", NULL };

static bool init_key(const char *name, size_t len)
{
	for (const char *const *k = init_keys; *k; k++)
		if (strlen(*k) == len && !memcmp(*k, name, len))
			return true;
	return false;
}

static const struct opt *find_opt(const char *name, size_t len)
{
	for (const struct opt *p = opts; p->name; p++)
		if (strlen(p->name) == len && !memcmp(p->name, name, len))
			return p;
	return NULL;
}

static int copy_str(char *dst, size_t size, const char *name, const char *val, struct verr *err)
{
	if (!*val)
		return verr_set(err, "--%s: empty value", name);
	if (strlen(val) >= size)
		return verr_set(err, "--%s: value is longer than %zu characters", name, size - 1);
	snprintf(dst, size, "%s", val);
	return 0;
}

static int set_opt(struct gd_opts *o, const struct opt *p, const char *val, int depth,
		   struct verr *err)
{
	const char *n = p->name;

	if (!strcmp(n, "name"))
		return ident_ok(val, sizeof(o->name) - 1) ? copy_str(o->name, sizeof(o->name), n, val, err)
			: verr_set(err, "--name '%s': expected letters, digits, '.', '_' or '-' (at most %zu)",
				   val, sizeof(o->name) - 1);
	if (!strcmp(n, "listen")) {
		if (o->nlisten >= GD_MAX_LISTEN)
			return verr_set(err, "--listen: at most %d listeners", GD_MAX_LISTEN);
		if (gd_listen_parse(val, &o->listen[o->nlisten], err) < 0)
			return -1;
		o->nlisten++;
		return 0;
	}
	if (!strcmp(n, "control"))
		return copy_str(o->control, sizeof(o->control), n, val, err);
	if (!strcmp(n, "key"))
		return copy_str(o->key, sizeof(o->key), n, val, err);
	if (!strcmp(n, "log"))
		return copy_str(o->log, sizeof(o->log), n, val, err);
	if (!strcmp(n, "stdio")) {
		if (val[0] != '/')
			return verr_set(err, "--stdio '%s': expected an absolute path", val);
		return copy_str(o->stdio, sizeof(o->stdio), n, val, err);
	}
	if (!strcmp(n, "spool")) {
		if (val[0] != '/')
			return verr_set(err, "--spool '%s': expected an absolute path", val);
		return copy_str(o->spool, sizeof(o->spool) - GD_ID_MAX - 8, n, val, err);
	}
	if (!strcmp(n, "init")) {
		o->init = true;
		return 0;
	}
	if (!strcmp(n, "max-sessions"))
		return parse_ll(val, 1, 4096, &o->max_sessions) < 0
			? verr_set(err, "--max-sessions '%s': expected a number 1..4096", val) : 0;
	if (!strcmp(n, "handshake-timeout"))
		return parse_ll(val, 1, 600000, &o->handshake_ms) < 0
			? verr_set(err, "--handshake-timeout '%s': expected milliseconds 1..600000", val) : 0;
	if (!strcmp(n, "kill-grace"))
		return parse_ll(val, 0, 600000, &o->grace_ms) < 0
			? verr_set(err, "--kill-grace '%s': expected milliseconds 0..600000", val) : 0;
	if (!strcmp(n, "cmdline")) {
		char *text;
		size_t len;
		int r;

		if (depth > 0)
			return verr_set(err, "vhpc.cmdline cannot appear on a kernel command line");
		if (read_file(val, &text, &len, 64 * 1024, err) < 0)
			return verr_wrap(err, "--cmdline");
		r = gd_opts_apply_cmdline(o, text, val, err);
		free(text);
		return r;
	}
	return verr_set(err, "internal: option --%s has no handler", n);
}

int gd_opts_parse(struct gd_opts *o, int argc, char **argv, struct verr *err)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *val = NULL;
		const struct opt *p;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			gd_usage(stdout);
			return 1;
		}
		if (!strcmp(a, "--version")) {
			printf("vhpc-guestd %s (protocol %d)\n", VHPC_VERSION, GD_PROTO_VERSION);
			return 1;
		}
		if (strncmp(a, "--", 2) || !a[2])
			return verr_set(err, "unexpected argument '%s' (see --help)", a);
		eq = strchr(a + 2, '=');
		p = find_opt(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
		if (!p)
			return verr_set(err, "unknown option '%s' (see --help)", a);
		if (p->has_arg) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return verr_set(err, "option --%s needs a value (%s)", p->name, p->arg);
		} else if (eq) {
			return verr_set(err, "option --%s takes no value", p->name);
		}
		if (set_opt(o, p, val, 0, err) < 0)
			return -1;
	}
	return 0;
}

/* Next word of a kernel command line: spaces separate words, double quotes
 * group (the kernel's own rule, so vhpc.x="a b" is one word). */
static const char *next_word(const char *s, char *word, size_t size, bool *too_long)
{
	size_t n = 0;
	bool quoted = false;

	*too_long = false;
	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	if (!*s)
		return NULL;
	for (; *s && (quoted || (*s != ' ' && *s != '\t' && *s != '\n')); s++) {
		if (*s == '"') {
			quoted = !quoted;
			continue;
		}
		if (n + 1 < size)
			word[n++] = *s;
		else
			*too_long = true;
	}
	word[n] = 0;
	return s;
}

int gd_opts_apply_cmdline(struct gd_opts *o, const char *text, const char *where,
			  struct verr *err)
{
	char word[512];
	bool too_long;
	const char *s = text;

	while ((s = next_word(s, word, sizeof(word), &too_long))) {
		const char *key, *eq, *val;
		const struct opt *p;

		if (strlen(word) < 5 || memcmp(word, "vhpc.", 5) != 0)
			continue;
		if (too_long)
			return verr_set(err, "%s: '%.40s...' is longer than %zu characters", where, word,
					sizeof(word) - 1);
		key = word + 5;
		eq = strchr(key, '=');
		p = find_opt(key, eq ? (size_t)(eq - key) : strlen(key));
		if (!p && init_key(key, eq ? (size_t)(eq - key) : strlen(key)))
			continue;
		if (!p)
			return verr_set(err, "%s: unknown setting '%s'", where, word);
		if (p->has_arg && !eq)
			return verr_set(err, "%s: '%s' needs a value (vhpc.%s=%s)", where, word, p->name, p->arg);
		val = eq ? eq + 1 : NULL;
		if (!p->has_arg && val && strcmp(val, "1") && strcmp(val, "true") && strcmp(val, "yes"))
			return verr_set(err, "%s: '%s': vhpc.%s is a flag (give it alone or =1)", where, word,
					p->name);
		if (set_opt(o, p, val, 1, err) < 0)
			return verr_wrap(err, "%s", where);
	}
	return 0;
}

int gd_opts_finish(struct gd_opts *o, struct verr *err)
{
	if (o->nlisten == 0 && !o->control[0]) {
		char spec[32];

		snprintf(spec, sizeof(spec), "0.0.0.0:%d", GUEST_PORT_DEFAULT);
		if (gd_listen_parse(spec, &o->listen[0], err) < 0)
			return -1;
		o->nlisten = 1;
	}
	if (!o->name[0]) {
		char h[64];

		if (gethostname(h, sizeof(h)) == 0 && ident_ok(h, sizeof(o->name) - 1))
			snprintf(o->name, sizeof(o->name), "%s", h);
		else
			snprintf(o->name, sizeof(o->name), "guest");
	}
	return 0;
}
