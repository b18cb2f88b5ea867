/* vhpc bench: a benchmark suite natively and in guests, side by side in
 * one run (bench/harness/); vhpc bench compare: two such runs. */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/jobspec.h"
#include "lib/parse.h"
#include "cli.h"
#include "jobargs.h"
#include "optgen.h"
#include "bench/bench.h"
#include "nodeagent/nodeagent.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BO_SUITE = JO_ID_END, BO_IMB, BO_REPS, BO_SIZES, BO_MSGLOG, BO_TIME, BO_ITER,
       BO_NATIVE_BTL, BO_NATIVE_ENV, BO_FABRIC, BO_BENCHMARKS, BO_TABLE, BO_OUT };

/* Rows with a job option's id are that option (lib/jobopts.c), passed on
 * to vhpc run; only their words here are bench's: its defaults differ. */
static const struct opt bench_rows[] = {
	{ BO_SUITE, "suite", 0, "S", "mpi (default): vhpc-mpibench PingPong, Sendrecv, Exchange,\n"
	  "  Allreduce, Bcast (or IMB-MPI1 with --imb)\n"
	  "net: TCP stream throughput and request/response round trip\n"
	  "mem: memory touch per GiB and start-up, native vs a guest\n"
	  "sys: system calls, pipes, context switches, process creation\n"
	  "  with 1 and N copies" },
	{ .id = JO_GUESTS, .help = "guests (mpi, net: 2; mem, sys: 1)" },
	{ .id = JO_RANKS, .help = "MPI ranks (mpi, net: 2), copies (sys: the host's cores)" },
	{ .id = JO_DRIVER, .help = VHPC_DRIVER_CHOICES ", passed to vhpc run (default auto)" },
	{ .id = JO_IMAGE, .help = "the guests' node image" },
	{ BO_IMB, "imb", 0, "PATH", "mpi: a real IMB-MPI1 binary (it is put into a node image)" },
	{ BO_BENCHMARKS, "benchmarks", 0, "LIST", "mpi: some of PingPong,Sendrecv,Exchange,Allreduce,Bcast\n"
	  "(default all)" },
	{ BO_TABLE, "table", 0, "T", "what stdout gets: metrics (default), a line per metric; imb\n"
	  "(mpi): IMB's tables with native, guests and the ratio side\n"
	  "by side, under the cores, ranks per guest and transport" },
	{ BO_REPS, "reps", 0, "R", "repetitions of each side (default 5)" },
	{ BO_SIZES, "sizes", 0, "LIST", "message sizes (mpi, net) or memory sizes (mem): 1,64K,4M" },
	{ BO_MSGLOG, "msglog", 0, "[MIN:]MAX", "mpi, net: sizes 2^MIN..2^MAX (mpi default 0:22, with 0)" },
	{ BO_TIME, "time", 0, "SECONDS", "net, sys: seconds per test (default 1)" },
	{ BO_ITER, "iter", 0, "N[,VOL]", "mpi: min(N, VOL / size) repetitions per size (default\n"
	  "1000,40M; VOL in whole MiB), passed on as -iter" },
	{ .id = JO_NOVMSHM, .help = "guests talk TCP to each other (vhpc run --no-vmshm)" },
	{ .id = JO_NOSINGLECOPY, .help = "container guests keep vmshm without its single copy\n"
	  "(vhpc run --no-single-copy): what the pod's copy gains" },
	{ BO_NATIVE_BTL, "native-btl", 0, "L", "mpi: the native ranks' Open MPI BTLs (default self,vader,tcp;\n"
	  "self,tcp: loopback TCP, apart from what shared memory saves)" },
	{ BO_NATIVE_ENV, "native-env", 0, "NAME=VALUE", "mpi: an environment variable for the native ranks\n"
	  "only, e.g. what the guests got (the job log says)" },
	{ BO_FABRIC, "fabric", 0, "F", "mpi: rdma or tcp, what every pair of ranks talks over on both\n"
	  "sides: rdma: natively Open MPI's ofi BTL on this host's RDMA device\n"
	  "(verbs;ofi_rxd), guests vhpc run --rdma --no-vmshm; tcp: natively\n"
	  "self,tcp, guests --no-rdma --no-vmshm" },
	{ .id = JO_TIMEOUT, .help = "limit per run: seconds, or 30s, 10m (default 10m)" },
	{ BO_OUT, "out", 0, "DIR", "results folder (default: $VHPC_STATE_DIR/bench/TIME-SUITE)" },
	{ .id = JO_HELP, .help = "this help" },
};
#define BENCH_ROWS (sizeof(bench_rows) / sizeof(bench_rows[0]))

static void bench_usage(void)
{
	struct opt rows[BENCH_ROWS];
	struct optset s = { .n = 0 };

	printf("usage: vhpc bench [OPTIONS]\n"
	       "       vhpc bench compare [--json] A B\n"
	       "\n"
	       "Runs a suite natively on this host and in guests (through vhpc run) in one\n"
	       "invocation, repetitions interleaved; prints per metric native, guest and\n"
	       "guest/native (median [best] over repetitions) and keeps JSON, a table, a\n"
	       "plot and a chart of the ratios (PNGs), the machine description and every\n"
	       "run's output in a folder.\n"
	       "\n");
	optset_words(&s, rows, bench_rows, BENCH_ROWS, JO_BENCH);
	optset_help(&s, 21, stdout);
	printf("\n"
	       "compare: per metric and side B/A of the medians with the noise range\n"
	       "[min B / max A .. max B / min A]; --json prints JSON.\n"
	       "Exit status: 0, 1 a run failed or results are unreadable, 2 bad options.\n");
}

static int parse_seconds(const char *s, long long max, long long *out)
{
	long long v, mult = 1;
	char buf[32];
	size_t n = strlen(s);

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n + 1);
	if (buf[n - 1] == 's' || buf[n - 1] == 'm' || buf[n - 1] == 'h') {
		mult = buf[n - 1] == 's' ? 1 : buf[n - 1] == 'm' ? 60 : 3600;
		buf[n - 1] = 0;
	}
	if (parse_ll(buf, 1, max, &v) < 0 || v * mult > max)
		return -1;
	*out = v * mult;
	return 0;
}

static int cmd_compare(int argc, char **argv)
{
	bool json = false;
	const char *dirs[2];
	int n = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			bench_usage();
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1])
			return usage_error("bench compare", "unknown option '%s'", argv[i]);
		else if (n == 2)
			return usage_error("bench compare", "expected two results folders, got a third: '%s'", argv[i]);
		else
			dirs[n++] = argv[i];
	}
	if (n != 2)
		return usage_error("bench compare", "expected two results folders: vhpc bench compare A B");
	return bench_compare(dirs[0], dirs[1], json);
}

/* The job options bench passes on to vhpc run, within what its harness
 * runs (64 guests, 4096 ranks, a day per run). */
static int set_job_opt(struct bench_opts *o, int id, const char *val, int *want)
{
	long long v;

	switch (id) {
	case JO_GUESTS:
		if (parse_ll(val, 1, 64, &v) < 0)
			return usage_error("bench", "--guests: expected 1..64, got '%s'", val);
		o->guests = (int)v;
		return 0;
	case JO_RANKS:
		if (parse_ll(val, 1, 4096, &v) < 0)
			return usage_error("bench", "--ranks: expected 1..4096, got '%s'", val);
		o->ranks = (int)v;
		return 0;
	case JO_DRIVER:
		o->driver = val;
		return job_args_driver("bench", val, want);
	case JO_IMAGE:
		o->image = val;
		return job_args_check("bench", JO_IMAGE, val);
	case JO_NOVMSHM:
		o->no_vmshm = true;
		return 0;
	case JO_NOSINGLECOPY:
		o->no_single_copy = true;
		return 0;
	default:
		if (parse_seconds(val, 86400, &v) < 0)
			return usage_error("bench", "--timeout: expected seconds or 30s, 10m, 2h (at most a day), got '%s'", val);
		o->timeout_s = (int)v;
		return 0;
	}
}

/* Bench's own options; the mpi suite's --native-env and --iter are
 * checked with the suite (bench_run). */
static int set_bench_opt(struct bench_opts *o, int id, const char *val)
{
	long long v;
	char *end;

	switch (id) {
	case BO_SUITE:
		o->suite = val;
		if (strcmp(val, "mpi") && strcmp(val, "net") && strcmp(val, "mem") && strcmp(val, "sys"))
			return usage_error("bench", "--suite: expected mpi, net, mem or sys, got '%s'", val);
		return 0;
	case BO_REPS:
		if (parse_ll(val, 1, 1000, &v) < 0)
			return usage_error("bench", "--reps: expected 1..1000, got '%s'", val);
		o->reps = (int)v;
		return 0;
	case BO_TIME:
		o->seconds = strtod(val, &end);
		if (end == val || *end || !isfinite(o->seconds) || o->seconds < 0.001 || o->seconds > 3600)
			return usage_error("bench", "--time: expected seconds from 0.001 to 3600, got '%s'", val);
		return 0;
	case BO_OUT:
		if (!*val)
			return usage_error("bench", "--out: empty folder name");
		o->out = val;
		return 0;
	case BO_IMB: o->imb = val; return 0;
	case BO_SIZES: o->sizes = val; return 0;
	case BO_MSGLOG: o->msglog = val; return 0;
	case BO_NATIVE_BTL: o->native_btl = val; return 0;
	case BO_NATIVE_ENV: o->native_env = val; return 0;
	case BO_BENCHMARKS: o->benchmarks = val; return 0;
	case BO_TABLE:
		if (strcmp(val, "imb") && strcmp(val, "metrics"))
			return usage_error("bench", "--table: expected imb or metrics, got '%s'", val);
		o->table = val;
		return 0;
	case BO_FABRIC:
		if (strcmp(val, "rdma") && strcmp(val, "tcp"))
			return usage_error("bench", "--fabric: expected rdma or tcp, got '%s'", val);
		o->fabric = val;
		return 0;
	default: o->iter = val; return 0;
	}
}

/* The driver vhpc run will pick, checked before any run: a refusal (kvm
 * without hardware virtualization) comes first, with its reason. */
static int bench_driver(struct bench_opts *o, int want)
{
	struct verr err;
	const char *why;

	if (!o->driver) {
		struct cluster_cfg cl;

		if (cluster_load(NULL, &cl, &err) < 0) {
			fprintf(stderr, "vhpc bench: %s\n", err.msg);
			return EXIT_USAGE;
		}
		want = cl.default_driver;
		cluster_free(&cl);
	}
	const struct na_driver *d = na_driver_resolve(vhpc_driver_names[want], &why, &err);

	if (!d || na_driver_check(d, &err) < 0) {
		fprintf(stderr, "vhpc bench: %s\n", err.msg);
		return EXIT_USAGE;
	}
	o->driver_used = na_driver_name(d);
	o->driver_why = why;
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o = { .argc = argc, .argv = argv };
	struct opt rows[BENCH_ROWS];
	struct optset s = { .n = 0 };
	struct option longs[BENCH_ROWS + 1];
	char shorts[2 * BENCH_ROWS + 2];
	int want = DRIVER_AUTO, c, rc = 0;

	if (argc > 1 && !strcmp(argv[1], "compare"))
		return cmd_compare(argc - 1, argv + 1);
	optset_words(&s, rows, bench_rows, BENCH_ROWS, JO_BENCH);
	optset_getopt(&s, ":", longs, shorts, sizeof(shorts));
	optind = 1;
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		if (c == JO_HELP) {
			bench_usage();
			return 0;
		} else if (c == ':')
			rc = usage_error("bench", "%s needs a value", argv[optind - 1]);
		else if (c == '?')
			rc = usage_error("bench", "unknown option '%s'", argv[optind - 1]);
		else
			rc = c < JO_ID_END ? set_job_opt(&o, c, optarg, &want) : set_bench_opt(&o, c, optarg);
	}
	if (rc)
		return rc;
	if (optind < argc)
		return usage_error("bench", "unexpected argument '%s'", argv[optind]);
	if ((rc = bench_driver(&o, want)))
		return rc;
	return bench_run(&o);
}
