/*
 * NIC offloads through the ethtool ioctl (seed 000: segmentation and
 * checksum offload on the guest NIC decide whether a veth moves 1 or 10
 * Gbit/s).  Works on the interface in the calling thread's netns.
 */
#include "na.h"

#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct feat {
	const char *name;
	uint32_t get, set;
	size_t off;       /* in struct tuning's offload */
};

/* Checksum and scatter-gather first: the kernel drops TSO without them. */
static const struct feat feats[] = {
	{ "tx_csum", ETHTOOL_GTXCSUM, ETHTOOL_STXCSUM, offsetof(struct tuning, offload.tx_csum) },
	{ "rx_csum", ETHTOOL_GRXCSUM, ETHTOOL_SRXCSUM, offsetof(struct tuning, offload.rx_csum) },
	{ "sg", ETHTOOL_GSG, ETHTOOL_SSG, offsetof(struct tuning, offload.sg) },
	{ "tso", ETHTOOL_GTSO, ETHTOOL_STSO, offsetof(struct tuning, offload.tso) },
	{ "gso", ETHTOOL_GGSO, ETHTOOL_SGSO, offsetof(struct tuning, offload.gso) },
	{ "gro", ETHTOOL_GGRO, ETHTOOL_SGRO, offsetof(struct tuning, offload.gro) },
};

static int ethtool_value(int fd, const char *ifname, uint32_t cmd, uint32_t *val)
{
	struct ethtool_value ev = { .cmd = cmd, .data = *val };
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&ev;
	if (ioctl(fd, SIOCETHTOOL, &ifr) < 0)
		return -1;
	*val = ev.data;
	return 0;
}

int na_eth_offloads(const char *ifname, const struct tuning *t, struct verr *err)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = 0;

	if (fd < 0)
		return verr_errno(err, "socket for ethtool");
	for (size_t i = 0; i < sizeof(feats) / sizeof(feats[0]) && rc == 0; i++) {
		bool want = *(const bool *)((const char *)t + feats[i].off);
		uint32_t v = want;

		if (ethtool_value(fd, ifname, feats[i].set, &v) < 0)
			rc = verr_errno(err, "%s: set offload %s %s", ifname, feats[i].name, want ? "on" : "off");
	}
	/* Read back: the kernel silently drops features whose prerequisites
	 * are off (tso without sg), and a profile asking for that is wrong. */
	for (size_t i = 0; i < sizeof(feats) / sizeof(feats[0]) && rc == 0; i++) {
		bool want = *(const bool *)((const char *)t + feats[i].off);
		uint32_t v = 0;

		if (ethtool_value(fd, ifname, feats[i].get, &v) < 0)
			rc = verr_errno(err, "%s: read offload %s", ifname, feats[i].name);
		else if (!!v != want)
			rc = verr_set(err, "%s: offload %s stays %s after asking for %s (tso needs sg and tx_csum)",
				      ifname, feats[i].name, v ? "on" : "off", want ? "on" : "off");
	}
	close(fd);
	return rc;
}
