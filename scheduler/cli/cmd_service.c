/*
 * vhpc service: the local root service that lets ordinary users run jobs on
 * this one machine.  It is a one-node cluster: vhpc-ctld and one vhpcd on
 * loopback, started by an admin once.  vhpc run of an ordinary user then
 * goes to it (client_controller finds it), is authenticated by munge like
 * every cluster request, and its guests run as that user.  Reusing the
 * cluster's daemons rather than a second, local-only protocol means one
 * code path is checked for who may do what; and while the service runs,
 * root's vhpc run goes to it too, so two schedulers never hand out the same
 * cores.
 *
 * The service folder ($VHPC_SERVICE_DIR, default /run/vhpc-service) holds
 * the daemons' pids, logs and state; its `controller` file, written last,
 * is what clients look for, so they see a service only once it is ready.
 */
#include "lib/clock.h"
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/proc.h"
#include "lib/paths.h"
#include "cli.h"
#include "client.h"
#include "images/images.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <munge.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_PORT 6830   /* not 6817/6818: those are Slurm's */

static void service_usage(void)
{
	printf("usage: vhpc service start [--port P] [--name NAME]\n"
	       "       vhpc service stop\n"
	       "       vhpc service status\n"
	       "\n"
	       "The local service (root): vhpc-ctld and a vhpcd for this machine on loopback\n"
	       "(ports P and P+1, default %d), so that ordinary users can `vhpc run` here;\n"
	       "their jobs run as them.  Requests are authenticated by munge: a running munged\n"
	       "is used ($VHPC_MUNGE_SOCKET selects its socket), else start runs the system's.\n"
	       "Its folder: $VHPC_SERVICE_DIR (default /run/vhpc-service).\n",
	       DEFAULT_PORT);
}

static void svc_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s%s%s", vhpc_service_dir(), name[0] ? "/" : "", name);
}

static pid_t read_pid(const char *name)
{
	char path[PATH_MAX], *txt = NULL;
	size_t n;
	long long v = 0;
	struct verr e;

	svc_path(path, sizeof(path), name);
	if (read_file(path, &txt, &n, 32, &e) < 0)
		return 0;
	txt[strcspn(txt, "\n")] = 0;
	if (parse_ll(txt, 2, INT32_MAX, &v) < 0)
		v = 0;
	free(txt);
	return (pid_t)v;
}

static bool alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Starts argv as a daemon of its own session (stdio on /dev/null: it logs
 * to --log) and records its pid in the service folder. */
static pid_t spawn(const char *const *argv, const char *pidname, const char *run_dir, struct verr *err)
{
	char path[PATH_MAX], txt[32];
	pid_t pid = fork();

	if (pid < 0)
		return verr_errno(err, "fork");
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		setsid();
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(126);
		if (run_dir)
			setenv("VHPC_RUN_DIR", run_dir, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	svc_path(path, sizeof(path), pidname);
	snprintf(txt, sizeof(txt), "%d\n", (int)pid);
	if (write_file(path, txt, strlen(txt), 0644, err) < 0)
		return -1;
	return pid;
}

/* The last lines of a daemon's log, for an error. */
static void log_tail(const char *name, char *buf, size_t len)
{
	char path[PATH_MAX], *txt = NULL;
	size_t n;
	struct verr e;

	buf[0] = 0;
	svc_path(path, sizeof(path), name);
	if (read_file(path, &txt, &n, 1 << 20, &e) < 0)
		return;
	while (n && txt[n - 1] == '\n')
		txt[--n] = 0;
	snprintf(buf, len, "%s", n > len - 1 ? txt + n - (len - 1) : txt);
	free(txt);
}

/* SIGTERM, then SIGKILL after grace_ms; reaps it when it is our child. */
static void stop_pid(pid_t pid, int grace_ms)
{
	uint64_t end = now_ns() + (uint64_t)grace_ms * 1000000ull;

	if (!alive(pid))
		return;
	kill(pid, SIGTERM);
	while (now_ns() < end) {
		if (waitpid(pid, NULL, WNOHANG) == pid || !alive(pid))
			return;
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static int munge_works(void)
{
	munge_ctx_t ctx = munge_ctx_create();
	const char *sock = getenv("VHPC_MUNGE_SOCKET");
	char *cred = NULL;
	munge_err_t e;

	if (!ctx)
		return 0;
	if (sock && *sock)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, sock);
	e = munge_encode(&cred, ctx, NULL, 0);
	free(cred);
	munge_ctx_destroy(ctx);
	return e == EMUNGE_SUCCESS;
}

/* The system's munged, when none answers: with a key made on the spot if
 * the package did not leave one. */
static int munge_up(bool *started, struct verr *err)
{
	*started = false;
	if (munge_works())
		return 0;
	if (getenv("VHPC_MUNGE_SOCKET") && *getenv("VHPC_MUNGE_SOCKET"))
		return verr_set(err, "munged does not answer on $VHPC_MUNGE_SOCKET (%s)", getenv("VHPC_MUNGE_SOCKET"));
	if (access("/etc/munge/munge.key", F_OK) < 0) {
		const char *const mk[] = { "mungekey", "--create", NULL };

		if (run_capture(mk, NULL, NULL, 0, 30000, err) != 0)
			return verr_wrap(err, "no munge key in /etc/munge and mungekey failed");
	}
	/* The package's unit would make it (RuntimeDirectory=): not here. */
	if (mkdir("/run/munge", 0755) < 0 && errno != EEXIST)
		return verr_errno(err, "/run/munge");
	{
		/* --force: as root, which the Debian package's unit would not do. */
		const char *const md[] = { "munged", "--force", NULL };

		if (run_capture(md, NULL, NULL, 0, 30000, err) != 0)
			return verr_wrap(err, "starting munged");
	}
	for (int i = 0; i < 100 && !munge_works(); i++)
		usleep(50000);
	if (!munge_works())
		return verr_set(err, "munged started but does not answer");
	*started = true;
	return 0;
}

/* Until the controller answers, and, with node, lists it as up. */
static int wait_ready(const char *ctl, const char *node, int timeout_ms, struct verr *err)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct verr e = { 0 };

	do {
		struct json_object *req = json_object_new_object(), *rep = NULL, *nodes;

		json_object_object_add(req, "type", json_object_new_string("nodes"));
		if (client_call(ctl, req, &rep, 2000, &e) == 0) {
			bool up = !node;

			if (node && json_object_object_get_ex(rep, "nodes", &nodes))
				for (size_t i = 0; i < json_object_array_length(nodes); i++) {
					struct json_object *n = json_object_array_get_idx(nodes, i);

					if (!strcmp(client_str(n, "name", ""), node) && !strcmp(client_str(n, "state", ""), "up"))
						up = true;
				}
			json_object_put(rep);
			json_object_put(req);
			if (up)
				return 0;
		} else {
			json_object_put(req);
		}
		usleep(100000);
	} while (now_ns() < end);
	return verr_set(err, "%s did not %s within %d s%s%s", node ? node : "vhpc-ctld",
			node ? "come up as a node" : "answer", timeout_ms / 1000, e.msg[0] ? ": " : "", e.msg);
}

static int service_stop_all(bool quiet);

/* Spawns one daemon of the service (NAME.pid, NAME.log in its folder) and
 * waits until the controller answers (and, with node, lists it as up); on
 * failure says why with the daemon's last log lines and stops the service. */
static int start_daemon(const char *const *argv, const char *name, const char *run_dir, const char *ctl,
			const char *node, int timeout_ms)
{
	char pidname[32], logname[32], tail[1500];
	struct verr err;

	snprintf(pidname, sizeof(pidname), "%s.pid", name);
	snprintf(logname, sizeof(logname), "%s.log", name);
	if (spawn(argv, pidname, run_dir, &err) < 0) {
		fprintf(stderr, "vhpc service start: %s\n", err.msg);
	} else if (wait_ready(ctl, node, timeout_ms, &err) < 0) {
		log_tail(logname, tail, sizeof(tail));
		fprintf(stderr, "vhpc service start: %s\n%s\n", err.msg, tail);
	} else {
		return 0;
	}
	service_stop_all(true);
	return -1;
}

static int service_stop_all(bool quiet)
{
	char path[PATH_MAX], rundir[PATH_MAX];
	pid_t node = read_pid("vhpcd.pid"), ctld = read_pid("ctld.pid"), munged = read_pid("munged.pid");
	struct verr e;
	bool any = alive(node) || alive(ctld);

	svc_path(path, sizeof(path), "controller");
	unlink(path);   /* first: no new client comes */
	/* The node agent stops its jobs' guests as it goes. */
	stop_pid(node, 30000);
	svc_path(rundir, sizeof(rundir), "run");
	if (access(rundir, F_OK) == 0) {
		/* Whatever a killed vhpcd left: the same sweep as vhpc cleanup. */
		char na[512];
		const char *const argv[] = { vhpc_prog("vhpc-na", na, sizeof(na)), "cleanup", NULL };
		pid_t p = fork();

		if (p == 0) {
			int null = open("/dev/null", O_RDWR);

			if (null >= 0) {
				dup2(null, 1);
				dup2(null, 2);
			}
			setenv("VHPC_RUN_DIR", rundir, 1);
			execv(argv[0], (char *const *)argv);
			_exit(127);
		}
		if (p > 0)
			waitpid(p, NULL, 0);
	}
	stop_pid(ctld, 10000);
	/* Its compact images stay mounted for later jobs while it runs. */
	svc_path(path, sizeof(path), "image-cache");
	if (access(path, F_OK) == 0 && image_cache_unmount_all(path, &e) < 0)
		fprintf(stderr, "vhpc service stop: %s\n", e.msg);
	if (munged > 0) {
		stop_pid(munged, 10000);
		rmdir("/run/munge");   /* made by start; only if munged left it empty */
	}
	/* Only what start made: $VHPC_SERVICE_DIR may name a folder that
	 * holds other things too. */
	{
		static const char *const trees[] = { "ctld", "ctld-spool", "run", "image-cache" };
		static const char *const files[] = { "ctld.pid", "vhpcd.pid", "munged.pid", "ctld.log", "vhpcd.log" };

		for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
			svc_path(path, sizeof(path), trees[i]);
			if (access(path, F_OK) == 0 && rm_rf(path, &e) < 0) {
				fprintf(stderr, "vhpc service stop: %s\n", e.msg);
				return EXIT_VHPC;
			}
		}
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			svc_path(path, sizeof(path), files[i]);
			unlink(path);
		}
		svc_path(path, sizeof(path), "");
		rmdir(path);   /* unless something else is in it */
	}
	if (!quiet)
		printf("vhpc service: %s\n", any ? "stopped" : "was not running");
	return 0;
}

/* vhpc service start [--port P] [--name NODE]: 0, 1 after --help, or a
 * usage error's exit status. */
static int service_start_args(int argc, char **argv, long long *port, char *name, size_t len)
{
	static const struct option opts[] = {
		{ "port", required_argument, 0, 'p' }, { "name", required_argument, 0, 'n' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	int o;

	optind = 1;
	while ((o = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (o) {
		case 'p':
			if (parse_ll(optarg, 1024, 65534, port) < 0)
				return usage_error("service", "--port %s: expected 1024..65534", optarg);
			break;
		case 'n':
			if (!optarg[0] || strlen(optarg) >= len || strspn(optarg,
				"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != strlen(optarg))
				return usage_error("service", "--name '%s': expected up to %zu letters, digits, '-', '_', '.'",
						   optarg, len - 1);
			snprintf(name, len, "%s", optarg);
			break;
		case 'h': service_usage(); return 1;
		case ':': return usage_error("service", "%s needs a value", argv[optind - 1]);
		default: return usage_error("service", "unknown option %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("service", "start: unexpected argument '%s'", argv[optind]);
	return 0;
}

static int service_start(int argc, char **argv)
{
	char ctl[64], nodeaddr[64], name[64], dir[PATH_MAX], p1[PATH_MAX], p2[PATH_MAX], p3[PATH_MAX],
		p4[PATH_MAX], p5[PATH_MAX], ctldb[512], nab[512];
	long long port = DEFAULT_PORT;
	bool started_munge;
	struct verr err;
	int o;

	if (gethostname(name, sizeof(name)) < 0 || !name[0])
		snprintf(name, sizeof(name), "localhost");
	name[sizeof(name) - 1] = 0;
	if ((o = service_start_args(argc, argv, &port, name, sizeof(name))))
		return o == 1 ? 0 : o;
	if (geteuid() != 0) {
		fprintf(stderr, "vhpc service start: needs root: it starts vhpc-ctld and vhpcd, which make network "
			"namespaces, cgroups and guests for every user's jobs\n");
		return EXIT_USAGE;
	}
	if (alive(read_pid("ctld.pid")) || alive(read_pid("vhpcd.pid"))) {
		svc_path(p1, sizeof(p1), "controller");
		fprintf(stderr, "vhpc service start: already running (%s); `vhpc service stop` first\n", p1);
		return EXIT_USAGE;
	}
	service_stop_all(true);   /* what a crashed service left */
	svc_path(dir, sizeof(dir), "");
	if (mkdir_p(dir, 0755, &err) < 0 || chmod(dir, 0755) < 0)
		goto fail_msg;
	if (munge_up(&started_munge, &err) < 0)
		goto fail_msg;
	if (started_munge) {
		char pidtxt[32];
		pid_t mp = 0;
		char *t = NULL;
		size_t n;
		struct verr e;

		if (read_file("/run/munge/munged.pid", &t, &n, 32, &e) == 0) {
			mp = (pid_t)atoi(t);
			free(t);
		}
		svc_path(p1, sizeof(p1), "munged.pid");
		snprintf(pidtxt, sizeof(pidtxt), "%d\n", (int)mp);
		if (mp > 0 && write_file(p1, pidtxt, strlen(pidtxt), 0644, &err) < 0)
			goto fail_msg;
	}
	snprintf(ctl, sizeof(ctl), "127.0.0.1:%lld", port);
	snprintf(nodeaddr, sizeof(nodeaddr), "127.0.0.1:%lld", port + 1);
	svc_path(p1, sizeof(p1), "ctld");
	svc_path(p2, sizeof(p2), "ctld.log");
	{
		const char *const av[] = { vhpc_prog("vhpc-ctld", ctldb, sizeof(ctldb)), "--listen", ctl, "--state", p1,
					   "--log", p2, NULL };

		if (start_daemon(av, "ctld", NULL, ctl, NULL, 15000) < 0)
			return EXIT_VHPC;
	}
	svc_path(p3, sizeof(p3), "vhpcd.log");
	svc_path(p4, sizeof(p4), "run");
	svc_path(p5, sizeof(p5), "image-cache");
	{
		const char *const av[] = { vhpc_prog("vhpcd", nab, sizeof(nab)), "--listen", nodeaddr, "--controller", ctl,
					   "--name", name, "--log", p3, "--image-cache", p5, NULL };

		if (start_daemon(av, "vhpcd", p4, ctl, name, 30000) < 0)
			return EXIT_VHPC;
	}
	/* Jobs run what the store holds: the default image, built here as
	 * `vhpc run` would, goes in first. */
	{
		struct cluster_cfg cl;
		struct image_info img;

		if (cluster_load(NULL, &cl, &err) < 0)
			goto fail_msg;
		if (image_ensure(cl.default_image, 0, &img, &err) < 0 ||
		    image_push_to(ctl, cl.default_image, NULL, true, &err) < 0) {
			cluster_free(&cl);
			goto fail_msg;
		}
		printf("vhpc service: image %s (%.12s) is in its store\n", cl.default_image, img.id);
		cluster_free(&cl);
	}
	{
		char txt[80];

		svc_path(p1, sizeof(p1), "controller");
		snprintf(txt, sizeof(txt), "%s\n", ctl);
		if (write_file_atomic(p1, txt, strlen(txt), 0644, &err) < 0)
			goto fail_msg;
	}
	printf("vhpc service: running: vhpc-ctld on %s, node %s on %s%s; logs in %s.\n"
	       "Ordinary users on this machine can now `vhpc run`; their jobs run as them.\n",
	       ctl, name, nodeaddr, started_munge ? " (munged started too)" : "", dir);
	return 0;
fail_msg:
	fprintf(stderr, "vhpc service start: %s\n", err.msg);
	service_stop_all(true);
	return EXIT_VHPC;
}

static int service_status(void)
{
	char ctl[300], path[PATH_MAX];
	pid_t node = read_pid("vhpcd.pid"), ctld = read_pid("ctld.pid");
	struct verr err;

	svc_path(path, sizeof(path), "");
	if (service_controller(ctl, sizeof(ctl)) <= 0 || !alive(ctld) || !alive(node)) {
		printf("vhpc service: not running (%s)%s\n", path,
		       alive(ctld) || alive(node) ? "; a daemon of it is still there: `vhpc service stop`" : "");
		return 1;
	}
	if (wait_ready(ctl, NULL, 3000, &err) < 0) {
		printf("vhpc service: vhpc-ctld (pid %d) does not answer: %s\n", (int)ctld, err.msg);
		return 1;
	}
	printf("vhpc service: running: vhpc-ctld pid %d on %s, vhpcd pid %d; folder %s\n", (int)ctld, ctl, (int)node,
	       path);
	return 0;
}

int cmd_service(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		service_usage();
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "start"))
		return service_start(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stop") || !strcmp(argv[1], "status")) {
		if (argc > 2)
			return usage_error("service", "%s: unexpected argument '%s'", argv[1], argv[2]);
		if (!strcmp(argv[1], "status"))
			return service_status();
		if (geteuid() != 0) {
			fprintf(stderr, "vhpc service stop: needs root\n");
			return EXIT_USAGE;
		}
		return service_stop_all(false);
	}
	return usage_error("service", "unknown subcommand '%s' (start, stop or status)", argv[1]);
}
