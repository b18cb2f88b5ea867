/* Test-guest kit: PCI and a minimal virtio driver (see virtio.h). */
#include "virtio.h"

bool pci_use_cf8;
volatile int msix_hits[32];

static uint8_t pool[1u << 20] __attribute__((aligned(4096)));
static size_t pool_used;

void *kalloc(size_t size, size_t align)
{
	size_t a = (pool_used + align - 1) & ~(align - 1);

	if (a + size > sizeof(pool)) {
		printf("GUEST not ok - kalloc: out of pool memory\n");
		exit_(4);
	}
	pool_used = a + size;
	memset(pool + a, 0, size);
	return pool + a;
}

/* ------------------------------------------------------------------ PCI */

uint64_t pci_ecam(void)
{
	static uint64_t base = 1;
	struct acpi_hdr *m;

	if (base != 1)
		return base;
	base = 0;
	m = acpi_find("MCFG");
	if (m && m->len >= 60)
		memcpy(&base, (uint8_t *)m + 44, 8);
	return base;
}

uint32_t pci_read(int slot, unsigned off, unsigned len)
{
	if (pci_use_cf8 || !pci_ecam()) {
		uint16_t port = (uint16_t)(0xcfc + (off & 3));

		outl(0xcf8, 0x80000000u | (uint32_t)slot << 11 | (off & 0xfc));
		return len == 1 ? inb(port) : len == 2 ? inw(port) : inl(0xcfc);
	}
	uint64_t a = pci_ecam() + ((uint64_t)slot << 15) + off;

	return len == 1 ? mmio_read8(a) : len == 2 ? mmio_read16(a) : mmio_read32(a);
}

void pci_write(int slot, unsigned off, unsigned len, uint32_t v)
{
	if (pci_use_cf8 || !pci_ecam()) {
		uint16_t port = (uint16_t)(0xcfc + (off & 3));

		outl(0xcf8, 0x80000000u | (uint32_t)slot << 11 | (off & 0xfc));
		if (len == 1)
			outb(port, (uint8_t)v);
		else if (len == 2)
			outw(port, (uint16_t)v);
		else
			outl(0xcfc, v);
		return;
	}
	uint64_t a = pci_ecam() + ((uint64_t)slot << 15) + off;

	if (len == 1)
		mmio_write8(a, (uint8_t)v);
	else if (len == 2)
		mmio_write16(a, (uint16_t)v);
	else
		mmio_write32(a, v);
}

int pci_find(uint16_t vendor, uint16_t device, int from)
{
	for (int s = from; s < 32; s++) {
		uint32_t id = pci_read(s, 0, 4);

		if ((id & 0xffff) == vendor && (id >> 16) == device)
			return s;
	}
	return -1;
}

uint64_t pci_bar(int slot, int bar)
{
	uint32_t lo = pci_read(slot, 0x10 + 4 * (unsigned)bar, 4);
	uint64_t a = lo & ~0xfull;

	if ((lo & 6) == 4)
		a |= (uint64_t)pci_read(slot, 0x14 + 4 * (unsigned)bar, 4) << 32;
	return a;
}

uint64_t pci_bar_size(int slot, int bar)
{
	unsigned off = 0x10 + 4 * (unsigned)bar;
	uint32_t lo = pci_read(slot, off, 4), hi = 0, slo, shi = 0xffffffff;
	bool is64 = (lo & 6) == 4;
	uint16_t cmd = (uint16_t)pci_read(slot, 4, 2);
	uint64_t mask;

	pci_write(slot, 4, 2, cmd & ~2u);         /* no decoding while probing */
	pci_write(slot, off, 4, 0xffffffff);
	slo = pci_read(slot, off, 4);
	pci_write(slot, off, 4, lo);
	if (is64) {
		hi = pci_read(slot, off + 4, 4);
		pci_write(slot, off + 4, 4, 0xffffffff);
		shi = pci_read(slot, off + 4, 4);
		pci_write(slot, off + 4, 4, hi);
	}
	pci_write(slot, 4, 2, cmd);
	mask = ((uint64_t)shi << 32 | (slo & ~0xfu));
	if (!is64)
		mask |= 0xffffffff00000000ull;
	return ~mask + 1;
}

unsigned pci_cap(int slot, uint8_t id, unsigned from)
{
	unsigned c = from ? pci_read(slot, from + 1, 1) : pci_read(slot, 0x34, 1);

	for (int n = 0; c && n < 48; n++, c = pci_read(slot, c + 1, 1))
		if (pci_read(slot, c, 1) == id)
			return c;
	return 0;
}

static void on_msix(int vec)
{
	__atomic_add_fetch(&msix_hits[vec - VIRTIO_VEC_BASE], 1, __ATOMIC_SEQ_CST);
	lapic_eoi();
}

static void on_tick(int vec)
{
	(void)vec;
	lapic_eoi();
}

void msix_handlers_install(int n)
{
	for (int i = 0; i < n && i < 32; i++)
		irq_set(VIRTIO_VEC_BASE + i, on_msix);
	/* A periodic LAPIC tick (about 16 ms) bounds every hlt-based wait, so
	 * a device that never answers makes the guest fail, not hang. */
	irq_set(0x4e, on_tick);
	lapic_enable();
	mmio_write32(LAPIC_BASE + 0x3e0, 0x3);            /* divide by 16 */
	mmio_write32(LAPIC_BASE + 0x320, 0x4e | (1u << 17));  /* periodic */
	mmio_write32(LAPIC_BASE + 0x380, 1000000);
}

int msix_enable(int slot, int nvec, int base_vector)
{
	unsigned c = pci_cap(slot, 0x11, 0);
	uint32_t tbl;
	uint64_t t;
	int n;

	if (!c)
		return -1;
	n = (int)(pci_read(slot, c + 2, 2) & 0x7ff) + 1;
	tbl = pci_read(slot, c + 4, 4);
	t = pci_bar(slot, (int)(tbl & 7)) + (tbl & ~7u);
	for (int i = 0; i < nvec && i < n; i++) {
		mmio_write32(t + 16 * (uint64_t)i, 0xfee00000u | lapic_id() << 12);
		mmio_write32(t + 16 * (uint64_t)i + 4, 0);
		mmio_write32(t + 16 * (uint64_t)i + 8, (uint32_t)(base_vector + i));
		mmio_write32(t + 16 * (uint64_t)i + 12, 0);       /* unmask */
	}
	pci_write(slot, c + 2, 2, (pci_read(slot, c + 2, 2) & ~0x4000u) | 0x8000u);
	lapic_enable();
	return n;
}

/* Extra page directories for map_high (2 GiB worth). */
static uint64_t high_pd[2][512] __attribute__((aligned(4096)));
static int high_used;

void map_high(uint64_t gpa, uint64_t size)
{
	uint64_t cr3, *pml4, *pdpt;

	__asm__ volatile("mov %%cr3, %0" : "=r"(cr3));
	pml4 = (uint64_t *)(cr3 & ~0xfffull);
	pdpt = (uint64_t *)(pml4[0] & ~0xfffull);
	for (uint64_t g = gpa & ~((1ull << 30) - 1); g < gpa + size; g += 1ull << 30) {
		uint64_t *pd;

		if (g >> 39 || high_used == 2) {
			printf("GUEST not ok - map_high: 0x%lx out of reach\n", g);
			exit_(4);
		}
		pd = high_pd[high_used++];
		for (uint64_t i = 0; i < 512; i++)
			pd[i] = (g + (i << 21)) | 0x83;
		pdpt[g >> 30] = (uint64_t)pd | 3;
	}
	__asm__ volatile("mov %0, %%cr3" : : "r"(cr3) : "memory");
}

/* --------------------------------------------------------------- virtio */

#define C_DFSEL 0x00
#define C_DF 0x04
#define C_GFSEL 0x08
#define C_GF 0x0c
#define C_MSIX 0x10
#define C_NUMQ 0x12
#define C_STATUS 0x14
#define C_QSEL 0x16
#define C_QSIZE 0x18
#define C_QMSIX 0x1a
#define C_QENABLE 0x1c
#define C_QNOFF 0x1e
#define C_QDESC 0x20
#define C_QAVAIL 0x28
#define C_QUSED 0x30

uint64_t vdev_offered(struct kvdev *d)
{
	mmio_write32(d->common + C_DFSEL, 0);
	uint64_t f = mmio_read32(d->common + C_DF);

	mmio_write32(d->common + C_DFSEL, 1);
	return f | (uint64_t)mmio_read32(d->common + C_DF) << 32;
}

uint8_t vdev_status(struct kvdev *d)
{
	return mmio_read8(d->common + C_STATUS);
}

void vdev_reset(struct kvdev *d)
{
	mmio_write8(d->common + C_STATUS, 0);
	while (mmio_read8(d->common + C_STATUS))
		cpu_relax();
}

int vdev_open(struct kvdev *d, unsigned type, int nth, uint64_t want)
{
	int slot = -1;

	memset(d, 0, sizeof(*d));
	for (int i = 0; i <= nth; i++)
		if ((slot = pci_find(0x1af4, (uint16_t)(0x1040 + type), slot + 1)) < 0)
			return -1;
	d->slot = slot;
	pci_write(slot, 4, 2, pci_read(slot, 4, 2) | 0x6);   /* memory, bus master */
	for (unsigned c = pci_cap(slot, 0x09, 0); c; c = pci_cap(slot, 0x09, c)) {
		uint8_t t = (uint8_t)pci_read(slot, c + 3, 1), bar = (uint8_t)pci_read(slot, c + 4, 1);
		uint64_t a = pci_bar(slot, bar) + pci_read(slot, c + 8, 4);

		if (t == 1)
			d->common = a;
		else if (t == 2) {
			d->notify_base = a;
			d->notify_mult = pci_read(slot, c + 16, 4);
		} else if (t == 3)
			d->isr = a;
		else if (t == 4)
			d->devcfg = a;
	}
	if (!d->common || !d->notify_base || !d->isr)
		return -2;
	d->bar = pci_bar(slot, 0);
	vdev_reset(d);
	mmio_write8(d->common + C_STATUS, 1);          /* ACKNOWLEDGE */
	mmio_write8(d->common + C_STATUS, 1 | 2);      /* DRIVER */
	d->features = (vdev_offered(d) & want) | (1ull << 32);
	mmio_write32(d->common + C_GFSEL, 0);
	mmio_write32(d->common + C_GF, (uint32_t)d->features);
	mmio_write32(d->common + C_GFSEL, 1);
	mmio_write32(d->common + C_GF, (uint32_t)(d->features >> 32));
	mmio_write8(d->common + C_STATUS, 1 | 2 | 8);  /* FEATURES_OK */
	if (!(mmio_read8(d->common + C_STATUS) & 8))
		return -3;
	d->nq = mmio_read16(d->common + C_NUMQ);
	return 0;
}

int vq_setup_(struct kvdev *d, int qi, uint16_t size, uint16_t vec)
{
	struct kvq *q = &d->q[qi];
	uint16_t max;

	mmio_write16(d->common + C_QSEL, (uint16_t)qi);
	max = mmio_read16(d->common + C_QSIZE);
	if (!max)
		return -1;
	if (!size || size > max)
		size = max;
	q->idx = qi;
	q->size = size;
	q->desc = kalloc(16u * size, 16);
	q->avail = kalloc(6 + 2u * size, 2);
	q->used = kalloc(6 + 8u * size, 4);
	mmio_write16(d->common + C_QSIZE, size);
	mmio_write64(d->common + C_QDESC, (uint64_t)q->desc);
	mmio_write64(d->common + C_QAVAIL, (uint64_t)q->avail);
	mmio_write64(d->common + C_QUSED, (uint64_t)q->used);
	mmio_write16(d->common + C_QMSIX, vec);
	if (mmio_read16(d->common + C_QMSIX) != vec)
		return -2;
	q->notify = d->notify_base + (uint64_t)mmio_read16(d->common + C_QNOFF) * d->notify_mult;
	mmio_write16(d->common + C_QENABLE, 1);
	return mmio_read16(d->common + C_QENABLE) == 1 ? 0 : -3;
}

void vdev_driver_ok(struct kvdev *d)
{
	mmio_write16(d->common + C_MSIX, 0);           /* config changes: vector 0 */
	mmio_write8(d->common + C_STATUS, 1 | 2 | 8 | 4);
}

int vq_add(struct kvq *q, const struct kbuf *b, int n, bool indirect)
{
	uint16_t head = q->next_desc;

	if (indirect) {
		struct vring_desc *t = kalloc(16u * (unsigned)n, 16);

		for (int i = 0; i < n; i++)
			t[i] = (struct vring_desc){ (uint64_t)b[i].p, b[i].len,
						    (uint16_t)((b[i].write ? VRING_DESC_F_WRITE : 0) |
							       (i + 1 < n ? VRING_DESC_F_NEXT : 0)),
						    (uint16_t)(i + 1) };
		q->desc[head] = (struct vring_desc){ (uint64_t)t, 16u * (unsigned)n, VRING_DESC_F_INDIRECT, 0 };
		q->next_desc = (uint16_t)((head + 1) % q->size);
	} else {
		for (int i = 0; i < n; i++) {
			uint16_t d = q->next_desc, nx = (uint16_t)((d + 1) % q->size);

			q->desc[d] = (struct vring_desc){ (uint64_t)b[i].p, b[i].len,
							 (uint16_t)((b[i].write ? VRING_DESC_F_WRITE : 0) |
								    (i + 1 < n ? VRING_DESC_F_NEXT : 0)),
							 nx };
			q->next_desc = nx;
		}
	}
	vq_raw_publish(q, head);
	return head;
}

void vq_raw_desc(struct kvq *q, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	q->desc[i] = (struct vring_desc){ addr, len, flags, next };
}

void vq_raw_publish(struct kvq *q, uint16_t head)
{
	q->avail[2 + q->avail_idx % q->size] = head;
	mb_();
	q->avail_idx++;
	__atomic_store_n(&q->avail[1], q->avail_idx, __ATOMIC_RELEASE);
	mb_();
}

void vq_kick(struct kvq *q)
{
	mmio_write16(q->notify, (uint16_t)q->idx);
}

int vq_get(struct kvq *q, uint32_t *len)
{
	volatile uint32_t *e;

	if (__atomic_load_n(&q->used[1], __ATOMIC_ACQUIRE) == q->last_used)
		return -1;
	e = (volatile uint32_t *)(q->used + 2) + 2 * (q->last_used % q->size);
	if (len)
		*len = e[1];
	q->last_used++;
	/* used_event: interrupt again at the next completion. */
	q->avail[2 + q->size] = q->last_used;
	return (int)e[0];
}

/* One look at each queue, interrupts off so that a completion cannot slip
 * in between the look and the hlt. */
static int vq_get_any(struct kvq *const *qs, int n, uint32_t *len, int *which)
{
	for (int i = 0; i < n; i++) {
		int h = vq_get(qs[i], len);

		if (h >= 0) {
			if (which)
				*which = i;
			return h;
		}
	}
	return -1;
}

int vq_wait_any(struct kvq *const *qs, int n, uint32_t *len, uint64_t spins, int *which)
{
	int h;

	for (uint64_t i = 0; i < spins; i++) {
		cli();
		if ((h = vq_get_any(qs, n, len, which)) >= 0) {
			sti();
			return h;
		}
		sti_hlt();
	}
	cli();
	h = vq_get_any(qs, n, len, which);
	sti();
	return h;
}

int vq_wait(struct kvq *q, uint32_t *len, uint64_t spins)
{
	return vq_wait_any(&q, 1, len, spins, NULL);
}

uint8_t vcfg8(struct kvdev *d, unsigned off) { return mmio_read8(d->devcfg + off); }
uint16_t vcfg16(struct kvdev *d, unsigned off) { return mmio_read16(d->devcfg + off); }
uint32_t vcfg32(struct kvdev *d, unsigned off) { return mmio_read32(d->devcfg + off); }
uint64_t vcfg64(struct kvdev *d, unsigned off)
{
	return mmio_read32(d->devcfg + off) | (uint64_t)mmio_read32(d->devcfg + off + 4) << 32;
}
