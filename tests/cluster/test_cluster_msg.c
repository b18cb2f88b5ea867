/* The cluster's messages as vhpc-ctld and vhpcd parse them: valid ones
 * come through with their values, every malformed field is named. */
#include "lib/err.h"
#include "lib/jobspec.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include <cmocka.h>
#include "lib/fabric.h"

#include "lib/ckptname.h"
#include "scheduler/ctld/ctld.h"
#include "scheduler/jobjson.h"
#include "nodeagent/daemon/daemon.h"

static int cparse(const char *text, struct cmsg *m, struct verr *e)
{
	struct json_object *o = json_tokener_parse(text);
	int rc;

	assert_non_null(o);
	rc = ctld_msg_parse(o, m, e);
	json_object_put(o);
	return rc;
}

static void crejects(const char *text, const char *want)
{
	struct cmsg m;
	struct verr e = { "" };

	if (cparse(text, &m, &e) == 0) {
		ctld_msg_free(&m);
		fail_msg("accepted: %s", text);
	}
	if (!strstr(e.msg, want))
		fail_msg("for %s: '%s' lacks '%s'", text, e.msg, want);
}

static void user_messages(void **state)
{
	struct cmsg m;
	struct verr e;

	(void)state;
	assert_int_equal(cparse("{\"type\":\"submit\",\"job\":{\"guests\":2,\"ranks\":4,\"command\":[\"hostname\"],"
				"\"env\":{\"A\":\"1\"},\"driver\":\"container\",\"timeout\":60,\"map_by\":\"slot\"}}", &m, &e), 0);
	assert_int_equal(m.type, CM_SUBMIT);
	assert_int_equal(m.spec.guests, 2);
	assert_int_equal(m.spec.ranks, 4);
	assert_string_equal(vhpc_driver_name(m.spec.driver), "container");
	assert_int_equal(m.spec.map_by, MAP_BY_SLOT);
	assert_string_equal(m.spec.command.v[0], "hostname");
	assert_string_equal(m.spec.env.val[0], "1");
	assert_int_equal(m.spec.mem, 0);
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"wait\",\"id\":7,\"timeout_ms\":500}", &m, &e), 0);
	assert_int_equal(m.id, 7);
	assert_int_equal(m.timeout_ms, 500);
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"output\",\"id\":3,\"offset\":10}", &m, &e), 0);
	assert_int_equal(m.max, CTLD_OUTPUT_CHUNK);
	ctld_msg_free(&m);
	crejects("{\"type\":\"launch_missiles\"}", "unknown message type 'launch_missiles'");
	crejects("{\"type\":\"submit\"}", "missing \"job\"");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":\"2\",\"command\":[\"x\"]}}", "\"guests\": expected an integer");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":0,\"command\":[\"x\"]}}", "\"guests\": 0 is outside 1..4096");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":1}}", "missing \"command\"");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":1,\"command\":[\"\"]}}", "program name is empty");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":1,\"command\":[\"x\"],\"image\":\"../etc\"}}", "not a plain name");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":2,\"ranks\":1,\"command\":[\"x\"]}}", "cannot fill 2 guests");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":1,\"command\":[\"x\"],\"driver\":\"xen\"}}", "\"driver\"");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":1,\"command\":[\"x\"],\"env\":{\"A-B\":\"1\"}}}", "environment variable name");
	crejects("{\"type\":\"submit\",\"job\":{\"guests\":1,\"command\":[\"x\"],\"shell\":true}}", "unknown field \"shell\"");
	crejects("{\"type\":\"cancel\",\"id\":-1}", "\"id\": -1 is outside");
	crejects("{\"type\":\"cancel\"}", "missing \"id\"");
	crejects("{\"type\":\"wait\",\"id\":1,\"timeout_ms\":600000}", "\"timeout_ms\"");
	crejects("{\"type\":\"output\",\"id\":1,\"offset\":0,\"max\":0}", "\"max\"");
	crejects("{\"type\":\"queue\",\"all\":1}", "\"all\": expected true or false");
	/* exec names a job and a guest, nothing else: not where to connect */
	assert_int_equal(cparse("{\"type\":\"exec\",\"id\":5,\"guest\":3}", &m, &e), 0);
	assert_int_equal(m.type, CM_EXEC);
	assert_int_equal(m.id, 5);
	assert_int_equal(m.guest, 3);
	assert_false(ctld_msg_node_only(CM_EXEC));
	ctld_msg_free(&m);
	crejects("{\"type\":\"exec\",\"id\":5}", "missing \"guest\"");
	crejects("{\"type\":\"exec\",\"id\":5,\"guest\":4096}", "\"guest\": 4096 is outside 0..4095");
	crejects("{\"type\":\"exec\",\"id\":5,\"guest\":-1}", "\"guest\"");
	crejects("{\"type\":\"exec\",\"id\":5,\"guest\":0,\"path\":\"/run/munge/munge.socket.2\"}", "unknown field \"path\"");
}

static void node_messages(void **state)
{
	struct cmsg m;
	struct verr e;
	const char *reg = "{\"type\":\"register\",\"node\":\"n1\",\"addr\":\"10.0.0.1:6818\",\"underlay\":\"10.0.0.1\","
			  "\"numa\":[{\"os_index\":0,\"cores\":8,\"mem\":1000}],\"rdma\":[],\"jobs\":[{\"job\":4,\"state\":\"running\"}]}";

	(void)state;
	assert_int_equal(cparse(reg, &m, &e), 0);
	assert_string_equal(m.node, "n1");
	assert_int_equal(m.nnuma, 1);
	assert_int_equal(m.numa[0].cores, 8);
	assert_int_equal(m.njobs, 1);
	assert_int_equal(m.jobs[0].state, NJ_RUNNING);
	assert_true(ctld_msg_node_only(m.type));
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"job_output\",\"node\":\"n1\",\"job\":2,\"offset\":0,\"data\":\"aGVsbG8=\"}", &m, &e), 0);
	assert_int_equal(m.len, 5);
	assert_memory_equal(m.data, "hello", 5);
	ctld_msg_free(&m);
	crejects("{\"type\":\"register\",\"node\":\"n1\",\"addr\":\"10.0.0.1\",\"underlay\":\"10.0.0.1\",\"numa\":[],\"jobs\":[]}",
		 "\"addr\": '10.0.0.1' is not HOST:PORT");
	crejects("{\"type\":\"register\",\"node\":\"n1\",\"addr\":\"a:1\",\"underlay\":\"10.0.0.256\",\"numa\":[],\"jobs\":[]}",
		 "\"underlay\"");
	crejects("{\"type\":\"register\",\"node\":\"n1\",\"addr\":\"a:1\",\"underlay\":\"10.0.0.1\",\"numa\":[],\"jobs\":[]}",
		 "at least one NUMA node");
	crejects("{\"type\":\"heartbeat\",\"node\":\"n 1\",\"jobs\":[]}", "\"node\"");
	crejects("{\"type\":\"heartbeat\",\"node\":\"n1\",\"jobs\":[{\"job\":1,\"state\":\"dancing\"}]}", "state 'dancing'");
	crejects("{\"type\":\"job_output\",\"node\":\"n1\",\"job\":2,\"offset\":0,\"data\":\"%%%\"}", "not base64");
	crejects("{\"type\":\"job_exit\",\"node\":\"n1\",\"job\":2,\"size\":0,\"status\":256}", "\"status\": 256");
	assert_false(ctld_msg_node_only(CM_SUBMIT));
}

#define H "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static const char *prep =
	"{\"type\":\"job_prepare\",\"node\":\"n2\",\"job\":9,\"local\":\"9x2\",\"uid\":0,\"vni\":4105,"
	"\"subnet\":\"10.213.9.0/24\",\"guest_port\":7707,\"image\":\"default\",\"image_id\":\"" H "\","
	"\"tuning\":\"hpc\","
	"\"driver\":\"auto\",\"vcpus\":1,\"mem\":536870912,\"oversubscribe\":false,\"vmshm\":true,"
	"\"key\":\"0001020304050607080900010203040506070809000102030405060708090001\",\"timeout\":60,"
	"\"guests\":[2,1],\"ranks\":[2,1,1],\"peers\":[\"198.18.0.11\"]}";

static int vparse_with(const char *key, const char *value, struct vmsg *m, struct verr *e)
{
	struct json_object *o = json_tokener_parse(prep);
	int rc;

	if (key)
		json_object_object_add(o, key, value ? json_tokener_parse(value) : NULL);
	rc = vmsg_parse(o, m, e);
	json_object_put(o);
	return rc;
}

static void vrejects(const char *key, const char *value, const char *want)
{
	struct vmsg m;
	struct verr e = { "" };

	if (vparse_with(key, value, &m, &e) == 0) {
		vmsg_free(&m);
		fail_msg("accepted %s=%s", key, value);
	}
	if (!strstr(e.msg, want))
		fail_msg("for %s=%s: '%s' lacks '%s'", key, value, e.msg, want);
}

static void controller_messages(void **state)
{
	struct vmsg m;
	struct verr e;

	(void)state;
	assert_int_equal(vparse_with(NULL, NULL, &m, &e), 0);
	assert_int_equal(m.type, VM_PREPARE);
	assert_string_equal(m.prep.local, "9x2");
	assert_int_equal(m.prep.nhere, 2);
	assert_int_equal(m.prep.here[0], 1);   /* sorted */
	assert_int_equal(m.prep.ntotal, 3);
	assert_int_equal(m.prep.nranks_total, 4);
	assert_int_equal(m.prep.npeers, 1);
	assert_int_equal(m.prep.subnet.prefix, 24);
	assert_string_equal(m.prep.image_id, H);
	/* An older controller's message has no single_copy: its jobs had the pod. */
	assert_true(m.prep.single_copy);
	vmsg_free(&m);
	assert_int_equal(vparse_with("single_copy", "false", &m, &e), 0);
	assert_false(m.prep.single_copy);
	assert_true(m.prep.vmshm);
	vmsg_free(&m);
	vrejects("single_copy", "\"no\"", "\"single_copy\": expected true or false");
	vrejects("single_copy", "0", "\"single_copy\": expected true or false");
	vrejects("image_id", "\"E3B0\"", "\"image_id\": expected an image id");
	vrejects("image_id", NULL, "\"image_id\"");
	vrejects("local", "\"9X2\"", "not a job id");
	vrejects("local", "\"9x2-0\"", "not a job id");
	vrejects("guests", "[3]", "outside 0..2");
	vrejects("guests", "[1,1]", "given twice");
	vrejects("guests", "[]", "no guest for this node");
	vrejects("key", "\"00\"", "hex digits");
	vrejects("scratch", "1024", "\"scratch\"");
	vrejects("scratch", "\"1G\"", "\"scratch\"");
	vrejects("vni", "16777216", "\"vni\"");
	vrejects("subnet", "\"10.213.9.1/24\"", "host bits zero");
	vrejects("subnet", "\"10.213.9.0/31\"", "\"subnet\"");
	vrejects("peers", "[\"198.18.0.300\"]", "IPv4 address");
	vrejects("guest_nodes", "[\"198.18.0.11\"]", "1 entries for 3 guests");
	vrejects("guest_nodes", "[\"198.18.0.11\",\"x\",\"198.18.0.12\"]", "\"guest_nodes\"[1]");
	vrejects("underlay_encryption", "{\"key\":\"k\",\"pool\":\"10.254.0.0/16\",\"port\":51820}", "absolute path");
	vrejects("underlay_encryption", "{\"key\":\"/k\",\"pool\":\"10.254.0.0/28\",\"port\":51820}", "/8../24");
	vrejects("underlay_encryption", "{\"key\":\"/k\",\"pool\":\"10.254.0.0/16\"}", "\"port\"");
	assert_int_equal(vparse_with("underlay_encryption", "{\"key\":\"/k\",\"pool\":\"10.254.0.0/16\",\"port\":5}",
				     &m, &e), 0);
	assert_string_equal(m.prep.wg.key, "/k");
	assert_int_equal(m.prep.wg.pool.prefix, 16);
	vmsg_free(&m);
	vrejects("ranks", "[]", "at least one guest");
	vrejects("mem", "1", "\"mem\"");
	vrejects("driver", "\"vmware\"", "\"driver\"");
	vrejects("surprise", "1", "unknown field \"surprise\"");
	vrejects("node", "\"../n2\"", "\"node\"");
	{
		struct json_object *o = json_tokener_parse("{\"type\":\"job_launch\",\"node\":\"n1\",\"job\":1,"
							   "\"argv\":[\"mpirun\",\"x\"],\"env\":[\"A=1\"],\"timeout_ms\":5}");

		assert_int_equal(vmsg_parse(o, &m, &e), 0);
		assert_string_equal(m.argv[1], "x");
		assert_null(m.argv[2]);
		vmsg_free(&m);
		json_object_put(o);
		o = json_tokener_parse("{\"type\":\"job_launch\",\"node\":\"n1\",\"job\":1,"
				       "\"argv\":[\"mpirun\"],\"env\":[\"NOEQUALS\"],\"timeout_ms\":5}");
		assert_int_equal(vmsg_parse(o, &m, &e), -1);
		assert_non_null(strstr(e.msg, "NAME=VALUE"));
		json_object_put(o);
		o = json_tokener_parse("{\"type\":\"job_stop\",\"node\":\"n1\",\"job\":1,\"reason\":\"CANCELLED\"}");
		assert_int_equal(vmsg_parse(o, &m, &e), 0);
		assert_int_equal(m.type, VM_STOP);
		vmsg_free(&m);
		json_object_put(o);
		o = json_tokener_parse("{\"type\":\"guest_open\",\"node\":\"n1\",\"job\":4,\"guest\":2,"
				       "\"pipe_key\":\"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\"}");
		assert_int_equal(vmsg_parse(o, &m, &e), 0);
		assert_int_equal(m.type, VM_GUEST_OPEN);
		assert_int_equal(m.guest, 2);
		assert_int_equal(m.pipe_key[31], 0x1f);
		vmsg_free(&m);
		json_object_put(o);
		o = json_tokener_parse("{\"type\":\"guest_open\",\"node\":\"n1\",\"job\":4,\"guest\":2,\"pipe_key\":\"zz\"}");
		assert_int_equal(vmsg_parse(o, &m, &e), -1);
		assert_non_null(strstr(e.msg, "\"pipe_key\": expected 64 hex digits"));
		json_object_put(o);
		o = json_tokener_parse("{\"type\":\"guest_open\",\"node\":\"n1\",\"job\":4,\"guest\":2,\"sock\":\"/run/x\","
				       "\"pipe_key\":\"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\"}");
		assert_int_equal(vmsg_parse(o, &m, &e), -1);
		assert_non_null(strstr(e.msg, "unknown field \"sock\""));
		json_object_put(o);
		o = json_tokener_parse("{\"type\":\"submit\",\"node\":\"n1\",\"job\":1}");
		assert_int_equal(vmsg_parse(o, &m, &e), -1);
		assert_non_null(strstr(e.msg, "unknown message type 'submit'"));
		json_object_put(o);
	}
}

/* job_pause, job_resume and job_checkpoint (issue 36): the checkpoint's
 * name becomes a folder under the node's checkpoint dir, so anything that
 * could leave it (a slash, "..", a capital, a leading dot) is refused,
 * naming the field. */
static int ckparse(const char *text, struct vmsg *m, struct verr *e)
{
	struct json_object *o = json_tokener_parse(text);
	int rc;

	assert_non_null(o);
	rc = vmsg_parse(o, m, e);
	json_object_put(o);
	return rc;
}

static void checkpoint_messages(void **state)
{
	static const char *const bad[] = { "..", ".", "../x", "a/b", "A1", "-a", ".a", "", "a b",
					   "12345678901234567890123456789012345678901234567890123456789012345", NULL };
	struct vmsg m;
	struct verr e;
	char buf[512];

	(void)state;
	assert_int_equal(ckparse("{\"type\":\"job_pause\",\"node\":\"n1\",\"job\":3}", &m, &e), 0);
	assert_int_equal(m.type, VM_PAUSE);
	assert_int_equal(m.job, 3);
	assert_false(m.close_sessions);
	vmsg_free(&m);
	/* A drain's pause closes the sessions a container guest cannot keep. */
	assert_int_equal(ckparse("{\"type\":\"job_pause\",\"node\":\"n1\",\"job\":3,\"close_sessions\":true}", &m, &e),
			 0);
	assert_true(m.close_sessions);
	vmsg_free(&m);
	assert_int_equal(ckparse("{\"type\":\"job_pause\",\"node\":\"n1\",\"job\":3,\"close_sessions\":\"yes\"}",
				 &m, &e), -1);
	assert_non_null(strstr(e.msg, "\"close_sessions\""));
	assert_int_equal(ckparse("{\"type\":\"job_resume\",\"node\":\"n1\",\"job\":3,\"close_sessions\":true}", &m, &e),
			 -1);
	assert_non_null(strstr(e.msg, "unknown field \"close_sessions\""));
	assert_int_equal(ckparse("{\"type\":\"job_checkpoint\",\"node\":\"n1\",\"job\":17,\"ckpt\":\"17.1\","
				 "\"check\":true,\"close_sessions\":true}", &m, &e), 0);
	assert_true(m.check && m.close_sessions);
	vmsg_free(&m);
	assert_int_equal(ckparse("{\"type\":\"job_resume\",\"node\":\"n1\",\"job\":3}", &m, &e), 0);
	assert_int_equal(m.type, VM_RESUME);
	vmsg_free(&m);
	assert_int_equal(ckparse("{\"type\":\"job_resume\",\"node\":\"n1\",\"job\":3,\"ckpt\":\"3.1\"}", &m, &e), -1);
	assert_non_null(strstr(e.msg, "unknown field \"ckpt\""));
	assert_int_equal(ckparse("{\"type\":\"job_checkpoint\",\"node\":\"n1\",\"job\":17,\"ckpt\":\"17.1\","
				 "\"check\":true}", &m, &e), 0);
	assert_int_equal(m.type, VM_CHECKPOINT);
	assert_string_equal(m.ckpt, "17.1");
	assert_true(m.check);
	vmsg_free(&m);
	assert_int_equal(ckparse("{\"type\":\"job_checkpoint\",\"node\":\"n1\",\"job\":17,\"ckpt\":\"a-b.c9\"}", &m, &e), 0);
	assert_false(m.check);
	vmsg_free(&m);
	assert_int_equal(ckparse("{\"type\":\"job_checkpoint\",\"node\":\"n1\",\"job\":17}", &m, &e), -1);
	assert_non_null(strstr(e.msg, "\"ckpt\""));
	assert_int_equal(ckparse("{\"type\":\"job_checkpoint\",\"node\":\"n1\",\"job\":17,\"ckpt\":\"x\",\"check\":1}",
				 &m, &e), -1);
	assert_non_null(strstr(e.msg, "\"check\""));
	for (int i = 0; bad[i]; i++) {
		snprintf(buf, sizeof(buf), "{\"type\":\"job_checkpoint\",\"node\":\"n1\",\"job\":1,\"ckpt\":\"%s\"}", bad[i]);
		assert_int_equal(ckparse(buf, &m, &e), -1);
		assert_non_null(strstr(e.msg, "\"ckpt\""));
	}
}

/* job_prepare's restore: the checkpoint's name becomes a folder under the
 * node's checkpoint dir, so it is held to vhpc-ctld's names. */
static void prepare_restore(void **state)
{
	static const char *const bad[] = { "{\"ckpt\":\"../x\"}", "{\"ckpt\":\"a/b\"}", "{\"ckpt\":\"\"}",
					   "{\"ckpt\":\".a\"}", "{}", "{\"ckpt\":\"1.1\",\"dir\":\"/etc\"}",
					   "\"1.1\"", NULL };
	struct vmsg m;
	struct verr e;

	(void)state;
	assert_int_equal(vparse_with(NULL, NULL, &m, &e), 0);
	assert_string_equal(m.prep.restore, "");
	vmsg_free(&m);
	assert_int_equal(vparse_with("restore", "{\"ckpt\":\"17.1\"}", &m, &e), 0);
	assert_string_equal(m.prep.restore, "17.1");
	vmsg_free(&m);
	for (int i = 0; bad[i]; i++) {
		assert_int_equal(vparse_with("restore", bad[i], &m, &e), -1);
		assert_true(strstr(e.msg, "restore") || strstr(e.msg, "ckpt"));
	}
}

/* The fabric's fields: register's fabric_link, rdma netdev/numa and pci;
 * job_prepare's fabric and pci.  Each hostile value is refused, naming
 * the field. */
static void fabric_fields(void **state)
{
	struct cmsg m;
	struct vmsg v;
	struct verr e;
	char buf[1024];
	const char *head = "{\"type\":\"register\",\"node\":\"n1\",\"addr\":\"10.0.0.1:6818\",\"underlay\":\"10.0.0.1\","
			   "\"numa\":[{\"os_index\":0,\"cores\":8}],\"jobs\":[]";

	(void)state;
	snprintf(buf, sizeof(buf), "%s,\"rdma\":[{\"name\":\"mlx5_0\",\"netdev\":\"eth1\",\"numa\":0}],"
		 "\"fabric_link\":\"eth1\",\"pci\":[{\"addr\":\"0000:00:05.0\",\"class\":\"gpu\",\"numa\":1},"
		 "{\"addr\":\"0000:3b:00.1\",\"class\":\"nic\"}]}", head);
	assert_int_equal(cparse(buf, &m, &e), 0);
	assert_string_equal(m.fabric_link, "eth1");
	assert_int_equal(m.npci, 2);
	assert_string_equal(m.pci[0].addr, "0000:00:05.0");
	assert_string_equal(m.pci[0].cls, "gpu");
	assert_int_equal(m.pci[0].numa, 1);
	assert_int_equal(m.pci[1].numa, -1);
	ctld_msg_free(&m);
#define REG(tail, want) do { snprintf(buf, sizeof(buf), "%s,%s}", head, tail); crejects(buf, want); } while (0)
	REG("\"fabric_link\":\"../eth1\"", "\"fabric_link\": '../eth1' is not an interface name");
	REG("\"fabric_link\":\"0123456789abcdefg\"", "\"fabric_link\"");
	REG("\"rdma\":[{\"name\":\"mlx5_0\",\"netdev\":\"a/b\"}]", "\"rdma\"[0]: \"netdev\"");
	REG("\"rdma\":[{\"name\":\"mlx5_0\",\"numa\":5000}]", "\"rdma\"[0]");
	REG("\"pci\":[{\"addr\":\"../../0:00:05.0\",\"class\":\"gpu\"}]", "\"pci\"[0]");
	REG("\"pci\":[{\"addr\":\"0000:00:05.9\",\"class\":\"gpu\"}]", "not a PCI function's address");
	REG("\"pci\":[{\"addr\":\"0000:00:05.0\",\"class\":\"../x\"}]", "not a class name");
	REG("\"pci\":[{\"addr\":\"0000:00:05.0\",\"class\":\"gpu\"},{\"addr\":\"0000:00:05.0\",\"class\":\"nic\"}]",
	    "listed twice");
	REG("\"pci\":[{\"addr\":\"0000:00:05.0\",\"class\":\"gpu\",\"owner\":1}]", "unknown field \"owner\"");
#undef REG

	assert_int_equal(vparse_with("fabric", "{\"mode\":\"roce\",\"vlan\":100,\"subnet\":\"10.214.0.0/28\"}", &v, &e), 0);
	assert_true(v.prep.rdma);
	assert_int_equal(v.prep.vlan, 100);
	assert_int_equal(v.prep.fabric_mode, FABRIC_ROCE);
	assert_int_equal(v.prep.fsubnet.prefix, 28);
	assert_false(v.prep.rdma_asked);
	vmsg_free(&v);
	/* --rdma said by the user: a node that cannot give it refuses. */
	assert_int_equal(vparse_with("fabric", "{\"mode\":\"roce\",\"vlan\":100,\"subnet\":\"10.214.0.0/28\",\"asked\":true}", &v, &e), 0);
	assert_true(v.prep.rdma_asked);
	vmsg_free(&v);
	vrejects("fabric", "{\"mode\":\"roce\",\"vlan\":100,\"subnet\":\"10.214.0.0/28\",\"asked\":\"yes\"}", "\"asked\"");
	assert_int_equal(vparse_with("fabric", "{\"mode\":\"ib\",\"pkey\":256,\"subnet\":\"10.214.0.0/28\"}", &v, &e), 0);
	assert_int_equal(v.prep.pkey, 256);
	vmsg_free(&v);
	assert_int_equal(vparse_with(NULL, NULL, &v, &e), 0);
	assert_false(v.prep.rdma);
	assert_int_equal(v.prep.npci, 0);
	vmsg_free(&v);
	vrejects("fabric", "{\"mode\":\"roce\",\"vlan\":4095,\"subnet\":\"10.214.0.0/28\"}", "\"vlan\"");
	vrejects("fabric", "{\"mode\":\"roce\",\"pkey\":5,\"subnet\":\"10.214.0.0/28\"}", "mode roce takes a vlan alone");
	vrejects("fabric", "{\"mode\":\"ib\",\"vlan\":5,\"pkey\":5,\"subnet\":\"10.214.0.0/28\"}", "mode ib takes a pkey alone");
	vrejects("fabric", "{\"mode\":\"ib\",\"pkey\":32767,\"subnet\":\"10.214.0.0/28\"}", "\"pkey\"");
	vrejects("fabric", "{\"mode\":\"tcp\",\"vlan\":5,\"subnet\":\"10.214.0.0/28\"}", "mode 'tcp'");
	vrejects("fabric", "{\"mode\":\"roce\",\"vlan\":5,\"subnet\":\"10.214.0.1/28\"}", "host bits zero");
	vrejects("fabric", "{\"mode\":\"roce\",\"vlan\":5,\"subnet\":\"10.214.0.0/31\"}", "/8../30");
	vrejects("fabric", "{\"mode\":\"roce\",\"vlan\":5}", "\"subnet\"");
	vrejects("fabric", "{\"mode\":\"roce\",\"vlan\":5,\"subnet\":\"10.214.0.0/28\",\"link\":\"eth0\"}",
		 "unknown field \"link\"");
	vrejects("fabric", "\"roce\"", "\"fabric\"");
	assert_int_equal(vparse_with("pci", "[{\"guest\":2,\"addr\":\"0000:00:05.0\"},{\"guest\":1,\"addr\":\"0000:00:06.0\"}]",
				     &v, &e), 0);
	assert_int_equal(v.prep.npci, 2);
	assert_int_equal(v.prep.pci_guest[0], 2);
	assert_string_equal(v.prep.pci[1], "0000:00:06.0");
	vmsg_free(&v);
	vrejects("pci", "[{\"guest\":0,\"addr\":\"0000:00:05.0\"}]", "guest 0 is not on this node");
	vrejects("pci", "[{\"guest\":3,\"addr\":\"0000:00:05.0\"}]", "\"pci\"[0]");
	vrejects("pci", "[{\"guest\":1,\"addr\":\"/sys/bus/pci/devices/x\"}]", "\"pci\"[0]");
	vrejects("pci", "[{\"guest\":1,\"addr\":\"0000:00:05.0/\"}]", "\"pci\"[0]");
	vrejects("pci", "[{\"guest\":1,\"addr\":\"0000:00:05.0\"},{\"guest\":2,\"addr\":\"0000:00:05.0\"}]", "given twice");
	vrejects("pci", "[{\"guest\":1,\"addr\":\"0000:00:05.0\",\"class\":\"gpu\"}]", "unknown field \"class\"");
}

/* The image store's messages, and vhpcd's parse of image_data. */
static void image_messages(void **state)
{
	struct cmsg m;
	struct verr e;
	struct image_chunk *c;
	struct json_object *o;
	int n;

	(void)state;
	assert_int_equal(cparse("{\"type\":\"image_have\",\"objects\":[\"" H "\",\"" H "\"]}", &m, &e), 0);
	assert_int_equal(m.nobjects, 2);
	assert_string_equal(m.objects[1], H);
	assert_true(ctld_msg_node_only(m.type));
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"image_put\",\"parts\":[{\"object\":\"" H "\",\"size\":9,"
				"\"offset\":4,\"len\":3},{\"object\":\"" H "\",\"size\":2,\"offset\":0,\"len\":2}],"
				"\"_data\":\"helxy\"}", &m, &e), 0);
	assert_int_equal(m.nparts, 2);
	assert_int_equal(m.parts[0].len, 3);
	assert_int_equal(m.parts[0].offset, 4);
	assert_memory_equal(m.parts[0].data, "hel", 3);
	assert_memory_equal(m.parts[1].data, "xy", 2);
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"image_get\",\"objects\":[\"" H "\"],\"offset\":7}", &m, &e), 0);
	assert_int_equal(m.offset, 7);
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"image_list\"}", &m, &e), 0);
	assert_false(ctld_msg_node_only(m.type));
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"heartbeat\",\"node\":\"n1\",\"jobs\":[],\"images\":[{\"id\":\"" H "\","
				"\"name\":\"default\",\"bytes\":5,\"used\":100,\"in_use\":true}]}", &m, &e), 0);
	assert_int_equal(m.ncache, 1);
	assert_true(m.cache[0].in_use);
	ctld_msg_free(&m);
	crejects("{\"type\":\"image_have\",\"objects\":[]}", "names no object");
	crejects("{\"type\":\"image_have\",\"objects\":[\"E3B0\"]}", "\"objects\"[0]: expected a sha256");
	crejects("{\"type\":\"image_put\",\"parts\":[{\"object\":\"" H "\",\"size\":3,\"offset\":0,"
		 "\"len\":5}],\"_data\":\"hello\"}", "run past the object's size 3");
	crejects("{\"type\":\"image_put\",\"parts\":[{\"object\":\"" H "\",\"size\":9,\"offset\":0,"
		 "\"len\":5}],\"_data\":\"hel\"}", "more bytes than the message's data (3)");
	crejects("{\"type\":\"image_put\",\"parts\":[{\"object\":\"" H "\",\"size\":9,\"offset\":0,"
		 "\"len\":2}],\"_data\":\"hel\"}", "the parts hold 2 bytes of the message's 3");
	crejects("{\"type\":\"image_put\",\"parts\":[{\"object\":\"" H "\",\"size\":9,\"offset\":0,"
		 "\"len\":0,\"x\":1}]}", "unknown field \"x\"");
	crejects("{\"type\":\"image_tag\",\"name\":\"a b\",\"id\":\"" H "\"}", "\"name\"");
	crejects("{\"type\":\"image_tag\",\"name\":\"ab\",\"id\":\"12\"}", "expected an image id");
	/* An image's signatures ride along image_tag and image_data. */
	assert_int_equal(cparse("{\"type\":\"image_tag\",\"name\":\"ab\",\"id\":\"" H "\",\"signatures\":\"x\\n\"}", &m, &e), 0);
	assert_string_equal(m.signatures, "x\n");
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"image_tag\",\"name\":\"ab\",\"id\":\"" H "\"}", &m, &e), 0);
	assert_null(m.signatures);
	ctld_msg_free(&m);
	{
		char big[CMSG_SIGS_MAX + 200];

		snprintf(big, sizeof(big), "{\"type\":\"image_tag\",\"name\":\"ab\",\"id\":\"" H "\",\"signatures\":\"%0*d\"}",
			 CMSG_SIGS_MAX + 1, 0);
		crejects(big, "\"signatures\"");
	}
	crejects("{\"type\":\"image_tag\",\"name\":\"ab\",\"id\":\"" H "\",\"signatures\":[1]}", "\"signatures\"");
	o = json_tokener_parse("{\"type\":\"image_data\",\"parts\":[],\"_data\":\"\",\"signatures\":\"s\"}");
	assert_int_equal(vimg_data_parse(o, &c, &n, &e), 0);
	image_chunks_free(c, n);
	json_object_put(o);
	crejects("{\"type\":\"image_get\",\"objects\":[\"" H "\"],\"offset\":-1}", "\"offset\"");
	crejects("{\"type\":\"image_rm\",\"name\":\"../x\"}", "\"name\"");
	crejects("{\"type\":\"heartbeat\",\"node\":\"n1\",\"jobs\":[],\"images\":[{\"id\":\"x\",\"bytes\":5,"
		 "\"used\":1,\"in_use\":true}]}", "\"images\"[0]");
	o = json_tokener_parse("{\"type\":\"image_data\",\"parts\":[{\"object\":\"" H "\",\"size\":3,\"offset\":1,"
			       "\"len\":2}],\"_data\":\"he\"}");
	assert_int_equal(vimg_data_parse(o, &c, &n, &e), 0);
	assert_int_equal(n, 1);
	assert_int_equal(c[0].len, 2);
	image_chunks_free(c, n);
	json_object_put(o);
	o = json_tokener_parse("{\"type\":\"image_data\",\"parts\":[{\"object\":\"" H "\",\"size\":1,\"offset\":1,"
			       "\"len\":2}],\"_data\":\"he\"}");
	assert_int_equal(vimg_data_parse(o, &c, &n, &e), -1);
	assert_non_null(strstr(e.msg, "run past the object's size"));
	json_object_put(o);
	o = json_tokener_parse("{\"type\":\"images\"}");
	assert_int_equal(vimg_data_parse(o, &c, &n, &e), -1);
	assert_non_null(strstr(e.msg, "not image_data"));
	json_object_put(o);
}

/* A node's report (node 0 of where's 4 guests). */
static int usage_parse(const char *text, const int *where, struct store_usage *u, int *n, struct verr *e)
{
	struct json_object *o = json_tokener_parse(text);
	int rc;

	assert_non_null(o);
	*n = -1;
	rc = ctld_usage_parse(o, where, 4, 0, u, n, e);
	json_object_put(o);
	return rc;
}

/* vhpc checkpoint, checkpoints, checkpoint rm, restart and node drain, as
 * vhpc-ctld takes them: a checkpoint's name becomes a folder's, so only
 * what vhpc-ctld makes ([a-z0-9][a-z0-9.-]{0,63}). */
static void ctld_checkpoint_messages(void **state)
{
	struct cmsg m;
	struct verr e;

	(void)state;
	assert_int_equal(cparse("{\"type\":\"checkpoint\",\"id\":17}", &m, &e), 0);
	assert_true(m.type == CM_CHECKPOINT && m.id == 17 && !m.stop && !m.close_sessions);
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"checkpoint\",\"id\":17,\"close_sessions\":true}", &m, &e), 0);
	assert_true(m.close_sessions && !m.stop);
	ctld_msg_free(&m);
	crejects("{\"type\":\"checkpoint\",\"id\":17,\"close_sessions\":\"1\"}", "close_sessions");
	assert_int_equal(cparse("{\"type\":\"checkpoint\",\"id\":17,\"stop\":true}", &m, &e), 0);
	assert_true(m.stop);
	assert_false(ctld_msg_node_only(CM_CHECKPOINT));
	ctld_msg_free(&m);
	crejects("{\"type\":\"checkpoint\"}", "id");
	crejects("{\"type\":\"checkpoint\",\"id\":17,\"stop\":1}", "stop");
	crejects("{\"type\":\"checkpoint\",\"id\":17,\"dir\":\"/tmp\"}", "dir");
	assert_int_equal(cparse("{\"type\":\"checkpoints\"}", &m, &e), 0);
	assert_int_equal(m.type, CM_CHECKPOINTS);
	ctld_msg_free(&m);
	crejects("{\"type\":\"checkpoints\",\"uid\":0}", "uid");
	assert_int_equal(cparse("{\"type\":\"checkpoint_rm\",\"name\":\"17.1\"}", &m, &e), 0);
	assert_string_equal(m.ckpt, "17.1");
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"restart\",\"name\":\"17.2\"}", &m, &e), 0);
	assert_true(m.type == CM_RESTART && !strcmp(m.ckpt, "17.2"));
	assert_false(ctld_msg_node_only(CM_RESTART));
	ctld_msg_free(&m);
	crejects("{\"type\":\"restart\",\"name\":\"..\"}", "not a checkpoint's name");
	crejects("{\"type\":\"restart\",\"name\":\".hidden\"}", "not a checkpoint's name");
	crejects("{\"type\":\"checkpoint_rm\",\"name\":\"17/../../etc\"}", "not a checkpoint's name");
	crejects("{\"type\":\"checkpoint_rm\",\"name\":\"A.1\"}", "not a checkpoint's name");
	crejects("{\"type\":\"checkpoint_rm\",\"name\":\"\"}", "not a checkpoint's name");
	crejects("{\"type\":\"checkpoint_rm\",\"name\":\"1234567890123456789012345678901234567890123456789012345678901234x\"}",
		 "name");
	assert_true(ckpt_name_ok("1.1") && ckpt_name_ok("a-b.c") && !ckpt_name_ok("-1"));
	assert_int_equal(cparse("{\"type\":\"node_drain\",\"node\":\"n1\",\"drain\":true,\"checkpoint\":true}", &m, &e), 0);
	assert_true(m.type == CM_NODE_DRAIN && m.drain && m.checkpoint && !strcmp(m.node, "n1"));
	/* root's only: the admin's */
	assert_true(ctld_msg_node_only(CM_NODE_DRAIN));
	ctld_msg_free(&m);
	crejects("{\"type\":\"node_drain\",\"node\":\"n1\"}", "drain");
	crejects("{\"type\":\"node_drain\",\"node\":\"n1\",\"drain\":false,\"checkpoint\":true}", "only with");
}

/* vhpc history's request, and a node's usage report in its `stopped`. */
static void accounting_messages(void **state)
{
	static const int where[4] = { 0, 1, 0, 1 };  /* guests 0, 2 on node 0 */
	struct store_usage u[4];
	struct cmsg m;
	struct verr e;
	int n;

	(void)state;
	assert_int_equal(cparse("{\"type\":\"history\"}", &m, &e), 0);
	assert_int_equal(m.type, CM_HISTORY);
	assert_true(m.hist_uid == -1 && m.since == 0 && m.before == INT64_MAX);
	ctld_msg_free(&m);
	assert_int_equal(cparse("{\"type\":\"history\",\"uid\":1000,\"since\":1796500000,\"before\":9}", &m, &e), 0);
	assert_true(m.hist_uid == 1000 && m.since == 1796500000 && m.before == 9);
	assert_false(ctld_msg_node_only(CM_HISTORY));
	ctld_msg_free(&m);
	crejects("{\"type\":\"history\",\"uid\":-1}", "uid");
	crejects("{\"type\":\"history\",\"uid\":\"root\"}", "uid");
	crejects("{\"type\":\"history\",\"since\":-5}", "since");
	crejects("{\"type\":\"history\",\"before\":0}", "before");
	crejects("{\"type\":\"history\",\"user\":0}", "user");

#define USAGE(text) usage_parse(text, where, u, &n, &e)
	assert_int_equal(USAGE("{\"type\":\"stopped\",\"job\":3}"), 0);
	assert_int_equal(n, 0);
	assert_int_equal(USAGE("{\"type\":\"stopped\",\"job\":3,\"usage\":[{\"guest\":2,\"cpu_usec\":2000100,"
			       "\"mem_peak\":67108864},{\"guest\":0}]}"), 0);
	assert_int_equal(n, 2);
	assert_true(u[0].guest == 2 && u[0].cpu_usec == 2000100 && u[0].mem_peak == 67108864);
	assert_true(u[1].guest == 0 && u[1].cpu_usec == -1 && u[1].mem_peak == -1);
	/* A node speaks only for its own guests, each once, in range, in the
	 * protocol's fields; anything else leaves every guest unknown. */
	assert_int_equal(USAGE("{\"usage\":[{\"guest\":0},{\"guest\":1,\"cpu_usec\":1}]}"), -1);
	assert_int_equal(n, 0);
	assert_non_null(strstr(e.msg, "guest 1 of the job is not on this node"));
	assert_int_equal(USAGE("{\"usage\":[{\"guest\":0},{\"guest\":0}]}"), -1);
	assert_non_null(strstr(e.msg, "guest 0 a second time"));
	assert_int_equal(USAGE("{\"usage\":[{\"guest\":4}]}"), -1);
	assert_int_equal(USAGE("{\"usage\":[{\"guest\":-1}]}"), -1);
	assert_int_equal(USAGE("{\"usage\":[{\"guest\":0,\"cpu_usec\":-1}]}"), -1);
	assert_non_null(strstr(e.msg, "cpu_usec"));
	assert_int_equal(USAGE("{\"usage\":[{\"guest\":0,\"mem_peak\":9007199254740993}]}"), -1);
	assert_non_null(strstr(e.msg, "mem_peak"));
	assert_int_equal(USAGE("{\"usage\":[{\"guest\":0,\"cpu\":5}]}"), -1);
	assert_non_null(strstr(e.msg, "cpu"));
	assert_int_equal(USAGE("{\"usage\":[1]}"), -1);
	assert_int_equal(USAGE("{\"usage\":{\"guest\":0}}"), -1);
	assert_int_equal(USAGE("{\"usage\":[{},{},{},{},{}]}"), -1);
	assert_non_null(strstr(e.msg, "at most 4"));
#undef USAGE
}

static void job_spec_round_trip(void **state)
{
	struct job_spec j, back;
	struct json_object *o;
	struct verr e;
	char **cmd = calloc(3, sizeof(char *));

	(void)state;
	cmd[0] = strdup("vhpc-mpibench");
	cmd[1] = strdup("PingPong");
	job_spec_defaults(&j);
	j.guests = 3;
	j.ranks = 6;
	j.vcpus = 2;
	j.driver = vhpc_driver_index("container");
	j.name = strdup("bench");
	j.command.v = cmd;
	j.command.n = 2;
	j.scratch = 1ull << 30;
	o = job_spec_to_json(&j);
	assert_int_equal(job_spec_from_json(o, &back, &e), 0);
	assert_int_equal(back.guests, 3);
	assert_int_equal(back.ranks, 6);
	assert_int_equal(back.vcpus, 2);
	assert_string_equal(vhpc_driver_name(back.driver), "container");
	assert_string_equal(back.name, "bench");
	assert_string_equal(back.command.v[1], "PingPong");
	assert_true(back.vmshm);
	assert_true(back.single_copy);
	assert_int_equal(back.scratch, 1ull << 30);
	job_spec_free(&back);
	json_object_put(o);
	/* single_copy: false travels (vhpc submit --no-single-copy), a job
	 * without the key has the default, a bad value is named. */
	j.single_copy = false;
	o = job_spec_to_json(&j);
	assert_int_equal(job_spec_from_json(o, &back, &e), 0);
	assert_false(back.single_copy);
	assert_true(back.vmshm);
	job_spec_free(&back);
	json_object_object_del(o, "single_copy");
	assert_int_equal(job_spec_from_json(o, &back, &e), 0);
	assert_true(back.single_copy);
	job_spec_free(&back);
	json_object_object_add(o, "single_copy", json_object_new_string("off"));
	assert_int_equal(job_spec_from_json(o, &back, &e), -1);
	assert_non_null(strstr(e.msg, "\"single_copy\": expected true or false"));
	json_object_put(o);
	j.single_copy = true;
	/* A scratch size from the wire is checked like one from the command line. */
	o = job_spec_to_json(&j);
	json_object_object_add(o, "scratch", json_object_new_int64(4096));
	assert_int_equal(job_spec_from_json(o, &back, &e), -1);
	assert_non_null(strstr(e.msg, "\"scratch\""));
	json_object_put(o);
	job_spec_free(&j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(user_messages),
		cmocka_unit_test(node_messages),
		cmocka_unit_test(controller_messages),
		cmocka_unit_test(fabric_fields),
		cmocka_unit_test(checkpoint_messages),
		cmocka_unit_test(prepare_restore),
		cmocka_unit_test(image_messages),
		cmocka_unit_test(accounting_messages),
		cmocka_unit_test(ctld_checkpoint_messages),
		cmocka_unit_test(job_spec_round_trip),
	};
	return cmocka_run_group_tests_name("cluster-msg", tests, NULL, NULL);
}
