/*
 * vhpc exec: a command in a running job's guest, as the job's user, in
 * the ranks' folder and environment; its stdout, stderr and exit status
 * come back apart.  --all runs it in every guest at once, each line of
 * output prefixed with its guest.
 */
#include "lib/gexec.h"
#include "lib/parse.h"
#include "cli.h"
#include "client.h"
#include "exec_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char usage[] =
	"usage: vhpc exec JOB [--guest N | --all] [-n] [--] COMMAND [ARG...]\n"
	"Runs COMMAND in guest N (default 0) of running job JOB, as the job's user, in\n"
	"the ranks' working folder and environment.  Its stdout and stderr come back\n"
	"apart, and vhpc exec exits with its exit status (128+N when signal N ended\n"
	"it; 125 when vhpc could not run it).  Ctrl-C and SIGTERM go to the command.\n"
	"  --guest N  the job's guest N (g0, g1, ... as in `vhpc queue`)\n"
	"  --all      every guest at once; each line of output starts with \"gN: \";\n"
	"             exits with the highest exit status of them\n"
	"  -n         stdin is /dev/null (the default with --all); else vhpc exec's own\n"
	"Only the job's owner and root may.  `vhpc shell JOB` gives a terminal.\n";

static volatile int g_cancel;

static void on_signal(int sig)
{
	g_cancel = sig;
}

struct exec_args {
	const char *job;
	int guest;
	bool all, no_stdin;
	char **cmd;
};

static int parse(int argc, char **argv, struct exec_args *a)
{
	long long n;
	int i;

	memset(a, 0, sizeof(*a));
	for (i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "--")) {
			i++;
			break;
		}
		if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
			printf("%s", usage);
			return 1;
		}
		if (!strcmp(s, "--all"))
			a->all = true;
		else if (!strcmp(s, "-n"))
			a->no_stdin = true;
		else if (!strcmp(s, "--guest")) {
			if (i + 1 >= argc || parse_ll(argv[i + 1], 0, 4095, &n) < 0)
				return usage_error("exec", "--guest: expected a guest number (0..4095)");
			a->guest = (int)n;
			i++;
		} else if (s[0] == '-' && s[1])
			return usage_error("exec", "unknown option '%s' (the command goes after --)", s);
		else if (!a->job)
			a->job = s;
		else
			break;
	}
	if (!a->job)
		return usage_error("exec", "which job? (vhpc exec JOB -- COMMAND)");
	if (i >= argc || !argv[i][0])
		return usage_error("exec", "no command to run (vhpc exec %s -- COMMAND)", a->job);
	if (a->all && a->guest)
		return usage_error("exec", "--guest and --all exclude each other");
	a->cmd = argv + i;
	return 0;
}

/* The command in one guest, output to out and err; its exit status, or
 * EXIT_VHPC after saying why. */
static int run_one(const char *ctl, int64_t id, int guest, char **cmd, int out, int err, bool in)
{
	struct exec_stream x;
	struct gexec_req r = { 0 };
	struct verr e;
	int st = EXIT_VHPC, rc;

	if (exec_stream_open(ctl, id, guest, &x, &e) < 0) {
		fprintf(stderr, "vhpc exec: job %lld g%d: %s\n", (long long)id, guest, e.msg);
		return EXIT_VHPC;
	}
	r.argv = (const char *const *)cmd;
	r.env = (const char *const *)x.env;
	r.cwd = x.cwd;
	r.out_fd = out;
	r.err_fd = err;
	r.send_stdin = in;
	r.in_fd = in ? 0 : -1;
	r.cancel = &g_cancel;
	rc = gexec_run(&x.c, &r, &st, &e);
	if (rc < 0) {
		fprintf(stderr, "vhpc exec: job %lld g%d: %s\n", (long long)id, guest, e.msg);
		st = EXIT_VHPC;
	}
	exec_stream_close(&x);
	return st;
}

#define LINE_MAX_HELD (1u << 20)

/* What a guest's pipe gave: whole lines, each after its prefix. */
struct lines {
	int fd, to;
	char pfx[16];
	char *buf;
	size_t len;
};

static void put(int to, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(to, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void emit(struct lines *l, bool all)
{
	size_t start = 0;

	for (size_t i = 0; i < l->len; i++)
		if (l->buf[i] == '\n' || (all && i + 1 == l->len)) {
			put(l->to, l->pfx, strlen(l->pfx));
			put(l->to, l->buf + start, i + 1 - start);
			if (l->buf[i] != '\n')
				put(l->to, "\n", 1);
			start = i + 1;
		}
	memmove(l->buf, l->buf + start, l->len - start);
	l->len -= start;
}

static int run_all(const char *ctl, int64_t id, char **cmd)
{
	struct lines *ls;
	pid_t *pids;
	struct verr e;
	int n, worst = 0, open = 0;

	if (exec_job_guests(ctl, id, &n, &e) < 0) {
		fprintf(stderr, "vhpc exec: %s\n", e.msg);
		return EXIT_VHPC;
	}
	ls = calloc(2 * (size_t)n, sizeof(*ls));
	pids = calloc((size_t)n, sizeof(*pids));
	if (!ls || !pids) {
		fprintf(stderr, "vhpc exec: out of memory\n");
		return EXIT_VHPC;
	}
	for (int g = 0; g < n; g++) {
		int po[2], pe[2];

		if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
			fprintf(stderr, "vhpc exec: pipe: %s\n", strerror(errno));
			return EXIT_VHPC;
		}
		pids[g] = fork();
		if (pids[g] == 0) {
			close(po[0]);
			close(pe[0]);
			/* A guest's complaints go through its prefix too. */
			dup2(pe[1], 2);
			_exit(run_one(ctl, id, g, cmd, po[1], pe[1], false));
		}
		close(po[1]);
		close(pe[1]);
		ls[2 * g] = (struct lines){ .fd = po[0], .to = 1 };
		ls[2 * g + 1] = (struct lines){ .fd = pe[0], .to = 2 };
		snprintf(ls[2 * g].pfx, sizeof(ls[0].pfx), "g%d: ", g);
		snprintf(ls[2 * g + 1].pfx, sizeof(ls[0].pfx), "g%d: ", g);
		open += 2;
	}
	while (open > 0) {
		struct pollfd *p = calloc(2 * (size_t)n, sizeof(*p));

		if (!p)
			break;
		for (int i = 0; i < 2 * n; i++)
			p[i] = (struct pollfd){ .fd = ls[i].fd, .events = POLLIN };
		if (poll(p, (nfds_t)(2 * n), -1) < 0 && errno != EINTR) {
			free(p);
			break;
		}
		for (int i = 0; i < 2 * n; i++) {
			char chunk[65536];
			ssize_t r;
			char *nb;

			if (ls[i].fd < 0 || !p[i].revents)
				continue;
			r = read(ls[i].fd, chunk, sizeof(chunk));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				emit(&ls[i], true);
				close(ls[i].fd);
				ls[i].fd = -1;
				open--;
				continue;
			}
			nb = realloc(ls[i].buf, ls[i].len + (size_t)r);
			if (!nb)
				continue;
			ls[i].buf = nb;
			memcpy(ls[i].buf + ls[i].len, chunk, (size_t)r);
			ls[i].len += (size_t)r;
			/* a line without end is cut where it gets long, not held whole */
			emit(&ls[i], ls[i].len > LINE_MAX_HELD);
		}
		free(p);
	}
	for (int g = 0; g < n; g++) {
		int st;

		while (waitpid(pids[g], &st, 0) < 0 && errno == EINTR)
			;
		st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (st > worst)
			worst = st;
	}
	for (int i = 0; i < 2 * n; i++)
		free(ls[i].buf);
	free(ls);
	free(pids);
	return worst;
}

int cmd_exec(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct exec_args a;
	char ctl[300];
	int64_t id;
	int r;

	if ((r = parse(argc, argv, &a)))
		return r == 1 ? 0 : r;
	if ((r = client_job_id("exec", a.job, &id)) || (r = client_need_controller("exec", ctl, sizeof(ctl))))
		return r;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (a.all)
		return run_all(ctl, id, a.cmd);
	return run_one(ctl, id, a.guest, a.cmd, 1, 2, !a.no_stdin);
}
