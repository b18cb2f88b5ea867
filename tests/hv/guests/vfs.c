/* vhost-user-fs from a test guest, speaking FUSE to the real back-end
 * (virtiofsd) through the rings vhpc-hv handed it: the tag and queue
 * count in config space (and a config write that must change nothing),
 * FUSE_INIT, LOOKUP/OPEN/READ of a file the test put in the shared folder
 * (its bytes are the test pattern), the same READ into a buffer above
 * 4 GiB when RAM reaches there (the back-end must use the second region of
 * the memory table), CREATE/WRITE/RELEASE of a file the test then checks
 * on the host, completions by MSI-X interrupt (held back while the vector
 * is masked, delivered when it is unmasked), and a device reset after
 * which the whole set-up is done again and FUSE still answers.
 * mode=die: then waits for the test to kill the back-end and checks that
 * the device asks for a reset (status NEEDS_RESET, config interrupt).
 * mode=refused: the back-end fails the start; the device must say
 * NEEDS_RESET once DRIVER_OK is written.
 * mode=record (against tests/hv/tools/hvt.c's recording back-end): prints
 * the rings' addresses for the test to compare with what the back-end was
 * told, waits for the interrupt the back-end raises on its call eventfd,
 * makes a marker buffer available and kicks, then resets the device.
 * Command line: tag=T queues=N size=BYTES seed=K wsize=BYTES wseed=K2 [high=1] [mode=die|refused|record] */
#include "virtio.h"

#define VIRTIO_ID_FS 26
#define QSIZE 64

#define FUSE_LOOKUP 1
#define FUSE_OPEN 14
#define FUSE_READ 15
#define FUSE_WRITE 16
#define FUSE_RELEASE 18
#define FUSE_INIT 26
#define FUSE_CREATE 35

struct in_hdr { uint32_t len, opcode; uint64_t unique, nodeid; uint32_t uid, gid, pid; uint16_t extlen, pad; };
struct out_hdr { uint32_t len; int32_t error; uint64_t unique; };
struct init_in { uint32_t major, minor, max_readahead, flags, flags2, unused[11]; };
struct attr {
	uint64_t ino, size, blocks, atime, mtime, ctime;
	uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags;
};
struct entry_out { uint64_t nodeid, generation, entry_valid, attr_valid; uint32_t ev_nsec, av_nsec; struct attr attr; };
struct open_in { uint32_t flags, open_flags; };
struct open_out { uint64_t fh; uint32_t open_flags, pad; };
struct rw_in { uint64_t fh, offset; uint32_t size, rw_flags; uint64_t lock_owner; uint32_t flags, pad; };
struct write_out { uint32_t size, pad; };
struct create_in { uint32_t flags, mode, umask, open_flags; };
struct release_in { uint64_t fh; uint32_t flags, release_flags; uint64_t lock_owner; };

static struct kvdev dev;
static uint64_t unique = 1;

/* One FUSE request on request queue 1: in header + body (+ data) out,
 * out header + reply (+ data buffer) back.  Returns the reply's error
 * (0 or -errno), or 1 if nothing came back. */
static int fuse(uint32_t op, uint64_t node, const void *body, uint32_t blen, const void *data, uint32_t dlen,
		void *reply, uint32_t rlen, void *rdata, uint32_t rdlen, uint32_t *got)
{
	struct kvq *q = &dev.q[1];
	struct in_hdr *h = kalloc(sizeof(*h) + blen, 16);
	struct out_hdr *o = kalloc(sizeof(*o) + rlen, 16);
	struct kbuf b[4];
	int n = 0, head;
	uint32_t used = 0;

	*h = (struct in_hdr){ .len = (uint32_t)sizeof(*h) + blen + dlen, .opcode = op, .unique = unique++,
			      .nodeid = node };
	memcpy(h + 1, body, blen);
	b[n++] = (struct kbuf){ h, (uint32_t)sizeof(*h) + blen, false };
	if (dlen)
		b[n++] = (struct kbuf){ (void *)data, dlen, false };
	b[n++] = (struct kbuf){ o, (uint32_t)sizeof(*o) + rlen, true };
	if (rdlen)
		b[n++] = (struct kbuf){ rdata, rdlen, true };
	head = vq_add(q, b, n, false);
	vq_kick(q);
	if (vq_wait(q, &used, 600) != head)
		return 1;
	if (got)
		*got = used;
	if (o->unique != h->unique)
		return 2;
	if (reply && rlen)
		memcpy(reply, o + 1, rlen);
	return o->error;
}

static bool pattern_ok(const uint8_t *p, uint64_t off, uint32_t len, unsigned seed)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(off + i, seed))
			return false;
	return true;
}

/* Device found, features, queues up, DRIVER_OK: 0, or why not. */
static int bring_up(const char *tag, unsigned nreq, bool checks)
{
	uint64_t want = (1ull << 28) | (1ull << 29);
	int r = vdev_open(&dev, VIRTIO_ID_FS, 0, want);
	char t[37];

	if (checks)
		check(r == 0, "virtio-fs device (1af4:105a) found and features negotiated (%d)", r);
	if (r)
		return r;
	for (int i = 0; i < 36; i++)
		t[i] = (char)vcfg8(&dev, (unsigned)i);
	t[36] = 0;
	if (checks) {
		check(!memcmp(t, tag, strlen(tag)) && (strlen(tag) == 36 || !t[strlen(tag)]),
		      "config space: tag '%s' (want '%s')", t, tag);
		check(vcfg32(&dev, 36) == nreq, "config space: %u request queue(s) (want %u)", vcfg32(&dev, 36), nreq);
		check(dev.nq == (int)nreq + 1, "%d queues: hiprio + request queues", dev.nq);
		/* The config space is the device's: a driver's writes go nowhere. */
		mmio_write8(dev.devcfg, 'X');
		mmio_write32(dev.devcfg + 36, 0xffffffffu);
		check(vcfg8(&dev, 0) == (uint8_t)tag[0] && vcfg32(&dev, 36) == nreq,
		      "config writes from the guest change nothing");
	}
	if (msix_enable(dev.slot, 3, VIRTIO_VEC_BASE) < 3)
		return -10;
	if (vq_setup_(&dev, 0, QSIZE, 1) || vq_setup_(&dev, 1, QSIZE, 2))
		return -11;
	vdev_driver_ok(&dev);
	return 0;
}

static int fuse_init(uint32_t *major)
{
	struct init_in in = { .major = 7, .minor = 31, .max_readahead = 65536 };
	uint8_t out[64];
	int r = fuse(FUSE_INIT, 0, &in, sizeof(in), 0, 0, out, sizeof(out), 0, 0, 0);

	memcpy(major, out, 4);
	return r;
}

static int lookup(const char *name, struct entry_out *e)
{
	return fuse(FUSE_LOOKUP, 1, name, (uint32_t)strlen(name) + 1, 0, 0, e, sizeof(*e), 0, 0, 0);
}

/* MSI-X vector control of vector vec: bit 0 masks it. */
static void msix_mask(int vec, bool masked)
{
	unsigned c = pci_cap(dev.slot, 0x11, 0);
	uint32_t tbl = pci_read(dev.slot, c + 4, 4);
	uint64_t t = pci_bar(dev.slot, (int)(tbl & 7)) + (tbl & ~7u);

	mmio_write32(t + 16 * (uint64_t)vec + 12, masked ? 1 : 0);
}

static void wait_needs_reset(const char *what)
{
	int t;

	/* The status may say so at once (the start failed while DRIVER_OK was
	 * being written); the interrupt comes once interrupts are on. */
	for (t = 0; t < 1500 && (!(vdev_status(&dev) & 0x40) || !msix_hits[0]); t++)
		sti_hlt();
	check(vdev_status(&dev) & 0x40, "%s: the device asks for a reset (status 0x%x)", what, vdev_status(&dev));
	check(msix_hits[0] > 0, "%s: with a config-change interrupt (%d)", what, msix_hits[0]);
}

void test_main(void)
{
	char arg[64], tag[40], mode[16];
	unsigned nreq = (unsigned)parse_u64(cmdline_get("queues", arg, sizeof(arg)) ? arg : "1");
	uint32_t size = (uint32_t)parse_u64(cmdline_get("size", arg, sizeof(arg)) ? arg : "0");
	unsigned seed = (unsigned)parse_u64(cmdline_get("seed", arg, sizeof(arg)) ? arg : "1");
	uint32_t wsize = (uint32_t)parse_u64(cmdline_get("wsize", arg, sizeof(arg)) ? arg : "8192");
	unsigned wseed = (unsigned)parse_u64(cmdline_get("wseed", arg, sizeof(arg)) ? arg : "2");
	bool high = cmdline_get("high", arg, sizeof(arg)) != 0;
	bool die, refused, record;
	struct entry_out e;
	struct open_out oo;
	uint8_t *buf = kalloc(size + 4096, 4096);
	uint32_t major = 0, got = 0;
	uint64_t node, fh;
	int r;

	memset(tag, 0, sizeof(tag));
	if (cmdline_get("tag", arg, sizeof(arg)))
		memcpy(tag, arg, strlen(arg) > 36 ? 36 : strlen(arg));
	memset(mode, 0, sizeof(mode));
	if (cmdline_get("mode", arg, sizeof(arg)))
		memcpy(mode, arg, strlen(arg) > 15 ? 15 : strlen(arg));
	die = !memcmp(mode, "die", 4);
	refused = !memcmp(mode, "refused", 8);
	record = !memcmp(mode, "record", 7);
	msix_handlers_install(4);
	r = bring_up(tag, nreq, !refused);
	check(r == 0, "device set up: 2 queues with MSI-X vectors 1 and 2, DRIVER_OK (%d)", r);
	if (r)
		return;
	if (refused) {
		wait_needs_reset("a back-end that refuses the start");
		return;
	}
	if (record) {
		static char marker[] = "VHPC-VHU-MARKER";
		struct kbuf b = { marker, sizeof(marker), false };
		int t;

		for (int i = 0; i < 2; i++)
			printf("GUEST ring %d desc 0x%lx avail 0x%lx used 0x%lx\n", i, (uint64_t)dev.q[i].desc,
			       (uint64_t)dev.q[i].avail, (uint64_t)dev.q[i].used);
		for (t = 0; t < 600 && !msix_hits[2]; t++)
			sti_hlt();
		check(msix_hits[2] > 0, "the back-end's call eventfd interrupts the guest on vector 2 (%d)", msix_hits[2]);
		vq_add(&dev.q[1], &b, 1, false);
		vq_kick(&dev.q[1]);
		vq_kick(&dev.q[1]);
		vdev_reset(&dev);
		check(vdev_status(&dev) == 0, "device reset with a buffer still available (status 0x%x)", vdev_status(&dev));
		return;
	}
	check(!(vdev_status(&dev) & 0x40), "no reset needed after DRIVER_OK (status 0x%x)", vdev_status(&dev));

	r = fuse_init(&major);
	check(r == 0 && major == 7, "FUSE_INIT answered by the back-end: error %d, major %u", r, major);
	check(msix_hits[2] > 0, "the completion came as an interrupt on the request queue's vector (%d)", msix_hits[2]);

	r = lookup("hello.bin", &e);
	check(r == 0 && e.attr.size == size, "LOOKUP hello.bin: error %d, size %lu (want %u)", r, e.attr.size, size);
	node = e.nodeid;
	{
		/* A masked vector holds the back-end's interrupt back; the
		 * unmask delivers it. */
		int before, t;

		msix_mask(2, true);
		before = msix_hits[2];
		r = lookup("hello.bin", &e);
		for (t = 0; t < 10; t++)
			sti_hlt();
		check(r == 0 && msix_hits[2] == before,
		      "vector 2 masked: the completion arrives without an interrupt (error %d, %d -> %d)", r, before,
		      msix_hits[2]);
		msix_mask(2, false);
		for (t = 0; t < 300 && msix_hits[2] == before; t++)
			sti_hlt();
		check(msix_hits[2] > before, "unmasked: the held-back interrupt is delivered (%d -> %d)", before,
		      msix_hits[2]);
	}
	{
		struct open_in oi = { .flags = 0 };

		r = fuse(FUSE_OPEN, node, &oi, sizeof(oi), 0, 0, &oo, sizeof(oo), 0, 0, 0);
		check(r == 0, "OPEN hello.bin read-only: error %d", r);
		fh = oo.fh;
	}
	{
		struct rw_in ri = { .fh = fh, .offset = 0, .size = size };

		r = fuse(FUSE_READ, node, &ri, sizeof(ri), 0, 0, 0, 0, buf, size, &got);
		check(r == 0 && got == 16 + size, "READ %u bytes: error %d, %u bytes written back", size, r, got);
		check(pattern_ok(buf, 0, size, seed), "the guest read the host's file (pattern seed %u)", seed);
	}
	if (high) {
		uint8_t *hb = (uint8_t *)(4ull << 30) + (1u << 20);
		struct rw_in ri = { .fh = fh, .offset = 4096, .size = 4096 };

		map_high(4ull << 30, 1u << 21);
		memset(hb, 0, 4096);
		r = fuse(FUSE_READ, node, &ri, sizeof(ri), 0, 0, 0, 0, hb, 4096, &got);
		check(r == 0 && pattern_ok(hb, 4096, 4096, seed),
		      "READ into a buffer above 4 GiB (the memory table's second region): error %d", r);
	}
	{
		struct release_in rl = { .fh = fh };

		r = fuse(FUSE_RELEASE, node, &rl, sizeof(rl), 0, 0, 0, 0, 0, 0, 0);
		check(r == 0, "RELEASE: error %d", r);
	}

	{
		struct {
			struct create_in c;
			char name[16];
		} ci = { { .flags = 01 | 0100 | 01000, .mode = 0100644, .umask = 022 }, "fromguest.bin" };
		struct {
			struct entry_out e;
			struct open_out o;
		} co;
		uint8_t *w = kalloc(wsize, 4096);
		struct rw_in wi;
		struct write_out wo;
		struct release_in rl;

		r = fuse(FUSE_CREATE, 1, &ci, sizeof(ci), 0, 0, &co, sizeof(co), 0, 0, 0);
		check(r == 0, "CREATE fromguest.bin: error %d", r);
		for (uint32_t i = 0; i < wsize; i++)
			w[i] = pattern_byte(i, wseed);
		wi = (struct rw_in){ .fh = co.o.fh, .offset = 0, .size = wsize };
		r = fuse(FUSE_WRITE, co.e.nodeid, &wi, sizeof(wi), w, wsize, &wo, sizeof(wo), 0, 0, 0);
		check(r == 0 && wo.size == wsize, "WRITE %u bytes: error %d, %u written", wsize, r, wo.size);
		rl = (struct release_in){ .fh = co.o.fh };
		r = fuse(FUSE_RELEASE, co.e.nodeid, &rl, sizeof(rl), 0, 0, 0, 0, 0, 0, 0);
		check(r == 0, "RELEASE fromguest.bin: error %d", r);
	}

	/* A reset stops the rings (GET_VRING_BASE); setting the device up
	 * again hands them over anew, and the back-end answers. */
	vdev_reset(&dev);
	check(vdev_status(&dev) == 0, "device reset (status 0x%x)", vdev_status(&dev));
	r = bring_up(tag, nreq, false);
	check(r == 0 && !(vdev_status(&dev) & 0x40), "set up again after the reset (%d, status 0x%x)", r,
	      vdev_status(&dev));
	if (r)
		return;
	unique = 1000;
	r = fuse_init(&major);
	check(r == 0 && major == 7, "FUSE_INIT again after the reset: error %d", r);
	r = lookup("fromguest.bin", &e);
	check(r == 0 && e.attr.size == wsize, "LOOKUP fromguest.bin after the reset: error %d, size %lu", r,
	      e.attr.size);

	if (die) {
		msix_hits[0] = 0;
		printf("GUEST waiting for the back-end to go\n");
		wait_needs_reset("the back-end died");
	}
}
