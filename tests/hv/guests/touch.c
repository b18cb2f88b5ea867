/* For the snapshot benchmark (hv/bench/snapbench): writes one word into
 * each of pct=N percent of the pages of the largest RAM range, says so,
 * and idles with interrupts on until it is stopped. */
#include "kit.h"

void test_main(void)
{
	char buf[16];
	uint64_t pct = cmdline_get("pct", buf, sizeof(buf)) ? parse_u64(buf) : 5, base = 0, size = 0, n;
	struct hvm_memmap_entry *m = (struct hvm_memmap_entry *)start_info->memmap_paddr;

	for (uint32_t i = 0; i < start_info->memmap_entries; i++)
		if (m[i].type == 1 && m[i].size > size) {
			base = m[i].addr;
			size = m[i].size;
		}
	/* Above the guest's own image and stack. */
	if (base < (8u << 20)) {
		size -= (8u << 20) - base;
		base = 8u << 20;
	}
	n = size / 4096 * (pct > 100 ? 100 : pct) / 100;
	for (uint64_t p = 0; p < n; p++)
		*(volatile uint64_t *)(base + p * 4096) = p + 1;
	printf("GUEST touched %lu MiB\n", n * 4096 >> 20);
	for (;;)
		sti_hlt();
}
