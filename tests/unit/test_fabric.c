/* The cluster file's fabric section and the job's device requests
 * (lib/cluster_fabric.c, lib/fabric.c): a good file binds every field;
 * each hostile or malformed value is refused, naming the problem and where
 * it is (file:line:column, or the file and the keys). */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/fsutil.h"
#include "lib/jobspec.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

static char path[64];

static const char head[] = "name: t\njob_network:\n  pool: 10.213.0.0/16\n";

static int load(const char *fabric, struct cluster_cfg *c, struct verr *e)
{
	char text[4096];

	snprintf(text, sizeof(text), "%s%s", head, fabric);
	assert_int_equal(write_file(path, text, strlen(text), 0600, e), 0);
	return cluster_load(path, c, e);
}

static void a_good_fabric_binds(void **state)
{
	struct cluster_cfg c;
	struct verr e;
	const struct cluster_pci *p;

	(void)state;
	assert_int_equal(load("fabric:\n  mode: roce\n  link: eth1\n  vlans: 100-199\n  pool: 10.214.0.0/16\n"
			      "  nodes:\n    - name: n1\n      link: ens2f0\n      pci:\n"
			      "        - { addr: \"0000:00:05.0\", class: nic }\n"
			      "        - { addr: \"0000:3b:00.1\", class: gpu }\n    - name: n2\n", &c, &e), 0);
	assert_int_equal(c.fabric.mode, FABRIC_ROCE);
	assert_int_equal(c.fabric.vlan_lo, 100);
	assert_int_equal(c.fabric.vlan_hi, 199);
	assert_int_equal(c.fabric.prefix, 24);
	assert_string_equal(cluster_fabric_link(&c, "n1"), "ens2f0");
	assert_string_equal(cluster_fabric_link(&c, "n2"), "eth1");
	assert_string_equal(cluster_fabric_link(&c, "n9"), "eth1");
	p = cluster_fabric_node(&c, "n1")->pci.v;
	assert_int_equal(cluster_fabric_node(&c, "n1")->pci.n, 2);
	assert_string_equal(p[1].addr, "0000:3b:00.1");
	assert_string_equal(p[1].cls, "gpu");
	assert_null(cluster_fabric_node(&c, "n9"));
	cluster_free(&c);
	/* ib takes pkeys in hex */
	assert_int_equal(load("fabric:\n  mode: ib\n  link: ib0\n  pkeys: 0x0100-0x01ff\n  pool: 10.214.0.0/16\n", &c, &e), 0);
	assert_int_equal(c.fabric.pkey_lo, 0x100);
	assert_int_equal(c.fabric.pkey_hi, 0x1ff);
	cluster_free(&c);
	/* no fabric: the default, and no link for anyone */
	assert_int_equal(load("", &c, &e), 0);
	assert_int_equal(c.fabric.mode, FABRIC_NONE);
	assert_null(cluster_fabric_link(&c, "n1"));
	cluster_free(&c);
}

static void refused(const char *fabric, const char *want1, const char *want2)
{
	struct cluster_cfg c;
	struct verr e;

	if (load(fabric, &c, &e) == 0)
		fail_msg("accepted:\n%s", fabric);
	if (!strstr(e.msg, want1) || (want2 && !strstr(e.msg, want2)))
		fail_msg("'%s' lacks '%s' / '%s'", e.msg, want1, want2 ? want2 : "");
	/* every message names the file */
	assert_non_null(strstr(e.msg, path));
}

static void hostile_values_are_refused_where_they_are(void **state)
{
	(void)state;
	refused("fabric:\n  mode: myrinet\n", ":5:", "mode");
	/* a class with path characters, an address that is not one */
	refused("fabric:\n  nodes:\n    - name: n1\n      pci:\n        - { addr: \"0000:00:05.0\", class: ../../dev/mem }\n",
		":8:", "expected a class name");
	refused("fabric:\n  nodes:\n    - name: n1\n      pci:\n        - { addr: \"0000:00:05.0\", class: GPU }\n",
		":8:", "class");
	refused("fabric:\n  nodes:\n    - name: n1\n      pci:\n        - { addr: \"../../0000:00:05.0\", class: nic }\n",
		":8:", "PCI function's address");
	refused("fabric:\n  nodes:\n    - name: n1\n      pci:\n        - { addr: \"0000:00:20.0\", class: nic }\n",
		":8:", "DDDD:BB:DD.F");
	refused("fabric:\n  link: ../eth0\n", ":5:", "network interface name");
	refused("fabric:\n  link: averyveryverylongname\n", ":5:", "at most 15");
	refused("fabric:\n  nodes:\n    - name: \"a/b\"\n", ":6:", "node's name");
	/* malformed pools */
	refused("fabric:\n  vlans: 0-10\n", ":5:", "2..4094");
	refused("fabric:\n  vlans: 200-100\n", ":5:", "VLAN");
	refused("fabric:\n  vlans: 100-5000\n", ":5:", "2..4094");
	refused("fabric:\n  vlans: 1x-20\n", ":5:", "VLAN");
	refused("fabric:\n  pkeys: 0x7fff\n", ":5:", "0x0001..0x7ffe");
	refused("fabric:\n  pool: 10.214.0.1/16\n", ":5:", "host bits zero");
	refused("fabric:\n  pool: 10.214.0.0/30\n", ":5:", "/8../28");
	/* a pool that overlaps job_network.pool, either way round */
	refused("fabric:\n  mode: roce\n  vlans: 100-101\n  pool: 10.213.8.0/24\n  prefix: 28\n", "overlaps job_network.pool", "10.213.8.0/24");
	refused("fabric:\n  mode: roce\n  vlans: 100-101\n  pool: 10.0.0.0/8\n", "overlaps job_network.pool", NULL);
	/* what a mode needs, and what it does not take */
	refused("fabric:\n  mode: roce\n  pool: 10.214.0.0/16\n", "mode roce needs vlans", NULL);
	refused("fabric:\n  mode: ib\n  pool: 10.214.0.0/16\n", "mode ib needs pkeys", NULL);
	refused("fabric:\n  mode: roce\n  vlans: 100-101\n", "needs a pool", NULL);
	refused("fabric:\n  mode: ib\n  pkeys: 0x100\n  vlans: 100-101\n  pool: 10.214.0.0/16\n", "vlans are RoCE's", NULL);
	refused("fabric:\n  mode: roce\n  vlans: 100-101\n  pool: 10.214.0.0/16\n  prefix: 16\n", "fabric.prefix /16", NULL);
	/* a node twice, a function twice */
	refused("fabric:\n  nodes:\n    - name: n1\n    - name: n1\n", "fabric.nodes[1]", "listed twice");
	refused("fabric:\n  nodes:\n    - name: n1\n      pci:\n        - { addr: \"0000:00:05.0\", class: nic }\n"
		"        - { addr: \"0000:00:05.0\", class: gpu }\n", "0000:00:05.0 is listed twice", NULL);
	refused("fabric:\n  colour: blue\n", ":5:", "colour");
}

static void device_requests_are_classes_and_counts(void **state)
{
	char cls[FABRIC_CLASS_MAX + 1], why[256];
	int n;

	(void)state;
	assert_int_equal(job_device_parse("gpu", cls, &n, why, sizeof(why)), 0);
	assert_string_equal(cls, "gpu");
	assert_int_equal(n, 1);
	assert_int_equal(job_device_parse("vf:16", cls, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 16);
	assert_int_equal(job_device_parse("gpu:17", cls, &n, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "1..16"));
	assert_int_equal(job_device_parse("gpu:0", cls, &n, why, sizeof(why)), -1);
	assert_int_equal(job_device_parse("gpu:-1", cls, &n, why, sizeof(why)), -1);
	assert_int_equal(job_device_parse("gpu:", cls, &n, why, sizeof(why)), -1);
	assert_int_equal(job_device_parse("../vfio:1", cls, &n, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not a class name"));
	assert_int_equal(job_device_parse("0000:00:05.0", cls, &n, why, sizeof(why)), -1);
	assert_int_equal(job_device_parse(":2", cls, &n, why, sizeof(why)), -1);
	assert_int_equal(job_device_parse("averyveryverylongclass", cls, &n, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "at most 16"));
	/* the job: at most JOB_DEVICES_MAX classes, each once */
	{
		struct job_spec j;
		struct verr e;
		char *cmd[] = { "true", NULL }, *dup[] = { "gpu:1", "nic", "gpu:2", NULL };

		job_spec_defaults(&j);
		j.command = (struct cf_strlist){ cmd, 1 };
		j.devices = (struct cf_strlist){ dup, 3 };
		assert_int_equal(job_spec_check(&j, &e), -1);
		assert_non_null(strstr(e.msg, "device class gpu is asked for twice"));
		j.devices.n = 2;
		assert_int_equal(job_spec_check(&j, &e), 0);
		j.rdma = 7;
		assert_int_equal(job_spec_check(&j, &e), -1);
	}
}

static void pci_addresses_and_netdevs(void **state)
{
	(void)state;
	assert_true(pci_addr_ok("0000:00:05.0"));
	assert_true(pci_addr_ok("ffff:ff:1f.7"));
	assert_false(pci_addr_ok("0000:00:05.8"));
	assert_false(pci_addr_ok("0000:00:05.0/"));
	assert_false(pci_addr_ok("0000:00:5.0"));
	assert_false(pci_addr_ok("0000:00:05.0\n"));
	assert_false(pci_addr_ok("0000:0G:05.0"));
	assert_false(pci_addr_ok("0000:00:05.A"));
	assert_true(netdev_name_ok("eth1.100"));
	assert_false(netdev_name_ok(".."));
	assert_false(netdev_name_ok("a/b"));
	assert_false(netdev_name_ok("0123456789abcdef"));
}

/* The fabric link is looked up in the caller's network namespace: in a
 * namespace of its own, a link that /sys/class/net (the host's) lists is
 * not there. */
static void netdevs_are_the_callers_namespace(void **state)
{
	char host_link[64] = "";
	int st;
	pid_t pid;

	(void)state;
	assert_true(netdev_exists("lo"));
	assert_false(netdev_exists("vhpcnosuch0"));
	assert_false(netdev_exists("../lo"));
	assert_false(netdev_exists(""));
	if (geteuid() != 0) {
		skip();
		return;
	}
	/* Any link of the host's but lo. */
	FILE *p = popen("ls /sys/class/net | grep -vx lo | head -n 1", "r");
	if (p) {
		if (!fgets(host_link, sizeof(host_link), p))
			host_link[0] = '\0';
		host_link[strcspn(host_link, "\n")] = '\0';
		pclose(p);
	}
	if (!host_link[0] || !netdev_exists(host_link)) {
		skip();
		return;
	}
	assert_true(fs_entry_exists("/sys/class/net", host_link));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) < 0)
			_exit(77);
		_exit(netdev_exists(host_link) ? 1 : fs_entry_exists("/sys/class/net", host_link) ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		skip();
		return;
	}
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_good_fabric_binds),
		cmocka_unit_test(hostile_values_are_refused_where_they_are),
		cmocka_unit_test(device_requests_are_classes_and_counts),
		cmocka_unit_test(pci_addresses_and_netdevs),
		cmocka_unit_test(netdevs_are_the_callers_namespace),
	};
	int rc;

	snprintf(path, sizeof(path), "/tmp/vhpc-fabric-%d.yaml", (int)getpid());
	rc = cmocka_run_group_tests_name("fabric", tests, NULL, NULL);
	unlink(path);
	return rc;
}
