/*
 * Underlay encryption (the cluster file's job_network.underlay_encryption):
 * one WireGuard device per node, NA_WG_DEV in the node's namespace, whose
 * peers are the other nodes of this node's jobs; the jobs' VXLANs run
 * between the nodes' WireGuard addresses, so every frame between two nodes
 * of a job crosses the underlay encrypted and authenticated.
 *
 * Keys: each node's private key is HMAC-SHA256 of the cluster's secret
 * (a root-only file on every node, as munge's key) and its underlay
 * address; its public key follows (X25519).  Every node can so compute
 * every other's public key without a key exchange, and anyone without
 * the secret can compute none.  The price: root on any node can compute
 * every node's private key (munge's key has the same property).
 *
 * The device is made by the first job that needs it and removed by the
 * last one's teardown or sweep (a marker "wg" in each such job's dir,
 * counted under the run lock).  Its configuration (keys, port, peers) is
 * set with Debian's `wg` (wireguard-tools): libnl has no WireGuard
 * family, and wireguard-tools' embeddable library is not packaged.
 */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/proc.h"
#include "lib/secret.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WG_TOOL "/usr/bin/wg"
#define MARK    "wg"

uint32_t na_wg_addr(const struct cluster_wg *w, uint32_t underlay)
{
	uint32_t host = w->pool.prefix >= 32 ? 0 : ~0u >> w->pool.prefix;

	return w->pool.addr | (underlay & host);
}

int na_wg_keys(const uint8_t *secret, size_t slen, uint32_t underlay, uint8_t priv[32], uint8_t pub[32],
	       struct verr *err)
{
	crypto_auth_hmacsha256_state st;
	char msg[64], a[20];
	int n = snprintf(msg, sizeof(msg), "vhpc underlay wireguard %s", ipv4_format(underlay, a, sizeof(a)));

	crypto_auth_hmacsha256_init(&st, secret, slen);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)msg, (size_t)n);
	crypto_auth_hmacsha256_final(&st, priv);
	sodium_memzero(&st, sizeof(st));
	/* WireGuard clamps the private key; so does libsodium here. */
	if (crypto_scalarmult_base(pub, priv) != 0)
		return verr_set(err, "WireGuard key of %s: no public key", a);
	return 0;
}

static void b64(const uint8_t k[32], char out[45])
{
	sodium_bin2base64(out, 45, k, 32, sodium_base64_VARIANT_ORIGINAL);
}

static int wg_tool(const char *const *argv, struct verr *err)
{
	if (access(WG_TOOL, X_OK) < 0)
		return verr_set(err, "underlay encryption needs WireGuard's %s (Debian wireguard-tools)", WG_TOOL);
	return run_capture(argv, NULL, NULL, 0, 10000, err) == 0 ? 0 : -1;
}

static int wg_exists(struct nl_sock *sk)
{
	struct rtnl_link *l;

	if (rtnl_link_get_kernel(sk, 0, NA_WG_DEV, &l) < 0)
		return 0;
	rtnl_link_put(l);
	return 1;
}

/* The device with this node's address, key and port, up. */
static int wg_create(struct nl_sock *sk, const struct cluster_wg *w, uint32_t me, const uint8_t priv[32],
		     int mtu, struct verr *err)
{
	struct rtnl_link *l = rtnl_link_alloc();
	struct rtnl_addr *a = rtnl_addr_alloc();
	uint32_t be = htonl(na_wg_addr(w, me));
	struct nl_addr *local = nl_addr_build(AF_INET, &be, 4);
	char key[PATH_MAX], port[16], k64[45], s[20];
	const char *argv[] = { WG_TOOL, "set", NA_WG_DEV, "private-key", key, "listen-port", port, NULL };
	int rc = -1, e, fd;

	if (!l || !a || !local) {
		verr_set(err, "netlink: out of memory");
		goto out;
	}
	rtnl_link_set_name(l, NA_WG_DEV);
	rtnl_link_set_mtu(l, (unsigned)mtu);
	if ((e = rtnl_link_set_type(l, "wireguard")) < 0 || (e = rtnl_link_add(sk, l, NLM_F_CREATE | NLM_F_EXCL)) < 0) {
		verr_set(err, "create %s: %s%s", NA_WG_DEV, nl_geterror(e),
			 e == -NLE_OPNOTSUPP ? " (this kernel has no WireGuard)" : "");
		goto out;
	}
	rtnl_link_put(l);
	if ((e = rtnl_link_get_kernel(sk, 0, NA_WG_DEV, &l)) < 0) {
		l = NULL;
		verr_set(err, "%s: %s", NA_WG_DEV, nl_geterror(e));
		goto out;
	}
	nl_addr_set_prefixlen(local, w->pool.prefix);
	rtnl_addr_set_ifindex(a, rtnl_link_get_ifindex(l));
	rtnl_addr_set_local(a, local);
	if ((e = rtnl_addr_add(sk, a, 0)) < 0) {
		verr_set(err, "%s: address %s/%d: %s", NA_WG_DEV, ipv4_format(ntohl(be), s, sizeof(s)), w->pool.prefix,
			 nl_geterror(e));
		goto out;
	}
	/* The private key reaches wg through a root-only file that lives
	 * only for the call. */
	snprintf(key, sizeof(key), "%s/.wg-key-%d", vhpc_run_dir(), (int)getpid());
	fd = open(key, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		verr_errno(err, "%s", key);
		goto out;
	}
	b64(priv, k64);
	e = write(fd, k64, strlen(k64)) == (ssize_t)strlen(k64) ? 0 : -1;
	close(fd);
	sodium_memzero(k64, sizeof(k64));
	snprintf(port, sizeof(port), "%lld", w->port);
	if (e < 0)
		verr_errno(err, "%s", key);
	else if (wg_tool(argv, err) == 0)
		rc = 0;
	unlink(key);
	if (rc == 0) {
		struct rtnl_link *up = rtnl_link_alloc();

		rtnl_link_set_flags(up, IFF_UP);
		if ((e = rtnl_link_change(sk, l, up, 0)) < 0)
			rc = verr_set(err, "%s: up: %s", NA_WG_DEV, nl_geterror(e));
		rtnl_link_put(up);
	}
out:
	if (local)
		nl_addr_put(local);
	if (a)
		rtnl_addr_put(a);
	if (l)
		rtnl_link_put(l);
	return rc;
}

/* Adds (or updates) each peer: its public key, where it is on the
 * underlay, and its WireGuard address as the one source it may use. */
static int wg_peers(const struct cluster_wg *w, const uint8_t *secret, size_t slen, const uint32_t *peers,
		    int npeers, struct verr *err)
{
	const char **argv = calloc((size_t)npeers * 7 + 4, sizeof(char *));
	char (*txt)[3][48] = calloc((size_t)npeers, sizeof(*txt));
	int n = 0, rc = -1;

	if (!argv || !txt) {
		verr_set(err, "out of memory");
		goto out;
	}
	argv[n++] = WG_TOOL;
	argv[n++] = "set";
	argv[n++] = NA_WG_DEV;
	for (int i = 0; i < npeers; i++) {
		uint8_t priv[32], pub[32];
		char a[20];

		if (na_wg_keys(secret, slen, peers[i], priv, pub, err) < 0)
			goto out;
		sodium_memzero(priv, sizeof(priv));
		b64(pub, txt[i][0]);
		snprintf(txt[i][1], sizeof(txt[i][1]), "%s:%lld", ipv4_format(peers[i], a, sizeof(a)), w->port);
		snprintf(txt[i][2], sizeof(txt[i][2]), "%s/32", ipv4_format(na_wg_addr(w, peers[i]), a, sizeof(a)));
		argv[n++] = "peer";
		argv[n++] = txt[i][0];
		argv[n++] = "endpoint";
		argv[n++] = txt[i][1];
		argv[n++] = "allowed-ips";
		argv[n++] = txt[i][2];
	}
	rc = npeers ? wg_tool(argv, err) : 0;
out:
	free(argv);
	free(txt);
	return rc;
}

int na_wg_up(const struct cluster_wg *w, const char *job, uint32_t underlay, const uint32_t *peers, int npeers,
	     int mtu, int *dev_mtu, struct verr *err)
{
	uint8_t secret[4096], priv[32], pub[32];
	char path[PATH_MAX], dir[PATH_MAX];
	struct nl_sock *sk = NULL;
	struct rtnl_link *l = NULL;
	size_t slen;
	int lock, rc = -1, fd;

	for (int i = 0; i < npeers; i++)
		if (na_wg_addr(w, peers[i]) == na_wg_addr(w, underlay)) {
			char a[20], b[20];

			return verr_set(err, "underlay encryption: nodes %s and %s get one WireGuard address from its pool /%d (their addresses differ only outside its host bits)",
					ipv4_format(underlay, a, sizeof(a)), ipv4_format(peers[i], b, sizeof(b)),
					w->pool.prefix);
		}
	if (secret_load(w->key, secret, sizeof(secret), &slen, err) < 0)
		return verr_wrap(err, "underlay encryption");
	if ((lock = na_run_lock(err)) < 0)
		goto out;
	/* The marker first: from here a crash leaves the device findable. */
	snprintf(path, sizeof(path), "%s/%s", na_job_path(job, dir, sizeof(dir)), MARK);
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		verr_errno(err, "%s", path);
		goto unlock;
	}
	close(fd);
	if (!(sk = nl_socket_alloc()) || nl_connect(sk, NETLINK_ROUTE) < 0) {
		verr_set(err, "netlink: cannot connect");
		goto unlock;
	}
	if (!wg_exists(sk) && (na_wg_keys(secret, slen, underlay, priv, pub, err) < 0 ||
			       wg_create(sk, w, underlay, priv, mtu, err) < 0))
		goto unlock;
	if (wg_peers(w, secret, slen, peers, npeers, err) < 0)
		goto unlock;
	if (rtnl_link_get_kernel(sk, 0, NA_WG_DEV, &l) < 0) {
		verr_set(err, "%s is gone", NA_WG_DEV);
		goto unlock;
	}
	*dev_mtu = (int)rtnl_link_get_mtu(l);
	rc = 0;
unlock:
	na_run_unlock(lock);
out:
	sodium_memzero(secret, sizeof(secret));
	sodium_memzero(priv, sizeof(priv));
	if (l)
		rtnl_link_put(l);
	if (sk)
		nl_socket_free(sk);
	return rc < 0 ? verr_wrap(err, "underlay encryption (WireGuard)") : 0;
}

/* Whether another job of this run dir holds a marker. */
static bool others_use_it(const char *job)
{
	char jobs[PATH_MAX], path[PATH_MAX];
	DIR *d = opendir(na_jobs_dir(jobs, sizeof(jobs)));
	struct dirent *de;
	bool used = false;

	if (!d)
		return false;
	while (!used && (de = readdir(d))) {
		struct stat st;

		if (!na_job_ok(de->d_name) || !strcmp(de->d_name, job))
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", jobs, de->d_name, MARK);
		used = lstat(path, &st) == 0;
	}
	closedir(d);
	return used;
}

int na_wg_release(const char *job, bool alive, struct verr *err)
{
	char path[PATH_MAX], dir[PATH_MAX];
	struct nl_sock *sk;
	struct rtnl_link *l;
	int lock, rc = 0, e;

	snprintf(path, sizeof(path), "%s/%s", na_job_path(job, dir, sizeof(dir)), MARK);
	if (access(path, F_OK) < 0)
		return 0;
	if ((lock = na_run_lock(err)) < 0)
		return -1;
	if (alive && !others_use_it(job) && (sk = nl_socket_alloc())) {
		if (nl_connect(sk, NETLINK_ROUTE) == 0 && rtnl_link_get_kernel(sk, 0, NA_WG_DEV, &l) == 0) {
			if ((e = rtnl_link_delete(sk, l)) < 0)
				rc = verr_set(err, "delete %s: %s", NA_WG_DEV, nl_geterror(e));
			else
				log_info("job %s: removed %s, the last job over it is gone", job, NA_WG_DEV);
			rtnl_link_put(l);
		}
		nl_socket_free(sk);
	}
	if (rc == 0 && unlink(path) < 0 && errno != ENOENT)
		rc = verr_errno(err, "%s", path);
	na_run_unlock(lock);
	return rc;
}
