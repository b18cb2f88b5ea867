/* bench_run: a suite natively and in guests, repetitions interleaved, into
 * a results folder. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/harness/bh.h"

#define EXIT_FAILED 1
#define EXIT_BADOPT 2

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("vhpc bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const struct bh_suite *bh_suite_find(const char *name)
{
	static const struct bh_suite *const all[] = { &bh_suite_mpi, &bh_suite_net, &bh_suite_mem,
						      &bh_suite_sys };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

static void utc_now(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --sizes / --msglog / the suite's default into c->sizes. */
static int resolve_sizes(struct bh_ctx *c, struct verr *err)
{
	const struct bh_suite *s = c->s;
	const char *msglog = c->o->msglog;
	int lo, hi;

	if (!s->has_sizes && (c->o->sizes || msglog))
		return verr_set(err, "the %s suite has no sizes (--sizes, --msglog)", s->name);
	if (c->o->sizes && msglog)
		return verr_set(err, "--sizes and --msglog: give one of them");
	if (msglog && !s->has_msglog)
		return verr_set(err, "--msglog: the %s suite takes --sizes", s->name);
	if (c->o->sizes)
		return bh_parse_sizes("--sizes", c->o->sizes, s->size_min, s->size_max, &c->sizes,
				      &c->nsizes, err);
	if (!s->has_sizes)
		return 0;
	if (!msglog && s->sizes_default)
		return bh_parse_sizes("--sizes", s->sizes_default, s->size_min, s->size_max, &c->sizes,
				      &c->nsizes, err);
	if (bh_parse_msglog(msglog ? msglog : s->msglog_default, 30, &lo, &hi, err) < 0)
		return -1;
	if ((1LL << hi) > s->size_max || (s->msglog_zero ? 0 : 1LL << lo) < s->size_min)
		return verr_set(err, "--msglog %s: sizes go up to %lld bytes in the %s suite", msglog,
				s->size_max, s->name);
	c->sizes = calloc((size_t)(hi - lo + 2), sizeof(long long));
	if (!c->sizes)
		return verr_set(err, "out of memory");
	if (s->msglog_zero)
		c->sizes[c->nsizes++] = 0;
	for (int k = lo; k <= hi; k++)
		c->sizes[c->nsizes++] = 1LL << k;
	return 0;
}

/* Where the results go; nothing is created yet, so bad options leave
 * nothing behind. */
static int choose_dir(struct bh_ctx *c, struct verr *err)
{
	char path[PATH_MAX + 16];
	struct stat st;

	if (c->o->out) {
		if (strlen(c->o->out) >= sizeof(c->dir) - 64)
			return verr_set(err, "--out: path too long");
		snprintf(c->dir, sizeof(c->dir), "%s", c->o->out);
		if (stat(c->dir, &st) == 0 && !S_ISDIR(st.st_mode))
			return verr_set(err, "--out %s: exists and is not a folder", c->dir);
		snprintf(path, sizeof(path), "%s/results.json", c->dir);
		if (access(path, F_OK) == 0)
			return verr_set(err, "--out %s: already holds results; give another folder", c->dir);
	} else {
		char stamp[32];
		time_t t = time(NULL);
		struct tm tm;

		localtime_r(&t, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
		for (int i = 1;; i++) {
			if (i == 1)
				snprintf(c->dir, sizeof(c->dir), "%s/bench/%s-%s", vhpc_state_dir(), stamp, c->s->name);
			else
				snprintf(c->dir, sizeof(c->dir), "%s/bench/%s-%s-%d", vhpc_state_dir(), stamp,
					 c->s->name, i);
			if (access(c->dir, F_OK) < 0)
				break;
			if (i > 100)
				return verr_set(err, "%s: too many runs this second", c->dir);
		}
	}
	/* gnuplot is given these paths inside quotes. */
	if (strpbrk(c->dir, "'\"\\\n`"))
		return verr_set(err, "results folder '%s': quotes, backslashes and newlines are not allowed", c->dir);
	return 0;
}

static int create_dir(struct bh_ctx *c, struct verr *err)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/raw", c->dir);
	if (mkdir_p(path, 0755, err) < 0)
		return verr_wrap(err, "results folder");
	return 0;
}

/* The last lines of a file, for an error message. */
static void print_tail(const char *path, int lines)
{
	char *buf;
	size_t len;
	struct verr e;
	const char *p;
	int n = 0;

	if (read_file(path, &buf, &len, 16u << 20, &e) < 0)
		return;
	p = buf + len;
	while (p > buf && n <= lines)
		if (*--p == '\n' && p + 1 < buf + len)
			n++;
	if (p > buf)
		p++;
	fprintf(stderr, "--- %s (last lines)\n%s%s---\n", path, p, len && buf[len - 1] != '\n' ? "\n" : "");
	free(buf);
}

static void run_paths(const struct bh_ctx *c, const struct bh_run *r, size_t rep, char *out, char *errp,
		      size_t len)
{
	char tag[40] = "";

	if (r->tag[0])
		snprintf(tag, sizeof(tag), "-%s", r->tag);
	snprintf(out, len, "%s/raw/%s%s-%zu.out", c->dir, bh_side_names[r->side], tag, rep + 1);
	snprintf(errp, len, "%s/raw/%s%s-%zu.err", c->dir, bh_side_names[r->side], tag, rep + 1);
}

/* One run of one side: 0, or the exit status for vhpc bench. */
static int one_run(struct bh_ctx *c, const struct bh_run *r, size_t rep, double *secs)
{
	char out[PATH_MAX + 64], errp[PATH_MAX + 64], *text = NULL;
	int timeout = c->o->timeout_s > 0 ? c->o->timeout_s : 600;
	struct bh_desc wall = { "whole run", "wall", "s", "", BH_LOWER, r->x };
	struct bh_proc p;
	struct verr err;
	size_t len;

	run_paths(c, r, rep, out, errp, sizeof(out));
	/* vhpc run has the same limit and ends its guests itself; ours is
	 * the backstop. */
	if (bh_spawn(r->argv, out, errp, timeout + (r->side == BH_GUEST ? 60 : 0), &p, &err) < 0) {
		say("%s", err.msg);
		return EXIT_FAILED;
	}
	*secs = (p.t1 - p.t0) / 1e9;
	if (p.interrupted) {
		say("interrupted (signal %d) during the %s run %zu; results so far are in %s", p.interrupted,
		    bh_side_names[r->side], rep + 1, c->dir);
		return 128 + p.interrupted;
	}
	if (p.timed_out || p.status != 0) {
		char cmd[2048];

		if (p.timed_out)
			say("%s run %zu%s%s took longer than %d s and was stopped", bh_side_names[r->side], rep + 1,
			    r->tag[0] ? " at " : "", r->tag, timeout);
		else
			say("%s run %zu%s%s failed with exit status %d", bh_side_names[r->side], rep + 1,
			    r->tag[0] ? " at " : "", r->tag, p.status);
		fprintf(stderr, "  command: %s\n", bh_argv_str(r->argv, cmd, sizeof(cmd)));
		print_tail(errp, 12);
		fprintf(stderr, "  its output: %s\n", out);
		return EXIT_FAILED;
	}
	if (read_file(out, &text, &len, IMB_MAX_INPUT, &err) < 0) {
		say("%s", err.msg);
		return EXIT_FAILED;
	}
	if (c->s->parse(c, r, rep, out, text, len, p.t0, p.t1, &err) < 0 ||
	    bh_add(&c->res, &wall, r->side, rep, *secs, &err) < 0) {
		say("%s run %zu: %s", bh_side_names[r->side], rep + 1, err.msg);
		free(text);
		return EXIT_FAILED;
	}
	free(text);
	return 0;
}

static struct json_object *jstr_or_null(const char *s)
{
	return s && *s ? json_object_new_string(s) : NULL;
}

/* --iter as given (null: the programs' default rule). */
static struct json_object *iter_json(const struct bh_ctx *c)
{
	struct json_object *o;

	if (!c->iter.set)
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "n", json_object_new_int64(c->iter.n));
	json_object_object_add(o, "vol", json_object_new_int64(c->iter.vol));
	return o;
}

static struct json_object *config_json(const struct bh_ctx *c)
{
	struct json_object *o = json_object_new_object(), *sz = json_object_new_array();

	json_object_object_add(o, "guests", json_object_new_int(c->guests));
	json_object_object_add(o, "ranks", json_object_new_int(c->ranks));
	json_object_object_add(o, "reps", json_object_new_int(c->reps));
	json_object_object_add(o, "driver", json_object_new_string(c->driver));
	json_object_object_add(o, "driver_why", json_object_new_string(c->driver_why));
	json_object_object_add(o, "driver_asked", jstr_or_null(c->o->driver));
	json_object_object_add(o, "image", jstr_or_null(c->image));
	json_object_object_add(o, "imb", jstr_or_null(c->imb));
	for (size_t i = 0; i < c->nsizes; i++)
		json_object_array_add(sz, json_object_new_int64(c->sizes[i]));
	json_object_object_add(o, "sizes", sz);
	json_object_object_add(o, "seconds", c->seconds > 0 ? json_object_new_double(c->seconds) : NULL);
	json_object_object_add(o, "iter", iter_json(c));
	json_object_object_add(o, "no_vmshm", json_object_new_boolean(c->o->no_vmshm));
	json_object_object_add(o, "no_single_copy", json_object_new_boolean(c->o->no_single_copy));
	json_object_object_add(o, "native_btl", jstr_or_null(c->o->native_btl));
	json_object_object_add(o, "native_env", jstr_or_null(c->o->native_env));
	json_object_object_add(o, "fabric", jstr_or_null(c->o->fabric));
	if (c->nbenches) {
		struct json_object *b = json_object_new_array();

		for (size_t i = 0; i < c->nbenches; i++)
			json_object_array_add(b, json_object_new_string(c->benches[i]));
		json_object_object_add(o, "benchmarks", b);
	}
	json_object_object_add(o, "timeout_s", json_object_new_int(c->o->timeout_s > 0 ? c->o->timeout_s : 600));
	return o;
}

static struct json_object *side_json(const struct bh_ctx *c, enum bh_side side)
{
	struct json_object *o = json_object_new_object(), *cmds = json_object_new_array();
	char buf[4096];

	json_object_object_add(o, "how", json_object_new_string(side == BH_NATIVE ? c->native_how : c->guest_how));
	for (size_t i = 0; i < c->nruns; i++)
		if (c->runs[i].side == side)
			json_object_array_add(cmds, json_object_new_string(bh_argv_str(c->runs[i].argv, buf, sizeof(buf))));
	json_object_object_add(o, "commands", cmds);
	return o;
}

static int write_results(struct bh_ctx *c, struct json_object *machine, struct verr *err)
{
	struct json_object *doc = json_object_new_object(), *cmd = json_object_new_array();
	char finished[40], path[PATH_MAX + 32];
	const char *text;
	int rc;

	utc_now(finished, sizeof(finished));
	json_object_object_add(doc, "format", json_object_new_string("vhpc-bench/1"));
	json_object_object_add(doc, "suite", json_object_new_string(c->s->name));
	json_object_object_add(doc, "started", json_object_new_string(c->started));
	json_object_object_add(doc, "finished", json_object_new_string(finished));
	json_object_array_add(cmd, json_object_new_string("vhpc"));
	for (int i = 0; i < c->o->argc; i++)
		json_object_array_add(cmd, json_object_new_string(c->o->argv[i]));
	json_object_object_add(doc, "command", cmd);
	json_object_object_add(doc, "config", config_json(c));
	json_object_object_add(doc, "native", side_json(c, BH_NATIVE));
	json_object_object_add(doc, "guest", side_json(c, BH_GUEST));
	json_object_object_add(doc, "machine", json_object_get(machine));
	json_object_object_add(doc, "machine_state", bh_trip_json(c));
	json_object_object_add(doc, "metrics", bh_results_to_json(&c->res));
	text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	snprintf(path, sizeof(path), "%s/results.json", c->dir);
	rc = text ? write_file_atomic(path, text, strlen(text), 0644, err) : verr_set(err, "out of memory");
	json_object_put(doc);
	return rc;
}

static bool imb_table(const struct bh_ctx *c)
{
	return c->o->table && !strcmp(c->o->table, "imb");
}

static int write_one(struct bh_ctx *c, const char *name, void (*fn)(FILE *, const struct bh_ctx *),
		     struct verr *err)
{
	char path[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", c->dir, name);
	if (!(f = fopen(path, "w")))
		return verr_errno(err, "%s", path);
	fn(f, c);
	if (fclose(f) != 0)
		return verr_errno(err, "%s", path);
	return 0;
}

/* results.txt always; with --table imb, imb.txt too, and that on stdout. */
static int write_table(struct bh_ctx *c, struct verr *err)
{
	(imb_table(c) ? bh_imb_table : bh_table)(stdout, c);
	fflush(stdout);
	if (write_one(c, "results.txt", bh_table, err) < 0)
		return -1;
	return imb_table(c) ? write_one(c, "imb.txt", bh_imb_table, err) : 0;
}

static int setup(struct bh_ctx *c, const struct bench_opts *o, struct verr *err)
{
	const char *suite = o->suite ? o->suite : "mpi";

	c->o = o;
	if (!(c->s = bh_suite_find(suite)))
		return verr_set(err, "--suite: expected mpi, net, mem or sys, got '%s'", suite);
	c->ncores = bh_host_cores();
	c->guests = o->guests > 0 ? o->guests : c->s->def_guests;
	c->ranks = o->ranks > 0 ? o->ranks : c->s->def_ranks > 0 ? c->s->def_ranks : c->ncores;
	c->reps = o->reps > 0 ? o->reps : 5;
	if (c->reps > BH_MAX_REPS)
		return verr_set(err, "--reps %d: at most %d", c->reps, BH_MAX_REPS);
	if (o->seconds > 0 && c->s->def_seconds <= 0)
		return verr_set(err, "--time: the %s suite has no duration per test", c->s->name);
	if (o->seconds > 0 && !(o->seconds >= 0.001 && o->seconds <= 3600))
		return verr_set(err, "--time: expected seconds from 0.001 to 3600");
	c->seconds = o->seconds > 0 ? o->seconds : c->s->def_seconds;
	if (resolve_sizes(c, err) < 0)
		return -1;
	if (o->imb) {
		struct stat st;

		if (strcmp(c->s->name, "mpi"))
			return verr_set(err, "--imb: only the mpi suite runs IMB");
		if (!realpath(o->imb, c->imb))
			return verr_errno(err, "--imb %s", o->imb);
		if (stat(c->imb, &st) < 0 || !S_ISREG(st.st_mode) || access(c->imb, X_OK) < 0)
			return verr_set(err, "--imb %s: not an executable file", o->imb);
		if (strpbrk(c->imb, " \t\n'\"\\$`;&|<>*?()"))
			return verr_set(err, "--imb %s: a path without spaces or shell characters, please", c->imb);
	}
	if (o->iter) {
		if (strcmp(c->s->name, "mpi"))
			return verr_set(err, "--iter: only the mpi suite takes a repetition count");
		if (bh_parse_iter(o->iter, &c->iter, err) < 0)
			return -1;
	}
	if (o->native_btl) {
		if (strcmp(c->s->name, "mpi"))
			return verr_set(err, "--native-btl: only the mpi suite's native ranks talk MPI");
		if (!*o->native_btl || strspn(o->native_btl, "abcdefghijklmnopqrstuvwxyz0123456789_,^") != strlen(o->native_btl))
			return verr_set(err, "--native-btl: expected Open MPI BTL names such as self,tcp, got '%s'", o->native_btl);
	}
	if (o->benchmarks && strcmp(c->s->name, "mpi"))
		return verr_set(err, "--benchmarks: only the mpi suite runs MPI benchmarks");
	if (o->table && strcmp(o->table, "imb") && strcmp(o->table, "metrics"))
		return verr_set(err, "--table: expected imb or metrics, got '%s'", o->table);
	if (o->table && !strcmp(o->table, "imb") && strcmp(c->s->name, "mpi"))
		return verr_set(err, "--table imb: only the mpi suite's results are IMB tables");
	if (o->fabric && strcmp(c->s->name, "mpi"))
		return verr_set(err, "--fabric: only the mpi suite's ranks talk over a fabric");
	if (o->no_single_copy && (o->no_vmshm || o->fabric))
		return verr_set(err, "--no-single-copy: the single copy is vmshm's, which %s leaves out",
				o->fabric ? "--fabric" : "--no-vmshm");
	if (o->native_env) {
		const char *eq = strchr(o->native_env, '=');
		size_t n = eq ? (size_t)(eq - o->native_env) : 0;

		if (strcmp(c->s->name, "mpi"))
			return verr_set(err, "--native-env: only the mpi suite's native ranks are started by mpirun");
		const char *ctl = o->native_env + strcspn(o->native_env, "\n\r\t\v\f");
		char shown[81];
		size_t k;

		/* Shown on one line: control characters as '?'. */
		for (k = 0; k + 1 < sizeof(shown) && o->native_env[k]; k++)
			shown[k] = (unsigned char)o->native_env[k] < 0x20 ? '?' : o->native_env[k];
		shown[k] = 0;
		if (!n || strspn(o->native_env, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != n ||
		    (o->native_env[0] >= '0' && o->native_env[0] <= '9'))
			return verr_set(err, "--native-env: expected NAME=VALUE with a name of letters, digits "
					"and _, got '%s'", shown);
		if (*ctl)
			return verr_set(err, "--native-env: the value has a control character (0x%02x) at offset %td: '%s'",
					(unsigned char)*ctl, ctl - o->native_env, shown);
	}
	snprintf(c->driver, sizeof(c->driver), "%s", o->driver_used ? o->driver_used : "container");
	snprintf(c->driver_why, sizeof(c->driver_why), "%s", o->driver_why ? o->driver_why : "");
	if (o->image) {
		if (!ident_ok(o->image, 64))
			return verr_set(err, "--image: '%s' is not an image name", o->image);
		snprintf(c->image, sizeof(c->image), "%s", o->image);
	}
	if (c->imb[0])
		bh_imb_image_name(c);
	snprintf(c->self, sizeof(c->self), "%s", self_dir());
	bh_results_init(&c->res, (size_t)c->reps);
	return 0;
}

static void ctx_free(struct bh_ctx *c)
{
	free(c->trip_ns);
	free(c->vmshm);
	for (size_t i = 0; i < c->nruns; i++)
		bh_argv_free(c->runs[i].argv);
	free(c->runs);
	free(c->sizes);
	bh_results_free(&c->res);
}

int bench_run(const struct bench_opts *o)
{
	struct bh_ctx c;
	struct verr err;
	struct json_object *machine = NULL;
	int rc = EXIT_BADOPT;
	struct bh_chart chart;

	memset(&c, 0, sizeof(c));
	if (setup(&c, o, &err) < 0 || choose_dir(&c, &err) < 0 || c.s->plan(&c, &err) < 0) {
		say("%s", err.msg);
		goto out;
	}
	rc = EXIT_FAILED;
	if (create_dir(&c, &err) < 0 || (c.s->prepare && c.s->prepare(&c, &err) < 0)) {
		say("%s", err.msg);
		goto out;
	}
	utc_now(c.started, sizeof(c.started));
	if (c.imb[0] && bh_imb_image(&c, &err) < 0) {
		say("%s", err.msg);
		goto out;
	}
	machine = bh_machine(&c);
	bh_trip_setup(&c);
	say("%s suite, %d repetitions, results in %s", c.s->name, c.reps, c.dir);
	say("native: %s", c.native_how);
	say("guest:  %s", c.guest_how);
	/* Pairs of runs (native, guest); the order flips every pair and
	 * repetition, so slow drift of the machine hits both sides alike. */
	for (size_t rep = 0; rep < (size_t)c.reps; rep++) {
		bh_trip_measure(&c, rep);
		for (size_t k = 0; k + 1 < c.nruns; k += 2) {
			double secs[2] = { 0, 0 };
			char note[64];

			for (int j = 0; j < 2; j++) {
				size_t i = k + (size_t)((j + rep + k / 2) % 2);
				int r = one_run(&c, &c.runs[i], rep, &secs[c.runs[i].side]);

				if (r) {
					rc = r;
					goto out;
				}
			}
			say("repetition %zu/%d%s%s: native %.2f s, guest %.2f s%s", rep + 1, c.reps,
			    c.runs[k].tag[0] ? ", " : "", c.runs[k].tag, secs[BH_NATIVE], secs[BH_GUEST],
			    k == 0 ? bh_trip_note(&c, rep, note, sizeof(note)) : "");
		}
	}
	bh_results_finish(&c.res);
	chart = (struct bh_chart){ c.dir, c.s->name, c.driver, c.reps, &c.res };
	if (write_results(&c, machine, &err) < 0 || write_table(&c, &err) < 0) {
		say("%s", err.msg);
		goto out;
	}
	if (bh_plot(&c, &err) < 0 || bh_ratio_write(&chart, &err) < 0 ||
	    bh_gnuplot(c.dir, "ratio.gp", "ratio.png", &err) < 0) {
		say("plot: %s (the results are in %s)", err.msg, c.dir);
		goto out;
	}
	printf("# results: %s (results.json, results.txt, %splot.png, ratio.png, raw/)\n", c.dir,
	       imb_table(&c) ? "imb.txt, " : "");
	rc = 0;
out:
	json_object_put(machine);
	ctx_free(&c);
	return rc;
}
