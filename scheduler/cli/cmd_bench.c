/* vhpc bench: a benchmark suite natively and in guests, side by side in
 * one run (bench/harness/); vhpc bench compare: two such runs. */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/jobspec.h"
#include "lib/parse.h"
#include "cli.h"
#include "bench/bench.h"
#include "nodeagent/nodeagent.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bench_usage(void)
{
	printf("usage: vhpc bench [OPTIONS]\n"
	       "       vhpc bench compare [--json] A B\n"
	       "\n"
	       "Runs a suite natively on this host and in guests (through vhpc run) in one\n"
	       "invocation, repetitions interleaved; prints per metric native, guest and\n"
	       "guest/native (median [best] over repetitions) and keeps JSON, a table, a\n"
	       "plot and a chart of the ratios (PNGs), the machine description and every\n"
	       "run's output in a folder.\n"
	       "\n"
	       "  --suite S          mpi (default): vhpc-mpibench PingPong, Sendrecv, Exchange,\n"
	       "                       Allreduce, Bcast (or IMB-MPI1 with --imb)\n"
	       "                     net: TCP stream throughput and request/response round trip\n"
	       "                     mem: memory touch per GiB and start-up, native vs a guest\n"
	       "                     sys: system calls, pipes, context switches, process creation\n"
	       "                       with 1 and N copies\n"
	       "  -N, --guests N     guests (mpi, net: 2; mem, sys: 1)\n"
	       "  -n, --ranks N      MPI ranks (mpi, net: 2), copies (sys: the host's cores)\n"
	       "      --driver D     auto, container or kvm, passed to vhpc run (default auto)\n"
	       "      --image NAME   the guests' node image\n"
	       "      --imb PATH     mpi: a real IMB-MPI1 binary (it is put into a node image)\n"
	       "      --reps R       repetitions of each side (default 5)\n"
	       "      --sizes LIST   message sizes (mpi, net) or memory sizes (mem): 1,64K,4M\n"
	       "      --msglog [MIN:]MAX  mpi, net: sizes 2^MIN..2^MAX (mpi default 0:22, with 0)\n"
	       "      --time SECONDS net, sys: seconds per test (default 1)\n"
	       "      --iter N[,VOL] mpi: min(N, VOL / size) repetitions per size (default\n"
	       "                     1000,40M; VOL in whole MiB), passed on as -iter\n"
	       "      --no-vmshm     guests talk TCP to each other (vhpc run --no-vmshm)\n"
	       "      --native-btl L mpi: the native ranks' Open MPI BTLs (default self,vader,tcp;\n"
	       "                     self,tcp: loopback TCP, apart from what shared memory saves)\n"
	       "      --native-env NAME=VALUE  mpi: an environment variable for the native ranks\n"
	       "                     only, e.g. what the guests got (the job log says)\n"
	       "      --timeout T    limit per run: seconds, or 30s, 10m (default 10m)\n"
	       "      --out DIR      results folder (default: $VHPC_STATE_DIR/bench/TIME-SUITE)\n"
	       "\n"
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

enum { O_SUITE = 256, O_DRIVER, O_IMAGE, O_IMB, O_REPS, O_SIZES, O_MSGLOG, O_TIME, O_NOVMSHM,
       O_TIMEOUT, O_OUT, O_NATIVE_BTL, O_NATIVE_ENV, O_ITER, O_HELP };

int cmd_bench(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "suite", required_argument, NULL, O_SUITE },
		{ "guests", required_argument, NULL, 'N' },
		{ "ranks", required_argument, NULL, 'n' },
		{ "driver", required_argument, NULL, O_DRIVER },
		{ "image", required_argument, NULL, O_IMAGE },
		{ "imb", required_argument, NULL, O_IMB },
		{ "reps", required_argument, NULL, O_REPS },
		{ "sizes", required_argument, NULL, O_SIZES },
		{ "msglog", required_argument, NULL, O_MSGLOG },
		{ "time", required_argument, NULL, O_TIME },
		{ "no-vmshm", no_argument, NULL, O_NOVMSHM },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "out", required_argument, NULL, O_OUT },
		{ "native-btl", required_argument, NULL, O_NATIVE_BTL },
		{ "native-env", required_argument, NULL, O_NATIVE_ENV },
		{ "iter", required_argument, NULL, O_ITER },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 }
	};
	struct bench_opts o = { .argc = argc, .argv = argv };
	int want = DRIVER_AUTO, c;
	long long v;
	const char *why;
	struct verr err;

	if (argc > 1 && !strcmp(argv[1], "compare"))
		return cmd_compare(argc - 1, argv + 1);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":N:n:h", opts, NULL)) != -1) {
		switch (c) {
		case O_SUITE:
			o.suite = optarg;
			if (strcmp(optarg, "mpi") && strcmp(optarg, "net") && strcmp(optarg, "mem") && strcmp(optarg, "sys"))
				return usage_error("bench", "--suite: expected mpi, net, mem or sys, got '%s'", optarg);
			break;
		case 'N':
			if (parse_ll(optarg, 1, 64, &v) < 0)
				return usage_error("bench", "--guests: expected 1..64, got '%s'", optarg);
			o.guests = (int)v;
			break;
		case 'n':
			if (parse_ll(optarg, 1, 4096, &v) < 0)
				return usage_error("bench", "--ranks: expected 1..4096, got '%s'", optarg);
			o.ranks = (int)v;
			break;
		case O_DRIVER:
			if ((want = vhpc_driver_index(optarg)) < 0)
				return usage_error("bench", "--driver: expected " VHPC_DRIVER_CHOICES ", got '%s'", optarg);
			o.driver = optarg;
			break;
		case O_IMAGE:
			if (!ident_ok(optarg, 64))
				return usage_error("bench", "--image: '%s' is not an image name", optarg);
			o.image = optarg;
			break;
		case O_IMB:
			o.imb = optarg;
			break;
		case O_REPS:
			if (parse_ll(optarg, 1, 1000, &v) < 0)
				return usage_error("bench", "--reps: expected 1..1000, got '%s'", optarg);
			o.reps = (int)v;
			break;
		case O_SIZES:
			o.sizes = optarg;
			break;
		case O_MSGLOG:
			o.msglog = optarg;
			break;
		case O_TIME: {
			char *end;

			o.seconds = strtod(optarg, &end);
			if (end == optarg || *end || !isfinite(o.seconds) || o.seconds < 0.001 || o.seconds > 3600)
				return usage_error("bench", "--time: expected seconds from 0.001 to 3600, got '%s'", optarg);
			break;
		}
		case O_NOVMSHM:
			o.no_vmshm = true;
			break;
		case O_TIMEOUT:
			if (parse_seconds(optarg, 86400, &v) < 0)
				return usage_error("bench", "--timeout: expected seconds or 30s, 10m, 2h (at most a day), got '%s'", optarg);
			o.timeout_s = (int)v;
			break;
		case O_OUT:
			if (!*optarg)
				return usage_error("bench", "--out: empty folder name");
			o.out = optarg;
			break;
		case O_NATIVE_BTL:
			o.native_btl = optarg;
			break;
		case O_NATIVE_ENV:
			/* Checked with the suite (bench_run): it is the mpi suite's. */
			o.native_env = optarg;
			break;
		case O_ITER:
			/* Checked with the suite (bench_run): it is the mpi suite's. */
			o.iter = optarg;
			break;
		case O_HELP:
		case 'h':
			bench_usage();
			return 0;
		case ':':
			return usage_error("bench", "%s needs a value", argv[optind - 1]);
		default:
			return usage_error("bench", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("bench", "unexpected argument '%s'", argv[optind]);
	/* The driver vhpc run will pick, checked before any run: a refusal
	 * (kvm without hardware virtualization) comes first, with its reason. */
	if (!o.driver) {
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
	o.driver_used = na_driver_name(d);
	o.driver_why = why;
	return bench_run(&o);
}
