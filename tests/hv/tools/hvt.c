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
 */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/socket.h>
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

int main(int argc, char **argv)
{
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
