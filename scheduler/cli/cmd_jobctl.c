/* vhpc cancel, vhpc wait and vhpc output: one job of vhpc-ctld's. */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/parse.h"
#include "cli.h"
#include "client.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct args {
	bool json, follow;
	long long timeout_s;       /* wait: 0 = forever */
	const char *id;
};

/* ID, --json and the per-command flags; 1 when help was printed. */
static int parse(const char *cmd, int argc, char **argv, struct args *a, const char *help)
{
	memset(a, 0, sizeof(*a));
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "--json"))
			a->json = true;
		else if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
			printf("%s", help);
			return 1;
		} else if (!strcmp(cmd, "output") && (!strcmp(s, "-f") || !strcmp(s, "--follow")))
			a->follow = true;
		else if (!strcmp(cmd, "wait") && !strcmp(s, "--timeout")) {
			if (i + 1 >= argc || parse_ll(argv[i + 1], 1, 366LL * 86400, &a->timeout_s) < 0)
				return usage_error(cmd, "--timeout: expected seconds (1..31622400)");
			i++;
		} else if (s[0] == '-' && s[1])
			return usage_error(cmd, "unknown option '%s'", s);
		else if (a->id)
			return usage_error(cmd, "one job at a time ('%s' and '%s')", a->id, s);
		else
			a->id = s;
	}
	return 0;
}

static struct json_object *req_for(const char *type, int64_t id)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "id", json_object_new_int64(id));
	return o;
}

int cmd_cancel(int argc, char **argv)
{
	struct json_object *req, *rep;
	struct args a;
	struct verr e;
	char ctl[300];
	int64_t id;
	int r;

	if ((r = parse("cancel", argc, argv, &a, "usage: vhpc cancel [--json] ID\n"
		       "Cancels a job: queued, it leaves the queue; running, its guests are stopped.\n"
		       "Users may cancel their own jobs, root any.\n")))
		return r == 1 ? 0 : r;
	if ((r = client_job_id("cancel", a.id, &id)) || (r = client_need_controller("cancel", ctl, sizeof(ctl))))
		return r;
	req = req_for("cancel", id);
	r = client_call(ctl, req, &rep, 30000, &e);
	json_object_put(req);
	if (r < 0) {
		fprintf(stderr, "vhpc cancel: %s\n", e.msg);
		return EXIT_VHPC;
	}
	if (a.json)
		client_print_json(rep);
	else
		printf("job %lld cancelled\n", (long long)id);
	json_object_put(rep);
	return 0;
}

int cmd_wait(int argc, char **argv)
{
	struct json_object *job = NULL;
	struct args a;
	struct verr e;
	char ctl[300];
	int64_t id;
	double deadline;
	bool lost = false;
	int r, status;

	if ((r = parse("wait", argc, argv, &a, "usage: vhpc wait [--json] [--timeout SECONDS] ID\n"
		       "Waits until a job has ended and exits with its exit status (124: it ran out of\n"
		       "its time limit; 143: cancelled; 125: it failed to run, or a node failed).  While\n"
		       "the controller restarts, it keeps asking.  --timeout: give up after SECONDS\n"
		       "(exit 124 and the job goes on).  --json prints the job record.\n")))
		return r == 1 ? 0 : r;
	if ((r = client_job_id("wait", a.id, &id)) || (r = client_need_controller("wait", ctl, sizeof(ctl))))
		return r;
	deadline = a.timeout_s ? now_s() + (double)a.timeout_s : 0;
	for (;;) {
		struct json_object *req = req_for("wait", id), *rep;
		double left = deadline ? deadline - now_s() : 30;
		const char *state;

		json_object_object_add(req, "timeout_ms", json_object_new_int(left > 30 ? 30000 : left < 0.05 ? 50 : (int)(left * 1000)));
		r = client_call(ctl, req, &rep, 40000, &e);
		json_object_put(req);
		if (r < 0) {
			/* A job that is not ours or not there will not become so. */
			if (strstr(e.msg, "no job") || strstr(e.msg, "permission denied")) {
				fprintf(stderr, "vhpc wait: %s\n", e.msg);
				return EXIT_VHPC;
			}
			if (!lost)
				fprintf(stderr, "vhpc wait: %s; retrying\n", e.msg);
			lost = true;
			if (deadline && now_s() >= deadline)
				return EXIT_TIMEOUT;
			sleep(1);
			continue;
		}
		if (lost)
			fprintf(stderr, "vhpc wait: vhpc-ctld answers again\n");
		lost = false;
		json_object_put(job);
		job = json_object_get(json_object_object_get(rep, "job"));
		json_object_put(rep);
		state = client_str(job, "state", "?");
		if (!strcmp(state, "COMPLETED") || !strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") ||
		    !strcmp(state, "TIMEOUT") || !strcmp(state, "NODE_FAIL") ||
		    !strcmp(state, "CHECKPOINTED"))
			break;
		if (deadline && now_s() >= deadline) {
			fprintf(stderr, "vhpc wait: job %lld is still %s after %lld s\n", (long long)id, state, a.timeout_s);
			json_object_put(job);
			return EXIT_TIMEOUT;
		}
	}
	status = client_job_status(job);
	if (a.json)
		client_print_json(job);
	else if (strcmp(client_str(job, "state", ""), "COMPLETED"))
		fprintf(stderr, "job %lld %s: %s\n", (long long)id, client_str(job, "state", "?"),
			client_str(job, "reason", ""));
	json_object_put(job);
	return status;
}

int cmd_output(int argc, char **argv)
{
	struct args a;
	struct verr e;
	char ctl[300], state[32] = "";
	int64_t id, off = 0;
	int r, fd = STDOUT_FILENO;
	char tmpl[] = "/tmp/vhpc-output-XXXXXX";

	if ((r = parse("output", argc, argv, &a, "usage: vhpc output [-f|--follow] [--json] ID\n"
		       "Prints what a job wrote (stdout and stderr together) so far; --follow keeps\n"
		       "printing until the job has ended.  --json: {\"id\",\"state\",\"size\",\"output\"}.\n")))
		return r == 1 ? 0 : r;
	if ((r = client_job_id("output", a.id, &id)) || (r = client_need_controller("output", ctl, sizeof(ctl))))
		return r;
	if (a.json) {
		fd = mkstemp(tmpl);
		if (fd < 0) {
			perror("vhpc output: mkstemp");
			return EXIT_VHPC;
		}
		unlink(tmpl);
	}
	for (;;) {
		r = client_output_step(ctl, id, &off, fd, state, sizeof(state), &e);
		if (r < 0) {
			fprintf(stderr, "vhpc output: %s\n", e.msg);
			return EXIT_VHPC;
		}
		if (r == 1 || (r == 0 && !a.follow))
			break;
		if (r == 0)
			usleep(200000);
	}
	if (a.json) {
		struct json_object *o = json_object_new_object();
		char *buf = malloc((size_t)off + 1);

		if (!buf || pread(fd, buf, (size_t)off, 0) != (ssize_t)off) {
			fprintf(stderr, "vhpc output: reading back the output failed\n");
			return EXIT_VHPC;
		}
		json_object_object_add(o, "id", json_object_new_int64(id));
		json_object_object_add(o, "state", json_object_new_string(state));
		json_object_object_add(o, "size", json_object_new_int64(off));
		json_object_object_add(o, "output", json_object_new_string_len(buf, (int)off));
		client_print_json(o);
		json_object_put(o);
		free(buf);
		close(fd);
	}
	return 0;
}
