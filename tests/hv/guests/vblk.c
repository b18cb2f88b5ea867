/* virtio-blk from a test guest: capacity and serial from the device, reads
 * checked against the pattern the test wrote into the image, a write and a
 * flush the test checks in the image file, out-of-range and (with ro=1)
 * refused writes, direct and indirect chains, and hostile chains (a loop,
 * a buffer outside RAM, a nested indirect table, a ragged indirect table)
 * that the device must complete with length 0 and survive.
 * Command line: sectors=N serial=S seed=K wseed=K2 [ro=1] */
#include "virtio.h"

#define VIRTIO_BLK_F_RO 5
#define VIRTIO_BLK_F_FLUSH 9
#define QSIZE 128
#define RAW 120                 /* descriptors from here on are for raw chains */

static struct kvdev dev;
static struct kvq *q;

struct req_hdr { uint32_t type, reserved; uint64_t sector; };

static int blk_req(uint32_t type, uint64_t sector, void *buf, uint32_t len, bool indirect, uint32_t *used)
{
	struct req_hdr *h = kalloc(sizeof(*h), 16);
	volatile uint8_t *st = kalloc(1, 1);
	struct kbuf b[3];
	int n = 0, head;
	uint32_t ul = 0;

	h->type = type;
	h->sector = sector;
	*st = 0xee;
	b[n++] = (struct kbuf){ h, sizeof(*h), false };
	if (len)
		b[n++] = (struct kbuf){ buf, len, type != 1 };
	b[n++] = (struct kbuf){ (void *)st, 1, true };
	head = vq_add(q, b, n, indirect);
	vq_kick(q);
	if (vq_wait(q, &ul, 500) != head)
		return -1;
	if (used)
		*used = ul;
	return *st;
}

static bool pattern_ok(const uint8_t *p, uint64_t off, uint32_t len, unsigned seed)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(off + i, seed))
			return false;
	return true;
}

/* A raw chain that the device must reject: completed with length 0. */
static void hostile(const char *what)
{
	uint32_t len = 1234;
	int h = vq_wait(q, &len, 500);

	check(h == RAW && len == 0, "%s: completed with length 0 (head %d, len %u)", what, h, len);
}

void test_main(void)
{
	char arg[64];
	uint64_t sectors = parse_u64(cmdline_get("sectors", arg, sizeof(arg)) ? arg : "0");
	unsigned seed = (unsigned)parse_u64(cmdline_get("seed", arg, sizeof(arg)) ? arg : "1");
	unsigned wseed = (unsigned)parse_u64(cmdline_get("wseed", arg, sizeof(arg)) ? arg : "2");
	bool ro = cmdline_get("ro", arg, sizeof(arg)) != 0;
	const char *serial = cmdline_get("serial", arg, sizeof(arg)) ? arg : "";
	char want_serial[24];
	uint8_t *buf = kalloc(8192, 4096), *buf2 = kalloc(8192, 4096);
	uint32_t used;
	int r;

	memcpy(want_serial, serial, strlen(serial) + 1);
	msix_handlers_install(4);
	r = vdev_open(&dev, 2, 0, (1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_BLK_F_RO) | (1ull << 28) | (1ull << 29));
	check(r == 0, "virtio-blk found and features negotiated (%d)", r);
	if (r)
		return;
	check(!!(dev.features & (1ull << VIRTIO_BLK_F_RO)) == ro, "read-only flag %s", ro ? "offered" : "absent");
	check(vcfg64(&dev, 0) == sectors, "capacity %lu sectors (want %lu)", vcfg64(&dev, 0), sectors);
	check(msix_enable(dev.slot, 2, VIRTIO_VEC_BASE) == 2, "MSI-X: 2 vectors (config + 1 queue)");
	r = vq_setup_(&dev, 0, QSIZE, 1);
	check(r == 0, "request queue set up with MSI-X vector 1 (%d)", r);
	vdev_driver_ok(&dev);
	q = &dev.q[0];

	r = blk_req(0, 0, buf, 4096, false, &used);
	check(r == 0 && used == 4097, "read sectors 0-7: status %d, used length %u", r, used);
	check(pattern_ok(buf, 0, 4096, seed), "sectors 0-7 hold the image's pattern");
	check(msix_hits[1] > 0, "completion interrupts arrive on the queue's vector (%d)", msix_hits[1]);
	r = blk_req(0, sectors - 2, buf, 1024, true, &used);
	check(r == 0 && pattern_ok(buf, (sectors - 2) * 512, 1024, seed),
	      "read of the last two sectors through an indirect table (status %d)", r);
	r = blk_req(0, sectors - 1, buf, 1024, false, &used);
	check(r == 1, "read running past the end: IOERR (status %d)", r);
	r = blk_req(0, ~0ull / 512, buf, 512, false, &used);
	check(r == 1, "read at a huge sector (overflow): IOERR (status %d)", r);

	for (uint32_t i = 0; i < 4096; i++)
		buf[i] = pattern_byte(8 * 512 + i, wseed);
	r = blk_req(1, 8, buf, 4096, false, &used);
	if (ro) {
		check(r == 1, "write on a read-only device: IOERR (status %d)", r);
	} else {
		check(r == 0 && used == 1, "write sectors 8-15 (status %d)", r);
		r = blk_req(0, 8, buf2, 4096, false, &used);
		check(r == 0 && pattern_ok(buf2, 8 * 512, 4096, wseed), "written sectors read back");
	}
	r = blk_req(4, 0, 0, 0, false, &used);
	check(r == 0, "flush (status %d)", r);
	memset(buf, 0, 32);
	r = blk_req(8, 0, buf, 20, false, &used);
	check(r == 0 && !memcmp(buf, want_serial, strlen(want_serial)), "get-id returns the serial '%s'", want_serial);
	r = blk_req(77, 0, buf, 512, false, &used);
	check(r == 2, "unknown request type: UNSUPP (status %d)", r);

	/* Hostile chains, each from descriptor RAW. */
	vq_raw_desc(q, RAW, (uint64_t)buf, 16, VRING_DESC_F_NEXT, RAW + 1);
	vq_raw_desc(q, RAW + 1, (uint64_t)buf2, 16, VRING_DESC_F_NEXT, RAW);
	vq_raw_publish(q, RAW);
	vq_kick(q);
	hostile("a descriptor loop");
	vq_raw_desc(q, RAW, 0xfff00000000ull, 4096, VRING_DESC_F_NEXT, RAW + 1);
	vq_raw_desc(q, RAW + 1, (uint64_t)buf2, 1, VRING_DESC_F_WRITE, 0);
	vq_raw_publish(q, RAW);
	vq_kick(q);
	hostile("a buffer outside guest RAM");
	{
		struct vring_desc *t = kalloc(32, 16);

		t[0] = (struct vring_desc){ (uint64_t)t, 32, VRING_DESC_F_INDIRECT, 0 };
		vq_raw_desc(q, RAW, (uint64_t)t, 32, VRING_DESC_F_INDIRECT, 0);
		vq_raw_publish(q, RAW);
		vq_kick(q);
		hostile("an indirect table inside an indirect table");
		vq_raw_desc(q, RAW, (uint64_t)t, 24, VRING_DESC_F_INDIRECT, 0);
		vq_raw_publish(q, RAW);
		vq_kick(q);
		hostile("an indirect table of 24 bytes");
		vq_raw_desc(q, RAW, (uint64_t)buf, 16, VRING_DESC_F_NEXT, 999);
		vq_raw_publish(q, RAW);
		vq_kick(q);
		hostile("a next index beyond the queue");
	}
	r = blk_req(0, 0, buf, 512, false, &used);
	check(r == 0 && pattern_ok(buf, 0, 512, seed), "the device still serves requests after hostile chains");
	check(!(vdev_status(&dev) & 0x40), "no reset was needed (status 0x%x)", vdev_status(&dev));
}
