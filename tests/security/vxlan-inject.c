/*
 * The attacker of tests/security/vxlan-*.t: VXLAN frames built by hand in a
 * plain UDP socket, as anyone who can send UDP can build them.
 *
 *   vxlan-inject send NODE VNI DST-MAC DST-IP SRC-MAC SRC-IP PORT COUNT WAIT-MS
 *       sends inner frames to NODE:4789 with the VNI, from SRC-MAC/SRC-IP:
 *       an ARP request for DST-IP (so the guest learns where SRC-IP is, as
 *       a real host's first frame would), then COUNT times an IPv4 UDP
 *       datagram to DST-IP:PORT ("vhpc-inject N") and an ICMP echo
 *       request; then listens WAIT-MS on UDP 4789 of
 *       its own namespace (where the job's VXLAN sends what it learnt goes
 *       to SRC-MAC) and prints "sent N replies R": R frames to SRC-MAC.
 *       With WAIT-MS 0 it does not listen (port 4789 may be the kernel's).
 *   vxlan-inject listen PORT MS
 *       counts datagrams "vhpc-inject ..." reaching UDP PORT for MS ms
 *       and prints the count: run in a guest's namespace.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/ether.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define VXLAN_PORT 4789

static int parse_mac(const char *s, uint8_t m[6])
{
	struct ether_addr e;

	if (!ether_aton_r(s, &e))
		return -1;
	memcpy(m, e.ether_addr_octet, 6);
	return 0;
}

static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

/* VXLAN header, Ethernet, IPv4 with proto and payload; returns the length. */
static size_t frame(uint8_t *f, uint32_t vni, const uint8_t dmac[6], const uint8_t smac[6], struct in_addr src,
		    struct in_addr dst, uint8_t proto, const uint8_t *l4, size_t l4len)
{
	static uint16_t id;
	uint8_t *ip = f + 8 + 14;

	memset(f, 0, 8 + 14 + 20);
	f[0] = 0x08; /* I: the VNI is valid */
	f[4] = vni >> 16;
	f[5] = (vni >> 8) & 0xff;
	f[6] = vni & 0xff;
	memcpy(f + 8, dmac, 6);
	memcpy(f + 14, smac, 6);
	put16(f + 20, 0x0800);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)(20 + l4len));
	put16(ip + 4, ++id);
	ip[8] = 64;
	ip[9] = proto;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	put16(ip + 10, csum(ip, 20));
	memcpy(ip + 20, l4, l4len);
	return 8 + 14 + 20 + l4len;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static int cmd_send(char **a)
{
	uint8_t dmac[6], smac[6], f[256], l4[64];
	struct in_addr node, dst, src;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(VXLAN_PORT) };
	long vni = strtol(a[1], NULL, 0), port = strtol(a[6], NULL, 0), count = atol(a[7]), wait = atol(a[8]);
	int fd, rfd = -1, sent = 0, replies = 0;
	struct timespec t0;

	if (!inet_aton(a[0], &node) || !inet_aton(a[3], &dst) || !inet_aton(a[5], &src) || parse_mac(a[2], dmac) ||
	    parse_mac(a[4], smac) || vni < 1 || vni > 0xffffff || port < 1 || port > 65535 || count < 1) {
		fprintf(stderr, "vxlan-inject send: bad arguments\n");
		return 2;
	}
	to.sin_addr = node;
	if ((fd = socket(AF_INET, SOCK_DGRAM, 0)) < 0) {
		perror("socket");
		return 1;
	}
	if (wait > 0) {
		struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons(VXLAN_PORT) };

		rfd = socket(AF_INET, SOCK_DGRAM, 0);
		if (rfd < 0 || bind(rfd, (struct sockaddr *)&me, sizeof(me)) < 0) {
			perror("bind UDP 4789 for replies");
			return 1;
		}
	}
	{
		/* ARP request: who has DST-IP, tell SRC-IP (at SRC-MAC) */
		uint8_t *e = f + 8, *arp = e + 14;
		size_t len = 8 + 14 + 28;

		memset(f, 0, len);
		f[0] = 0x08;
		f[4] = vni >> 16;
		f[5] = (vni >> 8) & 0xff;
		f[6] = vni & 0xff;
		memcpy(e, dmac, 6);
		memcpy(e + 6, smac, 6);
		put16(e + 12, 0x0806);
		put16(arp, 1);
		put16(arp + 2, 0x0800);
		arp[4] = 6;
		arp[5] = 4;
		put16(arp + 6, 1);
		memcpy(arp + 8, smac, 6);
		memcpy(arp + 14, &src, 4);
		memcpy(arp + 24, &dst, 4);
		if (sendto(fd, f, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len)
			sent++;
		usleep(20000);
	}
	for (long i = 0; i < count; i++) {
		int n = snprintf((char *)l4 + 8, sizeof(l4) - 8, "vhpc-inject %ld", i);
		size_t len;

		/* UDP, checksum 0 (none: allowed over IPv4) */
		put16(l4, 40000);
		put16(l4 + 2, (uint16_t)port);
		put16(l4 + 4, (uint16_t)(8 + n));
		put16(l4 + 6, 0);
		len = frame(f, (uint32_t)vni, dmac, smac, src, dst, IPPROTO_UDP, l4, 8 + (size_t)n);
		if (sendto(fd, f, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len)
			sent++;
		/* ICMP echo request, id 0x7668, sequence i */
		memset(l4, 0, 16);
		l4[0] = 8;
		put16(l4 + 4, 0x7668);
		put16(l4 + 6, (uint16_t)i);
		memcpy(l4 + 8, "vhpcinj!", 8);
		put16(l4 + 2, csum(l4, 16));
		len = frame(f, (uint32_t)vni, dmac, smac, src, dst, IPPROTO_ICMP, l4, 16);
		if (sendto(fd, f, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len)
			sent++;
		usleep(20000);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (rfd >= 0 && ms_since(&t0) < wait) {
		struct pollfd p = { .fd = rfd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, (int)(wait - ms_since(&t0))) <= 0)
			continue;
		r = recv(rfd, f, sizeof(f), 0);
		/* a VXLAN frame whose inner destination is the attacker's MAC */
		if (r >= 8 + 14 && !memcmp(f + 8, smac, 6))
			replies++;
	}
	printf("sent %d replies %d\n", sent, replies);
	return sent == 2 * count + 1 ? 0 : 1;
}

static int cmd_listen(char **a)
{
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(a[0])) };
	long ms = atol(a[1]);
	int fd = socket(AF_INET, SOCK_DGRAM, 0), got = 0;
	struct timespec t0;
	char b[256];

	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		perror("vxlan-inject listen: bind");
		return 1;
	}
	/* the test waits for this line before it attacks */
	printf("listening\n");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms_since(&t0) < ms) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, (int)(ms - ms_since(&t0))) <= 0)
			continue;
		r = recv(fd, b, sizeof(b) - 1, 0);
		if (r > 0 && !strncmp(b, "vhpc-inject ", 12))
			got++;
	}
	printf("received %d\n", got);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 11 && !strcmp(argv[1], "send"))
		return cmd_send(argv + 2);
	if (argc == 4 && !strcmp(argv[1], "listen"))
		return cmd_listen(argv + 2);
	fprintf(stderr, "usage: vxlan-inject send NODE VNI DST-MAC DST-IP SRC-MAC SRC-IP PORT COUNT WAIT-MS\n"
			"       vxlan-inject listen PORT MS\n");
	return 2;
}
