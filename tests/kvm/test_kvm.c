/*
 * The kvm driver's pure parts: the guest kernel's command line (and that
 * vhpc-guestd accepts exactly it), vhpc-hv's command line from placement and
 * image, NUMA splits, the hugepage plan, exit words, the config disk's
 * files and the disk itself, the vmshm region's BAR size.
 */
#include "lib/argv.h"
#include "lib/chan.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/tuning.h"
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "nodeagent/drivers/kvm/kvm_int.h"
#include "guest/internal.h"   /* guest/: vhpc-guestd's option parser */

static const struct na_kvm_fds fds5 = NA_KVM_FDS_NONE(5);
static const struct na_kvm_fds fds_notap = NA_KVM_FDS_NONE(-1);

static struct image_info img;

static int setup(void **state)
{
	(void)state;
	memset(&img, 0, sizeof(img));
	img.kvm = true;
	snprintf(img.name, sizeof(img.name), "default");
	/* No vmlinux on disk: the bzImage is what boots. */
	snprintf(img.kernel, sizeof(img.kernel), "/img/kvm/vmlinuz");
	snprintf(img.vmlinux, sizeof(img.vmlinux), "/nonexistent/kvm/vmlinux");
	snprintf(img.initrd, sizeof(img.initrd), "/img/kvm/initramfs.img");
	snprintf(img.disk, sizeof(img.disk), "/img/kvm/rootfs.ext4");
	return 0;
}

static struct na_kvm_spec spec(const struct na_placement *p)
{
	struct na_kvm_spec s = {
		.job = "ab12", .index = 1, .name = "g1", .img = &img, .place = p,
		.mem = 512ull << 20, .addr = 0x0ad50003, .prefix = 24, .mtu = 9000,
		.guest_port = 7707, .config_disk = "/run/vhpc/jobs/ab12/config.ext4",
		.hv_path = "/usr/bin/vhpc-hv",
	};
	return s;
}

static char *joined(char **argv)
{
	static char buf[8192];

	buf[0] = 0;
	for (char **a = argv; *a; a++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", a == argv ? "" : "|", *a);
	return buf;
}

static void cmdline_carries_identity_and_guestd_takes_it(void **state)
{
	struct na_placement p = { .ncpus = 2, .cpus = { 3, 1 }, .nmems = 1, .mems = { 0 } };
	struct na_kvm_spec s = spec(&p);
	struct gd_opts o;
	char cl[1024];
	struct verr e;

	(void)state;
	assert_int_equal(na_kvm_cmdline(&s, cl, sizeof(cl), &e), 0);
	assert_string_equal(cl, "console=ttyS0 quiet panic=-1 vhpc.name=g1 vhpc.job=ab12 vhpc.index=1 "
			    "vhpc.addr=10.213.0.3/24 vhpc.mtu=9000 vhpc.listen=vsock:7707 "
			    "vhpc.listen=10.213.0.3:7707");
	/* What the guest agent makes of it: the init's words are not errors. */
	gd_opts_defaults(&o);
	assert_int_equal(gd_opts_apply_cmdline(&o, cl, "/proc/cmdline", &e), 0);
	assert_string_equal(o.name, "g1");
	assert_int_equal(o.nlisten, 2);
	assert_int_equal(o.listen[0].kind, GD_LISTEN_VSOCK);
	assert_int_equal(o.listen[0].vsock_port, 7707);
	assert_int_equal(o.listen[1].kind, GD_LISTEN_TCP);
	assert_string_equal(o.listen[1].host, "10.213.0.3");
	assert_string_equal(o.listen[1].port, "7707");
	/* A word neither the init nor guestd knows is still an error. */
	assert_int_equal(gd_opts_apply_cmdline(&o, "vhpc.adr=1", "/proc/cmdline", &e), -1);
	/* vhpc.scratch is the init's. */
	s.scratch_disk = "/run/vhpc/jobs/ab12/scratch1.ext4";
	assert_int_equal(na_kvm_cmdline(&s, cl, sizeof(cl), &e), 0);
	assert_non_null(strstr(cl, "vhpc.listen=10.213.0.3:7707 vhpc.scratch=1"));
	gd_opts_defaults(&o);
	assert_int_equal(gd_opts_apply_cmdline(&o, cl, "/proc/cmdline", &e), 0);
	s.scratch_disk = NULL;
	/* A compact image: its file system's type for the init, not guestd's. */
	snprintf(img.format, sizeof(img.format), "squashfs");
	snprintf(img.blob, sizeof(img.blob), "/img/rootfs.squashfs");
	assert_int_equal(na_kvm_cmdline(&s, cl, sizeof(cl), &e), 0);
	assert_non_null(strstr(cl, "vhpc.listen=10.213.0.3:7707 vhpc.rootfs=squashfs"));
	gd_opts_defaults(&o);
	assert_int_equal(gd_opts_apply_cmdline(&o, cl, "/proc/cmdline", &e), 0);
	img.blob[0] = 0;
	assert_int_equal(na_kvm_cmdline(&s, cl, sizeof(cl), &e), 0);
	assert_null(strstr(cl, "vhpc.rootfs"));
	/* Never the job key. */
	assert_null(strstr(cl, "key"));

	s.emulated = true;
	assert_int_equal(na_kvm_cmdline(&s, cl, sizeof(cl), &e), 0);
	assert_non_null(strstr(cl, "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1 "));
	assert_int_equal(na_kvm_cmdline(&s, cl, 40, &e), -1);
	assert_non_null(strstr(e.msg, "longer than 39 bytes"));

	/* A site's extra kernel parameters go last, never over vhpc's. */
	s.emulated = false;
	setenv("VHPC_KVM_APPEND", "lapic=notscdeadline nokaslr", 1);
	assert_int_equal(na_kvm_cmdline(&s, cl, sizeof(cl), &e), 0);
	assert_non_null(strstr(cl, "vhpc.listen=10.213.0.3:7707 lapic=notscdeadline nokaslr"));
	setenv("VHPC_KVM_APPEND", "quiet vhpc.name=evil", 1);
	assert_int_equal(na_kvm_cmdline(&s, cl, sizeof(cl), &e), -1);
	assert_non_null(strstr(e.msg, "would override vhpc's own kernel parameters"));
	setenv("VHPC_KVM_APPEND", "a\nb", 1);
	assert_int_equal(na_kvm_cmdline(&s, cl, sizeof(cl), &e), -1);
	assert_non_null(strstr(e.msg, "0x0a at offset 1 is not printable"));
	unsetenv("VHPC_KVM_APPEND");
}

static void argv_from_placement_and_image(void **state)
{
	struct na_placement p = { .ncpus = 2, .cpus = { 3, 1 }, .nmems = 1, .mems = { 1 } };
	struct na_kvm_spec s = spec(&p);
	char **argv;
	struct verr e;

	(void)state;
	s.hugepages = true;
	s.vmshm = "/dev/shm/vhpc-ab12-vmshm";
	assert_int_equal(na_kvm_argv(&s, "/run/vhpc/jobs/ab12/kvm1", &fds5, &argv, &e), 0);
	assert_string_equal(joined(argv),
		"/usr/bin/vhpc-hv|--kernel|/img/kvm/vmlinuz|--initrd|/img/kvm/initramfs.img|"
		"--cmdline|console=ttyS0 quiet panic=-1 vhpc.name=g1 vhpc.job=ab12 vhpc.index=1 vhpc.addr=10.213.0.3/24 "
		"vhpc.mtu=9000 vhpc.listen=vsock:7707 vhpc.listen=10.213.0.3:7707|"
		"--vcpus|2|--mem|512M|--cpu-affinity|3,1|--host-node|1|--hugepages=2M|--require-hw|"
		"--serial|file:/run/vhpc/jobs/ab12/kvm1/serial|--control|/run/vhpc/jobs/ab12/kvm1/ctl|"
		"--shm|path=/dev/shm/vhpc-ab12-vmshm|"
		"--blk|path=/img/kvm/rootfs.ext4,ro,serial=vhpc-root|"
		"--blk|path=/run/vhpc/jobs/ab12/config.ext4,ro,serial=vhpc-config|"
		"--net|fd=5,mac=52:54:0a:d5:00:03,mtu=9000|"
		"--vsock|cid=4,uds=/run/vhpc/jobs/ab12/kvm1/vsock|"
		"--console|file:/run/vhpc/jobs/ab12/kvm1/console|--seccomp");
	argv_free(argv);

	/* Files passed open: each as /dev/fd/N, the paths nowhere. */
	{
		struct na_kvm_fds f = { .tap = 5, .kernel = 6, .initrd = 7, .root = 8, .config = 9,
					.scratch = -1, .vmshm = 10, .vhost = 11 };

		assert_int_equal(na_kvm_argv(&s, "/run/vhpc/jobs/ab12/kvm1", &f, &argv, &e), 0);
		assert_non_null(strstr(joined(argv), "|--kernel|/dev/fd/6|--initrd|/dev/fd/7|"));
		assert_non_null(strstr(joined(argv), "|--shm|path=/dev/fd/10|--blk|path=/dev/fd/8,ro,serial=vhpc-root|"
					      "--blk|path=/dev/fd/9,ro,serial=vhpc-config|--net|fd=5,"));
		assert_null(strstr(joined(argv), "/img/"));
		/* /dev/vhost-net, opened by the agent: the NIC's kernel data path. */
		assert_non_null(strstr(joined(argv), "|--net|fd=5,mac=52:54:0a:d5:00:03,mtu=9000,vhostfd=11|"));
		argv_free(argv);
	}

	/* A scratch disk: read-write, after the read-only ones, and the init
	 * told to wait for it. */
	s.scratch_disk = "/run/vhpc/jobs/ab12/scratch1.ext4";
	assert_int_equal(na_kvm_argv(&s, "/run/vhpc/jobs/ab12/kvm1", &fds5, &argv, &e), 0);
	assert_non_null(strstr(joined(argv), "serial=vhpc-config|--blk|path=/run/vhpc/jobs/ab12/scratch1.ext4,serial=vhpc-scratch|--net|"));
	assert_non_null(strstr(joined(argv), " vhpc.listen=10.213.0.3:7707 vhpc.scratch=1|"));
	argv_free(argv);
	s.scratch_disk = "/run/a,ro/scratch1.ext4";
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), -1);
	assert_non_null(strstr(e.msg, "scratch disk"));
	s.scratch_disk = NULL;

	/* Emulated: no --require-hw, CPUID features the emulator lacks hidden. */
	s.hugepages = false;
	s.vmshm = NULL;
	s.emulated = true;
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), 0);
	assert_non_null(strstr(joined(argv), "|--host-node|1|--cpuid-hide|cx16,xsave|--serial|"));
	assert_null(strstr(joined(argv), "require-hw"));
	assert_null(strstr(joined(argv), "hugepages"));
	assert_null(strstr(joined(argv), "--shm"));
	argv_free(argv);

	/* VHPC_KVM_PREFAULT=0 (the nested lab): no prefault, except with
	 * hugepages, whose pool must be found short at start. */
	s.emulated = false;
	setenv("VHPC_KVM_PREFAULT", "0", 1);
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), 0);
	assert_non_null(strstr(joined(argv), "|--host-node|1|--no-prefault|--require-hw|"));
	argv_free(argv);
	s.hugepages = true;
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), 0);
	assert_null(strstr(joined(argv), "prefault"));
	argv_free(argv);
	s.hugepages = false;
	setenv("VHPC_KVM_PREFAULT", "1", 1);
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), 0);
	assert_null(strstr(joined(argv), "prefault"));
	argv_free(argv);
	setenv("VHPC_KVM_PREFAULT", "no", 1);
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), -1);
	assert_string_equal(e.msg, "VHPC_KVM_PREFAULT: expected 0 or 1, got 'no'");
	unsetenv("VHPC_KVM_PREFAULT");
}

static void argv_prefers_the_pvh_kernel(void **state)
{
	struct na_placement p = { .ncpus = 1, .cpus = { 0 }, .nmems = 1, .mems = { 0 } };
	struct na_kvm_spec s = spec(&p);
	char dir[64], **argv;
	struct verr e;
	int fd;

	(void)state;
	assert_int_equal(fx_tmpdir(dir, sizeof(dir), "kvmt"), 0);
	snprintf(img.vmlinux, sizeof(img.vmlinux), "%s/vmlinux", dir);
	fd = open(img.vmlinux, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), 0);
	assert_string_equal(argv[1], "--kernel");
	assert_string_equal(argv[2], img.vmlinux);
	argv_free(argv);
	unlink(img.vmlinux);
	fx_rmdir(dir);
	setup(NULL);
}

static void split_guest_gets_a_node_per_host_node(void **state)
{
	struct na_placement p = { .ncpus = 3, .cpus = { 0, 1, 8 }, .nmems = 2, .mems = { 0, 1 }, .split = true };
	int cpu_node[3] = { 0, 0, 1 };
	struct na_kvm_spec s = spec(&p);
	char **argv;
	struct verr e;

	(void)state;
	s.mem = 1024ull << 20;
	s.cpu_node = cpu_node;
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), 0);
	/* Memory in proportion to the vCPUs, in 2 MiB units; the last node
	 * takes what is left. */
	assert_non_null(strstr(joined(argv), "|--cpu-affinity|0,1,8|--numa|mem=682M,cpus=0-1,host-node=0|"
					      "--numa|mem=342M,cpus=2,host-node=1|"));
	assert_null(strstr(joined(argv), "--host-node"));
	argv_free(argv);

	/* Interleaved nodes keep each vCPU with its node. */
	int il[3] = { 1, 0, 1 };
	s.cpu_node = il;
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), 0);
	assert_non_null(strstr(joined(argv), "|--numa|mem=682M,cpus=0,2,host-node=1|--numa|mem=342M,cpus=1,host-node=0|"));
	argv_free(argv);

	/* Too little memory to split. */
	s.mem = 128ull << 20;
	struct na_placement many = { .ncpus = 100, .nmems = 1 };
	int nodes[100];
	for (int i = 0; i < 100; i++) {
		many.cpus[i] = i;
		nodes[i] = i % 8;
	}
	s.place = &many;
	s.cpu_node = nodes;
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), 0);   /* 8 nodes x 16 MiB fit */
	argv_free(argv);
	for (int i = 0; i < 100; i++)
		nodes[i] = i % 9;
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), -1);
	assert_non_null(strstr(e.msg, "more than 8 NUMA nodes"));
}

static void bad_specs_say_what_is_wrong(void **state)
{
	struct na_placement p = { .ncpus = 1, .cpus = { 0 }, .nmems = 1, .mems = { 0 } };
	struct na_kvm_spec s;
	char **argv, longdir[200];
	struct verr e;

	(void)state;
#define BAD(expect) do { \
		assert_int_equal(na_kvm_argv(&s, "/run/j", &fds5, &argv, &e), -1); \
		assert_null(argv); \
		if (!strstr(e.msg, expect)) fail_msg("'%s' not in '%s'", expect, e.msg); \
	} while (0)
	s = spec(&p); s.mem = 64ull << 20;
	BAD("64 MiB of memory; a kvm guest needs at least 128 MiB");
	s = spec(&p); s.mem = (512ull << 20) + 4096;
	BAD("whole MiB");
	s = spec(&p); s.hugepages = true; s.mem = 513ull << 20;
	BAD("whole 2 MiB pages");
	s = spec(&p); s.job = "AB-12";
	BAD("job id 'AB-12'");
	s = spec(&p); s.name = "g 1";
	BAD("name 'g 1' is not a host name");
	s = spec(&p); s.mtu = 40;
	BAD("MTU 40");
	s = spec(&p); s.guest_port = 0;
	BAD("port 0");
	s = spec(&p); s.config_disk = "/run/a,b/config.ext4";
	BAD("a path with a comma");
	s = spec(&p); s.config_disk = NULL;
	BAD("config disk: no path");
	/* Found after the argv was begun: what was built is freed (ASan). */
	s = spec(&p); s.nfs = NA_KVM_MAX_FS + 1;
	BAD("shared folders: a kvm guest has at most");
	setenv("VHPC_KVM_PREFAULT", "", 1);
	s = spec(&p);
	BAD("VHPC_KVM_PREFAULT: expected 0 or 1, got ''");
	unsetenv("VHPC_KVM_PREFAULT");
	struct na_placement none = { 0 };
	s = spec(&none);
	BAD("a placement with 1..256 CPUs");
	struct image_info plain = img;
	plain.kvm = false;
	s = spec(&p); s.img = &plain;
	BAD("image default has no kvm parts");
	s = spec(&p);
	memset(longdir, 'd', sizeof(longdir) - 1);
	longdir[0] = '/';
	longdir[100] = 0;
	assert_int_equal(na_kvm_argv(&s, longdir, &fds5, &argv, &e), -1);
	assert_non_null(strstr(e.msg, "too long for the guest's vsock socket names"));
	assert_int_equal(na_kvm_argv(&s, "/run/j", &fds_notap, &argv, &e), -1);
	assert_non_null(strstr(e.msg, "no tap"));
#undef BAD
}

static void hugepages_only_where_the_pool_holds_them(void **state)
{
	struct na_numa_info nodes[2] = { { .os_index = 0, .hugepages_2m_free = 300 },
					 { .os_index = 1, .hugepages_2m_free = 0 } };
	struct na_placement p[3] = {
		{ .ncpus = 1, .cpus = { 0 }, .nmems = 1, .mems = { 0 } },
		{ .ncpus = 1, .cpus = { 1 }, .nmems = 1, .mems = { 0 } },
		{ .ncpus = 1, .cpus = { 2 }, .nmems = 1, .mems = { 1 } },
	};
	bool use[3];

	(void)state;
	na_kvm_plan_hugepages(nodes, 2, p, 3, 512ull << 20, use);
	assert_true(use[0]);      /* 256 of 300 pages */
	assert_false(use[1]);     /* 44 left */
	assert_false(use[2]);     /* node 1 has none */
	na_kvm_plan_hugepages(nodes, 2, p, 2, 64ull << 20, use);
	assert_true(use[0] && use[1]);
	/* Not whole 2 MiB pages. */
	na_kvm_plan_hugepages(nodes, 2, p, 1, (64ull << 20) + (1 << 20), use);
	assert_false(use[0]);
}

static void exit_statuses_in_words(void **state)
{
	char buf[160];

	(void)state;
	assert_string_equal(na_kvm_exit_words(4 << 8, buf, sizeof(buf)),
			    "vhpc-hv exited with status 4: triple fault or KVM internal error");
	assert_string_equal(na_kvm_exit_words(0, buf, sizeof(buf)), "vhpc-hv exited with status 0: the guest powered off");
	assert_string_equal(na_kvm_exit_words(3 << 8, buf, sizeof(buf)),
			    "vhpc-hv exited with status 3: the guest reset (a kernel panic, or a reboot)");
	assert_string_equal(na_kvm_exit_words(6 << 8, buf, sizeof(buf)),
			    "vhpc-hv exited with status 6: no hardware virtualization");
	assert_string_equal(na_kvm_exit_words(7 << 8, buf, sizeof(buf)),
			    "vhpc-hv exited with status 7: a system call outside its seccomp allowlist (hv.log names it)");
	assert_string_equal(na_kvm_exit_words(66 << 8, buf, sizeof(buf)),
			    "vhpc-hv exited with status 66: test-guest debug exit 2");
	assert_string_equal(na_kvm_exit_words(40 << 8, buf, sizeof(buf)), "vhpc-hv exited with status 40");
	assert_non_null(strstr(na_kvm_exit_words(9, buf, sizeof(buf)), "killed by signal 9 (Killed)"));
}

static void env_and_sysctl_files(void **state)
{
	const char *env[] = { "PATH=/usr/bin:/bin", "VHPC_JOB=ab12", "EMPTY=", "X=a b=c", NULL };
	const char *bad1[] = { "1X=1", NULL }, *bad2[] = { "A-B=1", NULL }, *bad3[] = { "A=1\nB=2", NULL },
		   *bad4[] = { "NOVALUE", NULL };
	char *keys[] = { "net.ipv4.tcp_adv_win_scale", "net.core.somaxconn" }, *vals[] = { "1", "4096" };
	struct tuning t = { .name = "hpc", .sysctl = { .key = keys, .val = vals, .n = 2 } };
	char *text;
	struct verr e;

	(void)state;
	assert_int_equal(na_kvm_env_text(env, &text, &e), 0);
	assert_string_equal(text, "PATH=/usr/bin:/bin\nVHPC_JOB=ab12\nEMPTY=\nX=a b=c\n");
	free(text);
	assert_int_equal(na_kvm_env_text(bad1, &text, &e), -1);
	assert_non_null(strstr(e.msg, "'1X=1': expected NAME=VALUE on one line"));
	assert_int_equal(na_kvm_env_text(bad2, &text, &e), -1);
	assert_int_equal(na_kvm_env_text(bad3, &text, &e), -1);
	assert_int_equal(na_kvm_env_text(bad4, &text, &e), -1);
	assert_int_equal(na_kvm_sysctl_text(&t, &text, &e), 0);
	assert_string_equal(text, "net.ipv4.tcp_adv_win_scale = 1\nnet.core.somaxconn = 4096\n");
	free(text);
	keys[1] = "kernel.panic";
	assert_int_equal(na_kvm_sysctl_text(&t, &text, &e), -1);
	assert_non_null(strstr(e.msg, "sysctl 'kernel.panic' cannot go into a guest's sysctl.conf"));
	vals[0] = "1\nkernel.panic=0";
	keys[1] = "net.core.somaxconn";
	assert_int_equal(na_kvm_sysctl_text(&t, &text, &e), -1);
}

static char *sh(const char *cmd)
{
	static char out[8192];
	FILE *f = popen(cmd, "r");
	size_t n;

	assert_non_null(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	pclose(f);
	return out;
}

static void config_disk_holds_the_job_files(void **state)
{
	char run[64], src[128], path[512], cmd[1024];
	const char *env[] = { "VHPC_JOB=ab12", "VHPC_VMSHM_PATH=/run/vhpc-vmshm", NULL };
	char *keys[] = { "net.ipv4.tcp_adv_win_scale" }, *vals[] = { "1" };
	struct tuning t = { .name = "hpc", .sysctl = { .key = keys, .val = vals, .n = 1 } };
	struct na_jobdir jd;
	uint8_t key[CHAN_KEY_LEN];
	struct stat st;
	struct verr e;

	(void)state;
	assert_int_equal(fx_tmpdir(run, sizeof(run), "kvmt"), 0);
	setenv("VHPC_RUN_DIR", run, 1);
	assert_int_equal(na_jobdir_create(&jd, "kvmt1", &e), 0);
	snprintf(src, sizeof(src), "%s/shared", jd.path);
	assert_int_equal(mkdir(src, 0755), 0);
	snprintf(path, sizeof(path), "%s/job.key", src);
	assert_int_equal(chan_key_create(path, key, &e), 0);
	snprintf(path, sizeof(path), "%s/hosts", src);
	assert_int_equal(write_file(path, "10.213.0.2 g0\n", 14, 0644, &e), 0);
	assert_int_equal(na_kvm_config_disk(&jd, src, env, &t, path, sizeof(path), &e), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);       /* it holds the key */
	snprintf(cmd, sizeof(cmd), "e2fsck -fn '%s' >/dev/null 2>&1 && echo clean", path);
	assert_string_equal(sh(cmd), "clean\n");
	snprintf(cmd, sizeof(cmd), "debugfs -R 'stat /job.key' '%s' 2>/dev/null | grep -o 'Mode: *[0-7]*'", path);
	assert_string_equal(sh(cmd), "Mode:  0600\n");
	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /env' '%s' 2>/dev/null", path);
	assert_string_equal(sh(cmd), "VHPC_JOB=ab12\nVHPC_VMSHM_PATH=/run/vhpc-vmshm\n");
	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /sysctl.conf' '%s' 2>/dev/null", path);
	assert_string_equal(sh(cmd), "net.ipv4.tcp_adv_win_scale = 1\n");
	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /hosts' '%s' 2>/dev/null", path);
	assert_string_equal(sh(cmd), "10.213.0.2 g0\n");
	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /job.key' '%s' 2>/dev/null | wc -c", path);
	assert_string_equal(sh(cmd), "65\n");   /* 64 hex digits and a newline */
	/* A second disk for the same job is refused, not overwritten. */
	assert_int_equal(na_kvm_config_disk(&jd, src, env, &t, path, sizeof(path), &e), -1);
	assert_non_null(strstr(e.msg, "config.ext4"));
	assert_int_equal(na_jobdir_remove(&jd, &e), 0);
	assert_int_equal(fx_rmdir(run), 0);
	unsetenv("VHPC_RUN_DIR");
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static void scratch_disk_is_an_unnamed_reserved_ext4(void **state)
{
	char top[64], dir[128], cmd[1024], self[64];
	struct stat st;
	struct verr e;
	int fd;

	(void)state;
	assert_int_equal(fx_tmpdir(top, sizeof(top), "kvmt"), 0);
	snprintf(dir, sizeof(dir), "%s/scratch", top);
	/* The folder is made; the disk has no name in it. */
	assert_int_equal(na_kvm_scratch_disk(dir, 64ull << 20, &fd, &e), 0);
	assert_int_equal(entries(dir), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, 64ll << 20);
	/* Its room is reserved, not sparse. */
	assert_true((uint64_t)st.st_blocks * 512 >= (64ull << 20));
	snprintf(self, sizeof(self), "/proc/%d/fd/%d", (int)getpid(), fd);
	snprintf(cmd, sizeof(cmd), "e2fsck -fn '%s' >/dev/null 2>&1 && echo clean", self);
	assert_string_equal(sh(cmd), "clean\n");
	snprintf(cmd, sizeof(cmd), "dumpe2fs -h '%s' 2>/dev/null | sed -n 's/^Filesystem volume name: *//p'", self);
	assert_string_equal(sh(cmd), "vhpc-scratch\n");
	snprintf(cmd, sizeof(cmd), "debugfs -R 'ls -l /' '%s' 2>/dev/null | grep -c lost+found", self);
	assert_string_equal(sh(cmd), "1\n");   /* empty apart from lost+found */
	close(fd);
	assert_int_equal(na_kvm_scratch_disk(dir, 1u << 20, &fd, &e), -1);
	assert_non_null(strstr(e.msg, "outside 16M..64T"));
	/* A folder where others could place names is refused. */
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(na_kvm_scratch_disk(dir, 16ull << 20, &fd, &e), -1);
	assert_non_null(strstr(e.msg, "writable by root only (it is uid 0, mode 777)"));
	assert_int_equal(chmod(dir, 0700), 0);
	assert_int_equal(chown(dir, 65534, 65534), 0);
	assert_int_equal(na_kvm_scratch_disk(dir, 16ull << 20, &fd, &e), -1);
	assert_non_null(strstr(e.msg, "must be root's"));
	assert_int_equal(chown(dir, 0, 0), 0);
	/* A folder without the room refuses the disk at once, by name. */
	assert_int_equal(mount("vhpc-kvmt", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,mode=0700"), 0);
	assert_int_equal(na_kvm_scratch_disk(dir, 16ull << 20, &fd, &e), -1);
	umount2(dir, MNT_DETACH);
	assert_non_null(strstr(e.msg, "(the scratch folder has no room for it)"));
	assert_non_null(strstr(e.msg, dir));
	assert_int_equal(fx_rmdir(top), 0);
}

/* The cluster file's scratch_dir, else <state dir>/scratch. */
static void scratch_dir_from_the_cluster_file(void **state)
{
	char top[64], cl[128], want[160], dir[512];
	FILE *f;
	struct verr e;

	(void)state;
	assert_int_equal(fx_tmpdir(top, sizeof(top), "kvmt"), 0);
	snprintf(cl, sizeof(cl), "%s/cluster.yaml", top);
	assert_non_null(f = fopen(cl, "w"));
	fprintf(f, "name: t\njob_network:\n  pool: 10.213.0.0/16\n  prefix: 24\n");
	fclose(f);
	setenv("VHPC_CLUSTER", cl, 1);
	setenv("VHPC_STATE_DIR", top, 1);
	snprintf(want, sizeof(want), "%s/scratch", top);
	assert_int_equal(na_kvm_scratch_dir(dir, sizeof(dir), &e), 0);
	assert_string_equal(dir, want);
	assert_non_null(f = fopen(cl, "a"));
	fprintf(f, "scratch_dir: /srv/local/vhpc-scratch\n");
	fclose(f);
	assert_int_equal(na_kvm_scratch_dir(dir, sizeof(dir), &e), 0);
	assert_string_equal(dir, "/srv/local/vhpc-scratch");
	unsetenv("VHPC_CLUSTER");
	unsetenv("VHPC_STATE_DIR");
	assert_int_equal(fx_rmdir(top), 0);
}

static void vmshm_region_grows_to_a_power_of_two(void **state)
{
	char path[] = "/tmp/vhpc-kvmt-shm-XXXXXX";
	int fd = mkstemp(path);
	uint64_t size;
	struct stat st;
	struct verr e;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4300000), 0);
	assert_int_equal(pwrite(fd, "x", 1, 4299999), 1);
	assert_int_equal(na_kvm_vmshm_fit(path, &size, &e), 0);
	assert_int_equal(size, 8u << 20);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 8 << 20);
	assert_int_equal(na_kvm_vmshm_fit(path, &size, &e), 0);
	assert_int_equal(size, 8u << 20);
	close(fd);
	unlink(path);
	assert_int_equal(na_kvm_vmshm_fit(path, &size, &e), -1);
	assert_non_null(strstr(e.msg, path));
}

static void cpu_nodes_from_the_topology(void **state)
{
	struct na_topo *t;
	struct na_place_req r = { .nguests = 2, .vcpus = 2, .mem = 1ull << 30 };
	struct na_placement p[2];
	int nodes[VHPC_MAX_VCPUS];
	struct verr e;

	(void)state;
	assert_int_equal(na_topo_load(&t, "synthetic:numa:2 core:2 pu:2", &e), 0);
	assert_int_equal(na_place(t, &r, p, &e), 0);
	for (int g = 0; g < 2; g++) {
		assert_int_equal(na_topo_cpu_nodes(t, &p[g], nodes, &e), 0);
		for (int k = 0; k < p[g].ncpus; k++)
			assert_int_equal(nodes[k], p[g].mems[0]);
	}
	assert_int_not_equal(p[0].mems[0], p[1].mems[0]);
	p[0].cpus[0] = 99;
	assert_int_equal(na_topo_cpu_nodes(t, &p[0], nodes, &e), -1);
	assert_non_null(strstr(e.msg, "CPU 99"));
	na_topo_free(t);
}

/* A PCI address is a job's word: only DDDD:BB:DD.F in lower-case hex is
 * ever used as a name in sysfs (kvm_vfio.c). */
static void pci_addresses_are_plain(void **state)
{
	const char *good[] = { "0000:00:05.0", "0000:01:00.0", "ffff:ff:1f.7", "0001:3a:00.1" };
	const char *bad[] = { "", "0000:00:05", "0000:00:05.8", "0000:00:20.0", "0000:00:05.0/", "../../../dev/sda",
			      "0000:00:05.0/../../../0000:00:06.0", "0000:00:05.A", "0000:00:05.0 ", " 0000:00:05.0",
			      "0000.00:05.0", "0000:00:05:0", "00000:00:05.0", "0000:00:0g.0", "0000:00:05.0\n",
			      "x000:00:05.0" };

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(kvm_vfio_addr_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (kvm_vfio_addr_ok(bad[i]))
			fail_msg("'%s' was taken for a PCI address", bad[i]);
	assert_false(kvm_vfio_addr_ok(NULL));
}

/* A guest with a function goes to the function's NUMA node by trading
 * places with a guest of the job that has none. */
static void guest_with_a_function_goes_to_its_node(void **state)
{
	struct na_placement p[3] = {
		{ .ncpus = 1, .cpus = { 0 }, .nmems = 1, .mems = { 0 } },
		{ .ncpus = 1, .cpus = { 8 }, .nmems = 1, .mems = { 1 } },
		{ .ncpus = 1, .cpus = { 9 }, .nmems = 1, .mems = { 1 } },
	};
	int cpu_node[3 * VHPC_MAX_VCPUS] = { 0 }, npci[3] = { 1, 1, 0 };

	(void)state;
	cpu_node[VHPC_MAX_VCPUS] = 1;
	cpu_node[2 * VHPC_MAX_VCPUS] = 1;
	/* g0 (node 0) has a function on node 1: g1 has one too, g2 none. */
	assert_int_equal(kvm_vfio_place_near(p, cpu_node, npci, 3, 0, 1), 2);
	assert_int_equal(p[0].mems[0], 1);
	assert_int_equal(p[0].cpus[0], 9);
	assert_int_equal(cpu_node[0], 1);
	assert_int_equal(p[2].mems[0], 0);
	assert_int_equal(p[2].cpus[0], 0);
	assert_int_equal(cpu_node[2 * VHPC_MAX_VCPUS], 0);
	/* Already there, node unknown, nobody to trade with: unchanged. */
	assert_int_equal(kvm_vfio_place_near(p, cpu_node, npci, 3, 1, 1), -1);
	assert_int_equal(kvm_vfio_place_near(p, cpu_node, npci, 3, 0, -1), -1);
	npci[2] = 1;
	assert_int_equal(kvm_vfio_place_near(p, cpu_node, npci, 3, 2, 1), -1);
	assert_int_equal(p[2].mems[0], 0);
}

/* --vfio for each function, with the descriptors na_kvm_start passes. */
static void vfio_functions_on_the_command_line(void **state)
{
	struct na_placement p = { .ncpus = 1, .cpus = { 2 }, .nmems = 1, .mems = { 0 } };
	struct na_kvm_spec s = spec(&p);
	const char *pci[] = { "0000:01:00.0", "0000:02:00.0" };
	struct na_kvm_fds f = NA_KVM_FDS_NONE(5);
	char **argv = NULL;
	struct verr err;
	int n = 0;

	(void)state;
	f.pci[0] = (struct kvm_vfio_fds){ 20, 21, 22 };
	f.pci[1] = (struct kvm_vfio_fds){ 23, 24, 25 };
	s.pci = pci;
	s.npci = 2;
	assert_int_equal(na_kvm_argv(&s, "/run/x", &f, &argv, &err), 0);
	for (char **a = argv; *a; a++)
		if (!strcmp(*a, "--vfio")) {
			assert_string_equal(a[1], n ? "container=23,group=24,device=25,name=0000:02:00.0"
						    : "container=20,group=21,device=22,name=0000:01:00.0");
			n++;
		}
	assert_int_equal(n, 2);
	argv_free(argv);
	s.npci = NA_KVM_MAX_PCI + 1;
	assert_int_equal(na_kvm_argv(&s, "/run/x", &f, &argv, &err), -1);
	assert_non_null(strstr(err.msg, "a kvm guest takes at most 4"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(cmdline_carries_identity_and_guestd_takes_it, setup),
		cmocka_unit_test_setup(argv_from_placement_and_image, setup),
		cmocka_unit_test_setup(argv_prefers_the_pvh_kernel, setup),
		cmocka_unit_test_setup(split_guest_gets_a_node_per_host_node, setup),
		cmocka_unit_test_setup(bad_specs_say_what_is_wrong, setup),
		cmocka_unit_test(hugepages_only_where_the_pool_holds_them),
		cmocka_unit_test(exit_statuses_in_words),
		cmocka_unit_test(env_and_sysctl_files),
		cmocka_unit_test(config_disk_holds_the_job_files),
		cmocka_unit_test(scratch_disk_is_an_unnamed_reserved_ext4),
		cmocka_unit_test(scratch_dir_from_the_cluster_file),
		cmocka_unit_test(vmshm_region_grows_to_a_power_of_two),
		cmocka_unit_test(cpu_nodes_from_the_topology),
		cmocka_unit_test(pci_addresses_are_plain),
		cmocka_unit_test(guest_with_a_function_goes_to_its_node),
		cmocka_unit_test(vfio_functions_on_the_command_line),
	};
	return cmocka_run_group_tests_name("kvm", tests, NULL, NULL);
}
