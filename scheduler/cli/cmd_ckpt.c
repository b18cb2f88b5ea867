/* vhpc checkpoint JOB [--stop], vhpc checkpoint rm NAME and vhpc
 * checkpoints: a running job's coordinated checkpoint (vhpc-ctld's
 * ctld_ckpt.c does it; scheduler/README.md, "Checkpoints"). */
#include "lib/err.h"
#include "lib/parse.h"
#include "lib/ckptname.h"
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
	"usage: vhpc checkpoint [--json] [--stop] [--close-sessions] JOB\n"
	"       vhpc checkpoint rm [--json] NAME\n"
	"       vhpc checkpoint rm --older-than DAYS\n"
	"Checkpoints a running job: every guest on every node is paused, then each\n"
	"node saves its guests (and the job's vmshm region) into the cluster's\n"
	"checkpoint folder, then the job runs on; with --stop it ends instead\n"
	"(CHECKPOINTED, exit status 75).  Prints the checkpoint's name, its size and\n"
	"how long the job stood still.  Nothing changes when a node cannot save its\n"
	"part: the reason is printed.  A `vhpc exec` or `vhpc shell` session open into\n"
	"a container guest holds a connection CRIU cannot save, so the checkpoint is\n"
	"refused while one is; --close-sessions closes them (their commands are\n"
	"stopped, as when the client goes) once every node can save, before the\n"
	"pause (vhpc node drain --checkpoint always does).  `rm` removes a checkpoint; with --older-than,\n"
	"every whole checkpoint made DAYS days ago or earlier (yours; root: anyone's).\n"
	"Users may checkpoint their own jobs and remove their own checkpoints, root any.\n";

/* DAYS of --older-than: whole days, 0 (everything) up to a century. */
static int days_arg(const char *cmd, const char *s, long long *days)
{
	if (!s || parse_ll(s, 0, 36500, days) < 0)
		return usage_error(cmd, "--older-than takes whole days, 0 to 36500, not '%s'", s ? s : "");
	return 0;
}

/* The checkpoints the caller may see (the controller's list); NULL after
 * printing why. */
static struct json_object *list_get(const char *cmd, const char *ctl)
{
	struct json_object *req = json_object_new_object(), *rep;
	struct verr e;
	int r;

	json_object_object_add(req, "type", json_object_new_string("checkpoints"));
	r = client_call(ctl, req, &rep, 30000, &e);
	json_object_put(req);
	if (r < 0) {
		fprintf(stderr, "vhpc %s: %s\n", cmd, e.msg);
		return NULL;
	}
	return rep;
}

/* Made at least days days ago (and whole: one being made is not old). */
static bool is_older(struct json_object *o, long long days, time_t now)
{
	return days < 0 || (!strcmp(client_str(o, "state", ""), "done") &&
			    now - (time_t)client_int(o, "created", 0) >= (time_t)days * 86400);
}

static int rm_one(const char *ctl, const char *name, bool json)
{
	struct json_object *req = json_object_new_object(), *rep;
	struct verr e;
	int r;

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

/* rm --older-than: each old one in turn, through the same request as one
 * name (the controller decides who may); the failures counted. */
static int rm_older(const char *ctl, long long days, bool json)
{
	struct json_object *rep = list_get("checkpoint rm", ctl), *a;
	time_t now = time(NULL);
	int bad = 0, n = 0;

	if (!rep)
		return EXIT_VHPC;
	a = json_object_object_get(rep, "checkpoints");
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		struct json_object *o = json_object_array_get_idx(a, i);

		if (!is_older(o, days, now))
			continue;
		n++;
		bad += rm_one(ctl, client_str(o, "name", "?"), json) != 0;
	}
	json_object_put(rep);
	if (!n && !json)
		printf("no checkpoint is %lld days old or older\n", days);
	return bad ? EXIT_VHPC : 0;
}

static int rm(int argc, char **argv)
{
	const char *name = NULL;
	bool json = false;
	long long days = -1;
	struct verr e;
	char ctl[300];
	int r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("%s", help_ckpt);
			return 0;
		} else if (!strcmp(argv[i], "--older-than")) {
			if ((r = days_arg("checkpoint rm", i + 1 < argc ? argv[++i] : NULL, &days)))
				return r;
		} else if (argv[i][0] == '-')
			return usage_error("checkpoint rm", "unknown option '%s'", argv[i]);
		else if (name)
			return usage_error("checkpoint rm", "one checkpoint at a time ('%s' and '%s')", name, argv[i]);
		else
			name = argv[i];
	}
	if (name && days >= 0)
		return usage_error("checkpoint rm", "a name or --older-than, not both");
	if (!name && days < 0)
		return usage_error("checkpoint rm", "which checkpoint? (vhpc checkpoints lists them)");
	if (name && ckpt_name_check(name, &e) < 0)
		return usage_error("checkpoint rm", "%s", e.msg);
	if ((r = client_need_controller("checkpoint", ctl, sizeof(ctl))))
		return r;
	return name ? rm_one(ctl, name, json) : rm_older(ctl, days, json);
}

int cmd_checkpoint(int argc, char **argv)
{
	struct json_object *req, *rep;
	const char *job = NULL;
	bool json = false, stop = false, close_sessions = false;
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
		else if (!strcmp(argv[i], "--close-sessions"))
			close_sessions = true;
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
	if (close_sessions)
		json_object_object_add(req, "close_sessions", json_object_new_boolean(true));
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

/* --by-node: what each node holds, summed from what the nodes reported
 * for each part (a node's share of the cluster's checkpoints.dir). */
static void print_by_node(struct json_object *a, long long days, time_t now)
{
	struct tot {
		char node[65];
		int n;
		int64_t bytes;
	} *t = calloc(1, sizeof(*t));
	size_t nt = 0;
	char sz[32];

	for (size_t i = 0; t && a && i < json_object_array_length(a); i++) {
		struct json_object *o = json_object_array_get_idx(a, i), *parts = json_object_object_get(o, "parts");

		if (!is_older(o, days, now))
			continue;
		for (size_t k = 0; parts && k < json_object_array_length(parts); k++) {
			struct json_object *p = json_object_array_get_idx(parts, k);
			const char *node = client_str(p, "node", "?");
			size_t x = 0;
			struct tot *g;

			while (x < nt && strcmp(t[x].node, node))
				x++;
			if (x == nt) {
				if (!(g = realloc(t, (nt + 1) * sizeof(*t))))
					continue;
				t = g;
				memset(&t[nt], 0, sizeof(*t));
				snprintf(t[nt++].node, sizeof(t->node), "%s", node);
			}
			t[x].n++;
			t[x].bytes += client_int(p, "bytes", 0);
		}
	}
	printf("%-20s %11s %10s\n", "NODE", "CHECKPOINTS", "SIZE");
	for (size_t x = 0; t && x < nt; x++)
		printf("%-20s %11d %10s\n", t[x].node, t[x].n, fmt_size((uint64_t)t[x].bytes, sz, sizeof(sz)));
	free(t);
}

int cmd_checkpoints(int argc, char **argv)
{
	struct json_object *rep, *a, *sel;
	bool json = false, by_node = false;
	long long days = -1;
	time_t now = time(NULL);
	char ctl[300];
	int r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--by-node"))
			by_node = true;
		else if (!strcmp(argv[i], "--older-than")) {
			if ((r = days_arg("checkpoints", i + 1 < argc ? argv[++i] : NULL, &days)))
				return r;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: vhpc checkpoints [--json] [--by-node] [--older-than DAYS]\n"
			       "The checkpoints of your jobs (root: everyone's).  --by-node: how many and\n"
			       "how much each node holds, as the nodes reported their parts.  --older-than:\n"
			       "only whole ones made DAYS days ago or earlier (vhpc checkpoint rm\n"
			       "--older-than DAYS removes those).\n");
			return 0;
		} else
			return usage_error("checkpoints", "unexpected '%s'", argv[i]);
	}
	if ((r = client_need_controller("checkpoints", ctl, sizeof(ctl))))
		return r;
	if (!(rep = list_get("checkpoints", ctl)))
		return EXIT_VHPC;
	a = json_object_object_get(rep, "checkpoints");
	if (by_node && !json) {
		print_by_node(a, days, now);
		json_object_put(rep);
		return 0;
	}
	sel = json_object_new_array();
	for (size_t i = 0; a && i < json_object_array_length(a); i++)
		if (is_older(json_object_array_get_idx(a, i), days, now))
			json_object_array_add(sel, json_object_get(json_object_array_get_idx(a, i)));
	a = sel;
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
			       client_str(o, "damaged", NULL) ? "damaged" : client_str(o, "state", "?"),
			       client_str(o, "nodes", ""));
		}
		/* why, below the table: a node's reason does not fit a column */
		for (size_t i = 0; a && i < json_object_array_length(a); i++) {
			struct json_object *o = json_object_array_get_idx(a, i);

			if (client_str(o, "damaged", NULL))
				printf("checkpoint %s is damaged (a restart from it failed): %s\n",
				       client_str(o, "name", "?"), client_str(o, "damaged", ""));
		}
	}
	json_object_put(sel);
	json_object_put(rep);
	return 0;
}
