/*
 * vhpc-mpibench internals without MPI: command line, message sizes,
 * repetitions, process counts and data-check patterns (unit tested on their
 * own in tests/bench/).
 */
#ifndef VHPC_MPIBENCH_OPTS_H
#define VHPC_MPIBENCH_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/err.h"

/* Run order, as IMB-MPI1 runs them regardless of the command line order. */
enum mb_bench {
	MB_PINGPONG = 0, MB_PINGPING, MB_SENDRECV, MB_EXCHANGE,
	MB_ALLREDUCE, MB_BCAST, MB_BARRIER, MB_NBENCH
};
extern const char *const mb_bench_names[MB_NBENCH];
/* Case-insensitive, as IMB; -1 if unknown. */
int mb_bench_lookup(const char *name);

#define MB_MAX_MSGLOG 30
#define MB_MAX_SIZE   (1LL << MB_MAX_MSGLOG)
#define MB_MAX_SIZES  4096
#define MB_MAX_MSGLEN_FILE (1u << 20)

struct mb_opts {
	bool run[MB_NBENCH];
	int msglog_min, msglog_max;   /* sizes 0, 2^min .. 2^max */
	bool msglog_set;
	const char *msglen_file;      /* IMB -msglen: lengths from a file */
	long long min_size, max_size; /* filters; max_size < 0: none */
	bool zero_size;               /* IMB -zero_size: include size 0 */
	bool sync;                    /* IMB -sync: MPI_Barrier after each collective */
	long long iter;               /* IMB -iter: repetitions per sample */
	long long overall_vol;        /* ... capped by this volume per sample */
	int npmin;                    /* IMB -npmin */
	bool np_only;                 /* multi-process benchmarks only at np */
	bool check;                   /* verify every received byte */
	bool show_hosts;              /* print where each rank runs */
	bool help;
};

void mb_opts_defaults(struct mb_opts *o);
/* Parses argv (IMB style: "-opt value", also "--opt value" and
 * "--opt=value"; benchmark names as positional arguments). */
int mb_parse_args(int argc, char **argv, struct mb_opts *o, struct verr *err);
void mb_usage(FILE *f);

/* A -msglen file: one length per line (K/M/G suffixes allowed), blank lines
 * and '#' comments ignored.  *lens is malloc'd. */
int mb_parse_msglen(const char *name, const char *text, long long **lens, size_t *n,
		    struct verr *err);
/* The message sizes to run, ascending and unique: from lens (if non-NULL)
 * or -msglog, with 0 unless -zero_size 0, filtered by -minsize/-maxsize.
 * *sizes is malloc'd. */
int mb_sizes(const struct mb_opts *o, const long long *lens, size_t nlens,
	     long long **sizes, size_t *n, struct verr *err);
/* Active process counts for multi-process benchmarks, as IMB: npmin,
 * 2 npmin, 4 npmin, ... below np, then np.  Returns how many (<= max). */
int mb_proc_counts(int np, int npmin, bool np_only, int *counts, int max);
/* Warm-up repetitions before each measurement: 10% of reps, at least 1. */
long long mb_warmup_reps(long long reps);

/* ---- data-check patterns: every byte depends on (sender, size, repetition) */
void mb_fill(void *buf, long long len, int src, long long size, long long rep);
/* Number of wrong bytes; the first one's offset and values via the pointers. */
long long mb_verify(const void *buf, long long len, int src, long long size, long long rep,
		    long long *first, unsigned *want, unsigned *got);
/* Allreduce (MPI_FLOAT, MPI_SUM): small integers so every sum is exact. */
#define MB_RED_MOD 199
float mb_red_value(int rank, long long j, long long size, long long rep);
void mb_red_fill(float *buf, long long count, int rank, long long size, long long rep);
/* sums[k] = sum over ranks r < n of (31 r + k) mod MB_RED_MOD */
void mb_red_sums(int n, float sums[MB_RED_MOD]);
long long mb_red_verify(const float *buf, long long count, const float sums[MB_RED_MOD],
			long long size, long long rep, long long *first, unsigned *want,
			unsigned *got);

#endif
