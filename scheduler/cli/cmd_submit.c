/* vhpc submit: a job to vhpc-ctld (a job file, or the flags of vhpc run);
 * and cluster_run, which is `vhpc run` when a cluster is configured. */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "cli.h"
#include "client.h"
#include "jobargs.h"
#include "scheduler/jobjson.h"

#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void submit_usage(void)
{
	printf("usage: vhpc submit [--json] JOB.yaml [OPTIONS]\n"
	       "       vhpc submit [--json] [OPTIONS] -- COMMAND [ARGS...]\n"
	       "\n"
	       "Queues a job with vhpc-ctld and prints its id.  The job is a job file\n"
	       "(configs/jobs/*.yaml; later options override it) or the options of\n"
	       "`vhpc run` (see vhpc run --help).  --json prints {\"id\": N}.\n"
	       "Then: vhpc queue, vhpc wait ID, vhpc output ID, vhpc cancel ID.\n");
}

static int submit(const char *ctl, const struct job_spec *j, int64_t *id, struct verr *err)
{
	struct json_object *req = json_object_new_object(), *rep;
	int rc;

	json_object_object_add(req, "type", json_object_new_string("submit"));
	json_object_object_add(req, "job", job_spec_to_json(j));
	rc = client_call(ctl, req, &rep, 30000, err);
	json_object_put(req);
	if (rc < 0)
		return -1;
	*id = client_int(rep, "id", 0);
	json_object_put(rep);
	return *id > 0 ? 0 : verr_set(err, "vhpc-ctld answered without a job id");
}

int cmd_submit(int argc, char **argv)
{
	struct job_spec j;
	struct embedded_opts eo;
	struct verr err;
	char ctl[300], **av;
	bool json = false;
	int64_t id;
	int r, ac = 0;

	/* --restart CKPT: the checkpoint's job, nothing else (vhpc restart). */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--restart") || !strncmp(argv[i], "--restart=", 10))
			return cmd_restart(argc, argv);
	/* `--json` and a leading JOB.yaml are ours; the rest is vhpc run's. */
	av = calloc((size_t)argc + 3, sizeof(char *));
	if (!av)
		return EXIT_VHPC;
	av[ac++] = argv[0];
	for (int i = 1; i < argc; i++) {
		size_t n = strlen(argv[i]);

		if (!strcmp(argv[i], "--"))
			while (i < argc)
				av[ac++] = argv[i++];
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] != '-' && n > 5 &&
			 (!strcmp(argv[i] + n - 5, ".yaml") || !strcmp(argv[i] + n - 4, ".yml"))) {
			av[ac++] = "--job";
			av[ac++] = argv[i];
		} else
			av[ac++] = argv[i];
	}
	r = job_args_parse("submit", ac, av, &j, &eo, submit_usage);
	free(av);
	if (r)
		return r == 1 ? 0 : r;
	if (eo.topology) {
		job_spec_free(&j);
		return usage_error("submit", "--topology is for vhpc run on this machine only");
	}
	if ((r = client_need_controller("submit", ctl, sizeof(ctl)))) {
		job_spec_free(&j);
		return r;
	}
	r = submit(ctl, &j, &id, &err);
	job_spec_free(&j);
	if (r < 0) {
		fprintf(stderr, "vhpc submit: %s\n", err.msg);
		return EXIT_VHPC;
	}
	if (json)
		printf("{\"id\": %lld}\n", (long long)id);
	else
		printf("Submitted job %lld\n", (long long)id);
	return 0;
}

/* ------------------------------------------------------------ cluster_run */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	if (!interrupted)
		interrupted = sig;
}

static int cancel_job(const char *ctl, int64_t id)
{
	struct json_object *req = json_object_new_object(), *rep;
	struct verr e;
	int rc;

	json_object_object_add(req, "type", json_object_new_string("cancel"));
	json_object_object_add(req, "id", json_object_new_int64(id));
	rc = client_call(ctl, req, &rep, 30000, &e);
	json_object_put(req);
	if (rc < 0)
		log_warn("cancelling job %lld: %s", (long long)id, e.msg);
	else
		json_object_put(rep);
	return rc;
}

/* The job's final record (to learn its exit status). */
static int final_job(const char *ctl, int64_t id, struct json_object **job, struct verr *err)
{
	struct json_object *req = json_object_new_object(), *rep;
	int rc;

	json_object_object_add(req, "type", json_object_new_string("wait"));
	json_object_object_add(req, "id", json_object_new_int64(id));
	json_object_object_add(req, "timeout_ms", json_object_new_int(10000));
	rc = client_call(ctl, req, &rep, 40000, err);
	json_object_put(req);
	if (rc < 0)
		return -1;
	*job = json_object_get(json_object_object_get(rep, "job"));
	json_object_put(rep);
	return 0;
}

int cluster_run(const char *ctl, const struct job_spec *j)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct json_object *job = NULL;
	struct verr err;
	char state[32] = "";
	int64_t id, off = 0;
	bool cancelled = false, lost = false;
	double next_cancel = 0, give_up = 0;
	int status, r;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (submit(ctl, j, &id, &err) < 0) {
		log_err("%s", err.msg);
		return EXIT_VHPC;
	}
	log_info("job %lld submitted to vhpc-ctld at %s", (long long)id, ctl);
	for (;;) {
		if (interrupted && !cancelled && now_s() >= next_cancel) {
			if (!give_up) {
				log_info("signal %d: cancelling job %lld", interrupted, (long long)id);
				give_up = now_s() + 30;
			}
			cancelled = cancel_job(ctl, id) == 0;
			next_cancel = now_s() + 2;
			if (!cancelled && now_s() >= give_up) {
				log_err("cannot reach vhpc-ctld to cancel job %lld; it may still run (vhpc cancel %lld)",
					(long long)id, (long long)id);
				return 128 + interrupted;
			}
		}
		r = client_output_step(ctl, id, &off, STDOUT_FILENO, state, sizeof(state), &err);
		if (r == 1)
			break;
		if (r < 0 && !lost) {
			/* A restarting controller: keep asking. */
			log_warn("%s; retrying", err.msg);
			lost = true;
		} else if (r >= 0 && lost) {
			log_info("vhpc-ctld answers again");
			lost = false;
		}
		if (r != 2)
			usleep(r < 0 ? 1000000 : 200000);
	}
	while (final_job(ctl, id, &job, &err) < 0) {
		log_warn("%s; retrying", err.msg);
		sleep(1);
	}
	status = client_job_status(job);
	if (strcmp(client_str(job, "state", ""), "COMPLETED"))
		log_err("job %lld %s: %s", (long long)id, client_str(job, "state", "?"),
			client_str(job, "reason", ""));
	else
		log_info("job %lld: exit status %d", (long long)id, status);
	json_object_put(job);
	if (interrupted)
		status = 128 + interrupted;
	return status;
}
