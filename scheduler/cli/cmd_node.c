/* vhpc node drain NODE [--checkpoint] and vhpc node undrain NODE (root):
 * vhpc-ctld's ctld_drain.c. */
#include "lib/err.h"
#include "cli.h"
#include "client.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
	"usage: vhpc node drain [--json] [--checkpoint] NODE\n"
	"       vhpc node undrain [--json] NODE\n"
	"(root) drain: the node takes no new jobs; the jobs running there go on, or with\n"
	"--checkpoint each is checkpointed and stopped, then requeued as a restart of\n"
	"its checkpoint: on other nodes when the cluster's checkpoints are shared\n"
	"(checkpoints.shared), else once the node is undrained.  A job that cannot be\n"
	"checkpointed runs on, and the reason is printed.  undrain: it takes jobs again.\n";

int cmd_node(int argc, char **argv)
{
	struct json_object *req, *rep, *jobs;
	const char *node = NULL, *verb = argc > 1 ? argv[1] : "";
	bool json = false, ckpt = false, drain = !strcmp(verb, "drain");
	struct verr e;
	char ctl[300];
	int r, bad = 0;

	if (!strcmp(verb, "--help") || !strcmp(verb, "-h")) {
		printf("%s", help);
		return 0;
	}
	if (!drain && strcmp(verb, "undrain"))
		return usage_error("node", "expected drain or undrain, got '%s'", verb);
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (drain && !strcmp(argv[i], "--checkpoint"))
			ckpt = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("%s", help);
			return 0;
		} else if (argv[i][0] == '-')
			return usage_error("node", "unknown option '%s'", argv[i]);
		else if (node)
			return usage_error("node", "one node at a time ('%s' and '%s')", node, argv[i]);
		else
			node = argv[i];
	}
	if (!node)
		return usage_error("node", "which node? (vhpc nodes lists them)");
	if ((r = client_need_controller("node", ctl, sizeof(ctl))))
		return r;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("node_drain"));
	json_object_object_add(req, "node", json_object_new_string(node));
	json_object_object_add(req, "drain", json_object_new_boolean(drain));
	json_object_object_add(req, "checkpoint", json_object_new_boolean(ckpt));
	/* Each job's checkpoint takes as long as its save. */
	r = client_call(ctl, req, &rep, 60 * 60 * 1000, &e);
	json_object_put(req);
	if (r < 0) {
		fprintf(stderr, "vhpc node %s: %s\n", verb, e.msg);
		return EXIT_VHPC;
	}
	jobs = json_object_object_get(rep, "jobs");
	if (json)
		client_print_json(rep);
	else
		printf("node %s %s\n", node, drain ? "drained: it takes no new jobs" : "undrained: it takes jobs again");
	for (size_t i = 0; jobs && i < json_object_array_length(jobs); i++) {
		struct json_object *o = json_object_array_get_idx(jobs, i);

		if (json_object_object_get(o, "error"))
			bad++;
		if (json)
			continue;
		if (json_object_object_get(o, "restart"))
			printf("job %lld: checkpointed to %s, requeued as job %lld\n", client_int(o, "id", 0),
			       client_str(o, "checkpoint", "?"), client_int(o, "restart", 0));
		else
			printf("job %lld: %s\n", client_int(o, "id", 0), client_str(o, "error", "?"));
	}
	json_object_put(rep);
	return bad ? EXIT_VHPC : 0;
}
