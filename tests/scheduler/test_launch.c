/* What guest 0 is asked to run: hostfile, hosts and mpirun's arguments. */
#include "lib/argv.h"
#include "lib/jobspec.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "scheduler/launch.h"

static void ranks_split_evenly_first_guests_take_the_rest(void **state)
{
	int out[4];

	(void)state;
	launch_split_ranks(4, 2, out);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 2);
	launch_split_ranks(7, 3, out);
	assert_int_equal(out[0], 3);
	assert_int_equal(out[1], 2);
	assert_int_equal(out[2], 2);
	launch_split_ranks(2, 2, out);
	assert_int_equal(out[0] + out[1], 2);
}

static struct job_spec spec;
static struct launch_guest guests[2] = {
	{ "g0", 0x0ad50302, 1, 2 },
	{ "g1", 0x0ad50303, 1, 2 },
};

static struct launch_plan plan(void)
{
	static char *cmd[] = { "vhpc-mpibench", "PingPong", NULL };
	static char *ek[] = { "OMP_NUM_THREADS" }, *ev[] = { "1" };
	struct launch_plan p = {
		.spec = &spec, .nguests = 2, .guests = guests, .rsh_path = "/usr/local/bin/vhpc-rsh",
		.hostfile = "/vhpc/hostfile", .net_if = "eth0",
	};

	job_spec_defaults(&spec);
	spec.guests = 2;
	spec.ranks = 4;
	spec.command.v = cmd;
	spec.command.n = 2;
	spec.env.key = ek;
	spec.env.val = ev;
	spec.env.n = 1;
	return p;
}

static void hostfile_and_hosts_list_every_guest(void **state)
{
	const int ranks[] = { 2, 2 };
	const uint32_t addrs[] = { 0x0ad50302, 0x0ad50303 };
	char *hf = job_hostfile_text(ranks, 2), *hosts = job_hosts_text(addrs, 2);

	(void)state;
	assert_string_equal(hf, "g0 slots=2 max_slots=2\ng1 slots=2 max_slots=2\n");
	assert_string_equal(hosts, "127.0.0.1 localhost\n10.213.3.2 g0\n10.213.3.3 g1\n");
	free(hf);
	free(hosts);
}

static const char *arg_after(char **argv, const char *a, const char *b)
{
	for (char **p = argv; p[0] && p[1]; p++)
		if (!strcmp(p[0], a) && (!b || !strcmp(p[1], b)))
			return b ? p[2] : p[1];
	return NULL;
}

/* The value of the -x whose NAME= is prefix. */
static const char *x_var(char **argv, const char *name)
{
	for (char **p = argv; p[0] && p[1]; p++)
		if (!strcmp(p[0], "-x") && !strncmp(p[1], name, strlen(name)) && p[1][strlen(name)] == '=')
			return p[1] + strlen(name) + 1;
	return NULL;
}

static void mpirun_gets_launcher_interfaces_and_command(void **state)
{
	struct launch_plan p = plan();
	char **argv = launch_mpirun_argv(&p);
	size_t n = 0;

	(void)state;
	assert_non_null(argv);
	while (argv[n])
		n++;
	assert_string_equal(argv[0], "mpirun");
	assert_string_equal(arg_after(argv, "-np", NULL), "4");
	assert_string_equal(arg_after(argv, "--hostfile", NULL), "/vhpc/hostfile");
	assert_string_equal(arg_after(argv, "--map-by", NULL), "node");
	assert_string_equal(arg_after(argv, "--mca", "plm_rsh_agent"), "/usr/local/bin/vhpc-rsh");
	assert_string_equal(arg_after(argv, "--mca", "btl_tcp_if_include"), "eth0");
	assert_string_equal(arg_after(argv, "--mca", "btl"), "self,vader,tcp");
	/* Two ranks on one vCPU per guest share it: no binding, and yield. */
	assert_string_equal(arg_after(argv, "--bind-to", NULL), "none");
	assert_string_equal(arg_after(argv, "--mca", "mpi_yield_when_idle"), "1");
	assert_string_equal(x_var(argv, "OMP_NUM_THREADS"), "1");
	/* Without a workdir and home: /tmp, as before jobs had them. */
	assert_string_equal(arg_after(argv, "-wdir", NULL), "/tmp");
	assert_string_equal(x_var(argv, "HOME"), "/tmp");
	assert_string_equal(argv[n - 2], "vhpc-mpibench");
	assert_string_equal(argv[n - 1], "PingPong");
	argv_free(argv);

	/* With a core per rank, ranks are bound and do not yield. */
	guests[0].vcpus = guests[1].vcpus = 2;
	spec.map_by = MAP_BY_SLOT;
	p.vmshm = true;
	p.vmshm_component_dir = "/usr/local/lib/vhpc/openmpi";
	argv = launch_mpirun_argv(&p);
	assert_string_equal(arg_after(argv, "--bind-to", NULL), "core");
	assert_null(arg_after(argv, "--mca", "mpi_yield_when_idle"));
	assert_string_equal(arg_after(argv, "--map-by", NULL), "slot");
	assert_string_equal(arg_after(argv, "--mca", "btl"), "self,vader,vmshm,tcp");
	assert_non_null(strstr(arg_after(argv, "--mca", "mca_base_component_path"), "/usr/local/lib/vhpc/openmpi"));
	assert_null(arg_after(argv, "--mca", "btl_ofi_provider_include"));
	argv_free(argv);

	/* On the fabric: vmshm between guests of a host, verbs (the ofi BTL
	 * over rxd) between hosts, tcp only where neither reaches. */
	p.fabric = true;
	argv = launch_mpirun_argv(&p);
	assert_string_equal(arg_after(argv, "--mca", "btl"), "self,vader,vmshm,ofi,tcp");
	assert_string_equal(arg_after(argv, "--mca", "btl_ofi_provider_include"), "verbs;ofi_rxd");
	assert_string_equal(arg_after(argv, "--mca", "btl_ofi_mode"), "2");
	assert_string_equal(arg_after(argv, "--mca", "pml"), "ob1");
	argv_free(argv);
	p.vmshm = false;
	argv = launch_mpirun_argv(&p);
	assert_string_equal(arg_after(argv, "--mca", "btl"), "self,vader,ofi,tcp");
	argv_free(argv);
	p.fabric = false;
	guests[0].vcpus = guests[1].vcpus = 1;
}

static void the_job_runs_in_its_folder_with_the_image_first_in_its_paths(void **state)
{
	static char *ek[] = { "PATH", "LD_LIBRARY_PATH", "HOME", "A" }, *ev[] = { "/own/bin", "/own/lib", "/h2", "b" };
	struct launch_plan p = plan();
	char **argv;
	int homes = 0;

	(void)state;
	p.workdir = "/home/u/run";
	p.home = "/home/u";
	spec.env.key = ek;
	spec.env.val = ev;
	spec.env.n = 4;
	argv = launch_mpirun_argv(&p);
	assert_non_null(argv);
	assert_string_equal(arg_after(argv, "-wdir", NULL), "/home/u/run");
	assert_string_equal(x_var(argv, "PATH"), LAUNCH_IMAGE_PATH ":/own/bin");
	assert_string_equal(x_var(argv, "LD_LIBRARY_PATH"), LAUNCH_IMAGE_LIBS ":/own/lib");
	/* The job's own HOME wins over the passwd one, and is given once. */
	assert_string_equal(x_var(argv, "HOME"), "/h2");
	for (char **a = argv; *a; a++)
		homes += !strncmp(*a, "HOME=", 5);
	assert_int_equal(homes, 1);
	assert_string_equal(x_var(argv, "A"), "b");
	argv_free(argv);
	p.home = "/home/u";
	spec.env.n = 0;
	argv = launch_mpirun_argv(&p);
	assert_string_equal(x_var(argv, "HOME"), "/home/u");
	argv_free(argv);
}

/* Ranks sharing a core get 64 KiB fast boxes in vader: a rank that runs
 * ahead of its core mate then waits for it 16x less often.  Not with many
 * ranks per guest (segment space), with a core each, or when the job sets
 * its own. */
static void ranks_that_share_cores_get_big_fast_boxes(void **state)
{
	static char *ek[] = { "OMPI_MCA_btl_vader_fbox_size" }, *ev[] = { "8192" };
	struct launch_plan p = plan();
	char **argv;

	(void)state;
	argv = launch_mpirun_argv(&p);
	assert_string_equal(arg_after(argv, "--mca", "btl_vader_fbox_size"), "65536");
	argv_free(argv);

	guests[0].vcpus = guests[1].vcpus = 2;
	argv = launch_mpirun_argv(&p);
	assert_null(arg_after(argv, "--mca", "btl_vader_fbox_size"));
	argv_free(argv);

	guests[0].vcpus = guests[1].vcpus = 1;
	guests[0].ranks = 9;
	argv = launch_mpirun_argv(&p);
	assert_string_equal(arg_after(argv, "--mca", "mpi_yield_when_idle"), "1");
	assert_null(arg_after(argv, "--mca", "btl_vader_fbox_size"));
	argv_free(argv);
	guests[0].ranks = 8;
	argv = launch_mpirun_argv(&p);
	assert_string_equal(arg_after(argv, "--mca", "btl_vader_fbox_size"), "65536");
	argv_free(argv);
	guests[0].ranks = 2;

	spec.env.key = ek;
	spec.env.val = ev;
	spec.env.n = 1;
	argv = launch_mpirun_argv(&p);
	assert_null(arg_after(argv, "--mca", "btl_vader_fbox_size"));
	assert_string_equal(x_var(argv, "OMPI_MCA_btl_vader_fbox_size"), "8192");
	argv_free(argv);
}

/* Runs the guest's command with "sh -c 'exit 42'" in mpirun's place:
 * its exit status, and its stderr in err. */
static int run_check(char **gargv, char *err, size_t len)
{
	char *v[16];
	int n = 0, fd[2], st;
	ssize_t got;
	pid_t pid;

	while (n < 8)
		v[n] = gargv[n], n++;
	v[n++] = "sh";
	v[n++] = "-c";
	v[n++] = "exit 42";
	v[n] = NULL;
	assert_int_equal(pipe(fd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fd[1], 2);
		execv(v[0], v);
		_exit(99);
	}
	close(fd[1]);
	got = read(fd[0], err, len - 1);
	err[got > 0 ? got : 0] = 0;
	close(fd[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void guest_zero_checks_the_program_before_mpirun(void **state)
{
	struct launch_plan p = plan();
	static char *missing[] = { "no-such-prog-vhpc", NULL }, *abs_missing[] = { "/no/such/prog", NULL },
		    *found[] = { "sh", NULL }, *rel[] = { "./sh", NULL };
	static char *ek[] = { "PATH" }, *ev[] = { "/opt/tools" };
	char **argv = launch_guest_argv(&p), err[512];
	size_t n = 0;

	(void)state;
	assert_non_null(argv);
	while (argv[n])
		n++;
	assert_string_equal(argv[0], "/bin/sh");
	assert_string_equal(argv[1], "-c");
	assert_string_equal(argv[4], "vhpc-mpibench");
	assert_string_equal(argv[5], "the job's image");
	assert_string_equal(argv[6], LAUNCH_IMAGE_PATH);
	assert_string_equal(argv[7], "/tmp");
	/* Then mpirun's argv, whole. */
	assert_string_equal(argv[8], "mpirun");
	assert_string_equal(argv[n - 2], "vhpc-mpibench");
	assert_string_equal(argv[n - 1], "PingPong");
	argv_free(argv);

	/* Run by a real shell: found along PATH, mpirun (here a stand-in) runs. */
	p.image = "img1";
	spec.command.v = found;
	spec.command.n = 1;
	argv = launch_guest_argv(&p);
	assert_int_equal(run_check(argv, err, sizeof(err)), 42);
	assert_string_equal(err, "");
	argv_free(argv);

	/* Not found: said with the image and the PATH, the job's own last. */
	spec.command.v = missing;
	spec.env.key = ek;
	spec.env.val = ev;
	spec.env.n = 1;
	argv = launch_guest_argv(&p);
	assert_int_equal(run_check(argv, err, sizeof(err)), 127);
	assert_string_equal(err, "vhpc: no-such-prog-vhpc: not found in image img1 (PATH=" LAUNCH_IMAGE_PATH
				 ":/opt/tools)\n");
	argv_free(argv);

	spec.command.v = abs_missing;
	argv = launch_guest_argv(&p);
	assert_int_equal(run_check(argv, err, sizeof(err)), 127);
	assert_string_equal(err, "vhpc: /no/such/prog: not found in image img1 or the job's folders\n");
	argv_free(argv);

	/* A path with a slash is the working folder's, wherever the check
	 * runs (vhpcd starts it in /tmp). */
	spec.command.v = rel;
	p.workdir = "/bin";
	argv = launch_guest_argv(&p);
	assert_int_equal(run_check(argv, err, sizeof(err)), 42);
	argv_free(argv);
	p.workdir = "/nonexistent";
	argv = launch_guest_argv(&p);
	assert_int_equal(run_check(argv, err, sizeof(err)), 127);
	assert_string_equal(err, "vhpc: ./sh: not found in /nonexistent (the job's working folder)\n");
	argv_free(argv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ranks_split_evenly_first_guests_take_the_rest),
		cmocka_unit_test(hostfile_and_hosts_list_every_guest),
		cmocka_unit_test(mpirun_gets_launcher_interfaces_and_command),
		cmocka_unit_test(guest_zero_checks_the_program_before_mpirun),
		cmocka_unit_test(the_job_runs_in_its_folder_with_the_image_first_in_its_paths),
		cmocka_unit_test(ranks_that_share_cores_get_big_fast_boxes),
	};
	return cmocka_run_group_tests_name("launch", tests, NULL, NULL);
}
