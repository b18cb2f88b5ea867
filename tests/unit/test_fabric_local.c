/* The fabric and functions where no controller hands them out
 * (lib/fabric_local.c, `vhpc run` and the Slurm holder): two claims never
 * hold the same VLAN or function; an exhausted pool, a --rdma job without
 * a fabric, and a Slurm job whose VLAN another job holds are refused
 * saying so; a claim's end (or its process's) frees what it held. */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fabric_local.h"
#include "lib/fsutil.h"
#include <dirent.h>
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

static struct cluster_cfg cl;
static char dir[64], pci[2][16];

/* Two PCI functions of this machine: the claims check that they exist. */
static int two_functions(void)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)) && n < 2)
		if (pci_addr_ok(e->d_name))
			snprintf(pci[n++], sizeof(pci[0]), "%s", e->d_name);
	if (d)
		closedir(d);
	return n;
}

static int setup(void **state)
{
	char path[128], text[1024];
	struct verr e;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/vhpc-fabloc-%d", (int)getpid());
	assert_int_equal(mkdir_p(dir, 0700, &e), 0);
	setenv("VHPC_RUN_DIR", dir, 1);
	if (two_functions() < 2)
		return 0;
	snprintf(text, sizeof(text),
		 "name: t\njob_network:\n  pool: 10.213.0.0/16\n"
		 "fabric:\n  mode: roce\n  link: lo\n  vlans: 100-101\n  pool: 10.214.0.0/24\n  prefix: 28\n"
		 "  nodes:\n    - name: here\n      pci:\n        - { addr: \"%s\", class: gpu }\n"
		 "        - { addr: \"%s\", class: gpu }\n        - { addr: \"0000:ff:1f.7\", class: gpu }\n"
		 "    - name: nolink\n      link: vhpcnosuch0\n", pci[0], pci[1]);
	snprintf(path, sizeof(path), "%s/cluster.yaml", dir);
	assert_int_equal(write_file(path, text, strlen(text), 0600, &e), 0);
	assert_int_equal(cluster_load(path, &cl, &e), 0);
	return 0;
}

static int teardown(void **state)
{
	struct verr e;

	(void)state;
	cluster_free(&cl);
	rm_rf(dir, &e);
	return 0;
}

static struct job_spec spec(int rdma, char **devices, size_t n)
{
	struct job_spec j = { 0 };

	j.rdma = rdma;
	j.devices = (struct cf_strlist){ devices, n };
	return j;
}

static void vlans_and_functions_are_held_once(void **state)
{
	static struct fabric_claim a, b, c;
	char *gpu[] = { "gpu", NULL }, *gpu2[] = { "gpu:2", NULL };
	struct job_spec j = spec(JOB_RDMA_AUTO, gpu, 1), on = spec(JOB_RDMA_ON, NULL, 0);
	struct verr e;

	(void)state;
	if (!cl.name)
		skip();
	assert_int_equal(fabric_local_claim(&cl, "here", &j, 1, -1, &a, &e), 0);
	assert_true(a.rdma);
	assert_string_equal(a.link, "lo");
	assert_int_equal(a.vlan, 100);
	assert_int_equal(a.subnet.addr, 0x0ad60000);
	assert_int_equal(a.subnet.prefix, 28);
	assert_int_equal(a.npci, 1);
	assert_string_equal(a.pci_v[0], pci[0]);
	assert_int_equal(fabric_local_claim(&cl, "here", &j, 1, -1, &b, &e), 0);
	assert_int_equal(b.vlan, 101);
	assert_int_equal(b.subnet.addr, 0x0ad60010);
	assert_string_equal(b.pci_v[0], pci[1]);
	/* the pool (two VLANs) is exhausted; so are the functions that exist */
	assert_int_equal(fabric_local_claim(&cl, "here", &on, 1, -1, &c, &e), -1);
	assert_non_null(strstr(e.msg, "VLAN pool (100-101) is exhausted"));
	assert_int_equal(fabric_local_claim(&cl, "here", &(struct job_spec){ .rdma = JOB_RDMA_OFF,
		.devices = { gpu, 1 } }, 1, -1, &c, &e), -1);
	assert_non_null(strstr(e.msg, "1 gpu function per guest: node here has too few"));
	/* what a claim held is free once it ends, whole */
	fabric_local_release(&a);
	assert_int_equal(fabric_local_claim(&cl, "here", &j, 1, -1, &c, &e), 0);
	assert_int_equal(c.vlan, 100);
	assert_string_equal(c.pci_v[0], pci[0]);
	fabric_local_release(&c);
	fabric_local_release(&b);
	/* two guests of two gpus each: four wanted, two exist */
	assert_int_equal(fabric_local_claim(&cl, "here", &(struct job_spec){ .devices = { gpu2, 1 } }, 2, -1, &c, &e), -1);
	/* and a failed claim leaves nothing held */
	assert_int_equal(fabric_local_claim(&cl, "here", &(struct job_spec){ .devices = { gpu2, 1 } }, 1, -1, &c, &e), 0);
	assert_int_equal(c.npci, 2);
	assert_int_equal(c.pci_guest[1], 0);
	fabric_local_release(&c);
}

static void a_dead_claimer_holds_nothing(void **state)
{
	static struct fabric_claim a;
	struct job_spec on = spec(JOB_RDMA_ON, NULL, 0);
	struct verr e;
	int fds[2], st;
	char ch;
	pid_t pid;

	(void)state;
	if (!cl.name)
		skip();
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	if (pid == 0) {
		static struct fabric_claim x, y;

		close(fds[0]);
		if (fabric_local_claim(&cl, "here", &on, 1, -1, &x, &e) < 0 ||
		    fabric_local_claim(&cl, "here", &on, 1, -1, &y, &e) < 0)
			_exit(1);
		(void)!write(fds[1], "x", 1);
		pause();
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &ch, 1), 1);
	assert_int_equal(fabric_local_claim(&cl, "here", &on, 1, -1, &a, &e), -1);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	close(fds[0]);
	assert_int_equal(fabric_local_claim(&cl, "here", &on, 1, -1, &a, &e), 0);
	fabric_local_release(&a);
}

static void slurm_takes_its_job_ids_vlan_or_none(void **state)
{
	static struct fabric_claim a, b;
	struct job_spec on = spec(JOB_RDMA_ON, NULL, 0);
	struct verr e;

	(void)state;
	if (!cl.name)
		skip();
	/* job 7: 7 mod 2 = the pool's second VLAN, on every node alike */
	assert_int_equal(fabric_local_claim(&cl, "here", &on, 1, 7, &a, &e), 0);
	assert_int_equal(a.vlan, 101);
	assert_int_equal(a.subnet.addr, 0x0ad60010);
	/* job 9 collides with it here: refused, saying why, never another VLAN */
	assert_int_equal(fabric_local_claim(&cl, "here", &on, 1, 9, &b, &e), -1);
	assert_non_null(strstr(e.msg, "VLAN 101 (job id 9 modulo the pool's 2) is held by another job on this node"));
	assert_int_equal(fabric_local_claim(&cl, "here", &on, 1, 8, &b, &e), 0);
	assert_int_equal(b.vlan, 100);
	fabric_local_release(&a);
	fabric_local_release(&b);
}

static void no_fabric_no_rdma(void **state)
{
	static struct fabric_claim a;
	struct job_spec on = spec(JOB_RDMA_ON, NULL, 0), au = spec(JOB_RDMA_AUTO, NULL, 0);
	struct verr e;

	(void)state;
	if (!cl.name)
		skip();
	assert_int_equal(fabric_local_claim(&cl, "nolink", &on, 1, -1, &a, &e), -1);
	assert_non_null(strstr(e.msg, "--rdma: node nolink has no fabric (its fabric link does not exist here)"));
	assert_int_equal(fabric_local_claim(&cl, "nolink", &au, 1, -1, &a, &e), 0);
	assert_false(a.rdma);
	fabric_local_release(&a);
	/* --no-rdma where there is a fabric */
	assert_int_equal(fabric_local_claim(&cl, "here", &(struct job_spec){ .rdma = JOB_RDMA_OFF }, 1, -1, &a, &e), 0);
	assert_false(a.rdma);
	assert_int_equal(a.vlan, 0);
	fabric_local_release(&a);
	/* more guests than a /28 holds */
	assert_int_equal(fabric_local_claim(&cl, "here", &on, 14, -1, &a, &e), -1);
	assert_non_null(strstr(e.msg, "14 guests do not fit the fabric subnet /28"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(vlans_and_functions_are_held_once),
		cmocka_unit_test(a_dead_claimer_holds_nothing),
		cmocka_unit_test(slurm_takes_its_job_ids_vlan_or_none),
		cmocka_unit_test(no_fabric_no_rdma),
	};

	return cmocka_run_group_tests_name("fabric-local", tests, setup, teardown);
}
