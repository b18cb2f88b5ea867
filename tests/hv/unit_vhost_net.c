/*
 * hv/vhost_net.c without the kernel's vhost: what vhpc-hv would hand the
 * kernel for rings a hostile driver placed (only addresses inside one RAM
 * region, as vhpc-hv's own mapping), which features the device may offer
 * and pass on, and a descriptor that is no vhost-net refused at set-up
 * with nothing left open.  The kernel side is tests/hv/vhost-net.t's.
 */
#include "lib/err.h"
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hv/config.h"
#include "hv/vhost_net.h"
#include "tests/hv/flat_mem.h"

#define MEM (64ull << 20)

static struct guest_mem mem;

static int setup(void **state)
{
	(void)state;
	return flat_mem(&mem, MEM);
}

static int teardown(void **state)
{
	(void)state;
	mem_destroy(&mem);
	return 0;
}

static void rings_inside_ram_become_our_addresses(void **state)
{
	struct vhn_ring r = { .size = 256, .desc = 0x10000, .avail = 0x20000, .used = 0x30000 };
	uint64_t ua[3];

	(void)state;
	assert_true(vhn_ring_uaddrs(&mem, &r, ua));
	assert_int_equal(ua[0], (uint64_t)(uintptr_t)(mem.host + 0x10000));
	assert_int_equal(ua[1], (uint64_t)(uintptr_t)(mem.host + 0x20000));
	assert_int_equal(ua[2], (uint64_t)(uintptr_t)(mem.host + 0x30000));
}

static void hostile_rings_are_refused(void **state)
{
	const struct vhn_ring bad[] = {
		/* past the end of RAM, by a whole ring and by its last bytes */
		{ .size = 256, .desc = MEM, .avail = 0x20000, .used = 0x30000 },
		{ .size = 256, .desc = MEM - 16 * 255, .avail = 0x20000, .used = 0x30000 },
		{ .size = 256, .desc = 0x10000, .avail = MEM - 6 - 2 * 255, .used = 0x30000 },
		{ .size = 256, .desc = 0x10000, .avail = 0x20000, .used = MEM - 8 * 256 },
		/* wrapping the address space, far away, in the ECAM window */
		{ .size = 256, .desc = 0xfffffffffffff000ull, .avail = 0x20000, .used = 0x30000 },
		{ .size = 256, .desc = 0x10000, .avail = 0x7ff000000000ull, .used = 0x30000 },
		{ .size = 256, .desc = 0x10000, .avail = 0x20000, .used = 0xe0000000ull },
		/* sizes the split ring cannot have */
		{ .size = 0, .desc = 0x10000, .avail = 0x20000, .used = 0x30000 },
		{ .size = 100, .desc = 0x10000, .avail = 0x20000, .used = 0x30000 },
	};
	uint64_t ua[3];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (vhn_ring_uaddrs(&mem, &bad[i], ua))
			fail_msg("ring %zu (size %u, desc 0x%llx) was accepted", i, bad[i].size,
				 (unsigned long long)bad[i].desc);
}

static void features(void **state)
{
	const uint64_t v1 = 1ull << 32, indirect = 1ull << 28, event = 1ull << 29, mrg = 1ull << 15, csum = 1;

	(void)state;
	/* The device drops what the kernel's vhost lacks among the ring
	 * features; device features (checksum) are not vhost's to decide. */
	assert_int_equal(vhn_missing(v1 | indirect | mrg, v1 | indirect | event | mrg | csum), event);
	assert_int_equal(vhn_missing(v1 | indirect | event | mrg, v1 | indirect | event | mrg | csum), 0);
	/* The kernel gets only the driver's bits it knows. */
	assert_int_equal(vhn_features(v1 | event | mrg, v1 | event | csum), v1 | event);
}

static void not_a_vhost_device(void **state)
{
	struct vhost_net h;
	char why[128];
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC), probe;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(vhn_open(&h, fd, &mem, -1, -1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "VHOST_SET_OWNER"));
	vhn_close(&h);
	assert_int_equal(h.fd, -1);
	/* The descriptor went with it: the next one gets its number again. */
	probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(probe, fd);
	close(probe);
	/* Nothing to start on. */
	{
		struct vhn_ring r[2] = { { .size = 64, .desc = 0x10000, .avail = 0x20000, .used = 0x30000 },
					 { .size = 64, .desc = 0x40000, .avail = 0x50000, .used = 0x60000 } };

		assert_int_equal(vhn_start(&h, &mem, 0, r, (const uint16_t[2]){ 0, 0 }, 0, why, sizeof(why)), -1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rings_inside_ram_become_our_addresses),
		cmocka_unit_test(hostile_rings_are_refused),
		cmocka_unit_test(features),
		cmocka_unit_test(not_a_vhost_device),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
