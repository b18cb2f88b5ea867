/*
 * Internal to `vhpc bench` (bench/harness/): the pieces behind bench_run()
 * and bench_compare() in bench/bench.h.
 *
 *   metrics  every number measured, per side (native, guest) and
 *            repetition; statistics (min, median, max) and guest/native
 *            ratios computed from them; JSON out and back in.
 *   parse    IMB tables and the "vhpc-bench {json}" lines of vhpc-sysbench
 *            and vhpc-netbench into metrics.  This is guest output: every
 *            value is checked (finite, in range, expected) before use.
 *   suites   what each suite runs natively and in guests, and how its
 *            output becomes metrics.
 *   proc     one command with its output in files, a time limit, and
 *            Ctrl-C forwarded so `vhpc run` can tear its guests down.
 *   machine, table, plot, ratio, compare, image: the rest of a run's folder.
 */
#ifndef VHPC_BENCH_HARNESS_H
#define VHPC_BENCH_HARNESS_H

#include "lib/err.h"
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/bench.h"

struct json_object;
struct bh_ctx;

enum bh_side { BH_NATIVE = 0, BH_GUEST, BH_NSIDES };
extern const char *const bh_side_names[BH_NSIDES];

enum bh_better { BH_LOWER = 0, BH_HIGHER };

#define BH_MAX_REPS    1000
#define BH_MAX_METRICS 20000
/* Where --imb puts the IMB binary in the guests' image. */
#define BH_IMB_GUEST_PATH "/usr/local/bin/IMB-MPI1"

/* ------------------------------------------------------------- statistics */

struct bh_stat {
	size_t n;                /* repetitions measured (NaN = not measured) */
	double min, median, max; /* NaN when n == 0 */
};

/* Over the values that are not NaN; median of an even count is the mean of
 * the middle two.  Returns -1 (and n = 0) when there is none. */
int bh_stat_compute(const double *v, size_t n, struct bh_stat *s);
/* The best of the repetitions: min for lower-is-better, max otherwise. */
double bh_stat_best(const struct bh_stat *s, enum bh_better b);

struct bh_ratio {
	bool ok;                 /* both sides measured, native non-zero */
	double median;           /* guest median / native median */
	double best;             /* guest best / native best */
	size_t pairs;            /* repetitions where both sides measured */
	double pair_min, pair_max; /* range of guest/native within one repetition */
};

/* guest / native from per-repetition values (NaN = missing) and their
 * statistics. */
void bh_ratio_compute(const double *native, const double *guest, size_t reps,
		      const struct bh_stat *ns, const struct bh_stat *gs,
		      enum bh_better b, struct bh_ratio *r);

/* ---------------------------------------------------------------- metrics */

/* What a metric is; the same description must come every time. */
struct bh_desc {
	const char *group;       /* a series in tables and plots: "PingPong np=2" */
	const char *name;        /* "t", "bw", "stream" */
	const char *unit;        /* "usec", "MB/s", "loops/s" */
	const char *panel;       /* plot panel ("latency", "bandwidth"); "" = not plotted */
	enum bh_better better;
	double x;                /* message or memory size in bytes; < 0: none */
};

struct bh_metric {
	char key[192];           /* "group/name/x", unique */
	char label[160];         /* "PingPong np=2 t 1K" */
	char group[64], name[32], unit[24], panel[24];
	enum bh_better better;
	double x;
	double *v[BH_NSIDES];    /* [reps]; NaN where not measured */
	struct bh_stat st[BH_NSIDES];
	struct bh_ratio ratio;
};

struct bh_results {
	size_t reps;
	struct bh_metric *m;     /* in the order first measured */
	size_t n, cap;
};

void bh_results_init(struct bh_results *r, size_t reps);
void bh_results_free(struct bh_results *r);
/* The metric for d, created on first use.  Fails on text that is too long
 * or not printable, or a description that contradicts an earlier one. */
struct bh_metric *bh_metric_get(struct bh_results *r, const struct bh_desc *d, struct verr *err);
const struct bh_metric *bh_metric_find(const struct bh_results *r, const char *key);
/* Records one measurement: finite, >= 0, once per side and repetition. */
int bh_add(struct bh_results *r, const struct bh_desc *d, enum bh_side side, size_t rep,
	   double value, struct verr *err);
/* Statistics and ratios of every metric. */
void bh_results_finish(struct bh_results *r);
/* Size as a short label: 0, 512, 1K, 64K, 4M, 1G, 1.5G. */
const char *bh_fmt_x(double x, char *buf, size_t len);

/* [{"key","label","group","name","unit","panel","better","x",
 *   "native":{"values":[..|null],"n","min","median","max"}, "guest":{...},
 *   "ratio":{"median","best","pairs","pair_min","pair_max"}|null}] */
struct json_object *bh_results_to_json(const struct bh_results *r);
/* Reads what bh_results_to_json wrote (statistics are recomputed from the
 * values); where names the file in messages. */
int bh_results_from_json(struct json_object *metrics, size_t reps, const char *where,
			 struct bh_results *out, struct verr *err);

/* ------------------------------------------------------------------ parse */

/* Every IMB table row of o: t (t_max) in usec and, for sizes > 0 where the
 * table has it, Mbytes/sec.  Failed samples are skipped. */
int bh_from_imb(struct bh_results *r, enum bh_side side, size_t rep,
		const struct imb_output *o, struct verr *err);

/* Calls fn for each "vhpc-bench {...}" line of text with the parsed object;
 * returns the number of such lines or -1 (err names the line). */
typedef int (*bh_line_fn)(void *ctx, struct json_object *o, struct verr *err);
int bh_each_line(const char *name, const char *text, size_t len, bh_line_fn fn, void *ctx,
		 struct verr *err);
/* Field readers for those lines: a number within [min, max], a string
 * that is one of names (returns its index). */
int bh_json_num(struct json_object *o, const char *key, double min, double max, double *out,
		struct verr *err);
int bh_json_enum(struct json_object *o, const char *key, const char *const *names,
		 struct verr *err);

/* ------------------------------------------------------------ transport */

/* What rank 0 sent rank 1 through vmshm in one guest run, from the
 * counters btl_vmshm prints at finalize (btl_vmshm_stats=1):
 * "[vmshm g0:25 rank 0] vmshm-stats: peer 1 slot 1 tx_frags F tx_bytes B ...".
 * Guest output: a line that does not read exactly so is not counted. */
struct bh_vmshm_sent {
	bool seen;               /* rank 0's line for peer 1 was there */
	unsigned long long bytes;
	char guest0[16], guest1[16]; /* the guests of rank 0 and rank 1 ("g0"), "" if unknown */
};
void bh_vmshm_sent(const char *text, size_t len, struct bh_vmshm_sent *s);
/* One line on what carried the guests' pair over the run's repetitions
 * (vmshm, with its bytes, or why tcp or the fabric), into buf. */
const char *bh_transport_str(const struct bh_ctx *c, char *buf, size_t len);
/* IMB-style tables, one per benchmark: #bytes #repetitions, then t and
 * Mbytes/sec of native and guests (medians) and guests/native; above
 * them the facts a reader needs: cores, ranks per guest, the transport. */
void bh_imb_table(FILE *f, const struct bh_ctx *c);
/* The machine's state over the run, and the repetitions per size (mpi),
 * as "# " lines (table.c). */
void bh_state_line(FILE *f, const struct bh_ctx *c);
void bh_iter_line(FILE *f, const struct bh_ctx *c);

/* ---------------------------------------------------------------- a run */


/* --iter N[,VOL] (mpi): repetitions per size min(N, VOL / size). */
#define BH_MAX_ITER     1000000000LL
#define BH_MAX_ITER_VOL (2047LL << 20)  /* IMB keeps VOL in bytes in an int */
struct bh_iter {
	bool set;                /* --iter given; else the programs' default 1000,40M */
	long long n, vol;        /* VOL in bytes, whole MiB */
};

/* One command of one side; runs come in pairs (native, guest). */
struct bh_run {
	enum bh_side side;
	char **argv;             /* malloc'd, NULL-terminated */
	char tag[32];            /* what distinguishes pairs ("1G"), or "" */
	double x;                /* the pair's size, or -1 */
};

struct bh_suite {
	const char *name;
	int def_guests, def_ranks;   /* 0 ranks: the host's cores */
	double def_seconds;          /* per test; 0: the suite has no duration */
	bool has_sizes;              /* takes --sizes */
	bool has_msglog;             /* takes --msglog (message sizes) */
	const char *sizes_default;   /* a --sizes list, or NULL */
	const char *msglog_default;  /* a --msglog range, or NULL */
	bool msglog_zero;            /* --msglog includes size 0, as IMB's does */
	long long size_min, size_max;
	/* Checks the options for this suite and adds the runs (nothing on
	 * disk yet: bad options leave nothing behind). */
	int (*plan)(struct bh_ctx *c, struct verr *err);
	/* Files the runs need, once the results folder exists; may be NULL. */
	int (*prepare)(struct bh_ctx *c, struct verr *err);
	/* One run's output into metrics; t0/t1: CLOCK_MONOTONIC ns around it. */
	int (*parse)(struct bh_ctx *c, const struct bh_run *run, size_t rep, const char *path,
		     const char *out, size_t len, uint64_t t0, uint64_t t1, struct verr *err);
	const char *const *panels;   /* plotted, in order */
};
extern const struct bh_suite bh_suite_mpi, bh_suite_net, bh_suite_mem, bh_suite_sys;
const struct bh_suite *bh_suite_find(const char *name);

struct bh_ctx {
	const struct bench_opts *o;
	const struct bh_suite *s;
	int guests, ranks, reps, ncores;
	double seconds;
	long long *sizes;
	size_t nsizes;
	char dir[PATH_MAX];          /* the run's results folder */
	char self[PATH_MAX];         /* where vhpc and its sibling programs are */
	char driver[16], driver_why[256];
	char image[80];              /* for the guests */
	char imb[PATH_MAX];          /* --imb, resolved */
	struct bh_iter iter;         /* --iter (mpi) */
	char native_how[512], guest_how[512];
	/* mpi: the benchmarks run (--benchmarks, else all), in IMB's order. */
	const char *benches[8];
	size_t nbenches;
	/* mpi: what carried the guests' pair (rank 0, rank 1): the vmshm
	 * counters of each guest run (transport.c). */
	struct bh_vmshm_sent *vmshm;  /* [reps] */
	char machine[512];           /* one line: host, topology, kernel */
	char started[40];            /* UTC, ISO 8601 */
	struct bh_run *runs;
	size_t nruns;
	struct bh_results res;
	/* The machine's state before each repetition (linetrip.c): ns, NaN
	 * where not measured; none at all when why_no_trip says why. */
	int trip_cpu[2];
	double *trip_ns;
	char why_no_trip[160];
};

/* Appends a run (argv is taken over). */
int bh_add_run(struct bh_ctx *c, enum bh_side side, char **argv, const char *tag, double x,
	       struct verr *err);
/* argv builders (malloc'd, NULL-terminated); NULL on allocation failure. */
char **bh_argv(const char *first, ...) __attribute__((sentinel));
char **bh_argv_cat(char **a, char **b);   /* frees both */
void bh_argv_free(char **argv);
/* `mpirun` for native ranks, pinned like the guests' ranks (cores while
 * they go round, else shared and yielding). */
char **bh_native_mpirun(const struct bh_ctx *c, int ranks);
/* --native-btl, or self,vader,tcp. */
const char *bh_native_btl(const struct bh_ctx *c);
bool bh_fabric_rdma(const struct bh_ctx *c);
/* `<self>/vhpc run -N guests -n ranks [--vcpus V] [--mem M] [--driver ..]
 * [--image ..] ... --`; vcpus 0 and mem NULL leave vhpc run's defaults. */
char **bh_vhpc_run(const struct bh_ctx *c, int guests, int ranks, int vcpus, const char *mem);
/* --sizes: a comma list of sizes within [min, max], sorted, no repeats. */
int bh_parse_sizes(const char *what, const char *list, long long min, long long max,
		   long long **out, size_t *n, struct verr *err);
/* --iter N[,VOL] (mpi; struct bh_iter above). */
int bh_parse_iter(const char *s, struct bh_iter *it, struct verr *err);
/* The value of -iter: "N,VOL" in MiB for IMB-MPI1, "N,VOLM" for vhpc-mpibench. */
const char *bh_iter_arg(const struct bh_iter *it, bool imb, char *buf, size_t len);
/* --msglog [MIN:]MAX (MIN 0 when left out), both within 0..maxlog. */
int bh_parse_msglog(const char *s, int maxlog, int *lo, int *hi, struct verr *err);
const char *bh_sizes_str(const long long *v, size_t n, char *buf, size_t len);
/* <self>/NAME */
const char *bh_prog(const struct bh_ctx *c, const char *name, char *buf, size_t len);
/* argv as one shell-like line (for the record), into buf. */
const char *bh_argv_str(char *const *argv, char *buf, size_t len);

/* ---------------------------------------------------------------- proc */

struct bh_proc {
	int status;              /* exit status; 128 + N when killed by signal N */
	uint64_t t0, t1;         /* CLOCK_MONOTONIC ns: just before fork, after reaping */
	bool timed_out;
	int interrupted;         /* signal vhpc bench got meanwhile (forwarded), or 0 */
};
/* Runs argv with stdin /dev/null and stdout/stderr into files; past
 * timeout_s the command gets SIGTERM, and 15 s later its process group
 * SIGKILL.  SIGINT/SIGTERM/SIGHUP meant for vhpc bench go to the command
 * (vhpc run then removes its guests) and are reported in p->interrupted. */
int bh_spawn(char *const *argv, const char *out_path, const char *err_path, int timeout_s,
	     struct bh_proc *p, struct verr *err);

/* -------------------------------------------------------- run's folder */

/* Machine description: hostname, kernel, CPU model, hwloc summary,
 * memory, driver, versions of vhpc, Open MPI, runc, gnuplot; sets
 * c->machine and writes lstopo's text to topology.txt. */
struct json_object *bh_machine(struct bh_ctx *c);
#define BH_TRIP_WHAT "round trip of one cache line between two cores, before each repetition"
/* A run whose slowest round trip is this many times its fastest changed
 * state under the benchmarks (the table says so). */
#define BH_TRIP_SWING 1.5
/* Median time of a cache line's round trip between CPUs a and b (two
 * pinned threads taking turns to write it), in ns: the machine's state. */
int bh_linetrip(int cpu_a, int cpu_b, double *ns, struct verr *err);
/* The first CPU of each of the first two cores (hwloc): where the ranks
 * of both sides run.  -1 on a machine with one core. */
int bh_linetrip_cpus(int *cpu_a, int *cpu_b);
/* The state before each repetition of a run, in c->trip_*: set-up (which
 * CPUs, or why none), one measurement (a failure leaves NaN, says why once
 * on stderr, and the run goes on), "; cache line CPU a<->b: N ns" for the
 * progress line ("" when not measured), and results.json's machine_state:
 * {"what","unit","cpus","values":[..|null],"n","min","median","max"
 * [,"failed"]} or {"what","skipped"}. */
void bh_trip_setup(struct bh_ctx *c);
void bh_trip_measure(struct bh_ctx *c, size_t rep);
const char *bh_trip_note(const struct bh_ctx *c, size_t rep, char *buf, size_t len);
struct json_object *bh_trip_json(const struct bh_ctx *c);
/* Physical cores of this host (hwloc), at least 1. */
int bh_host_cores(void);
/* The table of results, as printed. */
void bh_table(FILE *f, const struct bh_ctx *c);
/* plot.gp, plot-*.dat and plot.png in c->dir. */
int bh_plot(const struct bh_ctx *c, struct verr *err);
/* What a chart is drawn from, so results read back from a folder can be
 * drawn as well as a run's own. */
struct bh_chart {
	const char *dir;         /* the results folder: script, data and PNG go here */
	const char *suite, *driver;
	int reps;
	const struct bh_results *res;
};
/* ratio.gp and ratio-*.dat: guest/native per metric, time-like and
 * rate-like metrics in panels of their own (bh_gnuplot draws ratio.png). */
int bh_ratio_write(const struct bh_chart *ch, struct verr *err);
/* `gnuplot SCRIPT` in dir, which must leave dir/PNG, a PNG file (its
 * messages go to dir/<script's name>.log). */
int bh_gnuplot(const char *dir, const char *script, const char *png, struct verr *err);
/* xrange and explicit xtics (1K, 64K, 4M rather than 2^n or 1e+06) for the
 * sizes xs (sorted here; at most 16 labels); size 0, which a log axis has
 * no place for, is drawn at zero. */
void bh_gp_size_tics(FILE *f, double *xs, size_t n, double zero);
/* For --imb: the name of an image like --image's (or the default) with
 * the IMB binary in it, into c->image; then its build. */
void bh_imb_image_name(struct bh_ctx *c);
int bh_imb_image(struct bh_ctx *c, struct verr *err);

/* A results folder read back (compare). */
struct bh_doc {
	char dir[PATH_MAX];
	char suite[16], started[40], driver[16], host[128];
	size_t reps;
	struct json_object *root;
	struct bh_results res;
};
int bh_doc_load(const char *dir, struct bh_doc *d, struct verr *err);
void bh_doc_free(struct bh_doc *d);
/* The comparison B/A as text (and JSON when json is set). */
int bh_compare(FILE *f, const struct bh_doc *a, const struct bh_doc *b, bool json, struct verr *err);

#endif
