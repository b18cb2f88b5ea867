/*
 * A Slurm job's part on this node as the node agent's lifecycle wants it
 * (struct na_job_spec), from what the job prolog recorded (the options
 * and the job as Slurm gave them: <run dir>/slurm/<job>.opts), the cores
 * Slurm gave the job here (the extern step's S_JOB_ALLOC_CORES), the
 * cluster file and the site secret.  Every value from the opts file came
 * from the job's user and is checked again here.
 */
#include "lib/cluster.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/jobpaths.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/tuning.h"
#include "images/images.h"
#include "nodeagent/nodeagent.h"
#include "slurm/holder.h"
#include "slurm/spec.h"

#include <limits.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int opts_fields(struct vs_job *j, const char *path, struct verr *err)
{
	struct vs_kvfile f;
	const char *v;
	long long n;
	char why[600];
	int rc = -1;

	if (vs_kv_load(path, VS_OPTS_MAGIC, &f, why, sizeof(why)) < 0)
		return verr_set(err, "%s", why);
	if (!(v = vs_kv_get(&f, "options")) || vs_opts_parse(v, &j->o, why, sizeof(why)) < 0) {
		verr_set(err, "%s: %s", path, v ? why : "no options");
		goto out;
	}
	if (!(v = vs_kv_get(&f, "uid")) || parse_ll(v, 0, INT32_MAX, &n) < 0) {
		verr_set(err, "%s: uid", path);
		goto out;
	}
	j->uid = (uid_t)n;
	if (!(v = vs_kv_get(&f, "gid")) || parse_ll(v, 0, INT32_MAX, &n) < 0) {
		verr_set(err, "%s: gid", path);
		goto out;
	}
	j->gid = (gid_t)n;
	j->have_ids = true;
	if (!(v = vs_kv_get(&f, "node")) || !ident_ok(v, sizeof(j->node) - 1)) {
		verr_set(err, "%s: node", path);
		goto out;
	}
	snprintf(j->node, sizeof(j->node), "%s", v);
	if (!(v = vs_kv_get(&f, "nodelist")) || vs_hostlist_expand(v, &j->names, &j->nnodes, why, sizeof(why)) < 0) {
		verr_set(err, "%s: nodelist: %s", path, v ? why : "missing");
		goto out;
	}
	if (!(v = vs_kv_get(&f, "cpus_per_node")) ||
	    vs_cpus_per_node(v, j->cpus, VS_MAX_NODES, &j->ncpus, why, sizeof(why)) < 0 || j->ncpus != j->nnodes) {
		verr_set(err, "%s: cpus_per_node: %s", path, v ? (j->ncpus != j->nnodes ? "not one count per node" : why)
							   : "missing");
		goto out;
	}
	/* A folder the job may not share is the planner's to refuse. */
	v = vs_kv_get(&f, "workdir");
	snprintf(j->workdir, sizeof(j->workdir), "%s", v && *v == '/' ? v : "");
	rc = 0;
out:
	vs_kv_free(&f);
	return rc;
}

/* The job's guests here are placed on the CPUs Slurm gave it here only:
 * Slurm's core k of the node is the k-th core of the node's CPUs (all of
 * the machine's, unless the site's cpus file gives it part of them). */
static int cpus_here(struct vs_job *j, const char *cores, const char *cpus_file, struct verr *err)
{
	int c[4096], *pus = NULL, npus = 0;
	size_t nc = 0;

	if (!cores || cpulist_parse(cores, c, 4096, &nc) < 0 || !nc)
		return verr_set(err, "the job's cores on node %s: '%.60s' is not a core list", j->node,
				cores ? cores : "");
	if (na_topo_load(&j->topo, NULL, err) < 0)
		return verr_wrap(err, "node %s", j->node);
	if (cpus_file && *cpus_file) {
		char v[256];
		size_t n = 0;

		if (vs_node_value(cpus_file, j->node, v, sizeof(v), err) < 0)
			return -1;
		if (cpulist_parse(v, c + nc, 4096 - nc, &n) < 0 || !n ||
		    na_topo_restrict(j->topo, c + nc, (int)n, err) < 0)
			return verr_set(err, "%s: node %s: '%s': %s", cpus_file, j->node, v,
					n ? err->msg : "expected a cpu list such as 0-3");
	}
	if (na_topo_core_pus(j->topo, c, (int)nc, &pus, &npus, err) < 0)
		return verr_wrap(err, "node %s", j->node);
	if (na_topo_restrict(j->topo, pus, npus, err) < 0) {
		free(pus);
		return -1;
	}
	free(pus);
	return 0;
}

static int layout(struct vs_job *j, struct verr *err)
{
	uint64_t pool = 1ull << (32 - j->cl.job_pool.prefix);
	char a[20], why[300];
	int first;

	j->node_index = -1;
	for (int i = 0; i < j->nnodes; i++)
		if (!strcmp(j->names[i], j->node))
			j->node_index = i;
	if (j->node_index < 0)
		return verr_set(err, "node %s is not in the job's node list", j->node);
	j->vcpus = j->o.vcpus ? j->o.vcpus : 1;
	if (vs_layout(j->cpus, j->nnodes, j->vcpus, j->node_index, &first, &j->nguests, &j->ntotal, why,
		      sizeof(why)) < 0)
		return verr_set(err, "%s", why);
	if ((uint64_t)j->ntotal + 3 > pool)
		return verr_set(err, "the job has %d guests; the job network pool %s/%d has addresses for %llu "
				"(job_network.pool in the cluster file)", j->ntotal,
				ipv4_format(j->cl.job_pool.addr, a, sizeof(a)), (int)j->cl.job_pool.prefix,
				(unsigned long long)pool - 3);
	if (vs_local_id(j->id, j->node_index, j->local, sizeof(j->local)) < 0)
		return verr_set(err, "job %u, node %d: no node agent job id for them", j->id, j->node_index);
	j->index = calloc((size_t)j->nguests, sizeof(int));
	j->ranks = calloc((size_t)j->ntotal, sizeof(int));
	if (!j->index || !j->ranks)
		return verr_set(err, "out of memory");
	for (int k = 0; k < j->nguests; k++)
		j->index[k] = first + k;
	for (int g = 0; g < j->ntotal; g++)
		j->ranks[g] = j->vcpus;
	return 0;
}

static int network(struct vs_job *j, const char *secret_path, const char *peers, struct verr *err)
{
	uint8_t secret[4096];
	size_t slen;

	if (!secret_path || !*secret_path)
		return verr_set(err, "no site secret (plugstack.conf: secret=FILE)");
	if (vs_secret_load(secret_path, secret, sizeof(secret), &slen, err) < 0)
		return -1;
	vs_job_key(secret, slen, j->id, j->s.key);
	j->s.vni = vs_job_vni(secret, slen, j->id);
	sodium_memzero(secret, sizeof(secret));
	if (vs_underlay_addr(peers, j->node, &j->s.underlay, err) < 0)
		return -1;
	if (!(j->peers = calloc((size_t)j->nnodes, sizeof(uint32_t))) ||
	    !(j->addr = calloc((size_t)j->nnodes, sizeof(uint32_t))) ||
	    !(j->guest_node = calloc((size_t)j->ntotal, sizeof(uint32_t))))
		return verr_set(err, "out of memory");
	for (int i = 0; i < j->nnodes; i++) {
		if (i == j->node_index)
			j->addr[i] = j->s.underlay;
		else if (vs_underlay_addr(peers, j->names[i], &j->addr[i], err) < 0)
			return -1;
		else
			j->peers[j->npeers++] = j->addr[i];
	}
	if (vs_guest_nodes(j->cpus, j->nnodes, j->vcpus, j->addr, j->guest_node, j->ntotal) < 0)
		return verr_set(err, "job %u: its guests per node do not add up to %d", j->id, j->ntotal);
	return 0;
}

static int driver(struct vs_job *j, struct verr *err)
{
	/* The plugin checked it where the user typed it; this is the word
	 * that reached the node, which the job's user could have changed. */
	if (j->o.driver[0] && vhpc_driver_index(j->o.driver) < 0)
		return verr_set(err, "driver '%s': unknown", j->o.driver);
	return 0;
}

static int user(struct vs_job *j, struct verr *err)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	struct job_spec js = { .workdir = j->workdir[0] ? j->workdir : NULL };

	if (getpwuid_r(j->uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return verr_set(err, "the job's user (uid %u) has no account on node %s", (unsigned)j->uid, j->node);
	return job_paths_plan(&j->cl, &js, j->uid, &j->paths, err);
}

/* --vhpc-rdma, --vhpc-no-rdma, --vhpc-device: the fabric's VLAN or pkey
 * from the job's id within the pool, the same on every node of the job
 * (lib/fabric_local.h), and this node's functions for its guests.  The
 * words came through a file the job's user could have written: checked
 * again (job_device_parse) before use. */
static int fabric(struct vs_job *j, struct verr *err)
{
	struct job_spec js = { .rdma = j->o.rdma };
	char buf[sizeof(j->o.devices)], *v[JOB_DEVICES_MAX + 1] = { 0 }, *save = NULL, why[256], cls[FABRIC_CLASS_MAX + 1];
	size_t n = 0;
	int cnt;

	if (js.rdma < JOB_RDMA_AUTO || js.rdma > JOB_RDMA_OFF)
		return verr_set(err, "rdma: unknown setting");
	snprintf(buf, sizeof(buf), "%s", j->o.devices);
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		if (n == JOB_DEVICES_MAX || job_device_parse(w, cls, &cnt, why, sizeof(why)) < 0)
			return verr_set(err, "devices: %s", n == JOB_DEVICES_MAX ? "too many classes" : why);
		v[n++] = w;
	}
	js.devices = (struct cf_strlist){ v, n };
	return fabric_local_claim(&j->cl, j->node, &js, j->nguests, (long long)j->id, &j->fab, err);
}

int vs_job_load(struct vs_job *j, uint32_t id, const char *opts_path, const char *cores, const struct vs_site *site,
		struct verr *err)
{
	struct na_job_spec *s = &j->s;

	memset(j, 0, sizeof(*j));
	j->id = id;
	if (opts_fields(j, opts_path, err) < 0)
		return -1;
	if (cluster_load(NULL, &j->cl, err) < 0)
		return -1;
	j->have_cl = true;
	if (cpus_here(j, cores, site->cpus, err) < 0 || layout(j, err) < 0 || network(j, site->secret, site->peers, err) < 0 ||
	    driver(j, err) < 0 || user(j, err) < 0)
		return -1;
	if (fabric(j, err) < 0)
		return -1;
	na_job_spec_from(s, &(struct job_spec){ .image = j->o.image[0] ? j->o.image : NULL,
		.driver = vhpc_driver_index(j->o.driver), .mem = j->o.mem, .vmshm = !j->o.no_vmshm,
		.single_copy = !j->o.no_single_copy }, &j->cl);
	s->rdma = j->fab.rdma;
	s->rdma_asked = j->o.rdma == JOB_RDMA_ON;
	s->fabric_link = j->fab.link;
	s->fabric_vlan = j->fab.vlan;
	s->fabric_pkey = (uint16_t)j->fab.pkey;
	s->fabric_subnet = j->fab.subnet;
	s->pci = j->fab.pci_v;
	s->pci_guest = j->fab.pci_guest;
	s->npci = j->fab.npci;
	s->fabric_node = j->fab.node;
	snprintf(j->label, sizeof(j->label), "%u", id);
	snprintf(j->host_id, sizeof(j->host_id), "%s:%s", na_boot_id(), j->node);
	s->label = j->label;
	s->nguests = j->nguests;
	s->index = j->index;
	s->ntotal = j->ntotal;
	s->ranks = j->ranks;
	/* Every job network is a world of its own (its VNI, its namespaces):
	 * each may take the whole pool, and nodes need not agree on a part. */
	s->subnet = j->cl.job_pool;
	s->topo = j->topo;
	s->vcpus = j->vcpus;
	s->host_id = j->host_id;
	s->binds = &j->paths.binds;
	s->uid = j->uid;
	s->gid = j->gid;
	s->peers = j->peers;
	s->npeers = j->npeers;
	s->guest_node = j->guest_node;
	s->wg = j->cl.wg.key ? &j->cl.wg : NULL;
	return 0;
}

void vs_job_free(struct vs_job *j)
{
	free(j->names);
	free(j->index);
	free(j->ranks);
	free(j->peers);
	free(j->addr);
	free(j->guest_node);
	if (j->topo)
		na_topo_free(j->topo);
	fabric_local_release(&j->fab);
	if (j->have_cl)
		cluster_free(&j->cl);
	sodium_memzero(j->s.key, sizeof(j->s.key));
	memset(j, 0, sizeof(*j));
}
