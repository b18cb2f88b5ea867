/*
 * The job network: a namespace vhpc-<job> holding a bridge br0, and per
 * guest a namespace vhpc-<job>-<i> whose eth0 is a veth with its peer
 * (v<i>) on the bridge.  Nothing of it exists in the host's namespace, so
 * two jobs' guests have no path to each other, and a job's addresses can
 * never collide with the host's.  Links are made over netlink (libnl-route).
 */
#include "lib/cluster.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/tuning.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/link/vxlan.h>
#include <netlink/route/neighbour.h>
#include <linux/neighbour.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BRIDGE "br0"

/* Brings name up (or leaves it down), with mtu when > 0 and master when
 * >= 0. */
static int link_set_up(struct nl_sock *sk, const char *name, int mtu, int master, bool up,
		       struct verr *err)
{
	struct rtnl_link *link = NULL, *change = rtnl_link_alloc();
	int rc;

	if (!change)
		return verr_set(err, "netlink: out of memory");
	if ((rc = rtnl_link_get_kernel(sk, 0, name, &link)) < 0) {
		rtnl_link_put(change);
		return verr_set(err, "link %s: %s", name, nl_geterror(rc));
	}
	if (up)
		rtnl_link_set_flags(change, IFF_UP);
	if (mtu > 0)
		rtnl_link_set_mtu(change, mtu);
	if (master >= 0)
		rtnl_link_set_master(change, master);
	rc = rtnl_link_change(sk, link, change, 0);
	rtnl_link_put(link);
	rtnl_link_put(change);
	if (rc < 0)
		return verr_set(err, "link %s: set %s%s: %s", name, up ? "up" : "MTU and master",
				up && mtu > 0 ? " and MTU" : "", nl_geterror(rc));
	return 0;
}

static int link_set(struct nl_sock *sk, const char *name, int mtu, int master, struct verr *err)
{
	return link_set_up(sk, name, mtu, master, true, err);
}

static int link_index(struct nl_sock *sk, const char *name, struct verr *err)
{
	struct rtnl_link *link;
	int rc = rtnl_link_get_kernel(sk, 0, name, &link), idx;

	if (rc < 0)
		return verr_set(err, "link %s: %s", name, nl_geterror(rc));
	idx = rtnl_link_get_ifindex(link);
	rtnl_link_put(link);
	return idx;
}

/* br_netfilter (where the kernel has it) hands every frame a bridge
 * forwards to the IP, IPv6 and ARP hooks of the bridge's namespace, by
 * default in every namespace.  The job namespace has no rules of any kind
 * (the job's firewall is in the node's, on the VXLAN's UDP), so those
 * calls only cost time on each frame between a guest and vxlan0. */
static int bridge_nf_off(struct verr *err)
{
	static const char *const keys[] = { "iptables", "ip6tables", "arptables" };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char path[80];

		snprintf(path, sizeof(path), "/proc/sys/net/bridge/bridge-nf-call-%s", keys[i]);
		if (access(path, F_OK) < 0)
			continue;
		if (write_str(path, "0", err) < 0)
			return -1;
	}
	return 0;
}

struct job_ctx {
	const struct na_net_req *r;
	const struct na_net *n;
	int mtu;
};

/* In the job namespace: the bridge, and a veth per guest whose eth0 end is
 * created directly inside the guest's namespace. */
static int job_setup(void *arg, struct verr *err)
{
	struct job_ctx *c = arg;
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	struct rtnl_link *br = NULL;
	int rc = -1, brx;

	if (!sk)
		return -1;
	if (link_set(sk, "lo", 0, -1, err) < 0 || bridge_nf_off(err) < 0)
		goto out;
	br = rtnl_link_bridge_alloc();
	if (!br) {
		verr_set(err, "netlink: out of memory");
		goto out;
	}
	rtnl_link_set_name(br, BRIDGE);
	rtnl_link_set_mtu(br, c->mtu);
	if ((rc = rtnl_link_add(sk, br, NLM_F_CREATE | NLM_F_EXCL)) < 0) {
		verr_set(err, "create bridge %s: %s", BRIDGE, nl_geterror(rc));
		rc = -1;
		goto out;
	}
	rc = -1;
	if ((brx = link_index(sk, BRIDGE, err)) < 0 || link_set(sk, BRIDGE, c->mtu, -1, err) < 0)
		goto out;
	/* kvm guests bring their own port: a tap each (kvm_tap.c). */
	for (int i = 0; i < c->r->nguests && !c->r->no_guest_netns; i++) {
		char ns[PATH_MAX], host[IFNAMSIZ];
		struct rtnl_link *veth = rtnl_link_veth_alloc(), *peer;
		struct nl_addr *ll;
		uint8_t mac[6];
		int fd, e;

		na_guest_mac(c->n->guest_addr[i], mac);
		ll = nl_addr_build(AF_LLC, mac, 6);
		if (!veth || !ll) {
			if (veth)
				rtnl_link_put(veth);
			if (ll)
				nl_addr_put(ll);
			verr_set(err, "netlink: out of memory");
			goto out;
		}
		snprintf(ns, sizeof(ns), "%s/%s", NA_NETNS_DIR, c->n->guest_netns[i]);
		snprintf(host, sizeof(host), "v%d", c->n->index[i]);
		fd = open(ns, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rtnl_link_put(veth);
			nl_addr_put(ll);
			verr_errno(err, "%s", ns);
			goto out;
		}
		rtnl_link_set_name(veth, host);
		rtnl_link_set_mtu(veth, c->mtu);
		peer = rtnl_link_veth_get_peer(veth);
		rtnl_link_set_name(peer, "eth0");
		rtnl_link_set_mtu(peer, c->mtu);
		rtnl_link_set_addr(peer, ll);
		nl_addr_put(ll);
		rtnl_link_set_ns_fd(peer, fd);
		e = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
		rtnl_link_put(peer);
		rtnl_link_put(veth);
		close(fd);
		if (e < 0) {
			verr_set(err, "create veth %s <-> eth0 of guest %d: %s", host, c->n->index[i], nl_geterror(e));
			goto out;
		}
		if (link_set_up(sk, host, c->mtu, brx, !c->r->ports_down, err) < 0)
			goto out;
		if (na_eth_offloads(host, c->r->tuning, NA_ETH_NO_GRO, err) < 0)
			goto out;
	}
	rc = 0;
out:
	if (br)
		rtnl_link_put(br);
	nl_socket_free(sk);
	return rc;
}

/* Some net.* sysctls exist in a child namespace only as a read-only view of
 * the host's value (net.core.rmem_max/wmem_max on recent kernels) or not at
 * all; a profile that names one cannot be applied in a guest, and saying
 * so beats "Permission denied". */
static int sysctls_settable(const struct tuning *t, struct verr *err)
{
	for (size_t i = 0; i < t->sysctl.n; i++) {
		char path[256];
		struct stat st;

		snprintf(path, sizeof(path), "/proc/sys/%s", t->sysctl.key[i]);
		for (char *p = path + 10; *p; p++)
			if (*p == '.')
				*p = '/';
		if (stat(path, &st) < 0)
			return verr_set(err, "tuning '%s': sysctl %s does not exist inside a network namespace on this kernel; take it out of the profile",
					t->name, t->sysctl.key[i]);
		if (!(st.st_mode & 0222))
			return verr_set(err, "tuning '%s': sysctl %s is read-only inside a network namespace on this kernel (only the host's value counts); take it out of the profile",
					t->name, t->sysctl.key[i]);
	}
	return 0;
}

struct guest_ctx {
	const struct na_net_req *r;
	int index, mtu;
	uint32_t addr;
	int prefix;
};

static int guest_setup(void *arg, struct verr *err)
{
	struct guest_ctx *g = arg;
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	struct rtnl_addr *a = NULL;
	struct nl_addr *local = NULL, *bcast = NULL;
	uint32_t be = htonl(g->addr), bbe = htonl(g->addr | (g->prefix < 32 ? ~0u >> g->prefix : 0));
	int rc = -1, idx, e;

	if (!sk)
		return -1;
	if (link_set(sk, "lo", 0, -1, err) < 0 || (idx = link_index(sk, "eth0", err)) < 0)
		goto out;
	a = rtnl_addr_alloc();
	local = nl_addr_build(AF_INET, &be, 4);
	bcast = nl_addr_build(AF_INET, &bbe, 4);
	if (!a || !local || !bcast) {
		verr_set(err, "netlink: out of memory");
		goto out;
	}
	nl_addr_set_prefixlen(local, g->prefix);
	rtnl_addr_set_ifindex(a, idx);
	rtnl_addr_set_local(a, local);
	rtnl_addr_set_broadcast(a, bcast);
	if ((e = rtnl_addr_add(sk, a, 0)) < 0) {
		char s[20];

		verr_set(err, "eth0: add address %s/%d: %s", ipv4_format(g->addr, s, sizeof(s)),
			 g->prefix, nl_geterror(e));
		goto out;
	}
	if (link_set(sk, "eth0", g->mtu, -1, err) < 0)
		goto out;
	/* A guest holds no CAP_NET_RAW, so ping works through ICMP datagram
	 * sockets, which this opens to every group (Docker does the same). */
	if (write_str("/proc/sys/net/ipv4/ping_group_range", "0 2147483647", err) < 0)
		goto out;
	if (na_eth_offloads("eth0", g->r->tuning, NA_ETH_NO_GRO, err) < 0)
		goto out;
	if (g->r->tuning) {
		if (sysctls_settable(g->r->tuning, err) < 0 ||
		    tuning_apply_sysctls(g->r->tuning, err) < 0)
			goto out;
	}
	rc = 0;
out:
	if (local)
		nl_addr_put(local);
	if (bcast)
		nl_addr_put(bcast);
	if (a)
		rtnl_addr_put(a);
	nl_socket_free(sk);
	return rc;
}

/* Where the VXLAN of a node ends: its underlay address, or with underlay
 * encryption its WireGuard address. */
static uint32_t endpoint(const struct na_net_req *r, uint32_t underlay)
{
	return r->wg && r->wg->key ? na_wg_addr(r->wg, underlay) : underlay;
}

/* In the caller's (the node's) namespace: the VXLAN device, created
 * straight into the job netns.  Its socket stays where it was made, so it
 * encapsulates over the node's network while it sits on the job's bridge. */
static int vxlan_create(const struct na_net_req *r, const char *job_netns, int mtu,
			struct verr *err)
{
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	struct rtnl_link *vx = NULL;
	struct nl_addr *local = NULL;
	uint32_t be = htonl(endpoint(r, r->underlay));
	char path[PATH_MAX];
	int fd = -1, rc = -1, e;

	if (!sk)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", NA_NETNS_DIR, job_netns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		verr_errno(err, "%s", path);
		goto out;
	}
	vx = rtnl_link_vxlan_alloc();
	local = nl_addr_build(AF_INET, &be, 4);
	if (!vx || !local) {
		verr_set(err, "netlink: out of memory");
		goto out;
	}
	rtnl_link_set_name(vx, "vxlan0");
	rtnl_link_set_mtu(vx, mtu);
	rtnl_link_set_ns_fd(vx, fd);
	if (rtnl_link_vxlan_set_id(vx, r->vni) < 0 || rtnl_link_vxlan_set_local(vx, local) < 0 ||
	    rtnl_link_vxlan_set_port(vx, NA_VXLAN_PORT) < 0 || rtnl_link_vxlan_set_learning(vx, 0) < 0) {
		verr_set(err, "vxlan: bad parameters");
		goto out;
	}
	if ((e = rtnl_link_add(sk, vx, NLM_F_CREATE | NLM_F_EXCL)) < 0) {
		char a[20];

		verr_set(err, "create vxlan0 (VNI %u, local %s, port %d): %s", r->vni,
			 ipv4_format(r->underlay, a, sizeof(a)), NA_VXLAN_PORT, nl_geterror(e));
		goto out;
	}
	rc = 0;
out:
	if (local)
		nl_addr_put(local);
	if (vx)
		rtnl_link_put(vx);
	if (fd >= 0)
		close(fd);
	nl_socket_free(sk);
	return rc;
}

/* A guest's MAC follows from its address (52:54 and the address's four
 * bytes, as the kvm driver gives its NICs), so every node of a job knows
 * every guest's MAC without being told. */
void na_guest_mac(uint32_t addr, uint8_t mac[6])
{
	mac[0] = 0x52;
	mac[1] = 0x54;
	mac[2] = addr >> 24;
	mac[3] = (addr >> 16) & 0xff;
	mac[4] = (addr >> 8) & 0xff;
	mac[5] = addr & 0xff;
}

/* One forwarding entry of vxlan0: with NTF_SELF in the VXLAN's own table
 * (mac -> the node dst, `bridge fdb append MAC dev vxlan0 dst PEER`), with
 * NTF_MASTER in the bridge's (mac is behind vxlan0, static). */
static int fdb_add(struct nl_sock *sk, int ifindex, const uint8_t mac[6], uint32_t dst, int flags,
		   struct verr *err)
{
	struct rtnl_neigh *n = rtnl_neigh_alloc();
	struct nl_addr *ll = nl_addr_build(AF_LLC, mac, 6);
	uint32_t be = htonl(dst);
	struct nl_addr *d = dst ? nl_addr_build(AF_INET, &be, 4) : NULL;
	int rc = 0, e;

	if (!n || !ll || (dst && !d)) {
		rc = verr_set(err, "netlink: out of memory");
		goto out;
	}
	rtnl_neigh_set_ifindex(n, ifindex);
	rtnl_neigh_set_lladdr(n, ll);
	/* libnl takes the family from the first address it is given and
	 * refuses others; the entry's family is the bridge's, its
	 * destination an IPv4 address, so the family goes last. */
	if (d && rtnl_neigh_set_dst(n, d) < 0) {
		rc = verr_set(err, "vxlan0: forwarding entry: bad destination");
		goto out;
	}
	rtnl_neigh_set_family(n, AF_BRIDGE);
	rtnl_neigh_set_state(n, flags == NTF_SELF ? NUD_PERMANENT : NUD_NOARP);
	rtnl_neigh_set_flags(n, flags);
	if ((e = rtnl_neigh_add(sk, n, NLM_F_CREATE | NLM_F_APPEND)) < 0) {
		char a[20];

		rc = verr_set(err, "vxlan0: %s forwarding entry %02x:%02x:%02x:%02x:%02x:%02x%s%s: %s",
			      flags == NTF_SELF ? "VXLAN" : "bridge", mac[0], mac[1], mac[2], mac[3], mac[4],
			      mac[5], dst ? " to " : "", dst ? ipv4_format(dst, a, sizeof(a)) : "", nl_geterror(e));
	}
out:
	if (ll)
		nl_addr_put(ll);
	if (d)
		nl_addr_put(d);
	if (n)
		rtnl_neigh_put(n);
	return rc;
}

/* vxlan0 as a bridge port: no learning (`bridge link set dev vxlan0
 * learning off flood off`), so the bridge knows remote guests only from
 * the static entries, and unknown unicast stays on this node.  libnl has
 * no setter for port flags that the kernel takes, hence the message. */
static int port_static(struct nl_sock *sk, int ifindex, struct verr *err)
{
	struct ifinfomsg ifi = { .ifi_family = AF_BRIDGE, .ifi_index = ifindex };
	struct nl_msg *m = nlmsg_alloc_simple(RTM_SETLINK, NLM_F_ACK);
	struct nlattr *pi;
	int e;

	if (!m)
		return verr_set(err, "netlink: out of memory");
	if (nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    !(pi = nla_nest_start(m, IFLA_PROTINFO | NLA_F_NESTED)) ||
	    nla_put_u8(m, IFLA_BRPORT_LEARNING, 0) < 0 || nla_put_u8(m, IFLA_BRPORT_UNICAST_FLOOD, 0) < 0) {
		nlmsg_free(m);
		return verr_set(err, "netlink: out of memory");
	}
	nla_nest_end(m, pi);
	e = nl_send_sync(sk, m);
	if (e < 0)
		return verr_set(err, "vxlan0: bridge port learning and flooding off: %s", nl_geterror(e));
	return 0;
}

/* In the job netns: vxlan0 on the bridge, up, and its forwarding entries:
 * a flooding entry (the all-zero MAC) per peer for broadcast and
 * multicast (ARP), and, where the job says where each guest is, each
 * remote guest's MAC to its node in the VXLAN and to vxlan0 in the
 * bridge.  Nothing is ever learnt. */
static int vxlan_setup(void *arg, struct verr *err)
{
	static const uint8_t zero[6];
	struct job_ctx *c = arg;
	const struct na_net_req *r = c->r;
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	int rc = -1, brx, vx;

	if (!sk)
		return -1;
	if ((brx = link_index(sk, BRIDGE, err)) < 0 || (vx = link_index(sk, "vxlan0", err)) < 0 ||
	    link_set(sk, "vxlan0", c->mtu, brx, err) < 0 || na_eth_offloads("vxlan0", NULL, NA_ETH_NO_GRO, err) < 0)
		goto out;
	for (int i = 0; i < r->npeers; i++)
		if (fdb_add(sk, vx, zero, endpoint(r, r->peers[i]), NTF_SELF, err) < 0)
			goto out;
	if (r->guest_node) {
		if (port_static(sk, vx, err) < 0)
			goto out;
		for (int g = 0; g < r->ntotal; g++) {
			uint8_t mac[6];

			if (r->guest_node[g] == r->underlay)
				continue;
			na_guest_mac(r->subnet.addr + 2 + (uint32_t)g, mac);
			if (fdb_add(sk, vx, mac, endpoint(r, r->guest_node[g]), NTF_SELF, err) < 0 ||
			    fdb_add(sk, vx, mac, 0, NTF_MASTER, err) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	nl_socket_free(sk);
	return rc;
}

/* Every guest's node is this one (its own guests exactly) or a peer. */
static int check_guest_nodes(const struct na_net_req *r, struct verr *err)
{
	char s[20];

	if (!r->guest_node)
		return 0;
	if (!r->vni || r->ntotal < r->nguests || (uint64_t)r->ntotal + 3 > 1ull << (32 - r->subnet.prefix))
		return verr_set(err, "job %s network: %d guests in all do not fit its VXLAN or subnet", r->job,
				r->ntotal);
	for (int g = 0, here = 0; g < r->ntotal; g++) {
		bool local = false, peer = false;

		for (int i = 0; i < r->nguests; i++)
			local = local || (r->index ? r->index[i] : i) == g;
		for (int i = 0; i < r->npeers && !peer; i++)
			peer = r->peers[i] == r->guest_node[g];
		here += local;
		if (local != (r->guest_node[g] == r->underlay) || (!local && !peer))
			return verr_set(err, "job %s network: guest %d is said to be on %s, %s", r->job, g,
					ipv4_format(r->guest_node[g], s, sizeof(s)),
					local ? "but it is on this node" : "which is neither this node nor a peer");
		if (g == r->ntotal - 1 && here != r->nguests)
			return verr_set(err, "job %s network: a guest of this node is past the job's %d", r->job,
					r->ntotal);
	}
	return 0;
}

static int check_req(const struct na_net_req *r, struct verr *err)
{
	char s[20];
	uint64_t size;

	if (na_job_check(r->job, err) < 0)
		return -1;
	/* Only a held job dir makes a crash from here on recoverable. */
	if (!na_jobdir_alive(r->job))
		return verr_set(err, "job %s network: the job dir is not held by a live owner (na_jobdir_create first)", r->job);
	if (r->nguests < 1 || r->nguests > VHPC_MAX_GUESTS)
		return verr_set(err, "job %s network: %d guests; 1..%d allowed", r->job, r->nguests, VHPC_MAX_GUESTS);
	if (r->subnet.prefix < 1 || r->subnet.prefix > 30)
		return verr_set(err, "job %s network: subnet prefix /%d; /1../30 allowed", r->job, r->subnet.prefix);
	if (r->subnet.addr & (~0u >> r->subnet.prefix))
		return verr_set(err, "job %s network: %s/%d has host bits set", r->job,
				ipv4_format(r->subnet.addr, s, sizeof(s)), r->subnet.prefix);
	size = 1ull << (32 - r->subnet.prefix);
	for (int i = 0; i < r->nguests; i++) {
		int idx = r->index ? r->index[i] : i;

		if (idx < 0 || (uint64_t)idx + 3 > size)
			return verr_set(err, "job %s network: guest %d does not fit in %s/%d (addresses start at .2, the last is broadcast)",
					r->job, idx, ipv4_format(r->subnet.addr, s, sizeof(s)), r->subnet.prefix);
		for (int j = 0; j < i && r->index; j++)
			if (r->index[j] == idx)
				return verr_set(err, "job %s network: guest %d given twice", r->job, idx);
	}
	if (r->vni > VHPC_VNI_MAX)
		return verr_set(err, "job %s network: VNI %u is outside 1..%u", r->job, r->vni, VHPC_VNI_MAX);
	if (r->vni && !r->underlay)
		return verr_set(err, "job %s network: a VXLAN needs this node's underlay address", r->job);
	if (r->npeers < 0 || (r->npeers > 0 && !r->peers))
		return verr_set(err, "job %s network: bad peer list", r->job);
	return check_guest_nodes(r, err);
}

/* The job's firewall, and with underlay encryption WireGuard, whose
 * overhead *mtu (the underlay's) then loses.  The firewall names the
 * peers by where their VXLAN ends.  0, or -1 with nothing left. */
static int job_guard(const struct na_net_req *r, int *mtu, struct verr *err)
{
	bool wg = r->wg && r->wg->key;
	uint32_t *ep = calloc((size_t)r->npeers + 1, sizeof(uint32_t));
	int dev_mtu = 0;

	if (!ep)
		return verr_set(err, "out of memory");
	for (int i = 0; i < r->npeers; i++)
		ep[i] = endpoint(r, r->peers[i]);
	if (na_fw_add(r->job, r->vni, ep, r->npeers, wg ? NA_WG_DEV : NULL, err) < 0) {
		free(ep);
		return -1;
	}
	free(ep);
	if (!wg)
		return 0;
	*mtu -= NA_WG_OVERHEAD;
	if (na_wg_up(r->wg, r->job, r->underlay, r->peers, r->npeers, *mtu, &dev_mtu, err) < 0) {
		struct verr e;

		if (na_fw_remove(r->job, &e) < 0)
			log_warn("%s", e.msg);
		return -1;
	}
	/* A device an earlier job made with a smaller MTU bounds this one. */
	if (dev_mtu < *mtu)
		*mtu = dev_mtu;
	return 0;
}

int na_net_create(const struct na_net_req *r, struct na_net *out, struct verr *err)
{
	struct job_ctx jc = { .r = r };
	int i, created = 0, fw = -1;
	bool job_ns = false;

	memset(out, 0, sizeof(*out));
	if (check_req(r, err) < 0)
		return -1;
	jc.n = out;
	jc.mtu = r->tuning ? (int)r->tuning->mtu : 1500;
	/* The firewall (and WireGuard) before anything of the job: never a
	 * moment with a device that takes the job's VNI from anyone. */
	if (r->vni && (fw = job_guard(r, &jc.mtu, err)) < 0)
		goto fail;
	/* Encapsulated frames must still fit the underlay's MTU. */
	if (r->vni)
		jc.mtu -= NA_VXLAN_OVERHEAD;
	if (jc.mtu < 576) {
		verr_set(err, "MTU %d is too small", jc.mtu);
		goto fail;
	}
	snprintf(out->job, sizeof(out->job), "%s", r->job);
	snprintf(out->job_netns, sizeof(out->job_netns), "vhpc-%s", r->job);
	out->prefix = r->subnet.prefix;
	out->mtu = jc.mtu;
	out->nguests = r->nguests;
	out->vni = r->vni;
	for (i = 0; i < r->nguests; i++) {
		out->index[i] = r->index ? r->index[i] : i;
		if (!r->no_guest_netns)
			snprintf(out->guest_netns[i], sizeof(out->guest_netns[i]), "vhpc-%s-%d", r->job, out->index[i]);
		out->guest_addr[i] = r->subnet.addr + 2 + (uint32_t)out->index[i];
	}

	if (na_netns_add(out->job_netns, err) < 0)
		goto fail;
	job_ns = true;
	for (created = 0; created < r->nguests && !r->no_guest_netns; created++)
		if (na_netns_add_owned(out->guest_netns[created], r->guest_netns_owner, err) < 0)
			goto fail;
	if (na_netns_run(out->job_netns, job_setup, &jc, err) < 0)
		goto fail;
	if (r->vni && (vxlan_create(r, out->job_netns, jc.mtu, err) < 0 ||
		       na_netns_run(out->job_netns, vxlan_setup, &jc, err) < 0))
		goto fail;
	for (i = 0; i < r->nguests && !r->no_guest_netns; i++) {
		struct guest_ctx g = { .r = r, .index = i, .mtu = jc.mtu,
				       .addr = out->guest_addr[i], .prefix = r->subnet.prefix };

		if (na_netns_run(out->guest_netns[i], guest_setup, &g, err) < 0)
			goto fail;
	}
	return 0;
fail:
	verr_wrap(err, "job %s network", r->job);
	for (i = 0; i < created; i++) {
		struct verr e;

		if (na_netns_del(out->guest_netns[i], &e) < 0)
			log_warn("%s", e.msg);
	}
	if (job_ns) {
		struct verr e;

		if (na_vxlan_del(out->job_netns, &e) < 0 || na_netns_del(out->job_netns, &e) < 0)
			log_warn("%s", e.msg);
	}
	if (fw >= 0) {
		struct verr e;

		if (na_fw_remove(r->job, &e) < 0)
			log_warn("%s", e.msg);
	}
	return -1;
}

/* In the namespace eth0 leaves: send it into the one *arg holds.  It
 * arrives down and without its address; its MAC, MTU and offloads go
 * with it. */
static int eth0_move(void *arg, struct verr *err)
{
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	struct rtnl_link *link = NULL, *change = NULL;
	int rc = -1, e;

	if (!sk)
		return -1;
	if ((e = rtnl_link_get_kernel(sk, 0, "eth0", &link)) < 0) {
		verr_set(err, "link eth0: %s", nl_geterror(e));
		goto out;
	}
	if (!(change = rtnl_link_alloc())) {
		verr_set(err, "netlink: out of memory");
		goto out;
	}
	rtnl_link_set_ns_fd(change, *(int *)arg);
	if ((e = rtnl_link_change(sk, link, change, 0)) < 0) {
		verr_set(err, "move eth0 into the guest's network namespace: %s", nl_geterror(e));
		goto out;
	}
	rc = 0;
out:
	if (change)
		rtnl_link_put(change);
	if (link)
		rtnl_link_put(link);
	nl_socket_free(sk);
	return rc;
}

int na_net_guest_move(const struct na_net *n, int k, const struct tuning *t, int nsfd, struct verr *err)
{
	struct na_net_req r = { .job = n->job, .tuning = t };
	struct guest_ctx g = { .r = &r, .index = k, .mtu = n->mtu, .prefix = n->prefix };
	const char *name;

	if (k < 0 || k >= n->nguests || !n->guest_netns[k][0])
		return verr_set(err, "job %s network: no guest %d with a network namespace here", n->job, k);
	name = n->guest_netns[k];
	g.addr = n->guest_addr[k];
	if (na_netns_run(name, eth0_move, &nsfd, err) < 0 || na_netns_del(name, err) < 0 ||
	    na_netns_add_fd(name, nsfd, err) < 0 || na_netns_run(name, guest_setup, &g, err) < 0)
		return verr_wrap(err, "job %s network, guest %d", n->job, n->index[k]);
	return 0;
}

static int ports_up(void *arg, struct verr *err)
{
	const struct na_net *n = arg;
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	int rc = 0;

	if (!sk)
		return -1;
	for (int k = 0; k < n->nguests && rc == 0; k++) {
		char host[IFNAMSIZ];

		/* A guest with no netns of its own here has no veth (kvm: a tap). */
		if (!n->guest_netns[k][0])
			continue;
		snprintf(host, sizeof(host), "v%d", n->index[k]);
		rc = link_set(sk, host, 0, -1, err);
	}
	nl_socket_free(sk);
	return rc;
}

int na_net_ports_up(const struct na_net *n, struct verr *err)
{
	int k = 0;

	/* No veth here (kvm guests: taps): nothing to enter the netns for. */
	while (k < n->nguests && !n->guest_netns[k][0])
		k++;
	if (k == n->nguests)
		return 0;
	if (na_netns_run(n->job_netns, ports_up, (void *)n, err) < 0)
		return verr_wrap(err, "job %s network: the guests' ports", n->job);
	return 0;
}

static int vxlan_del(void *arg, struct verr *err)
{
	struct nl_sock *sk = na_nl_open(NETLINK_ROUTE, err);
	struct rtnl_link *link = NULL;
	int rc = 0, e;

	(void)arg;
	if (!sk)
		return -1;
	if (rtnl_link_get_kernel(sk, 0, "vxlan0", &link) == 0) {
		if ((e = rtnl_link_delete(sk, link)) < 0)
			rc = verr_set(err, "delete vxlan0: %s", nl_geterror(e));
		rtnl_link_put(link);
	}
	nl_socket_free(sk);
	return rc;
}

int na_vxlan_del(const char *job_netns, struct verr *err)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", NA_NETNS_DIR, job_netns);
	if (access(path, F_OK) < 0)
		return 0;
	return na_netns_run(job_netns, vxlan_del, NULL, err);
}

int na_net_destroy(struct na_net *n, struct verr *err)
{
	int rc = 0;

	if (!na_job_ok(n->job))
		return verr_set(err, "job network: not created");
	/* Whatever vni says: a job taken over by a restarted vhpcd has none
	 * recorded, and its VXLAN must still go before its firewall. */
	if (n->job_netns[0]) {
		struct verr e;

		if (na_vxlan_del(n->job_netns, &e) < 0)
			rc = verr_set(err, "job %s network: %s", n->job, e.msg);
	}
	/* After the VXLAN: its firewall outlives it. */
	{
		struct verr e;

		if (na_fw_remove(n->job, &e) < 0 && rc == 0)
			rc = verr_set(err, "job %s network: %s", n->job, e.msg);
	}
	for (int i = 0; i < n->nguests && i < VHPC_MAX_GUESTS; i++) {
		struct verr e;

		if (n->guest_netns[i][0] && na_netns_del(n->guest_netns[i], &e) < 0 && rc == 0)
			rc = verr_set(err, "job %s network: %s", n->job, e.msg);
	}
	if (n->job_netns[0]) {
		struct verr e;

		if (na_netns_del(n->job_netns, &e) < 0 && rc == 0)
			rc = verr_set(err, "job %s network: %s", n->job, e.msg);
	}
	return rc;
}
