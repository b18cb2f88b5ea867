/* The OCI config of a container guest, and the specs it refuses. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"
#include <json-c/json.h>

#include "nodeagent/drivers/container/container.h"
#include "nodeagent/job.h"

static char root[64];
static const char *argv_[] = { "/bin/vhpc-guestd", "--ready", NULL };
static const char *env_[] = { "VHPC_JOB=j1", NULL };
static struct na_placement place = { .ncpus = 3, .cpus = { 5, 1, 2 }, .nmems = 1, .mems = { 0 } };
static struct na_bind binds[2];

static int setup(void **state)
{
	static const char *dirs[] = { "proc", "sys", "dev", "tmp", "run", "var", "var/tmp", "opt", "scratch", NULL };
	char p[128];

	(void)state;
	if (fx_tmpdir(root, sizeof(root), "test-oci") < 0)
		return -1;
	for (int i = 0; dirs[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		if (mkdir(p, 0755) < 0)
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(root);
}

static struct na_ctr_spec spec(void)
{
	binds[0] = (struct na_bind){ .src = "/etc", .dst = "/run/vhpc/etc", .ro = true };
	binds[1] = (struct na_bind){ .src = "/tmp", .dst = "/opt", .ro = false };
	return (struct na_ctr_spec){
		.job = "j1", .index = 3, .hostname = "j1-3", .rootfs = root,
		.argv = argv_, .env = env_, .binds = binds, .nbinds = 2,
		.netns = "vhpc-j1-3", .place = &place, .mem_limit = 256u << 20,
		.tmpfs_size = 32u << 20, .log_path = "/tmp/j1-3.log", .uid = 1234, .gid = 5678,
		.sysfs = "/run/vhpc/jobs/j1/sys3",
	};
}

static json_object *get(json_object *o, const char *path)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
		if (!json_object_object_get_ex(o, k, &o))
			return NULL;
	return o;
}

static bool array_has(json_object *a, const char *s)
{
	for (size_t i = 0; a && i < json_object_array_length(a); i++)
		if (!strcmp(json_object_get_string(json_object_array_get_idx(a, i)), s))
			return true;
	return false;
}

static json_object *mount_at(json_object *c, const char *dst)
{
	json_object *m = get(c, "mounts");

	for (size_t i = 0; m && i < json_object_array_length(m); i++) {
		json_object *x = json_object_array_get_idx(m, i);

		if (!strcmp(json_object_get_string(get(x, "destination")), dst))
			return x;
	}
	return NULL;
}

static void config_isolates_and_applies_placement(void **state)
{
	struct na_ctr_spec s = spec();
	json_object *c, *ns, *m;
	struct verr e;
	bool seen[6] = { 0 };

	(void)state;
	assert_int_equal(na_oci_config(&s, "/bundle/rootfs", &c, &e), 0);
	assert_string_equal(json_object_get_string(get(c, "root.path")), "/bundle/rootfs");
	assert_true(json_object_get_boolean(get(c, "root.readonly")));
	assert_string_equal(json_object_get_string(get(c, "hostname")), "j1-3");
	assert_true(array_has(get(c, "process.args"), "--ready"));
	assert_true(array_has(get(c, "process.env"), "VHPC_JOB=j1"));
	assert_true(array_has(get(c, "process.env"), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
	assert_true(json_object_get_boolean(get(c, "process.noNewPrivileges")));
	/* No capability in any set, even inside the guest's user namespace. */
	for (const char *const *set = (const char *const[]){ "bounding", "effective", "permitted", "inheritable", "ambient", NULL };
	     *set; set++) {
		char path[64];

		snprintf(path, sizeof(path), "process.capabilities.%s", *set);
		assert_non_null(get(c, path));
		assert_int_equal(json_object_array_length(get(c, path)), 0);
	}
	/* The guest's root is the job's user, and nothing else is mapped. */
	for (const char *const *map = (const char *const[]){ "linux.uidMappings", "linux.gidMappings", NULL }; *map; map++) {
		json_object *a = get(c, *map), *m0;

		assert_non_null(a);
		assert_int_equal(json_object_array_length(a), 1);
		m0 = json_object_array_get_idx(a, 0);
		assert_int_equal(json_object_get_int64(get(m0, "containerID")), 0);
		assert_int_equal(json_object_get_int64(get(m0, "hostID")), !strcmp(*map, "linux.uidMappings") ? 1234 : 5678);
		assert_int_equal(json_object_get_int64(get(m0, "size")), 1);
	}
	/* seccomp: an allowlist; what escapes or reaches the host is not on it. */
	assert_string_equal(json_object_get_string(get(c, "linux.seccomp.defaultAction")), "SCMP_ACT_ERRNO");
	{
		json_object *rules = get(c, "linux.seccomp.syscalls"), *all = NULL;

		assert_non_null(rules);
		for (size_t i = 0; i < json_object_array_length(rules); i++) {
			json_object *r = json_object_array_get_idx(rules, i);

			if (!strcmp(json_object_get_string(get(r, "action")), "SCMP_ACT_ALLOW") && !get(r, "args") &&
			    json_object_array_length(get(r, "names")) > 100)
				all = get(r, "names");
		}
		assert_non_null(all);
		for (const char *const *ok = (const char *const[]){ "read", "mmap", "futex", "mbind", "process_vm_readv", NULL }; *ok; ok++)
			assert_true(array_has(all, *ok));
		for (const char *const *no = (const char *const[]){ "mount", "umount2", "unshare", "setns", "keyctl", "bpf",
								  "init_module", "kexec_load", "open_by_handle_at", "io_uring_setup",
								  "clone", "clone3", "personality", NULL }; *no; no++)
			assert_false(array_has(all, *no));
	}

	ns = get(c, "linux.namespaces");
	for (size_t i = 0; i < json_object_array_length(ns); i++) {
		json_object *n = json_object_array_get_idx(ns, i);
		const char *t = json_object_get_string(get(n, "type"));
		static const char *const want[] = { "pid", "mount", "uts", "ipc", "network", "user" };

		for (int k = 0; k < 6; k++)
			if (!strcmp(t, want[k]))
				seen[k] = true;
		if (!strcmp(t, "network"))
			assert_string_equal(json_object_get_string(get(n, "path")), "/run/netns/vhpc-j1-3");
		else
			assert_null(get(n, "path"));
	}
	for (int k = 0; k < 6; k++)
		assert_true(seen[k]);
	assert_string_equal(json_object_get_string(get(c, "linux.cgroupsPath")), "/vhpc/j1/3");
	assert_string_equal(json_object_get_string(get(c, "linux.resources.cpu.cpus")), "1-2,5");
	assert_string_equal(json_object_get_string(get(c, "linux.resources.cpu.mems")), "0");
	assert_int_equal(json_object_get_int64(get(c, "linux.resources.memory.limit")), 256 << 20);
	assert_true(array_has(get(c, "linux.maskedPaths"), "/proc/kcore"));
	assert_true(array_has(get(c, "linux.readonlyPaths"), "/proc/sys"));
	assert_true(array_has(get(c, "linux.readonlyPaths"), "/proc/sysrq-trigger"));

	assert_true(array_has(get(mount_at(c, "/sys"), "options"), "ro"));
	assert_string_equal(json_object_get_string(get(mount_at(c, "/sys"), "source")), "/run/vhpc/jobs/j1/sys3");
	for (const char *const *d = (const char *const[]){ "/tmp", "/run", "/var/tmp", NULL }; *d; d++) {
		m = mount_at(c, *d);
		assert_non_null(m);
		assert_string_equal(json_object_get_string(get(m, "type")), "tmpfs");
		assert_true(array_has(get(m, "options"), "size=33554432"));
	}
	m = mount_at(c, "/run/vhpc/etc");
	assert_string_equal(json_object_get_string(get(m, "source")), "/etc");
	assert_true(array_has(get(m, "options"), "ro"));
	m = mount_at(c, "/opt");
	assert_true(array_has(get(m, "options"), "rw"));
	assert_null(mount_at(c, "/scratch"));
	json_object_put(c);

	/* --scratch: a tmpfs of that size, nosuid and nodev, writable by all. */
	s.scratch_size = 1ull << 30;
	assert_int_equal(na_oci_config(&s, "/bundle/rootfs", &c, &e), 0);
	m = mount_at(c, "/scratch");
	assert_non_null(m);
	assert_string_equal(json_object_get_string(get(m, "type")), "tmpfs");
	assert_true(array_has(get(m, "options"), "size=1073741824"));
	assert_true(array_has(get(m, "options"), "nosuid"));
	assert_true(array_has(get(m, "options"), "nodev"));
	assert_true(array_has(get(m, "options"), "mode=1777"));
	json_object_put(c);
}

/* A guest of a pod joins the pod's user and PID namespaces, makes the rest,
 * and keeps the one-id mapping (runc needs it to know its root). */
static void pod_guest_joins_user_and_pid_namespaces(void **state)
{
	struct na_ctr_spec s = spec();
	json_object *c, *ns;
	struct verr e;
	int joined = 0, made = 0;

	(void)state;
	s.pod = 4321;
	assert_int_equal(na_oci_config(&s, "/bundle/rootfs", &c, &e), 0);
	ns = get(c, "linux.namespaces");
	for (size_t i = 0; i < json_object_array_length(ns); i++) {
		json_object *n = json_object_array_get_idx(ns, i);
		const char *t = json_object_get_string(get(n, "type"));
		const char *path = json_object_get_string(get(n, "path"));

		if (!strcmp(t, "user") || !strcmp(t, "pid")) {
			char want[64];

			snprintf(want, sizeof(want), "/proc/4321/ns/%s", t);
			assert_non_null(path);
			assert_string_equal(path, want);
			joined++;
		} else if (!strcmp(t, "network")) {
			assert_string_equal(path, "/run/netns/vhpc-j1-3");
		} else {
			assert_null(path);
			made++;
		}
	}
	assert_int_equal(joined, 2);
	assert_int_equal(made, 4);
	assert_int_equal(json_object_array_length(get(c, "linux.uidMappings")), 1);
	json_object_put(c);
}

static int fill_netns(void *arg, int nsfd, struct verr *err)
{
	(void)arg; (void)nsfd; (void)err;
	return 0;
}

/* A guest with a netns of its own (checkpointable by CRIU): runc makes it,
 * after the user namespace and so inside it (no path), and mounts a sysfs
 * of it at /sys, read-only, instead of binding the agent's. */
static void own_netns_is_made_by_runc_with_its_sysfs(void **state)
{
	struct na_ctr_spec s = spec();
	json_object *c, *ns, *m;
	struct verr e;
	bool net = false, user_first;

	(void)state;
	s.own_netns = fill_netns;
	s.sysfs = NULL;
	assert_int_equal(na_oci_config(&s, "/bundle/rootfs", &c, &e), 0);
	ns = get(c, "linux.namespaces");
	user_first = !strcmp(json_object_get_string(get(json_object_array_get_idx(ns, 0), "type")), "user");
	assert_true(user_first);
	for (size_t i = 0; i < json_object_array_length(ns); i++) {
		json_object *n = json_object_array_get_idx(ns, i);

		assert_null(get(n, "path"));
		net |= !strcmp(json_object_get_string(get(n, "type")), "network");
	}
	assert_true(net);
	m = mount_at(c, "/sys");
	assert_non_null(m);
	assert_string_equal(json_object_get_string(get(m, "type")), "sysfs");
	assert_true(array_has(get(m, "options"), "ro"));
	assert_true(array_has(get(m, "options"), "nosuid"));
	assert_true(array_has(get(m, "options"), "noexec"));
	assert_true(array_has(get(m, "options"), "nodev"));
	json_object_put(c);
	/* A pod's guests join the pod's netns: both at once is refused. */
	s.pod = 4321;
	assert_int_equal(na_oci_config(&s, "/bundle/rootfs", &c, &e), -1);
	assert_non_null(strstr(e.msg, "pod"));
}

static void expect_refused(struct na_ctr_spec *s, const char *what)
{
	json_object *c = NULL;
	struct verr e;

	assert_int_equal(na_oci_config(s, "/bundle/rootfs", &c, &e), -1);
	assert_null(c);
	if (!strstr(e.msg, what))
		fail_msg("'%s' not in: %s", what, e.msg);
}

static void bad_specs_are_refused_with_reasons(void **state)
{
	struct na_ctr_spec s;
	struct na_placement none = { 0 };
	const char *noargv[] = { NULL };
	const char *badenv[] = { "NOEQUALS", NULL };
	char p[128];

	(void)state;
	s = spec(); s.job = "J-1";            expect_refused(&s, "job id");
	s = spec(); s.index = -1;             expect_refused(&s, "guest index");
	s = spec(); s.hostname = "a b";       expect_refused(&s, "hostname");
	s = spec(); s.hostname = "-x";        expect_refused(&s, "hostname");
	s = spec(); s.rootfs = "rel/path";    expect_refused(&s, "rootfs");
	s = spec(); s.rootfs = "/nonexistent"; expect_refused(&s, "rootfs");
	s = spec(); s.argv = noargv;          expect_refused(&s, "no init command");
	s = spec(); s.env = badenv;           expect_refused(&s, "NAME=VALUE");
	s = spec(); s.netns = "../x";         expect_refused(&s, "network namespace");
	s = spec(); s.place = &none;          expect_refused(&s, "placement");
	s = spec(); s.log_path = "log";       expect_refused(&s, "log path");
	s = spec(); binds[0].src = "/nonexistent"; expect_refused(&s, "source");
	s = spec(); binds[0].dst = "/run/../etc";  expect_refused(&s, "destination");
	s = spec(); binds[1].dst = "/usr/share";   expect_refused(&s, "does not exist in the read-only rootfs");
	snprintf(p, sizeof(p), "%s/scratch", root);
	assert_int_equal(rmdir(p), 0);
	s = spec(); s.scratch_size = 1u << 30; expect_refused(&s, "has no /scratch: rebuild it");
	assert_int_equal(mkdir(p, 0755), 0);

	/* a target inside an earlier read-only bind must exist in its source;
	 * inside a writable one runc can make it */
	s = spec(); binds[1] = (struct na_bind){ .src = "/tmp", .dst = "/run/vhpc/etc/nonexistent-dir" };
	expect_refused(&s, "the read-only source of bind mount 0");
	s = spec(); binds[0].ro = false; binds[1] = (struct na_bind){ .src = "/tmp", .dst = "/run/vhpc/etc/nonexistent-dir" };
	{
		json_object *c;
		struct verr e;

		assert_int_equal(na_oci_config(&s, "/bundle/rootfs", &c, &e), 0);
		json_object_put(c);
	}
	s = spec(); binds[0] = (struct na_bind){ .src = "/etc", .dst = "/opt", .ro = true };
	binds[1] = (struct na_bind){ .src = "/tmp", .dst = "/opt/default" };   /* /etc/default exists */
	{
		json_object *c;
		struct verr e;

		if (na_oci_config(&s, "/bundle/rootfs", &c, &e) < 0)
			fail_msg("%s", e.msg);
		json_object_put(c);
	}

	snprintf(p, sizeof(p), "%s/var/tmp", root);
	rmdir(p);
	s = spec();
	expect_refused(&s, "has no /var/tmp");
	mkdir(p, 0755);
}

/* A guest on the fabric gets its own RDMA device nodes and nothing more:
 * each made at its host path and allowed by one rule of its own, after the
 * rule that denies every device. */
static void fabric_devices_are_the_only_ones_allowed(void **state)
{
	struct na_chardev devs[2] = { { "/dev/infiniband/uverbs3", makedev(231, 195) },
				      { "/dev/infiniband/rdma_cm", makedev(10, 58) } };
	struct na_ctr_spec s = spec();
	json_object *c, *d, *r;
	struct verr e;

	(void)state;
	assert_int_equal(na_oci_config(&s, "/bundle/rootfs", &c, &e), 0);
	assert_null(get(c, "linux.devices"));
	assert_int_equal(json_object_array_length(get(c, "linux.resources.devices")), 1);
	json_object_put(c);

	s.devices = devs;
	s.ndevices = 2;
	assert_int_equal(na_oci_config(&s, "/bundle/rootfs", &c, &e), 0);
	d = get(c, "linux.devices");
	assert_int_equal(json_object_array_length(d), 2);
	assert_string_equal(json_object_get_string(get(json_object_array_get_idx(d, 0), "path")), "/dev/infiniband/uverbs3");
	assert_string_equal(json_object_get_string(get(json_object_array_get_idx(d, 0), "type")), "c");
	assert_int_equal(json_object_get_int(get(json_object_array_get_idx(d, 0), "major")), 231);
	assert_int_equal(json_object_get_int(get(json_object_array_get_idx(d, 0), "minor")), 195);
	assert_string_equal(json_object_get_string(get(json_object_array_get_idx(d, 1), "path")), "/dev/infiniband/rdma_cm");
	r = get(c, "linux.resources.devices");
	assert_int_equal(json_object_array_length(r), 3);
	assert_false(json_object_get_boolean(get(json_object_array_get_idx(r, 0), "allow")));
	for (int i = 1; i < 3; i++) {
		json_object *x = json_object_array_get_idx(r, i);

		assert_true(json_object_get_boolean(get(x, "allow")));
		assert_string_equal(json_object_get_string(get(x, "type")), "c");
		assert_string_equal(json_object_get_string(get(x, "access")), "rw");
		assert_int_equal(json_object_get_int(get(x, "major")), i == 1 ? 231 : 10);
		assert_int_equal(json_object_get_int(get(x, "minor")), i == 1 ? 195 : 58);
	}
	json_object_put(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(config_isolates_and_applies_placement),
		cmocka_unit_test(bad_specs_are_refused_with_reasons),
		cmocka_unit_test(pod_guest_joins_user_and_pid_namespaces),
		cmocka_unit_test(own_netns_is_made_by_runc_with_its_sysfs),
		cmocka_unit_test(fabric_devices_are_the_only_ones_allowed),
	};

	vlog_init("test-oci");
	vlog_set_level(VLOG_ERR);
	return cmocka_run_group_tests(tests, setup, teardown);
}
