/*
 * A job's state on a node, as vhpc-slurmjob publishes it in
 * <run dir>/slurm/<job>.state for the job's tasks (the plugin), its
 * epilog and `vhpc mpirun`:
 *
 *   vhpc-slurm-state 1
 *   status preparing | ready | failed
 *   error TEXT                       (failed)
 *   holder PID                       (vhpc-slurmjob)
 *   job ID, jobdir PATH, driver NAME, key PATH
 *   env NAME=VALUE                   (repeated)
 *   guest INDEX PID NETNS CPUS MEMS ADDR SOCK VSOCK_PORT   (repeated; "-" empty)
 */
#include "slurm/slurm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool num(const char *s, long long max, long long *out)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return false;
	*out = strtoll(s, &end, 10);
	return !*end && *out <= max;
}

static bool copy(char *dst, size_t len, const char *src)
{
	if (strlen(src) >= len)
		return false;
	snprintf(dst, len, "%s", strcmp(src, "-") ? src : "");
	return true;
}

static bool word_ok(const char *w)
{
	return *w && !strchr(w, ' ');
}

static int guest_line(const char *v, struct vs_guest *g)
{
	char buf[1200], *w[8], *save = NULL;
	long long n;
	int i = 0;

	if (strlen(v) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (i == 8)
			return -1;
		w[i++] = t;
	}
	if (i != 8 || !num(w[0], 1 << 30, &n))
		return -1;
	g->index = (int)n;
	if (!num(w[1], 1 << 30, &n))
		return -1;
	g->pid = (pid_t)n;
	if (!copy(g->netns, sizeof(g->netns), w[2]) || !copy(g->cpus, sizeof(g->cpus), w[3]) ||
	    !copy(g->mems, sizeof(g->mems), w[4]) || !copy(g->addr, sizeof(g->addr), w[5]) ||
	    !copy(g->sock, sizeof(g->sock), w[6]) || !num(w[7], 0xffffffffll, &n))
		return -1;
	g->vsock_port = (unsigned)n;
	if (g->netns[0] && (strchr(g->netns, '/') || g->netns[0] == '.'))
		return -1;
	return 0;
}

int vs_state_parse(const char *text, size_t n, struct vs_state *s, char *why, size_t len)
{
	struct vs_kvfile f;
	const char *v;
	long long x;
	int rc = -1;

	memset(s, 0, sizeof(*s));
	if (vs_kv_parse(text, n, VS_STATE_MAGIC, &f, why, len) < 0)
		return -1;
	for (int i = 0; i < f.n; i++) {
		const char *k = f.v[i].key;

		v = f.v[i].val;
		if (!strcmp(k, "status")) {
			if (!strcmp(v, "ready"))
				s->status = VS_READY;
			else if (!strcmp(v, "failed"))
				s->status = VS_FAILED;
			else if (!strcmp(v, "preparing"))
				s->status = VS_PREPARING;
			else {
				vs_fail(why, len, "status '%.20s'", v);
				goto out;
			}
		} else if (!strcmp(k, "error")) {
			snprintf(s->error, sizeof(s->error), "%s", v);
		} else if (!strcmp(k, "holder")) {
			if (!num(v, 1 << 30, &x) || x < 1) {
				vs_fail(why, len, "holder '%.20s'", v);
				goto out;
			}
			s->holder = (pid_t)x;
		} else if (!strcmp(k, "job") || !strcmp(k, "jobdir") || !strcmp(k, "driver") || !strcmp(k, "key")) {
			char *dst = !strcmp(k, "job") ? s->job : !strcmp(k, "jobdir") ? s->jobdir
				  : !strcmp(k, "driver") ? s->driver : s->key;
			size_t dl = !strcmp(k, "job") ? sizeof(s->job) : !strcmp(k, "jobdir") ? sizeof(s->jobdir)
				  : !strcmp(k, "driver") ? sizeof(s->driver) : sizeof(s->key);

			if (!word_ok(v) || !copy(dst, dl, v)) {
				vs_fail(why, len, "%s '%.40s'", k, v);
				goto out;
			}
		} else if (!strcmp(k, "env")) {
			if (s->nenv == VS_MAX_ENV || !strchr(v, '=') || *v == '=' ||
			    !copy(s->env[s->nenv], sizeof(s->env[0]), v)) {
				vs_fail(why, len, "env '%.40s'", v);
				goto out;
			}
			s->nenv++;
		} else if (!strcmp(k, "guest")) {
			if (s->nguests == VS_MAX_GUESTS || guest_line(v, &s->g[s->nguests]) < 0) {
				vs_fail(why, len, "guest '%.60s'", v);
				goto out;
			}
			s->nguests++;
		} else {
			vs_fail(why, len, "unknown key '%s'", k);
			goto out;
		}
	}
	if (s->status == VS_READY && (!s->holder || !s->jobdir[0] || !s->nguests || !s->driver[0]))
		vs_fail(why, len, "ready without holder, jobdir, driver or guests");
	else if (s->status == VS_FAILED && !s->error[0])
		vs_fail(why, len, "failed without an error");
	else
		rc = 0;
out:
	vs_kv_free(&f);
	return rc;
}

int vs_state_load(const char *path, struct vs_state *s, char *why, size_t len)
{
	char *text;
	size_t n;
	int rc;

	memset(s, 0, sizeof(*s));
	if (vs_file_read(path, &text, &n, why, len) < 0)
		return -1;
	rc = vs_state_parse(text, n, s, why, len);
	free(text);
	return rc < 0 ? vs_fail_in(path, why, len) : 0;
}

static const char *dash(const char *s)
{
	return *s ? s : "-";
}

char *vs_state_text(const struct vs_state *s)
{
	static const char *const st[] = { "preparing", "ready", "failed" };
	size_t cap = 4096 + (size_t)s->nenv * 260 + (size_t)s->nguests * 1200, o;
	char *t = malloc(cap);

	if (!t)
		return NULL;
	o = (size_t)snprintf(t, cap, "%s\nstatus %s\n", VS_STATE_MAGIC, st[s->status]);
	if (s->error[0]) {
		/* One line: a multi-line message keeps its first line. */
		o += (size_t)snprintf(t + o, cap - o, "error %.*s\n", (int)strcspn(s->error, "\n"), s->error);
	}
	if (s->holder)
		o += (size_t)snprintf(t + o, cap - o, "holder %d\n", (int)s->holder);
	if (s->job[0])
		o += (size_t)snprintf(t + o, cap - o, "job %s\njobdir %s\ndriver %s\nkey %s\n", s->job, s->jobdir,
				      dash(s->driver), dash(s->key));
	for (int i = 0; i < s->nenv; i++)
		o += (size_t)snprintf(t + o, cap - o, "env %s\n", s->env[i]);
	for (int i = 0; i < s->nguests; i++) {
		const struct vs_guest *g = &s->g[i];

		o += (size_t)snprintf(t + o, cap - o, "guest %d %d %s %s %s %s %s %u\n", g->index, (int)g->pid,
				      dash(g->netns), dash(g->cpus), dash(g->mems), dash(g->addr), dash(g->sock),
				      g->vsock_port);
	}
	return t;
}
