/* vhpc-hv-bench: numbers for the closing note of the VMM issue, measured
 * side by side in one run (seed 002 measured 3 GiB in 100-160 ms in 2006):
 *   - guest RAM set-up per GiB: memfd, bound to a host node, prefaulted with
 *     1 thread and with N threads, with and without hugepages, against a
 *     plain malloc+memset of the same size;
 *   - vhpc-hv start to the first guest instruction (its own log lines),
 *     with a test guest.
 * Usage: vhpc-hv-bench [--size SIZE] [--repeat N] [--guest ELF] [--hv PATH] */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "../vm.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static double best(double *v, int n)
{
	double b = v[0];

	for (int i = 1; i < n; i++)
		if (v[i] < b)
			b = v[i];
	return b;
}

static double time_memset(uint64_t size)
{
	uint64_t t0 = now_ns();
	char *p = malloc(size);

	if (!p)
		return -1;
	memset(p, 1, size);
	__asm__ volatile("" : : "r"(p) : "memory");
	free(p);
	return (now_ns() - t0) / 1e6;
}

static double time_guest_ram(uint64_t size, uint64_t page, int threads, int node, char *why, size_t wl)
{
	struct hv_plan p;
	struct guest_mem m;
	struct verr err;
	uint64_t t0, pf = 0;
	double ms;

	memset(&p, 0, sizeof(p));
	p.mem = size;
	p.page_size = page;
	p.nnodes = 1;
	p.node[0].size = size;
	p.node[0].host_node = node;
	t0 = now_ns();
	if (mem_create(&m, &p, threads, &pf, &err) < 0) {
		snprintf(why, wl, "%s", err.msg);
		return -1;
	}
	ms = (now_ns() - t0) / 1e6;
	mem_destroy(&m);
	return ms;
}

static long hp_read(const char *f)
{
	char path[128], *b;
	size_t l;
	struct verr e;
	long v;

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-2048kB/%s", f);
	if (read_file(path, &b, &l, 64, &e) < 0)
		return -1;
	v = atol(b);
	free(b);
	return v;
}

static int hp_write(long n)
{
	char s[32];
	struct verr e;

	snprintf(s, sizeof(s), "%ld", n);
	return write_str("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", s, &e);
}

/* Runs vhpc-hv once and picks its "N ms after start" log lines. */
static int boot_once(const char *hv, const char *guest, double *started, double *first, double *wall)
{
	int pfd[2];
	pid_t pid;
	char buf[8192];
	size_t n = 0;
	ssize_t r;
	uint64_t t0 = now_ns();
	int st;

	if (pipe(pfd) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(pfd[1], 2);
		execl(hv, hv, "--kernel", guest, "--vcpus", "1", "--mem", "64M", "--debug-exit",
		      "--cmdline", "mode=poweroff", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (n < sizeof(buf) - 1 && (r = read(pfd[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	*wall = (now_ns() - t0) / 1e6;
	char *a = strstr(buf, "boot, "), *b = strstr(buf, "first guest exit ");
	if (!a || !b)
		return -1;
	*started = atof(a + 6);
	*first = atof(b + 17);
	return 0;
}

struct opts {
	uint64_t size;
	int repeat;
	const char *guest, *hv;
};

/* -1 after the usage on anything it does not know. */
static int parse_args(struct opts *a, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "size", required_argument, 0, 's' }, { "repeat", required_argument, 0, 'r' },
		{ "guest", required_argument, 0, 'g' }, { "hv", required_argument, 0, 'h' }, { 0 } };
	int o;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (o == 's' && parse_size(optarg, &a->size) == 0 && a->size >= (2 << 20))
			a->size &= ~((2ull << 20) - 1);
		else if (o == 'r')
			a->repeat = atoi(optarg) < 1 ? 1 : atoi(optarg) > 16 ? 16 : atoi(optarg);
		else if (o == 'g')
			a->guest = optarg;
		else if (o == 'h')
			a->hv = optarg;
		else {
			fprintf(stderr, "usage: vhpc-hv-bench [--size SIZE] [--repeat N] [--guest ELF] [--hv PATH]\n");
			return -1;
		}
	}
	return 0;
}

/* malloc + memset of the RAM size: what the set-ups are measured against. */
static double bench_baseline(const struct opts *a, double gib)
{
	double v[16], base;

	printf("guest RAM set-up, %.2f GiB, best of %d (ms, GiB/s, x memset):\n", gib, a->repeat);
	for (int i = 0; i < a->repeat; i++)
		v[i] = time_memset(a->size);
	base = best(v, a->repeat);
	printf("  %-44s %8.1f ms %6.2f GiB/s  1.00\n", "malloc + memset (baseline)", base, gib / (base / 1e3));
	return base;
}

static void bench_ram(const struct opts *a)
{
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	char why[1100] = "";
	double v[16], gib = (double)a->size / (1 << 30), base = bench_baseline(a, gib);
	struct { const char *name; uint64_t page; int threads; } c[] = {
		{ "memfd 4K, bound node 0, prefault 1 thread", 4096, 1 },
		{ "memfd 4K, bound node 0, prefault N threads", 4096, ncpu },
		{ "hugetlb 2M, bound node 0, prefault 1 thread", 2 << 20, 1 },
		{ "hugetlb 2M, bound node 0, prefault N threads", 2 << 20, ncpu },
	};
	long nr = hp_read("nr_hugepages");
	bool raised = false;

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		char name[80];

		if (c[k].page > 4096 && !raised) {
			long need = (long)(a->size / (2 << 20));

			if (nr < 0 || hp_write(nr + need) < 0 || hp_read("free_hugepages") < need) {
				printf("  hugetlb: could not reserve %ld pages; skipped\n", need);
				break;
			}
			raised = true;
		}
		snprintf(name, sizeof(name), "%s", c[k].name);
		if (strstr(name, "N threads"))
			snprintf(strstr(name, "N threads"), 16, "%d threads", c[k].threads);
		for (int i = 0; i < a->repeat; i++)
			if ((v[i] = time_guest_ram(a->size, c[k].page, c[k].threads, 0, why, sizeof(why))) < 0)
				break;
		if (v[0] < 0 || v[a->repeat - 1] < 0) {
			printf("  %-44s failed: %s\n", name, why);
			continue;
		}
		double b = best(v, a->repeat);
		printf("  %-44s %8.1f ms %6.2f GiB/s  %.2f\n", name, b, gib / (b / 1e3), b / base);
	}
	if (raised)
		hp_write(nr);
}

static void bench_start(const struct opts *a)
{
	char hvbuf[4096];
	const char *hv = a->hv ? a->hv : vhpc_prog("vhpc-hv", hvbuf, sizeof(hvbuf));
	double s[16], f[16], w[16];
	int ok = 0;

	for (int i = 0; i < a->repeat; i++)
		ok += boot_once(hv, a->guest, &s[ok], &f[ok], &w[ok]) == 0;
	if (ok) {
		printf("vhpc-hv start (64 MiB, 1 vCPU, %s), best of %d:\n", a->guest, ok);
		printf("  process start -> first KVM_RUN          %8.1f ms\n", best(s, ok));
		printf("  process start -> first guest exit (I/O) %8.1f ms\n", best(f, ok));
		printf("  fork -> exit after guest power-off       %8.1f ms\n", best(w, ok));
	} else {
		printf("vhpc-hv start: no run succeeded (%s)\n", hv);
	}
}

int main(int argc, char **argv)
{
	struct opts a = { .size = 1ull << 30, .repeat = 3 };

	vlog_init("vhpc-hv-bench");
	if (parse_args(&a, argc, argv) < 0)
		return 2;
	bench_ram(&a);
	if (a.guest)
		bench_start(&a);
	return 0;
}
