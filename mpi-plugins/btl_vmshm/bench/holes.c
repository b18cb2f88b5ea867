/*
 * vmshm-holes: how much time this machine takes away from a running core.
 *
 * One thread per CPU, pinned, reads the monotonic clock in a tight loop for
 * the given time and counts the holes: consecutive readings more than
 * THRESHOLD apart, a span in which the thread did not run (an interrupt,
 * the hypervisor running something else on the physical core).  Nothing
 * else of ours runs meanwhile, so every hole is the machine's.
 *
 * Why it matters to vmshm: the two copies through the ring need both ranks
 * running at once; a hole on either side stalls the other, where a single
 * copy by the receiver (vader's CMA) only suffers its own.  The README's
 * "Where the time goes" uses these figures.
 *
 *   vmshm-holes [-t SECONDS] [-T THRESHOLD_NS]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBUCKETS 6
static const uint64_t bucket_ns[NBUCKETS] = { 5000, 10000, 20000, 50000, 100000, UINT64_MAX };

struct cpu_result {
	int cpu;
	uint64_t holes, hole_ns, longest, span;
	uint64_t bucket[NBUCKETS];
};

static double seconds = 2.0;
static uint64_t threshold = 2000;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void *run(void *arg)
{
	struct cpu_result *r = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(r->cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) {
		fprintf(stderr, "vmshm-holes: cannot pin a thread to CPU %d\n", r->cpu);
		return NULL;
	}
	uint64_t start = now_ns(), last = start, end = start + (uint64_t)(seconds * 1e9);
	for (;;) {
		uint64_t t = now_ns(), d = t - last;
		last = t;
		if (d > threshold) {
			int b = 0;
			while (d >= bucket_ns[b])
				b++;
			r->bucket[b]++;
			r->holes++;
			r->hole_ns += d;
			if (d > r->longest)
				r->longest = d;
		}
		if (t >= end)
			break;
	}
	r->span = last - start;
	return NULL;
}

/* -1 to go on, else the status to exit with (said). */
static int parse_args(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "t:T:h")) != -1) {
		char *end;
		switch (c) {
		case 't':
			seconds = strtod(optarg, &end);
			if (*end || seconds <= 0 || seconds > 600) {
				fprintf(stderr, "vmshm-holes: -t %s: seconds between 0 and 600\n", optarg);
				return 2;
			}
			break;
		case 'T':
			errno = 0;
			threshold = strtoull(optarg, &end, 10);
			if (*end || errno || threshold < 100 || threshold > 1000000000ull) {
				fprintf(stderr, "vmshm-holes: -T %s: nanoseconds, 100 to 1000000000\n", optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: vmshm-holes [-t SECONDS] [-T THRESHOLD_NS]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "vmshm-holes: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return -1;
}

static void print_results(const struct cpu_result *res, int n)
{
	printf("# vmshm-holes: %.1f s per CPU, holes longer than %llu ns\n", seconds,
	       (unsigned long long)threshold);
	printf("# cpu  holes/s  time lost  longest us   <5us <10us <20us <50us <100us  more\n");
	for (int i = 0; i < n; i++) {
		const struct cpu_result *r = &res[i];
		double span = r->span ? r->span / 1e9 : seconds;
		printf("  %3d %8.0f %9.2f%% %11.1f %6llu %5llu %5llu %5llu %6llu %5llu\n", r->cpu,
		       r->holes / span, 100.0 * (double)r->hole_ns / (double)(r->span ? r->span : 1),
		       r->longest / 1e3, (unsigned long long)r->bucket[0],
		       (unsigned long long)r->bucket[1], (unsigned long long)r->bucket[2],
		       (unsigned long long)r->bucket[3], (unsigned long long)r->bucket[4],
		       (unsigned long long)r->bucket[5]);
	}
}

int main(int argc, char **argv)
{
	int rc = parse_args(argc, argv);

	if (rc >= 0)
		return rc;
	cpu_set_t mine;
	if (sched_getaffinity(0, sizeof(mine), &mine)) {
		perror("vmshm-holes: sched_getaffinity");
		return 1;
	}
	int n = CPU_COUNT(&mine), k = 0;
	struct cpu_result *res = calloc((size_t)n, sizeof(*res));
	pthread_t *th = calloc((size_t)n, sizeof(*th));
	if (!res || !th) {
		fprintf(stderr, "vmshm-holes: out of memory\n");
		return 1;
	}
	for (int cpu = 0; cpu < CPU_SETSIZE && k < n; cpu++)
		if (CPU_ISSET(cpu, &mine))
			res[k++].cpu = cpu;
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, run, &res[i])) {
			fprintf(stderr, "vmshm-holes: cannot start a thread\n");
			return 1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	print_results(res, n);
	free(res);
	free(th);
	return 0;
}
