/*
 * vhpc-schedbench: how fast vhpc-ctld takes and places jobs, measured with
 * its real protocol (munge-signed wire messages over TCP) against a
 * cluster of real or simulated nodes (vhpcd --simulate N).
 *
 *   1. submit: JOBS one-guest jobs from CLIENTS threads at once, as fast as
 *      the controller answers: jobs accepted per second (each is in SQLite,
 *      synced, before its reply), and the latency of a submit;
 *   2. drain: until all of them have run and completed (scheduling passes,
 *      job_prepare/job_launch to the nodes, the nodes' job_exit);
 *   3. gang: one job of GUESTS guests of VCPUS each (one per node when
 *      that is a node's size): the time from submit to RUNNING (placement,
 *      and every node prepared its part), and to COMPLETED.
 */
#include <getopt.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/wire.h"

static const char *ctl;
static int njobs = 1000, nclients = 8;
static atomic_int next_job;
static double *lat;
static int64_t *ids;

static int call(struct json_object *req, struct json_object **rep, struct verr *err)
{
	const char *e;

	if (wire_call(ctl, req, rep, NULL, 60000, err) < 0)
		return -1;
	if ((e = wire_error_text(*rep))) {
		verr_set(err, "%s", e);
		json_object_put(*rep);
		return -1;
	}
	return 0;
}

static struct json_object *job_req(int guests, int vcpus)
{
	struct json_object *o = json_object_new_object(), *job = json_object_new_object(),
		*cmd = json_object_new_array();

	json_object_array_add(cmd, json_object_new_string("true"));
	json_object_object_add(job, "guests", json_object_new_int(guests));
	json_object_object_add(job, "vcpus", json_object_new_int(vcpus));
	json_object_object_add(job, "mem", json_object_new_int64(256ll << 20));
	json_object_object_add(job, "timeout", json_object_new_int(600));
	json_object_object_add(job, "command", cmd);
	json_object_object_add(o, "type", json_object_new_string("submit"));
	json_object_object_add(o, "job", job);
	return o;
}

static int64_t submit(int guests, int vcpus, struct verr *err)
{
	struct json_object *req = job_req(guests, vcpus), *rep;
	int64_t id = -1;

	if (call(req, &rep, err) == 0) {
		id = json_object_get_int64(json_object_object_get(rep, "id"));
		json_object_put(rep);
	}
	json_object_put(req);
	return id;
}

static void *client(void *arg)
{
	(void)arg;
	for (;;) {
		int i = atomic_fetch_add(&next_job, 1);
		double t0;
		struct verr e;

		if (i >= njobs)
			return NULL;
		t0 = now_s();
		ids[i] = submit(1, 1, &e);
		lat[i] = now_s() - t0;
		if (ids[i] < 0) {
			fprintf(stderr, "vhpc-schedbench: submit: %s\n", e.msg);
			exit(1);
		}
	}
}

static const char *state_of(int64_t id, struct verr *err)
{
	static char st[32];
	struct json_object *req = json_object_new_object(), *rep;

	json_object_object_add(req, "type", json_object_new_string("job"));
	json_object_object_add(req, "id", json_object_new_int64(id));
	if (call(req, &rep, err) < 0) {
		json_object_put(req);
		return NULL;
	}
	snprintf(st, sizeof(st), "%s", json_object_get_string(json_object_object_get(
		json_object_object_get(rep, "job"), "state")));
	json_object_put(rep);
	json_object_put(req);
	return st;
}

/* Polls until the job is in state want (or any final state); its time. */
static double wait_state(int64_t id, const char *want, double t0, int poll_us)
{
	for (;;) {
		struct verr e;
		const char *s = state_of(id, &e);

		if (!s) {
			fprintf(stderr, "vhpc-schedbench: job %lld: %s\n", (long long)id, e.msg);
			exit(1);
		}
		if (!strcmp(s, want) || !strcmp(s, "COMPLETED") || !strcmp(s, "FAILED") ||
		    !strcmp(s, "CANCELLED") || !strcmp(s, "TIMEOUT") || !strcmp(s, "NODE_FAIL")) {
			if (strcmp(s, want))
				fprintf(stderr, "vhpc-schedbench: job %lld is %s (waited for %s)\n", (long long)id, s, want);
			return now_s() - t0;
		}
		usleep((useconds_t)poll_us);
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The one big job at the end. */
struct gang {
	int guests, vcpus;
};

static int usage(void)
{
	fprintf(stderr, "usage: vhpc-schedbench --controller HOST:PORT [--jobs N] [--clients N] [--guests N] [--vcpus N]\n");
	return -1;
}

/* 0 to go on, -1 after the usage. */
static int parse_args(int argc, char **argv, struct gang *g)
{
	static const struct option o[] = {
		{ "controller", 1, 0, 'c' }, { "jobs", 1, 0, 'j' }, { "clients", 1, 0, 'C' },
		{ "guests", 1, 0, 'g' }, { "vcpus", 1, 0, 'v' }, { 0 }
	};
	const struct { int c; long long max; int *dst; } nums[] = {
		{ 'j', 1000000, &njobs }, { 'C', 256, &nclients }, { 'g', 4096, &g->guests }, { 'v', 512, &g->vcpus },
	};
	const size_t nnums = sizeof(nums) / sizeof(nums[0]);
	long long v;
	size_t k;
	int c;

	while ((c = getopt_long(argc, argv, "", o, NULL)) != -1) {
		if (c == 'c') {
			ctl = optarg;
			continue;
		}
		for (k = 0; k < nnums && nums[k].c != c; k++)
			;
		if (k == nnums || parse_ll(optarg, 1, nums[k].max, &v) < 0)
			return usage();
		*nums[k].dst = (int)v;
	}
	return ctl ? 0 : usage();
}

/* Many small jobs from many clients: submit rate and latency, then the
 * time until all of them completed. */
static void bench_submit(void)
{
	pthread_t *th = calloc(nclients, sizeof(*th));
	double t0, dt, drain;

	lat = calloc(njobs, sizeof(*lat));
	ids = calloc(njobs, sizeof(*ids));
	t0 = now_s();
	for (int i = 0; i < nclients; i++)
		pthread_create(&th[i], NULL, client, NULL);
	for (int i = 0; i < nclients; i++)
		pthread_join(th[i], NULL);
	dt = now_s() - t0;
	qsort(lat, njobs, sizeof(*lat), cmp_d);
	printf("submit: %d jobs from %d clients in %.2f s: %.0f jobs/s; latency median %.2f ms, p99 %.2f ms, max %.2f ms\n",
	       njobs, nclients, dt, njobs / dt, lat[njobs / 2] * 1e3, lat[njobs * 99 / 100] * 1e3,
	       lat[njobs - 1] * 1e3);
	fflush(stdout);
	for (int i = 0; i < njobs; i++)
		wait_state(ids[i], "COMPLETED", t0, 2000);
	drain = now_s() - t0;
	printf("drain: all %d jobs scheduled, run and completed %.2f s after the first submit: %.0f jobs/s end to end\n",
	       njobs, drain, njobs / drain);
	fflush(stdout);
}

static int bench_gang(const struct gang *g)
{
	double t0 = now_s(), running, done;
	struct verr e;
	int64_t big = submit(g->guests, g->vcpus, &e);

	if (big < 0) {
		fprintf(stderr, "vhpc-schedbench: %s\n", e.msg);
		return 1;
	}
	running = wait_state(big, "RUNNING", t0, 1000);
	done = wait_state(big, "COMPLETED", t0, 1000);
	printf("gang: a %d-guest job (%d vCPUs each): RUNNING %.3f s after submit (placed, and every node "
	       "prepared its part), COMPLETED after %.3f s\n", g->guests, g->vcpus, running, done);
	return 0;
}

int main(int argc, char **argv)
{
	struct gang g = { .guests = 1000, .vcpus = 16 };

	vlog_init("vhpc-schedbench");
	if (parse_args(argc, argv, &g) < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	bench_submit();
	return bench_gang(&g);
}
