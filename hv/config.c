/* Command line and YAML settings of vhpc-hv, and the plan made from them:
 * guest nodes, which vCPU sits where, and the APIC IDs of the topology. */
#include <stdint.h>
#include "config.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/parse.h"

#include <stddef.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int parse_opt_node(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	struct opt_node *o = dst;
	const char *s = cf_scalar(n);

	if (!s || parse_ll(s, 0, 1023, &o->v) < 0)
		return cf_error(d, n, err, "expected a host NUMA node number (0..1023)");
	o->set = true;
	return 0;
}

#define NOFF(f) offsetof(struct hv_numa_cfg, f)
static const struct cf_field numa_fields[] = {
	{ .key = "mem", .kind = CF_SIZE, .off = NOFF(mem), .flags = CF_REQUIRED, .min = 1 << 20,
	  .max = 1ll << 40, .what = "a size such as 1G" },
	{ .key = "cpus", .kind = CF_STR, .off = NOFF(cpus) },
	{ .key = "host_node", .kind = CF_CUSTOM, .off = NOFF(host_node), .parse = parse_opt_node },
	{ 0 }
};
static const struct cf_schema numa_schema = { "numa node", sizeof(struct hv_numa_cfg), numa_fields };

#define OFF(f) offsetof(struct hv_config, f)
static const struct cf_field hv_fields[] = {
	{ .key = "kernel", .kind = CF_STR, .off = OFF(kernel) },
	{ .key = "initrd", .kind = CF_STR, .off = OFF(initrd) },
	{ .key = "cmdline", .kind = CF_STR, .off = OFF(cmdline) },
	{ .key = "vcpus", .kind = CF_INT, .off = OFF(vcpus), .min = 1, .max = HV_MAX_VCPUS },
	{ .key = "mem", .kind = CF_SIZE, .off = OFF(mem), .min = 16 << 20, .max = 1ll << 40,
	  .what = "a size such as 4G" },
	{ .key = "numa", .kind = CF_LIST, .off = OFF(numa), .sub = &numa_schema },
	{ .key = "host_node", .kind = CF_CUSTOM, .off = OFF(host_node), .parse = parse_opt_node },
	{ .key = "cpu_affinity", .kind = CF_STR, .off = OFF(cpu_affinity) },
	{ .key = "topology", .kind = CF_STR, .off = OFF(topology) },
	{ .key = "hugepages", .kind = CF_STR, .off = OFF(hugepages) },
	{ .key = "prefault_threads", .kind = CF_INT, .off = OFF(prefault_threads), .min = 1, .max = 1024 },
	{ .key = "prefault", .kind = CF_BOOL, .off = OFF(prefault) },
	{ .key = "serial", .kind = CF_STR, .off = OFF(serial) },
	{ .key = "control", .kind = CF_STR, .off = OFF(control) },
	{ .key = "require_hw", .kind = CF_BOOL, .off = OFF(require_hw) },
	{ .key = "debug_exit", .kind = CF_BOOL, .off = OFF(debug_exit) },
	{ .key = "cpuid_hide", .kind = CF_STR, .off = OFF(cpuid_hide) },
	{ .key = "seccomp", .kind = CF_BOOL, .off = OFF(seccomp) },
	{ .key = "restore", .kind = CF_STR, .off = OFF(restore) },
	{ .key = "paused", .kind = CF_BOOL, .off = OFF(paused) },
	{ 0 }
};

/* The fixed keys plus one CF_CUSTOM key per registered device option;
 * built once, since the registry is fixed at link time. */
#define NBASE (sizeof(hv_fields) / sizeof(hv_fields[0]) - 1)
static struct cf_field all_fields[NBASE + HV_MAX_DEVOPTS + 1];
static struct cf_schema all_schema;
static pthread_once_t schema_once = PTHREAD_ONCE_INIT;

static void build_schema(void)
{
	const struct hv_devopt *const *opts;
	int n = hv_devopts(&opts);

	memcpy(all_fields, hv_fields, NBASE * sizeof(hv_fields[0]));
	for (int i = 0; i < n; i++)
		all_fields[NBASE + (size_t)i] = (struct cf_field){
			.key = opts[i]->name, .kind = CF_CUSTOM,
			.off = offsetof(struct hv_config, dev) + (size_t)i * sizeof(struct hv_devset),
			.parse = hv_devset_yaml, .what = opts[i]->usage };
	all_schema = (struct cf_schema){ "vhpc-hv", sizeof(struct hv_config), all_fields };
}

const struct cf_schema *hv_config_schema(void)
{
	pthread_once(&schema_once, build_schema);
	return &all_schema;
}

void hv_config_defaults(struct hv_config *c)
{
	const struct hv_devopt *const *opts;

	memset(c, 0, sizeof(*c));
	c->prefault = true;
	c->ndevopts = hv_devopts(&opts);
	for (int i = 0; i < c->ndevopts; i++)
		c->dev[i].opt = opts[i];
}

void hv_config_free(struct hv_config *c)
{
	cf_release(hv_config_schema(), c);
	for (int i = 0; i < c->ndevopts; i++)
		hv_devset_free(&c->dev[i]);
}

void hv_usage(FILE *f)
{
	fprintf(f,
		"usage: vhpc-hv --kernel FILE [--initrd FILE] [--cmdline STR] --vcpus N --mem SIZE\n"
		"               [--numa mem=SIZE[,cpus=LIST][,host-node=N]]... [--host-node N]\n"
		"               [--cpu-affinity LIST] [--topology SxCxT] [--hugepages[=2M|1G]]\n"
		"               [--prefault-threads N] [--no-prefault] [--serial stdio|none|file:PATH]\n"
		"               [--control PATH] [--require-hw] [--debug-exit] [--cpuid-hide LIST]\n"
		"               [--seccomp] [--seccomp-probe[=execve|tiocsti|connect]] [--config FILE] [-v] [-q]\n"
		"               [--restore FILE|/dev/fd/N] [--paused]\n");
	{
		const struct hv_devopt *const *opts;
		int n = hv_devopts(&opts);

		for (int i = 0; i < n; i++)
			fprintf(f, "               [--%s %s]%s\n", opts[i]->name, opts[i]->usage,
				opts[i]->max > 1 ? "..." : "");
	}
	fprintf(f, "Runs one KVM guest; exits 0 when the guest powers off (see hv/hv.h).\n"
		"--seccomp: once set up, only the system calls a running guest needs (hv/sandbox.c);\n"
		"--seccomp-probe[=CALL]: the same, then one forbidden call (execve, the default; ioctl TIOCSTI;\n"
		"                connect), to show that the filter ends vhpc-hv.\n"
		"--restore: start from a snapshot (control \"snapshot\") instead of booting; the rest of the command\n"
		"           line must describe the same machine.  --paused: start with the vCPUs stopped (\"resume\").\n");
}

static int set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -1;
}

/* "mem=1G,cpus=0-1,4,host-node=0": a piece without '=' continues the
 * previous value, so CPU lists may contain commas. */
static int parse_numa_arg(const char *arg, struct hv_numa_cfg *n, struct verr *err)
{
	char *s = strdup(arg), *save = NULL, *tok;
	char *key = NULL;
	char cpus[1024] = "";
	int rc = 0;

	if (!s)
		return verr_set(err, "out of memory");
	memset(n, 0, sizeof(*n));
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		const char *val;

		if (!eq) {
			if (!key || strcmp(key, "cpus")) {
				rc = verr_set(err, "--numa %s: '%s' is not key=value", arg, tok);
				break;
			}
			snprintf(cpus + strlen(cpus), sizeof(cpus) - strlen(cpus), ",%s", tok);
			continue;
		}
		*eq = 0;
		key = tok;
		val = eq + 1;
		if (!strcmp(key, "mem")) {
			if (parse_size(val, &n->mem) < 0 || n->mem < (1 << 20)) {
				rc = verr_set(err, "--numa %s: mem=%s is not a size of at least 1M", arg, val);
				break;
			}
		} else if (!strcmp(key, "cpus")) {
			snprintf(cpus, sizeof(cpus), "%s", val);
		} else if (!strcmp(key, "host-node") || !strcmp(key, "host_node")) {
			if (parse_ll(val, 0, 1023, &n->host_node.v) < 0) {
				rc = verr_set(err, "--numa %s: host-node=%s is not a node number", arg, val);
				break;
			}
			n->host_node.set = true;
		} else {
			rc = verr_set(err, "--numa %s: unknown key '%s' (expected mem, cpus, host-node)", arg, key);
			break;
		}
	}
	if (!rc && !n->mem)
		rc = verr_set(err, "--numa %s: mem= is required", arg);
	if (!rc && cpus[0] && !(n->cpus = strdup(cpus)))
		rc = verr_set(err, "out of memory");
	free(s);
	if (rc)
		free(n->cpus);
	return rc;
}

enum {
	O_KERNEL = 256, O_INITRD, O_CMDLINE, O_VCPUS, O_MEM, O_NUMA, O_HOSTNODE, O_AFFINITY,
	O_TOPOLOGY, O_HUGEPAGES, O_PFTHREADS, O_NOPREFAULT, O_SERIAL, O_CONTROL, O_REQHW,
	O_DEBUGEXIT, O_CPUIDHIDE, O_CONFIG, O_HELP, O_SECCOMP, O_SECCOMP_PROBE, O_RESTORE, O_PAUSED,
};

/* Releases only the numa list (the command line replaces the file's). */
static const struct cf_field numa_only_fields[] = {
	{ .key = "numa", .kind = CF_LIST, .off = OFF(numa), .sub = &numa_schema },
	{ 0 }
};
static const struct cf_schema numa_only_schema = { "numa", sizeof(struct hv_config), numa_only_fields };

#define O_DEVOPT 1000     /* + index of the device option */
static const struct option base_opts[] = {
	{ "kernel", required_argument, 0, O_KERNEL },
	{ "initrd", required_argument, 0, O_INITRD },
	{ "cmdline", required_argument, 0, O_CMDLINE },
	{ "vcpus", required_argument, 0, O_VCPUS },
	{ "mem", required_argument, 0, O_MEM },
	{ "numa", required_argument, 0, O_NUMA },
	{ "host-node", required_argument, 0, O_HOSTNODE },
	{ "cpu-affinity", required_argument, 0, O_AFFINITY },
	{ "topology", required_argument, 0, O_TOPOLOGY },
	{ "hugepages", optional_argument, 0, O_HUGEPAGES },
	{ "prefault-threads", required_argument, 0, O_PFTHREADS },
	{ "no-prefault", no_argument, 0, O_NOPREFAULT },
	{ "serial", required_argument, 0, O_SERIAL },
	{ "control", required_argument, 0, O_CONTROL },
	{ "require-hw", no_argument, 0, O_REQHW },
	{ "debug-exit", no_argument, 0, O_DEBUGEXIT },
	{ "cpuid-hide", required_argument, 0, O_CPUIDHIDE },
	{ "config", required_argument, 0, O_CONFIG },
	{ "help", no_argument, 0, O_HELP },
	{ "seccomp", no_argument, 0, O_SECCOMP },
	{ "seccomp-probe", optional_argument, 0, O_SECCOMP_PROBE },
	{ "restore", required_argument, 0, O_RESTORE },
	{ "paused", no_argument, 0, O_PAUSED },
};
#define NBASE_OPTS (sizeof(base_opts) / sizeof(base_opts[0]))

/* The options whose value is kept as given. */
static char **str_opt(struct hv_config *c, int o)
{
	switch (o) {
	case O_KERNEL: return &c->kernel;
	case O_INITRD: return &c->initrd;
	case O_CMDLINE: return &c->cmdline;
	case O_AFFINITY: return &c->cpu_affinity;
	case O_TOPOLOGY: return &c->topology;
	case O_SERIAL: return &c->serial;
	case O_CONTROL: return &c->control;
	case O_CPUIDHIDE: return &c->cpuid_hide;
	case O_RESTORE: return &c->restore;
	default: return NULL;
	}
}

/* 1 if O is not a numeric option. */
static int num_opt(struct hv_config *c, int o, const char *arg, struct verr *err)
{
	long long v;

	switch (o) {
	case O_VCPUS:
		if (parse_ll(arg, 1, HV_MAX_VCPUS, &c->vcpus) < 0)
			return verr_set(err, "--vcpus %s: expected 1..%d", arg, HV_MAX_VCPUS);
		return 0;
	case O_MEM:
		if (parse_size(arg, &c->mem) < 0 || c->mem < (16 << 20) || c->mem > (1ull << 40))
			return verr_set(err, "--mem %s: expected a size from 16M to 1T", arg);
		return 0;
	case O_HOSTNODE:
		if (parse_ll(arg, 0, 1023, &v) < 0)
			return verr_set(err, "--host-node %s: expected a node number", arg);
		c->host_node.v = v;
		c->host_node.set = true;
		return 0;
	case O_PFTHREADS:
		if (parse_ll(arg, 1, 1024, &c->prefault_threads) < 0)
			return verr_set(err, "--prefault-threads %s: expected 1..1024", arg);
		return 0;
	default:
		return 1;
	}
}

/* 1 if O is not an option without a value. */
static int flag_opt(struct hv_config *c, int o)
{
	switch (o) {
	case O_NOPREFAULT: c->prefault = false; break;
	case O_REQHW: c->require_hw = true; break;
	case O_DEBUGEXIT: c->debug_exit = true; break;
	case O_SECCOMP: c->seccomp = true; break;
	case O_PAUSED: c->paused = true; break;
	case O_CONFIG: break;   /* read before the other options */
	case 'v': vlog_set_level(VLOG_DEBUG); break;
	case 'q': vlog_set_level(VLOG_WARN); break;
	default: return 1;
	}
	return 0;
}

static int numa_opt(struct hv_config *c, bool *from_cli, const char *arg, struct verr *err)
{
	struct hv_numa_cfg n, *nv;

	if (!*from_cli) {   /* the command line replaces the file's list */
		cf_release(&numa_only_schema, &(struct hv_config){ .numa = c->numa });
		c->numa.v = NULL;
		c->numa.n = 0;
		*from_cli = true;
	}
	if (c->numa.n >= HV_MAX_NODES)
		return verr_set(err, "--numa: at most %d guest nodes", HV_MAX_NODES);
	if (parse_numa_arg(arg, &n, err) < 0)
		return -1;
	nv = realloc(c->numa.v, (c->numa.n + 1) * sizeof(n));
	if (!nv) {
		free(n.cpus);
		return verr_set(err, "out of memory");
	}
	nv[c->numa.n++] = n;
	c->numa.v = nv;
	return 0;
}

static int seccomp_probe_opt(struct hv_config *c, const char *arg, struct verr *err)
{
	static const char *const calls[] = { [HV_PROBE_EXECVE] = "execve", [HV_PROBE_TIOCSTI] = "tiocsti",
					      [HV_PROBE_CONNECT] = "connect" };

	c->seccomp = true;
	c->seccomp_probe = HV_PROBE_NONE;
	for (int k = HV_PROBE_EXECVE; k <= HV_PROBE_CONNECT; k++)
		if (!strcmp(arg ? arg : "execve", calls[k]))
			c->seccomp_probe = k;
	if (c->seccomp_probe == HV_PROBE_NONE)
		return verr_set(err, "--seccomp-probe=%.40s: expected execve, tiocsti or connect", arg);
	return 0;
}

static int dev_opt(struct hv_devset *ds, int argc, char **argv, struct verr *err)
{
	const char *arg = optarg;

	/* `--console file:x` as well as `--console=file:x`. */
	if (!arg && ds->opt->arg_optional && optind < argc && argv[optind][0] != '-')
		arg = argv[optind++];
	return hv_devset_add_cli(ds, arg, err) < 0 ? -1 : 0;
}

/* 0 to go on, 1 for --help, -1 on an error (in ERR). */
static int one_opt(struct hv_config *c, int o, int argc, char **argv, bool *numa_from_cli,
		   struct verr *err)
{
	char **s = str_opt(c, o);
	int r;

	if (s) {
		set_str(s, optarg);
		return 0;
	}
	if (o >= O_DEVOPT && o < O_DEVOPT + HV_MAX_DEVOPTS)
		return dev_opt(&c->dev[o - O_DEVOPT], argc, argv, err);
	switch (o) {
	case O_HUGEPAGES: set_str(&c->hugepages, optarg ? optarg : "2M"); return 0;
	case O_NUMA: return numa_opt(c, numa_from_cli, optarg, err);
	case O_SECCOMP_PROBE: return seccomp_probe_opt(c, optarg, err);
	case O_HELP: return 1;
	case ':': return verr_set(err, "%s needs a value", argv[optind - 1]);
	}
	r = num_opt(c, o, optarg, err);
	if (r <= 0)
		return r;
	if (flag_opt(c, o) == 0)
		return 0;
	return verr_set(err, "unknown option '%s'", argv[optind - 1]);
}

static void build_long_opts(const struct hv_config *c, struct option *long_opts)
{
	memcpy(long_opts, base_opts, sizeof(base_opts));
	for (int i = 0; i < c->ndevopts; i++)
		long_opts[NBASE_OPTS + (size_t)i] = (struct option){
			c->dev[i].opt->name, c->dev[i].opt->arg_optional ? optional_argument : required_argument,
			0, O_DEVOPT + i };
	memset(&long_opts[NBASE_OPTS + (size_t)c->ndevopts], 0, sizeof(long_opts[0]));
}

/* The file first, so that the command line overrides it. */
static int read_config_files(struct hv_config *c, int argc, char **argv, struct verr *err)
{
	for (int i = 1; i < argc; i++) {
		const char *f = NULL;

		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			f = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			f = argv[i] + 9;
		if (f && cf_bind_file(f, hv_config_schema(), c, err) < 0)
			return -1;
	}
	return 0;
}

static int check_required(struct hv_config *c, struct verr *err)
{
	if (!c->kernel)
		return verr_set(err, "--kernel is required");
	if (!c->vcpus)
		return verr_set(err, "--vcpus is required");
	if (!c->mem && !c->numa.n)
		return verr_set(err, "--mem is required");
	return hv_devsets_check(c, err);
}

int hv_config_parse(struct hv_config *c, int argc, char **argv, struct verr *err)
{
	bool numa_from_cli = false;
	int o, r;
	struct option long_opts[NBASE_OPTS + HV_MAX_DEVOPTS + 1];

	build_long_opts(c, long_opts);
	if (read_config_files(c, argc, argv, err) < 0)
		return -1;
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc, argv, ":vq", long_opts, NULL)) != -1) {
		r = one_opt(c, o, argc, argv, &numa_from_cli, err);
		if (r)
			return r;
	}
	if (optind < argc)
		return verr_set(err, "unexpected argument '%s'", argv[optind]);
	return check_required(c, err);
}

/* Like a cpulist, but in the given order and with repeats allowed, because
 * entry i is vCPU i's CPU ("0-3" or "2,0,2,0" when oversubscribing). */
static int affinity_parse(const char *s, int *ids, size_t max, size_t *n)
{
	size_t cnt = 0;

	while (*s) {
		char *end;
		long a, b;

		a = strtol(s, &end, 10);
		if (end == s || a < 0 || a > 65535)
			return -1;
		b = a;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			if (end == s + 1 || b < a || b > 65535)
				return -1;
			s = end;
		}
		for (long i = a; i <= b; i++) {
			if (cnt == max)
				return -1;
			ids[cnt++] = (int)i;
		}
		if (*s == ',' && s[1])
			s++;
		else if (*s)
			return -1;
	}
	*n = cnt;
	return cnt ? 0 : -1;
}

static int ceil_log2(int n)
{
	int b = 0;

	while ((1 << b) < n)
		b++;
	return b;
}

struct hide_bit { const char *name; int reg; int bit; };  /* reg: 0 ecx1, 1 edx1, 2 ebx7 */
static const struct hide_bit hide_bits[] = {
	{ "fma", 0, 12 }, { "cx16", 0, 13 }, { "pcid", 0, 17 }, { "sse4_1", 0, 19 },
	{ "sse4_2", 0, 20 }, { "x2apic", 0, 21 }, { "movbe", 0, 22 }, { "popcnt", 0, 23 },
	{ "tsc_deadline", 0, 24 }, { "aes", 0, 25 }, { "xsave", 0, 26 }, { "avx", 0, 28 },
	{ "f16c", 0, 29 }, { "rdrand", 0, 30 },
	{ "mtrr", 1, 12 }, { "pge", 1, 13 }, { "pat", 1, 16 },
	{ "fsgsbase", 2, 0 }, { "bmi1", 2, 3 }, { "avx2", 2, 5 }, { "smep", 2, 7 }, { "bmi2", 2, 8 },
	{ "erms", 2, 9 }, { "invpcid", 2, 10 }, { "avx512f", 2, 16 }, { "rdseed", 2, 18 },
	{ "adx", 2, 19 }, { "smap", 2, 20 },
};

static int parse_hide(const char *list, struct hv_plan *p, struct verr *err)
{
	char *s = strdup(list), *save = NULL;

	if (!s)
		return verr_set(err, "out of memory");
	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < sizeof(hide_bits) / sizeof(hide_bits[0]); i++)
			if (!strcmp(hide_bits[i].name, t))
				break;
		if (i == sizeof(hide_bits) / sizeof(hide_bits[0])) {
			char known[512] = "";

			for (size_t j = 0; j < sizeof(hide_bits) / sizeof(hide_bits[0]); j++)
				snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
					 j ? "," : "", hide_bits[j].name);
			verr_set(err, "--cpuid-hide: unknown feature '%s' (known: %s)", t, known);
			free(s);
			return -1;
		}
		if (hide_bits[i].reg == 0)
			p->hide_ecx1 |= 1 << hide_bits[i].bit;
		else if (hide_bits[i].reg == 1)
			p->hide_edx1 |= 1 << hide_bits[i].bit;
		else
			p->hide_ebx7 |= 1 << hide_bits[i].bit;
	}
	free(s);
	return 0;
}

static int plan_nodes(const struct hv_config *c, struct hv_plan *p, struct verr *err)
{
	const struct hv_numa_cfg *nc = c->numa.v;
	uint64_t sum = 0, off = 0;
	int with_cpus = 0;

	if (!c->numa.n) {
		p->nnodes = 1;
		p->node[0].size = p->mem;
		p->node[0].host_node = c->host_node.set ? (int)c->host_node.v : -1;
		for (int i = 0; i < p->nvcpus; i++)
			p->node[0].cpus[p->node[0].ncpus++] = i;
		return 0;
	}
	if (c->numa.n > HV_MAX_NODES)
		return verr_set(err, "numa: at most %d guest nodes", HV_MAX_NODES);
	if (c->host_node.set)
		return verr_set(err, "--host-node and --numa both given: put host-node= in each --numa");
	p->nnodes = (int)c->numa.n;
	for (int i = 0; i < p->nnodes; i++) {
		sum += nc[i].mem;
		with_cpus += nc[i].cpus != NULL;
	}
	if (!p->mem)
		p->mem = sum;
	if (sum != p->mem)
		return verr_set(err, "numa: node sizes add up to %llu MiB but --mem is %llu MiB",
				(unsigned long long)(sum >> 20), (unsigned long long)(p->mem >> 20));
	if (with_cpus && with_cpus != p->nnodes)
		return verr_set(err, "numa: give cpus= for every node or for none");
	for (int v = 0; v < p->nvcpus; v++)
		p->vcpu_node[v] = -1;
	for (int i = 0; i < p->nnodes; i++) {
		struct hv_gnode *g = &p->node[i];

		g->size = nc[i].mem;
		g->ram_off = off;
		off += g->size;
		g->host_node = nc[i].host_node.set ? (int)nc[i].host_node.v : -1;
		if (g->size % p->page_size)
			return verr_set(err, "numa node %d: mem is not a multiple of the page size (%llu KiB)",
					i, (unsigned long long)(p->page_size >> 10));
		if (with_cpus) {
			int ids[HV_MAX_VCPUS];
			size_t n;

			if (cpulist_parse(nc[i].cpus, ids, HV_MAX_VCPUS, &n) < 0)
				return verr_set(err, "numa node %d: cpus=%s is not a CPU list", i, nc[i].cpus);
			for (size_t k = 0; k < n; k++) {
				if (ids[k] >= p->nvcpus)
					return verr_set(err, "numa node %d: vCPU %d does not exist (--vcpus %d)",
							i, ids[k], p->nvcpus);
				if (p->vcpu_node[ids[k]] >= 0)
					return verr_set(err, "numa: vCPU %d is in nodes %d and %d",
							ids[k], p->vcpu_node[ids[k]], i);
				p->vcpu_node[ids[k]] = i;
				g->cpus[g->ncpus++] = ids[k];
			}
		} else {
			for (int v = i * p->nvcpus / p->nnodes; v < (i + 1) * p->nvcpus / p->nnodes; v++) {
				p->vcpu_node[v] = i;
				g->cpus[g->ncpus++] = v;
			}
		}
	}
	for (int v = 0; v < p->nvcpus; v++)
		if (p->vcpu_node[v] < 0)
			return verr_set(err, "numa: vCPU %d is in no node", v);
	return 0;
}

int hv_plan_make(const struct hv_config *c, struct hv_plan *p, struct verr *err)
{
	memset(p, 0, sizeof(*p));
	p->nvcpus = (int)c->vcpus;
	p->mem = c->mem;
	p->page_size = 4096;
	if (c->hugepages && strcmp(c->hugepages, "no") && strcmp(c->hugepages, "false")) {
		if (!strcmp(c->hugepages, "2M") || !strcmp(c->hugepages, "yes") || !strcmp(c->hugepages, "true"))
			p->page_size = 2 << 20;
		else if (!strcmp(c->hugepages, "1G"))
			p->page_size = 1 << 30;
		else
			return verr_set(err, "hugepages: '%s' is not 2M or 1G", c->hugepages);
	}
	if (plan_nodes(c, p, err) < 0)
		return -1;
	if (p->mem % p->page_size || p->mem % (2 << 20))
		return verr_set(err, "mem: %llu bytes is not a multiple of %llu KiB",
				(unsigned long long)p->mem,
				(unsigned long long)((p->page_size > (2 << 20) ? p->page_size : (2 << 20)) >> 10));

	/* Topology: one socket per guest node unless told otherwise. */
	if (c->topology) {
		int s, co, t;
		char tail;

		if (sscanf(c->topology, "%dx%dx%d%c", &s, &co, &t, &tail) != 3 ||
		    s < 1 || co < 1 || t < 1 || s > 64 || co > 256 || t > 8)
			return verr_set(err, "topology: '%s' is not SOCKETSxCORESxTHREADS (e.g. 2x4x1)", c->topology);
		if (s * co * t != p->nvcpus)
			return verr_set(err, "topology: %dx%dx%d is %d CPUs but --vcpus is %d",
					s, co, t, s * co * t, p->nvcpus);
		p->sockets = s, p->cores = co, p->threads = t;
	} else {
		p->sockets = p->nvcpus % p->nnodes == 0 ? p->nnodes : 1;
		p->threads = 1;
		p->cores = p->nvcpus / p->sockets;
	}
	p->thread_bits = ceil_log2(p->threads);
	p->core_bits = ceil_log2(p->cores);
	for (int v = 0; v < p->nvcpus; v++) {
		int per_socket = p->cores * p->threads;
		int s = v / per_socket, co = (v / p->threads) % p->cores, t = v % p->threads;

		p->apic_id[v] = ((uint32_t)s << (p->core_bits + p->thread_bits)) |
				((uint32_t)co << p->thread_bits) | (uint32_t)t;
	}
	if (p->apic_id[p->nvcpus - 1] > 4095)
		return verr_set(err, "topology: APIC IDs would exceed 4095");

	for (int v = 0; v < HV_MAX_VCPUS; v++)
		p->vcpu_host_cpu[v] = -1;
	if (c->cpu_affinity) {
		int ids[HV_MAX_VCPUS + 1];
		size_t n;

		if (affinity_parse(c->cpu_affinity, ids, HV_MAX_VCPUS + 1, &n) < 0)
			return verr_set(err, "cpu-affinity: '%s' is not a CPU list", c->cpu_affinity);
		if ((int)n != p->nvcpus)
			return verr_set(err, "cpu-affinity: %zu CPUs listed for %d vCPUs (one per vCPU, in order)",
					n, p->nvcpus);
		for (size_t i = 0; i < n; i++)
			p->vcpu_host_cpu[i] = ids[i];
	}
	if (c->cpuid_hide && parse_hide(c->cpuid_hide, p, err) < 0)
		return -1;
	return 0;
}
