/* hvt: the host side of the hv device tests (the tests/hv .t files).
 *
 *   hvt pattern FILE SIZE SEED           write SIZE bytes of test pattern
 *   hvt checkpat FILE OFF LEN SEED       exit 0 if FILE[OFF, OFF+LEN) holds it
 *   hvt tapsend IFACE DSTMAC ETHERTYPE TEXT [LEN]
 *                                        send one Ethernet frame out of IFACE
 *                                        (into the tap's guest): TEXT, then
 *                                        pattern bytes (seed 3) up to LEN
 *   hvt taprecv IFACE ETHERTYPE MS N     print up to N frames of ETHERTYPE
 *                                        arriving from IFACE (sent by the
 *                                        guest): "SRC DST LEN TEXT", within MS
 *   hvt udprecv ADDR PORT MS N           print up to N UDP payloads received
 *   hvt uds-serve PATH MS                a guest-initiated vsock peer: take
 *                                        "hello host X\n" + 64 KiB (seed 5),
 *                                        answer "re: hello host X\n", wait EOF
 *   hvt bzimage FLAT INIT_SIZE OUT       wrap a flat test-guest image (loaded
 *                                        at 1 MiB, 64-bit entry at +0x200) in a
 *                                        Linux setup header: a tiny bzImage
 *   hvt uds-connect PATH PORT MS         a host-initiated vsock peer: send
 *                                        "CONNECT PORT\n"; on "OK n" send
 *                                        "ping\n" + 64 KiB (seed 6), print
 *                                        the answer line; else "refused"
 *   hvt vhu-backend MODE PATH LOG        a scripted vhost-user back-end on a
 *                                        listening socket PATH (one client):
 *                                        every message is checked (version,
 *                                        flags, size, descriptors) and logged
 *                                        to LOG, "BAD ..." when wrong.  MODE
 *                                        record answers everything as a
 *                                        back-end would and reads the rings
 *                                        through the memory table it got;
 *                                        ACTION:REQUEST misbehaves at REQUEST
 *                                        (close, silent, short, wrong, nack,
 *                                        huge, request, version, fds); nov1
 *                                        offers no VIRTIO_F_VERSION_1
 *   hvt connect-exec PATH N CMD...       connect to unix socket PATH, make it
 *                                        fd N and exec CMD (a starter that
 *                                        passes a connected socket)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

/* The same formula as tests/hv/kit/virtio.h. */
static uint8_t pattern_byte(uint64_t o, unsigned seed)
{
	uint32_t x = (uint32_t)o * 2654435761u + seed * 40503u + (uint32_t)(o >> 32);

	return (uint8_t)(x >> 24 ^ x >> 11);
}

static int die(const char *what)
{
	fprintf(stderr, "hvt: %s: %s\n", what, strerror(errno));
	return 2;
}

static int cmd_pattern(char **a)
{
	uint64_t size = strtoull(a[1], NULL, 0);
	unsigned seed = (unsigned)strtoul(a[2], NULL, 0);
	int fd = open(a[0], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	uint8_t buf[4096];

	if (fd < 0)
		return die(a[0]);
	for (uint64_t o = 0; o < size; o += sizeof(buf)) {
		size_t n = size - o < sizeof(buf) ? size - o : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern_byte(o + i, seed);
		if (write(fd, buf, n) != (ssize_t)n)
			return die(a[0]);
	}
	return close(fd) < 0 ? die(a[0]) : 0;
}

static int cmd_checkpat(char **a)
{
	uint64_t off = strtoull(a[1], NULL, 0), len = strtoull(a[2], NULL, 0);
	unsigned seed = (unsigned)strtoul(a[3], NULL, 0);
	int fd = open(a[0], O_RDONLY);
	uint8_t b;

	if (fd < 0)
		return die(a[0]);
	for (uint64_t i = 0; i < len; i++) {
		if (pread(fd, &b, 1, (off_t)(off + i)) != 1)
			return die(a[0]);
		if (b != pattern_byte(off + i, seed)) {
			fprintf(stderr, "hvt: %s: byte at %llu is 0x%02x, pattern %u says 0x%02x\n", a[0],
				(unsigned long long)(off + i), b, seed, pattern_byte(off + i, seed));
			return 1;
		}
	}
	return 0;
}

static int parse_mac(const char *s, uint8_t m[6])
{
	unsigned v[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		m[i] = (uint8_t)v[i];
	return 0;
}

static int packet_socket(const char *ifname, struct sockaddr_ll *sa)
{
	int fd = socket(AF_PACKET, SOCK_RAW, htons(0x0003 /* ETH_P_ALL */));

	memset(sa, 0, sizeof(*sa));
	sa->sll_family = AF_PACKET;
	sa->sll_protocol = htons(0x0003);
	sa->sll_ifindex = (int)if_nametoindex(ifname);
	if (fd < 0 || !sa->sll_ifindex || bind(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0)
		return -1;
	return fd;
}

static int cmd_tapsend(int argc, char **a)
{
	struct sockaddr_ll sa;
	uint8_t f[9216];
	size_t tl = strlen(a[3]), len = argc > 4 ? strtoul(a[4], NULL, 0) : 14 + tl;
	int fd = packet_socket(a[0], &sa);
	char path[128];
	FILE *mf;
	unsigned et = (unsigned)strtoul(a[2], NULL, 0);

	if (fd < 0)
		return die(a[0]);
	if (len < 14 + tl || len > sizeof(f) || parse_mac(a[1], f) < 0) {
		fprintf(stderr, "hvt: tapsend: bad length or MAC\n");
		return 2;
	}
	snprintf(path, sizeof(path), "/sys/class/net/%s/address", a[0]);
	if (!(mf = fopen(path, "r")))
		return die(path);
	if (!fgets(path, sizeof(path), mf) || parse_mac(path, f + 6) < 0)
		return die("interface MAC");
	fclose(mf);
	f[12] = (uint8_t)(et >> 8);
	f[13] = (uint8_t)et;
	memcpy(f + 14, a[3], tl);
	for (size_t i = 14 + tl; i < len; i++)
		f[i] = pattern_byte(i, 3);
	sa.sll_halen = 6;
	memcpy(sa.sll_addr, f, 6);
	if (sendto(fd, f, len, 0, (struct sockaddr *)&sa, sizeof(sa)) != (ssize_t)len)
		return die("sendto");
	return 0;
}

static long long ms_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int cmd_taprecv(char **a)
{
	struct sockaddr_ll sa;
	unsigned et = (unsigned)strtoul(a[1], NULL, 0);
	long long end = ms_now() + strtoll(a[2], NULL, 0);
	int want = atoi(a[3]), got = 0, fd = packet_socket(a[0], &sa);

	if (fd < 0)
		return die(a[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (got < want && ms_now() < end) {
		struct pollfd p = { fd, POLLIN, 0 };
		uint8_t f[70000];
		socklen_t sl = sizeof(sa);
		ssize_t n;

		if (poll(&p, 1, (int)(end - ms_now())) <= 0)
			continue;
		n = recvfrom(fd, f, sizeof(f), 0, (struct sockaddr *)&sa, &sl);
		if (n < 14 || sa.sll_pkttype == PACKET_OUTGOING || (unsigned)(f[12] << 8 | f[13]) != et)
			continue;
		printf("%02x:%02x:%02x:%02x:%02x:%02x %02x:%02x:%02x:%02x:%02x:%02x %zd ", f[6], f[7], f[8], f[9],
		       f[10], f[11], f[0], f[1], f[2], f[3], f[4], f[5], n);
		for (ssize_t i = 14; i < n && f[i] >= 0x20 && f[i] < 0x7f; i++)
			putchar(f[i]);
		putchar('\n');
		got++;
	}
	return got == want ? 0 : 1;
}

static int cmd_udprecv(char **a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(a[1])) };
	long long end = ms_now() + strtoll(a[2], NULL, 0);
	int want = atoi(a[3]), got = 0, fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || inet_pton(AF_INET, a[0], &sin.sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return die("udp socket");
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("listening\n");
	while (got < want && ms_now() < end) {
		struct pollfd p = { fd, POLLIN, 0 };
		char b[2048];
		ssize_t n;

		if (poll(&p, 1, (int)(end - ms_now())) <= 0)
			continue;
		n = recv(fd, b, sizeof(b) - 1, 0);
		if (n < 0)
			continue;
		b[n] = 0;
		printf("%s\n", b);
		got++;
	}
	return got == want ? 0 : 1;
}

static int uds_addr(const char *path, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(a->sun_path))
		return -1;
	strcpy(a->sun_path, path);
	return 0;
}

/* Reads one line (without the newline) within the deadline. */
static int read_line_fd(int fd, char *buf, size_t cap, long long end)
{
	size_t n = 0;

	while (n + 1 < cap && ms_now() < end) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, (int)(end - ms_now())) <= 0)
			continue;
		r = read(fd, buf + n, 1);
		if (r <= 0)
			return -1;
		if (buf[n] == '\n') {
			buf[n] = 0;
			return 0;
		}
		n++;
	}
	return -1;
}

static int read_exact(int fd, uint8_t *b, size_t len, long long end)
{
	size_t n = 0;

	while (n < len && ms_now() < end) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, (int)(end - ms_now())) <= 0)
			continue;
		r = read(fd, b + n, len - n);
		if (r <= 0)
			return -1;
		n += (size_t)r;
	}
	return n == len ? 0 : -1;
}

static int cmd_uds_serve(char **a)
{
	struct sockaddr_un sa;
	long long end = ms_now() + strtoll(a[1], NULL, 0);
	int l = socket(AF_UNIX, SOCK_STREAM, 0), c, bad = 0;
	char line[128], reply[160];
	static uint8_t bulk[65536];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (l < 0 || uds_addr(a[0], &sa) < 0)
		return die(a[0]);
	unlink(a[0]);
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 4) < 0)
		return die(a[0]);
	printf("listening\n");
	{
		struct pollfd p = { l, POLLIN, 0 };

		if (poll(&p, 1, (int)(end - ms_now())) <= 0 || (c = accept(l, NULL, NULL)) < 0) {
			printf("no connection\n");
			return 1;
		}
	}
	if (read_line_fd(c, line, sizeof(line), end) < 0) {
		printf("no line\n");
		return 1;
	}
	printf("line: %s\n", line);
	if (read_exact(c, bulk, sizeof(bulk), end) < 0) {
		printf("bulk: short\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(bulk); i++)
		bad += bulk[i] != pattern_byte(i, 5);
	printf("bulk: %s\n", bad ? "bad" : "ok");
	snprintf(reply, sizeof(reply), "re: %s\n", line);
	if (write(c, reply, strlen(reply)) < 0)
		return die("write");
	/* Until the guest closes: EOF. */
	while (ms_now() < end) {
		struct pollfd p = { c, POLLIN, 0 };

		if (poll(&p, 1, (int)(end - ms_now())) > 0) {
			char x;

			if (read(c, &x, 1) <= 0) {
				printf("eof\n");
				unlink(a[0]);
				return bad ? 1 : 0;
			}
		}
	}
	printf("no eof\n");
	unlink(a[0]);
	return 1;
}

static int cmd_uds_connect(char **a)
{
	struct sockaddr_un sa;
	long long end = ms_now() + strtoll(a[2], NULL, 0);
	char line[128];
	int fd = -1;
	static uint8_t bulk[5 + 65536];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (uds_addr(a[0], &sa) < 0)
		return die(a[0]);
	while (ms_now() < end) {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(20000);
	}
	if (fd < 0) {
		printf("cannot connect\n");
		return 1;
	}
	snprintf(line, sizeof(line), "CONNECT %s\n", a[1]);
	if (write(fd, line, strlen(line)) < 0)
		return die("write");
	if (read_line_fd(fd, line, sizeof(line), end) < 0) {
		printf("refused\n");
		return 0;
	}
	printf("%.2s\n", line);
	if (strncmp(line, "OK ", 3))
		return 1;
	memcpy(bulk, "ping\n", 5);
	for (size_t i = 0; i < 65536; i++)
		bulk[5 + i] = pattern_byte(i, 6);
	for (size_t off = 0; off < sizeof(bulk);) {
		ssize_t w = write(fd, bulk + off, sizeof(bulk) - off);

		if (w <= 0)
			return die("write");
		off += (size_t)w;
	}
	if (read_line_fd(fd, line, sizeof(line), end) < 0) {
		printf("no answer\n");
		return 1;
	}
	printf("%s\n", line);
	close(fd);
	return 0;
}

/* Setup header fields (Documentation/arch/x86/boot.rst). */
static void put(uint8_t *b, unsigned off, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		b[off + (unsigned)i] = (uint8_t)(v >> (8 * i));
}

static int cmd_bzimage(char **a)
{
	uint8_t setup[1024] = { 0 };
	uint64_t init_size = strtoull(a[1], NULL, 0);
	FILE *in = fopen(a[0], "rb"), *out = fopen(a[2], "wb");
	char buf[65536];
	size_t n;

	if (!in || !out)
		return die(!in ? a[0] : a[2]);
	setup[0x1f1] = 1;                        /* setup_sects: the protected-mode part at 1024 */
	put(setup, 0x1fe, 0xaa55, 2);            /* boot_flag */
	setup[0x200] = 0xeb;                     /* jump over the header, to 0x268 */
	setup[0x201] = 0x268 - 0x202;
	memcpy(setup + 0x202, "HdrS", 4);
	put(setup, 0x206, 0x020f, 2);            /* version 2.15 */
	setup[0x211] = 0x01;                     /* loadflags: LOADED_HIGH */
	put(setup, 0x214, 0x100000, 4);          /* code32_start */
	put(setup, 0x22c, 0x7fffffff, 4);        /* initrd_addr_max */
	put(setup, 0x230, 0x200000, 4);          /* kernel_alignment */
	put(setup, 0x236, 0x1, 2);               /* xloadflags: XLF_KERNEL_64 */
	put(setup, 0x238, 4095, 4);              /* cmdline_size */
	put(setup, 0x258, 0x100000, 8);          /* pref_address */
	put(setup, 0x260, init_size, 4);         /* init_size: image and bss */
	if (fwrite(setup, 1, sizeof(setup), out) != sizeof(setup))
		return die(a[2]);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			return die(a[2]);
	fclose(in);
	return fclose(out) ? die(a[2]) : 0;
}

/* ------------------------------------------------- vhost-user back-end */

/* Written from the vhost-user spec on its own, not from hv/vhost_user.c:
 * it is what that code is checked against. */
static const char *const vb_names[] = {
	[1] = "GET_FEATURES", [2] = "SET_FEATURES", [3] = "SET_OWNER", [4] = "RESET_OWNER",
	[5] = "SET_MEM_TABLE", [6] = "SET_LOG_BASE", [7] = "SET_LOG_FD", [8] = "SET_VRING_NUM",
	[9] = "SET_VRING_ADDR", [10] = "SET_VRING_BASE", [11] = "GET_VRING_BASE", [12] = "SET_VRING_KICK",
	[13] = "SET_VRING_CALL", [14] = "SET_VRING_ERR", [15] = "GET_PROTOCOL_FEATURES",
	[16] = "SET_PROTOCOL_FEATURES", [17] = "GET_QUEUE_NUM", [18] = "SET_VRING_ENABLE",
};
#define VB_NQ 16

struct vb {
	int fd;
	FILE *log;
	uint64_t pf;
	int nr;
	struct { uint64_t gpa, size, ua, off; uint8_t *map; } r[8];
	uint64_t desc[VB_NQ], avail[VB_NQ], used[VB_NQ];
	uint32_t num[VB_NQ];
	int kick[VB_NQ], call[VB_NQ];
};

static const char *vb_name(uint32_t req)
{
	return req < sizeof(vb_names) / sizeof(vb_names[0]) && vb_names[req] ? vb_names[req] : "UNKNOWN";
}

static uint64_t ld(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* n bytes, collecting descriptors; 0 on EOF before anything, -1 on error. */
static int vb_read(int fd, uint8_t *b, size_t n, int *fds, int *nfds)
{
	size_t got = 0;

	while (got < n) {
		char ctl[CMSG_SPACE(sizeof(int) * 16)];
		struct iovec iov = { b + got, n - got };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		ssize_t r = recvmsg(fd, &mh, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return got || r < 0 ? -1 : 0;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
			if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
				for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int) && *nfds < 16; i++)
					memcpy(&fds[(*nfds)++], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
		got += (size_t)r;
	}
	return 1;
}

static void vb_send(struct vb *v, uint32_t req, uint32_t flags, uint32_t size, uint64_t val, size_t len, int sendfd)
{
	uint8_t m[20];
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { m, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	memcpy(m, &req, 4);
	memcpy(m + 4, &flags, 4);
	memcpy(m + 8, &size, 4);
	memcpy(m + 12, &val, 8);
	if (sendfd >= 0) {
		struct cmsghdr *h;

		memset(ctl, 0, sizeof(ctl));
		mh.msg_control = ctl;
		mh.msg_controllen = sizeof(ctl);
		h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &sendfd, sizeof(int));
	}
	if (sendmsg(v->fd, &mh, MSG_NOSIGNAL) < 0)
		fprintf(v->log, "send failed: %s\n", strerror(errno));
}

/* What a descriptor is, by its /proc link: "memfd:vhpc-guest-ram", "eventfd". */
static const char *fd_kind(int fd, char *buf, size_t n)
{
	char p[64];
	ssize_t l;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	l = readlink(p, buf, n - 1);
	buf[l < 0 ? 0 : l] = 0;
	if (strstr(buf, "eventfd"))
		return "eventfd";
	if (!strncmp(buf, "/memfd:", 7)) {
		char *sp = strchr(buf, ' ');

		if (sp)
			*sp = 0;
		return buf + 1;
	}
	return buf;
}

static uint8_t *vb_gpa(struct vb *v, uint64_t gpa, uint64_t len)
{
	for (int i = 0; i < v->nr; i++)
		if (v->r[i].map && gpa >= v->r[i].gpa && gpa - v->r[i].gpa <= v->r[i].size &&
		    len <= v->r[i].size - (gpa - v->r[i].gpa))
			return v->r[i].map + v->r[i].off + (gpa - v->r[i].gpa);
	return NULL;
}

static uint64_t vb_ua2gpa(struct vb *v, uint64_t ua, bool *ok)
{
	for (int i = 0; i < v->nr; i++)
		if (ua >= v->r[i].ua && ua - v->r[i].ua < v->r[i].size) {
			*ok = true;
			return ua - v->r[i].ua + v->r[i].gpa;
		}
	*ok = false;
	return 0;
}

/* The first chain the driver made available, read through our own
 * mapping of its RAM, and how often it kicked. */
static void vb_peek_ring(struct vb *v, unsigned q)
{
	uint8_t *a = vb_gpa(v, v->avail[q], 6 + 2ull * v->num[q]);
	uint64_t kicks = 0;

	if (v->kick[q] >= 0) {
		fcntl(v->kick[q], F_SETFL, O_NONBLOCK);
		if (read(v->kick[q], &kicks, sizeof(kicks)) != sizeof(kicks))
			kicks = 0;
	}
	fprintf(v->log, "ring %u: kick eventfd count %llu\n", q, (unsigned long long)kicks);
	if (a && ld(a + 2, 2)) {
		uint64_t head = ld(a + 4, 2);
		uint8_t *d = head < v->num[q] ? vb_gpa(v, v->desc[q] + 16 * head, 16) : NULL;
		uint8_t *b = d ? vb_gpa(v, ld(d, 8), ld(d + 8, 4)) : NULL;
		char text[64] = "";

		if (b)
			for (size_t i = 0; i < sizeof(text) - 1 && i < ld(d + 8, 4) && b[i] >= 32 && b[i] < 127; i++)
				text[i] = (char)b[i], text[i + 1] = 0;
		fprintf(v->log, "ring %u: avail idx %llu, first buffer '%s'\n", q, (unsigned long long)ld(a + 2, 2), text);
	}
}

static int cmd_vhu_backend(char **a)
{
	const char *mode = a[0], *colon = strchr(a[0], ':');
	char action[16] = "", target[32] = "";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vb v = { .fd = -1 };
	struct pollfd p;
	int lfd;

	if (colon) {
		snprintf(action, sizeof(action), "%.*s", (int)(colon - mode), mode);
		snprintf(target, sizeof(target), "%s", colon + 1);
	}
	for (int i = 0; i < VB_NQ; i++)
		v.kick[i] = v.call[i] = -1;
	if (!(v.log = fopen(a[2], "w")))
		return die(a[2]);
	setvbuf(v.log, NULL, _IOLBF, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a[1]);
	unlink(a[1]);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0)
		return die(a[1]);
	p = (struct pollfd){ .fd = lfd, .events = POLLIN };
	if (poll(&p, 1, 30000) != 1 || (v.fd = accept(lfd, NULL, NULL)) < 0) {
		fprintf(v.log, "nobody connected\n");
		return 1;
	}
	close(lfd);
	unlink(a[1]);
	for (;;) {
		uint8_t h[12], pl[512];
		int fds[16], nfds = 0, r = vb_read(v.fd, h, sizeof(h), fds, &nfds);
		uint32_t req, flags, size, want_size = 0;
		bool get, need;
		const char *name;
		uint64_t u = 0;
		int want_fds = 0;
		char line[1024];
		size_t ll = 0;

		if (r == 0) {
			fprintf(v.log, "EOF\n");
			return 0;
		}
		if (r < 0)
			break;
		req = (uint32_t)ld(h, 4);
		flags = (uint32_t)ld(h + 4, 4);
		size = (uint32_t)ld(h + 8, 4);
		name = vb_name(req);
		if (size > sizeof(pl)) {
			fprintf(v.log, "BAD %s: payload of %u bytes\n", name, size);
			return 1;
		}
		if (size && vb_read(v.fd, pl, size, fds, &nfds) != 1)
			break;
		if (size >= 8)
			u = ld(pl, 8);
		get = req == 1 || req == 11 || req == 15 || req == 17;
		need = flags & 8;
		ll += (size_t)snprintf(line + ll, sizeof(line) - ll, "%s", name);
		if ((flags & 3) != 1 || (flags & 4))
			fprintf(v.log, "BAD %s: flags 0x%x (version 1, no reply bit expected)\n", name, flags);
		/* Acks are asked for on every request without a reply of its own
		 * once REPLY_ACK is negotiated, and on none before. */
		if (need != (!get && (v.pf & 8)))
			fprintf(v.log, "BAD %s: need_reply %s\n", name, need ? "set" : "missing");
		switch (req) {
		case 1: case 3: case 15: case 17: want_size = 0; break;
		case 2: case 16: want_size = 8; break;
		case 5: want_size = size >= 8 ? 8 + 32 * (uint32_t)ld(pl, 4) : 8; want_fds = size >= 8 ? (int)ld(pl, 4) : 0; break;
		case 8: case 10: case 11: case 18: want_size = 8; break;
		case 9: want_size = 40; break;
		case 12: case 13: want_size = 8; want_fds = size >= 8 && (u & 0x100) ? 0 : 1; break;
		default: fprintf(v.log, "BAD %s: request %u is not one a virtio-fs front-end needs\n", name, req);
		}
		if (size != want_size)
			fprintf(v.log, "BAD %s: payload %u bytes, expected %u\n", name, size, want_size);
		if (nfds != want_fds)
			fprintf(v.log, "BAD %s: %d descriptors, expected %d\n", name, nfds, want_fds);
		if (size != want_size)
			goto logged;
		switch (req) {
		case 2:
		case 16:
			ll += (size_t)snprintf(line + ll, sizeof(line) - ll, " 0x%llx", (unsigned long long)u);
			if (req == 16)
				v.pf = u;
			break;
		case 5:
			v.nr = (int)ld(pl, 4) > 8 ? 8 : (int)ld(pl, 4);
			ll += (size_t)snprintf(line + ll, sizeof(line) - ll, " %d region%s", v.nr, v.nr == 1 ? "" : "s");
			for (int i = 0; i < v.nr; i++) {
				const uint8_t *rp = pl + 8 + 32 * i;
				char kb[128];
				struct stat st;

				v.r[i].gpa = ld(rp, 8);
				v.r[i].size = ld(rp + 8, 8);
				v.r[i].ua = ld(rp + 16, 8);
				v.r[i].off = ld(rp + 24, 8);
				v.r[i].map = NULL;
				if (i < nfds && fstat(fds[i], &st) == 0 && (uint64_t)st.st_size >= v.r[i].off + v.r[i].size) {
					void *m = mmap(NULL, v.r[i].off + v.r[i].size, PROT_READ, MAP_SHARED, fds[i], 0);

					v.r[i].map = m == MAP_FAILED ? NULL : m;
				}
				ll += (size_t)snprintf(line + ll, sizeof(line) - ll,
						       "; gpa 0x%llx size 0x%llx offset 0x%llx fd %s%s",
						       (unsigned long long)v.r[i].gpa, (unsigned long long)v.r[i].size,
						       (unsigned long long)v.r[i].off,
						       i < nfds ? fd_kind(fds[i], kb, sizeof(kb)) : "none",
						       v.r[i].map ? " mapped" : " unmappable");
			}
			break;
		case 8: case 10: case 11: case 18:
			ll += (size_t)snprintf(line + ll, sizeof(line) - ll, " ring %u num %u", (unsigned)ld(pl, 4),
					       (unsigned)ld(pl + 4, 4));
			if (req == 8 && ld(pl, 4) < VB_NQ)
				v.num[ld(pl, 4)] = (uint32_t)ld(pl + 4, 4);
			break;
		case 9: {
			unsigned q = (unsigned)ld(pl, 4);
			bool o1, o2, o3;
			uint64_t d = vb_ua2gpa(&v, ld(pl + 8, 8), &o1), us = vb_ua2gpa(&v, ld(pl + 16, 8), &o2),
				 av = vb_ua2gpa(&v, ld(pl + 24, 8), &o3);

			ll += (size_t)snprintf(line + ll, sizeof(line) - ll, " ring %u flags %u desc %s0x%llx avail %s0x%llx used %s0x%llx",
					       q, (unsigned)ld(pl + 4, 4), o1 ? "" : "unmapped ", (unsigned long long)d,
					       o3 ? "" : "unmapped ", (unsigned long long)av, o2 ? "" : "unmapped ",
					       (unsigned long long)us);
			if (q < VB_NQ) {
				v.desc[q] = d;
				v.avail[q] = av;
				v.used[q] = us;
			}
			break;
		}
		case 12:
		case 13: {
			unsigned q = (unsigned)(u & 0xff);
			char kb[128];

			ll += (size_t)snprintf(line + ll, sizeof(line) - ll, " ring %u fd %s", q,
					       nfds ? fd_kind(fds[0], kb, sizeof(kb)) : "none");
			if (nfds && q < VB_NQ) {
				int *slot = req == 12 ? &v.kick[q] : &v.call[q];

				if (*slot >= 0)
					close(*slot);
				*slot = dup(fds[0]);
			}
			break;
		}
		}
	logged:
		fprintf(v.log, "%s%s\n", line, need ? " (ack asked)" : "");
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (req == 11 && !strcmp(mode, "record") && ld(pl, 4) < VB_NQ)
			vb_peek_ring(&v, (unsigned)ld(pl, 4));
		/* A back-end's own interrupt, to check that the call eventfd
		 * reaches the guest's vector. */
		if (req == 18 && ld(pl + 4, 4) == 1 && ld(pl, 4) == 1 && v.call[1] >= 0) {
			uint64_t one = 1;

			if (write(v.call[1], &one, sizeof(one)) != sizeof(one))
				fprintf(v.log, "call eventfd write failed\n");
		}
		if (!strcmp(target, name)) {
			fprintf(v.log, "misbehaving: %s at %s\n", action, name);
			if (!strcmp(action, "close"))
				return 0;
			if (!strcmp(action, "silent")) {
				sleep(30);
				return 0;
			}
			if (!strcmp(action, "short")) {
				vb_send(&v, req, 5, 8, 0, 15, -1);
				sleep(30);
				return 0;
			}
			if (!strcmp(action, "wrong"))
				vb_send(&v, req + 1, 5, 8, 0, 20, -1);
			else if (!strcmp(action, "nack"))
				vb_send(&v, req, 5, 8, 1, 20, -1);
			else if (!strcmp(action, "huge"))
				vb_send(&v, req, 5, 0xffffffffu, 0, 20, -1);
			else if (!strcmp(action, "request"))
				vb_send(&v, req, 1, 8, 0, 20, -1);
			else if (!strcmp(action, "version"))
				vb_send(&v, req, 6, 8, 0, 20, -1);
			else if (!strcmp(action, "fds"))
				vb_send(&v, req, 5, 8, get ? (req == 1 ? 0x170000000ull : req == 15 ? 0x9 : 2) : 0, 20, v.fd);
			continue;
		}
		switch (req) {
		case 1:
			/* What libvhost-user offers, plus bits a front-end must
			 * not pass to the guest. */
			u = (1ull << 28) | (1ull << 29) | (1ull << 30) | (1ull << 26) | (1ull << 24) |
			    (strcmp(mode, "nov1") ? 1ull << 32 : 0);
			vb_send(&v, req, 5, 8, u, 20, -1);
			break;
		case 15:
			/* MQ, LOG_SHMFD, REPLY_ACK, SLAVE_REQ, CONFIG: the front-end
			 * may take only what it implements. */
			vb_send(&v, req, 5, 8, 0x1 | 0x2 | 0x8 | 0x20 | 0x200, 20, -1);
			break;
		case 17:
			vb_send(&v, req, 5, 8, 2, 20, -1);
			break;
		case 11:
			vb_send(&v, req, 5, 8, ld(pl, 4), 20, -1);
			break;
		default:
			if (need)
				vb_send(&v, req, 5, 8, 0, 20, -1);
		}
	}
	fprintf(v.log, "read error: %s\n", strerror(errno));
	return 1;
}

static int cmd_connect_exec(char **a)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = atoi(a[1]), fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a[0]);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return die(a[0]);
	if (fd != n && (dup2(fd, n) < 0 || close(fd) < 0))
		return die("dup2");
	execvp(a[2], a + 2);
	return die(a[2]);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "vhu-backend"))
		return cmd_vhu_backend(argv + 2);
	if (argc >= 5 && !strcmp(argv[1], "connect-exec"))
		return cmd_connect_exec(argv + 2);
	if (argc == 5 && !strcmp(argv[1], "bzimage"))
		return cmd_bzimage(argv + 2);
	if (argc == 4 && !strcmp(argv[1], "uds-serve"))
		return cmd_uds_serve(argv + 2);
	if (argc == 5 && !strcmp(argv[1], "uds-connect"))
		return cmd_uds_connect(argv + 2);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "tapsend"))
		return cmd_tapsend(argc - 2, argv + 2);
	if (argc == 6 && !strcmp(argv[1], "taprecv"))
		return cmd_taprecv(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "udprecv"))
		return cmd_udprecv(argv + 2);
	if (argc == 5 && !strcmp(argv[1], "pattern"))
		return cmd_pattern(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "checkpat"))
		return cmd_checkpat(argv + 2);
	fprintf(stderr, "usage: hvt pattern|checkpat|tapsend|taprecv|udprecv ... (see tests/hv/tools/hvt.c)\n");
	return 2;
}
