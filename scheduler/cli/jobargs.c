/* The options of `vhpc run` and `vhpc submit`: flags (or a job file) to a
 * job spec. */
#include "lib/binds.h"
#include "lib/err.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "cli.h"
#include "jobargs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_duration(const char *s, long long *out)
{
	long long v, mult = 1;
	char *end;
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
	if (parse_ll(buf, 1, 366LL * 86400, &v) < 0)
		return -1;
	(void)end;
	if (v * mult > 366LL * 86400)
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

enum { O_VCPUS = 256, O_MEM, O_IMAGE, O_TUNING, O_DRIVER, O_TIMEOUT, O_OVERSUB, O_MAPBY,
       O_NOVMSHM, O_JOB, O_TOPOLOGY, O_HELP, O_EMUKVM, O_SCRATCH, O_USER, O_BIND, O_CHDIR };

int job_args_parse(const char *cmd, int argc, char **argv, struct job_spec *out,
		   struct embedded_opts *eo_out, void (*help)(void))
{
	static const struct option opts[] = {
		{ "guests", required_argument, NULL, 'N' },
		{ "ranks", required_argument, NULL, 'n' },
		{ "vcpus", required_argument, NULL, O_VCPUS },
		{ "mem", required_argument, NULL, O_MEM },
		{ "image", required_argument, NULL, O_IMAGE },
		{ "tuning", required_argument, NULL, O_TUNING },
		{ "driver", required_argument, NULL, O_DRIVER },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "oversubscribe", no_argument, NULL, O_OVERSUB },
		{ "map-by", required_argument, NULL, O_MAPBY },
		{ "no-vmshm", no_argument, NULL, O_NOVMSHM },
		{ "scratch", required_argument, NULL, O_SCRATCH },
		{ "job", required_argument, NULL, O_JOB },
		{ "topology", required_argument, NULL, O_TOPOLOGY },
		{ "allow-emulated-kvm", no_argument, NULL, O_EMUKVM },
		{ "user", required_argument, NULL, O_USER },
		{ "bind", required_argument, NULL, O_BIND },
		{ "chdir", required_argument, NULL, O_CHDIR },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 }
	};
	struct job_spec j;
	struct embedded_opts eo = { 0 };
	struct verr err;
	bool have_ranks = false, have_job = false;
	int c, rc;
	long long v;
	uint64_t sz;

	job_spec_defaults(&j);
	j.driver = -1;
	j.mem = 0;
	j.timeout = 0;
	optind = 1;
	opterr = 0;
	/* "+": options stop at the command, so its own flags are its own. */
	/* ":" first: a missing value is reported as such, not as an unknown option. */
	while ((c = getopt_long(argc, argv, "+:N:n:x:h", opts, NULL)) != -1) {
		switch (c) {
		case 'N':
			if (parse_ll(optarg, 1, 4096, &v) < 0)
				return usage_error(cmd, "-N: expected a number of guests in 1..4096, got '%s'", optarg);
			j.guests = v;
			break;
		case 'n':
			if (parse_ll(optarg, 1, 1 << 20, &v) < 0)
				return usage_error(cmd, "-n: expected a number of ranks in 1..1048576, got '%s'", optarg);
			j.ranks = v;
			have_ranks = true;
			break;
		case O_VCPUS:
			if (parse_ll(optarg, 1, 512, &v) < 0)
				return usage_error(cmd, "--vcpus: expected 1..512, got '%s'", optarg);
			j.vcpus = v;
			break;
		case O_MEM:
			if (parse_size(optarg, &sz) < 0 || sz < (64u << 20) || sz > (1ull << 42))
				return usage_error(cmd, "--mem: expected a size from 64M to 4T such as 512M or 2G, got '%s'", optarg);
			j.mem = sz;
			break;
		case O_IMAGE:
			if (!ident_ok(optarg, 64))
				return usage_error(cmd, "--image: '%s' is not an image name", optarg);
			free(j.image);
			j.image = strdup(optarg);
			break;
		case O_TUNING:
			if (!ident_ok(optarg, 64))
				return usage_error(cmd, "--tuning: '%s' is not a profile name", optarg);
			free(j.tuning);
			j.tuning = strdup(optarg);
			break;
		case O_DRIVER:
			if ((j.driver = vhpc_driver_index(optarg)) < 0)
				return usage_error(cmd, "--driver: expected " VHPC_DRIVER_CHOICES ", got '%s'", optarg);
			break;
		case O_TIMEOUT:
			if (parse_duration(optarg, &v) < 0)
				return usage_error(cmd, "--timeout: expected seconds or a duration like 30s, 10m, 2h (at most 366d), got '%s'", optarg);
			j.timeout = v;
			break;
		case O_OVERSUB:
			j.oversubscribe = true;
			break;
		case O_MAPBY:
			if (!strcmp(optarg, "node"))
				j.map_by = MAP_BY_NODE;
			else if (!strcmp(optarg, "slot"))
				j.map_by = MAP_BY_SLOT;
			else
				return usage_error(cmd, "--map-by: expected node or slot, got '%s'", optarg);
			break;
		case O_NOVMSHM:
			j.vmshm = false;
			break;
		case O_SCRATCH:
			if (parse_size(optarg, &sz) < 0 || sz < JOB_SCRATCH_MIN || sz > JOB_SCRATCH_MAX)
				return usage_error(cmd, "--scratch: expected a size from 16M to 64T such as 1G, got '%s'", optarg);
			j.scratch = sz;
			break;
		case O_JOB: {
			struct job_spec fj;

			if (have_job)
				return usage_error(cmd, "--job given twice");
			if (job_spec_load(optarg, &fj, &err) < 0) {
				log_err("%s", err.msg);
				return EXIT_USAGE;
			}
			/* Flags before --job are overridden by the file; say so
			 * by taking the file whole and re-reading later flags. */
			job_spec_free(&j);
			j = fj;
			have_ranks = j.ranks > 0;
			have_job = true;
			break;
		}
		case 'x':
			if ((rc = job_args_env(&j, optarg, cmd)) != 0) {
				job_spec_free(&j);
				return rc;
			}
			break;
		case O_BIND:
			if ((rc = add_bind(&j, optarg, cmd)) != 0) {
				job_spec_free(&j);
				return rc;
			}
			break;
		case O_CHDIR: {
			char why[512];

			if (bind_path_check("--chdir", optarg, why, sizeof(why)) < 0) {
				job_spec_free(&j);
				return usage_error(cmd, "%s", why);
			}
			free(j.workdir);
			j.workdir = strdup(optarg);
			break;
		}
		case O_TOPOLOGY:
			eo.topology = optarg;
			break;
		case O_EMUKVM:
			eo.allow_emulated_kvm = true;
			break;
		case O_USER:
			/* Checked before anything else can fail, so the answer to
			 * an ordinary user is this and not a missing service. */
			if (geteuid() != 0) {
				job_spec_free(&j);
				return usage_error(cmd, "--user is root's: an ordinary user's jobs always run as that user");
			}
			eo.user = optarg;
			break;
		case O_HELP:
		case 'h':
			help();
			job_spec_free(&j);
			return 1;
		case ':':
			return usage_error(cmd, "%s needs a value", argv[optind - 1]);
		default:
			return usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc) {
		if (j.command.n) {
			for (size_t i = 0; i < j.command.n; i++)
				free(j.command.v[i]);
			free(j.command.v);
		}
		j.command.n = argc - optind;
		j.command.v = calloc(j.command.n + 1, sizeof(char *));
		for (size_t i = 0; i < j.command.n; i++)
			j.command.v[i] = strdup(argv[optind + i]);
	}
	if (!j.command.n) {
		job_spec_free(&j);
		return usage_error(cmd, "no command: vhpc %s [OPTIONS] -- COMMAND [ARGS...]", cmd);
	}
	/* The option is kvm's by its name; auto is checked once resolved. */
	if (eo.allow_emulated_kvm && j.driver > DRIVER_AUTO && strcmp(vhpc_driver_names[j.driver], "kvm")) {
		job_spec_free(&j);
		return usage_error(cmd, "--allow-emulated-kvm applies to --driver kvm only");
	}
	if (!have_ranks)
		j.ranks = j.guests * (j.vcpus ? j.vcpus : 1);
	/* Where the job was submitted, as Slurm runs a job there; a path
	 * that cannot be shared is said at planning, not refused here. */
	if (!j.workdir) {
		char cwd[4096];
		char why[512];

		if (getcwd(cwd, sizeof(cwd)) && bind_path_check("the submission directory", cwd, why, sizeof(why)) == 0)
			j.workdir = strdup(cwd);
		else
			log_info("the job will run in /tmp: %s", getcwd(cwd, sizeof(cwd)) ? why : "the current directory is unreachable");
	}
	if (job_spec_check(&j, &err) < 0) {
		job_spec_free(&j);
		return usage_error(cmd, "%s", err.msg);
	}
	*out = j;
	*eo_out = eo;
	return 0;
}
