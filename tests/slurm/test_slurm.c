/* The pure parts of vhpc under Slurm: options, the files the plugin and
 * vhpc-slurmjob exchange, Slurm's lists, the guest layout, what nodes
 * derive from the job id and the site secret, and the PMIx URI rewrite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/chan.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "slurm/holder.h"
#include "slurm/plugin.h"
#include "slurm/slurm.h"

static char why[1024];

static void options_are_checked_and_named(void **state)
{
	struct vs_opts o = { 0 };

	(void)state;
	assert_int_equal(vs_opt_set(&o, "image", "default", why, sizeof(why)), 0);
	assert_true(o.set);
	assert_string_equal(o.image, "default");
	assert_int_equal(vs_opt_set(&o, "mem", "2G", why, sizeof(why)), 0);
	assert_int_equal(o.mem, 2ull << 30);
	assert_int_equal(vs_opt_set(&o, "vcpus", "4", why, sizeof(why)), 0);
	assert_int_equal(o.vcpus, 4);
	assert_int_equal(vs_opt_set(&o, "driver", "kvm", why, sizeof(why)), 0);
	assert_int_equal(vs_opt_set(&o, "no-vmshm", NULL, why, sizeof(why)), 0);
	assert_true(o.no_vmshm);
	assert_false(o.no_single_copy);
	assert_int_equal(vs_opt_set(&o, "no-single-copy", NULL, why, sizeof(why)), 0);
	assert_true(o.no_single_copy);
	assert_int_equal(vs_opt_set(&o, "no-single-copy", "yes", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "--vhpc-no-single-copy"));

	assert_int_equal(vs_opt_set(&o, "image", "a/b", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "--vhpc-image 'a/b'"));
	assert_int_equal(vs_opt_set(&o, "mem", "3X", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "--vhpc-mem '3X'"));
	assert_int_equal(vs_opt_set(&o, "mem", "1M", why, sizeof(why)), -1);
	assert_int_equal(vs_opt_set(&o, "vcpus", "0", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "1..256"));
	assert_int_equal(vs_opt_set(&o, "vcpus", "9999", why, sizeof(why)), -1);
	assert_int_equal(vs_opt_set(&o, "driver", "xen", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "auto, container or kvm"));
	assert_int_equal(vs_opt_set(&o, "no-vmshm", "1", why, sizeof(why)), -1);
	assert_int_equal(vs_opt_set(&o, "colour", "red", why, sizeof(why)), -1);
	/* --vhpc-device: a class, never a path; a count within 1..16 */
	assert_int_equal(vs_opt_set(&o, "device", "../../dev/vfio", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "--vhpc-device"));
	assert_non_null(strstr(why, "not a class name"));
	assert_int_equal(vs_opt_set(&o, "device", "gpu:17", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "1..16"));
	assert_int_equal(vs_opt_set(&o, "device", "gpu:0", why, sizeof(why)), -1);
	assert_int_equal(vs_opt_set(&o, "rdma", "1", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "takes no value"));
}

static void defaults_come_from_the_environment_and_lose_to_options(void **state)
{
	char *env[] = { "SLURM_VHPC_IMAGE=hpc", "SLURM_VHPC_MEM=1G", "SLURM_VHPC_VCPUS=2",
			"SLURM_VHPC_NO_VMSHM=1", "SLURM_VHPC_NO_SINGLE_COPY=1", "SLURM_VHPC_NO_RDMA=1",
			"SLURM_VHPC_DEVICE=gpu:2,nic", "OTHER=x", NULL };
	bool given[VS_NOPTS] = { 0 };
	struct vs_opts o = { 0 };

	(void)state;
	given[2] = true;
	assert_int_equal(vs_opt_set(&o, "vcpus", "3", why, sizeof(why)), 0);
	assert_int_equal(vs_opts_env(&o, given, env, why, sizeof(why)), 0);
	assert_true(o.set);
	assert_string_equal(o.image, "hpc");
	assert_int_equal(o.mem, 1ull << 30);
	assert_int_equal(o.vcpus, 3);
	assert_true(o.no_vmshm);
	assert_true(o.no_single_copy);
	assert_int_equal(o.rdma, 2);
	assert_string_equal(o.devices, "gpu:2,nic");

	/* Only an image makes a job one of guests. */
	char *only_mem[] = { "SLURM_VHPC_MEM=1G", NULL };
	struct vs_opts p = { 0 };
	bool none[VS_NOPTS] = { 0 };

	assert_int_equal(vs_opts_env(&p, none, only_mem, why, sizeof(why)), 0);
	assert_false(p.set);

	char *bad[] = { "SLURM_VHPC_VCPUS=zero", NULL };

	assert_int_equal(vs_opts_env(&p, none, bad, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "SLURM_VHPC_VCPUS 'zero'"));
}

static void options_travel_as_one_line(void **state)
{
	struct vs_opts o = { 0 }, back;
	char line[400];

	(void)state;
	vs_opt_set(&o, "image", "default", why, sizeof(why));
	vs_opt_set(&o, "mem", "768M", why, sizeof(why));
	assert_int_equal(vs_opts_format(&o, line, sizeof(line)), 0);
	assert_string_equal(line, "image=default driver= vcpus=0 mem=805306368 vmshm=1 rdma=auto devices= single_copy=1");
	assert_int_equal(vs_opts_parse(line, &back, why, sizeof(why)), 0);
	assert_string_equal(back.image, "default");
	assert_int_equal(back.mem, 805306368ull);
	assert_false(back.no_vmshm);
	assert_false(back.no_single_copy);
	/* --vhpc-no-single-copy travels; an older prolog's line, without
	 * the key, is a job with single copy; a bad value is named */
	o.no_single_copy = true;
	assert_int_equal(vs_opts_format(&o, line, sizeof(line)), 0);
	assert_non_null(strstr(line, " single_copy=0"));
	assert_int_equal(vs_opts_parse(line, &back, why, sizeof(why)), 0);
	assert_true(back.no_single_copy);
	assert_false(back.no_vmshm);
	o.no_single_copy = false;
	assert_int_equal(vs_opts_parse("image=x driver= vcpus=0 mem=0 vmshm=1 rdma=auto devices=", &back, why, sizeof(why)), 0);
	assert_false(back.no_single_copy);
	assert_int_equal(vs_opts_parse("image=x driver= vcpus=0 mem=0 vmshm=1 rdma=auto devices= single_copy=2", &back,
				       why, sizeof(why)), -1);
	assert_non_null(strstr(why, "single_copy '2': expected 0 or 1"));
	/* the fabric and the devices travel too, and are checked again */
	assert_int_equal(vs_opt_set(&o, "rdma", NULL, why, sizeof(why)), 0);
	assert_int_equal(vs_opt_set(&o, "device", "gpu:2", why, sizeof(why)), 0);
	assert_int_equal(vs_opt_set(&o, "device", "nic", why, sizeof(why)), 0);
	assert_int_equal(vs_opt_set(&o, "device", "gpu:1", why, sizeof(why)), 0);
	assert_int_equal(vs_opts_format(&o, line, sizeof(line)), 0);
	assert_string_equal(line, "image=default driver= vcpus=0 mem=805306368 vmshm=1 rdma=on devices=nic,gpu:1 single_copy=1");
	assert_int_equal(vs_opts_parse(line, &back, why, sizeof(why)), 0);
	assert_int_equal(back.rdma, 1);
	assert_string_equal(back.devices, "nic,gpu:1");
	assert_int_equal(vs_opt_set(&o, "no-rdma", NULL, why, sizeof(why)), 0);
	assert_int_equal(o.rdma, 2);
	assert_int_equal(vs_opts_parse("image=x driver= vcpus=0 mem=0 vmshm=1 rdma=maybe devices=", &back, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "rdma 'maybe'"));
	assert_int_equal(vs_opts_parse("image=x driver= vcpus=0 mem=0 vmshm=1 rdma=on devices=../gpu", &back, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not a class name"));
	assert_int_equal(vs_opts_parse("image=x driver= vcpus=0 mem=0", &back, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "vmshm missing"));
	assert_int_equal(vs_opts_parse("image=x driver= vcpus=0 mem=0 vmshm=1 vmshm=0", &back, why, sizeof(why)), -1);
	assert_int_equal(vs_opts_parse("image=x driver= vcpus=0 mem=12 vmshm=1", &back, why, sizeof(why)), -1);
	assert_int_equal(vs_opts_parse("image=../x driver= vcpus=0 mem=0 vmshm=1", &back, why, sizeof(why)), -1);
	assert_int_equal(vs_opts_parse("evil=1 image=x driver= vcpus=0 mem=0 vmshm=1", &back, why, sizeof(why)), -1);
}

static void kv_files_are_strict(void **state)
{
	struct vs_kvfile f;
	const char ok[] = VS_OPTS_MAGIC "\noptions image=x\nuid 1000\nuid 2\n";

	(void)state;
	assert_int_equal(vs_kv_parse(ok, strlen(ok), VS_OPTS_MAGIC, &f, why, sizeof(why)), 0);
	assert_int_equal(f.n, 3);
	assert_string_equal(vs_kv_get(&f, "options"), "image=x");
	assert_string_equal(vs_kv_get(&f, "uid"), "1000");
	assert_null(vs_kv_get(&f, "gid"));
	vs_kv_free(&f);
	assert_int_equal(vs_kv_parse("nope\n", 5, VS_OPTS_MAGIC, &f, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "line 1"));
	const char badkey[] = VS_OPTS_MAGIC "\nUID 1\n";

	assert_int_equal(vs_kv_parse(badkey, strlen(badkey), VS_OPTS_MAGIC, &f, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "line 2: bad key"));
	const char tab[] = VS_OPTS_MAGIC "\nuid 1\tx\n";

	assert_int_equal(vs_kv_parse(tab, strlen(tab), VS_OPTS_MAGIC, &f, why, sizeof(why)), -1);
	const char empty[] = VS_OPTS_MAGIC "\n\nuid 1\n";

	assert_int_equal(vs_kv_parse(empty, strlen(empty), VS_OPTS_MAGIC, &f, why, sizeof(why)), -1);
	const char nul[] = VS_OPTS_MAGIC "\nuid 1\0\n";

	assert_int_equal(vs_kv_parse(nul, sizeof(nul) - 1, VS_OPTS_MAGIC, &f, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "NUL"));
}

static void state_files_round_trip(void **state)
{
	struct vs_state *s = calloc(1, sizeof(*s)), *b = calloc(1, sizeof(*b));
	char *text;

	(void)state;
	s->status = VS_READY;
	s->holder = 1234;
	snprintf(s->job, sizeof(s->job), "17s1");
	snprintf(s->jobdir, sizeof(s->jobdir), "/run/vhpc/slurm/jobs/17s1");
	snprintf(s->driver, sizeof(s->driver), "container");
	snprintf(s->key, sizeof(s->key), "/run/vhpc/slurm/jobs/17s1/shared/job.key");
	s->nenv = 2;
	snprintf(s->env[0], sizeof(s->env[0]), "VHPC_JOB=17");
	snprintf(s->env[1], sizeof(s->env[1]), "OMPI_MCA_btl=self,vmshm,tcp");
	s->nguests = 2;
	s->g[0] = (struct vs_guest){ .index = 2, .pid = 99, .netns = "vhpc-17s1-2", .cpus = "0-1", .mems = "0",
				     .sock = "/x/ctl2/ctl.sock", .addr = "10.213.0.4" };
	s->g[1] = (struct vs_guest){ .index = 3, .pid = 0, .cpus = "2", .mems = "", .sock = "/x/kvm3/hv/vsock",
				     .vsock_port = 7707, .addr = "10.213.0.5" };
	assert_non_null(text = vs_state_text(s));
	assert_int_equal(vs_state_parse(text, strlen(text), b, why, sizeof(why)), 0);
	assert_int_equal(b->status, VS_READY);
	assert_int_equal(b->holder, 1234);
	assert_string_equal(b->jobdir, s->jobdir);
	assert_int_equal(b->nenv, 2);
	assert_string_equal(b->env[1], "OMPI_MCA_btl=self,vmshm,tcp");
	assert_int_equal(b->nguests, 2);
	assert_int_equal(b->g[0].index, 2);
	assert_int_equal(b->g[0].pid, 99);
	assert_string_equal(b->g[0].netns, "vhpc-17s1-2");
	assert_string_equal(b->g[1].netns, "");
	assert_string_equal(b->g[1].mems, "");
	assert_int_equal(b->g[1].vsock_port, 7707);
	free(text);

	/* A failure carries its reason, on one line. */
	memset(s, 0, sizeof(*s));
	s->status = VS_FAILED;
	s->holder = 5;
	snprintf(s->error, sizeof(s->error), "no image 'x'\nsecond line");
	text = vs_state_text(s);
	assert_int_equal(vs_state_parse(text, strlen(text), b, why, sizeof(why)), 0);
	assert_int_equal(b->status, VS_FAILED);
	assert_string_equal(b->error, "no image 'x'");
	free(text);

	const char *bad[] = {
		VS_STATE_MAGIC "\nstatus ready\n",                                   /* no guests */
		VS_STATE_MAGIC "\nstatus failed\n",                                  /* no reason */
		VS_STATE_MAGIC "\nstatus maybe\n",
		VS_STATE_MAGIC "\nholder -3\n",
		VS_STATE_MAGIC "\nguest 1 2 ../x 0 0 a s 0\n",                       /* a path for a netns */
		VS_STATE_MAGIC "\nguest 1 2 n 0 0 a s\n",                            /* a word short */
		VS_STATE_MAGIC "\nenv =x\n",
		VS_STATE_MAGIC "\nwhat 1\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(vs_state_parse(bad[i], strlen(bad[i]), b, why, sizeof(why)), -1);
	free(s);
	free(b);
}

static void hostlists_expand_as_slurm_writes_them(void **state)
{
	char **n;
	int c;

	(void)state;
	assert_int_equal(vs_hostlist_expand("n[1-3,07-08],gpu1,rack[1-2]-c[01-02]", &n, &c, why, sizeof(why)), 0);
	assert_int_equal(c, 10);
	assert_string_equal(n[0], "n1");
	assert_string_equal(n[2], "n3");
	assert_string_equal(n[3], "n07");
	assert_string_equal(n[4], "n08");
	assert_string_equal(n[5], "gpu1");
	assert_string_equal(n[6], "rack1-c01");
	assert_string_equal(n[7], "rack1-c02");
	assert_string_equal(n[9], "rack2-c02");
	free(n);
	assert_int_equal(vs_hostlist_expand("node", &n, &c, why, sizeof(why)), 0);
	assert_int_equal(c, 1);
	free(n);
	const char *bad[] = { "", "n[1-", "n[3-1]", "n]1[", "n[1-3", "a b", "n[[1]]", "n[1-9999999]", "n[x]", "n;1" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(vs_hostlist_expand(bad[i], &n, &c, why, sizeof(why)), -1);
}

static void cpus_per_node_expand(void **state)
{
	int v[8], n;

	(void)state;
	assert_int_equal(vs_cpus_per_node("2(x3),1,4(x2)", v, 8, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 6);
	assert_int_equal(v[0], 2);
	assert_int_equal(v[2], 2);
	assert_int_equal(v[3], 1);
	assert_int_equal(v[5], 4);
	assert_int_equal(vs_cpus_per_node("2(x9)", v, 8, &n, why, sizeof(why)), -1);
	assert_int_equal(vs_cpus_per_node("2(3)", v, 8, &n, why, sizeof(why)), -1);
	assert_int_equal(vs_cpus_per_node("0", v, 8, &n, why, sizeof(why)), -1);
	assert_int_equal(vs_cpus_per_node("2,", v, 8, &n, why, sizeof(why)), -1);
	assert_int_equal(vs_cpus_per_node("", v, 8, &n, why, sizeof(why)), -1);
}

static void every_node_numbers_the_guests_alike(void **state)
{
	int cpus[] = { 4, 2, 5 }, first, count, total;

	(void)state;
	assert_int_equal(vs_layout(cpus, 3, 2, 0, &first, &count, &total, why, sizeof(why)), 0);
	assert_int_equal(first, 0);
	assert_int_equal(count, 2);
	assert_int_equal(total, 5);
	assert_int_equal(vs_layout(cpus, 3, 2, 1, &first, &count, &total, why, sizeof(why)), 0);
	assert_int_equal(first, 2);
	assert_int_equal(count, 1);
	assert_int_equal(vs_layout(cpus, 3, 2, 2, &first, &count, &total, why, sizeof(why)), 0);
	assert_int_equal(first, 3);
	assert_int_equal(count, 2);
	assert_int_equal(vs_layout(cpus, 3, 3, 0, &first, &count, &total, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "node 1 of the job has 2 CPUs, fewer than --vhpc-vcpus=3"));
	assert_int_equal(vs_layout(cpus, 3, 1, 3, &first, &count, &total, why, sizeof(why)), -1);
}

/* Each guest's node, for the static forwarding entries: the same cut as
 * vs_layout's, so node i's own guests [first, first + count) are its own. */
static void every_node_knows_where_each_guest_is(void **state)
{
	int cpus[] = { 4, 2, 5 }, first, count, total;
	uint32_t addr[] = { 0xc6120001, 0xc6120002, 0xc6120003 }, out[8];

	(void)state;
	assert_int_equal(vs_layout(cpus, 3, 2, 1, &first, &count, &total, why, sizeof(why)), 0);
	memset(out, 0, sizeof(out));
	assert_int_equal(vs_guest_nodes(cpus, 3, 2, addr, out, total), 0);
	assert_int_equal(out[0], addr[0]);
	assert_int_equal(out[1], addr[0]);
	assert_int_equal(out[first], addr[1]);
	assert_int_equal(out[3], addr[2]);
	assert_int_equal(out[4], addr[2]);
	assert_int_equal(out[5], 0);
	/* a total that is not the layout's is refused, not overrun */
	assert_int_equal(vs_guest_nodes(cpus, 3, 2, addr, out, 4), -1);
	assert_int_equal(vs_guest_nodes(cpus, 3, 2, addr, out, 6), -1);
	assert_int_equal(vs_guest_nodes(cpus, 3, 3, addr, out, 5), -1);
}

static void local_ids_are_the_agents_and_unlike_other_schedulers(void **state)
{
	char id[16];

	(void)state;
	assert_int_equal(vs_local_id(17, 0, id, sizeof(id)), 0);
	assert_string_equal(id, "17s0");
	assert_int_equal(vs_local_id(99999999, 32767, id, sizeof(id)), 0);
	assert_string_equal(id, "99999999svvv");
	assert_null(strchr(id, 'x'));
	assert_int_equal(vs_local_id(123, 40, id, sizeof(id)), 0);
	assert_string_equal(id, "123s18");
	assert_int_equal(vs_local_id(100000000, 0, id, sizeof(id)), -1);
	assert_int_equal(vs_local_id(1, 32768, id, sizeof(id)), -1);
}

static void keys_and_vnis_come_from_job_and_secret(void **state)
{
	const uint8_t s1[] = "0123456789abcdef0123", s2[] = "fedcba9876543210fedc";
	uint8_t a[CHAN_KEY_LEN], b[CHAN_KEY_LEN], c[CHAN_KEY_LEN];

	(void)state;
	vs_job_key(s1, 20, 5, a);
	vs_job_key(s1, 20, 5, b);
	assert_memory_equal(a, b, CHAN_KEY_LEN);
	vs_job_key(s1, 20, 6, c);
	assert_memory_not_equal(a, c, CHAN_KEY_LEN);
	vs_job_key(s2, 20, 5, c);
	assert_memory_not_equal(a, c, CHAN_KEY_LEN);
	/* Jobs near in time never share a VNI; every VNI is in range; one
	 * job's VNI does not give the next one's (an offset of the id did). */
	static uint32_t seen[3000];
	int next = 0;

	for (uint32_t j = 1; j < 3000; j++) {
		uint32_t v = vs_job_vni(s1, 20, j), w = vs_job_vni(s1, 20, j + 1);

		assert_true(v >= 1 && v <= VHPC_VNI_MAX);
		assert_int_not_equal(v, w);
		next += w == v + 1;
		seen[j] = v;
		for (uint32_t k = 1; k < j; k++)
			assert_int_not_equal(seen[k], v);
	}
	assert_true(next < 3);
	/* the top of the id range wraps onto the bottom, still one-to-one */
	assert_int_equal(vs_job_vni(s1, 20, VHPC_VNI_MAX + 1), vs_job_vni(s1, 20, 1));
	assert_int_equal(vs_job_vni(s1, 20, 7), vs_job_vni(s1, 20, 7));
	assert_int_not_equal(vs_job_vni(s1, 20, 7), vs_job_vni(s2, 20, 7));
}

static void the_secret_must_be_roots_alone(void **state)
{
	char path[] = "/tmp/vhpc-test-secret.XXXXXX";
	uint8_t buf[64];
	size_t n;
	struct verr e;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "short", 5), 5);
	close(fd);
	if (getuid() == 0) {
		assert_int_equal(vs_secret_load(path, buf, sizeof(buf), &n, &e), -1);
		assert_non_null(strstr(e.msg, "at least 16"));
		fd = open(path, O_WRONLY | O_APPEND);
		assert_int_equal(write(fd, "0123456789abcdef", 16), 16);
		close(fd);
		assert_int_equal(vs_secret_load(path, buf, sizeof(buf), &n, &e), 0);
		assert_int_equal(n, 21);
		chmod(path, 0644);
		assert_int_equal(vs_secret_load(path, buf, sizeof(buf), &n, &e), -1);
		assert_non_null(strstr(e.msg, "mode 0600"));
	}
	unlink(path);
	assert_int_equal(vs_secret_load(path, buf, sizeof(buf), &n, &e), -1);
}

static void peers_come_from_the_admins_file(void **state)
{
	char path[] = "/tmp/vhpc-test-peers.XXXXXX";
	uint32_t a;
	struct verr e;
	int fd = mkstemp(path);
	const char text[] = "# nodes\nn1 198.18.2.11\n\nn2   198.18.2.12  # fast net\n";

	(void)state;
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	assert_int_equal(vs_underlay_addr(path, "n2", &a, &e), 0);
	assert_int_equal(a, (198u << 24) | (18u << 16) | (2u << 8) | 12u);
	assert_int_equal(vs_underlay_addr(path, "n3", &a, &e), -1);
	assert_non_null(strstr(e.msg, "names no node n3"));
	fd = open(path, O_WRONLY | O_APPEND);
	assert_int_equal(write(fd, "n4 nowhere\nn5 a b\n", 18), 18);
	close(fd);
	assert_int_equal(vs_underlay_addr(path, "n4", &a, &e), -1);
	assert_non_null(strstr(e.msg, "node n4: 'nowhere' is not an IPv4 address"));
	assert_int_equal(vs_underlay_addr(path, "n9", &a, &e), -1);
	assert_non_null(strstr(e.msg, ":6: expected NAME VALUE"));
	unlink(path);
	/* Without a file: the name, resolved. */
	assert_int_equal(vs_underlay_addr(NULL, "localhost", &a, &e), 0);
	assert_int_equal(a, 0x7f000001u);
}

static void pmix_uris_point_at_the_relay(void **state)
{
	char out[256];
	int port;

	(void)state;
	assert_int_equal(vs_pmix_uri_rewrite("pmix-server.4982;tcp4://127.0.0.1:41919", 5000, out, sizeof(out), &port), 0);
	assert_string_equal(out, "pmix-server.4982;tcp4://127.0.0.1:5000");
	assert_int_equal(port, 41919);
	assert_int_equal(vs_pmix_uri_rewrite("pmix-server.1;tcp4://10.0.0.1:41919", 5000, out, sizeof(out), &port), -1);
	assert_int_equal(vs_pmix_uri_rewrite("pmix-server.1;tcp4://127.0.0.1:", 5000, out, sizeof(out), &port), -1);
	assert_int_equal(vs_pmix_uri_rewrite("pmix-server.1;tcp4://127.0.0.1:99999", 5000, out, sizeof(out), &port), -1);
	assert_int_equal(vs_pmix_uri_rewrite("pmix-server.1;tcp4://127.0.0.1:80x", 5000, out, sizeof(out), &port), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(options_are_checked_and_named),
		cmocka_unit_test(defaults_come_from_the_environment_and_lose_to_options),
		cmocka_unit_test(options_travel_as_one_line),
		cmocka_unit_test(kv_files_are_strict),
		cmocka_unit_test(state_files_round_trip),
		cmocka_unit_test(hostlists_expand_as_slurm_writes_them),
		cmocka_unit_test(cpus_per_node_expand),
		cmocka_unit_test(every_node_numbers_the_guests_alike),
		cmocka_unit_test(every_node_knows_where_each_guest_is),
		cmocka_unit_test(local_ids_are_the_agents_and_unlike_other_schedulers),
		cmocka_unit_test(keys_and_vnis_come_from_job_and_secret),
		cmocka_unit_test(the_secret_must_be_roots_alone),
		cmocka_unit_test(peers_come_from_the_admins_file),
		cmocka_unit_test(pmix_uris_point_at_the_relay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
