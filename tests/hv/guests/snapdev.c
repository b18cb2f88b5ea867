/* Virtio devices across a snapshot: each round (paced by a LAPIC timer
 * tick) writes a burst of sectors of a virtio-blk disk with data that
 * depends on everything read so far, reads other sectors back into a
 * running hash, and sends a line through virtio-console's transmit
 * queue.  A run restored from a snapshot taken mid-way, on the disk as
 * it was at the snapshot, must print the result of a run left alone and
 * leave the same disk.  With an ivshmem device, the guest first moves its
 * region (BAR2) to an address of its own choosing, then writes each
 * round's hash into it and folds it into the result, so a restore must
 * map the region where the guest put it.  Command line: rounds=N
 * sectors=S (default 24, 64); tick as in snap.c. */
#include "virtio.h"

#define VEC_TIMER 0x40
#define BURST 8

static struct kvdev blk, cons;
static volatile int ticks;
static uint64_t x = 0x9e3779b97f4a7c15ull;

static void on_timer(int v)
{
	(void)v;
	ticks++;
	lapic_eoi();
}

struct req_hdr { uint32_t type, reserved; uint64_t sector; };

static int blk_req(uint32_t type, uint64_t sector, void *buf)
{
	static struct req_hdr *h;
	static volatile uint8_t *st;
	struct kbuf b[3];
	uint32_t ul = 0;
	int head;

	if (!h) {
		h = kalloc(sizeof(*h), 16);
		st = kalloc(1, 1);
	}
	h->type = type;
	h->sector = sector;
	*st = 0xee;
	b[0] = (struct kbuf){ h, sizeof(*h), false };
	b[1] = (struct kbuf){ buf, 512, type == 0 };
	b[2] = (struct kbuf){ (void *)st, 1, true };
	head = vq_add(&blk.q[0], b, 3, false);
	vq_kick(&blk.q[0]);
	if (vq_wait(&blk.q[0], &ul, 5000) != head)
		return -1;
	return *st;
}

static void fold(const uint8_t *p)
{
	for (int i = 0; i < 512; i++) {
		x = (x ^ p[i]) * 0xff51afd7ed558ccdull;
		x ^= x >> 29;
	}
}

static void cons_line(int r)
{
	static char *line;
	struct kbuf b;
	char d[12];
	int n = 0, k = 0;
	uint32_t len;

	if (!line)
		line = kalloc(32, 8);
	memcpy(line, "console round ", 14);
	n = 14;
	do
		d[k++] = (char)('0' + r % 10);
	while ((r /= 10) && k < 11);
	while (k)
		line[n++] = d[--k];
	line[n++] = '\n';
	b = (struct kbuf){ line, (uint32_t)n, false };
	vq_add(&cons.q[1], &b, 1, false);
	vq_kick(&cons.q[1]);
	check(vq_wait(&cons.q[1], &len, 5000) >= 0, "console line sent");
}

void test_main(void)
{
	char arg[16];
	int rounds = cmdline_get("rounds", arg, sizeof(arg)) ? (int)parse_u64(arg) : 24;
	uint64_t sectors = cmdline_get("sectors", arg, sizeof(arg)) ? parse_u64(arg) : 64;
	uint32_t tick = cmdline_get("tick", arg, sizeof(arg)) ? (uint32_t)parse_u64(arg) : 20000000;
	uint8_t *buf = kalloc(512, 512);
	uint64_t disk = 0x100000001b3ull, shm_words = 0;
	volatile uint64_t *shm = 0;
	int shm_s;

	msix_handlers_install(8);
	check(vdev_open(&blk, 2, 0, 0) == 0, "virtio-blk found");
	check(msix_enable(blk.slot, 2, VIRTIO_VEC_BASE) == 2, "virtio-blk MSI-X");
	check(vq_setup_(&blk, 0, 64, 1) == 0, "virtio-blk request queue");
	vdev_driver_ok(&blk);
	check(vdev_open(&cons, 3, 0, 0) == 0, "virtio-console found");
	msix_enable(cons.slot, 3, VIRTIO_VEC_BASE + 4);
	check(vq_setup_(&cons, 1, 16, 2) == 0, "virtio-console transmit queue");
	vdev_driver_ok(&cons);

	shm_s = pci_find(0x1af4, 0x1110, 0);
	if (shm_s > 0) {
		uint64_t size = pci_bar_size(shm_s, 2), nb = pci_bar(shm_s, 2) + 2 * size;
		uint16_t cmd = (uint16_t)pci_read(shm_s, 4, 2);

		pci_write(shm_s, 4, 2, cmd & ~2u);
		pci_write(shm_s, 0x18, 4, (uint32_t)nb | 0xc);
		pci_write(shm_s, 0x1c, 4, (uint32_t)(nb >> 32));
		pci_write(shm_s, 4, 2, cmd);
		map_high(nb, size);
		shm = (volatile uint64_t *)nb;
		shm_words = size / 8;
		check(pci_bar(shm_s, 2) == nb, "ivshmem region moved to 0x%lx", nb);
	}
	irq_set(VEC_TIMER, on_timer);
	lapic_enable();
	mmio_write32(LAPIC_BASE + 0x3e0, 0xb);
	mmio_write32(LAPIC_BASE + 0x320, VEC_TIMER | (1u << 17));
	mmio_write32(LAPIC_BASE + 0x380, tick);
	for (int r = 0; r < rounds; r++) {
		int t = ticks, bad = 0;

		while (ticks == t)
			sti_hlt();
		for (int k = 0; k < BURST; k++) {
			uint64_t w = ((uint64_t)r * BURST + k) * 7 % sectors, rd = (w * 5 + 3) % sectors;

			for (int i = 0; i < 512; i++)
				buf[i] = (uint8_t)((x >> (i % 8 * 8)) + i);
			bad += blk_req(1, w, buf) != 0;
			bad += blk_req(0, rd, buf) != 0;
			fold(buf);
		}
		check(!bad, "round %d: every request completed", r);
		if (shm)
			shm[(uint64_t)r % shm_words] = x;
		cons_line(r);
		printf("GUEST round %d\n", r);
	}
	mmio_write32(LAPIC_BASE + 0x320, 1u << 16);
	for (uint64_t s = 0; s < sectors; s++) {
		check(blk_req(0, s, buf) == 0, "final read of sector %lu", s);
		for (int i = 0; i < 512; i++)
			disk = (disk ^ buf[i]) * 0x100000001b3ull;
	}
	for (uint64_t i = 0; shm && i < (uint64_t)rounds && i < shm_words; i++)
		disk = (disk ^ shm[i]) * 0x100000001b3ull;
	printf("GUEST result %lx %lx\n", x, disk);
}
