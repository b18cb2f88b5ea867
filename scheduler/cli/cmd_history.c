/* vhpc history: ended jobs of vhpc-ctld with what they used (accounting). */
#include "lib/err.h"
#include "lib/parse.h"
#include "cli.h"
#include "client.h"
#include "since.h"

#include <getopt.h>
#include <json-c/json.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void help(void)
{
	printf("usage: vhpc history [--user U] [--since T] [--json]\n"
	       "Jobs of vhpc-ctld that have ended, oldest first, with their user, state, exit\n"
	       "status, nodes, guests, elapsed time, CPU time and peak memory.  CPU time is\n"
	       "what every guest's cgroup counted, summed over the guests; peak memory the\n"
	       "largest of the guests' peaks.  Both are read as each node tears the job's\n"
	       "guests down; a guest whose node was down then is unknown, and a figure over\n"
	       "some of the guests only says how many, as (1/2).  Users see their own jobs,\n"
	       "root sees everyone's.\n"
	       "  --user U   only U's jobs (a name or uid; others than yourself: root only)\n"
	       "  --since T  only jobs that ended at or after T: an age (30m, 2h, 1d, 1w, 1h30m),\n"
	       "             a date (2026-12-05), a date and time (2026-12-05T14:30[:SS], local\n"
	       "             time, or UTC with Z), or @UNIXTIME\n"
	       "  --json     the records as JSON (cpu_usec, mem_peak in bytes; null: unknown)\n");
}

/* "alice" or "1000" to a uid; -1 after saying why. */
static long long user_uid(const char *u)
{
	struct passwd *pw;
	long long v;

	if (parse_ll(u, 0, UINT32_MAX - 1, &v) == 0)
		return v;
	if ((pw = getpwnam(u)))
		return pw->pw_uid;
	usage_error("history", "--user '%s': no such user on this machine (give a user name or a uid)", u);
	return -1;
}

static void hms(long long s, char *buf, size_t len)
{
	snprintf(buf, len, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

/* A figure over `have` of `guests` guests: all, some (k/N), or none. */
static void figure(const char *value, long long have, long long guests, char *buf, size_t len)
{
	if (have <= 0)
		snprintf(buf, len, "unknown");
	else if (have < guests)
		snprintf(buf, len, "%s (%lld/%lld)", value, have, guests);
	else
		snprintf(buf, len, "%s", value);
}

static void print_row(struct json_object *j)
{
	struct json_object *nodes = json_object_object_get(j, "nodes");
	char user[64], nl[200] = "", el[32] = "-", cpu[48], mem[48], v[32], when[32] = "-";
	long long guests = client_int(j, "guests", 0), cu = client_int(j, "cpu_usec", -1);
	time_t ended = (time_t)client_int(j, "ended", 0);
	struct tm tm;

	for (size_t k = 0; nodes && k < json_object_array_length(nodes); k++)
		snprintf(nl + strlen(nl), sizeof(nl) - strlen(nl), "%s%s", k ? "," : "",
			 json_object_get_string(json_object_array_get_idx(nodes, k)));
	if (client_int(j, "started", 0) > 0)
		hms(client_int(j, "elapsed", 0), el, sizeof(el));
	if (cu >= 60000000)
		hms(cu / 1000000, v, sizeof(v));
	else
		snprintf(v, sizeof(v), "%.2fs", cu / 1e6);
	figure(v, client_int(j, "cpu_guests", 0), guests, cpu, sizeof(cpu));
	fmt_size((uint64_t)client_int(j, "mem_peak", 0), v, sizeof(v));
	figure(v, client_int(j, "mem_guests", 0), guests, mem, sizeof(mem));
	if (ended > 0 && localtime_r(&ended, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("%6lld %-10s %-12.12s %-10s %4lld %6lld %-16s %9s %14s %16s  %s\n", client_int(j, "id", 0),
	       client_user_name(client_int(j, "uid", -1), user, sizeof(user)), client_str(j, "name", ""),
	       client_str(j, "state", "?"), client_int(j, "exit_status", -1), guests, nl[0] ? nl : "-", el, cpu,
	       mem, when);
}

/* Every page of the history, oldest first; NULL after saying why. */
static struct json_object *fetch(const char *ctl, long long uid, int64_t since)
{
	struct json_object *pages = json_object_new_array(), *all;
	int64_t before = INT64_MAX;
	bool more = true;

	while (more) {
		struct json_object *req = json_object_new_object(), *rep, *jobs;
		struct verr e;
		int64_t low;

		json_object_object_add(req, "type", json_object_new_string("history"));
		if (uid >= 0)
			json_object_object_add(req, "uid", json_object_new_int64(uid));
		if (since > 0)
			json_object_object_add(req, "since", json_object_new_int64(since));
		if (before != INT64_MAX)
			json_object_object_add(req, "before", json_object_new_int64(before));
		if (client_call(ctl, req, &rep, 30000, &e) < 0) {
			json_object_put(req);
			json_object_put(pages);
			fprintf(stderr, "vhpc history: %s\n", e.msg);
			return NULL;
		}
		json_object_put(req);
		jobs = json_object_object_get(rep, "jobs");
		low = jobs && json_object_array_length(jobs)
			? client_int(json_object_array_get_idx(jobs, 0), "id", before) : before;
		more = json_object_get_boolean(json_object_object_get(rep, "more")) && low < before;
		before = low;
		json_object_array_add(pages, json_object_get(jobs ? jobs : json_object_new_array()));
		json_object_put(rep);
	}
	/* Pages came newest first, each in id order. */
	all = json_object_new_array();
	for (size_t p = json_object_array_length(pages); p-- > 0;) {
		struct json_object *pg = json_object_array_get_idx(pages, p);

		for (size_t i = 0; i < json_object_array_length(pg); i++)
			json_object_array_add(all, json_object_get(json_object_array_get_idx(pg, i)));
	}
	json_object_put(pages);
	return all;
}

int cmd_history(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "user", required_argument, NULL, 'u' }, { "since", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },       { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct json_object *jobs;
	long long uid = -1;
	int64_t since = 0;
	bool json = false;
	char ctl[300], why[400];
	int c, r;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+u:s:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			if ((uid = user_uid(optarg)) < 0)
				return EXIT_USAGE;
			break;
		case 's':
			if (since_parse(optarg, time(NULL), &since, why, sizeof(why)) < 0)
				return usage_error("history", "--since %s", why);
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			help();
			return 0;
		default:
			return usage_error("history", "unknown argument '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("history", "unknown argument '%s'", argv[optind]);
	if ((r = client_need_controller("history", ctl, sizeof(ctl))))
		return r;
	if (!(jobs = fetch(ctl, uid, since)))
		return EXIT_VHPC;
	if (json) {
		for (size_t i = 0; i < json_object_array_length(jobs); i++) {
			struct json_object *j = json_object_array_get_idx(jobs, i);
			char user[64];

			json_object_object_add(j, "user", json_object_new_string(
				client_user_name(client_int(j, "uid", -1), user, sizeof(user))));
		}
		client_print_json(jobs);
	} else {
		printf("%6s %-10s %-12s %-10s %4s %6s %-16s %9s %14s %16s  %s\n", "ID", "USER", "NAME", "STATE", "EXIT",
		       "GUESTS", "NODES", "ELAPSED", "CPU", "PEAK MEM", "ENDED");
		for (size_t i = 0; i < json_object_array_length(jobs); i++)
			print_row(json_object_array_get_idx(jobs, i));
	}
	json_object_put(jobs);
	return 0;
}
