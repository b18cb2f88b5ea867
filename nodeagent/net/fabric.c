/*
 * A job's part of the node's RDMA fabric (net.h, "fabric"): its VLAN on
 * the fabric link, and per guest a macvlan and a soft-RoCE device that
 * only the guest's network namespace has.
 *
 * Why so, on Linux 7.3 (tried in the lab, nodeagent/README.md): rxe keeps
 * a UDP socket per network namespace, made in the namespace of the netdev
 * it is added on, so the device must be made inside the guest's namespace
 * on the guest's own interface; a node-wide device with a GID for a
 * macvlan in a guest receives nothing.  In exclusive netns mode a new RDMA
 * device still lands in the initial namespace, whatever namespace asked,
 * so the agent moves it from there (RDMA_NLDEV_CMD_SET with the guest's
 * netns) before any guest runs.
 *
 * The VLAN device lives in the job's network namespace, not the node's:
 * there the node's own stack would take what guests send on the VLAN as
 * its own (weak host: it answers ARP for its addresses on any interface),
 * so a guest with a socket bound to its fabric interface could reach
 * another node's UDP and TCP listeners, one way, across the VLAN.  In the
 * job's namespace nothing answers on it and nothing is forwarded.
 */
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"
#include "nodeagent/nodeagent.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/macvlan.h>
#include <netlink/route/link/vlan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The initial network namespace, where exclusive mode puts new RDMA
 * devices: PID 1's (an agent of a test cluster runs in a node namespace
 * of its own). */
#define INIT_NETNS "/proc/1/ns/net"

static void vlan_name(const char *job, char *buf, size_t len)
{
	snprintf(buf, len, "vf%s", job);
}

static void rdma_name(const char *job, int index, char *buf, size_t len)
{
	snprintf(buf, len, "vhpc-%s-%d", job, index);
}

/* An interface name an admin wrote in the cluster file: plain, short. */
static bool ifname_ok(const char *n)
{
	size_t l = n ? strlen(n) : 0;

	if (l == 0 || l >= IFNAMSIZ || !strcmp(n, ".") || !strcmp(n, ".."))
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '-' || *p == '_'))
			return false;
	return true;
}

/* 1 and *idx, 0 if there is no such link. */
static int find_link(struct nl_sock *sk, const char *name, int *idx, int *mtu, struct verr *err)
{
	struct rtnl_link *l;
	int rc = rtnl_link_get_kernel(sk, 0, name, &l);

	if (rc == -NLE_NODEV || rc == -NLE_OBJ_NOTFOUND)
		return 0;
	if (rc < 0)
		return verr_set(err, "link %s: %s", name, nl_geterror(rc));
	*idx = rtnl_link_get_ifindex(l);
	if (mtu)
		*mtu = (int)rtnl_link_get_mtu(l);
	rtnl_link_put(l);
	return 1;
}

static int link_up(struct nl_sock *sk, const char *name, struct verr *err)
{
	struct rtnl_link *l = NULL, *c = rtnl_link_alloc();
	int rc;

	if (!c)
		return verr_set(err, "netlink: out of memory");
	if ((rc = rtnl_link_get_kernel(sk, 0, name, &l)) >= 0) {
		rtnl_link_set_flags(c, IFF_UP);
		rc = rtnl_link_change(sk, l, c, 0);
		rtnl_link_put(l);
	}
	rtnl_link_put(c);
	return rc < 0 ? verr_set(err, "link %s: set up: %s", name, nl_geterror(rc)) : 0;
}

/* ------------------------------------------------------------ create */

struct fab_ctx {
	const struct na_fabric_req *r;
	struct na_fabric *f;
	int k;                         /* the guest being made */
	int lower, mtu;                /* the VLAN device */
	int netns_fd;                  /* the guest's, for the move */
	struct nl_sock *job_sk;        /* a socket of the job's namespace */
};

/* The job's network namespace (net.c names it so). */
static void job_netns_name(const char *job, char *buf, size_t len)
{
	snprintf(buf, len, "vhpc-%s", job);
}

/* Run in the job's namespace: a netlink socket that stays in it. */
static int open_job_sk(void *arg, struct verr *err)
{
	struct fab_ctx *c = arg;

	return (c->job_sk = na_nl_open(NETLINK_ROUTE, err)) ? 0 : -1;
}

/* From the agent's namespace: the job's VLAN device on the fabric link,
 * made straight into the job's namespace (file comment). */
static int make_vlan(struct fab_ctx *c, struct nl_sock *sk, struct verr *err)
{
	char name[16], ns[64], path[PATH_MAX];
	struct rtnl_link *v;
	int parent, rc, found, fd;

	if ((found = find_link(sk, c->r->link, &parent, NULL, err)) < 0)
		return -1;
	if (!found)
		return verr_set(err, "fabric link %s: no such interface on this node", c->r->link);
	job_netns_name(c->r->job, ns, sizeof(ns));
	snprintf(path, sizeof(path), "%s/%s", NA_NETNS_DIR, ns);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return verr_errno(err, "fabric: the job's network namespace %s", path);
	if (na_netns_run(ns, open_job_sk, c, err) < 0) {
		close(fd);
		return -1;
	}
	vlan_name(c->r->job, name, sizeof(name));
	if (!(v = rtnl_link_vlan_alloc())) {
		close(fd);
		return verr_set(err, "netlink: out of memory");
	}
	rtnl_link_set_name(v, name);
	rtnl_link_set_link(v, parent);
	rtnl_link_vlan_set_id(v, (uint16_t)c->r->vlan);
	rtnl_link_set_ns_fd(v, (uint32_t)fd);
	rc = rtnl_link_add(sk, v, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_link_put(v);
	close(fd);
	if (rc == -NLE_EXIST)
		return verr_set(err, "fabric link %s: VLAN %d (device %s) exists already: another job holds that VLAN "
				"here, or a dead one left it (vhpc cleanup)", c->r->link, c->r->vlan, name);
	if (rc < 0)
		return verr_set(err, "fabric link %s: add VLAN %d as %s: %s", c->r->link, c->r->vlan, name,
				nl_geterror(rc));
	snprintf(c->f->vlan_dev, sizeof(c->f->vlan_dev), "%s", name);
	if (link_up(c->job_sk, name, err) < 0 || find_link(c->job_sk, name, &c->lower, &c->mtu, err) <= 0)
		return -1;
	return link_up(sk, c->r->link, err);
}

/* From the job's namespace, where its lower device is: guest k's macvlan,
 * made straight into the guest's (nothing of it ever carries a name in
 * the job's). */
static int make_macvlan(struct fab_ctx *c, struct nl_sock *sk, struct verr *err)
{
	struct na_fabric_guest *g = &c->f->g[c->k];
	struct rtnl_link *m = rtnl_link_macvlan_alloc();
	struct nl_addr *mac;
	uint8_t hw[6];
	int rc;

	if (!m)
		return verr_set(err, "netlink: out of memory");
	na_guest_mac(g->addr, hw);
	if (!(mac = nl_addr_build(AF_LLC, hw, 6))) {
		rtnl_link_put(m);
		return verr_set(err, "netlink: out of memory");
	}
	rtnl_link_set_name(m, NA_FABRIC_IF);
	rtnl_link_set_link(m, c->lower);
	rtnl_link_set_addr(m, mac);
	rtnl_link_set_mtu(m, (unsigned)c->mtu);
	/* Bridge mode: a job's guests on one node reach each other over the
	 * fabric too; other jobs are on other VLANs, so never on this one. */
	rtnl_link_macvlan_set_mode(m, MACVLAN_MODE_BRIDGE);
	rtnl_link_set_ns_fd(m, (uint32_t)c->netns_fd);
	rc = rtnl_link_add(sk, m, NLM_F_CREATE | NLM_F_EXCL);
	nl_addr_put(mac);
	rtnl_link_put(m);
	if (rc < 0)
		return verr_set(err, "guest g%d: macvlan %s on %s in %s: %s", g->index, NA_FABRIC_IF,
				c->f->vlan_dev, g->netns, nl_geterror(rc));
	return 0;
}

/* In guest k's namespace: its address, the link up, the rxe device. */
static int guest_inside(void *arg, struct verr *err)
{
	struct fab_ctx *c = arg;
	struct na_fabric_guest *g = &c->f->g[c->k];
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	struct rtnl_addr *a = NULL;
	struct nl_addr *local = NULL;
	uint32_t be = htonl(g->addr);
	int rc = -1, idx, e;

	if (!sk)
		return -1;
	if ((e = find_link(sk, NA_FABRIC_IF, &idx, NULL, err)) <= 0) {
		if (e == 0)
			verr_set(err, "%s is missing", NA_FABRIC_IF);
		goto out;
	}
	a = rtnl_addr_alloc();
	local = nl_addr_build(AF_INET, &be, 4);
	if (!a || !local) {
		verr_set(err, "netlink: out of memory");
		goto out;
	}
	nl_addr_set_prefixlen(local, c->r->subnet.prefix);
	rtnl_addr_set_ifindex(a, idx);
	rtnl_addr_set_local(a, local);
	if ((e = rtnl_addr_add(sk, a, 0)) < 0) {
		char s[20];

		verr_set(err, "%s: add address %s/%d: %s", NA_FABRIC_IF, ipv4_format(g->addr, s, sizeof(s)),
			 c->r->subnet.prefix, nl_geterror(e));
		goto out;
	}
	if (link_up(sk, NA_FABRIC_IF, err) < 0)
		goto out;
	rdma_name(c->r->job, g->index, g->rdma_dev, sizeof(g->rdma_dev));
	if (na_rdma_link_add(g->rdma_dev, "rxe", NA_FABRIC_IF, err) < 0) {
		g->rdma_dev[0] = 0;
		goto out;
	}
	rc = 0;
out:
	if (local)
		nl_addr_put(local);
	if (a)
		rtnl_addr_put(a);
	nl_socket_free(sk);
	return rc;
}

/* In the initial namespace, where the device landed: into the guest's. */
static int move_dev(void *arg, struct verr *err)
{
	struct fab_ctx *c = arg;

	return na_rdma_dev_set_netns(c->f->g[c->k].rdma_dev, c->netns_fd, err);
}

static int del_dev(void *arg, struct verr *err)
{
	return na_rdma_link_del(arg, err) < 0 ? -1 : 0;
}

static int set_exclusive(void *arg, struct verr *err)
{
	(void)arg;
	return na_rdma_netns_exclusive(err);
}

/* In the guest's namespace again: the device is there, and its node. */
static int find_chardev(void *arg, struct verr *err)
{
	struct fab_ctx *c = arg;
	struct na_fabric_guest *g = &c->f->g[c->k];
	char name[64];

	if (na_rdma_chardev(g->rdma_dev, "uverbs", &g->uverbs_dev, name, sizeof(name), err) < 0)
		return -1;
	if (strncmp(name, "uverbs", 6) || !name[6] || strspn(name + 6, "0123456789") != strlen(name + 6))
		return verr_set(err, "RDMA device %s: unexpected character device name '%.40s'", g->rdma_dev, name);
	snprintf(g->uverbs, sizeof(g->uverbs), "/dev/infiniband/%s", name);
	return 0;
}

/* The node under /dev must be the device the kernel named: a stale or
 * planted file there would hand a guest something else. */
static int check_node(const struct na_fabric_guest *g, struct verr *err)
{
	struct stat st;

	if (lstat(g->uverbs, &st) < 0)
		return verr_errno(err, "RDMA device %s: %s", g->rdma_dev, g->uverbs);
	if (!S_ISCHR(st.st_mode) || st.st_rdev != g->uverbs_dev)
		return verr_set(err, "RDMA device %s: %s is not its character device %u:%u", g->rdma_dev, g->uverbs,
				major(g->uverbs_dev), minor(g->uverbs_dev));
	return 0;
}

static int make_guest(struct fab_ctx *c, struct verr *err)
{
	struct na_fabric_guest *g = &c->f->g[c->k];
	char path[PATH_MAX];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", NA_NETNS_DIR, g->netns);
	if ((c->netns_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return verr_errno(err, "guest g%d: %s", g->index, path);
	rc = make_macvlan(c, c->job_sk, err);
	if (rc == 0)
		rc = na_netns_run(g->netns, guest_inside, c, err);
	if (rc == 0 && (rc = na_netns_run_path(INIT_NETNS, move_dev, c, err)) < 0) {
		struct verr e;

		/* Not moved: it must not stay in the initial namespace. */
		if (na_netns_run_path(INIT_NETNS, del_dev, g->rdma_dev, &e) < 0)
			log_warn("job %s: %s", c->r->job, e.msg);
	}
	if (rc == 0)
		rc = na_netns_run(g->netns, find_chardev, c, err);
	if (rc == 0)
		rc = check_node(g, err);
	close(c->netns_fd);
	c->netns_fd = -1;
	return rc < 0 ? verr_wrap(err, "guest g%d's fabric", g->index) : 0;
}

static int check_req(const struct na_fabric_req *r, struct verr *err)
{
	if (!na_job_ok(r->job))
		return verr_set(err, "job id '%.40s' is not 1..12 of [a-z0-9]", r->job);
	if (r->pkey)
		return verr_set(err, "fabric: InfiniBand partition keys (pkey 0x%04x) are not implemented on this node "
				"agent yet; only RoCE VLANs are", r->pkey);
	if (!ifname_ok(r->link))
		return verr_set(err, "fabric link '%.40s' is not an interface name", r->link ? r->link : "");
	if (r->vlan < 1 || r->vlan > 4094)
		return verr_set(err, "fabric: VLAN %d of job %s is outside 1..4094 (a job on the fabric needs a VLAN "
				"of its own)", r->vlan, r->job);
	if (r->subnet.prefix < 8 || r->subnet.prefix > 30)
		return verr_set(err, "fabric subnet /%d: expected a prefix of 8..30", r->subnet.prefix);
	if (r->nguests < 1 || r->nguests > VHPC_MAX_GUESTS)
		return verr_set(err, "fabric: %d guests; expected 1..%d", r->nguests, VHPC_MAX_GUESTS);
	for (int k = 0; k < r->nguests; k++) {
		int i = r->index ? r->index[k] : k;
		uint64_t room = (1ull << (32 - r->subnet.prefix)) - 3;

		if (i < 0 || (uint64_t)i >= room)
			return verr_set(err, "fabric subnet /%d has no address for guest g%d", r->subnet.prefix, i);
	}
	return 0;
}

int na_fabric_create(const struct na_fabric_req *r, struct na_fabric *out, struct verr *err)
{
	struct fab_ctx c = { .r = r, .f = out, .netns_fd = -1 };
	struct nl_sock *sk;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (check_req(r, err) < 0)
		return -1;
	snprintf(out->job, sizeof(out->job), "%s", r->job);
	for (int k = 0; k < r->nguests; k++) {
		out->g[k].index = r->index ? r->index[k] : k;
		out->g[k].addr = r->subnet.addr + 2 + (uint32_t)out->g[k].index;
		snprintf(out->g[k].netns, sizeof(out->g[k].netns), "%s", r->guest_netns[k]);
	}
	/* Before anything is made: in shared mode every namespace would see
	 * every device. */
	if (na_netns_run_path(INIT_NETNS, set_exclusive, NULL, err) < 0)
		return -1;
	if (!(sk = na_nl_open(NETLINK_ROUTE, err)))
		return -1;
	if (make_vlan(&c, sk, err) < 0)
		goto out;
	out->nguests = r->nguests;
	for (c.k = 0; c.k < r->nguests; c.k++)
		if (make_guest(&c, err) < 0)
			goto out;
	rc = 0;
out:
	if (c.job_sk)
		nl_socket_free(c.job_sk);
	nl_socket_free(sk);
	return rc;
}

/* ----------------------------------------------------------- removal */

/* In the namespace the device is in (the guest's, or the initial one when
 * the move did not happen): its rxe link deleted, 1 if it was there. */
struct del_arg {
	const char *name;
	int *found;
};

static int del_if_there(void *arg, struct verr *err)
{
	struct del_arg *a = arg;
	int r = na_rdma_link_del(a->name, err);

	if (r < 0)
		return -1;
	*a->found += r;
	return 0;
}

struct vlan_arg {
	const char *job;
	int *found;
};

/* In the calling thread's namespace: the job's VLAN device deleted. */
static int del_vlan_here(void *arg, struct verr *err)
{
	struct vlan_arg *a = arg;
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	struct rtnl_link *l = NULL;
	char name[16];
	int rc, *found = a->found;

	if (!sk)
		return -1;
	vlan_name(a->job, name, sizeof(name));
	rc = rtnl_link_get_kernel(sk, 0, name, &l);
	if (rc >= 0) {
		/* Only a VLAN device is the job's; a name alone proves nothing. */
		if (strcmp(rtnl_link_get_type(l) ? rtnl_link_get_type(l) : "", "vlan"))
			rc = verr_set(err, "link %s is not a VLAN device; left alone", name);
		else if ((rc = rtnl_link_delete(sk, l)) < 0)
			rc = verr_set(err, "delete VLAN device %s: %s", name, nl_geterror(rc));
		else
			(*found)++;
		rtnl_link_put(l);
	} else {
		rc = 0;
	}
	nl_socket_free(sk);
	return rc;
}

/* The job's VLAN device, in the job's namespace while that exists (with
 * it, it would go anyway), and in the agent's, where an agent from before
 * 2026-12-05 made it. */
static int del_vlan(const char *job, int *found, struct verr *err)
{
	struct vlan_arg a = { job, found };
	char ns[64], path[PATH_MAX];

	job_netns_name(job, ns, sizeof(ns));
	snprintf(path, sizeof(path), "%s/%s", NA_NETNS_DIR, ns);
	if (access(path, F_OK) == 0 && na_netns_run(ns, del_vlan_here, &a, err) < 0)
		return -1;
	return del_vlan_here(&a, err);
}

int na_fabric_destroy(struct na_fabric *f, struct verr *err)
{
	int rc = 0, n = 0;
	struct verr e;

	for (int k = 0; k < f->nguests; k++) {
		struct del_arg arg = { f->g[k].rdma_dev, &n };

		if (!f->g[k].rdma_dev[0])
			continue;
		/* Gone from the guest's namespace with it, or never moved. */
		if (na_netns_run(f->g[k].netns, del_if_there, &arg, &e) < 0 ||
		    na_netns_run_path(INIT_NETNS, del_if_there, &arg, &e) < 0) {
			if (rc == 0)
				*err = e;
			rc = -1;
		}
		f->g[k].rdma_dev[0] = 0;
	}
	/* Its macvlans go with it, in whatever namespace they are. */
	if (f->vlan_dev[0] && del_vlan(f->job, &n, &e) < 0 && rc == 0) {
		*err = e;
		rc = -1;
	}
	f->vlan_dev[0] = 0;
	return rc;
}

struct sweep_ctx {
	char prefix[32];
	char names[VHPC_MAX_GUESTS][64];
	int n;
};

static void collect(const char *name, uint32_t index, void *arg)
{
	struct sweep_ctx *s = arg;

	(void)index;
	if (na_indexed_name(name, s->prefix) && s->n < VHPC_MAX_GUESTS)
		snprintf(s->names[s->n++], sizeof(s->names[0]), "%s", name);
}

/* In one namespace: every device of the job there deleted. */
static int sweep_here(void *arg, struct verr *err)
{
	struct sweep_ctx *s = arg;
	int rc = 0;

	s->n = 0;
	if (na_rdma_dev_each(collect, s, err) < 0)
		return -1;
	for (int i = 0; i < s->n; i++)
		if (na_rdma_link_del(s->names[i], err) < 0)
			rc = -1;
	return rc;
}

int na_fabric_sweep(const char *job, const char *why, int *removed, struct verr *err)
{
	struct sweep_ctx *s = calloc(1, sizeof(*s));
	char own[32];
	DIR *d;
	struct dirent *de;
	struct verr e;
	int rc = 0, n = 0;

	if (!s)
		return verr_set(err, "out of memory");
	/* No RDMA subsystem here: nothing of it to sweep. */
	if (access("/sys/class/infiniband", F_OK) < 0 && access("/sys/module/ib_core", F_OK) < 0)
		goto vlan;
	snprintf(s->prefix, sizeof(s->prefix), "vhpc-%s-", job);
	snprintf(own, sizeof(own), "vhpc-%s-", job);
	if ((d = opendir(NA_NETNS_DIR))) {
		while ((de = readdir(d))) {
			if (!na_indexed_name(de->d_name, own))
				continue;
			if (na_netns_run(de->d_name, sweep_here, s, &e) < 0 && rc == 0) {
				*err = e;
				rc = -1;
			}
			n += s->n;
		}
		closedir(d);
	}
	if (na_netns_run_path(INIT_NETNS, sweep_here, s, &e) < 0 && rc == 0) {
		*err = e;
		rc = -1;
	}
	n += s->n;
	if (n)
		log_info("%s: job %s: removed %d RDMA device%s (vhpc-%s-*)", why, job, n, n > 1 ? "s" : "", job);
	*removed += n;
vlan:
	free(s);
	n = 0;
	if (del_vlan(job, &n, &e) < 0 && rc == 0) {
		*err = e;
		rc = -1;
	}
	if (n) {
		log_info("%s: job %s: removed its fabric VLAN device vf%s", why, job, job);
		(*removed)++;
	}
	return rc;
}
