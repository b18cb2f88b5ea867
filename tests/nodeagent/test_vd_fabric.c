/* vhpcd's side of the fabric (nodeagent/daemon/fabric.c): what a node
 * reports from its cluster file, and the controller's share for a job
 * checked against that file before it reaches na_job_spec: a function the
 * admin did not list, a guest not on this node, or another fabric mode is
 * refused, naming it. */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "nodeagent/daemon/daemon.h"
#include <json-c/json.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

struct vd vd;

static const char file[] =
	"name: t\njob_network:\n  pool: 10.213.0.0/16\n"
	"fabric:\n  mode: roce\n  link: vhpcnosuchlink0\n  vlans: 100-101\n  pool: 10.214.0.0/24\n  prefix: 28\n"
	"  nodes:\n    - name: n1\n      pci:\n        - { addr: \"0000:00:05.0\", class: gpu }\n"
	"        - { addr: \"ffff:ff:1f.7\", class: nic }\n";

static int setup(void **state)
{
	char path[64];
	struct verr e;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/vhpc-vdfab-%d.yaml", (int)getpid());
	assert_int_equal(write_file(path, file, sizeof(file) - 1, 0600, &e), 0);
	assert_int_equal(cluster_load(path, &vd.cl, &e), 0);
	unlink(path);
	snprintf(vd.name, sizeof(vd.name), "n1");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cluster_free(&vd.cl);
	return 0;
}

static void a_node_reports_what_its_file_lists(void **state)
{
	struct json_object *req = json_object_new_object(), *pci;

	(void)state;
	/* simulated: reported as listed, unchecked */
	vd_fabric_report(req, "n1", true);
	assert_string_equal(json_object_get_string(json_object_object_get(req, "fabric_link")), "vhpcnosuchlink0");
	pci = json_object_object_get(req, "pci");
	assert_int_equal(json_object_array_length(pci), 2);
	json_object_put(req);
	/* a real node: a link that does not exist is no fabric, and a
	 * function that does not exist is not offered */
	req = json_object_new_object();
	vd_fabric_report(req, "n1", false);
	assert_null(json_object_object_get(req, "fabric_link"));
	pci = json_object_object_get(req, "pci");
	for (size_t i = 0; pci && i < json_object_array_length(pci); i++)
		assert_string_not_equal(json_object_get_string(json_object_object_get(json_object_array_get_idx(pci, i), "addr")),
					"ffff:ff:1f.7");
	json_object_put(req);
	/* a node the file does not list has no functions */
	req = json_object_new_object();
	vd_fabric_report(req, "n2", true);
	assert_null(json_object_object_get(req, "pci"));
	json_object_put(req);
}

static void a_job_gets_only_what_the_file_lists(void **state)
{
	static struct vjob j;
	struct na_job_spec s;
	struct verr e;
	int here[2] = { 3, 5 };

	(void)state;
	memset(&j, 0, sizeof(j));
	j.p.here = here;
	j.p.nhere = 2;
	j.p.rdma = true;
	j.p.rdma_asked = true;
	j.p.fabric_mode = FABRIC_ROCE;
	j.p.vlan = 101;
	j.p.fsubnet = (struct ipv4net){ 0x0ad60010, 28 };
	j.p.npci = 1;
	snprintf(j.p.pci[0], sizeof(j.p.pci[0]), "0000:00:05.0");
	j.p.pci_guest[0] = 5;
	memset(&s, 0, sizeof(s));
	assert_int_equal(vd_fabric_spec(&j, vd.name, &s, &e), 0);
	assert_true(s.rdma);
	assert_true(s.rdma_asked);
	assert_string_equal(s.fabric_link, "vhpcnosuchlink0");
	assert_int_equal(s.fabric_vlan, 101);
	assert_int_equal(s.fabric_pkey, 0);
	assert_int_equal(s.fabric_subnet.prefix, 28);
	assert_int_equal(s.npci, 1);
	assert_string_equal(s.pci[0], "0000:00:05.0");
	assert_int_equal(s.pci_guest[0], 1);    /* job-wide guest 5 is this node's second */
	/* an address the admin did not list, though it may exist */
	snprintf(j.p.pci[0], sizeof(j.p.pci[0]), "0000:00:1f.0");
	assert_int_equal(vd_fabric_spec(&j, vd.name, &s, &e), -1);
	assert_non_null(strstr(e.msg, "PCI function 0000:00:1f.0 is not one this node's cluster file offers"));
	/* a guest that is not here */
	snprintf(j.p.pci[0], sizeof(j.p.pci[0]), "0000:00:05.0");
	j.p.pci_guest[0] = 4;
	assert_int_equal(vd_fabric_spec(&j, vd.name, &s, &e), -1);
	assert_non_null(strstr(e.msg, "guest 4 is not on this node"));
	j.p.pci_guest[0] = 3;
	/* a fabric the node's file does not have */
	j.p.fabric_mode = FABRIC_IB;
	assert_int_equal(vd_fabric_spec(&j, vd.name, &s, &e), -1);
	assert_non_null(strstr(e.msg, "the job's fabric is ib, but this node's cluster file says fabric.mode roce"));
	/* another node's entry: none of n1's functions */
	j.p.fabric_mode = FABRIC_ROCE;
	snprintf(vd.name, sizeof(vd.name), "n2");
	assert_int_equal(vd_fabric_spec(&j, vd.name, &s, &e), -1);
	assert_non_null(strstr(e.msg, "(fabric.nodes: n2)"));
	snprintf(vd.name, sizeof(vd.name), "n1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_node_reports_what_its_file_lists),
		cmocka_unit_test(a_job_gets_only_what_the_file_lists),
	};

	return cmocka_run_group_tests_name("vd-fabric", tests, setup, teardown);
}
