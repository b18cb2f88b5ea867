/* The machine's state: how long one cache line takes to go from one core
 * to the other and back.  On the VMs these benchmarks run on it swings
 * about 2.5x from one minute to the next (the host moves our vCPUs), and
 * small-message times of both sides swing with it, so a ratio means little
 * without it (btl_vmshm README, "The second look").  Measured before each
 * repetition on the first two cores, where the ranks of both sides run. */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/harness/bh.h"

/* A batch of round trips takes a few milliseconds even at 500 ns each;
 * the median of the batches drops one preempted by the host. */
#define TRIPS   4000
#define BATCHES 7
#define LATE_NS 1000000000ull   /* a batch that takes longer is given up */

struct trip {
	_Alignas(64) _Atomic uint64_t line;
	_Alignas(64) int cpu;        /* the echoing thread's */
	int pinned;                  /* its sched_setaffinity result */
	_Atomic int started;
};

static int pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s);
}

/* Echoes every odd value back as the next even one, until UINT64_MAX. */
static void *echo(void *arg)
{
	struct trip *t = arg;
	uint64_t v;

	t->pinned = pin(t->cpu);
	atomic_store(&t->started, 1);
	if (t->pinned < 0)
		return NULL;
	for (;;) {
		while (!((v = atomic_load_explicit(&t->line, memory_order_acquire)) & 1))
			;
		if (v == UINT64_MAX)
			return NULL;
		/* Not a plain store: it could overwrite the UINT64_MAX of a
		 * prober that gave up on us, and we would spin for ever. */
		atomic_compare_exchange_strong_explicit(&t->line, &v, v + 1, memory_order_release,
							memory_order_relaxed);
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int bh_linetrip(int cpu_a, int cpu_b, double *ns, struct verr *err)
{
	struct trip *t = aligned_alloc(64, sizeof(*t));
	double batch[BATCHES];
	cpu_set_t old;
	pthread_t th;
	uint64_t v = 0;
	bool late = false;
	int rc;

	if (!t)
		return verr_set(err, "cache-line round trip: out of memory");
	memset(t, 0, sizeof(*t));
	t->cpu = cpu_b;
	if (sched_getaffinity(0, sizeof(old), &old) < 0 || pin(cpu_a) < 0) {
		free(t);
		return verr_errno(err, "cache-line round trip: cannot run on CPU %d", cpu_a);
	}
	if ((rc = pthread_create(&th, NULL, echo, t)) != 0) {
		sched_setaffinity(0, sizeof(old), &old);
		free(t);
		errno = rc;
		return verr_errno(err, "cache-line round trip: starting a thread");
	}
	while (!atomic_load(&t->started))
		;
	if (t->pinned < 0) {
		pthread_join(th, NULL);
		sched_setaffinity(0, sizeof(old), &old);
		free(t);
		return verr_set(err, "cache-line round trip: cannot run on CPU %d", cpu_b);
	}
	for (int b = 0; b < BATCHES && !late; b++) {
		uint64_t t0 = now_ns();

		for (int i = 0; i < TRIPS && !late; i++) {
			atomic_store_explicit(&t->line, ++v, memory_order_release);
			/* A starved echo (something else holds its CPU) must not
			 * hold up the benchmark: a look at the clock now and then. */
			for (unsigned spin = 1; atomic_load_explicit(&t->line, memory_order_acquire) != v + 1; spin++)
				if (!(spin & 0xffff) && now_ns() - t0 > LATE_NS) {
					late = true;
					break;
				}
			v++;
		}
		batch[b] = (double)(now_ns() - t0) / TRIPS;
	}
	atomic_store_explicit(&t->line, UINT64_MAX, memory_order_release);
	pthread_join(th, NULL);
	sched_setaffinity(0, sizeof(old), &old);
	free(t);
	if (late)
		return verr_set(err, "cache-line round trip: CPU %d did not answer CPU %d within %d ms", cpu_b, cpu_a,
				(int)(LATE_NS / 1000000));
	qsort(batch, BATCHES, sizeof(batch[0]), cmp_double);
	*ns = batch[BATCHES / 2];
	return 0;
}

int bh_linetrip_cpus(int *cpu_a, int *cpu_b)
{
	hwloc_topology_t topo;
	hwloc_obj_t c0, c1;
	int rc = -1;

	if (hwloc_topology_init(&topo) < 0)
		return -1;
	if (hwloc_topology_load(topo) == 0 && (c0 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, 0)) &&
	    (c1 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, 1)) && c0->cpuset && c1->cpuset) {
		*cpu_a = hwloc_bitmap_first(c0->cpuset);
		*cpu_b = hwloc_bitmap_first(c1->cpuset);
		rc = *cpu_a >= 0 && *cpu_b >= 0 ? 0 : -1;
	}
	hwloc_topology_destroy(topo);
	return rc;
}

/* ---- per repetition, for bench_run (run.c) */

void bh_trip_setup(struct bh_ctx *c)
{
	if (bh_linetrip_cpus(&c->trip_cpu[0], &c->trip_cpu[1]) < 0) {
		snprintf(c->why_no_trip, sizeof(c->why_no_trip), "this machine has one core");
		return;
	}
	if (!(c->trip_ns = malloc((size_t)c->reps * sizeof(double)))) {
		snprintf(c->why_no_trip, sizeof(c->why_no_trip), "out of memory");
		return;
	}
	for (int i = 0; i < c->reps; i++)
		c->trip_ns[i] = NAN;
}

void bh_trip_measure(struct bh_ctx *c, size_t rep)
{
	struct verr err;

	if (!c->trip_ns)
		return;
	if (bh_linetrip(c->trip_cpu[0], c->trip_cpu[1], &c->trip_ns[rep], &err) < 0) {
		c->trip_ns[rep] = NAN;
		if (!c->why_no_trip[0]) {
			snprintf(c->why_no_trip, sizeof(c->why_no_trip), "%s", err.msg);
			fprintf(stderr, "vhpc bench: %s (the run goes on without it)\n", err.msg);
		}
	}
}

const char *bh_trip_note(const struct bh_ctx *c, size_t rep, char *buf, size_t len)
{
	*buf = 0;
	if (c->trip_ns && !isnan(c->trip_ns[rep]))
		snprintf(buf, len, "; cache line CPU %d<->%d: %.0f ns", c->trip_cpu[0], c->trip_cpu[1],
			 c->trip_ns[rep]);
	return buf;
}

struct json_object *bh_trip_json(const struct bh_ctx *c)
{
	struct json_object *o = json_object_new_object(), *v, *cpus;
	struct bh_stat st;

	json_object_object_add(o, "what", json_object_new_string(BH_TRIP_WHAT));
	if (!c->trip_ns) {
		json_object_object_add(o, "skipped", json_object_new_string(c->why_no_trip));
		return o;
	}
	json_object_object_add(o, "unit", json_object_new_string("ns"));
	cpus = json_object_new_array();
	json_object_array_add(cpus, json_object_new_int(c->trip_cpu[0]));
	json_object_array_add(cpus, json_object_new_int(c->trip_cpu[1]));
	json_object_object_add(o, "cpus", cpus);
	v = json_object_new_array();
	for (int i = 0; i < c->reps; i++)
		json_object_array_add(v, isnan(c->trip_ns[i]) ? NULL : json_object_new_double(c->trip_ns[i]));
	json_object_object_add(o, "values", v);
	if (c->why_no_trip[0])
		json_object_object_add(o, "failed", json_object_new_string(c->why_no_trip));
	bh_stat_compute(c->trip_ns, (size_t)c->reps, &st);
	json_object_object_add(o, "n", json_object_new_int64((int64_t)st.n));
	json_object_object_add(o, "min", st.n ? json_object_new_double(st.min) : NULL);
	json_object_object_add(o, "median", st.n ? json_object_new_double(st.median) : NULL);
	json_object_object_add(o, "max", st.n ? json_object_new_double(st.max) : NULL);
	return o;
}
