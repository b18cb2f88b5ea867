/* Job runtime dirs, their locks, busy cpus, subnets and the stale sweep
 * of dirs (no network or containers: those are in the .t tests). */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/hwvirt.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "nodeagent/drivers/container/container.h"
#include "nodeagent/job.h"
#include "nodeagent/drivers/kvm/kvm.h"

static char run[64];

static int setup(void **state)
{
	(void)state;
	if (fx_tmpdir(run, sizeof(run), "test-jobdir") < 0)
		return -1;
	setenv("VHPC_RUN_DIR", run, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(run);
}

static bool exists(const char *fmt, const char *arg)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), fmt, run, arg);
	return stat(p, &st) == 0;
}

static void ids_are_checked(void **state)
{
	struct na_jobdir jd;
	struct verr e;
	const char *bad[] = { "", "A", "a-b", "abcdefghijklm", "../x", "a b", NULL };

	(void)state;
	for (int i = 0; bad[i]; i++) {
		assert_int_equal(na_jobdir_create(&jd, bad[i], &e), -1);
		assert_non_null(strstr(e.msg, "expected 1 to 12 characters"));
	}
	assert_int_equal(na_jobdir_create(&jd, NULL, &e), -1);
}

static void create_holds_the_lock_until_remove(void **state)
{
	struct na_jobdir jd, jd2;
	struct verr e;

	(void)state;
	assert_int_equal(na_jobdir_create(&jd, "j1", &e), 0);
	assert_true(exists("%s/jobs/%s/lock", "j1"));
	assert_true(na_jobdir_alive("j1"));
	assert_int_equal(na_jobdir_create(&jd2, "j1", &e), -1);
	assert_non_null(strstr(e.msg, "already exists"));
	assert_int_equal(na_jobdir_adopt(&jd2, "j1", &e), -1);
	assert_non_null(strstr(e.msg, "live process"));
	assert_int_equal(na_jobdir_remove(&jd, &e), 0);
	assert_false(exists("%s/jobs/%s", "j1"));
	assert_false(na_jobdir_alive("j1"));
}

/* A child makes a job, reports through the pipe, then either exits without
 * cleaning up (a crash) or waits to be killed. */
static pid_t child_job(const char *job, const int *cpus, int ncpus, bool stay)
{
	int p[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct na_jobdir jd;
		struct na_placement pl = { .ncpus = ncpus, .nmems = 1 };
		struct verr e;

		memcpy(pl.cpus, cpus, sizeof(int) * ncpus);
		if (na_jobdir_create(&jd, job, &e) < 0 || na_jobdir_record_cpus(&jd, &pl, 1, &e) < 0)
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		if (stay)
			pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	return pid;
}

static bool has(const int *v, int n, int x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static void dead_owner_is_swept_live_owner_is_not(void **state)
{
	const int c1[] = { 3, 5 }, c2[] = { 7 };
	pid_t dead, live;
	int *busy, nbusy, removed, st;
	struct na_jobdir jd;
	struct verr e;
	FILE *f;

	(void)state;
	dead = child_job("dead1", c1, 2, false);
	waitpid(dead, &st, 0);
	assert_int_equal(WEXITSTATUS(st), 0);
	live = child_job("live1", c2, 1, true);
	assert_false(na_jobdir_alive("dead1"));
	assert_true(na_jobdir_alive("live1"));

	/* a dead job's guests may still run until swept: its cpus are busy */
	assert_int_equal(na_busy_cpus(&busy, &nbusy, &e), 0);
	assert_true(has(busy, nbusy, 3) && has(busy, nbusy, 5) && has(busy, nbusy, 7));
	free(busy);

	/* an shm file of each job: only the dead one's goes */
	f = fopen("/dev/shm/vhpc-dead1-t", "w");
	assert_non_null(f);
	fclose(f);
	f = fopen("/dev/shm/vhpc-live1-t", "w");
	assert_non_null(f);
	fclose(f);

	assert_int_equal(na_cleanup_stale(&removed, &e), 0);
	assert_int_equal(removed, 2);   /* the shm file and the dir */
	assert_false(exists("%s/jobs/%s", "dead1"));
	assert_true(exists("%s/jobs/%s", "live1"));
	assert_int_equal(access("/dev/shm/vhpc-dead1-t", F_OK), -1);
	assert_int_equal(access("/dev/shm/vhpc-live1-t", F_OK), 0);
	assert_int_equal(na_busy_cpus(&busy, &nbusy, &e), 0);
	assert_false(has(busy, nbusy, 3));
	assert_true(has(busy, nbusy, 7));
	free(busy);

	kill(live, SIGKILL);
	waitpid(live, &st, 0);
	/* a restarted agent may adopt it instead of sweeping it */
	assert_int_equal(na_jobdir_adopt(&jd, "live1", &e), 0);
	assert_true(na_jobdir_alive("live1"));
	assert_int_equal(na_cleanup_stale(&removed, &e), 0);
	assert_int_equal(removed, 0);
	assert_int_equal(na_jobdir_remove(&jd, &e), 0);   /* sweeps its shm file */
	assert_int_equal(access("/dev/shm/vhpc-live1-t", F_OK), -1);
}

static void unpublished_dirs_are_swept_after_a_minute(void **state)
{
	char young[256], old[256];
	struct timeval tv[2] = { { .tv_sec = 1000000 }, { .tv_sec = 1000000 } };
	int removed;
	struct verr e;

	(void)state;
	snprintf(young, sizeof(young), "%s/jobs/.new-a-1", run);
	snprintf(old, sizeof(old), "%s/jobs/.new-b-1", run);
	assert_int_equal(mkdir_p(young, 0700, &e), 0);
	assert_int_equal(mkdir_p(old, 0700, &e), 0);
	assert_int_equal(utimes(old, tv), 0);
	assert_int_equal(na_cleanup_stale(&removed, &e), 0);
	assert_int_equal(removed, 1);
	assert_int_equal(access(young, F_OK), 0);
	assert_int_equal(access(old, F_OK), -1);
	rmdir(young);
}

static void concurrent_jobs_get_different_cores(void **state)
{
	struct na_topo *t;
	struct na_jobdir a, b, c;
	struct na_placement pa[1], pb[1], pc[1];
	struct na_place_req r = { .nguests = 1, .vcpus = 1 };
	struct verr e;

	(void)state;
	assert_int_equal(na_topo_load(&t, "synthetic:numa:1 core:2 pu:1", &e), 0);
	assert_int_equal(na_jobdir_create(&a, "pa", &e), 0);
	assert_int_equal(na_jobdir_create(&b, "pb", &e), 0);
	assert_int_equal(na_jobdir_create(&c, "pc", &e), 0);
	assert_int_equal(na_place_job(t, &r, &a, pa, &e), 0);
	assert_int_equal(na_place_job(t, &r, &b, pb, &e), 0);
	assert_int_not_equal(pa[0].cpus[0], pb[0].cpus[0]);
	assert_int_equal(na_place_job(t, &r, &c, pc, &e), -1);
	assert_non_null(strstr(e.msg, "0 of 2 cores free"));
	/* placing a job again replaces its own record, not adds to it */
	assert_int_equal(na_place_job(t, &r, &a, pa, &e), 0);
	assert_int_equal(na_jobdir_remove(&a, &e), 0);
	assert_int_equal(na_place_job(t, &r, &c, pc, &e), 0);
	assert_int_equal(pc[0].cpus[0], pa[0].cpus[0]);
	assert_int_equal(na_jobdir_remove(&b, &e), 0);
	assert_int_equal(na_jobdir_remove(&c, &e), 0);
	na_topo_free(t);
}

static void subnets_are_distinct_and_come_back(void **state)
{
	struct cluster_cfg cl = { .job_prefix = 24 };
	struct na_jobdir a, b, c;
	struct ipv4net na, nb, nc, again;
	struct verr e;

	(void)state;
	assert_int_equal(ipv4net_parse("10.213.0.0/16", false, &cl.job_pool), 0);
	assert_int_equal(na_jobdir_create(&a, "sa", &e), 0);
	assert_int_equal(na_jobdir_create(&b, "sb", &e), 0);
	assert_int_equal(na_subnet_alloc(&cl, &a, &na, &e), 0);
	assert_int_equal(na_subnet_alloc(&cl, &b, &nb, &e), 0);
	assert_int_equal(na.prefix, 24);
	assert_int_equal(na.addr, 0x0ad50000u);
	assert_int_equal(nb.addr, 0x0ad50100u);
	assert_int_equal(na_subnet_alloc(&cl, &a, &again, &e), 0);   /* idempotent */
	assert_int_equal(again.addr, na.addr);
	assert_int_equal(na_jobdir_remove(&a, &e), 0);
	assert_int_equal(na_jobdir_create(&c, "sc", &e), 0);
	assert_int_equal(na_subnet_alloc(&cl, &c, &nc, &e), 0);
	assert_int_equal(nc.addr, na.addr);
	assert_int_equal(na_jobdir_remove(&b, &e), 0);
	assert_int_equal(na_jobdir_remove(&c, &e), 0);

	/* a pool of two */
	assert_int_equal(ipv4net_parse("10.9.0.0/28", false, &cl.job_pool), 0);
	cl.job_prefix = 29;
	assert_int_equal(na_jobdir_create(&a, "sa", &e), 0);
	assert_int_equal(na_jobdir_create(&b, "sb", &e), 0);
	assert_int_equal(na_jobdir_create(&c, "sc", &e), 0);
	assert_int_equal(na_subnet_alloc(&cl, &a, &na, &e), 0);
	assert_int_equal(na_subnet_alloc(&cl, &b, &nb, &e), 0);
	assert_int_equal(na_subnet_alloc(&cl, &c, &nc, &e), -1);
	assert_non_null(strstr(e.msg, "no free /29"));
	assert_non_null(strstr(e.msg, "10.9.0.0/28"));
	cl.job_prefix = 31;
	assert_int_equal(na_subnet_alloc(&cl, &c, &nc, &e), -1);
	assert_non_null(strstr(e.msg, "prefix /31"));
	assert_int_equal(na_jobdir_remove(&a, &e), 0);
	assert_int_equal(na_jobdir_remove(&b, &e), 0);
	assert_int_equal(na_jobdir_remove(&c, &e), 0);
}

static void driver_choice_says_why(void **state)
{
	const struct na_driver *d;
	const char *why;
	struct verr e;
	struct hwvirt h;
	bool emulated;

	(void)state;
	hwvirt_detect(&h);
	assert_non_null(d = na_driver_resolve(NULL, &why, &e));
	assert_string_equal(na_driver_name(d), h.hw ? "kvm" : "container");
	assert_non_null(strstr(why, h.hw ? "auto picked kvm" : "auto picked container"));
	assert_non_null(strstr(why, h.why));
	assert_ptr_equal(na_driver_resolve("auto", &why, &e), d);
	assert_non_null(d = na_driver_resolve("container", &why, &e));
	assert_string_equal(na_driver_name(d), "container");
	assert_non_null(d = na_driver_resolve("kvm", &why, &e));
	assert_string_equal(na_driver_name(d), "kvm");
	assert_non_null(strstr(why, h.why));
	/* Every name lib/drivers.h knows (one per folder) is in the table. */
	for (int i = 0; vhpc_driver_names[i]; i++)
		assert_non_null(na_driver_resolve(vhpc_driver_names[i], &why, &e));
	assert_null(na_driver_resolve("xen", &why, &e));
	assert_non_null(strstr(e.msg, "driver 'xen': no such driver (expected auto, container or kvm)"));
	unsetenv("VHPC_KVM_ALLOW_EMULATION");
	d = na_driver_resolve("kvm", &why, &e);
	if (h.hw) {
		assert_int_equal(na_driver_check(d, &e), 0);
	} else {
		assert_int_equal(na_driver_check(d, &e), -1);
		assert_non_null(strstr(e.msg, h.why));
		if (h.kvm) {
			assert_non_null(strstr(e.msg, "--allow-emulated-kvm"));
			/* The override starts guests anyway, and says they are emulated. */
			assert_int_equal(na_kvm_host_check(true, &emulated, &e), 0);
			assert_true(emulated);
			setenv("VHPC_KVM_ALLOW_EMULATION", "1", 1);
			assert_int_equal(na_kvm_host_check(false, &emulated, &e), 0);
			assert_true(emulated);
		}
	}
	setenv("VHPC_KVM_ALLOW_EMULATION", "yes please", 1);
	assert_int_equal(na_kvm_host_check(false, &emulated, &e), -1);
	assert_non_null(strstr(e.msg, "VHPC_KVM_ALLOW_EMULATION='yes please': expected 0 or 1"));
	unsetenv("VHPC_KVM_ALLOW_EMULATION");
	d = na_driver_resolve("container", &why, &e);
	setenv("VHPC_RUNC", "/nonexistent/runc", 1);
	assert_int_equal(na_driver_check(d, &e), -1);
	assert_non_null(strstr(e.msg, "runc not found"));
	unsetenv("VHPC_RUNC");
	if (na_runc_path())
		assert_int_equal(na_driver_check(d, &e), 0);
}

/* The fabric lives in a guest's network namespace: "auto" picks a driver
 * whose guests have one, a driver asked by name stays, and a job that
 * said --rdma is refused by one that cannot give it, before anything is
 * made.  (Without --rdma the job runs over TCP: kvm/ and fabric/ tests.) */
static void driver_for_the_fabric(void **state)
{
	const struct na_driver *d;
	const char *why;
	struct verr e;
	struct hwvirt h;
	struct na_job *j = NULL;
	int ranks[1] = { 1 };
	struct na_job_spec s = { .driver = "kvm", .nguests = 1, .ntotal = 1, .ranks = ranks, .rdma = true, .rdma_asked = true };

	(void)state;
	hwvirt_detect(&h);
	assert_non_null(d = na_driver_resolve_for("auto", true, &why, &e));
	assert_string_equal(na_driver_name(d), "container");
	assert_non_null(strstr(why, "auto picked container"));
	if (h.hw)
		assert_non_null(strstr(why, "the job uses the RDMA fabric, which kvm guests do not get"));
	assert_non_null(d = na_driver_resolve_for(NULL, true, &why, &e));
	assert_string_equal(na_driver_name(d), "container");
	assert_non_null(d = na_driver_resolve_for("kvm", true, &why, &e));
	assert_string_equal(na_driver_name(d), "kvm");
	assert_int_equal(na_job_start(&j, "fabric-kvm", &s, &e), -1);
	assert_non_null(strstr(e.msg, "--rdma: driver kvm cannot give its guests the RDMA fabric"));
	na_job_stop(j);
}

/* What a field the user left out means, whoever starts the job: the
 * cluster's default; what the user gave, as given. */
static void job_spec_takes_cluster_defaults(void **state)
{
	struct cluster_cfg cl = { .default_image = "dflt", .default_tuning = "hpc", .default_driver = 1,
				  .default_mem = 768ull << 20, .default_timeout = 99, .guest_port = 7707 };
	struct job_spec js;
	struct na_job_spec s = { 0 };

	(void)state;
	job_spec_defaults(&js);
	js.driver = -1;
	js.mem = 0;
	js.timeout = 0;
	na_job_spec_from(&s, &js, &cl);
	assert_string_equal(s.driver, vhpc_driver_names[1]);
	assert_string_equal(s.image, "dflt");
	assert_string_equal(s.tuning, "hpc");
	assert_int_equal(s.mem, 768ull << 20);
	assert_int_equal(s.job_timeout_s, 99);
	assert_int_equal(s.guest_port, 7707);
	assert_true(s.vmshm);
	assert_true(s.single_copy);
	js.driver = vhpc_driver_index("kvm");
	js.image = "mine";
	js.tuning = "none";
	js.mem = 1ull << 30;
	js.timeout = 5;
	js.vcpus = 3;
	js.scratch = 32ull << 20;
	js.oversubscribe = true;
	js.ranks = 1;
	js.single_copy = false;
	na_job_spec_from(&s, &js, &cl);
	assert_string_equal(s.driver, "kvm");
	assert_string_equal(s.image, "mine");
	assert_string_equal(s.tuning, "none");
	assert_int_equal(s.mem, 1ull << 30);
	assert_int_equal(s.job_timeout_s, 5);
	assert_int_equal(s.vcpus, 3);
	assert_int_equal(s.scratch, 32ull << 20);
	assert_true(s.oversubscribe);
	assert_false(s.single_copy);
	/* One rank has nobody to share memory with. */
	assert_false(s.vmshm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ids_are_checked),
		cmocka_unit_test(create_holds_the_lock_until_remove),
		cmocka_unit_test(dead_owner_is_swept_live_owner_is_not),
		cmocka_unit_test(unpublished_dirs_are_swept_after_a_minute),
		cmocka_unit_test(concurrent_jobs_get_different_cores),
		cmocka_unit_test(subnets_are_distinct_and_come_back),
		cmocka_unit_test(driver_choice_says_why),
		cmocka_unit_test(driver_for_the_fabric),
		cmocka_unit_test(job_spec_takes_cluster_defaults),
	};

	vlog_init("test-jobdir");
	vlog_set_level(VLOG_ERR);
	return cmocka_run_group_tests(tests, setup, teardown);
}
