/* One way to open a netlink socket for the job network's pieces (net.c,
 * fabric.c, rdma_nl.c), so their errors read alike. */
#include "lib/err.h"
#include "nodeagent/net/net.h"

#include <netlink/netlink.h>

struct nl_sock *na_nl_open(int protocol, struct verr *err)
{
	/* RDMA netlink exists only once ib_core is loaded: say so. */
	const char *what = protocol == NETLINK_RDMA ? "RDMA netlink" : "netlink";
	struct nl_sock *sk = nl_socket_alloc();
	int rc;

	if (!sk) {
		verr_set(err, "%s: out of memory", what);
		return NULL;
	}
	if ((rc = nl_connect(sk, protocol)) < 0) {
		verr_set(err, "%s: connect: %s%s", what, nl_geterror(rc),
			 protocol == NETLINK_RDMA ? " (is ib_core loaded?)" : "");
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}
