/*
 * The cluster file's `fabric:` section (lib/cluster.h): its schema, and the
 * checks that span its fields and the rest of the file.  Every value is
 * checked where it is written and the error names file:line:column; the
 * checks across fields name the file and the keys.
 */
#include "lib/cluster.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/inet.h"
#include "lib/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES_MAX 8192

/* "100-199": VLAN 1 is left out, as most switches use it untagged. */
static int parse_vlans(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	const char *s = cf_scalar(n);
	long long *v = dst;

	if (!s || fabric_range_parse(s, 2, 4094, &v[0], &v[1]) < 0)
		return cf_error(d, n, err, "fabric.vlans: expected a range of VLAN ids within 2..4094 such as 100-199, got %s",
				s ? s : "a list or mapping");
	return 0;
}

/* 0x7fff is the default partition every port is in, 0 is invalid; the
 * agent sets the full-membership bit (0x8000) itself. */
static int parse_pkeys(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	const char *s = cf_scalar(n);
	long long *v = dst;

	if (!s || fabric_range_parse(s, 1, 0x7ffe, &v[0], &v[1]) < 0)
		return cf_error(d, n, err, "fabric.pkeys: expected a range of partition keys within 0x0001..0x7ffe such as 0x0100-0x01ff, got %s",
				s ? s : "a list or mapping");
	return 0;
}

static int parse_pool(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	const char *s = cf_scalar(n);
	struct ipv4net *net = dst;

	if (!s || ipv4net_parse(s, false, net) < 0 || net->prefix < 8 || net->prefix > 28)
		return cf_error(d, n, err, "fabric.pool: expected an IPv4 network /8../28 such as 10.214.0.0/16 (host bits zero), got %s",
				s ? s : "a list or mapping");
	return 0;
}

/* A word the cluster file names, kept when ok() takes it; otherwise the
 * error says what was expected there, and what was found. */
static int word(const cf_doc *d, const cf_node *n, char **p, bool (*ok)(const char *), const char *expected,
		struct verr *err)
{
	const char *s = cf_scalar(n);

	if (!s || !ok(s))
		return cf_error(d, n, err, "%s, got '%.40s'", expected, s ? s : "a list or mapping");
	return (*p = strdup(s)) ? 0 : verr_set(err, "out of memory");
}

static int parse_link(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	return word(d, n, dst, netdev_name_ok,
		    "link: expected a network interface name (at most 15 letters, digits, '.', '_', '-')", err);
}

static int parse_pci_addr(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	return word(d, n, dst, pci_addr_ok,
		    "pci: expected a PCI function's address DDDD:BB:DD.F in lowercase hex such as 0000:00:05.0", err);
}

static int parse_class(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	char expected[160];

	snprintf(expected, sizeof(expected),
		 "class: expected a class name such as nic, gpu or vf (a lowercase letter, then at most %d lowercase letters, digits, '_' or '-')",
		 FABRIC_CLASS_MAX - 1);
	return word(d, n, dst, fabric_class_ok, expected, err);
}

static int parse_node_name(const cf_doc *d, const cf_node *n, void *dst, struct verr *err)
{
	const char *s = cf_scalar(n);
	char **p = dst;

	if (!s || !ident_ok(s, 64))
		return cf_error(d, n, err, "name: expected a node's name as its vhpcd registers (letters, digits, '.', '_', '-'), got '%.40s'",
				s ? s : "a list or mapping");
	return (*p = strdup(s)) ? 0 : verr_set(err, "out of memory");
}

static void release_str(void *dst)
{
	char **p = dst;

	free(*p);
	*p = NULL;
}

#define PF(f) offsetof(struct cluster_pci, f)
static const struct cf_field pci_fields[] = {
	{ .key = "addr", .kind = CF_CUSTOM, .off = PF(addr), .parse = parse_pci_addr, .release = release_str, .flags = CF_REQUIRED },
	{ .key = "class", .kind = CF_CUSTOM, .off = PF(cls), .parse = parse_class, .release = release_str, .flags = CF_REQUIRED },
	{ 0 }
};
static const struct cf_schema pci_schema = { "pci", sizeof(struct cluster_pci), pci_fields };

#define NF(f) offsetof(struct cluster_fabric_node, f)
static const struct cf_field node_fields[] = {
	{ .key = "name", .kind = CF_CUSTOM, .off = NF(name), .parse = parse_node_name, .release = release_str, .flags = CF_REQUIRED },
	{ .key = "link", .kind = CF_CUSTOM, .off = NF(link), .parse = parse_link, .release = release_str },
	{ .key = "pci", .kind = CF_LIST, .off = NF(pci), .sub = &pci_schema },
	{ 0 }
};
static const struct cf_schema node_schema = { "fabric node", sizeof(struct cluster_fabric_node), node_fields };

#define FF(f) offsetof(struct cluster_fabric, f)
static const struct cf_field fabric_fields[] = {
	{ .key = "mode", .kind = CF_ENUM, .off = FF(mode), .names = fabric_mode_names },
	{ .key = "link", .kind = CF_CUSTOM, .off = FF(link), .parse = parse_link, .release = release_str },
	{ .key = "vlans", .kind = CF_CUSTOM, .off = FF(vlan_lo), .parse = parse_vlans },
	{ .key = "pkeys", .kind = CF_CUSTOM, .off = FF(pkey_lo), .parse = parse_pkeys },
	{ .key = "pool", .kind = CF_CUSTOM, .off = FF(pool), .parse = parse_pool },
	{ .key = "prefix", .kind = CF_INT, .off = FF(prefix), .min = 9, .max = 29 },
	{ .key = "nodes", .kind = CF_LIST, .off = FF(nodes), .sub = &node_schema },
	{ 0 }
};
const struct cf_schema cluster_fabric_schema = { "fabric", sizeof(struct cluster_fabric), fabric_fields };

static bool nets_overlap(struct ipv4net a, struct ipv4net b)
{
	int p = a.prefix < b.prefix ? a.prefix : b.prefix;
	uint32_t mask = p ? ~0u << (32 - p) : 0;

	return (a.addr & mask) == (b.addr & mask);
}

int cluster_fabric_check(const struct cluster_cfg *c, const char *path, struct verr *err)
{
	const struct cluster_fabric *f = &c->fabric;
	const struct cluster_fabric_node *nodes = f->nodes.v;
	char a[20], b[20];

	if (f->nodes.n > NODES_MAX)
		return verr_set(err, "%s: fabric.nodes: %zu nodes; at most %d", path, f->nodes.n, NODES_MAX);
	for (size_t i = 0; i < f->nodes.n; i++) {
		const struct cluster_pci *pci = nodes[i].pci.v;

		for (size_t k = 0; k < i; k++)
			if (!strcmp(nodes[k].name, nodes[i].name))
				return verr_set(err, "%s: fabric.nodes[%zu]: node %s is listed twice (also fabric.nodes[%zu])",
						path, i, nodes[i].name, k);
		if (nodes[i].pci.n > NODE_PCI_MAX)
			return verr_set(err, "%s: fabric.nodes[%zu] (%s): %zu PCI functions; at most %d", path, i,
					nodes[i].name, nodes[i].pci.n, NODE_PCI_MAX);
		for (size_t p = 0; p < nodes[i].pci.n; p++)
			for (size_t q = 0; q < p; q++)
				if (!strcmp(pci[p].addr, pci[q].addr))
					return verr_set(err, "%s: fabric.nodes[%zu] (%s): PCI function %s is listed twice",
							path, i, nodes[i].name, pci[p].addr);
	}
	if (f->mode == FABRIC_NONE)
		return 0;
	if (!f->pool.prefix)
		return verr_set(err, "%s: fabric: mode %s needs a pool, the IPv4 network the jobs' fabric subnets are carved from",
				path, fabric_mode_names[f->mode]);
	if (f->prefix <= f->pool.prefix)
		return verr_set(err, "%s: fabric.prefix /%lld must be longer than fabric.pool's /%d", path, f->prefix,
				f->pool.prefix);
	if (nets_overlap(f->pool, c->job_pool))
		return verr_set(err, "%s: fabric.pool %s/%d overlaps job_network.pool %s/%d: a guest's fabric and job network addresses must differ",
				path, ipv4_format(f->pool.addr, a, sizeof(a)), f->pool.prefix,
				ipv4_format(c->job_pool.addr, b, sizeof(b)), c->job_pool.prefix);
	if (f->mode == FABRIC_IB && !f->pkey_lo)
		return verr_set(err, "%s: fabric: mode ib needs pkeys, the partition keys handed to jobs (such as 0x0100-0x01ff)", path);
	if (f->mode != FABRIC_IB && !f->vlan_lo)
		return verr_set(err, "%s: fabric: mode %s needs vlans, the VLAN ids handed to jobs (such as 100-199)", path,
				fabric_mode_names[f->mode]);
	if (f->mode == FABRIC_IB && f->vlan_lo)
		return verr_set(err, "%s: fabric: vlans are RoCE's; mode ib isolates jobs by pkeys", path);
	if (f->mode != FABRIC_IB && f->pkey_lo)
		return verr_set(err, "%s: fabric: pkeys are InfiniBand's; mode %s isolates jobs by vlans", path,
				fabric_mode_names[f->mode]);
	return 0;
}

const struct cluster_fabric_node *cluster_fabric_node(const struct cluster_cfg *c, const char *node)
{
	const struct cluster_fabric_node *nodes = c->fabric.nodes.v;

	for (size_t i = 0; node && i < c->fabric.nodes.n; i++)
		if (!strcmp(nodes[i].name, node))
			return &nodes[i];
	return NULL;
}

const char *cluster_fabric_link(const struct cluster_cfg *c, const char *node)
{
	const struct cluster_fabric_node *n = cluster_fabric_node(c, node);

	if (c->fabric.mode == FABRIC_NONE)
		return NULL;
	return n && n->link ? n->link : c->fabric.link;
}
