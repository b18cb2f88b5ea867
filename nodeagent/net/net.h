/*
 * The job network on a node: a network namespace per job with a bridge,
 * one per guest, veths or taps, and a VXLAN between nodes.
 */
#ifndef VHPC_NA_NET_H
#define VHPC_NA_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/inet.h"

struct cluster_cfg;
struct nl_sock;
struct cluster_wg;
struct na_jobdir;
struct tuning;

#define NA_VXLAN_PORT     4789
/* Outer Ethernet (14) + IPv4 (20) + UDP (8) + VXLAN (8) headers. */
#define NA_VXLAN_OVERHEAD 50

struct na_net_req {
	const char *job;
	struct ipv4net subnet;   /* the job's subnet */
	int nguests;             /* guests on this node */
	const struct tuning *tuning; /* MTU, offloads, sysctls (applied per guest netns) */
	/* A job across nodes (vhpcd); zero/NULL on one machine: */
	const int *index;        /* job-wide index of each guest here (NULL: 0..nguests-1):
	                            its address is subnet + 2 + index, its netns
	                            vhpc-<job>-<index>, its veth on the bridge v<index> */
	uint32_t vni;            /* VXLAN id joining the job's bridges on all its
	                            nodes (1..VHPC_VNI_MAX; 0 = no VXLAN) */
	uint32_t underlay;       /* this node's address the VXLAN runs over */
	const uint32_t *peers;   /* the job's other nodes' underlay addresses */
	int npeers;
	int ntotal;              /* guests of the job on all nodes */
	const uint32_t *guest_node; /* [ntotal]: the underlay address of each guest's
	                          * node (NULL: not known; remote guests are then
	                          * reached by flooding to every peer) */
	const struct cluster_wg *wg; /* key set: the VXLAN rides over WireGuard (wg.c) */
	bool no_guest_netns;     /* kvm: the guests are VMs, each with a tap on the
	                          * bridge (na_kvm_start), so no guest netns/veth */
	pid_t guest_netns_owner; /* >0: the guests' netns belong to this process's
	                          * user namespace (a container pod's) */
	bool ports_down;         /* the guests' veths on the bridge stay down (their
	                          * eth0 without carrier) until na_net_ports_up: a
	                          * restore, whose guests get their TCP sockets back
	                          * one at a time (CRIU); a peer that answered before
	                          * its socket was back would reset the connection */
};

struct na_net {
	char job[16];
	char job_netns[64];            /* netns holding the bridge */
	int nguests;
	char guest_netns[VHPC_MAX_GUESTS][64];  /* name under /run/netns */
	uint32_t guest_addr[VHPC_MAX_GUESTS];   /* host byte order */
	int index[VHPC_MAX_GUESTS];             /* job-wide guest index */
	int prefix;
	int mtu;
	uint32_t vni;                  /* 0 = none */
};

/* Needs the job dir held (na_jobdir_create).
 * Creates the job netns with a bridge, one netns per guest with eth0 (a veth
 * whose peer is on the bridge), addresses subnet+2+i, MTU and offloads from
 * the tuning profile, lo up, and the tuning sysctls inside each guest netns.
 * Each guest's eth0 has the MAC na_guest_mac gives its address.
 * With a vni: first the job's firewall in the caller's network namespace
 * (na_fw_add), then a VXLAN device made from there (the node's underlay:
 * UDP port NA_VXLAN_PORT from the underlay address) but placed in the job
 * netns as vxlan0 on the bridge.  It learns nothing: its forwarding
 * database has a flooding entry per peer (broadcast, multicast) and, with
 * guest_node, each remote guest's MAC to its node, which the bridge then
 * has as static entries on vxlan0 (a port that neither learns nor floods
 * unknown unicast).  Every MTU of the job network is the profile's less
 * NA_VXLAN_OVERHEAD, so encapsulated frames fit the underlay's MTU. */
int na_net_create(const struct na_net_req *r, struct na_net *out, struct verr *err);
int na_net_destroy(struct na_net *n, struct verr *err);
/* A container guest whose network namespace its runtime makes inside the
 * guest's own user namespace, as CRIU needs to checkpoint it (made by the
 * agent, it belongs to the host's user namespace): guest k's eth0, made
 * by na_net_create in the namespace named guest_netns[k], moves into the
 * one nsfd holds, which then takes that name (so whatever finds the
 * guest's network by name, the teardown included, finds this one), and
 * gets there what na_net_create gave it: address, MTU, offloads, lo up
 * and the sysctls of tuning t.  The namespace first named so, empty now,
 * goes. */
int na_net_guest_move(const struct na_net *n, int k, const struct tuning *t, int nsfd, struct verr *err);
/* Every guest's veth on the bridge up (those ports_down left down; a no-op
 * for ports that are up, and for kvm guests, whose taps are not here). */
int na_net_ports_up(const struct na_net *n, struct verr *err);
/* A netlink socket of protocol (NETLINK_ROUTE, NETLINK_RDMA) in the calling
 * thread's network namespace (nlsock.c); NULL and why. */
struct nl_sock *na_nl_open(int protocol, struct verr *err);
/* 52:54 and the address's four bytes. */
void na_guest_mac(uint32_t addr, uint8_t mac[6]);

/* The job's firewall (fw.c): table ip vhpc-<job> in the calling thread's
 * network namespace, which is recorded in <job dir>/fw.netns.  It drops
 * VXLAN packets with the job's vni from any source but peers, and those
 * sent by a user socket of anyone but root; with iif, also those that did
 * not arrive on that interface. */
int na_fw_add(const char *job, uint32_t vni, const uint32_t *peers, int npeers, const char *iif,
	      struct verr *err);
/* Removes the table in the recorded namespace (found from any namespace;
 * gone, it took the table along) and the record: 1 if there was one, 0 if
 * not.  The job's hold on the WireGuard
 * device goes with it (na_wg_release). */
int na_fw_remove(const char *job, struct verr *err);

/* Underlay encryption (wg.c): WireGuard device NA_WG_DEV in the calling
 * thread's namespace, shared by the node's jobs. */
#define NA_WG_DEV      "vhpcwg"
#define NA_WG_OVERHEAD 60   /* outer IPv4 (20) + UDP (8) + WireGuard (32) */
/* A node's WireGuard address: the pool's network and the underlay
 * address's host bits. */
uint32_t na_wg_addr(const struct cluster_wg *w, uint32_t underlay);
/* A node's key pair, from the cluster's secret and its underlay address. */
int na_wg_keys(const uint8_t *secret, size_t slen, uint32_t underlay, uint8_t priv[32], uint8_t pub[32],
	       struct verr *err);
/* Makes the device if no job has (MTU mtu) and adds the job's peers;
 * marks the job as one of its users; *dev_mtu is the device's MTU. */
int na_wg_up(const struct cluster_wg *w, const char *job, uint32_t underlay, const uint32_t *peers, int npeers,
	     int mtu, int *dev_mtu, struct verr *err);
/* The job no longer uses the device; the last user removes it (in the
 * calling thread's namespace; alive false: the namespace is gone, and the
 * device with it). */
int na_wg_release(const char *job, bool alive, struct verr *err);
/* Allocates a free subnet of the pool for a job on this machine (embedded
 * mode); released by na_jobdir_remove / cleanup. */
int na_subnet_alloc(const struct cluster_cfg *c, struct na_jobdir *jd,
		    struct ipv4net *out, struct verr *err);

/* --------------------------------------------------------------- netns */

#define NA_NETNS_DIR "/run/netns"

/* Creates /run/netns/<name> holding a fresh network namespace; fails if the
 * name exists. */
int na_netns_add(const char *name, struct verr *err);
/* The same, owned by the user namespace of process owner (0: the host's):
 * processes of that namespace may then join it and mount its sysfs. */
int na_netns_add_owned(const char *name, pid_t owner, struct verr *err);
/* Names the network namespace nsfd holds /run/netns/<name>. */
int na_netns_add_fd(const char *name, int nsfd, struct verr *err);
/* Unmounts and unlinks /run/netns/<name>; 0 if it was not there. */
int na_netns_del(const char *name, struct verr *err);
/* Runs fn in a thread that has joined /run/netns/<name>, so the caller's
 * own namespace never changes.  fn's error lands in err. */
int na_netns_run(const char *name, int (*fn)(void *arg, struct verr *err),
		 void *arg, struct verr *err);

/* The same for a namespace file (/proc/1/ns/net: the initial one). */
int na_netns_run_path(const char *path, int (*fn)(void *arg, struct verr *err),
		      void *arg, struct verr *err);

/* Deletes the job's VXLAN device (vxlan0 in its job netns) if there is
 * one.  Deleting a namespace frees its devices only later (the kernel's
 * cleanup work), and a VXLAN still there keeps its VNI and port taken in
 * the node's namespace: a job started again at once could not have them. */
int na_vxlan_del(const char *job_netns, struct verr *err);

/* Offloads of one interface in the calling thread's netns (ethtool ioctl):
 * the profile t's (none when NULL), then what flags say, read back and
 * checked.  NA_ETH_NO_GRO: receive offload off whatever t says, for the
 * job network's veths and vxlan0, where it only adds a NAPI hop (a veth
 * with GRO on queues every frame for a NAPI poll instead of passing it
 * on; vxlan0's GRO cells another): the frames come from a local stack as
 * GSO already.  nodeagent/README.md, "Job networks", has the figures. */
#define NA_ETH_NO_GRO 1u
int na_eth_offloads(const char *ifname, const struct tuning *t, unsigned flags, struct verr *err);

/* -------------------------------------------------------------- fabric */

/* A job's part of the node's RDMA fabric (fabric.c; nodeagent/README.md,
 * "The fabric").  On the node's fabric link (in the calling thread's
 * namespace) a VLAN device vf<job> with the job's VLAN id, in the job's
 * network namespace (na_net_create's), where the node's own stack does not
 * see what guests send on it; per guest a
 * macvlan on it made straight into the guest's netns as NA_FABRIC_IF, with
 * the guest's fabric address, and on it a soft-RoCE (rxe) RDMA device
 * named vhpc-<job>-<index>, made inside that netns (where rxe then keeps
 * its UDP socket) and moved there, so that with the RDMA subsystem in
 * exclusive netns mode no other namespace sees or opens it. */
#define NA_FABRIC_IF "fab0"

struct na_fabric_req {
	const char *job;
	const char *link;             /* the node's netdev on the fabric */
	int vlan;                     /* 1..4094 */
	uint16_t pkey;                /* InfiniBand: refused (not implemented) */
	struct ipv4net subnet;        /* guest i has subnet + 2 + i */
	int nguests;
	const int *index;             /* job-wide indexes; NULL = 0..nguests-1 */
	const char (*guest_netns)[64];/* [nguests] names under /run/netns */
};

struct na_fabric_guest {
	int index;
	uint32_t addr;                /* host byte order */
	char netns[64];
	char rdma_dev[64];            /* "" until made */
	char uverbs[64];              /* /dev/infiniband/uverbsN */
	dev_t uverbs_dev;
};

struct na_fabric {
	char job[16];
	char vlan_dev[16];            /* "" until made; in the job's netns */
	int nguests;
	struct na_fabric_guest g[VHPC_MAX_GUESTS];
};

/* Needs the guests' netns made (na_net_create).  On failure what was made
 * is in *out for na_fabric_destroy. */
int na_fabric_create(const struct na_fabric_req *r, struct na_fabric *out, struct verr *err);
/* Removes the RDMA devices, then the VLAN (and the macvlans on it). */
int na_fabric_destroy(struct na_fabric *f, struct verr *err);
/* What a dead job left: its RDMA devices (in its guests' netns and in the
 * initial one) and its VLAN device; counted in *removed. */
int na_fabric_sweep(const char *job, const char *why, int *removed, struct verr *err);

/* The RDMA netlink requests fabric.c uses (rdma_nl.c), in the calling
 * thread's network namespace.  0/1: not there / done. */
int na_rdma_netns_exclusive(struct verr *err);
int na_rdma_link_add(const char *name, const char *type, const char *netdev, struct verr *err);
int na_rdma_link_del(const char *name, struct verr *err);
int na_rdma_dev_index(const char *name, uint32_t *index, struct verr *err);
int na_rdma_dev_each(void (*fn)(const char *name, uint32_t index, void *arg), void *arg, struct verr *err);
int na_rdma_dev_set_netns(const char *name, int netns_fd, struct verr *err);
int na_rdma_chardev(const char *name, const char *type, dev_t *dev, char *cname, size_t len, struct verr *err);

#endif
