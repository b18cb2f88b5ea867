/*
 * A kvm guest's NIC on the job network: a tap made inside the job's
 * namespace and attached to its bridge.  The open fd goes to vhpc-hv
 * (--net fd=N), so vhpc-hv runs in the host's namespace and the tap lives
 * exactly as long as someone holds it: no persistent device to leak.  So
 * does /dev/vhost-net where the guest's frames take the kernel's path
 * (--net ...,vhostfd=N): vhpc-hv, confined, could not open it.
 */
#include "nodeagent/job.h"
#include "lib/err.h"
#include "kvm_int.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define BRIDGE "br0"

struct tap_ctx {
	char name[IFNAMSIZ];
	int mtu;
	int fd;
};

static int ifreq_ioctl(int s, unsigned long req, struct ifreq *ifr, const char *what,
		       struct verr *err)
{
	if (ioctl(s, req, ifr) < 0)
		return verr_errno(err, "tap %s: %s", ifr->ifr_name, what);
	return 0;
}

/* Runs in a thread that joined the job netns: the tun device is created in
 * the namespace of whoever opens /dev/net/tun. */
static int tap_setup(void *arg, struct verr *err)
{
	struct tap_ctx *c = arg;
	struct ifreq ifr = { 0 };
	int s = -1, idx;

	c->fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (c->fd < 0)
		return verr_errno(err, "tap %s: /dev/net/tun", c->name);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", c->name);
	/* vhpc-hv's virtio-net wants the vnet header (offloads). */
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (ioctl(c->fd, TUNSETIFF, &ifr) < 0) {
		verr_errno(err, "tap %s: create", c->name);
		goto fail;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		verr_errno(err, "tap %s: socket", c->name);
		goto fail;
	}
	/* The MTU before the bridge: a smaller port would lower the bridge's. */
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", c->name);
	ifr.ifr_mtu = c->mtu;
	if (ifreq_ioctl(s, SIOCSIFMTU, &ifr, "set MTU", err) < 0)
		goto fail;
	idx = (int)if_nametoindex(c->name);
	if (!idx) {
		verr_errno(err, "tap %s: index", c->name);
		goto fail;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", BRIDGE);
	ifr.ifr_ifindex = idx;
	if (ioctl(s, SIOCBRADDIF, &ifr) < 0) {
		verr_errno(err, "tap %s: attach to bridge %s", c->name, BRIDGE);
		goto fail;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", c->name);
	if (ifreq_ioctl(s, SIOCGIFFLAGS, &ifr, "get flags", err) < 0)
		goto fail;
	ifr.ifr_flags |= IFF_UP;
	if (ifreq_ioctl(s, SIOCSIFFLAGS, &ifr, "set up", err) < 0)
		goto fail;
	close(s);
	return 0;
fail:
	if (s >= 0)
		close(s);
	close(c->fd);
	c->fd = -1;
	return -1;
}

int kvm_tap_open(const char *job, int index, int mtu, int *fd, struct verr *err)
{
	struct tap_ctx c = { .mtu = mtu, .fd = -1 };
	char ns[64];

	*fd = -1;
	if (na_job_check(job, err) < 0)
		return -1;
	snprintf(c.name, sizeof(c.name), "t%d", index);
	snprintf(ns, sizeof(ns), "vhpc-%s", job);
	if (na_netns_run(ns, tap_setup, &c, err) < 0)
		return verr_wrap(err, "job %s guest %d", job, index);
	*fd = c.fd;
	return 0;
}

/* misc device 10:238 (VHOST_NET_MINOR, a fixed minor): anything else at
 * the path, a bind mount of another device for instance, is not it. */
#define VHOST_NET_MAJOR 10
#define VHOST_NET_MINOR 238

int kvm_vhost_open(char *why, size_t len)
{
	struct stat st;
	int fd = open("/dev/vhost-net", O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);

	if (fd < 0) {
		snprintf(why, len, "/dev/vhost-net: %s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != VHOST_NET_MAJOR ||
	    minor(st.st_rdev) != VHOST_NET_MINOR) {
		snprintf(why, len, "/dev/vhost-net is not the vhost-net device (10:238)");
		close(fd);
		return -1;
	}
	return fd;
}
