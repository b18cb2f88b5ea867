/*
 * IMB-MPI1's output format, so that scripts written for IMB read ours:
 * a commented header block, then per table a rule, "# Benchmarking NAME",
 * "# #processes = N", a rule, right-aligned 13-character columns, and
 * "%.2f" times in microseconds.
 */
#include "lib/consts.h"
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "bench/bench.h"
#include "mpibench.h"

#define COLW 13

static const char *const col_time[] = { "t[usec]", "Mbytes/sec" };
static const char *const col_range[] = { "t_min[usec]", "t_max[usec]", "t_avg[usec]" };

static bool has_bytes(enum mb_bench b) { return b != MB_BARRIER; }
/* PingPong and PingPing: one time, as IMB prints them (t_max of the pair). */
static bool single_time(enum mb_bench b) { return b == MB_PINGPONG || b == MB_PINGPING; }
static bool has_bw(enum mb_bench b) { return b <= MB_EXCHANGE; }

static int ncols(enum mb_bench b, bool check)
{
	int n = 1 + has_bytes(b);          /* #repetitions, #bytes */

	n += single_time(b) ? 1 : 3;
	n += has_bw(b);
	/* IMB's check build adds "defects" to every table but Barrier's. */
	n += check && b != MB_BARRIER;
	return n;
}

static void rule(int cols)
{
	putchar('#');
	for (int i = 1; i < cols * COLW; i++)
		putchar('-');
	putchar('\n');
}

void mb_print_header(const struct mb_opts *o, int argc, char **argv,
		     const long long *sizes, size_t nsizes, bool user_lengths)
{
	char date[64], lib[MPI_MAX_LIBRARY_VERSION_STRING];
	struct utsname u;
	time_t now = time(NULL);
	int ver, sub, len = 0;

	memset(&u, 0, sizeof(u));
	uname(&u);
	MPI_Get_version(&ver, &sub);
	MPI_Get_library_version(lib, &len);
	for (char *p = lib; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	strftime(date, sizeof(date), "%a %b %e %H:%M:%S %Y", localtime(&now));
	rule(5);
	printf("#    vhpc-mpibench %s, IMB-MPI1 compatible, MPI-1 part\n", VHPC_VERSION);
	rule(5);
	printf("# Date                  : %s\n", date);
	printf("# Machine               : %s\n", u.machine);
	printf("# System                : %s\n", u.sysname);
	printf("# Release               : %s\n", u.release);
	printf("# Version               : %s\n", u.version);
	printf("# MPI Version           : %d.%d\n", ver, sub);
	printf("# MPI Library           : %s\n", lib);
	printf("# MPI Thread Environment: \n\n\n");
	printf("# Calling sequence was: \n\n#");
	for (int i = 0; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n\n");
	if (user_lengths) {
		printf("# Message lengths were user defined\n");
	} else {
		printf("# Minimum message length in bytes:   %lld\n", sizes[0]);
		printf("# Maximum message length in bytes:   %lld\n", sizes[nsizes - 1]);
	}
	printf("#\n");
	printf("# MPI_Datatype                   :   MPI_BYTE \n");
	printf("# MPI_Datatype for reductions    :   MPI_FLOAT\n");
	printf("# MPI_Op                         :   MPI_SUM  \n");
	printf("#\n");
	printf("# Repetitions per size: min(%lld, max(1, %lld / size)); warm-up: 10%% of them\n",
	       o->iter, o->overall_vol);
	printf("# Data check            : %s\n", o->check ? "on (defects = wrong bytes)" : "off");
	printf("#\n\n");
	printf("# List of Benchmarks to run:\n\n");
	for (int b = 0; b < MB_NBENCH; b++)
		if (o->run[b])
			printf("# %s\n", mb_bench_names[b]);
	fflush(stdout);
}

void mb_print_table_header(enum mb_bench b, int nprocs, int waiting, bool check)
{
	int n = ncols(b, check);

	printf("\n");
	rule(n);
	printf("# Benchmarking %s \n", mb_bench_names[b]);
	printf("# #processes = %d \n", nprocs);
	if (waiting == 1)
		printf("# ( %d additional process waiting in MPI_Barrier)\n", waiting);
	else if (waiting > 1)
		printf("# ( %d additional processes waiting in MPI_Barrier)\n", waiting);
	rule(n);
	if (has_bytes(b))
		printf("%*s", COLW, "#bytes");
	printf("%*s", COLW, "#repetitions");
	if (single_time(b)) {
		printf("%*s%*s", COLW, col_time[0], COLW, col_time[1]);
	} else {
		for (int i = 0; i < 3; i++)
			printf("%*s", COLW, col_range[i]);
		if (has_bw(b))
			printf("%*s", COLW, col_time[1]);
	}
	if (check && b != MB_BARRIER)
		printf("%*s", COLW, "defects");
	printf("\n");
	fflush(stdout);
}

void mb_print_row(enum mb_bench b, long long size, long long reps, double tmin,
		  double tmax, double tavg, long long defects, bool check)
{
	/* 10^6 bytes per MB and t in usec: bytes/usec is MB/s. */
	double bw = tmax > 0 ? imb_bw_factor(mb_bench_names[b]) * (double)size / tmax : 0;

	if (has_bytes(b))
		printf("%*lld", COLW, size);
	printf("%*lld", COLW, reps);
	if (single_time(b)) {
		printf("%*.2f%*.2f", COLW, tmax, COLW, bw);
	} else {
		printf("%*.2f%*.2f%*.2f", COLW, tmin, COLW, tmax, COLW, tavg);
		if (has_bw(b))
			printf("%*.2f", COLW, bw);
	}
	if (check && b != MB_BARRIER)
		printf("%*.2f", COLW, (double)defects);
	printf("\n");
	fflush(stdout);
}

void mb_print_footer(void)
{
	printf("\n\n# All processes entering MPI_Finalize\n\n");
	fflush(stdout);
}
