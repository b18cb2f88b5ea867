/*
 * vhpc-ctld's command line.  One table holds each option's spelling, its
 * value, its help, what it sets and, for numbers, their range and default:
 * getopt_long's table and --help are made from it, so an option cannot be
 * taken without being documented, nor documented with another default.
 */
#include "lib/consts.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "ctld.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct opt;
/* What an option does with its value: CTLD_OPTS_RUN to go on, else the
 * status vhpc-ctld exits with (after it printed why). */
typedef int (*opt_set)(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg);

struct opt {
	const char *name;
	const char *arg;               /* its value in --help; NULL: it takes none */
	const char *help;              /* lines; NULL: listed on the last line of --help */
	opt_set set;
	size_t off;                    /* set_int: an int of struct ctld; set_str: a string of struct ctld_opts */
	long long min, max, def;       /* set_int */
};

static int set_str(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg);
static int set_state(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg);
static int set_int(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg);
static int show_help(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg);
static int show_version(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg);

#define CTLD(f) offsetof(struct ctld, f)
#define OPTS(f) offsetof(struct ctld_opts, f)
static const struct opt opts[] = {
	{ .name = "listen", .arg = "ADDR:PORT", .set = set_str, .off = OPTS(listen),
	  .help = "where nodes and users reach it (default: 0.0.0.0 and\n"
		  "the port of `controller:` in the cluster file)" },
	{ .name = "state", .arg = "DIR", .set = set_state,
	  .help = "database and the cluster's image store\n(default $VHPC_STATE_DIR/ctld)" },
	{ .name = "spool", .arg = "DIR", .set = set_str, .off = OPTS(spool),
	  .help = "job output (default: the cluster file's ctld.spool, else\n"
		  "the state folder's path with -spool: $VHPC_STATE_DIR/ctld-spool)" },
	{ .name = "cluster", .arg = "FILE", .set = set_str, .off = OPTS(cluster),
	  .help = "cluster file (default $VHPC_CLUSTER, else configs/cluster.yaml)" },
	{ .name = "heartbeat-interval", .arg = "MS", .set = set_int, .off = CTLD(hb_interval_ms),
	  .min = 100, .max = 600000, .def = 2000, .help = "how often nodes report" },
	{ .name = "heartbeat-misses", .arg = "N", .set = set_int, .off = CTLD(hb_misses),
	  .min = 1, .max = 100, .def = 3, .help = "missed reports before a node is down" },
	{ .name = "sched-depth", .arg = "N", .set = set_int, .off = CTLD(sched_depth),
	  .min = 1, .max = 100000, .def = 100, .help = "queued jobs each scheduling pass considers" },
	{ .name = "start-retry-pause", .arg = "MS", .set = set_int, .off = CTLD(start_retry_ms),
	  .min = 10, .max = 600000, .def = 2000,
	  .help = "before a failed start is tried again, this times the\nattempts so far" },
	{ .name = "rpc-timeout", .arg = "MS", .set = set_int, .off = CTLD(rpc_timeout_ms),
	  .min = 1000, .max = 3600000, .def = 300000, .help = "longest wait for a node to start or stop a job" },
	{ .name = "metrics", .arg = "ADDR:PORT", .set = set_str, .off = OPTS(metrics),
	  .help = "serve Prometheus metrics over HTTP here (GET /metrics;\n"
		  "no munge: bind loopback or a management network)" },
	{ .name = "metrics-token", .arg = "FILE", .set = set_str, .off = OPTS(metrics_token),
	  .help = "scrapers must send this file's token\n(Authorization: Bearer; the file mode 0600)" },
	{ .name = "log", .arg = "FILE", .set = set_str, .off = OPTS(log),
	  .help = "append log lines here instead of stderr" },
	{ .name = "help", .set = show_help },
	{ .name = "version", .set = show_version },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
/* getopt_long's values for the table's options: past any short option. */
#define OPT_BASE 256

static void usage(FILE *f)
{
	const char *sep = "  ";

	fprintf(f, "usage: vhpc-ctld [OPTIONS]\nThe vhpc cluster controller (scheduler/PROTOCOL.md).\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *op = &opts[i];
		char spelled[64];

		if (!op->help)
			continue;
		snprintf(spelled, sizeof(spelled), "--%s %s", op->name, op->arg);
		fprintf(f, "  %-26s", spelled);
		for (const char *l = op->help, *nl; l; l = nl ? nl + 1 : NULL) {
			nl = strchr(l, '\n');
			fprintf(f, "%s%.*s", l == op->help ? "" : "\n                            ",
				nl ? (int)(nl - l) : (int)strlen(l), l);
		}
		if (op->set == set_int)
			fprintf(f, " (default %lld)", op->def);
		fputc('\n', f);
	}
	for (size_t i = 0; i < NOPTS; i++)
		if (!opts[i].help) {
			fprintf(f, "%s--%s", sep, opts[i].name);
			sep = ", ";
		}
	fputc('\n', f);
}

static int set_str(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg)
{
	(void)ctl;
	*(const char **)((char *)o + op->off) = arg;
	return CTLD_OPTS_RUN;
}

/* Room is left for the files the controller keeps in it. */
static int set_state(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg)
{
	(void)o;
	(void)op;
	if (!*arg || strlen(arg) >= sizeof(ctl->state_dir) - 64) {
		fprintf(stderr, "vhpc-ctld: --state: expected a directory path\n");
		return 2;
	}
	snprintf(ctl->state_dir, sizeof(ctl->state_dir), "%s", arg);
	return CTLD_OPTS_RUN;
}

static int set_int(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg)
{
	long long v;

	(void)o;
	if (parse_ll(arg, op->min, op->max, &v) < 0) {
		fprintf(stderr, "vhpc-ctld: --%s: expected a number %lld..%lld, got '%s'\n", op->name, op->min,
			op->max, arg);
		return 2;
	}
	*(int *)((char *)ctl + op->off) = (int)v;
	return CTLD_OPTS_RUN;
}

static int show_help(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg)
{
	(void)ctl, (void)o, (void)op, (void)arg;
	usage(stdout);
	return 0;
}

static int show_version(struct ctld *ctl, struct ctld_opts *o, const struct opt *op, const char *arg)
{
	(void)ctl, (void)o, (void)op, (void)arg;
	printf("vhpc-ctld %s\n", VHPC_VERSION);
	return 0;
}

/* The defaults, before the command line has its say. */
static void set_defaults(struct ctld *ctl)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (opts[i].set == set_int)
			*(int *)((char *)ctl + opts[i].off) = (int)opts[i].def;
	snprintf(ctl->state_dir, sizeof(ctl->state_dir), "%s/ctld", vhpc_state_dir());
}

int ctld_opts_parse(struct ctld *ctl, struct ctld_opts *o, int argc, char **argv)
{
	struct option lo[NOPTS + 1] = { { 0 } };
	int c, rc = CTLD_OPTS_RUN;

	memset(o, 0, sizeof(*o));
	set_defaults(ctl);
	for (size_t i = 0; i < NOPTS; i++)
		lo[i] = (struct option){ opts[i].name, opts[i].arg ? required_argument : no_argument, NULL,
					 OPT_BASE + (int)i };
	opterr = 0;
	while (rc == CTLD_OPTS_RUN && (c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (c == 'h') {
			rc = show_help(ctl, o, NULL, NULL);
		} else if (c >= OPT_BASE && c < OPT_BASE + (int)NOPTS) {
			rc = opts[c - OPT_BASE].set(ctl, o, &opts[c - OPT_BASE], optarg);
		} else {
			fprintf(stderr, "vhpc-ctld: unknown option or missing value: '%s'\n", argv[optind - 1]);
			usage(stderr);
			rc = 2;
		}
	}
	if (rc == CTLD_OPTS_RUN && o->metrics_token && !o->metrics) {
		fprintf(stderr, "vhpc-ctld: --metrics-token needs --metrics\n");
		rc = 2;
	}
	if (rc == CTLD_OPTS_RUN && optind < argc) {
		fprintf(stderr, "vhpc-ctld: unexpected argument '%s'\n", argv[optind]);
		rc = 2;
	}
	return rc;
}
