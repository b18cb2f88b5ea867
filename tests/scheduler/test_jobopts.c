/* The job option table (lib/jobopts.c) and what vhpc run, submit and the
 * Slurm plugin make of it: getopt_long's arrays, --help, the errors. */
#include "lib/config.h"
#include "lib/jobopts.h"
#include "lib/fabric.h"
#include "lib/jobspec.h"
#include "scheduler/jobjson.h"
#include <json-c/json.h>
#include "scheduler/cli/cli.h"
#include "scheduler/cli/jobargs.h"
#include "scheduler/cli/optgen.h"
#include "slurm/slurm.h"
#include "tests/fixture.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* The last usage error, instead of stderr. */
static char said[1024];

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(said, sizeof(said), "vhpc %s: ", cmd);

	va_start(ap, fmt);
	vsnprintf(said + n, sizeof(said) - n, fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

static int helped;

static void help(void)
{
	helped++;
}

static int parse(struct job_spec *j, const char *a0, const char *a1, const char *a2)
{
	char *argv[] = { "run", (char *)a0, (char *)a1, (char *)a2, "--", "true", NULL };
	struct embedded_opts eo;
	int argc = 6;

	/* Shift out the NULL arguments not given. */
	for (int i = 3; i > 0; i--)
		if (!argv[i]) {
			memmove(&argv[i], &argv[i + 1], (argc - i) * sizeof(char *));
			argc--;
		}
	said[0] = 0;
	return job_args_parse("run", argc, argv, j, &eo, help);
}

static void every_row_is_whole_and_unique(void **state)
{
	(void)state;
	for (const struct job_opt *r = job_opts; r->o.id; r++) {
		assert_true(r->o.name || r->o.letter);
		assert_non_null(r->o.help);
		assert_true(r->o.help[0]);
		assert_true(r->fronts);
		assert_true(r->o.id < JO_ID_END);
		assert_ptr_equal(job_opt_by_id(r->o.id), r);
		if (r->fronts & JO_SLURM)
			assert_non_null(r->slurm_help);
		for (const struct job_opt *q = job_opts; q < r; q++) {
			assert_int_not_equal(q->o.id, r->o.id);
			if (q->o.name && r->o.name)
				assert_string_not_equal(q->o.name, r->o.name);
			if (q->o.letter)
				assert_int_not_equal(q->o.letter, r->o.letter);
		}
	}
}

/* A flag and its job file key are one declaration: the kinds agree. */
static void rows_with_a_key_are_fields_of_the_job_file(void **state)
{
	(void)state;
	for (const struct job_opt *r = job_opts; r->o.id; r++) {
		const struct cf_field *f = job_args_field(r->key);

		if (!r->key) {
			assert_int_equal(r->kind, JO_OWN);
			continue;
		}
		assert_non_null(f);
		switch (r->kind) {
		case JO_NUMBER: case JO_DURATION: assert_int_equal(f->kind, CF_INT); break;
		case JO_SIZE: assert_int_equal(f->kind, CF_SIZE); break;
		case JO_CHOICE: assert_int_equal(f->kind, CF_ENUM); break;
		case JO_NAME: assert_int_equal(f->kind, CF_STR); break;
		case JO_SET: case JO_CLEAR: assert_int_equal(f->kind, CF_BOOL); break;
		default: break;
		}
		if (r->kind != JO_OWN && r->kind != JO_SET && r->kind != JO_CLEAR && r->kind != JO_CHOICE)
			assert_non_null(r->expect);
		/* Their errors say the range, so there must be one. */
		if (r->kind == JO_NUMBER || r->kind == JO_SIZE || r->kind == JO_DURATION)
			assert_true(f->min > 0 && f->max > f->min);
	}
}

static void help_lists_every_row(void **state)
{
	char *text = NULL, want[64];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	job_args_help(f);
	fclose(f);
	for (const struct job_opt *r = job_opts; r->o.id; r++) {
		if (!(r->fronts & JO_RUN))
			continue;
		if (r->o.name)
			snprintf(want, sizeof(want), "--%s%s%s", r->o.name, r->o.arg ? " " : "", r->o.arg ? r->o.arg : "");
		else
			snprintf(want, sizeof(want), "-%c %s", r->o.letter, r->o.arg);
		if (!strstr(text, want))
			fail_msg("--help lacks '%s':\n%s", want, text);
		/* Each line of the row's words, at its column. */
		assert_non_null(strstr(text, strtok(strdupa(r->o.help), "\n")));
	}
	free(text);
}

static void getopt_arrays_match_the_rows(void **state)
{
	struct optset s = { .n = 0 };
	struct option longs[OPTGEN_MAX + 1];
	char shorts[2 * OPTGEN_MAX + 3];
	size_t nl = 0;

	(void)state;
	optset_jobs(&s, JO_RUN);
	optset_getopt(&s, "+:", longs, shorts, sizeof(shorts));
	assert_memory_equal(shorts, "+:", 2);
	for (size_t i = 0; i < s.n; i++) {
		const struct opt *o = s.v[i];

		if (o->name) {
			assert_string_equal(longs[nl].name, o->name);
			assert_int_equal(longs[nl].has_arg, o->arg ? required_argument : no_argument);
			assert_int_equal(longs[nl].val, o->id);
			nl++;
		}
		if (o->letter) {
			const char *p = strchr(shorts + 2, o->letter);

			assert_non_null(p);
			assert_int_equal(p[1] == ':', o->arg != NULL);
		}
	}
	assert_null(longs[nl].name);
}

/* Every option with a value refuses a bad one by its own name. */
static void a_bad_value_names_the_option(void **state)
{
	struct job_spec j;
	char opt[40];

	(void)state;
	for (const struct job_opt *r = job_opts; r->o.id; r++) {
		if (!r->o.arg || r->o.id == JO_JOB || r->o.id == JO_TOPOLOGY || r->o.id == JO_USER)
			continue;
		assert_int_equal(parse(&j, opt_spelling(&r->o, opt, sizeof(opt)), "=../bad value", NULL), EXIT_USAGE);
		if (!strstr(said, opt))
			fail_msg("%s: the error does not name it: %s", opt, said);
	}
	assert_int_equal(parse(&j, "--mem", "lots", NULL), EXIT_USAGE);
	assert_string_equal(said, "vhpc run: --mem: expected a size from 64M to 4T such as 512M or 2G, got 'lots'");
	assert_int_equal(parse(&j, "--mem", NULL, NULL), EXIT_USAGE);
	assert_string_equal(said, "vhpc run: --mem: expected a size from 64M to 4T such as 512M or 2G, got '--'");
	assert_int_equal(parse(&j, "--vcpus", "0", NULL), EXIT_USAGE);
	assert_string_equal(said, "vhpc run: --vcpus: expected 1..512, got '0'");
	assert_int_equal(parse(&j, "--map-by", "core", NULL), EXIT_USAGE);
	assert_string_equal(said, "vhpc run: --map-by: expected node or slot, got 'core'");
	assert_int_equal(parse(&j, "--frobnicate", NULL, NULL), EXIT_USAGE);
	assert_string_equal(said, "vhpc run: unknown option '--frobnicate'");
}

static void values_land_in_the_job(void **state)
{
	struct job_spec j;
	char *argv[] = { "run", "-N", "2", "--mem", "1G", "--timeout", "10m", "--map-by", "slot", "--no-vmshm",
			 "--driver", "container", "-x", "A=1", "--oversubscribe", "--scratch", "1G", "ls", "-l", NULL };
	struct embedded_opts eo;

	(void)state;
	assert_int_equal(job_args_parse("run", 19, argv, &j, &eo, help), 0);
	assert_int_equal(j.guests, 2);
	assert_int_equal(j.ranks, 2);
	assert_int_equal(j.mem, 1ull << 30);
	assert_int_equal(j.timeout, 600);
	assert_int_equal(j.map_by, MAP_BY_SLOT);
	assert_false(j.vmshm);
	assert_true(j.oversubscribe);
	assert_string_equal(vhpc_driver_name(j.driver), "container");
	assert_int_equal(j.scratch, 1ull << 30);
	assert_string_equal(j.env.key[0], "A");
	assert_int_equal(j.command.n, 2);
	assert_string_equal(j.command.v[1], "-l");
	job_spec_free(&j);
	/* Not given: the cluster file's defaults apply later. */
	assert_int_equal(parse(&j, NULL, NULL, NULL), 0);
	assert_int_equal(j.driver, -1);
	assert_int_equal(j.mem, 0);
	assert_int_equal(j.timeout, 0);
	job_spec_free(&j);
	helped = 0;
	assert_int_equal(parse(&j, "--help", NULL, NULL), 1);
	assert_int_equal(helped, 1);
}

/* Writes text as the job file at path, and loads it. */
static int load_job_file(const char *path, const char *text, struct job_spec *j, struct verr *e)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return job_spec_load(path, j, e);
}

/* --rdma, --no-rdma and --device through vhpc run/submit, a job file and
 * the submit message; hostile values are refused naming the flag. */
static void fabric_and_devices_through_every_front_end(void **state)
{
	char dir[256], path[300];
	struct embedded_opts eo;
	struct job_spec j, back;
	struct json_object *o;
	struct verr e;

	(void)state;
	{
		char *argv[] = { "run", "--rdma", "--device", "gpu:2", "--device", "nic", "--device", "gpu", "true", NULL };

		assert_int_equal(job_args_parse("run", 9, argv, &j, &eo, help), 0);
		assert_int_equal(j.rdma, JOB_RDMA_ON);
		assert_int_equal(j.devices.n, 2);
		assert_string_equal(j.devices.v[0], "gpu");
		assert_string_equal(j.devices.v[1], "nic");
		/* the submit message carries them, and checks them again */
		o = job_spec_to_json(&j);
		assert_int_equal(job_spec_from_json(o, &back, &e), 0);
		assert_int_equal(back.rdma, JOB_RDMA_ON);
		assert_int_equal(back.devices.n, 2);
		job_spec_free(&back);
		json_object_object_add(o, "devices", json_tokener_parse("[\"../../dev/vfio/vfio\"]"));
		assert_int_equal(job_spec_from_json(o, &back, &e), -1);
		assert_non_null(strstr(e.msg, "device '../../dev/vfio/vfio': expected CLASS[:N]"));
		json_object_object_add(o, "devices", json_tokener_parse("[\"../vfio\"]"));
		assert_int_equal(job_spec_from_json(o, &back, &e), -1);
		assert_non_null(strstr(e.msg, "not a class name"));
		json_object_object_add(o, "devices", json_tokener_parse("[\"gpu:99\"]"));
		assert_int_equal(job_spec_from_json(o, &back, &e), -1);
		assert_non_null(strstr(e.msg, "1..16"));
		json_object_object_add(o, "devices", json_tokener_parse("[\"gpu\"]"));
		json_object_object_add(o, "rdma", json_object_new_string("yes"));
		assert_int_equal(job_spec_from_json(o, &back, &e), -1);
		assert_non_null(strstr(e.msg, "\"rdma\""));
		json_object_put(o);
		job_spec_free(&j);
	}
	{
		char *argv[] = { "run", "--rdma", "--no-rdma", "true", NULL };

		assert_int_equal(job_args_parse("run", 4, argv, &j, &eo, help), 0);
		assert_int_equal(j.rdma, JOB_RDMA_OFF);
		job_spec_free(&j);
	}
	assert_int_equal(parse(&j, NULL, NULL, NULL), 0);
	assert_int_equal(j.rdma, JOB_RDMA_AUTO);
	assert_int_equal(j.devices.n, 0);
	job_spec_free(&j);
	assert_int_equal(parse(&j, "--device", "../sys/pci", NULL), EXIT_USAGE);
	assert_non_null(strstr(said, "vhpc run: --device: device '../sys/pci': class"));
	assert_int_equal(parse(&j, "--device", "gpu:17", NULL), EXIT_USAGE);
	assert_non_null(strstr(said, "--device: device 'gpu:17': expected a count of 1..16"));
	assert_int_equal(parse(&j, "--device", "0000:00:05.0", NULL), EXIT_USAGE);
	assert_non_null(strstr(said, "--device"));
	/* a job file's keys */
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "jobopts"), 0);
	snprintf(path, sizeof(path), "%s/job.yaml", dir);
	assert_int_equal(load_job_file(path, "guests: 2\nrdma: off\ndevices: [vf:2]\ncommand: [hostname]\n", &j, &e), 0);
	assert_int_equal(j.rdma, JOB_RDMA_OFF);
	assert_string_equal(j.devices.v[0], "vf:2");
	job_spec_free(&j);
	assert_int_equal(load_job_file(path, "guests: 2\nrdma: maybe\ncommand: [hostname]\n", &j, &e), -1);
	assert_non_null(strstr(e.msg, ":2:"));
	assert_int_equal(load_job_file(path, "guests: 2\ndevices: [\"gpu/../x\"]\ncommand: [hostname]\n", &j, &e), -1);
	assert_non_null(strstr(e.msg, "job.yaml"));
	assert_non_null(strstr(e.msg, "not a class name"));
	assert_int_equal(fx_rmdir(dir), 0);
}

/* --no-single-copy through vhpc run/submit, a job file and the submit
 * message: the job keeps vmshm; left out, single copy is on; a bad value
 * is refused naming the key and where. */
static void single_copy_through_every_front_end(void **state)
{
	char dir[256], path[300];
	struct job_spec j, back;
	struct json_object *o;
	struct verr e;

	(void)state;
	assert_int_equal(parse(&j, NULL, NULL, NULL), 0);
	assert_true(j.single_copy);
	assert_true(j.vmshm);
	job_spec_free(&j);
	assert_int_equal(parse(&j, "--no-single-copy", NULL, NULL), 0);
	assert_false(j.single_copy);
	assert_true(j.vmshm);
	o = job_spec_to_json(&j);
	assert_int_equal(job_spec_from_json(o, &back, &e), 0);
	assert_false(back.single_copy);
	assert_true(back.vmshm);
	job_spec_free(&back);
	json_object_put(o);
	job_spec_free(&j);
	assert_int_equal(parse(&j, "--no-single-copy=1", NULL, NULL), EXIT_USAGE);
	assert_non_null(strstr(said, "--no-single-copy"));
	/* a job file's key */
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "jobopts"), 0);
	snprintf(path, sizeof(path), "%s/job.yaml", dir);
	assert_int_equal(load_job_file(path, "guests: 2\nsingle_copy: false\ncommand: [hostname]\n", &j, &e), 0);
	assert_false(j.single_copy);
	assert_true(j.vmshm);
	job_spec_free(&j);
	assert_int_equal(load_job_file(path, "guests: 2\ncommand: [hostname]\n", &j, &e), 0);
	assert_true(j.single_copy);
	job_spec_free(&j);
	assert_int_equal(load_job_file(path, "guests: 2\nsingle_copy: maybe\ncommand: [hostname]\n", &j, &e), -1);
	if (!strstr(e.msg, "job.yaml:2") || !strstr(e.msg, "single_copy"))
		fail_msg("the error does not name the file, line and key: %s", e.msg);
	assert_int_equal(fx_rmdir(dir), 0);
}

/* Flags before --job lose to the file, later ones win over it. */
static void a_job_file_is_taken_whole_then_overridden(void **state)
{
	char dir[256], path[300];
	struct embedded_opts eo;
	struct job_spec j;
	FILE *f;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "jobopts"), 0);
	snprintf(path, sizeof(path), "%s/job.yaml", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("guests: 2\nranks: 4\nmem: 1G\ncommand: [hostname]\n", f);
	fclose(f);
	{
		char *argv[] = { "submit", "-N", "3", "--mem", "2G", "--job", path, "--mem", "768M", NULL };

		assert_int_equal(job_args_parse("submit", 9, argv, &j, &eo, help), 0);
		assert_int_equal(j.guests, 2);
		assert_int_equal(j.ranks, 4);
		assert_int_equal(j.mem, 768ull << 20);
		assert_string_equal(j.command.v[0], "hostname");
		job_spec_free(&j);
	}
	{
		char *argv[] = { "submit", "--job", path, "--job", path, NULL };

		assert_int_equal(job_args_parse("submit", 5, argv, &j, &eo, help), EXIT_USAGE);
		assert_string_equal(said, "vhpc submit: --job given twice");
	}
	assert_int_equal(fx_rmdir(dir), 0);
}

static void slurm_takes_its_rows_from_the_table(void **state)
{
	int n = 0;

	(void)state;
	for (const struct job_opt *r = job_opts; r->o.id; r++)
		n += !!(r->fronts & JO_SLURM);
	assert_int_equal(n, VS_NOPTS);
	for (int i = 0; i < VS_NOPTS; i++)
		assert_int_equal(vs_opt_index(vs_opt_row(i)->o.id), i);
	assert_null(vs_opt_row(VS_NOPTS));
	assert_string_equal(vs_opt_row(0)->o.name, "image");
	assert_int_equal(vs_opt_index(JO_TUNING), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_row_is_whole_and_unique),
		cmocka_unit_test(rows_with_a_key_are_fields_of_the_job_file),
		cmocka_unit_test(help_lists_every_row),
		cmocka_unit_test(getopt_arrays_match_the_rows),
		cmocka_unit_test(a_bad_value_names_the_option),
		cmocka_unit_test(values_land_in_the_job),
		cmocka_unit_test(a_job_file_is_taken_whole_then_overridden),
		cmocka_unit_test(slurm_takes_its_rows_from_the_table),
		cmocka_unit_test(fabric_and_devices_through_every_front_end),
		cmocka_unit_test(single_copy_through_every_front_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
