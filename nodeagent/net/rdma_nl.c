/*
 * The RDMA subsystem's netlink interface (NETLINK_RDMA, the NLDEV client),
 * through libnl: what iproute2's `rdma` tool sends for `rdma link add|del`,
 * `rdma dev set DEV netns NS` and `rdma system set netns`, plus the query
 * it has no command for and the agent needs, the uverbs character device
 * of an RDMA device (RDMA_NLDEV_CMD_GET_CHARDEV, what libibverbs asks).
 * Every call acts in the calling thread's network namespace, which in
 * exclusive mode is also the only one whose devices it sees: callers run
 * these from na_netns_run.
 */
#include "lib/err.h"
#include "nodeagent/net/net.h"

#include <errno.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <rdma/rdma_netlink.h>
#include <stdio.h>
#include <string.h>

#define NLDEV(op) RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)

/* What a reply or a dump delivers to parse_cb. */
struct nl_reply {
	const char *want_name;         /* dump: the device to find */
	uint32_t index;
	bool found;
	uint8_t netns_mode;
	bool have_mode;
	uint64_t chardev;
	char chardev_name[64];
	void (*each)(const char *name, uint32_t index, void *arg);
	void *each_arg;
};

static int parse_cb(struct nl_msg *msg, void *arg)
{
	struct nl_reply *r = arg;
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];

	if (nlmsg_parse(nlmsg_hdr(msg), 0, tb, RDMA_NLDEV_ATTR_MAX - 1, NULL) < 0)
		return NL_SKIP;
	if (tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]) {
		r->netns_mode = nla_get_u8(tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]);
		r->have_mode = true;
	}
	if (tb[RDMA_NLDEV_ATTR_CHARDEV]) {
		r->chardev = nla_get_u64(tb[RDMA_NLDEV_ATTR_CHARDEV]);
		r->found = true;
	}
	if (tb[RDMA_NLDEV_ATTR_CHARDEV_NAME])
		nla_strlcpy(r->chardev_name, tb[RDMA_NLDEV_ATTR_CHARDEV_NAME], sizeof(r->chardev_name));
	if (tb[RDMA_NLDEV_ATTR_DEV_INDEX] && tb[RDMA_NLDEV_ATTR_DEV_NAME]) {
		char name[64];
		uint32_t index = nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);

		nla_strlcpy(name, tb[RDMA_NLDEV_ATTR_DEV_NAME], sizeof(name));
		if (r->each)
			r->each(name, index, r->each_arg);
		if (r->want_name && !strcmp(name, r->want_name)) {
			r->index = index;
			r->found = true;
		}
	}
	return NL_OK;
}

/* Sends msg (freed) and reads the answer into r (NULL: an ack only). */
static int transact(struct nl_msg *msg, struct nl_reply *r, const char *what, struct verr *err)
{
	struct nl_sock *sk = na_nl_open(NETLINK_RDMA, err);
	int rc;

	if (!sk) {
		nlmsg_free(msg);
		return -1;
	}
	if (r)
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, parse_cb, r);
	rc = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (rc >= 0)
		rc = r ? nl_recvmsgs_default(sk) : nl_wait_for_ack(sk);
	nl_socket_free(sk);
	if (rc < 0)
		return verr_set(err, "%s: %s", what, nl_geterror(rc));
	return 0;
}

static struct nl_msg *new_msg(int op, int flags, struct verr *err)
{
	struct nl_msg *m = nlmsg_alloc_simple(NLDEV(op), NLM_F_REQUEST | flags);

	if (!m)
		verr_set(err, "RDMA netlink: out of memory");
	return m;
}

int na_rdma_dev_index(const char *name, uint32_t *index, struct verr *err)
{
	struct nl_reply r = { .want_name = name };
	struct nl_msg *m = new_msg(RDMA_NLDEV_CMD_GET, NLM_F_DUMP, err);
	char what[128];

	if (!m)
		return -1;
	snprintf(what, sizeof(what), "RDMA devices (looking for %s)", name);
	if (transact(m, &r, what, err) < 0)
		return -1;
	if (!r.found)
		return 0;
	*index = r.index;
	return 1;
}

int na_rdma_dev_each(void (*fn)(const char *name, uint32_t index, void *arg), void *arg, struct verr *err)
{
	struct nl_reply r = { .each = fn, .each_arg = arg };
	struct nl_msg *m = new_msg(RDMA_NLDEV_CMD_GET, NLM_F_DUMP, err);

	return m ? transact(m, &r, "RDMA devices", err) : -1;
}

int na_rdma_netns_exclusive(struct verr *err)
{
	struct nl_reply r = { 0 };
	struct nl_msg *m = new_msg(RDMA_NLDEV_CMD_SYS_GET, 0, err);

	if (!m || transact(m, &r, "RDMA system settings", err) < 0)
		return -1;
	if (!r.have_mode)
		return verr_set(err, "this kernel's RDMA subsystem has no network namespace mode: "
				"its devices cannot be kept to one namespace");
	if (r.netns_mode == 0)
		return 0;
	if (!(m = new_msg(RDMA_NLDEV_CMD_SYS_SET, NLM_F_ACK, err)))
		return -1;
	if (nla_put_u8(m, RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 0) < 0) {
		nlmsg_free(m);
		return verr_set(err, "RDMA netlink: message too long");
	}
	/* The kernel refuses the switch once a second network namespace
	 * exists, which on a node running jobs is always. */
	if (transact(m, NULL, "setting the RDMA network namespace mode to exclusive", err) < 0)
		return verr_wrap(err, "RDMA devices are shared by every network namespace here, so any guest could use any "
				 "job's device; set exclusive mode at boot (ib_core netns_mode=0, or `rdma system set netns "
				 "exclusive` before any network namespace exists)");
	return 0;
}

int na_rdma_link_add(const char *name, const char *type, const char *netdev, struct verr *err)
{
	/* No NLM_F_CREATE or NLM_F_EXCL: RDMA netlink reads any bit of
	 * NLM_F_DUMP (EXCL is MATCH) as a dump request. */
	struct nl_msg *m = new_msg(RDMA_NLDEV_CMD_NEWLINK, NLM_F_ACK, err);
	char what[200];

	if (!m)
		return -1;
	if (nla_put_string(m, RDMA_NLDEV_ATTR_DEV_NAME, name) < 0 ||
	    nla_put_string(m, RDMA_NLDEV_ATTR_LINK_TYPE, type) < 0 ||
	    nla_put_string(m, RDMA_NLDEV_ATTR_NDEV_NAME, netdev) < 0) {
		nlmsg_free(m);
		return verr_set(err, "RDMA netlink: message too long");
	}
	snprintf(what, sizeof(what), "RDMA link %s (type %s on %s)", name, type, netdev);
	return transact(m, NULL, what, err);
}

static struct nl_msg *dev_msg(int op, const char *name, uint32_t *index, struct verr *err)
{
	int r = na_rdma_dev_index(name, index, err);

	if (r < 0)
		return NULL;
	if (r == 0) {
		verr_set(err, "RDMA device %s: not in this network namespace", name);
		return NULL;
	}
	struct nl_msg *m = new_msg(op, NLM_F_ACK, err);

	if (m && nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, *index) < 0) {
		nlmsg_free(m);
		verr_set(err, "RDMA netlink: message too long");
		return NULL;
	}
	return m;
}

int na_rdma_link_del(const char *name, struct verr *err)
{
	uint32_t index;
	int r = na_rdma_dev_index(name, &index, err);
	struct nl_msg *m;
	char what[128];

	if (r <= 0)
		return r;
	if (!(m = new_msg(RDMA_NLDEV_CMD_DELLINK, NLM_F_ACK, err)))
		return -1;
	if (nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, index) < 0) {
		nlmsg_free(m);
		return verr_set(err, "RDMA netlink: message too long");
	}
	snprintf(what, sizeof(what), "removing RDMA link %s", name);
	return transact(m, NULL, what, err) < 0 ? -1 : 1;
}

int na_rdma_dev_set_netns(const char *name, int netns_fd, struct verr *err)
{
	uint32_t index;
	struct nl_msg *m = dev_msg(RDMA_NLDEV_CMD_SET, name, &index, err);
	char what[128];

	if (!m)
		return -1;
	if (nla_put_u32(m, RDMA_NLDEV_NET_NS_FD, (uint32_t)netns_fd) < 0) {
		nlmsg_free(m);
		return verr_set(err, "RDMA netlink: message too long");
	}
	snprintf(what, sizeof(what), "moving RDMA device %s to another network namespace", name);
	return transact(m, NULL, what, err);
}

int na_rdma_chardev(const char *name, const char *type, dev_t *dev, char *cname, size_t len, struct verr *err)
{
	uint32_t index;
	struct nl_msg *m = dev_msg(RDMA_NLDEV_CMD_GET_CHARDEV, name, &index, err);
	struct nl_reply r = { 0 };
	char what[128];

	if (!m)
		return -1;
	/* dev_msg asked for an ack; this one answers with data instead. */
	nlmsg_hdr(m)->nlmsg_flags &= ~NLM_F_ACK;
	if (nla_put_string(m, RDMA_NLDEV_ATTR_CHARDEV_TYPE, type) < 0) {
		nlmsg_free(m);
		return verr_set(err, "RDMA netlink: message too long");
	}
	snprintf(what, sizeof(what), "the %s device of RDMA device %s", type, name);
	if (transact(m, &r, what, err) < 0)
		return -1;
	if (!r.found || !r.chardev_name[0])
		return verr_set(err, "%s: the kernel named none", what);
	*dev = (dev_t)r.chardev;
	snprintf(cname, len, "%s", r.chardev_name);
	return 0;
}
