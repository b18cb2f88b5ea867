/*
 * The embedded scheduler behind `vhpc run` on one machine: it places the
 * job's guests, builds their network, starts them through the node agent,
 * waits until each guest agent answers, runs mpirun in guest 0 and removes
 * everything again, whatever happened in between.
 */
#include "embedded.h"
#include "cli.h"
#include "launch.h"
#include "nodeagent/vhpcd.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#define VMSHM_COMPONENT_DIR "/usr/local/lib/vhpc/openmpi"
#define READY_TIMEOUT_S 60

/* forward_sig is consumed by gexec_run when it passes the signal on to the
 * job; interrupted stays set, so the end of the run knows why it ended. */
static volatile int forward_sig, interrupted;

static void on_signal(int sig)
{
	forward_sig = sig;
	if (!interrupted)
		interrupted = sig;
}

struct run {
	const struct job_spec *j;
	struct cluster_cfg cl;
	struct tuning tun;
	bool have_tun;
	struct image_info img;
	struct na_topo *topo;
	struct na_jobdir jd;
	bool have_jd;
	int nguests, vcpus;
	int *ranks_per_guest;
	struct na_placement *place;
	struct ipv4net subnet;
	struct na_net net;
	bool have_net;
	enum vhpc_driver driver;
	bool emulated;             /* kvm on a software-only KVM (--allow-emulated-kvm) */
	struct na_guest *g;
	bool *gdir_mounted;
	int *cpu_node;             /* kvm: host node of each placed CPU, NA_MAX_VCPUS per guest */
	bool *huge;                /* kvm: guest i's RAM in hugepages */
	char config_disk[PATH_MAX];
	uint8_t key[CHAN_KEY_LEN];
	char shared[PATH_MAX];
	char vmshm[128];          /* the job's vmshm region on the host, or "" */
	long long timeout;
	uint64_t mem;
};

static int cancelled(struct verr *err)
{
	if (!interrupted)
		return 0;
	return verr_set(err, "interrupted by signal %d; removing the job", interrupted);
}

static void guest_dir(const struct run *r, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ctl%d", r->jd.path, i);
}

/* Each guest may write only its own control-socket directory, and only a
 * little: a small tmpfs, so a guest cannot fill the host's /run. */
static int make_guest_dir(struct run *r, int i, struct verr *err)
{
	char dir[PATH_MAX], src[64];

	guest_dir(r, i, dir, sizeof(dir));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "cannot create %s", dir);
	snprintf(src, sizeof(src), "vhpc-%s", r->jd.job);
	if (mount(src, dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=0700") < 0)
		return verr_errno(err, "cannot mount a tmpfs on %s", dir);
	r->gdir_mounted[i] = true;
	return 0;
}

static int write_shared(struct run *r, const struct launch_plan *lp, struct verr *err)
{
	char path[PATH_MAX + 32], *hosts, *hostfile;
	int rc = 0;

	snprintf(r->shared, sizeof(r->shared), "%s/shared", r->jd.path);
	if (mkdir_p(r->shared, 0755, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/run", r->shared);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return verr_errno(err, "cannot create %s", path);
	snprintf(path, sizeof(path), "%s/job.key", r->shared);
	if (chan_key_create(path, r->key, err) < 0)
		return -1;
	hosts = launch_hosts(lp);
	hostfile = launch_hostfile(lp);
	if (!hosts || !hostfile) {
		rc = verr_set(err, "out of memory");
	} else {
		snprintf(path, sizeof(path), "%s/hosts", r->shared);
		rc = write_file(path, hosts, strlen(hosts), 0644, err);
		snprintf(path, sizeof(path), "%s/hostfile", r->shared);
		if (rc == 0)
			rc = write_file(path, hostfile, strlen(hostfile), 0644, err);
	}
	free(hosts);
	free(hostfile);
	return rc;
}

static void log_tail(const char *path, const char *what)
{
	char *buf;
	size_t len;
	struct verr e;

	if (read_file(path, &buf, &len, 1 << 20, &e) < 0)
		return;
	if (len) {
		const char *p = len > 2000 ? buf + len - 2000 : buf;

		log_err("last lines of %s:\n%s", what, p);
	}
	free(buf);
}

static int start_guest(struct run *r, int i, struct verr *err)
{
	char gdir[PATH_MAX], logp[PATH_MAX + 16];
	struct na_job_guest jg = {
		.job = r->jd.job, .job_label = r->jd.job, .index = i,
		.addr = r->net.guest_addr[i], .port = (int)r->cl.guest_port,
		.shared_dir = r->shared, .ctl_dir = gdir, .vmshm = r->vmshm,
		.host_id = na_boot_id(), .vmshm_slots = (int)r->j->ranks,
		.rootfs = r->img.rootfs, .netns = r->net.guest_netns[i], .place = &r->place[i],
		.mem = r->mem, .log_path = logp,
	};

	guest_dir(r, i, gdir, sizeof(gdir));
	snprintf(logp, sizeof(logp), "%s/g%d.log", r->jd.path, i);
	return na_job_guest_start(&jg, &r->g[i], err);
}

/* What vhpc-guestd starts with in a kvm guest (the config disk's env; the
 * guest's init adds VHPC_GUEST_INDEX from vhpc.index). */
static int kvm_config_disk(struct run *r, struct verr *err)
{
	struct na_guest_env env;

	return na_kvm_config_disk(&r->jd, r->shared,
				  na_guest_env(&env, r->jd.job, -1, r->vmshm[0] ? na_boot_id() : NULL,
					       (int)r->j->ranks),
				  &r->tun, r->config_disk, sizeof(r->config_disk), err);
}

static int start_guest_kvm(struct run *r, int i, struct verr *err)
{
	char name[16];
	struct na_kvm_spec s = {
		.job = r->jd.job, .index = i, .name = name, .img = &r->img, .place = &r->place[i],
		.cpu_node = r->cpu_node + (size_t)i * NA_MAX_VCPUS, .mem = r->mem, .hugepages = r->huge[i],
		.addr = r->net.guest_addr[i], .prefix = r->net.prefix, .mtu = r->net.mtu,
		.guest_port = (int)r->cl.guest_port, .config_disk = r->config_disk,
		.vmshm = r->vmshm[0] ? r->vmshm : NULL, .emulated = r->emulated,
	};

	snprintf(name, sizeof(name), "g%d", i);
	r->g[i].driver = DRIVER_KVM;
	if (na_kvm_start(&s, &r->g[i].kvm, err) < 0)
		return verr_wrap(err, "starting guest %s", name);
	return 0;
}

/* kvm: each placed CPU's NUMA node (a split guest gets a guest node per
 * host node) and which guests fit in the hugepage pool. */
static int plan_kvm(struct run *r, struct verr *err)
{
	struct na_numa_info nodes[NA_MAX_NODES];
	int nn = na_topo_numa(r->topo, nodes, NA_MAX_NODES);

	for (int i = 0; i < r->nguests; i++)
		if (na_kvm_cpu_nodes(r->topo, &r->place[i], r->cpu_node + (size_t)i * NA_MAX_VCPUS, err) < 0)
			return -1;
	na_kvm_plan_hugepages(nodes, nn < NA_MAX_NODES ? nn : NA_MAX_NODES, r->place, r->nguests, r->mem, r->huge);
	return 0;
}

/* A guest is ready when its agent answers hello on its control channel.
 * Under emulation a kvm guest never gets there: it is left to run until it
 * stops or the job's time is up, so its console can be watched. */
static int wait_ready(struct run *r, struct verr *err)
{
	const char *rt = getenv("VHPC_READY_TIMEOUT");
	long long base = READY_TIMEOUT_S;
	int limit;

	/* The seconds a guest may take to become ready on hardware; the kvm
	 * driver scales them to this machine. */
	if (rt && *rt && parse_ll(rt, 1, 3600, &base) < 0)
		return verr_set(err, "VHPC_READY_TIMEOUT='%s': give whole seconds from 1 to 3600", rt);
	limit = r->emulated ? (int)r->timeout :
		r->driver == DRIVER_KVM ? (int)((double)base * na_kvm_time_scale()) : (int)base;
	double deadline = now_s() + limit;

	for (int i = 0; i < r->nguests; i++) {
		const char *logp = na_guest_log(&r->g[i]);

		for (;;) {
			struct chan c;
			struct verr e;
			char *info = NULL, why[256];

			if (cancelled(err))
				return -1;
			if (!na_guest_running(&r->g[i], why, sizeof(why))) {
				log_tail(logp, r->driver == DRIVER_KVM ? "the guest's console" : "the guest's agent log");
				if (r->driver == DRIVER_KVM)
					log_tail(na_kvm_hvlog(r->g[i].kvm), "vhpc-hv's log");
				return verr_set(err, "guest g%d stopped before it was ready: %s", i, why);
			}
			if ((r->driver == DRIVER_KVM || access(r->g[i].ctl_sock, F_OK) == 0) &&
			    na_guest_connect(&r->g[i], &c, r->key, r->driver == DRIVER_KVM ? 1000 : 2000, &e) == 0) {
				int hr = gexec_hello(&c, &info, 5000, &e);

				chan_close(&c);
				if (hr == 0) {
					struct json_object *o = json_tokener_parse(info);
					struct json_object *rd;
					bool ready = o && json_object_object_get_ex(o, "ready", &rd) &&
						     json_object_get_boolean(rd);

					log_debug("guest g%d: %s", i, info);
					json_object_put(o);
					free(info);
					if (ready)
						break;
				} else {
					log_debug("guest g%d: hello: %s", i, e.msg);
				}
			}
			if (now_s() > deadline) {
				log_tail(logp, r->driver == DRIVER_KVM ? "the guest's console" : "the guest's agent log");
				return verr_set(err, "guest g%d did not report ready within %d s", i, limit);
			}
			usleep(20000);
		}
	}
	return 0;
}

static int choose_vcpus(struct run *r, struct verr *err)
{
	const struct job_spec *j = r->j;
	struct na_numa_info nodes[NA_MAX_NODES];
	int nn = na_topo_numa(r->topo, nodes, NA_MAX_NODES), cores = 0, *busy = NULL, nbusy = 0, maxr = 0;

	for (int i = 0; i < nn && i < NA_MAX_NODES; i++)
		cores += nodes[i].ncores;
	for (int i = 0; i < r->nguests; i++)
		if (r->ranks_per_guest[i] > maxr)
			maxr = r->ranks_per_guest[i];
	if (j->vcpus) {
		r->vcpus = (int)j->vcpus;
		return 0;
	}
	r->vcpus = maxr;
	if (j->oversubscribe)
		return 0;
	if (na_busy_cpus(&busy, &nbusy, err) < 0)
		return -1;
	free(busy);
	if ((cores - nbusy) < r->nguests * maxr && (cores - nbusy) / r->nguests >= 1) {
		r->vcpus = (cores - nbusy) / r->nguests;
		log_info("this host has %d free cores: %d vCPU%s per guest, so %d ranks share each guest's cores (--vcpus or --oversubscribe to change)",
			 cores - nbusy, r->vcpus, r->vcpus == 1 ? "" : "s", maxr);
	}
	return 0;
}

static int place_guests(struct run *r, const struct embedded_opts *o, struct verr *err)
{
	const char *spec = o->topology ? o->topology : getenv("VHPC_TOPOLOGY");
	struct na_place_req req = { 0 };

	if (na_topo_load(&r->topo, spec && *spec ? spec : NULL, err) < 0)
		return -1;
	if (choose_vcpus(r, err) < 0)
		return -1;
	req.nguests = r->nguests;
	req.vcpus = r->vcpus;
	req.mem = r->mem;
	req.oversubscribe = r->j->oversubscribe;
	/* Reads what other jobs hold, places and records under one lock. */
	return na_place_job(r->topo, &req, &r->jd, r->place, err);
}

/* A guest of the job that stopped while mpirun runs ends the job: its
 * ranks are gone, and mpirun may not notice for a long time (a VM that
 * vanishes sends no TCP reset). */
static bool guest_gone(void *arg, char *why, size_t len)
{
	struct run *r = arg;

	for (int i = 0; i < r->nguests; i++) {
		char how[400];

		if (!na_guest_running(&r->g[i], how, sizeof(how))) {
			snprintf(why, len, "guest g%d stopped while the job ran: %s", i, how);
			return true;
		}
	}
	return false;
}

static int run_job(struct run *r, const struct launch_plan *lp, int *status, struct verr *err)
{
	char **argv = launch_mpirun_argv(lp);
	struct gexec_req req = { 0 };
	struct chan c;
	double t0;
	int rc;

	if (!argv)
		return verr_set(err, "out of memory");
	if (vlog_get_level() >= VLOG_DEBUG) {
		char line[4096] = "";

		for (char **p = argv; *p; p++)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s", p == argv ? "" : " ", *p);
		log_debug("guest g0 runs: %s", line);
	}
	if (na_guest_connect(&r->g[0], &c, r->key, 5000, err) < 0) {
		launch_free_argv(argv);
		return verr_wrap(err, "guest g0");
	}
	req.argv = (const char *const *)argv;
	req.env = launch_env;
	req.cwd = "/tmp";
	req.out_fd = STDOUT_FILENO;
	req.err_fd = STDERR_FILENO;
	req.timeout_ms = (int)(r->timeout > 2000000 ? 2000000000 : r->timeout * 1000);
	req.cancel = &forward_sig;
	req.gone = guest_gone;
	req.gone_arg = r;
	t0 = now_s();
	rc = gexec_run(&c, &req, status, err);
	chan_close(&c);
	launch_free_argv(argv);
	if (rc < 0)
		return -1;
	if (rc == GEXEC_TIMEOUT || now_s() - t0 >= (double)r->timeout) {
		log_err("the job ran out of its %lld s time limit and was stopped", r->timeout);
		*status = EXIT_TIMEOUT;
	}
	return 0;
}

/* Whatever the job got this far, in reverse; errors are logged, not fatal,
 * so one stuck piece does not leave the others behind. */
static void teardown(struct run *r)
{
	struct verr e;

	for (int i = 0; r->g && i < r->nguests; i++) {
		struct chan c;

		if (!na_guest_started(&r->g[i]))
			continue;
		/* Asking first lets the guest agent end its sessions cleanly
		 * (a kvm guest then powers off). */
		if (!r->emulated && na_guest_running(&r->g[i], NULL, 0) &&
		    (r->driver == DRIVER_KVM || access(r->g[i].ctl_sock, F_OK) == 0) &&
		    na_guest_connect(&r->g[i], &c, r->key, 1000, &e) == 0) {
			gexec_shutdown(&c, &e);
			chan_close(&c);
		}
	}
	if (r->g && na_guest_stop_all(r->g, r->nguests, 3000, &e) < 0)
		log_warn("stopping guests: %s", e.msg);
	/* Guest inits were reparented to us (child subreaper): reap them, so
	 * no zombie outlives the job. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	for (int i = 0; r->gdir_mounted && i < r->nguests; i++) {
		char dir[PATH_MAX];

		if (!r->gdir_mounted[i])
			continue;
		guest_dir(r, i, dir, sizeof(dir));
		if (umount2(dir, MNT_DETACH) < 0)
			log_warn("cannot unmount %s: %s", dir, strerror(errno));
	}
	if (r->vmshm[0] && na_vmshm_remove(r->jd.job, &e) < 0)
		log_warn("%s", e.msg);
	if (r->have_net && na_net_destroy(&r->net, &e) < 0)
		log_warn("job network: %s", e.msg);
	if (r->have_jd && na_jobdir_remove(&r->jd, &e) < 0)
		log_warn("job dir: %s", e.msg);
	r->have_net = r->have_jd = false;
}

static void free_run(struct run *r)
{
	if (r->topo)
		na_topo_free(r->topo);
	if (r->have_tun)
		tuning_free(&r->tun);
	cluster_free(&r->cl);
	free(r->ranks_per_guest);
	free(r->place);
	free(r->g);
	free(r->gdir_mounted);
	free(r->cpu_node);
	free(r->huge);
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int embedded_run(const struct job_spec *j, const struct embedded_opts *o, struct verr *err)
{
	struct run r = { .j = j };
	struct launch_plan lp = { 0 };
	struct launch_guest *lg = NULL;
	enum vhpc_driver driver;
	const char *why = "";
	double t0 = now_s();
	int status = -1, removed = 0;
	char job[16], rnd[4], net[32], whybuf[256];

	install_signals();
	/* Orphans of the job (container inits, once runc exits) come to us
	 * rather than to the host's init, which may be slow to reap them. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (cluster_load(NULL, &r.cl, err) < 0)
		return -1;
	driver = na_driver_resolve(j->driver >= 0 ? j->driver : r.cl.default_driver, &why);
	snprintf(whybuf, sizeof(whybuf), "%s", why);
	why = whybuf;
	r.driver = driver;
	if (driver == DRIVER_KVM) {
		if (na_driver_check_kvm(o->allow_emulated_kvm, &r.emulated, err) < 0)
			goto out;
		if (r.emulated)
			log_warn("driver kvm on a software-only KVM (--allow-emulated-kvm): the guests start, "
				 "but under instruction emulation they will not finish booting; their consoles show how far they get");
	} else if (o->allow_emulated_kvm) {
		verr_set(err, "--allow-emulated-kvm applies to --driver kvm only (%s)", why);
		goto out;
	} else if (na_driver_check(driver, err) < 0) {
		goto out;
	}
	if (na_cleanup_stale(&removed, err) < 0)
		goto out;
	if (removed)
		log_info("removed %d resources that earlier jobs left behind", removed);
	/* Cheap checks first: a bad profile should not wait for an image build. */
	if (tuning_load(j->tuning ? j->tuning : r.cl.default_tuning, &r.tun, err) < 0)
		goto out;
	r.have_tun = true;
	r.mem = j->mem ? j->mem : r.cl.default_mem;
	if (driver == DRIVER_KVM && (r.mem < NA_KVM_MIN_MEM || r.mem % (1u << 20))) {
		verr_set(err, "--mem %llu MiB: a kvm guest needs whole MiB, at least %llu MiB (kernel, initramfs, tmpfs)",
			 (unsigned long long)(r.mem >> 20), (unsigned long long)(NA_KVM_MIN_MEM >> 20));
		goto out;
	}
	if (image_ensure(j->image ? j->image : r.cl.default_image, driver == DRIVER_KVM ? IMAGE_KVM : 0,
			 &r.img, err) < 0)
		goto out;
	if (driver == DRIVER_KVM && !r.img.kvm) {
		verr_set(err, "image %s has no kvm parts (kernel, initramfs, ext4 root): give its YAML a kvm: section", r.img.name);
		goto out;
	}
	r.nguests = (int)j->guests;
	r.timeout = j->timeout ? j->timeout : r.cl.default_timeout;
	r.ranks_per_guest = calloc(r.nguests, sizeof(int));
	r.place = calloc(r.nguests, sizeof(*r.place));
	r.g = calloc(r.nguests, sizeof(*r.g));
	r.gdir_mounted = calloc(r.nguests, sizeof(bool));
	r.cpu_node = calloc((size_t)r.nguests * NA_MAX_VCPUS, sizeof(int));
	r.huge = calloc(r.nguests, sizeof(bool));
	lg = calloc(r.nguests, sizeof(*lg));
	if (!r.ranks_per_guest || !r.place || !r.g || !r.gdir_mounted || !r.cpu_node || !r.huge || !lg) {
		verr_set(err, "out of memory");
		goto out;
	}
	if (r.nguests > NA_MAX_GUESTS) {
		verr_set(err, "%d guests: at most %d per machine", r.nguests, NA_MAX_GUESTS);
		goto out;
	}
	launch_split_ranks((int)j->ranks, r.nguests, r.ranks_per_guest);

	random_bytes(rnd, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), job);
	if (na_jobdir_create(&r.jd, job, err) < 0)
		goto out;
	r.have_jd = true;
	if (cancelled(err) || place_guests(&r, o, err) < 0 || cancelled(err))
		goto out;
	if (driver == DRIVER_KVM && plan_kvm(&r, err) < 0)
		goto out;
	{
		struct na_net_req nr = { .job = job, .nguests = r.nguests, .tuning = &r.tun,
					 .no_guest_netns = driver == DRIVER_KVM };

		if (na_subnet_alloc(&r.cl, &r.jd, &nr.subnet, err) < 0)
			goto out;
		r.subnet = nr.subnet;
		if (na_net_create(&nr, &r.net, err) < 0)
			goto out;
		r.have_net = true;
	}
	log_info("job %s: %d guest%s x %d vCPU%s, %lld ranks, %s driver (%s), network %s/%d, image %s (%.12s)",
		 job, r.nguests, r.nguests == 1 ? "" : "s", r.vcpus, r.vcpus == 1 ? "" : "s",
		 j->ranks, vhpc_driver_names[driver], why,
		 ipv4_format(r.subnet.addr, net, sizeof(net)), r.subnet.prefix, r.img.name, r.img.id);
	for (int i = 0; i < r.nguests; i++) {
		char cpus[256];

		snprintf(lg[i].name, sizeof(lg[i].name), "g%d", i);
		lg[i].addr = r.net.guest_addr[i];
		lg[i].vcpus = r.vcpus;
		lg[i].ranks = r.ranks_per_guest[i];
		log_info("  g%d: cpus %s, memory on node %d%s, %d rank%s", i,
			 cpulist_format(r.place[i].cpus, r.place[i].ncpus, cpus, sizeof(cpus)),
			 r.place[i].nmems ? r.place[i].mems[0] : 0, r.huge[i] ? " in hugepages" : "",
			 lg[i].ranks, lg[i].ranks == 1 ? "" : "s");
	}
	lp.spec = j;
	lp.nguests = r.nguests;
	lp.guests = lg;
	lp.rsh_path = LAUNCH_RSH;
	lp.hostfile = "/vhpc/hostfile";
	lp.net_if = "eth0";
	/* Co-located guests of one job talk through shared memory, not TCP. */
	lp.vmshm = j->vmshm && r.nguests > 1 && j->ranks >= 2;
	lp.vmshm_component_dir = VMSHM_COMPONENT_DIR;
	if (lp.vmshm) {
		uint64_t size;
		char sz[32];

		if (na_vmshm_create(&r.jd, (int)j->ranks, r.vmshm, sizeof(r.vmshm), &size, err) < 0)
			goto out;
		/* A kvm guest sees it as a PCI BAR: a power of two. */
		if (driver == DRIVER_KVM && na_kvm_vmshm_fit(r.vmshm, &size, err) < 0)
			goto out;
		log_info("job %s: vmshm region %s (%s) for %lld ranks", job, r.vmshm,
			 fmt_size(size, sz, sizeof(sz)), j->ranks);
	}
	if (write_shared(&r, &lp, err) < 0)
		goto out;
	if (driver == DRIVER_KVM) {
		if (kvm_config_disk(&r, err) < 0)
			goto out;
		for (int i = 0; i < r.nguests; i++)
			if (cancelled(err) || start_guest_kvm(&r, i, err) < 0)
				goto out;
		log_info("job %s: guest consoles in %s/kvm*/serial", job, r.jd.path);
	} else {
		for (int i = 0; i < r.nguests; i++)
			if (cancelled(err) || make_guest_dir(&r, i, err) < 0 || start_guest(&r, i, err) < 0)
				goto out;
	}
	if (wait_ready(&r, err) < 0)
		goto out;
	log_info("job %s: %d guest%s ready in %.2f s", job, r.nguests, r.nguests == 1 ? "" : "s", now_s() - t0);
	if (run_job(&r, &lp, &status, err) < 0)
		status = -1;
	else
		log_info("job %s: exit status %d after %.2f s", job, status, now_s() - t0);
out:
	teardown(&r);
	free(lg);
	free_run(&r);
	/* Interrupted by the user: say so in the status, as shells do, even if
	 * the job's own exit status came back after the signal reached it. */
	if (interrupted) {
		if (status < 0)
			log_err("%s", err->msg);
		else
			log_err("job %s: interrupted by signal %d (%s); it was stopped and everything of it removed",
				job, interrupted, strsignal(interrupted));
		status = 128 + interrupted;
	}
	return status;
}
