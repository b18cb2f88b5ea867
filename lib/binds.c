/* The rules of host paths shared into guests (binds.h). */
#include "lib/binds.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

int bind_path_check(const char *what, const char *p, char *why, size_t len)
{
	size_t n = strlen(p);

	if (p[0] != '/')
		return say(why, len, "%s '%.200s' is not an absolute path", what, p);
	if (n >= BIND_PATH_MAX)
		return say(why, len, "%s '%.60s...' is longer than %d bytes", what, p, BIND_PATH_MAX - 1);
	for (const char *c = p; *c; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		      strchr("._-+@%=~/", *c)))
			return say(why, len, "%s '%.200s' has the character '%c' (0x%02x): paths may hold letters, digits and . _ - + @ %% = ~ /",
				   what, p, *c >= 0x20 && *c < 0x7f ? *c : '?', (unsigned char)*c);
	if (n > 1 && p[n - 1] == '/')
		return say(why, len, "%s '%.200s' ends in '/'", what, p);
	for (const char *c = p; *c; c++) {
		const char *e;

		if (*c != '/')
			continue;
		e = c + 1;
		if (*e == '/')
			return say(why, len, "%s '%.200s' has an empty component (\"//\")", what, p);
		if (e[0] == '.' && (e[1] == '/' || !e[1]))
			return say(why, len, "%s '%.200s' has a \".\" component", what, p);
		if (e[0] == '.' && e[1] == '.' && (e[2] == '/' || !e[2]))
			return say(why, len, "%s '%.200s' has a \"..\" component", what, p);
	}
	return 0;
}

bool bind_path_under(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	if (!strcmp(dir, "/"))
		return p[0] == '/';
	return !strncmp(p, dir, n) && (p[n] == '/' || !p[n]);
}

/* What vhpc-guestd, Open MPI and the image's programs run from or need as
 * the image made them; below /tmp and /var/tmp is the guest's own tmpfs
 * and free, the folders themselves are not (Open MPI's session folder). */
static const char *const protected_trees[] = {
	"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
	"/sbin", "/sys", "/usr", "/vhpc", NULL
};
static const char *const protected_exact[] = { "/", "/tmp", "/var", "/var/tmp", NULL };

const char *bind_dst_protected(const char *dst)
{
	for (int i = 0; protected_exact[i]; i++)
		if (!strcmp(dst, protected_exact[i]))
			return protected_exact[i];
	for (int i = 0; protected_trees[i]; i++)
		if (bind_path_under(dst, protected_trees[i]))
			return protected_trees[i];
	return NULL;
}

int bind_parse(const char *spec, struct bind *out, char *why, size_t len)
{
	char buf[3 * BIND_PATH_MAX], *f[4] = { 0 };
	int nf = 0;

	memset(out, 0, sizeof(*out));
	if (strlen(spec) >= sizeof(buf))
		return say(why, len, "bind '%.60s...' is too long", spec);
	strcpy(buf, spec);
	for (char *s = buf, *c; nf < 4; s = c + 1) {
		f[nf++] = s;
		if (!(c = strchr(s, ':')))
			break;
		*c = 0;
	}
	if (nf == 4 || (nf == 3 && strchr(f[2], ':')))
		return say(why, len, "bind '%.200s': expected SRC[:DST][:ro|rw]", spec);
	if (nf >= 2 && (!strcmp(f[nf - 1], "ro") || !strcmp(f[nf - 1], "rw"))) {
		out->ro = !strcmp(f[nf - 1], "ro");
		nf--;
	} else if (nf == 3) {
		return say(why, len, "bind '%.200s': the third field must be ro or rw, got '%.20s'", spec, f[2]);
	}
	if (bind_path_check("bind source", f[0], why, len) < 0)
		return -1;
	if (f[0][1] == 0)
		return say(why, len, "bind '%.200s': the host's root cannot be shared", spec);
	if (nf == 2 && bind_path_check("bind destination", f[1], why, len) < 0)
		return -1;
	snprintf(out->src, sizeof(out->src), "%s", f[0]);
	snprintf(out->dst, sizeof(out->dst), "%s", nf == 2 ? f[1] : f[0]);
	if (bind_dst_protected(out->dst))
		return say(why, len, "bind '%.200s': the destination %s would cover the image's %s, which the guest needs",
			   spec, out->dst, bind_dst_protected(out->dst));
	return 0;
}

const struct bind *bind_holding(const struct bind_list *l, const char *p)
{
	const struct bind *best = NULL;

	for (int i = 0; i < l->n; i++)
		if (bind_path_under(p, l->v[i].dst) && (!best || strlen(l->v[i].dst) > strlen(best->dst)))
			best = &l->v[i];
	return best;
}

/* Whether guest path p shows host path p (a bind of the same path holds it). */
static bool same_path_shared(const struct bind_list *l, const char *p)
{
	const struct bind *b = bind_holding(l, p);

	return b && !strcmp(b->src, b->dst);
}

static int add(struct bind_list *l, const struct bind *b, const char *what, char *why, size_t len)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].dst, b->dst)) {
			if (!strcmp(l->v[i].src, b->src) && l->v[i].ro == b->ro)
				return 0;
			return say(why, len, "%s %s:%s: %s is already the destination of %s%s", what, b->src,
				   b->dst, b->dst, l->v[i].src, l->v[i].ro ? " (ro)" : "");
		}
	if (l->n >= BIND_MAX)
		return say(why, len, "%s %s: a job has at most %d binds", what, b->src, BIND_MAX);
	l->v[l->n++] = *b;
	return 0;
}

static int depth(const char *p)
{
	int d = 0;

	for (; *p; p++)
		d += *p == '/';
	return d;
}

int bind_plan(const struct bind_req *r, struct bind_list *out, char *wdir, size_t wlen,
	      char *note, size_t nlen, char *why, size_t len)
{
	struct bind b;
	char w[256];

	out->n = 0;
	if (nlen)
		note[0] = 0;
	for (size_t i = 0; i < r->nsite; i++) {
		if (bind_parse(r->site[i], &b, w, sizeof(w)) < 0)
			return say(why, len, "the cluster file's binds: %s", w);
		if (add(out, &b, "site bind", why, len) < 0)
			return -1;
	}
	for (size_t i = 0; i < r->nuser; i++) {
		bool allowed = r->nallow == 0;

		if (bind_parse(r->user[i], &b, why, len) < 0)
			return -1;
		for (size_t k = 0; k < r->nallow && !allowed; k++)
			allowed = bind_path_under(b.src, r->allow[k]);
		for (size_t k = 0; k < r->nsite && !allowed; k++) {
			struct bind s;

			allowed = bind_parse(r->site[k], &s, w, sizeof(w)) == 0 && bind_path_under(b.src, s.src);
		}
		if (!allowed) {
			char list[512] = "";

			for (size_t k = 0; k < r->nallow; k++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", k ? ", " : "", r->allow[k]);
			return say(why, len, "bind %s: the cluster file allows binds only from below %s (bind_allow) and its site binds",
				   b.src, list);
		}
		if (add(out, &b, "bind", why, len) < 0)
			return -1;
	}
	/* The home and the submission directory at their own paths, unless a
	 * bind shows them there already; ones that cannot be shared are left
	 * out rather than failing the job: the user did not ask for them. */
	if (r->home && bind_path_check("home", r->home, w, sizeof(w)) == 0 && !bind_dst_protected(r->home) &&
	    !same_path_shared(out, r->home)) {
		memset(&b, 0, sizeof(b));
		snprintf(b.src, sizeof(b.src), "%s", r->home);
		snprintf(b.dst, sizeof(b.dst), "%s", r->home);
		if (add(out, &b, "home", why, len) < 0)
			return -1;
	}
	snprintf(wdir, wlen, "/tmp");
	if (r->workdir) {
		const char *p = NULL;

		if (bind_path_check("the submission directory", r->workdir, w, sizeof(w)) < 0)
			snprintf(note, nlen, "%s; the job runs in /tmp", w);
		else if (same_path_shared(out, r->workdir))
			snprintf(wdir, wlen, "%s", r->workdir);
		else if ((p = bind_dst_protected(r->workdir)))
			snprintf(note, nlen, "the submission directory %s is %sthe image's %s, which the guest keeps: the job runs in /tmp",
				 r->workdir, strcmp(p, r->workdir) ? "inside " : "", p);
		else {
			memset(&b, 0, sizeof(b));
			snprintf(b.src, sizeof(b.src), "%s", r->workdir);
			snprintf(b.dst, sizeof(b.dst), "%s", r->workdir);
			if (add(out, &b, "the submission directory", why, len) < 0)
				return -1;
			snprintf(wdir, wlen, "%s", r->workdir);
		}
	}
	/* Parents first: a destination inside another is mounted after it. */
	for (int i = 1; i < out->n; i++)
		for (int k = i; k > 0 && depth(out->v[k].dst) < depth(out->v[k - 1].dst); k--) {
			b = out->v[k];
			out->v[k] = out->v[k - 1];
			out->v[k - 1] = b;
		}
	return 0;
}
