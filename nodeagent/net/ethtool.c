/*
 * NIC offloads through the ethtool ioctl (seed 000: segmentation and
 * checksum offload on the guest NIC decide whether a veth moves 1 or 10
 * Gbit/s).  Works on the interface in the calling thread's netns.
 *
 * Features are set by name (ETHTOOL_SFEATURES), the way ethtool -K does:
 * each profile switch covers every kernel feature of its family, so e.g.
 * "tso: false" also turns off TSO variants newer than the legacy ioctls
 * know about (tx-tcp-accecn-segmentation).
 */
#include "lib/err.h"
#include "lib/tuning.h"
#include "nodeagent/net/net.h"

#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct family {
	const char *name;     /* the profile's word */
	size_t off;           /* in struct tuning */
};

static const struct family fams[] = {
	{ "tso", offsetof(struct tuning, offload.tso) },
	{ "gso", offsetof(struct tuning, offload.gso) },
	{ "gro", offsetof(struct tuning, offload.gro) },
	{ "sg", offsetof(struct tuning, offload.sg) },
	{ "tx_csum", offsetof(struct tuning, offload.tx_csum) },
	{ "rx_csum", offsetof(struct tuning, offload.rx_csum) },
};
#define NFAM (sizeof(fams) / sizeof(fams[0]))

static bool starts(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

static bool ends(const char *s, const char *e)
{
	size_t n = strlen(s), k = strlen(e);

	return n >= k && !strcmp(s + n - k, e);
}

/* The family (index into fams) of a kernel feature name, as ethtool -k
 * groups them; -1 for features profiles do not touch. */
static int family_of(const char *f)
{
	if (starts(f, "tx-tcp") && ends(f, "segmentation"))
		return 0;
	if (!strcmp(f, "tx-generic-segmentation"))
		return 1;
	if (!strcmp(f, "rx-gro"))
		return 2;
	if (!strcmp(f, "tx-scatter-gather") || !strcmp(f, "tx-scatter-gather-fraglist"))
		return 3;
	if (starts(f, "tx-checksum-"))
		return 4;
	if (!strcmp(f, "rx-checksum"))
		return 5;
	return -1;
}

static int ioc(int fd, const char *ifname, void *data)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = data;
	return ioctl(fd, SIOCETHTOOL, &ifr);
}

/* Feature names, and for each feature the family it belongs to (-1). */
static int feature_names(int fd, const char *ifname, int *count, int **fam, struct verr *err)
{
	/* Room for the one count asked for after the header's flexible array;
	 * a union, since a struct with such a header first is a GNU extension. */
	union {
		struct ethtool_sset_info hdr;
		uint8_t raw[sizeof(struct ethtool_sset_info) + sizeof(uint32_t)];
	} info = { .hdr = { .cmd = ETHTOOL_GSSET_INFO, .sset_mask = 1ull << ETH_SS_FEATURES } };
	struct ethtool_gstrings *gs;
	int n;

	if (ioc(fd, ifname, &info) < 0 || !info.hdr.sset_mask)
		return verr_errno(err, "%s: ethtool feature count", ifname);
	n = (int)info.hdr.data[0];
	gs = calloc(1, sizeof(*gs) + (size_t)n * ETH_GSTRING_LEN);
	*fam = calloc((size_t)n, sizeof(int));
	if (!gs || !*fam) {
		free(gs);
		free(*fam);
		return verr_set(err, "out of memory");
	}
	gs->cmd = ETHTOOL_GSTRINGS;
	gs->string_set = ETH_SS_FEATURES;
	gs->len = (uint32_t)n;
	if (ioc(fd, ifname, gs) < 0) {
		free(gs);
		free(*fam);
		return verr_errno(err, "%s: ethtool feature names", ifname);
	}
	for (int i = 0; i < n; i++) {
		char name[ETH_GSTRING_LEN + 1];

		memcpy(name, gs->data + (size_t)i * ETH_GSTRING_LEN, ETH_GSTRING_LEN);
		name[ETH_GSTRING_LEN] = 0;
		(*fam)[i] = family_of(name);
	}
	free(gs);
	*count = n;
	return 0;
}

static struct ethtool_gfeatures *get_features(int fd, const char *ifname, int blocks)
{
	struct ethtool_gfeatures *g = calloc(1, sizeof(*g) + (size_t)blocks * sizeof(g->features[0]));

	if (!g)
		return NULL;
	g->cmd = ETHTOOL_GFEATURES;
	g->size = (uint32_t)blocks;
	if (ioc(fd, ifname, g) < 0) {
		free(g);
		return NULL;
	}
	return g;
}

/* What the caller wants of family f, and whether it asks at all. */
static bool wanted(const struct tuning *t, unsigned flags, size_t f, bool *want)
{
	if ((flags & NA_ETH_NO_GRO) && !strcmp(fams[f].name, "gro")) {
		*want = false;
		return true;
	}
	if (!t)
		return false;
	*want = *(const bool *)((const char *)t + fams[f].off);
	return true;
}

int na_eth_offloads(const char *ifname, const struct tuning *t, unsigned flags, struct verr *err)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int n = 0, *fam = NULL, blocks, rc = -1;
	struct ethtool_gfeatures *g = NULL;
	struct ethtool_sfeatures *s = NULL;

	if (fd < 0)
		return verr_errno(err, "socket for ethtool");
	if (feature_names(fd, ifname, &n, &fam, err) < 0)
		goto out;
	blocks = (n + 31) / 32;
	g = get_features(fd, ifname, blocks);
	s = calloc(1, sizeof(*s) + (size_t)blocks * sizeof(s->features[0]));
	if (!g || !s) {
		verr_errno(err, "%s: ethtool features", ifname);
		goto out;
	}
	s->cmd = ETHTOOL_SFEATURES;
	s->size = (uint32_t)blocks;
	for (int i = 0; i < n; i++) {
		uint32_t bit = 1u << (i % 32);
		int b = i / 32;

		bool want;

		if (fam[i] < 0 || !(g->features[b].available & bit) || (g->features[b].never_changed & bit) ||
		    !wanted(t, flags, (size_t)fam[i], &want))
			continue;
		s->features[b].valid |= bit;
		if (want)
			s->features[b].requested |= bit;
	}
	/* A positive return only says some features differ from the request
	 * (dependencies); the read-back below judges. */
	if (ioc(fd, ifname, s) < 0) {
		verr_errno(err, "%s: set offloads", ifname);
		goto out;
	}
	free(g);
	if (!(g = get_features(fd, ifname, blocks))) {
		verr_errno(err, "%s: read offloads back", ifname);
		goto out;
	}
	/* Like ethtool -k: a family is on when any of its features is.  The
	 * kernel drops features whose prerequisites are off (TSO without SG
	 * and checksumming): a profile that asks for that is wrong. */
	for (size_t f = 0; f < NFAM; f++) {
		bool want, any = false, changeable = false;

		if (!wanted(t, flags, f, &want))
			continue;
		for (int i = 0; i < n; i++) {
			uint32_t bit = 1u << (i % 32);
			int b = i / 32;

			if (fam[i] != (int)f || !(g->features[b].available & bit) ||
			    (g->features[b].never_changed & bit))
				continue;
			changeable = true;
			any |= (g->features[b].active & bit) != 0;
		}
		if (changeable && any != want) {
			verr_set(err, "%s: offload %s stays %s after asking for %s (tso needs sg and tx_csum)",
				 ifname, fams[f].name, any ? "on" : "off", want ? "on" : "off");
			goto out;
		}
	}
	rc = 0;
out:
	free(fam);
	free(g);
	free(s);
	close(fd);
	return rc;
}
