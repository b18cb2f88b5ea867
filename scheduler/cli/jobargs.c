/* The options of `vhpc run` and `vhpc submit`: flags (or a job file) to a
 * job spec, by the rows of lib/jobopts.c. */
#include "lib/binds.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/jobopts.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "cli.h"
#include "jobargs.h"
#include "optgen.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_duration(const char *s, long long max, long long *out)
{
	long long v, mult = 1;
	size_t n = strlen(s);
	char buf[32];

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n + 1);
	switch (buf[n - 1]) {
	case 's': mult = 1; buf[n - 1] = 0; break;
	case 'm': mult = 60; buf[n - 1] = 0; break;
	case 'h': mult = 3600; buf[n - 1] = 0; break;
	case 'd': mult = 86400; buf[n - 1] = 0; break;
	}
	if (parse_ll(buf, 1, max, &v) < 0 || v * mult > max)
		return -1;
	*out = v * mult;
	return 0;
}

int job_args_env(struct job_spec *j, const char *kv, const char *cmd)
{
	const char *eq = strchr(kv, '=');
	char **nk, **nv;

	if (eq == kv || !*kv)
		return usage_error(cmd, "-x: expected NAME or NAME=VALUE, got '%s'", kv);
	if (!eq) {
		const char *v = getenv(kv);
		char *both;
		int rc;

		if (!v)
			return usage_error(cmd, "-x %s: %s is not set in your environment (give -x %s=VALUE)", kv, kv, kv);
		if (asprintf(&both, "%s=%s", kv, v) < 0)
			return usage_error(cmd, "out of memory");
		rc = job_args_env(j, both, cmd);
		free(both);
		return rc;
	}
	for (size_t i = 0; i < j->env.n; i++)
		if (strlen(j->env.key[i]) == (size_t)(eq - kv) && !strncmp(j->env.key[i], kv, eq - kv)) {
			free(j->env.val[i]);
			j->env.val[i] = strdup(eq + 1);
			return j->env.val[i] ? 0 : usage_error(cmd, "out of memory");
		}
	nk = realloc(j->env.key, (j->env.n + 1) * sizeof(char *));
	if (!nk)
		return -1;
	j->env.key = nk;
	nv = realloc(j->env.val, (j->env.n + 1) * sizeof(char *));
	if (!nv)
		return -1;
	j->env.val = nv;
	j->env.key[j->env.n] = strndup(kv, eq - kv);
	j->env.val[j->env.n] = strdup(eq + 1);
	j->env.n++;
	return 0;
}

static int add_bind(struct job_spec *j, const char *spec, const char *cmd)
{
	struct bind b;
	char why[512], **nv;

	if (bind_parse(spec, &b, why, sizeof(why)) < 0)
		return usage_error(cmd, "--bind: %s", why);
	if (j->binds.n >= BIND_MAX)
		return usage_error(cmd, "--bind: a job has at most %d binds", BIND_MAX);
	if (!(nv = realloc(j->binds.v, (j->binds.n + 2) * sizeof(char *))))
		return usage_error(cmd, "out of memory");
	j->binds.v = nv;
	if (!(j->binds.v[j->binds.n] = strdup(spec)))
		return usage_error(cmd, "out of memory");
	j->binds.v[++j->binds.n] = NULL;
	return 0;
}

/* --device CLASS[:N]: checked here so the error names the flag; a class
 * given again replaces its count. */
static int add_device(struct job_spec *j, const char *spec, const char *cmd)
{
	char cls[FABRIC_CLASS_MAX + 1], other[FABRIC_CLASS_MAX + 1], why[256], **nv;
	int n, m;

	if (job_device_parse(spec, cls, &n, why, sizeof(why)) < 0)
		return usage_error(cmd, "--device: %s", why);
	for (size_t i = 0; i < j->devices.n; i++)
		if (job_device_parse(j->devices.v[i], other, &m, why, sizeof(why)) == 0 && !strcmp(cls, other)) {
			free(j->devices.v[i]);
			j->devices.v[i] = strdup(spec);
			return j->devices.v[i] ? 0 : usage_error(cmd, "out of memory");
		}
	if (j->devices.n >= JOB_DEVICES_MAX)
		return usage_error(cmd, "--device: a job names at most %d classes", JOB_DEVICES_MAX);
	if (!(nv = realloc(j->devices.v, (j->devices.n + 2) * sizeof(char *))))
		return usage_error(cmd, "out of memory");
	j->devices.v = nv;
	if (!(j->devices.v[j->devices.n] = strdup(spec)))
		return usage_error(cmd, "out of memory");
	j->devices.v[++j->devices.n] = NULL;
	return 0;
}

/* One parse: the job so far, and what is for this machine only. */
struct job_args {
	const char *cmd;
	struct job_spec j;
	struct embedded_opts eo;
	bool have_job;
	void (*help)(void);
};

/* "a, b or c" */
static const char *names_words(const char *const *names, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; names[i] && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i == 0 ? "" : names[i + 1] ? ", " : " or ", names[i]);
	return buf;
}

int job_args_driver(const char *cmd, const char *name, int *out)
{
	if ((*out = vhpc_driver_index(name)) >= 0)
		return 0;
	return usage_error(cmd, "--driver: expected " VHPC_DRIVER_CHOICES ", got '%s'", name);
}

const struct cf_field *job_args_field(const char *key)
{
	for (const struct cf_field *f = job_spec_schema.fields; key && f->key; f++)
		if (!strcmp(f->key, key))
			return f;
	return NULL;
}

/* 64M, 4T: bytes in the largest unit that divides them. */
static const char *size_words(uint64_t b, char *buf, size_t len)
{
	const char *unit = "\0KMGTP";

	while (b >= 1024 && b % 1024 == 0 && unit[1]) {
		b /= 1024;
		unit++;
	}
	snprintf(buf, len, "%llu%.1s", (unsigned long long)b, unit);
	return buf;
}

/* The error of a bad value names the option as the user typed it. */
static int bad_value(const struct job_args *a, const struct job_opt *r, const struct cf_field *f,
		     const char *val)
{
	char opt[40], lo[16], hi[16], words[128];

	opt_spelling(&r->o, opt, sizeof(opt));
	switch (r->kind) {
	case JO_NUMBER:
		return usage_error(a->cmd, "%s: expected %s%lld..%lld, got '%s'", opt, r->expect, f->min, f->max, val);
	case JO_SIZE:
		return usage_error(a->cmd, "%s: expected a size from %s to %s such as %s, got '%s'", opt,
				   size_words(f->min, lo, sizeof(lo)), size_words(f->max, hi, sizeof(hi)),
				   r->expect, val);
	case JO_CHOICE:
		return usage_error(a->cmd, "%s: expected %s, got '%s'", opt,
				   names_words(f->names, words, sizeof(words)), val);
	case JO_NAME:
		return usage_error(a->cmd, "%s: '%s' is not %s", opt, val, r->expect);
	default:
		return usage_error(a->cmd, "%s: expected %s, got '%s'", opt, r->expect, val);
	}
}

static int set_string(const struct job_args *a, char **dst, const char *val)
{
	free(*dst);
	*dst = strdup(val);
	return *dst ? 0 : usage_error(a->cmd, "out of memory");
}

/* A row bound to a field of the job file: its kind says how. */
static int set_field(struct job_args *a, const struct job_opt *r, const char *val)
{
	const struct cf_field *f = job_args_field(r->key);
	void *dst = (char *)&a->j + f->off;
	long long v;
	uint64_t sz;

	switch (r->kind) {
	case JO_NUMBER:
		if (parse_ll(val, f->min, f->max, &v) < 0)
			return bad_value(a, r, f, val);
		*(long long *)dst = v;
		return 0;
	case JO_DURATION:
		if (parse_duration(val, f->max, &v) < 0)
			return bad_value(a, r, f, val);
		*(long long *)dst = v;
		return 0;
	case JO_SIZE:
		if (parse_size(val, &sz) < 0 || sz < (uint64_t)f->min || sz > (uint64_t)f->max)
			return bad_value(a, r, f, val);
		*(uint64_t *)dst = sz;
		return 0;
	case JO_CHOICE:
		for (int i = 0; f->names[i]; i++)
			if (!strcmp(val, f->names[i])) {
				*(int *)dst = i;
				return 0;
			}
		return bad_value(a, r, f, val);
	case JO_NAME:
		return ident_ok(val, 64) ? set_string(a, dst, val) : bad_value(a, r, f, val);
	case JO_VALUE:
		for (int i = 0; f->names[i]; i++)
			if (!strcmp(r->expect, f->names[i]))
				*(int *)dst = i;
		return 0;
	default:
		*(bool *)dst = r->kind == JO_SET;
		return 0;
	}
}

/* Flags before --job are overridden by the file; later ones override it. */
static int take_job_file(struct job_args *a, const char *path)
{
	struct job_spec fj;
	struct verr err;

	if (a->have_job)
		return usage_error(a->cmd, "--job given twice");
	if (job_spec_load(path, &fj, &err) < 0) {
		log_err("%s", err.msg);
		return EXIT_USAGE;
	}
	job_spec_free(&a->j);
	a->j = fj;
	a->have_job = true;
	return 0;
}

static int set_chdir(struct job_args *a, const char *dir)
{
	char why[512];

	if (bind_path_check("--chdir", dir, why, sizeof(why)) < 0)
		return usage_error(a->cmd, "%s", why);
	return set_string(a, &a->j.workdir, dir);
}

/* The rows whose values are more than a field: a file, a list, a check
 * of who asks, or what only this machine's run uses. */
static int set_own(struct job_args *a, const struct job_opt *r, const char *val)
{
	switch (r->o.id) {
	case JO_DRIVER:
		return job_args_driver(a->cmd, val, &a->j.driver);
	case JO_JOB:
		return take_job_file(a, val);
	case JO_ENV:
		return job_args_env(&a->j, val, a->cmd);
	case JO_BIND:
		return add_bind(&a->j, val, a->cmd);
	case JO_DEVICE:
		return add_device(&a->j, val, a->cmd);
	case JO_CHDIR:
		return set_chdir(a, val);
	case JO_TOPOLOGY:
		a->eo.topology = val;
		return 0;
	case JO_EMUKVM:
		a->eo.allow_emulated_kvm = true;
		return 0;
	case JO_USER:
		/* Checked before anything else can fail, so the answer to
		 * an ordinary user is this and not a missing service. */
		if (geteuid() != 0)
			return usage_error(a->cmd, "--user is root's: an ordinary user's jobs always run as that user");
		a->eo.user = val;
		return 0;
	default:
		a->help();
		return 1;
	}
}

/* After the options: the command, and what depends on several of them. */
static int finish(struct job_args *a, int argc, char **argv)
{
	struct verr err;

	if (argc > 0) {
		/* The command after the options replaces a job file's. */
		for (size_t i = 0; i < a->j.command.n; i++)
			free(a->j.command.v[i]);
		free(a->j.command.v);
		a->j.command.n = argc;
		if (!(a->j.command.v = calloc(argc + 1, sizeof(char *))))
			return usage_error(a->cmd, "out of memory");
		for (int i = 0; i < argc; i++)
			if (!(a->j.command.v[i] = strdup(argv[i])))
				return usage_error(a->cmd, "out of memory");
	}
	if (!a->j.command.n)
		return usage_error(a->cmd, "no command: vhpc %s [OPTIONS] -- COMMAND [ARGS...]", a->cmd);
	/* The option is kvm's by its name; auto is checked once resolved. */
	if (a->eo.allow_emulated_kvm && a->j.driver > DRIVER_AUTO && strcmp(vhpc_driver_names[a->j.driver], "kvm"))
		return usage_error(a->cmd, "--allow-emulated-kvm applies to --driver kvm only");
	if (!a->j.ranks)
		a->j.ranks = a->j.guests * (a->j.vcpus ? a->j.vcpus : 1);
	/* Where the job was submitted, as Slurm runs a job there; a path
	 * that cannot be shared is said at planning, not refused here. */
	if (!a->j.workdir) {
		char cwd[4096], why[512];

		if (getcwd(cwd, sizeof(cwd)) && bind_path_check("the submission directory", cwd, why, sizeof(why)) == 0)
			a->j.workdir = strdup(cwd);
		else
			log_info("the job will run in /tmp: %s", getcwd(cwd, sizeof(cwd)) ? why : "the current directory is unreachable");
	}
	if (job_spec_check(&a->j, &err) < 0)
		return usage_error(a->cmd, "%s", err.msg);
	return 0;
}

int job_args_check(const char *cmd, int id, const char *val)
{
	struct job_args a = { .cmd = cmd };
	const struct job_opt *r = job_opt_by_id(id);
	int rc;

	job_spec_defaults(&a.j);
	rc = r->kind == JO_OWN ? set_own(&a, r, val) : set_field(&a, r, val);
	job_spec_free(&a.j);
	return rc;
}

void job_args_help(FILE *f)
{
	struct optset s = { .n = 0 };

	optset_jobs(&s, JO_RUN);
	optset_help(&s, 24, f);
}

/* The options of the rows in s, up to the command (optind). */
static int options(struct job_args *a, const struct optset *s, int argc, char **argv)
{
	struct option longs[OPTGEN_MAX + 1];
	char shorts[2 * OPTGEN_MAX + 3];
	int c, rc = 0;

	/* "+": options stop at the command, so its own flags are its own;
	 * ":": a missing value is reported as such, not as an unknown option. */
	optset_getopt(s, "+:", longs, shorts, sizeof(shorts));
	optind = 1;
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		const struct job_opt *r = job_opt_by_id(c);

		if (c == ':')
			rc = usage_error(a->cmd, "%s needs a value", argv[optind - 1]);
		else if (!r)
			rc = usage_error(a->cmd, "unknown option '%s'", argv[optind - 1]);
		else
			rc = r->kind == JO_OWN ? set_own(a, r, optarg) : set_field(a, r, optarg);
	}
	return rc;
}

int job_args_options(const char *cmd, const struct optset *s, int argc, char **argv, struct job_spec *j,
		     void (*help)(void))
{
	struct job_args a = { .cmd = cmd, .help = help, .j = *j };
	int rc = options(&a, s, argc, argv);

	*j = a.j;
	return rc;
}

int job_args_parse(const char *cmd, int argc, char **argv, struct job_spec *out,
		   struct embedded_opts *eo_out, void (*help)(void))
{
	struct job_args a = { .cmd = cmd, .help = help };
	struct optset s = { .n = 0 };
	int rc;

	job_spec_defaults(&a.j);
	/* Not given: the cluster file's defaults apply later. */
	a.j.driver = -1;
	a.j.mem = 0;
	a.j.timeout = 0;
	optset_jobs(&s, JO_RUN);
	rc = options(&a, &s, argc, argv);
	if (!rc)
		rc = finish(&a, argc - optind, argv + optind);
	if (rc) {
		job_spec_free(&a.j);
		return rc;
	}
	*out = a.j;
	*eo_out = a.eo;
	return 0;
}
