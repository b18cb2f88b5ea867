/*
 * vhpc-na: the node agent's pieces from the command line, for admins and
 * tests.  `up` holds a whole job (dir, placement, network, containers)
 * until SIGTERM/SIGINT, printing what it made and how long each step took.
 */
#include "lib/clock.h"
#include "lib/cluster.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/proc.h"
#include "lib/tuning.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"
#include "nodeagent/nodeagent.h"
#include "nodeagent/place/place.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vhpc-na COMMAND [options]\n"
		"  topo    [--topology SPEC]            NUMA nodes, cores, memory\n"
		"  place   [--topology SPEC] [-N GUESTS] [--vcpus N] [--mem SIZE]\n"
		"          [--busy CPULIST] [--oversubscribe]   where guests would go\n"
		"  driver  [auto|container|kvm]         which guest driver a job gets, and why\n"
		"  cleanup                              remove what dead jobs left (this run dir)\n"
		"  adopt   --job ID [--grace MS]        take over a dead owner's job, stop it orderly\n"
		"  up      --job ID [-N GUESTS] [--vcpus N] [--mem SIZE] [--topology SPEC]\n"
		"          [--oversubscribe] [--tuning NAME|PATH|none] [--subnet CIDR] [--no-net]\n"
		"          [--first-index N] [--vni N --underlay ADDR [--peer ADDR]...]\n"
		"          [--fabric-link IF --fabric-vlan N --fabric-subnet CIDR]\n"
		"          [--rootfs DIR [--tmpfs SIZE] [--bind SRC:DST[:ro]]... [--env K=V]...\n"
		"           [--grace MS] [--log-dir DIR] -- INIT ARGS...]\n"
		"          make a job and hold it until SIGTERM/SIGINT, then tear it down\n"
		"SPEC: 'synthetic:pack:2 numa:2 core:8 pu:2', FILE.xml, or nothing for this machine.\n"
		"Runtime dir: $VHPC_RUN_DIR (default /run/vhpc).\n");
}

static int die(const struct verr *e)
{
	fprintf(stderr, "vhpc-na: %s\n", e->msg);
	return 1;
}

static int bad_arg(const char *what, const char *val)
{
	fprintf(stderr, "vhpc-na: %s: '%s' is not valid\n", what, val);
	return 2;
}

static void print_place(int g, const struct na_placement *p)
{
	char cl[1024], ml[256];
	int ids[VHPC_MAX_VCPUS];

	memcpy(ids, p->cpus, sizeof(int) * p->ncpus);
	/* cpus stay in vCPU order: vCPU i -> cpus[i] */
	cl[0] = 0;
	for (int i = 0; i < p->ncpus; i++)
		snprintf(cl + strlen(cl), sizeof(cl) - strlen(cl), "%s%d", i ? "," : "", ids[i]);
	ml[0] = 0;
	for (int i = 0; i < p->nmems; i++)
		snprintf(ml + strlen(ml), sizeof(ml) - strlen(ml), "%s%d", i ? "," : "", p->mems[i]);
	printf("guest %d cpus %s mems %s%s%s\n", g, cl, ml, p->split ? " split" : "",
	       p->shared ? " shared" : "");
}

static int cmd_topo(int argc, char **argv)
{
	static const struct option o[] = { { "topology", 1, 0, 't' }, { 0 } };
	const char *spec = NULL;
	struct na_topo *t;
	struct na_numa_info info[VHPC_MAX_NODES];
	struct verr e;
	int c, n;

	while ((c = getopt_long(argc, argv, "t:", o, NULL)) != -1)
		if (c == 't')
			spec = optarg;
		else
			return 2;
	if (na_topo_load(&t, spec, &e) < 0)
		return die(&e);
	n = na_topo_numa(t, info, VHPC_MAX_NODES);
	for (int i = 0; i < n && i < VHPC_MAX_NODES; i++) {
		char sz[32];

		printf("node %d cores %d mem %s hugepages_2m_free %llu\n", info[i].os_index, info[i].ncores,
		       fmt_size(info[i].mem_bytes, sz, sizeof(sz)), (unsigned long long)info[i].hugepages_2m_free);
	}
	na_topo_free(t);
	return 0;
}

struct job_opts {
	const char *topology;
	long long guests, vcpus;
	uint64_t mem;
	bool oversubscribe;
	int busy[1024];
	size_t nbusy;
};

static int parse_common(int c, struct job_opts *j)
{
	switch (c) {
	case 't': j->topology = optarg; return 0;
	case 'N': return parse_ll(optarg, 1, VHPC_MAX_GUESTS, &j->guests) < 0 ? bad_arg("-N", optarg) : 0;
	case 'c': return parse_ll(optarg, 1, VHPC_MAX_VCPUS, &j->vcpus) < 0 ? bad_arg("--vcpus", optarg) : 0;
	case 'm': return parse_size(optarg, &j->mem) < 0 ? bad_arg("--mem", optarg) : 0;
	case 'o': j->oversubscribe = true; return 0;
	case 'b': return cpulist_parse(optarg, j->busy, 1024, &j->nbusy) < 0 ? bad_arg("--busy", optarg) : 0;
	}
	usage(stderr);
	return 2;
}

static int cmd_place(int argc, char **argv)
{
	static const struct option o[] = {
		{ "topology", 1, 0, 't' }, { "vcpus", 1, 0, 'c' }, { "mem", 1, 0, 'm' },
		{ "oversubscribe", 0, 0, 'o' }, { "busy", 1, 0, 'b' }, { 0 } };
	struct job_opts j = { .guests = 1, .vcpus = 1 };
	static struct na_placement p[VHPC_MAX_GUESTS];
	struct na_topo *t;
	struct verr e;
	int c, rc;

	while ((c = getopt_long(argc, argv, "N:", o, NULL)) != -1)
		if ((rc = parse_common(c, &j)))
			return rc;
	if (na_topo_load(&t, j.topology, &e) < 0)
		return die(&e);
	rc = na_place(t, &(struct na_place_req){ .nguests = (int)j.guests, .vcpus = (int)j.vcpus,
		.mem = j.mem, .oversubscribe = j.oversubscribe, .busy_cpus = j.busy, .nbusy = (int)j.nbusy }, p, &e);
	na_topo_free(t);
	if (rc < 0)
		return die(&e);
	for (int g = 0; g < j.guests; g++)
		print_place(g, &p[g]);
	return 0;
}

static int cmd_driver(int argc, char **argv)
{
	const struct na_driver *got;
	const char *why;
	struct verr e;

	if (argc > 2)
		return bad_arg("driver", argv[2]);
	if (argc == 2 && vhpc_driver_index(argv[1]) < 0)
		return bad_arg("driver (" VHPC_DRIVER_CHOICES ")", argv[1]);
	if (!(got = na_driver_resolve(argc == 2 ? argv[1] : NULL, &why, &e)))
		return die(&e);
	printf("%s\n%s\n", na_driver_name(got), why);
	if (na_driver_check(got, &e) < 0)
		return die(&e);
	return 0;
}

static int cmd_cleanup(int argc, char **argv)
{
	struct verr e;
	int removed = 0;

	(void)argv;
	if (argc > 1) {
		usage(stderr);
		return 2;
	}
	if (na_cleanup_stale(&removed, &e) < 0) {
		fprintf(stderr, "vhpc-na: cleanup: removed %d, then: %s\n", removed, e.msg);
		return 1;
	}
	printf("removed %d\n", removed);
	return 0;
}

/* Takes over a job whose owner died (as a restarted vhpcd would), then
 * tears it down the orderly way: guests get SIGTERM and their grace. */
static int cmd_adopt(int argc, char **argv)
{
	static const struct option o[] = { { "job", 1, 0, 'j' }, { "grace", 1, 0, 'g' }, { 0 } };
	static struct na_ctr *ctr[VHPC_MAX_GUESTS];
	const char *job = NULL;
	struct na_jobdir jd;
	struct verr e;
	long long v;
	int c, n = 0, grace = 5000, rc = 0;

	while ((c = getopt_long(argc, argv, "", o, NULL)) != -1) {
		if (c == 'j')
			job = optarg;
		else if (c == 'g' && parse_ll(optarg, 0, 600000, &v) == 0)
			grace = (int)v;
		else
			return bad_arg("adopt option", argc > 1 ? argv[optind - 1] : "");
	}
	if (!job) {
		fprintf(stderr, "vhpc-na: adopt: --job ID is required\n");
		return 2;
	}
	if (na_jobdir_adopt(&jd, job, &e) < 0)
		return die(&e);
	for (int g = 0; g < VHPC_MAX_GUESTS; g++) {
		char b[4200];

		snprintf(b, sizeof(b), "%s/g%d", jd.path, g);
		if (access(b, F_OK) < 0)
			continue;
		if (na_ctr_adopt(job, g, &ctr[n], &e) < 0) {
			fprintf(stderr, "vhpc-na: %s\n", e.msg);
			continue;
		}
		printf("adopted guest %d pid %d\n", g, (int)na_ctr_pid(ctr[n]));
		n++;
	}
	fflush(stdout);
	if (na_ctr_stop_all(ctr, n, grace, &e) < 0) {
		fprintf(stderr, "vhpc-na: %s\n", e.msg);
		rc = 1;
	}
	if (na_jobdir_remove(&jd, &e) < 0) {
		fprintf(stderr, "vhpc-na: %s\n", e.msg);
		rc = 1;
	}
	printf("down\n");
	return rc;
}

/* ------------------------------------------------------------------ up */

struct up {
	struct job_opts j;
	const char *job, *tuning_name, *subnet, *rootfs, *log_dir;
	bool no_net;
	uint64_t tmpfs;
	int grace_ms;
	struct na_bind binds[16];
	int nbinds;
	const char *env[33];
	int nenv;
	char **argv;
	/* one node's part of a job across nodes */
	long long first_index, vni;
	uint32_t underlay, peers[VHPC_MAX_NODES];
	int npeers;
	/* the job's RDMA fabric (nodeagent/net/fabric.c) */
	const char *fabric_link, *fabric_subnet;
	long long fabric_vlan;
};

static double ms_since(uint64_t t0)
{
	return (now_ns() - t0) / 1e6;
}

static int parse_bind(struct up *u, char *arg)
{
	char *dst = strchr(arg, ':'), *ro;

	if (!dst || u->nbinds >= 16)
		return bad_arg("--bind (SRC:DST[:ro], at most 16)", arg);
	*dst++ = 0;
	ro = strchr(dst, ':');
	if (ro) {
		*ro++ = 0;
		if (strcmp(ro, "ro"))
			return bad_arg("--bind option (only 'ro')", ro);
	}
	u->binds[u->nbinds++] = (struct na_bind){ .src = arg, .dst = dst, .ro = ro != NULL };
	return 0;
}

/* What `up` made, for its teardown. */
struct up_state {
	struct na_placement p[VHPC_MAX_GUESTS];
	struct na_ctr *ctr[VHPC_MAX_GUESTS];
	struct na_net net;
	struct na_fabric fab;
	struct na_jobdir jd;
	struct na_topo *t;
	struct tuning tun, *tp;
	struct cluster_cfg cl;
	bool have_cl, have_net, have_fab;
};

static int up_place(const struct up *u, struct up_state *st, struct verr *e)
{
	int n = (int)u->j.guests;
	uint64_t t0;

	if (na_topo_load(&st->t, u->j.topology, e) < 0)
		return -1;
	t0 = now_ns();
	if (na_jobdir_create(&st->jd, u->job, e) < 0)
		return -1;
	printf("job %s dir %s\n", u->job, st->jd.path);
	if (na_place_job(st->t, &(struct na_place_req){ .nguests = n, .vcpus = (int)u->j.vcpus, .mem = u->j.mem,
		.oversubscribe = u->j.oversubscribe, .busy_cpus = u->j.busy, .nbusy = (int)u->j.nbusy }, &st->jd, st->p, e) < 0)
		return -1;
	for (int g = 0; g < n; g++)
		print_place(g, &st->p[g]);
	printf("place_ms %.2f\n", ms_since(t0));
	fflush(stdout);
	return 0;
}

static int up_fabric(const struct up *u, struct up_state *st, int first, struct verr *e)
{
	struct ipv4net subnet;
	uint64_t t0;

	if (!u->fabric_subnet || ipv4net_parse(u->fabric_subnet, false, &subnet) < 0)
		return verr_set(e, "--fabric-subnet '%s': expected a network such as 10.214.0.0/24",
				u->fabric_subnet ? u->fabric_subnet : "");
	t0 = now_ns();
	st->have_fab = true;
	if (na_fabric_create(&(struct na_fabric_req){ .job = u->job, .link = u->fabric_link,
		.vlan = (int)u->fabric_vlan, .subnet = subnet, .nguests = (int)u->j.guests,
		.index = st->net.index, .guest_netns = (const char (*)[64])st->net.guest_netns }, &st->fab, e) < 0)
		return -1;
	printf("fabric_create_ms %.2f\n", ms_since(t0));
	for (int g = 0; g < (int)u->j.guests; g++) {
		char a[20];

		printf("guest %d fabric %s/%d vlan %lld rdma %s uverbs %s\n", first + g,
		       ipv4_format(st->fab.g[g].addr, a, sizeof(a)), subnet.prefix, u->fabric_vlan,
		       st->fab.g[g].rdma_dev, st->fab.g[g].uverbs);
	}
	fflush(stdout);
	return 0;
}

static int up_net(const struct up *u, struct up_state *st, struct verr *e)
{
	int n = (int)u->j.guests, index[VHPC_MAX_GUESTS];
	struct ipv4net subnet;
	uint64_t t0;

	if (u->subnet) {
		if (ipv4net_parse(u->subnet, false, &subnet) < 0)
			return verr_set(e, "--subnet '%s': expected a network such as 10.213.7.0/24", u->subnet);
	} else {
		if (cluster_load(NULL, &st->cl, e) < 0)
			return -1;
		st->have_cl = true;
		if (na_subnet_alloc(&st->cl, &st->jd, &subnet, e) < 0)
			return -1;
	}
	for (int g = 0; g < n; g++)
		index[g] = (int)u->first_index + g;
	int first = (int)u->first_index;

	t0 = now_ns();
	if (na_net_create(&(struct na_net_req){ .job = u->job, .subnet = subnet, .nguests = n,
		.tuning = st->tp, .index = index, .vni = (uint32_t)u->vni, .underlay = u->underlay,
		.peers = u->peers, .npeers = u->npeers }, &st->net, e) < 0)
		return -1;
	st->have_net = true;
	printf("net_create_ms %.2f\n", ms_since(t0));
	for (int g = 0; g < n; g++) {
		char a[20];

		printf("guest %d netns %s addr %s/%d mtu %d\n", st->net.index[g], st->net.guest_netns[g],
		       ipv4_format(st->net.guest_addr[g], a, sizeof(a)), st->net.prefix, st->net.mtu);
	}
	fflush(stdout);
	return u->fabric_link ? up_fabric(u, st, first, e) : 0;
}

static int up_containers(const struct up *u, struct up_state *st, struct verr *e)
{
	for (int g = 0; g < (int)u->j.guests; g++) {
		char host[64], logp[4096], sys[4200];
		struct na_chardev devs[2];
		struct na_ctr_spec s = {
			.job = u->job, .index = g, .hostname = host, .rootfs = u->rootfs,
			.argv = (const char *const *)u->argv, .env = u->env, .binds = u->binds,
			.nbinds = u->nbinds, .netns = st->have_net ? st->net.guest_netns[g] : NULL,
			.place = &st->p[g], .mem_limit = u->j.mem, .tmpfs_size = u->tmpfs, .log_path = logp,
			.uid = getuid(), .gid = getgid(), .sysfs = sys,
		};
		uint64_t t0;

		snprintf(host, sizeof(host), "%s-%d", u->job, g);
		snprintf(logp, sizeof(logp), "%s/g%d.log", u->log_dir ? u->log_dir : st->jd.path, g);
		if (!st->have_net)
			return verr_set(e, "containers need the job network (drop --no-net)");
		snprintf(sys, sizeof(sys), "%s/sys%d", st->jd.path, g);
		if (na_ctr_sysfs(st->net.guest_netns[g], sys, e) < 0)
			return -1;
		if (st->have_fab && na_ctr_fabric_devices(&st->fab.g[g], devs, &s.ndevices, e) < 0)
			return -1;
		s.devices = devs;
		t0 = now_ns();
		if (na_ctr_start(&s, &st->ctr[g], e) < 0)
			return -1;
		printf("guest %d pid %d log %s ctr_start_ms %.2f\n", g, (int)na_ctr_pid(st->ctr[g]), logp, ms_since(t0));
		fflush(stdout);
	}
	return 0;
}

/* In the reverse order of up_run; 0, or 1 when a step failed (said). */
static int up_teardown(const struct up *u, struct up_state *st)
{
	struct verr e;
	uint64_t t0;
	int rc = 0;

	if (u->rootfs) {
		t0 = now_ns();
		if (na_ctr_stop_all(st->ctr, (int)u->j.guests, u->grace_ms, &e) < 0) {
			fprintf(stderr, "vhpc-na: %s\n", e.msg);
			rc = 1;
		}
		printf("ctr_stop_ms %.2f\n", ms_since(t0));
	}
	if (st->have_fab) {
		t0 = now_ns();
		if (na_fabric_destroy(&st->fab, &e) < 0) {
			fprintf(stderr, "vhpc-na: %s\n", e.msg);
			rc = 1;
		}
		printf("fabric_destroy_ms %.2f\n", ms_since(t0));
	}
	if (st->have_net) {
		t0 = now_ns();
		if (na_net_destroy(&st->net, &e) < 0) {
			fprintf(stderr, "vhpc-na: %s\n", e.msg);
			rc = 1;
		}
		printf("net_destroy_ms %.2f\n", ms_since(t0));
	}
	if (st->jd.lock_fd >= 0 && na_jobdir_remove(&st->jd, &e) < 0) {
		fprintf(stderr, "vhpc-na: %s\n", e.msg);
		rc = 1;
	}
	printf("down\n");
	fflush(stdout);
	na_topo_free(st->t);
	if (st->tp)
		tuning_free(st->tp);
	if (st->have_cl)
		cluster_free(&st->cl);
	return rc;
}

/* The container driver's pieces in order, without a guest agent or an
 * image: for tests and admins who time or check them one by one. */
static int up_run(struct up *u)
{
	static struct up_state st;
	struct verr e;
	sigset_t sigs;
	int sig, rc = 1;

	/* Signals wait for sigwait, so teardown never races set-up. */
	proc_block_stop_signals(&sigs);
	st.jd.lock_fd = -1;
	if (!u->no_net && strcmp(u->tuning_name, "none")) {
		if (tuning_load(u->tuning_name, &st.tun, &e) < 0)
			return die(&e);
		st.tp = &st.tun;
	}
	if (up_place(u, &st, &e) < 0 || (!u->no_net && up_net(u, &st, &e) < 0) ||
	    (u->rootfs && up_containers(u, &st, &e) < 0)) {
		fprintf(stderr, "vhpc-na: %s\n", e.msg);
	} else {
		printf("ready\n");
		fflush(stdout);
		sigwait(&sigs, &sig);
		printf("signal %d: tearing down\n", sig);
		rc = 0;
	}
	return up_teardown(u, &st) || rc;
}

/* One option of `up` (c as getopt_long gave it); 0, or the exit status
 * of a bad value. */
static int up_opt(struct up *u, int c)
{
	long long v;
	uint32_t a;

	switch (c) {
	case 'j': u->job = optarg; return 0;
	case 'T': u->tuning_name = optarg; return 0;
	case 's': u->subnet = optarg; return 0;
	case 'n': u->no_net = true; return 0;
	case 'r': u->rootfs = optarg; return 0;
	case 'l': u->log_dir = optarg; return 0;
	case 'f':
		return parse_size(optarg, &u->tmpfs) < 0 ? bad_arg("--tmpfs", optarg) : 0;
	case 'B':
		return parse_bind(u, optarg);
	case 'e':
		if (u->nenv >= 32 || !strchr(optarg, '='))
			return bad_arg("--env (NAME=VALUE, at most 32)", optarg);
		u->env[u->nenv++] = optarg;
		return 0;
	case 'g':
		if (parse_ll(optarg, 0, 600000, &v) < 0)
			return bad_arg("--grace (milliseconds)", optarg);
		u->grace_ms = (int)v;
		return 0;
	case 'L': u->fabric_link = optarg; return 0;
	case 'S': u->fabric_subnet = optarg; return 0;
	case 'W':
		return parse_ll(optarg, 1, 4094, &u->fabric_vlan) < 0 ? bad_arg("--fabric-vlan (1..4094)", optarg) : 0;
	case 'I':
		return parse_ll(optarg, 0, 4095, &u->first_index) < 0 ? bad_arg("--first-index (0..4095)", optarg) : 0;
	case 'V':
		return parse_ll(optarg, 1, VHPC_VNI_MAX, &u->vni) < 0 ? bad_arg("--vni (1..16777215)", optarg) : 0;
	case 'U':
	case 'P':
		if (ipv4_parse(optarg, &a) < 0)
			return bad_arg(c == 'U' ? "--underlay (an IPv4 address)" : "--peer (an IPv4 address)", optarg);
		if (c == 'U')
			u->underlay = a;
		else if (u->npeers < VHPC_MAX_NODES)
			u->peers[u->npeers++] = a;
		else
			return bad_arg("--peer (too many)", optarg);
		return 0;
	default:
		return parse_common(c, &u->j);
	}
}

static int cmd_up(int argc, char **argv)
{
	static const struct option o[] = {
		{ "topology", 1, 0, 't' }, { "vcpus", 1, 0, 'c' }, { "mem", 1, 0, 'm' },
		{ "oversubscribe", 0, 0, 'o' }, { "busy", 1, 0, 'b' }, { "job", 1, 0, 'j' },
		{ "tuning", 1, 0, 'T' }, { "subnet", 1, 0, 's' }, { "no-net", 0, 0, 'n' },
		{ "rootfs", 1, 0, 'r' }, { "tmpfs", 1, 0, 'f' }, { "bind", 1, 0, 'B' },
		{ "env", 1, 0, 'e' }, { "grace", 1, 0, 'g' }, { "log-dir", 1, 0, 'l' },
		{ "first-index", 1, 0, 'I' }, { "vni", 1, 0, 'V' }, { "underlay", 1, 0, 'U' },
		{ "peer", 1, 0, 'P' }, { "fabric-link", 1, 0, 'L' }, { "fabric-vlan", 1, 0, 'W' },
		{ "fabric-subnet", 1, 0, 'S' }, { 0 } };
	struct up u = { .j = { .guests = 2, .vcpus = 1, .mem = 256ull << 20 },
			.tuning_name = "hpc", .grace_ms = 5000, .tmpfs = 64ull << 20 };
	int c, rc;

	while ((c = getopt_long(argc, argv, "+N:", o, NULL)) != -1)
		if ((rc = up_opt(&u, c)))
			return rc;
	if (!u.job) {
		fprintf(stderr, "vhpc-na: up: --job ID is required\n");
		return 2;
	}
	if (u.rootfs && optind >= argc) {
		fprintf(stderr, "vhpc-na: up: --rootfs needs the guest's init after --\n");
		return 2;
	}
	if (!u.rootfs && optind < argc)
		return bad_arg("up: arguments without --rootfs", argv[optind]);
	u.argv = argv + optind;
	return up_run(&u);
}

int main(int argc, char **argv)
{
	const char *cmd;

	vlog_init("vhpc-na");
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	cmd = argv[1];
	argc--;
	argv++;
	if (!strcmp(cmd, "topo"))
		return cmd_topo(argc, argv);
	if (!strcmp(cmd, "place"))
		return cmd_place(argc, argv);
	if (!strcmp(cmd, "driver"))
		return cmd_driver(argc, argv);
	if (!strcmp(cmd, "cleanup"))
		return cmd_cleanup(argc, argv);
	if (!strcmp(cmd, "up"))
		return cmd_up(argc, argv);
	if (!strcmp(cmd, "adopt"))
		return cmd_adopt(argc, argv);
	fprintf(stderr, "vhpc-na: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
