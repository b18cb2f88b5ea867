/*
 * ssh-compatible argument parsing.  OpenSSH's rules, kept here:
 *   - single-letter options, bundled (-xT) and with attached values (-p22);
 *   - options may come before and after the destination, up to the first
 *     word after the destination that is not an option ("--" ends them);
 *   - the remaining words are joined with single spaces, exactly, and that
 *     string is what the remote shell runs (so quoting is the caller's job,
 *     as with ssh).
 */
#include "lib/err.h"
#include "lib/gexec.h"
#include "lib/parse.h"
#include "args.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Options that take a value, and flags, as in OpenSSH 9. */
static const char with_value[] = "BbcDEeFIiJLlmOoPpQRSWw";
static const char flags[] = "46AaCfGgKkMNnqsTtVvXxYy";

void rsh_usage(FILE *f)
{
	fprintf(f,
		"usage: vhpc-rsh [ssh options] HOST|SOCKET COMMAND [ARG...]\n"
		"       vhpc-rsh --hello HOST|SOCKET\n"
		"Runs COMMAND ARG... (joined with spaces, as ssh does) with sh -c in the guest\n"
		"HOST through its vhpc-guestd, relaying stdout, stderr and the exit status\n"
		"(255 when the guest cannot be reached or refuses the job key).\n"
		"HOST may be user@host, ssh://[user@]host[:port], or the path of a guestd\n"
		"control socket.  Key: $VHPC_JOB_KEY, else %s.  Port: -p, else\n"
		"$VHPC_GUEST_PORT, else %d.  Honoured ssh options: -p PORT, -o Port=N,\n"
		"-o ConnectTimeout=S, -v, -q, -V; accepted and ignored: -4 -6 -A -a -C -g -K\n"
		"-k -M -n -T -t -X -x -Y -y -l USER -i FILE -F FILE -o OTHER -c -m -b -B -E -e\n"
		"-I -S -P; refused: -L -R -D -W -w -J -N -f -s -G -O -Q.\n",
		GUEST_KEY_PATH_DEFAULT, GUEST_PORT_DEFAULT);
}

static int parse_port(const char *s, int *port, const char *what, struct verr *err)
{
	long long n;

	if (parse_ll(s, 1, 65535, &n) < 0)
		return verr_set(err, "%s: '%s' is not a port number 1..65535", what, s);
	*port = (int)n;
	return 0;
}

/* -o Key=Value or -o "Key Value". */
static int ssh_option(const char *opt, struct rsh_args *a, struct verr *err)
{
	size_t klen = strcspn(opt, "= \t");
	const char *val = opt + klen;
	long long n;

	val += strspn(val, "= \t");
	if (klen == 4 && !strncasecmp(opt, "Port", 4))
		return parse_port(val, &a->port, "-o Port", err);
	if (klen == 14 && !strncasecmp(opt, "ConnectTimeout", 14)) {
		if (parse_ll(val, 1, 3600, &n) < 0)
			return verr_set(err, "-o ConnectTimeout: '%s' is not a number of seconds 1..3600", val);
		a->connect_timeout_ms = (int)n * 1000;
		return 0;
	}
	if ((klen == 12 && !strncasecmp(opt, "LocalCommand", 12)) ||
	    (klen == 12 && !strncasecmp(opt, "ProxyCommand", 12)) ||
	    (klen == 9 && !strncasecmp(opt, "ProxyJump", 9)))
		return verr_set(err, "-o %.*s is not supported", (int)klen, opt);
	return 0;
}

static int option(char c, const char *val, struct rsh_args *a, struct verr *err)
{
	switch (c) {
	case 'p':
		return parse_port(val, &a->port, "-p", err);
	case 'o':
		return ssh_option(val, a, err);
	case 'v':
		a->verbose++;
		return 0;
	case 'q':
		a->quiet = true;
		return 0;
	case 'V':
		a->version = true;
		return 0;
	case 'L': case 'R': case 'D': case 'W': case 'w':
		return verr_set(err, "-%c: port and stdio forwarding are not supported", c);
	case 'J':
		return verr_set(err, "-J: jump hosts are not supported (guests reach each other directly)");
	case 'N': case 'f':
		return verr_set(err, "-%c: vhpc-rsh always runs a command in the foreground", c);
	case 's':
		return verr_set(err, "-s: subsystems are not supported");
	case 'G': case 'O': case 'Q':
		return verr_set(err, "-%c is not supported", c);
	default:
		return 0;     /* accepted, meaningless here */
	}
}

/* Parses one option word; *i advances past a separate value. */
static int option_word(int argc, char *const *argv, int *i, struct rsh_args *a, struct verr *err)
{
	const char *w = argv[*i];

	for (size_t k = 1; w[k]; k++) {
		char c = w[k];

		if (strchr(with_value, c)) {
			const char *val = w + k + 1;

			if (!*val) {
				if (*i + 1 >= argc)
					return verr_set(err, "option -%c needs a value", c);
				val = argv[++*i];
			}
			return option(c, val, a, err);
		}
		if (!strchr(flags, c))
			return verr_set(err, "unknown option -%c in '%s'", c, w);
		if (option(c, NULL, a, err) < 0)
			return -1;
	}
	return 0;
}

static int destination(const char *d, struct rsh_args *a, struct verr *err)
{
	const char *host = d, *at;
	size_t len;

	if (!*d)
		return verr_set(err, "empty destination");
	if (strchr(d, '/') && strncmp(d, "ssh://", 6)) {
		if (strlen(d) >= sizeof(a->host))
			return verr_set(err, "socket path '%.40s...' is too long", d);
		snprintf(a->host, sizeof(a->host), "%s", d);
		a->is_unix = true;
		return 0;
	}
	if (!strncmp(d, "ssh://", 6)) {
		const char *colon, *end;

		host = d + 6;
		at = strrchr(host, '@');
		if (at)
			host = at + 1;
		end = host + strlen(host);
		if (*host == '[') {
			const char *close = strchr(host, ']');

			if (!close)
				return verr_set(err, "destination '%s': missing ']'", d);
			colon = close[1] == ':' ? close + 1 : NULL;
			if (close[1] && !colon)
				return verr_set(err, "destination '%s': unexpected text after ']'", d);
			len = (size_t)(close - host - 1);
			host++;
		} else {
			colon = strchr(host, ':');
			len = colon ? (size_t)(colon - host) : (size_t)(end - host);
		}
		if (colon && parse_port(colon + 1, &a->port, "destination port", err) < 0)
			return -1;
	} else {
		at = strrchr(d, '@');
		if (at)
			host = at + 1;
		len = strlen(host);
	}
	if (len == 0)
		return verr_set(err, "destination '%s' names no host", d);
	if (len >= sizeof(a->host))
		return verr_set(err, "host name '%.40s...' is too long", host);
	memcpy(a->host, host, len);
	a->host[len] = 0;
	return 0;
}

void rsh_args_free(struct rsh_args *a)
{
	free(a->command);
	a->command = NULL;
}

/* The words from argv[i] on, the destination's command. */
static int join_command(int argc, char *const *argv, int i, struct rsh_args *a, struct verr *err)
{
	size_t total = 0;

	for (int k = i; k < argc; k++)
		total += strlen(argv[k]) + 1;
	if (a->hello) {
		if (i < argc)
			return verr_set(err, "--hello takes no command");
		return 0;
	}
	/* Like ssh, an empty joined string means "no command". */
	if (i >= argc || total <= 1)
		return verr_set(err, "no command given (vhpc-rsh runs commands; it has no interactive shell)");
	a->command = malloc(total);
	if (!a->command)
		return verr_set(err, "out of memory");
	for (char *p = a->command; i < argc; i++) {
		size_t l = strlen(argv[i]);

		memcpy(p, argv[i], l);
		p += l;
		*p++ = i + 1 < argc ? ' ' : 0;
	}
	return 0;
}

int rsh_parse_args(int argc, char *const *argv, struct rsh_args *a, struct verr *err)
{
	bool have_dest = false, ended = false;
	int i;

	memset(a, 0, sizeof(*a));
	for (i = 1; i < argc; i++) {
		const char *w = argv[i];

		if (!ended && !strcmp(w, "--")) {
			ended = true;
			continue;
		}
		if (!ended && !have_dest && !strcmp(w, "--hello")) {
			a->hello = true;
			continue;
		}
		if (!ended && !have_dest && !strcmp(w, "--help")) {
			a->help = true;
			return 0;
		}
		if (!ended && w[0] == '-' && w[1]) {
			if (w[1] == '-')
				return verr_set(err, "unknown option '%s'", w);
			if (option_word(argc, argv, &i, a, err) < 0)
				return -1;
			if (a->version)
				return 0;
			continue;
		}
		if (have_dest)
			break;
		if (destination(w, a, err) < 0)
			return -1;
		have_dest = true;
	}
	if (a->version)
		return 0;
	if (!have_dest)
		return verr_set(err, "no destination given (usage: vhpc-rsh [options] HOST COMMAND...)");
	return join_command(argc, argv, i, a, err);
}
