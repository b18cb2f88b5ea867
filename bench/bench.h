/*
 * bench: IMB-MPI1-compatible benchmark tables.  This header is what other
 * components may use from bench/ (vhpc-mpibench itself is a program):
 *
 *   - the repetition rule IMB-MPI1 uses (and vhpc-mpibench follows), and the
 *     bandwidth factor of each benchmark;
 *   - a parser for IMB-MPI1 output (real IMB, any version that prints the
 *     classic "# Benchmarking NAME" blocks, and ours) into tables;
 *   - sanity checks on a parsed table (sizes, times, Mbytes/sec, repetitions).
 *
 * Link: bench/imb_rules.c bench/imb_parse.c bench/imb_check.c bench/imb_json.c
 * (module.mk names them BENCH_LIB_SRCS and builds $(B)/lib/libvhpc-bench.a).
 */
#ifndef VHPC_BENCH_H
#define VHPC_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/err.h"

/* ------------------------------------------------------------------ rules */

/* IMB_settings.h defaults: MSGSPERSAMPLE, OVERALL_VOL, MAXMSGLOG. */
#define IMB_MSGS_PER_SAMPLE 1000LL
#define IMB_OVERALL_VOL     (40LL << 20)
#define IMB_MAX_MSGLOG      22

/* Repetitions IMB runs for one message size: max_reps for 0 bytes, else
 * min(max_reps, max(1, overall_vol / bytes)). */
long long imb_reps(long long bytes, long long max_reps, long long overall_vol);

/* How many message sizes one measured time moves, for Mbytes/sec:
 * PingPong and PingPing 1, Sendrecv 2, Exchange 4 (and IMB's *AnySource /
 * *SpecificSource variants).  0 for benchmarks without a bandwidth column or
 * that this code does not know.  Case-insensitive; a "Multi-" prefix is
 * ignored. */
double imb_bw_factor(const char *bench);

/* Whether a benchmark runs between exactly two processes (PingPong family). */
bool imb_is_pair(const char *bench);

/* ----------------------------------------------------------------- tables */

enum imb_col {
	IMB_COL_GROUP = 0,  /* "Group"        (-multi mode) */
	IMB_COL_BYTES,      /* "#bytes" */
	IMB_COL_REPS,       /* "#repetitions" */
	IMB_COL_T,          /* "t[usec]"      (single-time tables: t_max) */
	IMB_COL_TMIN,       /* "t_min[usec]" */
	IMB_COL_TMAX,       /* "t_max[usec]" */
	IMB_COL_TAVG,       /* "t_avg[usec]" */
	IMB_COL_MBPS,       /* "Mbytes/sec" */
	IMB_COL_MSGRATE,    /* "Msg/sec" */
	IMB_COL_DEFECTS,    /* "defects"      (IMB built with -DCHECK, vhpc-mpibench -check) */
	IMB_COL_T_OVRL,     /* "t_ovrl[usec]" (IMB-NBC) */
	IMB_COL_T_PURE,     /* "t_pure[usec]" */
	IMB_COL_T_CPU,      /* "t_CPU[usec]" */
	IMB_COL_OVERLAP,    /* "overlap[%]" */
	IMB_NCOLS
};
/* The header text IMB prints for a column ("#bytes"). */
const char *imb_col_name(enum imb_col c);

#define IMB_MAX_COLS    IMB_NCOLS
#define IMB_MAX_TABLES  10000
#define IMB_MAX_ROWS    100000
#define IMB_MAX_INPUT   (64u << 20)

struct imb_row {
	double v[IMB_NCOLS];   /* indexed by enum imb_col; valid where the table has the column */
	int line;              /* 1-based line in the input */
	char *failure;         /* IMB's note when the sample failed ("time-out.; ..."), else NULL */
};

struct imb_table {
	char name[64];         /* "PingPong" (without a "Multi-" prefix) */
	bool multi;            /* "# Benchmarking Multi-NAME" */
	int nprocs;            /* "# #processes = N" (group size in -multi mode); 0 if not printed */
	int ngroups;           /* -multi: number of groups; else 1 */
	int waiting;           /* "( N additional processes waiting in MPI_Barrier)" */
	int ncols;
	enum imb_col cols[IMB_MAX_COLS];  /* header order */
	unsigned has;          /* bit (1u << col) for each column present */
	struct imb_row *rows;
	size_t nrows;
	int line;              /* line of "# Benchmarking" */
};

struct imb_output {
	char source[256];      /* name used in messages (file name, "<stdin>") */
	char suite[128];       /* title line, e.g. "Intel(R) MPI Benchmarks 2021.3, MPI-1 part" */
	struct imb_table *tables;
	size_t ntables;
	size_t ignored_lines;  /* lines that are not IMB's (launcher noise, warnings) */
};

static inline bool imb_has(const struct imb_table *t, enum imb_col c)
{
	return (t->has >> c) & 1u;
}

/* The time bandwidth is based on: t_max[usec], or t[usec]; -1 if neither. */
double imb_row_tmax(const struct imb_table *t, const struct imb_row *r);
/* #bytes of a row; -1 when the table has no #bytes column (Barrier). */
long long imb_row_bytes(const struct imb_table *t, const struct imb_row *r);

/*
 * Parses IMB output.  Tolerates IMB's header blocks, "#----" lines, notes
 * about waiting processes, "MODE:" blocks, tables with any subset of the
 * known columns, failed samples ("out-of-mem.", "time-out."), CRLF line
 * ends and lines that are not IMB's (launcher noise; counted in
 * ignored_lines).  Rejects, with the line number: malformed rows inside a
 * table, unknown or repeated columns, tables without a column header,
 * non-finite or negative numbers, NUL bytes, and input with no table.
 * name is used in messages.  On error *out is left empty.
 */
int imb_parse(const char *name, const char *text, size_t len,
	      struct imb_output *out, struct verr *err);
/* Reads a file ("-" = stdin) of at most IMB_MAX_INPUT bytes and parses it. */
int imb_parse_file(const char *path, struct imb_output *out, struct verr *err);
void imb_output_free(struct imb_output *o);

/* First table of that benchmark (case-insensitive) and process count
 * (nprocs 0 = any); NULL if none. */
const struct imb_table *imb_find(const struct imb_output *o, const char *bench,
				 int nprocs);

/* The parsed output as JSON text (malloc'd; NULL on allocation failure):
 * {"source","suite","tables":[{"name","multi","nprocs","waiting",
 *  "columns":[...],"rows":[{"line":N,"bytes":..,"reps":..,"t_max":..,...}]}]} */
char *imb_output_json(const struct imb_output *o);

/* ----------------------------------------------------------------- checks */

struct imb_check_opts {
	double mbyte;          /* bytes per MB in Mbytes/sec: 1e6 (IMB 2018 on, ours); 1048576 (IMB V3/V4) */
	long long max_reps;    /* IMB -iter: repetitions per sample (1000) */
	long long overall_vol; /* IMB -iter: overall volume per sample (40 MiB) */
	bool fewer_reps_ok;    /* IMB's -time / dynamic iteration policy may cut repetitions down */
};
void imb_check_defaults(struct imb_check_opts *o);
/* 1048576 for outputs whose title says "MPI Benchmark Suite V..." (IMB 2.x
 * to 4.x computed Mbytes/sec with 2^20), else 1e6. */
double imb_guess_mbyte(const struct imb_output *o);

/* Called once per violation; row is NULL for table-wide problems. */
typedef void (*imb_report_fn)(void *ctx, const struct imb_table *t,
			      const struct imb_row *r, const char *msg);

/*
 * Checks one table: at least one row; message sizes strictly increasing;
 * repetitions follow the rule (imb_reps; at most that with fewer_reps_ok);
 * t_max (or t) positive, t_min <= t_avg <= t_max within rounding; no failed
 * samples; no data-check defects; pair benchmarks at 2 processes; and
 * Mbytes/sec == factor * bytes / t_max within the rounding of both printed
 * numbers.  Returns the number of violations.
 */
size_t imb_check_table(const struct imb_table *t, const struct imb_check_opts *o,
		       imb_report_fn report, void *ctx);
/* Every table of an output. */
size_t imb_check(const struct imb_output *out, const struct imb_check_opts *o,
		 imb_report_fn report, void *ctx);

/* ------------------------------------------------------------- vhpc bench */

/*
 * `vhpc bench`: a suite natively and in guests in one invocation, with the
 * repetitions interleaved; results (JSON, table, plot, machine description,
 * every run's raw output) in a folder.  The harness lives in bench/harness/.
 */
struct bench_opts {
	const char *suite;       /* mpi (default), net, mem, sys */
	int guests, ranks;       /* 0: the suite's default */
	const char *driver;      /* auto, container, kvm (passed to vhpc run); NULL: auto */
	const char *driver_used; /* what that resolves to here, and why (for the record) */
	const char *driver_why;
	const char *image;       /* guests' node image; NULL: vhpc run's default */
	const char *imb;         /* mpi: a real IMB-MPI1 binary instead of vhpc-mpibench */
	int reps;                /* repetitions of each side; 0: 5 */
	const char *sizes;       /* "1,64K,4M": message (mpi, net) or memory (mem) sizes */
	const char *msglog;      /* mpi, net: "[MIN:]MAX" as IMB's -msglog */
	const char *iter;        /* mpi: "N[,VOL]", repetitions per size min(N, VOL / size) */
	double seconds;          /* net, sys: seconds per test; 0: the suite's default */
	bool no_vmshm;           /* guests talk TCP (vhpc run --no-vmshm) */
	bool no_single_copy;     /* vmshm without the pod's single copy (vhpc run --no-single-copy) */
	const char *native_btl;  /* mpi, net: Open MPI BTLs of the native ranks; NULL: self,vader,tcp */
	const char *native_env;  /* mpi: NAME=VALUE for the native ranks (mpirun -x); NULL: none */
	const char *fabric;      /* mpi: "rdma" or "tcp", every pair of ranks on it, both sides; NULL: as ever */
	const char *benchmarks;  /* mpi: "PingPong,Sendrecv", a subset; NULL: all five */
	const char *table;       /* "imb": stdout gets IMB-style tables side by side; NULL: one line per metric */
	int timeout_s;           /* per run; 0: 600 */
	const char *out;         /* results folder; NULL: <state dir>/bench/<time>-<suite> */
	int argc;                /* the command line, kept with the results */
	char **argv;
};
/* Runs it; errors are printed.  Returns the exit status: 0, 1 (a run
 * failed), 2 (bad options), 128+N (interrupted by signal N). */
int bench_run(const struct bench_opts *o);
/* `vhpc bench compare A B`: per metric B/A with the noise range. */
int bench_compare(const char *a, const char *b, bool json);

#endif
