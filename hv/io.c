/* Port I/O and MMIO dispatch: devices register address ranges; vCPU exits
 * find the range by binary search under a read lock, so devices (PCI BARs)
 * may move while the guest runs. */
#include "lib/err.h"
#include "lib/grow.h"
#include "vm.h"

#include <stdlib.h>
#include <string.h>

void io_bus_init(struct io_bus *b)
{
	memset(b, 0, sizeof(*b));
	pthread_rwlock_init(&b->lock, NULL);
}

void io_bus_free(struct io_bus *b)
{
	free(b->r);
	b->r = NULL;
	b->n = b->cap = 0;
	pthread_rwlock_destroy(&b->lock);
}

int io_register(struct io_bus *b, uint64_t base, uint64_t len, const struct io_ops *ops,
		void *opaque, const char *name, struct verr *err)
{
	size_t i;

	if (!len || base + len < base)
		return verr_set(err, "%s: bad I/O range 0x%llx+0x%llx", name,
				(unsigned long long)base, (unsigned long long)len);
	pthread_rwlock_wrlock(&b->lock);
	for (i = 0; i < b->n && b->r[i].base < base; i++)
		;
	if ((i > 0 && b->r[i - 1].base + b->r[i - 1].len > base) ||
	    (i < b->n && base + len > b->r[i].base)) {
		const struct io_region *o = (i > 0 && b->r[i - 1].base + b->r[i - 1].len > base) ? &b->r[i - 1] : &b->r[i];

		verr_set(err, "%s: I/O range 0x%llx+0x%llx overlaps %s at 0x%llx+0x%llx", name,
			 (unsigned long long)base, (unsigned long long)len, o->name,
			 (unsigned long long)o->base, (unsigned long long)o->len);
		pthread_rwlock_unlock(&b->lock);
		return -1;
	}
	if (grow(&b->r, &b->cap, b->n + 1, sizeof(*b->r), 16) < 0) {
		pthread_rwlock_unlock(&b->lock);
		return verr_set(err, "out of memory");
	}
	memmove(&b->r[i + 1], &b->r[i], (b->n - i) * sizeof(*b->r));
	b->r[i] = (struct io_region){ .base = base, .len = len, .ops = ops, .opaque = opaque };
	snprintf(b->r[i].name, sizeof(b->r[i].name), "%s", name);
	b->n++;
	pthread_rwlock_unlock(&b->lock);
	return 0;
}

int io_unregister(struct io_bus *b, uint64_t base)
{
	int rc = -1;

	pthread_rwlock_wrlock(&b->lock);
	for (size_t i = 0; i < b->n; i++) {
		if (b->r[i].base == base) {
			memmove(&b->r[i], &b->r[i + 1], (b->n - i - 1) * sizeof(*b->r));
			b->n--;
			rc = 0;
			break;
		}
	}
	pthread_rwlock_unlock(&b->lock);
	return rc;
}

bool io_dispatch(struct io_bus *b, uint64_t addr, void *data, unsigned len, bool write)
{
	size_t lo = 0, hi;
	bool found = false;
	struct io_region r = { 0 };

	pthread_rwlock_rdlock(&b->lock);
	hi = b->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct io_region *m = &b->r[mid];

		if (addr < m->base) {
			hi = mid;
		} else if (addr - m->base >= m->len) {
			lo = mid + 1;
		} else {
			/* An access that runs past the region's end is not the device's. */
			if (len <= m->len - (addr - m->base)) {
				r = *m;
				found = true;
			}
			break;
		}
	}
	pthread_rwlock_unlock(&b->lock);
	/* The handler runs without the lock: a PCI config write may move BARs
	 * (io_register on this bus).  Region owners outlive their regions. */
	if (found) {
		if (write) {
			if (r.ops->write)
				r.ops->write(r.opaque, addr - r.base, data, len);
		} else if (r.ops->read) {
			r.ops->read(r.opaque, addr - r.base, data, len);
		} else {
			memset(data, 0xff, len);
		}
	} else {
		if (!write)
			memset(data, 0xff, len);
		atomic_fetch_add(&b->unhandled, 1);
	}
	return found;
}
