/*
 * The job network's firewall on the node (nftables, through libnftables):
 * a table `ip vhpc-<job>` in the node's network namespace, the one whose
 * UDP port NA_VXLAN_PORT the job's VXLAN listens on.  It drops
 *   - in:  VXLAN packets carrying the job's VNI from any address that is
 *          not one of the job's other nodes;
 *   - out: VXLAN packets carrying the job's VNI sent by a user socket of
 *          anyone but root (the kernel's own VXLAN socket has no user, so
 *          the job's traffic passes; an unprivileged process on a node of
 *          the job could otherwise speak for that node).
 * A VNI no job of this node has is dropped by the kernel (no device), so
 * every packet that could reach a guest passed one of these tables.
 *
 * Which namespace the table lives in is recorded in <job dir>/fw.netns, so
 * whoever removes the job (its owner, a restarted vhpcd, `vhpc-na cleanup`
 * run from another namespace) removes the table in the right namespace.
 */
#include "lib/err.h"
#include "lib/inet.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PIN "fw.netns"

/* Runs one nft command text in the calling thread's namespace. */
static int nft_run(const char *cmd, struct verr *err)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	int rc = 0;

	if (!ctx)
		return verr_set(err, "nftables: cannot make a context");
	if (nft_ctx_buffer_output(ctx) < 0 || nft_ctx_buffer_error(ctx) < 0) {
		nft_ctx_free(ctx);
		return verr_set(err, "nftables: cannot buffer its messages");
	}
	if (nft_run_cmd_from_buffer(ctx, cmd) != 0) {
		const char *m = nft_ctx_get_error_buffer(ctx);
		size_t n = m ? strlen(m) : 0;

		while (n && m[n - 1] == '\n')
			n--;
		rc = verr_set(err, "nftables: %.*s", (int)(n > 700 ? 700 : n), m ? m : "failed");
	}
	nft_ctx_free(ctx);
	return rc;
}

/* "add; delete" first, so the batch replaces a table of the same name and
 * the delete alone never fails for a missing one; all in one transaction.
 * With iif (underlay encryption): the VNI is taken only from that
 * interface, where what arrives was decrypted and its source checked. */
static char *rules_text(const char *job, uint32_t vni, const uint32_t *peers, int npeers, const char *iif)
{
	size_t cap = 1024 + (size_t)npeers * 18;
	char *t = malloc(cap), *p, a[20];

	if (!t)
		return NULL;
	p = t + snprintf(t, cap,
		"add table ip vhpc-%s\ndelete table ip vhpc-%s\n"
		"table ip vhpc-%s {\n"
		" chain in {\n  type filter hook input priority filter - 10; policy accept;\n",
		job, job, job);
	if (iif)
		p += sprintf(p, "  udp dport %d @th,96,24 %u iifname != \"%.15s\" counter drop\n", NA_VXLAN_PORT, vni, iif);
	p += sprintf(p, "  udp dport %d @th,96,24 %u ", NA_VXLAN_PORT, vni);
	if (npeers > 0) {
		p += sprintf(p, "ip saddr != {");
		for (int i = 0; i < npeers; i++)
			p += sprintf(p, "%s%s", i ? "," : " ", ipv4_format(peers[i], a, sizeof(a)));
		p += sprintf(p, " } ");
	}
	sprintf(p, "counter drop\n }\n"
		" chain out {\n  type filter hook output priority filter - 10; policy accept;\n"
		"  udp dport %d @th,96,24 %u meta skuid != 0 counter drop\n }\n}\n",
		NA_VXLAN_PORT, vni);
	return t;
}

static const char *pin_path(const char *job, char *buf, size_t len)
{
	char dir[PATH_MAX];

	snprintf(buf, len, "%s/%s", na_job_path(job, dir, sizeof(dir)), PIN);
	return buf;
}

/* Records which namespace the calling thread is in (its nsfs device and
 * inode): a record, not a reference, so a namespace whose node is gone
 * (tests delete a node's namespace to kill it) is not kept alive by it. */
static int pin_netns(const char *path, struct verr *err)
{
	struct stat st;
	char rec[64];
	int fd, n;

	if (stat("/proc/thread-self/ns/net", &st) < 0)
		return verr_errno(err, "/proc/thread-self/ns/net");
	n = snprintf(rec, sizeof(rec), "%llu %llu\n", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return verr_errno(err, "%s", path);
	if (write(fd, rec, (size_t)n) != n) {
		verr_errno(err, "%s", path);
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}

static int open_if(const char *path, dev_t dev, ino_t ino)
{
	struct stat st;

	if (stat(path, &st) < 0 || st.st_dev != dev || st.st_ino != ino)
		return -1;
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* The recorded namespace, opened, or -1 when no process and no name under
 * /run/netns has it any more (it is gone, and its tables with it): ours
 * first (a node's usual case), then the named ones, then every process's. */
static int find_netns(const char *rec_path)
{
	unsigned long long dev, ino;
	char path[PATH_MAX], rec[64] = "";
	const char *dirs[] = { NA_NETNS_DIR, "/proc", NULL };
	int fd = open(rec_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, rec, sizeof(rec) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0 || sscanf(rec, "%llu %llu", &dev, &ino) != 2)
		return -1;
	if ((fd = open_if("/proc/thread-self/ns/net", (dev_t)dev, (ino_t)ino)) >= 0)
		return fd;
	for (int k = 0; dirs[k] && fd < 0; k++) {
		DIR *d = opendir(dirs[k]);
		struct dirent *de;

		while (d && fd < 0 && (de = readdir(d))) {
			if (de->d_name[0] == '.' || (k == 1 && (de->d_name[0] < '0' || de->d_name[0] > '9')))
				continue;
			snprintf(path, sizeof(path), k == 1 ? "%s/%s/ns/net" : "%s/%s", dirs[k], de->d_name);
			fd = open_if(path, (dev_t)dev, (ino_t)ino);
		}
		if (d)
			closedir(d);
	}
	return fd;
}

int na_fw_add(const char *job, uint32_t vni, const uint32_t *peers, int npeers, const char *iif,
	      struct verr *err)
{
	char path[PATH_MAX], *rules;
	int rc;

	if (na_job_check(job, err) < 0)
		return -1;
	if (vni < 1 || vni > VHPC_VNI_MAX || npeers < 0 || (npeers && !peers))
		return verr_set(err, "job %s firewall: bad VNI or peers", job);
	/* Recorded first: a crash after the table is made leaves it findable. */
	if (pin_netns(pin_path(job, path, sizeof(path)), err) < 0)
		return verr_wrap(err, "job %s firewall", job);
	if (!(rules = rules_text(job, vni, peers, npeers, iif)))
		return verr_set(err, "job %s firewall: out of memory", job);
	rc = nft_run(rules, err);
	free(rules);
	if (rc < 0) {
		struct verr e;

		verr_wrap(err, "job %s firewall (table ip vhpc-%s)", job, job);
		(void)na_fw_remove(job, &e);
	}
	return rc;
}

struct del_call {
	const char *job;
	int ns;
	struct verr err;
	int rc;
};

static void *del_thread(void *p)
{
	struct del_call *c = p;
	char cmd[128];

	if (setns(c->ns, CLONE_NEWNET) < 0) {
		c->rc = verr_errno(&c->err, "enter the node's network namespace");
		return NULL;
	}
	snprintf(cmd, sizeof(cmd), "add table ip vhpc-%s\ndelete table ip vhpc-%s\n", c->job, c->job);
	c->rc = nft_run(cmd, &c->err);
	/* In the node's namespace, where the WireGuard device is too. */
	if (c->rc == 0)
		c->rc = na_wg_release(c->job, true, &c->err);
	return NULL;
}

int na_fw_remove(const char *job, struct verr *err)
{
	char path[PATH_MAX];
	struct del_call c = { .job = job };
	struct stat st;
	pthread_t th;
	int e;

	if (na_job_check(job, err) < 0)
		return -1;
	if (lstat(pin_path(job, path, sizeof(path)), &st) < 0)
		return errno == ENOENT ? 0 : verr_errno(err, "%s", path);
	if ((c.ns = find_netns(path)) < 0) {
		/* Gone with its namespace: the table and the device both. */
		if (na_wg_release(job, false, err) < 0)
			return -1;
	} else {
		/* Entered by a thread of its own: no caller thread ever
		 * changes namespace. */
		if ((e = pthread_create(&th, NULL, del_thread, &c)) != 0) {
			close(c.ns);
			errno = e;
			return verr_errno(err, "job %s firewall: thread", job);
		}
		pthread_join(th, NULL);
		close(c.ns);
		if (c.rc < 0) {
			*err = c.err;
			return verr_wrap(err, "job %s firewall (table ip vhpc-%s)", job, job);
		}
	}
	if (unlink(path) < 0 && errno != ENOENT)
		return verr_errno(err, "unlink %s", path);
	return 1;
}
