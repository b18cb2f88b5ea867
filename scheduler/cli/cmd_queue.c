/* vhpc queue and vhpc nodes: what vhpc-ctld knows, as tables or JSON. */
#include "lib/err.h"
#include "cli.h"
#include "client.h"

#include <stdbool.h>
#include <json-c/json.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --json, --all and nothing else; returns 0 or a usage error's status. */
static int flags(const char *cmd, int argc, char **argv, bool *json, bool *all,
		 void (*help)(void), bool *helped)
{
	*helped = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			*json = true;
		else if (all && (!strcmp(argv[i], "--all") || !strcmp(argv[i], "-a")))
			*all = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			help();
			*helped = true;
			return 0;
		} else
			return usage_error(cmd, "unknown argument '%s'", argv[i]);
	}
	return 0;
}

static int ask(const char *cmd, const char *ctl, struct json_object *req, struct json_object **rep)
{
	struct verr e;
	int rc = client_call(ctl, req, rep, 30000, &e);

	json_object_put(req);
	if (rc < 0) {
		fprintf(stderr, "vhpc %s: %s\n", cmd, e.msg);
		return EXIT_VHPC;
	}
	return 0;
}

static void queue_help(void)
{
	printf("usage: vhpc queue [--all] [--json]\n"
	       "Jobs of vhpc-ctld that are queued, starting or running, and those that ended\n"
	       "in the last 5 minutes (--all: every job it remembers).  Users see their own\n"
	       "jobs, root sees all.  --json prints the job records.\n");
}

int cmd_queue(int argc, char **argv)
{
	struct json_object *req, *rep, *jobs;
	bool json = false, all = false, helped;
	char ctl[300];
	int r;

	if ((r = flags("queue", argc, argv, &json, &all, queue_help, &helped)) || helped)
		return r;
	if ((r = client_need_controller("queue", ctl, sizeof(ctl))))
		return r;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("queue"));
	json_object_object_add(req, "all", json_object_new_boolean(all));
	if ((r = ask("queue", ctl, req, &rep)))
		return r;
	jobs = json_object_object_get(rep, "jobs");
	if (json) {
		client_print_json(jobs);
	} else {
		time_t now = time(NULL);

		printf("%6s %-10s %-12s %-10s %6s %5s %8s %-20s %s\n", "ID", "USER", "NAME", "STATE",
		       "GUESTS", "RANKS", "TIME", "NODES", "REASON/EXIT");
		for (size_t i = 0; i < json_object_array_length(jobs); i++) {
			struct json_object *j = json_object_array_get_idx(jobs, i), *nodes;
			char user[32], nl[256] = "", tm[32] = "-", why[300];
			long long st = client_int(j, "started", 0), en = client_int(j, "ended", 0);
			const char *state = client_str(j, "state", "?");

			nodes = json_object_object_get(j, "nodes");
			for (size_t k = 0; nodes && k < json_object_array_length(nodes); k++)
				snprintf(nl + strlen(nl), sizeof(nl) - strlen(nl), "%s%s", k ? "," : "",
					 json_object_get_string(json_object_array_get_idx(nodes, k)));
			if (st > 0) {
				long long d = (en > 0 ? en : (long long)now) - st;

				snprintf(tm, sizeof(tm), "%lld:%02lld:%02lld", d / 3600, d / 60 % 60, d % 60);
			}
			if (!strcmp(state, "COMPLETED"))
				snprintf(why, sizeof(why), "exit %lld", client_int(j, "exit_status", -1));
			else
				snprintf(why, sizeof(why), "%s", client_str(j, "reason", ""));
			printf("%6lld %-10s %-12.12s %-10s %6lld %5lld %8s %-20s %s\n", client_int(j, "id", 0),
			       client_user_name(client_int(j, "uid", -1), user, sizeof(user)), client_str(j, "name", ""),
			       state, client_int(j, "guests", 0), client_int(j, "ranks", 0), tm,
			       nl[0] ? nl : "-", why);
		}
	}
	json_object_put(rep);
	return 0;
}

static void nodes_help(void)
{
	printf("usage: vhpc nodes [--json]\n"
	       "The nodes registered with vhpc-ctld: state, NUMA nodes with cores and memory\n"
	       "(used/total), RDMA devices and running jobs; under each, its fabric (link,\n"
	       "RDMA devices, the jobs on it and their VLAN or pkey) and its PCI functions\n"
	       "for passthrough, with the job and guest holding each.\n");
}

/* Under a node's line: its fabric (link, RDMA devices, the jobs on it
 * with their VLAN or pkey) and its PCI functions with the job and guest
 * holding each. */
static void print_fabric(struct json_object *n)
{
	struct json_object *rdma = json_object_object_get(n, "rdma"), *pci = json_object_object_get(n, "pci"),
		*fj = json_object_object_get(n, "fabric_jobs");
	char line[1024];
	size_t len = 0;

	if (json_object_object_get(n, "fabric")) {
		size_t nd = rdma ? json_object_array_length(rdma) : 0, nj = fj ? json_object_array_length(fj) : 0;

		len = (size_t)snprintf(line, sizeof(line), "  fabric %s on %s; RDMA devices:%s", client_str(n, "fabric", "?"),
				       client_str(n, "fabric_link", "?"), nd ? "" : " none");
		for (size_t k = 0; k < nd && len < sizeof(line); k++) {
			struct json_object *d = json_object_array_get_idx(rdma, k);

			len += (size_t)snprintf(line + len, sizeof(line) - len, " %s(%s, numa %lld)",
						client_str(d, "name", "?"), client_str(d, "netdev", "-"),
						client_int(d, "numa", -1));
		}
		if (len < sizeof(line))
			len += (size_t)snprintf(line + len, sizeof(line) - len, "; jobs:%s", nj ? "" : " none");
		for (size_t k = 0; k < nj && len < sizeof(line); k++) {
			struct json_object *e = json_object_array_get_idx(fj, k);
			bool ib = json_object_object_get(e, "pkey") != NULL;

			len += (size_t)snprintf(line + len, sizeof(line) - len, ib ? "%s %lld (pkey 0x%04llx)" : "%s %lld (vlan %lld)",
						k ? "," : "", client_int(e, "job", 0), client_int(e, ib ? "pkey" : "vlan", 0));
		}
		printf("%s\n", line);
	}
	for (size_t k = 0; pci && k < json_object_array_length(pci); k++) {
		struct json_object *e = json_object_array_get_idx(pci, k);

		if (json_object_object_get(e, "job"))
			printf("  pci %s %-6s numa %-2lld job %lld guest %lld\n", client_str(e, "addr", "?"),
			       client_str(e, "class", "?"), client_int(e, "numa", -1), client_int(e, "job", 0),
			       client_int(e, "guest", 0));
		else
			printf("  pci %s %-6s numa %-2lld free\n", client_str(e, "addr", "?"), client_str(e, "class", "?"),
			       client_int(e, "numa", -1));
	}
}

int cmd_nodes(int argc, char **argv)
{
	struct json_object *req, *rep, *nodes;
	bool json = false, helped;
	char ctl[300];
	int r;

	if ((r = flags("nodes", argc, argv, &json, NULL, nodes_help, &helped)) || helped)
		return r;
	if ((r = client_need_controller("nodes", ctl, sizeof(ctl))))
		return r;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("nodes"));
	if ((r = ask("nodes", ctl, req, &rep)))
		return r;
	nodes = json_object_object_get(rep, "nodes");
	if (json) {
		client_print_json(nodes);
	} else {
		printf("%-16s %-5s %-22s %5s %11s %-13s %4s %s\n", "NODE", "STATE", "ADDRESS", "NUMA",
		       "CORES", "MEM(GiB)", "RDMA", "JOBS");
		for (size_t i = 0; i < json_object_array_length(nodes); i++) {
			struct json_object *n = json_object_array_get_idx(nodes, i);
			struct json_object *numa = json_object_object_get(n, "numa"), *jobs = json_object_object_get(n, "jobs");
			long long cores = 0, used = 0;
			double mem = 0, umem = 0;
			char jl[256] = "", c[32], m[32];

			for (size_t k = 0; numa && k < json_object_array_length(numa); k++) {
				struct json_object *e = json_object_array_get_idx(numa, k);

				cores += client_int(e, "cores", 0);
				used += client_int(e, "used_cores", 0);
				mem += client_int(e, "mem", 0) / 1073741824.0;
				umem += client_int(e, "used_mem", 0) / 1073741824.0;
			}
			for (size_t k = 0; jobs && k < json_object_array_length(jobs); k++)
				snprintf(jl + strlen(jl), sizeof(jl) - strlen(jl), "%s%lld", k ? "," : "",
					 (long long)json_object_get_int64(json_object_array_get_idx(jobs, k)));
			snprintf(c, sizeof(c), "%lld/%lld", used, cores);
			snprintf(m, sizeof(m), "%.1f/%.1f", umem, mem);
			printf("%-16s %-5s %-22s %5zu %11s %-13s %4zu %s\n", client_str(n, "name", "?"),
			       json_object_get_boolean(json_object_object_get(n, "drained")) ? "drain" :
			       client_str(n, "state", "?"), client_str(n, "addr", "?"),
			       numa ? json_object_array_length(numa) : 0, c, m,
			       json_object_array_length(json_object_object_get(n, "rdma")), jl[0] ? jl : "-");
			print_fabric(n);
		}
	}
	json_object_put(rep);
	return 0;
}
