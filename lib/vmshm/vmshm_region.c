/* vmshm region: format, validate, slots.  See vmshm_region.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "vmshm_region.h"
#include "vmshm_ring.h"

void vmshm_random(void *buf, size_t n)
{
	/* Early in a guest's life the pool may not be ready; these numbers
	 * only need to differ between regions and slot claims, not be secret. */
	if (getrandom(buf, n, GRND_NONBLOCK) == (ssize_t)n)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	x ^= (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)buf;
	for (size_t i = 0; i < n; i++) {
		x += 0x9e3779b97f4a7c15ull;
		uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		((uint8_t *)buf)[i] = (uint8_t)(z ^ (z >> 31));
	}
}

static int is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static uint32_t log2u(uint64_t v)
{
	uint32_t s = 0;
	while ((1ull << s) < v)
		s++;
	return s;
}

uint64_t vmshm_region_size_for(uint32_t nslots, uint32_t ring_size)
{
	return VMSHM_RINGS_OFF +
	       (uint64_t)nslots * nslots * ((uint64_t)ring_size + VMSHM_RING_CTRL);
}

int vmshm_geom_plan(uint64_t size, uint32_t ring_size, uint32_t max_slots,
		    struct vmshm_geom *g, char *err, size_t errlen)
{
	if (!is_pow2(ring_size) || ring_size < VMSHM_RING_MIN || ring_size > VMSHM_RING_MAX) {
		snprintf(err, errlen, "ring size %u is not a power of two in [%u, %u]",
			 ring_size, VMSHM_RING_MIN, VMSHM_RING_MAX);
		return -1;
	}
	if (max_slots > VMSHM_MAX_SLOTS) {
		snprintf(err, errlen, "%u slots asked for, at most %u", max_slots, VMSHM_MAX_SLOTS);
		return -1;
	}
	uint32_t n = 0;
	if (max_slots) {
		/* The platform said how many ranks share the region: smaller rings
		 * for all of them rather than no vmshm for some. */
		while (ring_size > VMSHM_RING_PLAN_MIN &&
		       vmshm_region_size_for(max_slots, ring_size) > size)
			ring_size /= 2;
		if (vmshm_region_size_for(max_slots, ring_size) <= size)
			n = max_slots;
	} else {
		while (n < VMSHM_MAX_SLOTS && vmshm_region_size_for(n + 1, ring_size) <= size)
			n++;
	}
	if (n < 2) {
		uint32_t want = max_slots > 2 ? max_slots : 2;
		snprintf(err, errlen, "region of %llu bytes is too small for %u slots "
			 "with %u-byte rings (needs %llu)", (unsigned long long)size, want,
			 ring_size, (unsigned long long)vmshm_region_size_for(want, ring_size));
		return -1;
	}
	memset(g, 0, sizeof(*g));
	g->region_size = size;
	g->nslots = n;
	g->ring_size = ring_size;
	g->ring_shift = log2u(ring_size);
	g->ring_stride = (uint64_t)ring_size + VMSHM_RING_CTRL;
	return 0;
}

int vmshm_geom_check(const struct vmshm_region_hdr *h, uint64_t mapped_size,
		     struct vmshm_geom *g, char *err, size_t errlen)
{
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
	if (h->magic != VMSHM_MAGIC)
		BAD("bad magic 0x%016llx", (unsigned long long)h->magic);
	if (h->version != VMSHM_VERSION)
		BAD("layout version %u, this component speaks %u", h->version, VMSHM_VERSION);
	if (h->hdr_size != VMSHM_HDR_SIZE)
		BAD("header size %u, expected %u", h->hdr_size, VMSHM_HDR_SIZE);
	if (h->region_size != mapped_size)
		BAD("header says %llu bytes but %llu are mapped",
		    (unsigned long long)h->region_size, (unsigned long long)mapped_size);
	if (h->nslots < 2 || h->nslots > VMSHM_MAX_SLOTS)
		BAD("slot count %u outside [2, %u]", h->nslots, VMSHM_MAX_SLOTS);
	if (!is_pow2(h->ring_size) || h->ring_size < VMSHM_RING_MIN ||
	    h->ring_size > VMSHM_RING_MAX)
		BAD("ring size %u is not a power of two in [%u, %u]",
		    h->ring_size, VMSHM_RING_MIN, VMSHM_RING_MAX);
	if (h->slots_off != VMSHM_SLOTS_OFF || h->rings_off != VMSHM_RINGS_OFF)
		BAD("table offsets %llu/%llu, expected %u/%u",
		    (unsigned long long)h->slots_off, (unsigned long long)h->rings_off,
		    VMSHM_SLOTS_OFF, VMSHM_RINGS_OFF);
	if (h->ring_stride != (uint64_t)h->ring_size + VMSHM_RING_CTRL)
		BAD("ring stride %llu, expected %llu", (unsigned long long)h->ring_stride,
		    (unsigned long long)h->ring_size + VMSHM_RING_CTRL);
	/* nslots <= 256 and ring_size <= 2^30: no overflow in 64 bits. */
	if (vmshm_region_size_for(h->nslots, h->ring_size) > mapped_size)
		BAD("%u slots with %u-byte rings need %llu bytes, region has %llu",
		    h->nslots, h->ring_size,
		    (unsigned long long)vmshm_region_size_for(h->nslots, h->ring_size),
		    (unsigned long long)mapped_size);
#undef BAD
	memset(g, 0, sizeof(*g));
	g->region_size = h->region_size;
	g->nslots = h->nslots;
	g->ring_size = h->ring_size;
	g->ring_shift = log2u(h->ring_size);
	g->ring_stride = h->ring_stride;
	memcpy(g->uuid, h->uuid, sizeof(g->uuid));
	return 0;
}

static void snapshot(const void *base, struct vmshm_region_hdr *h)
{
	const volatile uint8_t *src = base;
	uint8_t *dst = (uint8_t *)h;
	for (size_t i = 0; i < sizeof(*h); i++)
		dst[i] = src[i];
}

static int format(struct vmshm_region_hdr *h, uint64_t size,
		  const struct vmshm_attach_opts *o, char *err, size_t errlen)
{
	struct vmshm_geom g;
	if (vmshm_geom_plan(size, o->ring_size, o->max_slots, &g, err, errlen))
		return -1;
	uint8_t uuid[16];
	vmshm_random(uuid, sizeof(uuid));
	/* The slot table must start all free; rings are reset when claimed. */
	memset((uint8_t *)h + VMSHM_SLOTS_OFF, 0, VMSHM_MAX_SLOTS * VMSHM_SLOT_SIZE);
	h->version = VMSHM_VERSION;
	h->hdr_size = VMSHM_HDR_SIZE;
	h->region_size = size;
	h->nslots = g.nslots;
	h->ring_size = g.ring_size;
	h->slots_off = VMSHM_SLOTS_OFF;
	h->rings_off = VMSHM_RINGS_OFF;
	h->ring_stride = g.ring_stride;
	memcpy(h->uuid, uuid, sizeof(uuid));
	__atomic_store_n(&h->magic, VMSHM_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

int vmshm_region_attach(void *base, uint64_t size,
			const struct vmshm_attach_opts *o,
			struct vmshm_geom *g, char *err, size_t errlen)
{
	struct vmshm_region_hdr *h = base;
	struct timespec t0, now;

	if (size < VMSHM_RINGS_OFF) {
		snprintf(err, errlen, "region of %llu bytes is smaller than its tables (%u)",
			 (unsigned long long)size, VMSHM_RINGS_OFF);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		uint64_t m = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
		if (m == VMSHM_MAGIC) {
			struct vmshm_region_hdr snap;
			snapshot(base, &snap);
			return vmshm_geom_check(&snap, size, g, err, errlen);
		}
		if (m == 0) {
			uint64_t zero = 0;
			if (__atomic_compare_exchange_n(&h->magic, &zero, VMSHM_FORMATTING, 0,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				if (format(h, size, o, err, errlen)) {
					/* Let the next one try with its own options. */
					__atomic_store_n(&h->magic, 0, __ATOMIC_RELEASE);
					return -1;
				}
				continue;
			}
			continue;
		}
		if (m != VMSHM_FORMATTING) {
			snprintf(err, errlen, "not a vmshm region (magic 0x%016llx)",
				 (unsigned long long)m);
			return -1;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms > o->timeout_ms) {
			snprintf(err, errlen, "region still being formatted after %d ms "
				 "(did its formatter die?)", o->timeout_ms);
			return -1;
		}
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

struct vmshm_slot *vmshm_slot_at(void *base, uint32_t slot)
{
	return (struct vmshm_slot *)((uint8_t *)base + VMSHM_SLOTS_OFF +
				     (uint64_t)slot * VMSHM_SLOT_SIZE);
}

void *vmshm_ring_ctrl(void *base, const struct vmshm_geom *g,
		      uint32_t producer, uint32_t consumer)
{
	return (uint8_t *)base + VMSHM_RINGS_OFF +
	       ((uint64_t)consumer * g->nslots + producer) * g->ring_stride;
}

void *vmshm_ring_data(void *base, const struct vmshm_geom *g,
		      uint32_t producer, uint32_t consumer)
{
	return (uint8_t *)vmshm_ring_ctrl(base, g, producer, consumer) + VMSHM_RING_CTRL;
}

int vmshm_slot_claim(void *base, const struct vmshm_geom *g, uint64_t owner,
		     uint32_t *slot, uint32_t *epoch)
{
	if (owner == 0 || owner == VMSHM_OWNER_CLAIMING)
		return -1;
	for (uint32_t s = 0; s < g->nslots; s++) {
		struct vmshm_slot *e = vmshm_slot_at(base, s);
		uint64_t free_ = 0;
		if (!__atomic_compare_exchange_n(&e->owner, &free_, VMSHM_OWNER_CLAIMING, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		uint32_t ep = (uint32_t)__atomic_load_n(&e->epoch, __ATOMIC_RELAXED) + 1;
		if (ep == 0)
			ep = 1;
		__atomic_store_n(&e->epoch, ep, __ATOMIC_RELAXED);
		for (uint32_t w = 0; w < VMSHM_MAX_SLOTS / 64; w++)
			__atomic_store_n(&e->active[w], 0, __ATOMIC_RELAXED);
		for (uint32_t p = 0; p < g->nslots; p++)
			vmshm_ring_reset(vmshm_ring_ctrl(base, g, p, s));
		__atomic_store_n(&e->owner, owner, __ATOMIC_RELEASE);
		*slot = s;
		*epoch = ep;
		return 0;
	}
	return -1;
}

void vmshm_slot_release(void *base, const struct vmshm_geom *g, uint32_t slot,
			uint64_t owner)
{
	if (slot >= g->nslots)
		return;
	uint64_t expect = owner;
	__atomic_compare_exchange_n(&vmshm_slot_at(base, slot)->owner, &expect, 0, 0,
				    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

void vmshm_slot_mark_active(void *base, uint32_t consumer, uint32_t producer)
{
	__atomic_fetch_or(&vmshm_slot_at(base, consumer)->active[producer / 64],
			  1ull << (producer % 64), __ATOMIC_RELEASE);
}

uint64_t vmshm_slot_active_word_mask(const struct vmshm_geom *g, uint32_t w)
{
	if (w * 64 >= g->nslots)
		return 0;
	uint32_t valid = g->nslots - w * 64;
	return valid < 64 ? (1ull << valid) - 1 : ~0ull;
}

uint64_t vmshm_slot_active_word(void *base, const struct vmshm_geom *g,
				uint32_t consumer, uint32_t w)
{
	if (w * 64 >= g->nslots)
		return 0;
	return __atomic_load_n(&vmshm_slot_at(base, consumer)->active[w], __ATOMIC_ACQUIRE) &
	       vmshm_slot_active_word_mask(g, w);
}
