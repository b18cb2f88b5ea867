/* ivshmem-plain from two test guests sharing one region: each finds
 * 1af4:1110, checks BAR2 (64-bit, prefetchable, the region's size, in the
 * 64-bit window above 4 GiB), maps it write-back with the kit's page
 * tables, and the two exchange text through it.  Role b then moves BAR2
 * and reads the region at its new address.
 * Command line: role=a|b|c size=BYTES nonce=S  (c: only looks at BAR2) */
#include "virtio.h"

#define FLAG_A 0
#define FLAG_B 8
#define TEXT_A 0x100
#define TEXT_B 0x200

static volatile uint64_t *flag(uint64_t base, unsigned off) { return (volatile uint64_t *)(base + off); }

/* Waits on the LAPIC tick (about 16 ms) for the other guest's flag. */
static bool wait_flag(uint64_t base, unsigned off, uint64_t want)
{
	for (int t = 0; t < 1200; t++) {
		if (__atomic_load_n(flag(base, off), __ATOMIC_ACQUIRE) == want)
			return true;
		sti_hlt();
	}
	return false;
}

static void put_text(uint64_t at, char tag, const char *nonce)
{
	char *p = (char *)at;

	p[0] = tag;
	p[1] = ':';
	memcpy(p + 2, nonce, strlen(nonce) + 1);
}

static bool has_text(uint64_t at, char tag, const char *nonce)
{
	const char *p = (const char *)at;

	return p[0] == tag && p[1] == ':' && !memcmp(p + 2, nonce, strlen(nonce) + 1);
}

void test_main(void)
{
	char role[4], arg[32], nonce[32];
	uint64_t size = parse_u64(cmdline_get("size", arg, sizeof(arg)) ? arg : "0"), base;
	int s;
	uint32_t bar2;

	cmdline_get("role", role, sizeof(role));
	cmdline_get("nonce", nonce, sizeof(nonce));
	msix_handlers_install(0);
	s = pci_find(0x1af4, 0x1110, 0);
	check(s > 0, "ivshmem 1af4:1110 found in slot %d", s);
	if (s <= 0)
		return;
	check(pci_read(s, 0x08, 4) >> 8 == 0x050000, "class: memory controller, RAM");
	bar2 = pci_read(s, 0x18, 4);
	check((bar2 & 0xf) == 0xc, "BAR2 is 64-bit and prefetchable (0x%x)", bar2 & 0xf);
	check(pci_bar_size(s, 2) == size, "BAR2 is %lu bytes (the region)", pci_bar_size(s, 2));
	base = pci_bar(s, 2);
	check(base >= (1ull << 32), "BAR2 at 0x%lx, in the 64-bit window", base);
	map_high(base, size);
	if (role[0] == 'a') {
		put_text(base + TEXT_A, 'A', nonce);
		__atomic_store_n(flag(base, FLAG_A), 0xa1, __ATOMIC_RELEASE);
		check(wait_flag(base, FLAG_B, 0xb1), "guest b answered through the region");
		check(has_text(base + TEXT_B, 'B', nonce), "guest b's text is visible here");
	} else if (role[0] == 'b') {
		check(wait_flag(base, FLAG_A, 0xa1), "guest a's flag is visible here");
		check(has_text(base + TEXT_A, 'A', nonce), "guest a's text is visible here");
		put_text(base + TEXT_B, 'B', nonce);
		__atomic_store_n(flag(base, FLAG_B), 0xb1, __ATOMIC_RELEASE);
		/* Move BAR2 up by one region size (still naturally aligned);
		 * the memory must follow. */
		{
			uint64_t nb = base + 2 * size;
			uint16_t cmd = (uint16_t)pci_read(s, 4, 2);

			pci_write(s, 4, 2, cmd & ~2u);
			pci_write(s, 0x18, 4, (uint32_t)nb | 0xc);
			pci_write(s, 0x1c, 4, (uint32_t)(nb >> 32));
			pci_write(s, 4, 2, cmd);
			map_high(nb, size);
			check(pci_bar(s, 2) == nb && has_text(nb + TEXT_A, 'A', nonce),
			      "after moving BAR2 to 0x%lx the region is there", nb);
		}
	}
}
