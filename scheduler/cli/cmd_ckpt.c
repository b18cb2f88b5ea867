/* vhpc checkpoint JOB [--stop], vhpc checkpoint rm NAME and vhpc
 * checkpoints: a running job's coordinated checkpoint (vhpc-ctld's
 * ctld_ckpt.c does it; scheduler/README.md, "Checkpoints"). */
#include "lib/err.h"
#include "lib/parse.h"
#include "scheduler/ckptname.h"
#include "cli.h"
#include "client.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A checkpoint writes every guest's memory: the controller answers when
 * all nodes have saved, which for large guests takes minutes. */
#define CKPT_CALL_MS (40 * 60 * 1000)

static const char help_ckpt[] =
	"usage: vhpc checkpoint [--json] [--stop] JOB\n"
	"       vhpc checkpoint rm [--json] NAME\n"
	"Checkpoints a running job: every guest on every node is paused, then each\n"
	"node saves its guests (and the job's vmshm region) into the cluster's\n"
	"checkpoint folder, then the job runs on; with --stop it ends instead\n"
	"(CHECKPOINTED, exit status 75).  Prints the checkpoint's name, its size and\n"
	"how long the job stood still.  Nothing changes when a node cannot save its\n"
	"part: the reason is printed.  `rm` removes a checkpoint.  Users may\n"
	"checkpoint their own jobs and remove their own checkpoints, root any.\n";

static int rm(int argc, char **argv)
{
	struct json_object *req, *rep;
	const char *name = NULL;
	bool json = false;
	struct verr e;
	char ctl[300];
	int r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("%s", help_ckpt);
			return 0;
		} else if (argv[i][0] == '-')
			return usage_error("checkpoint rm", "unknown option '%s'", argv[i]);
		else if (name)
			return usage_error("checkpoint rm", "one checkpoint at a time ('%s' and '%s')", name, argv[i]);
		else
			name = argv[i];
	}
	if (!name)
		return usage_error("checkpoint rm", "which checkpoint? (vhpc checkpoints lists them)");
	if (ckpt_name_check(name, &e) < 0)
		return usage_error("checkpoint rm", "%s", e.msg);
	if ((r = client_need_controller("checkpoint", ctl, sizeof(ctl))))
		return r;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("checkpoint_rm"));
	json_object_object_add(req, "name", json_object_new_string(name));
	r = client_call(ctl, req, &rep, 60000, &e);
	json_object_put(req);
	if (r < 0) {
		fprintf(stderr, "vhpc checkpoint rm: %s\n", e.msg);
		return EXIT_VHPC;
	}
	if (json)
		client_print_json(rep);
	else if (json_object_get_boolean(json_object_object_get(rep, "files_removed")))
		printf("checkpoint %s removed\n", name);
	else
		printf("checkpoint %s removed from the controller's list; the controller does not see %s: remove %s/%s "
		       "on the nodes that saved it\n", name, client_str(rep, "dir", "?"), client_str(rep, "dir", "?"), name);
	json_object_put(rep);
	return 0;
}

int cmd_checkpoint(int argc, char **argv)
{
	struct json_object *req, *rep;
	const char *job = NULL;
	bool json = false, stop = false;
	struct verr e;
	char ctl[300], sz[32];
	int64_t id;
	int r;

	if (argc > 1 && !strcmp(argv[1], "rm"))
		return rm(argc - 1, argv + 1);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--stop"))
			stop = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("%s", help_ckpt);
			return 0;
		} else if (argv[i][0] == '-')
			return usage_error("checkpoint", "unknown option '%s'", argv[i]);
		else if (job)
			return usage_error("checkpoint", "one job at a time ('%s' and '%s')", job, argv[i]);
		else
			job = argv[i];
	}
	if ((r = client_job_id("checkpoint", job, &id)) || (r = client_need_controller("checkpoint", ctl, sizeof(ctl))))
		return r;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("checkpoint"));
	json_object_object_add(req, "id", json_object_new_int64(id));
	json_object_object_add(req, "stop", json_object_new_boolean(stop));
	r = client_call(ctl, req, &rep, CKPT_CALL_MS, &e);
	json_object_put(req);
	if (r < 0) {
		fprintf(stderr, "vhpc checkpoint: %s\n", e.msg);
		return EXIT_VHPC;
	}
	if (json)
		client_print_json(rep);
	else
		printf("checkpoint %s of job %lld: %s, the job stood still %.3f s%s\n", client_str(rep, "name", "?"),
		       (long long)id, fmt_size((uint64_t)client_int(rep, "bytes", 0), sz, sizeof(sz)),
		       client_int(rep, "standstill_ms", 0) / 1000.0,
		       stop ? "; the job is stopped (vhpc restart NAME brings it back)" : "");
	json_object_put(rep);
	return 0;
}

/* vhpc restart CKPT, and vhpc submit --restart CKPT: argv[0] says which. */
int cmd_restart(int argc, char **argv)
{
	struct json_object *req, *rep;
	const char *name = NULL, *cmd = argv[0];
	bool json = false, flag = !strcmp(cmd, "submit");
	struct verr e;
	char ctl[300];
	int r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: vhpc restart [--json] CKPT\n       vhpc submit [--json] --restart CKPT\n"
			       "Brings a checkpointed job back as a new job: its spec, image, guests' addresses\n"
			       "and ranks are the checkpoint's; its guests go on from where they were saved.\n"
			       "Each node's part goes to a node of its own (the one that saved it, or with the\n"
			       "cluster's checkpoints.shared any that can take it).  The checkpoint's owner or\n"
			       "root.  Prints the new job's id.\n");
			return 0;
		} else if (flag && !strcmp(argv[i], "--restart") && i + 1 < argc && !name)
			name = argv[++i];
		else if (flag && !strncmp(argv[i], "--restart=", 10) && !name)
			name = argv[i] + 10;
		else if (flag)
			return usage_error(cmd, "--restart takes the checkpoint's job as it was: '%s' cannot go with it", argv[i]);
		else if (argv[i][0] == '-')
			return usage_error(cmd, "unknown option '%s'", argv[i]);
		else if (name)
			return usage_error(cmd, "one checkpoint at a time ('%s' and '%s')", name, argv[i]);
		else
			name = argv[i];
	}
	if (!name || !*name)
		return usage_error(cmd, "which checkpoint? (vhpc checkpoints lists them)");
	/* The controller's own rule, before any request: a path-like name is
	 * the user's mistake, and said so here. */
	if (ckpt_name_check(name, &e) < 0)
		return usage_error(cmd, "%s", e.msg);
	if ((r = client_need_controller(cmd, ctl, sizeof(ctl))))
		return r;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("restart"));
	json_object_object_add(req, "name", json_object_new_string(name));
	r = client_call(ctl, req, &rep, 30000, &e);
	json_object_put(req);
	if (r < 0) {
		fprintf(stderr, "vhpc %s: %s\n", cmd, e.msg);
		return EXIT_VHPC;
	}
	if (json)
		client_print_json(rep);
	else
		printf("Submitted job %lld: a restart of checkpoint %s\n", client_int(rep, "id", 0), name);
	json_object_put(rep);
	return 0;
}

int cmd_checkpoints(int argc, char **argv)
{
	struct json_object *req, *rep, *a;
	bool json = false;
	struct verr e;
	char ctl[300];
	int r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: vhpc checkpoints [--json]\nThe checkpoints of your jobs (root: everyone's).\n");
			return 0;
		} else
			return usage_error("checkpoints", "unexpected '%s'", argv[i]);
	}
	if ((r = client_need_controller("checkpoints", ctl, sizeof(ctl))))
		return r;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("checkpoints"));
	r = client_call(ctl, req, &rep, 30000, &e);
	json_object_put(req);
	if (r < 0) {
		fprintf(stderr, "vhpc checkpoints: %s\n", e.msg);
		return EXIT_VHPC;
	}
	a = json_object_object_get(rep, "checkpoints");
	if (json) {
		client_print_json(a);
	} else {
		printf("%-16s %8s %-10s %10s %-20s %-7s %s\n", "NAME", "JOB", "USER", "SIZE", "TIME", "STATE", "NODES");
		for (size_t i = 0; a && i < json_object_array_length(a); i++) {
			struct json_object *o = json_object_array_get_idx(a, i);
			char user[64], sz[32], t[32];
			time_t when = (time_t)client_int(o, "created", 0);
			struct tm tm;

			strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&when, &tm));
			printf("%-16s %8lld %-10s %10s %-20s %-7s %s\n", client_str(o, "name", "?"), client_int(o, "job", 0),
			       client_user_name(client_int(o, "uid", -1), user, sizeof(user)),
			       fmt_size((uint64_t)client_int(o, "bytes", 0), sz, sizeof(sz)), t,
			       client_str(o, "state", "?"), client_str(o, "nodes", ""));
		}
	}
	json_object_put(rep);
	return 0;
}
