/* vhpc-mpibench internals that need MPI. */
#ifndef VHPC_MPIBENCH_H
#define VHPC_MPIBENCH_H

#include <mpi.h>

#include "opts.h"

struct mb_ctx {
	const struct mb_opts *o;
	int wrank, wsize;
	char *sbuf, *rbuf;          /* each 2 x the largest size (Exchange receives two) */
	/* Test-only fault injection (VHPC_MPIBENCH_TEST_CORRUPT=RANK[:BENCH]):
	 * that rank flips one received byte per sample in check mode. */
	int corrupt_rank;           /* -1: off */
	int corrupt_bench;          /* -1: every benchmark */
	float red_sums[MB_RED_MOD]; /* expected Allreduce sums for red_n ranks */
	int red_n;
	long long defects;          /* wrong bytes this rank saw in the current sample */
	long long defects_total;    /* ... over the whole run */
	int reports;                /* error lines this rank printed */
};

/* One sample: warm-up, two barriers, reps timed repetitions on comm.
 * Returns this rank's time per repetition in microseconds (PingPong: half
 * a round trip); adds wrong bytes to c->defects in check mode. */
double mb_measure(struct mb_ctx *c, enum mb_bench b, MPI_Comm comm, long long size,
		  long long reps);

/* IMB's format: general header, table header, rows, closing line. */
void mb_print_header(const struct mb_opts *o, int argc, char **argv,
		     const long long *sizes, size_t nsizes, bool user_lengths);
void mb_print_table_header(enum mb_bench b, int nprocs, int waiting, bool check);
void mb_print_row(enum mb_bench b, long long size, long long reps, double tmin,
		  double tmax, double tavg, long long defects, bool check);
void mb_print_footer(void);

/* -show-hosts: rank 0 prints one comment line per rank. */
void mb_show_hosts(MPI_Comm comm);

#endif
