/*
 * Starting a command for a session.  The command leads a new session (so
 * its process group can be signalled and killed as a whole, and it has no
 * controlling terminal), reads /dev/null, writes to two pipes, and inherits
 * nothing of guestd: signal mask, dispositions and descriptors are reset.
 * A failed chdir or exec is reported through a close-on-exec pipe, so the
 * client gets "cannot execute X: why" instead of a bare 127.
 */
#include "lib/err.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

static size_t name_len(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? (size_t)(eq - kv) : strlen(kv);
}

char **gd_merge_env(char *const *base, char *const *add)
{
	size_t nb = 0, na = 0, n = 0;
	char **out;

	while (base && base[nb])
		nb++;
	while (add && add[na])
		na++;
	out = calloc(nb + na + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < nb; i++) {
		size_t l = name_len(base[i]);
		bool replaced = false;

		for (size_t j = 0; j < na && !replaced; j++)
			replaced = name_len(add[j]) == l && !memcmp(add[j], base[i], l);
		if (!replaced)
			out[n++] = base[i];
	}
	/* Later duplicates in add win, as with env(1). */
	for (size_t j = 0; j < na; j++) {
		size_t l = name_len(add[j]);
		bool later = false;

		for (size_t k = j + 1; k < na && !later; k++)
			later = name_len(add[k]) == l && !memcmp(add[k], add[j], l);
		if (!later)
			out[n++] = add[j];
	}
	return out;
}

/* The directory a command starts in when the request names none: $HOME
 * when it is a directory (as ssh does), else /. */
static const char *default_cwd(char *const *env)
{
	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], "HOME=", 5) && env[i][5] == '/') {
			const char *home = env[i] + 5;

			if (access(home, X_OK) == 0)
				return home;
		}
	return "/";
}

struct exec_failure {
	int err;
	char stage[8];    /* "chdir", "exec", "setup" */
};

/* The pty's slave end, opened in the child after setsid: a session
 * leader's first terminal becomes its controlling one (TIOCSCTTY says so
 * explicitly), so the line discipline's ^C reaches the foreground group. */
static int open_slave(const char *name)
{
	int fd = open(name, O_RDWR);

	if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) < 0)
		return -1;
	return fd;
}

static void __attribute__((noreturn)) child(const struct greq *r, char **envp, int in_r, int out_w,
					     int err_w, int report_w, const char *slave)
{
	struct exec_failure f = { 0, "setup" };
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t none;
	const char *cwd = r->cwd ? r->cwd : default_cwd(envp);
	int null_fd;

	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (setsid() < 0)
		goto fail;
	if (slave && (in_r = out_w = err_w = open_slave(slave)) < 0)
		goto fail;
	null_fd = in_r >= 0 ? in_r : open("/dev/null", O_RDONLY);
	if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
		goto fail;
	/* Everything else closes at exec; the report pipe stays open until then. */
	if (close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) < 0) {
		for (int fd = 3; fd < 1024; fd++)
			if (fd != report_w)
				close(fd);
	}
	snprintf(f.stage, sizeof(f.stage), "chdir");
	if (chdir(cwd) < 0)
		goto fail;
	snprintf(f.stage, sizeof(f.stage), "exec");
	/* execvp looks PATH up in environ, so the request's PATH counts. */
	environ = envp;
	execvp(r->argv[0], r->argv);
fail:
	f.err = errno;
	if (write(report_w, &f, sizeof(f)) < 0)
		_exit(127);
	_exit(127);
}

/* Reads the child's exec report: 0 when it exec'd, -1 (child reaped,
 * err naming the stage) when it could not. */
static int await_exec(pid_t pid, int rep_r, const struct greq *r, struct verr *err)
{
	struct exec_failure f;
	ssize_t n;
	int st;

	do
		n = read(rep_r, &f, sizeof(f));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(f))
		return 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!strcmp(f.stage, "chdir"))
		return verr_set(err, "%s: cannot change to directory '%s': %s", greq_op_name(r->op),
				r->cwd ? r->cwd : "$HOME", strerror(f.err));
	if (!strcmp(f.stage, "exec"))
		return verr_set(err, "%s: cannot execute '%s': %s", greq_op_name(r->op), r->argv[0],
				strerror(f.err));
	return verr_set(err, "%s: setting up the command failed: %s", greq_op_name(r->op), strerror(f.err));
}

static int spawn_pipes(const struct greq *r, struct gd_child *c, struct verr *err)
{
	int out[2] = { -1, -1 }, errp[2] = { -1, -1 }, rep[2] = { -1, -1 }, in[2] = { -1, -1 };
	char **envp;
	pid_t pid;
	int rc;

	envp = gd_merge_env(environ, r->env);
	if (!envp)
		return verr_set(err, "out of memory");
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0 ||
	    (r->stdin_pipe && pipe2(in, O_CLOEXEC) < 0)) {
		verr_errno(err, "pipe");
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		verr_errno(err, "fork");
		goto fail;
	}
	if (pid == 0)
		child(r, envp, in[0], out[1], errp[1], rep[1], NULL);
	free(envp);
	envp = NULL;
	close(out[1]);
	close(errp[1]);
	close(rep[1]);
	if (in[0] >= 0)
		close(in[0]);
	out[1] = errp[1] = rep[1] = in[0] = -1;
	rc = await_exec(pid, rep[0], r, err);
	close(rep[0]);
	rep[0] = -1;
	if (rc < 0)
		goto fail;
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(errp[0], F_SETFL, O_NONBLOCK);
	if (in[1] >= 0)
		fcntl(in[1], F_SETFL, O_NONBLOCK);
	c->pid = pid;
	c->out_fd = out[0];
	c->err_fd = errp[0];
	c->in_fd = in[1];
	return 0;
fail:
	free(envp);
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
		if (rep[i] >= 0)
			close(rep[i]);
	}
	return -1;
}

/* TERM=r->term added to r's environment (the request's own TERM loses). */
static char **pty_env(const struct greq *r, char *term_kv)
{
	char **add = calloc(r->envc + 2, sizeof(*add)), **envp;

	if (!add)
		return NULL;
	for (size_t i = 0; i < r->envc; i++)
		add[i] = r->env[i];
	if (r->term[0]) {
		snprintf(term_kv, GD_TERM_MAX + 6, "TERM=%s", r->term);
		add[r->envc] = term_kv;
	}
	envp = gd_merge_env(environ, add);
	free(add);
	return envp;
}

/* The command on a new pty: stdin, stdout and stderr are its slave, and
 * the session reads and writes the master (out_fd; in_fd a copy, so that
 * a stdin EOF closes only that). */
static int spawn_pty(const struct greq *r, struct gd_child *c, struct verr *err)
{
	struct winsize ws = { .ws_row = r->rows, .ws_col = r->cols };
	char slave[64], term_kv[GD_TERM_MAX + 6];
	int m, rep[2] = { -1, -1 }, in = -1, rc;
	char **envp;
	pid_t pid;

	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return verr_errno(err, "exec: cannot open a pty (is devpts mounted on /dev/pts?)");
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, slave, sizeof(slave)) != 0 ||
	    ioctl(m, TIOCSWINSZ, &ws) < 0) {
		verr_errno(err, "exec: setting up the pty");
		close(m);
		return -1;
	}
	envp = pty_env(r, term_kv);
	if (!envp || pipe2(rep, O_CLOEXEC) < 0 || (in = fcntl(m, F_DUPFD_CLOEXEC, 0)) < 0) {
		verr_errno(err, envp ? "pipe" : "out of memory");
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		verr_errno(err, "fork");
		goto fail;
	}
	if (pid == 0)
		child(r, envp, -1, -1, -1, rep[1], slave);
	free(envp);
	envp = NULL;
	close(rep[1]);
	rep[1] = -1;
	rc = await_exec(pid, rep[0], r, err);
	close(rep[0]);
	rep[0] = -1;
	if (rc < 0)
		goto fail;
	/* one open file description: both ends non-blocking */
	fcntl(m, F_SETFL, O_NONBLOCK);
	c->pid = pid;
	c->out_fd = m;
	c->err_fd = -1;
	c->in_fd = in;
	c->pty = true;
	return 0;
fail:
	free(envp);
	for (int i = 0; i < 2; i++)
		if (rep[i] >= 0)
			close(rep[i]);
	if (in >= 0)
		close(in);
	close(m);
	return -1;
}

int gd_spawn(const struct greq *r, struct gd_child *c, struct verr *err)
{
	c->pty = false;
	return r->pty ? spawn_pty(r, c, err) : spawn_pipes(r, c, err);
}

int gd_spawn_fd(const struct greq *r, int out_fd, pid_t *pid_out, struct verr *err)
{
	int rep[2];
	char **envp = gd_merge_env(environ, r->env);
	pid_t pid;
	int rc;

	if (!envp)
		return verr_set(err, "out of memory");
	if (pipe2(rep, O_CLOEXEC) < 0) {
		free(envp);
		return verr_errno(err, "pipe");
	}
	pid = fork();
	if (pid < 0) {
		verr_errno(err, "fork");
		free(envp);
		close(rep[0]);
		close(rep[1]);
		return -1;
	}
	if (pid == 0)
		child(r, envp, -1, out_fd, out_fd, rep[1], NULL);
	free(envp);
	close(rep[1]);
	rc = await_exec(pid, rep[0], r, err);
	close(rep[0]);
	if (rc == 0)
		*pid_out = pid;
	return rc;
}
