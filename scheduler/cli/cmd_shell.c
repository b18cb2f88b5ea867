/*
 * vhpc shell: an interactive shell on a pty in a running job's guest.
 * The local terminal goes raw, so every key (Ctrl-C too) reaches the
 * guest's pty, whose line discipline turns it into the signal for the
 * foreground process there; window-size changes follow (SIGWINCH).
 * Leaving the shell ends only the shell: the job runs on.
 */
#include "lib/gexec.h"
#include "lib/parse.h"
#include "cli.h"
#include "client.h"
#include "exec_stream.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static const char usage[] =
	"usage: vhpc shell JOB [--guest N]\n"
	"An interactive shell (bash if the image has it, else sh) on a terminal in\n"
	"guest N (default 0) of running job JOB, as the job's user, in the ranks'\n"
	"working folder and environment.  Needs a terminal; `vhpc exec` runs single\n"
	"commands.  Exits with the shell's exit status; the job is left as it was.\n";

static volatile int g_resized, g_cancel;

static void on_winch(int sig)
{
	(void)sig;
	g_resized = 1;
}

static void on_term(int sig)
{
	(void)sig;
	g_cancel = SIGHUP;   /* the terminal is going: the shell hangs up */
}

/* The shell's TERM: the local one when it is a plain terminfo name. */
static const char *term_name(void)
{
	const char *t = getenv("TERM");

	if (!t || !*t || strlen(t) > 64 || strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") != strlen(t))
		return NULL;
	return t;
}

int cmd_shell(int argc, char **argv)
{
	static const char *const sh[] = {
		"/bin/sh", "-c", "if [ -x /bin/bash ]; then exec /bin/bash -i; fi; exec /bin/sh -i", NULL
	};
	struct sigaction sa = { .sa_handler = on_winch };
	struct exec_stream x;
	struct gexec_req r = { 0 };
	struct termios saved, raw;
	struct winsize ws = { 0 };
	const char *job = NULL;
	long long n = 0;
	char ctl[300];
	struct verr e;
	int64_t id;
	int rc, st = EXIT_VHPC;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("%s", usage);
			return 0;
		}
		if (!strcmp(argv[i], "--guest")) {
			if (i + 1 >= argc || parse_ll(argv[i + 1], 0, 4095, &n) < 0)
				return usage_error("shell", "--guest: expected a guest number (0..4095)");
			i++;
		} else if (argv[i][0] == '-' || job) {
			return usage_error("shell", "unexpected '%s' (vhpc shell JOB [--guest N])", argv[i]);
		} else {
			job = argv[i];
		}
	}
	if (!job)
		return usage_error("shell", "which job? (vhpc shell JOB)");
	if ((rc = client_job_id("shell", job, &id)) || (rc = client_need_controller("shell", ctl, sizeof(ctl))))
		return rc;
	/* The controller first: who may not gets `denied`, terminal or not. */
	if (exec_stream_open(ctl, id, (int)n, &x, &e) < 0) {
		fprintf(stderr, "vhpc shell: job %lld g%lld: %s\n", (long long)id, n, e.msg);
		return EXIT_VHPC;
	}
	if (!isatty(0) || tcgetattr(0, &saved) < 0) {
		exec_stream_close(&x);
		fprintf(stderr, "vhpc shell: stdin is not a terminal; use vhpc exec %s -- COMMAND\n", job);
		return EXIT_USAGE;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGWINCH, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	ioctl(0, TIOCGWINSZ, &ws);
	r.argv = sh;
	r.env = (const char *const *)x.env;
	r.cwd = x.cwd;
	r.out_fd = 1;
	r.err_fd = 2;
	r.in_fd = 0;
	r.pty = true;
	r.rows = ws.ws_row ? ws.ws_row : 24;
	r.cols = ws.ws_col ? ws.ws_col : 80;
	r.term = term_name();
	r.tty_fd = 0;
	r.resized = &g_resized;
	r.cancel = &g_cancel;
	raw = saved;
	cfmakeraw(&raw);
	tcsetattr(0, TCSADRAIN, &raw);
	rc = gexec_run(&x.c, &r, &st, &e);
	tcsetattr(0, TCSADRAIN, &saved);
	if (rc < 0) {
		fprintf(stderr, "vhpc shell: job %lld g%lld: %s\n", (long long)id, n, e.msg);
		st = EXIT_VHPC;
	}
	exec_stream_close(&x);
	return st;
}
