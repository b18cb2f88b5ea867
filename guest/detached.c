/*
 * Detached commands: started by one connection, they outlive it.  A job's
 * mpirun must survive the death of whoever launched it (a node agent that
 * is killed and restarted re-attaches later), which exec cannot give: there
 * a command's lifetime is its connection's.
 *
 * Each command runs under a keeper process (forked by the session that got
 * the spawn request, in a process group of its own, so nothing aimed at the
 * session hits it).  The keeper starts the command in a new session with
 * stdout and stderr appended to <spool>/<id>.out, waits for it, enforces
 * its timeout, stops it on SIGTERM (guestd stopping), stops whatever it left
 * in its process group, and records the outcome in <spool>/<id>.state
 * (JSON, replaced atomically).  Clients ask for that state (status, wait)
 * and signal the command (kill) from any later connection.
 */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sodium.h>
#include <unistd.h>

#define STATE_MAX 4096

static void spool_path(const struct gd_opts *o, const char *id, const char *ext, char *buf,
		       size_t len)
{
	snprintf(buf, len, "%s/%s.%s", o->spool, id, ext);
}

static int need_spool(const struct gd_opts *o, const char *op, struct verr *err)
{
	if (!o->spool[0])
		return verr_set(err, "%s: this guestd has no --spool directory for detached commands", op);
	return 0;
}

/* A process that exists and is not a zombie. */
static bool proc_alive(pid_t pid)
{
	char path[64], *buf, *p;
	size_t len;
	struct verr e;
	bool alive;

	if (pid <= 0 || kill(pid, 0) < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, &buf, &len, 4096, &e) < 0)
		return true;
	p = strrchr(buf, ')');
	alive = !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
	free(buf);
	return alive;
}

static int write_state(const struct gd_opts *o, const char *id, struct json_object *st,
		       struct verr *err)
{
	char path[512];
	const char *text = json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN);

	spool_path(o, id, "state", path, sizeof(path));
	return write_file_atomic(path, text, strlen(text), 0600, err);
}

struct spawn_result {
	int ok;
	pid_t pid;
	char msg[512];
};

/* Stops a process group: SIGTERM, then SIGKILL after the grace period,
 * until no member is left (or a hard limit passes). */
static void stop_group(pid_t pgid, long long grace_ms)
{
	uint64_t kill_at = now_ns() + (uint64_t)grace_ms * 1000000ull;
	uint64_t give_up = kill_at + 3000000000ull;
	bool killed = false;

	if (kill(-pgid, SIGTERM) < 0)
		return;
	while (kill(-pgid, 0) == 0 && now_ns() < give_up) {
		if (!killed && now_ns() >= kill_at) {
			kill(-pgid, SIGKILL);
			killed = true;
		}
		/* Members are our children only while the command lives. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		usleep(10000);
	}
}

/* Closes every descriptor above 2 but a and b. */
static void keep_only(int a, int b)
{
	unsigned lo = (unsigned)(a < b ? a : b), hi = (unsigned)(a < b ? b : a);
	bool ok = (lo <= 3 || close_range(3, lo - 1, 0) == 0) && (hi <= lo + 1 || close_range(lo + 1, hi - 1, 0) == 0) &&
		  close_range(hi + 1, ~0u, 0) == 0;

	if (!ok)
		for (int fd = 3; fd < 1024; fd++)
			if (fd != a && fd != b)
				close(fd);
}

static void __attribute__((noreturn)) keeper(const struct gd_opts *o, const struct greq *r,
					      int out_fd, int res_fd)
{
	struct spawn_result res = { 0 };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	struct json_object *st;
	sigset_t mask;
	struct verr e;
	uint64_t deadline = 0, kill_at = 0;
	bool timed_out = false, stopping = false;
	int sfd, wstatus = 0;
	pid_t pid;

	/* Out of the session's process group, with nothing of its signal
	 * handling and none of its descriptors: the session may end any time,
	 * and its client's connection must end with it.  A keeper holding it
	 * kept the node agent's socket in the guest for the command's life,
	 * which CRIU cannot dump (a socket of the agent's network namespace:
	 * nodeagent/README.md, "Checkpoints"). */
	keep_only(out_fd, res_fd);
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, 0);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_SETMASK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || gd_spawn_fd(r, out_fd, &pid, &e) < 0) {
		snprintf(res.msg, sizeof(res.msg), "%s", sfd < 0 ? "spawn: signalfd failed" : e.msg);
		if (write(res_fd, &res, sizeof(res)) < 0)
			_exit(1);
		_exit(0);
	}
	close(out_fd);
	st = json_object_new_object();
	json_object_object_add(st, "state", json_object_new_string("running"));
	json_object_object_add(st, "pid", json_object_new_int(pid));
	json_object_object_add(st, "keeper", json_object_new_int(getpid()));
	if (write_state(o, r->id, st, &e) < 0) {
		kill(-pid, SIGKILL);
		snprintf(res.msg, sizeof(res.msg), "spawn: %s", e.msg);
		if (write(res_fd, &res, sizeof(res)) < 0)
			_exit(1);
		_exit(0);
	}
	json_object_put(st);
	res.ok = 1;
	res.pid = pid;
	if (write(res_fd, &res, sizeof(res)) < 0)
		log_warn("spawn %s: the session is gone before the reply", r->id);
	close(res_fd);
	log_info("detached %s: pid %d: %s%s", r->id, (int)pid, r->argv[0], r->argc > 1 ? " ..." : "");
	if (r->timeout_ms > 0)
		deadline = now_ns() + (uint64_t)r->timeout_ms * 1000000ull;
	for (;;) {
		struct pollfd p = { .fd = sfd, .events = POLLIN };
		uint64_t now = now_ns(), next = kill_at ? kill_at : deadline;
		int ms = next ? (now >= next ? 0 : (int)((next - now) / 1000000) + 1) : -1;
		struct signalfd_siginfo si;
		pid_t w;

		if (poll(&p, 1, ms) < 0 && errno != EINTR)
			break;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo != SIGCHLD && !stopping) {
				log_info("detached %s: signal %u: stopping pid %d", r->id, si.ssi_signo, (int)pid);
				stopping = true;
				kill(-pid, SIGTERM);
				kill_at = now_ns() + (uint64_t)o->grace_ms * 1000000ull;
			}
		w = waitpid(pid, &wstatus, WNOHANG);
		if (w == pid)
			break;
		now = now_ns();
		if (deadline && now >= deadline && !stopping) {
			log_info("detached %s: timeout: stopping pid %d", r->id, (int)pid);
			timed_out = stopping = true;
			kill(-pid, SIGTERM);
			kill_at = now + (uint64_t)o->grace_ms * 1000000ull;
		}
		if (kill_at && now >= kill_at) {
			kill(-pid, SIGKILL);
			kill_at = 0;
			deadline = 0;
		}
	}
	/* Whatever the command left in its group goes too, as with exec. */
	stop_group(pid, o->grace_ms);
	{
		char *ex = gd_exit_json(wstatus, timed_out);
		struct json_object *x = ex ? json_tokener_parse(ex) : NULL;

		st = json_object_new_object();
		json_object_object_add(st, "state", json_object_new_string("exited"));
		json_object_object_add(st, "pid", json_object_new_int(pid));
		json_object_object_add(st, "keeper", json_object_new_int(getpid()));
		if (x) {
			json_object_object_foreach(x, k, v)
				json_object_object_add(st, k, json_object_get(v));
			json_object_put(x);
		}
		log_info("detached %s: pid %d ended: %s", r->id, (int)pid, ex ? ex : "?");
		free(ex);
		if (write_state(o, r->id, st, &e) < 0)
			log_err("detached %s: %s", r->id, e.msg);
		json_object_put(st);
	}
	_exit(0);
}

int gd_detached_spawn(const struct gd_opts *o, const struct greq *r,
		      struct json_object **reply, struct verr *err)
{
	char out[512];
	struct spawn_result res;
	int fd, rp[2];
	ssize_t n;
	pid_t k;

	if (need_spool(o, "spawn", err) < 0)
		return -1;
	spool_path(o, r->id, "out", out, sizeof(out));
	/* The output file is the reservation of the id. */
	fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (errno == EEXIST)
			return verr_set(err, "spawn: a detached command '%s' exists already", r->id);
		return verr_errno(err, "spawn: %s", out);
	}
	if (pipe2(rp, O_CLOEXEC) < 0) {
		verr_errno(err, "spawn: pipe");
		goto fail;
	}
	k = fork();
	if (k < 0) {
		verr_errno(err, "spawn: fork");
		close(rp[0]);
		close(rp[1]);
		goto fail;
	}
	if (k == 0) {
		close(rp[0]);
		keeper(o, r, fd, rp[1]);
	}
	close(rp[1]);
	do
		n = read(rp[0], &res, sizeof(res));
	while (n < 0 && errno == EINTR);
	close(rp[0]);
	if (n != (ssize_t)sizeof(res) || !res.ok) {
		while (waitpid(k, NULL, 0) < 0 && errno == EINTR)
			;
		if (n == (ssize_t)sizeof(res))
			verr_set(err, "%.*s", (int)sizeof(res.msg), res.msg);
		else
			verr_set(err, "spawn: the keeper process died before starting '%s'", r->argv[0]);
		goto fail;
	}
	close(fd);
	*reply = json_object_new_object();
	json_object_object_add(*reply, "id", json_object_new_string(r->id));
	json_object_object_add(*reply, "pid", json_object_new_int(res.pid));
	return 0;
fail:
	close(fd);
	unlink(out);
	return -1;
}

/* The state file as JSON; its "state" is checked. */
static struct json_object *read_state(const struct gd_opts *o, const char *id, const char *op,
				      struct verr *err)
{
	char path[512], *buf;
	size_t len;
	struct json_object *st, *v;
	struct verr e;

	spool_path(o, id, "state", path, sizeof(path));
	if (read_file(path, &buf, &len, STATE_MAX, &e) < 0) {
		verr_set(err, "%s: no detached command '%s'", op, id);
		return NULL;
	}
	st = json_tokener_parse(buf);
	free(buf);
	if (!st || !json_object_is_type(st, json_type_object) ||
	    !json_object_object_get_ex(st, "state", &v) || !json_object_is_type(v, json_type_string)) {
		json_object_put(st);
		verr_set(err, "%s: the state of '%s' is unreadable", op, id);
		return NULL;
	}
	return st;
}

static int field_int(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_int)
		? json_object_get_int(v) : -1;
}

static bool running(struct json_object *st)
{
	struct json_object *v;

	return json_object_object_get_ex(st, "state", &v) &&
	       !strcmp(json_object_get_string(v), "running");
}

/* One look at the state, with the output size and a keeper that died
 * without recording an end reported as lost. */
static struct json_object *look(const struct gd_opts *o, const char *id, const char *op,
				struct verr *err)
{
	struct json_object *st = read_state(o, id, op, err);
	char out[512];
	struct stat sb;

	if (!st)
		return NULL;
	if (running(st) && !proc_alive(field_int(st, "keeper"))) {
		/* The keeper records the end before it exits; re-read in case
		 * it did so since. */
		json_object_put(st);
		if (!(st = read_state(o, id, op, err)))
			return NULL;
		if (running(st) && !proc_alive(field_int(st, "keeper")))
			json_object_object_add(st, "state", json_object_new_string("lost"));
	}
	spool_path(o, id, "out", out, sizeof(out));
	json_object_object_add(st, "output_bytes",
			       json_object_new_int64(stat(out, &sb) == 0 ? (int64_t)sb.st_size : 0));
	json_object_object_add(st, "id", json_object_new_string(id));
	json_object_object_del(st, "keeper");
	return st;
}

int gd_detached_status(const struct gd_opts *o, const char *id, long long wait_ms,
		       volatile sig_atomic_t *stop, struct json_object **reply, struct verr *err)
{
	const char *op = wait_ms > 0 ? "wait" : "status";
	uint64_t deadline = now_ns() + (uint64_t)wait_ms * 1000000ull;
	struct json_object *st;

	if (need_spool(o, op, err) < 0)
		return -1;
	for (;;) {
		if (!(st = look(o, id, op, err)))
			return -1;
		if (!running(st) || now_ns() >= deadline || (stop && *stop))
			break;
		json_object_put(st);
		usleep(20000);
	}
	*reply = st;
	return 0;
}

int gd_detached_kill(const struct gd_opts *o, const char *id, int sig, struct verr *err)
{
	struct json_object *st;
	int pid;

	if (need_spool(o, "kill", err) < 0 || !(st = read_state(o, id, "kill", err)))
		return -1;
	pid = field_int(st, "pid");
	if (!running(st)) {
		json_object_put(st);
		return verr_set(err, "kill: '%s' is not running", id);
	}
	json_object_put(st);
	if (pid <= 1)
		return verr_set(err, "kill: the state of '%s' names no process", id);
	if (kill(-pid, sig) < 0 && errno != ESRCH)
		return verr_errno(err, "kill: '%s' (process group %d)", id, pid);
	return 0;
}

void gd_detached_stop_all(const struct gd_opts *o)
{
	pid_t keepers[256];
	int nk = 0;
	uint64_t give_up = now_ns() + (uint64_t)(o->grace_ms + 3000) * 1000000ull;
	DIR *d;
	struct dirent *de;

	if (!o->spool[0] || !(d = opendir(o->spool)))
		return;
	while ((de = readdir(d)) && nk < (int)(sizeof(keepers) / sizeof(keepers[0]))) {
		char id[GD_ID_MAX + 1];
		size_t n = strlen(de->d_name);
		struct json_object *st;
		struct verr e;
		int k;

		if (n <= 6 || n - 6 > GD_ID_MAX || strcmp(de->d_name + n - 6, ".state"))
			continue;
		snprintf(id, sizeof(id), "%.*s", (int)(n - 6), de->d_name);
		if (!(st = read_state(o, id, "stop", &e)))
			continue;
		k = field_int(st, "keeper");
		if (running(st) && k > 1 && proc_alive(k)) {
			log_info("detached %s: stopping (guestd is stopping)", id);
			kill(k, SIGTERM);
			keepers[nk++] = k;
		}
		json_object_put(st);
	}
	closedir(d);
	for (int i = 0; i < nk; i++) {
		while (proc_alive(keepers[i]) && now_ns() < give_up) {
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
			usleep(10000);
		}
		if (proc_alive(keepers[i])) {
			log_warn("detached keeper %d did not stop in time; killing it", (int)keepers[i]);
			kill(keepers[i], SIGKILL);
		}
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int gd_detached_output(const struct gd_opts *o, const char *id, long long offset, size_t max,
		       struct json_object **reply, struct verr *err)
{
	char path[512], *b64;
	unsigned char *buf;
	struct stat sb;
	ssize_t n;
	int fd;

	if (need_spool(o, "output", err) < 0)
		return -1;
	spool_path(o, id, "out", path, sizeof(path));
	/* The command writes this file: opened without following a link it
	 * may have put there, and only if it is a plain file. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? verr_set(err, "output: no detached command '%s'", id)
				       : verr_errno(err, "output: %s", path);
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return verr_set(err, "output: the output of '%s' is not a plain file", id);
	}
	buf = malloc(max ? max : 1);
	b64 = malloc(sodium_base64_ENCODED_LEN(max, sodium_base64_VARIANT_ORIGINAL));
	if (!buf || !b64) {
		free(buf);
		free(b64);
		close(fd);
		return verr_set(err, "output: out of memory");
	}
	do
		n = pread(fd, buf, max, (off_t)offset);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0) {
		free(buf);
		free(b64);
		return verr_errno(err, "output: reading %s", path);
	}
	sodium_bin2base64(b64, sodium_base64_ENCODED_LEN(max, sodium_base64_VARIANT_ORIGINAL), buf, (size_t)n,
			  sodium_base64_VARIANT_ORIGINAL);
	*reply = json_object_new_object();
	json_object_object_add(*reply, "id", json_object_new_string(id));
	json_object_object_add(*reply, "offset", json_object_new_int64(offset));
	json_object_object_add(*reply, "size", json_object_new_int64((int64_t)sb.st_size));
	json_object_object_add(*reply, "data", json_object_new_string(b64));
	free(buf);
	free(b64);
	return 0;
}
