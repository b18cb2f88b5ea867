/*
 * One single-producer/single-consumer ring of variable-size records.
 *
 * A record is a 16-byte header and a payload.  A payload of at most
 * VMSHM_SHORT_MAX bytes goes in a short record instead: 32 bytes, the
 * stamp, the payload, its length and tag in the last two bytes, so two
 * small messages share a cache line (vader's fast boxes pack them the same
 * way) up to ob1's header and 8 bytes of data.  A larger record takes
 * whole 64-byte lines and starts on one, after a 32-byte PAD record where
 * a short record left half a line.  Records never wrap (a PAD record
 * fills the end of the ring instead).  The consumer owns `tail` (a monotonic byte count, published
 * in the ring's control page); the producer keeps `head` to itself.
 *
 * A record is ready when its 64-bit stamp equals stamp(key, lap), where lap
 * = position / ring size and key is a random number the consumer drew when
 * it claimed its slot (the producer learns it from the modex, never from the
 * region).  Stale bytes from older laps - old headers or payload that
 * happens to sit where a header goes now - cannot carry the stamp of the
 * current lap except by a 2^-63 accident, so the producer writes each line
 * once and the consumer needs no cleaning; the producer stores the stamp
 * last, with release semantics.
 *
 * A PAD record also rewinds an empty large ring to its start (see
 * VMSHM_HOT_WINDOW), so small-message ping-pong stays in a few cache lines.
 *
 * A large payload may start up to a page after its header (the record's
 * skew), half a page from the page offset of the bytes it is copied from
 * (see VMSHM_MATCH_MIN).
 *
 * The consumer trusts nothing it reads: every length is checked against the
 * ring bounds before a payload pointer is handed out, and only its own copy
 * of tail is used to compute addresses.  The producer checks that the tail
 * it reads is possible (behind head, within one ring) before using it.
 */
#ifndef VHPC_VMSHM_RING_H
#define VHPC_VMSHM_RING_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define VMSHM_REC_HDR    16u
#define VMSHM_REC_ALIGN  32u
#define VMSHM_LINE       64u
#define VMSHM_REC_DATA   0xd1u
#define VMSHM_REC_PAD    0x9au
/* A consumer that keeps up with small records is kept inside the first
 * VMSHM_HOT_WINDOW bytes of a large ring: small messages then cycle through
 * 1024 cache lines instead of the whole ring (1-byte latency 1.6x -> 1.0x
 * of vader with 1 MiB rings), while a lagging consumer, or large records,
 * still get the whole ring. */
#define VMSHM_HOT_WINDOW (64u << 10)
/* "Keeps up" means at most VMSHM_HOT_LAG bytes behind: in Sendrecv and
 * Exchange both sides send before they receive, so the peer has often not
 * taken our last record yet when we look.  Demanding an empty ring there
 * sent about half the laps through all 1 MiB of cold lines (1-byte
 * Sendrecv 0.5 or 1.4-1.9 us from one run to the next, vader 0.6).  A look
 * that fails is tried again VMSHM_HOT_RETRY bytes further on, not a lap
 * later. */
#define VMSHM_HOT_LAG    1024u
#define VMSHM_HOT_RETRY  4096u
/* Short records: stamp(key, lap) ^ VMSHM_SHORT_BIT, then up to
 * VMSHM_SHORT_MAX payload bytes from VMSHM_SHORT_HDR, length and tag in the
 * record's last two bytes.  With the 16-byte header a 32-byte record held
 * ob1's 14-byte header and 2 bytes of data; 4 and 8 bytes took a line of
 * their own, and that cost 2-rank Sendrecv 0.44 -> 0.55 us, Bcast 0.71 ->
 * 0.98 us and Allreduce 4 B 1.6-2x vader's (IMB-MPI1; btl_vmshm README,
 * "Short records").  The bit costs the stamp one of its 63 random bits. */
#define VMSHM_SHORT_BIT  2u
#define VMSHM_SHORT_HDR  8u
#define VMSHM_SHORT_MAX  (VMSHM_REC_ALIGN - VMSHM_SHORT_HDR - 2u)
/* The consumer asks for the later lines of a long record up to this size
 * as soon as it finds it (vmshm_cons_peek); beyond, the hardware
 * prefetcher follows the copy by itself (README, "Two-line records"). */
#define VMSHM_PREFETCH_MAX 2048u
/* glibc copies 2 KiB to 512 KiB with `rep movsb`, and on the AMD EPYC
 * machines here that runs at 1.7-2.9 GB/s instead of 35-48 whenever the
 * destination is 1 to 31 bytes past the source modulo 4 KiB (measured
 * byte by byte at 8-256 KiB; btl_vmshm README, "Copy distance").  A ring
 * position cut through such a window one record in fifteen and made a run
 * of 4-rank Exchange 2.4 times slower, depending only on where malloc had
 * put the application's buffer.  So a payload of at least VMSHM_MATCH_MIN
 * bytes goes VMSHM_MATCH_SHIFT past its source's page offset: the copy in
 * has distance 2048, and the copy out the distance between the two
 * applications' buffers minus 2048.  With no shift the copy out would hit
 * the window for malloc'd neighbours of whole-page size (16 bytes apart);
 * with half a page only buffers 2049-2079 bytes apart do.  The copies ob1
 * makes elsewhere are the node agent's concern (vmshm_copyprobe.h). */
#define VMSHM_PAGE        4096u
#define VMSHM_MATCH_MIN   2048u
#define VMSHM_NO_MATCH    UINT32_MAX
#define VMSHM_MATCH_SHIFT 2048u

/* Page offset for a payload whose first `lead` bytes are headers and whose
 * rest is copied from `src`. */
static inline uint32_t vmshm_page_off_for(const void *src, size_t lead)
{
	return (uint32_t)(((uintptr_t)src - lead + VMSHM_MATCH_SHIFT) & (VMSHM_PAGE - 1));
}

struct vmshm_rec {
	uint64_t stamp;
	uint32_t len;
	uint8_t tag;
	uint8_t type;
	uint16_t skew;         /* bytes between header and payload, < VMSHM_PAGE */
};

struct vmshm_prod {
	uint8_t *data;
	uint64_t *tail;        /* consumer-written, in the region */
	uint64_t head;
	uint64_t tail_seen;
	uint64_t key;          /* the consumer's, from its modex entry */
	uint32_t size;
	uint32_t shift;
	uint64_t res;          /* position of the reserved record */
	uint32_t res_len;
	uint32_t res_skew;
	uint32_t hot;          /* 0, or the size of the hot window */
	uint64_t hot_lap;      /* lap that hot_at is for */
	uint64_t hot_at;       /* where in that lap to look for a rewind next */
	uint64_t laps;         /* with a hot window: laps begun, and how */
	uint64_t rewinds;      /* many of them began early by a rewind */
};

struct vmshm_cons {
	const uint8_t *data;
	uint64_t *tail_pub;
	uint64_t tail;
	uint64_t published;
	uint64_t key;
	uint32_t size;
	uint32_t shift;
	uint32_t last_need;
};

struct vmshm_msg {
	const void *payload;
	uint32_t len;
	uint8_t tag;
};

/* Largest payload one record may carry in a ring of `size` bytes: small
 * enough that an empty ring always has room for it wherever head is. */
static inline uint32_t vmshm_ring_max_payload(uint32_t size)
{
	return size / 2 - 2 * VMSHM_LINE;
}

/* Consumer, when it claims its slot: empty ring. */
void vmshm_ring_reset(void *ctrl);
/* Producer attaches where the consumer's published tail is; rings of at
 * least 4 hot windows get one. */
void vmshm_prod_init(struct vmshm_prod *p, void *ctrl, void *data,
		     uint32_t size, uint32_t shift, uint64_t key);
void vmshm_cons_init(struct vmshm_cons *c, void *ctrl, const void *data,
		     uint32_t size, uint32_t shift, uint64_t key);

/*
 * The per-fragment paths, inline:
 *
 * vmshm_prod_reserve: room for a payload of `len` bytes; where to write it.
 *   0; -EAGAIN when the ring is full (retry later); -EMSGSIZE when len can
 *   never fit; -EPROTO when the consumer's tail is impossible (corruption).
 * vmshm_prod_reserve_at: the same, with the payload at `page_off` modulo
 *   VMSHM_PAGE when it is large enough to matter and small enough to leave
 *   room (VMSHM_NO_MATCH: anywhere).
 * vmshm_prod_commit: publishes the reserved record, `len` <= reserved.
 * vmshm_cons_peek: 1 with the next record in m; 0 when none is ready;
 *   -EPROTO on a record that breaks the format (message in err).  The
 *   payload stays in place (and hostile) until vmshm_cons_pop.
 * vmshm_cons_publish: makes consumed space visible to the producer.
 */

#define VMSHM_ALIGN_UP(x, a) (((x) + (a) - 1) & ~((uint64_t)(a) - 1))

static inline uint64_t vmshm_stamp(uint64_t key, uint64_t pos, uint32_t shift)
{
	/* splitmix64's finalizer over key + lap; never 0, so zeroed memory
	 * (a fresh region) is never a record. */
	uint64_t z = key + (pos >> shift) * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) | 1;
}

/* Bytes a record with the 16-byte header and n bytes after it takes: 32
 * when it fits, else whole lines, so that a run of larger records needs no
 * pad between them. */
static inline uint64_t vmshm_long_need(uint64_t n)
{
	n += VMSHM_REC_HDR;
	return n <= VMSHM_REC_ALIGN ? VMSHM_REC_ALIGN : VMSHM_ALIGN_UP(n, VMSHM_LINE);
}

/* Bytes the record for a payload of len takes: short ones 32. */
static inline uint64_t vmshm_rec_need(uint64_t len)
{
	return len <= VMSHM_SHORT_MAX ? VMSHM_REC_ALIGN : vmshm_long_need(len);
}

static inline struct vmshm_rec *vmshm_rec_at(uint8_t *data, uint64_t pos, uint32_t size)
{
	return (struct vmshm_rec *)(data + (pos & (size - 1)));
}

/* Room between head and the consumer, re-reading its tail only when the
 * cached one says there is not enough. */
static inline int vmshm_have_room(struct vmshm_prod *p, uint64_t want)
{
	if (p->head + want - p->tail_seen <= p->size)
		return 0;
	uint64_t t = __atomic_load_n(p->tail, __ATOMIC_ACQUIRE);
	if (t > p->head || p->head - t > p->size || t < p->tail_seen)
		return -EPROTO;
	p->tail_seen = t;
	return p->head + want - t <= p->size ? 0 : -EAGAIN;
}

/* Skew that puts the payload of a record starting at ring offset `at` on
 * page offset `page_off`; 0 for small payloads, and for those that could
 * no longer fit an empty ring with a skew. */
static inline uint32_t vmshm_skew(const struct vmshm_prod *p, uint64_t at, uint32_t len,
				  uint32_t page_off)
{
	if (page_off == VMSHM_NO_MATCH || len < VMSHM_MATCH_MIN ||
	    (uint64_t)len + VMSHM_PAGE - 1 > vmshm_ring_max_payload(p->size))
		return 0;
	uintptr_t payload = (uintptr_t)p->data + at + VMSHM_REC_HDR;

	return (uint32_t)((page_off - payload) & (VMSHM_PAGE - 1));
}

static inline int vmshm_prod_reserve_at(struct vmshm_prod *p, uint32_t len, uint32_t page_off,
					void **payload)
{
	if (len > vmshm_ring_max_payload(p->size))
		return -EMSGSIZE;
	uint64_t pos = p->head & (p->size - 1);
	/* Payloads past a cache line start on one (copies run at full speed). */
	uint64_t skip = vmshm_rec_need(len) > VMSHM_REC_ALIGN && (pos & (VMSHM_LINE - 1)) ?
			VMSHM_LINE - (pos & (VMSHM_LINE - 1)) : 0;
	uint32_t skew = vmshm_skew(p, pos + skip, len, page_off);
	uint64_t need = vmshm_rec_need((uint64_t)len + skew);
	uint64_t pad = pos + skip + need > p->size ? p->size - pos : 0;
	if (p->hot) {
		if (p->hot_lap != (p->head >> p->shift)) {
			p->hot_lap = p->head >> p->shift;
			p->hot_at = p->hot;
			p->laps++;
		}
		if (vmshm_rec_need(len) > p->hot / 8) {
			/* A large record in this lap: no rewind until the next
			 * one.  Rewriting lines the consumer has just read costs
			 * large records more than the window saves small ones.
			 * Large by its bytes, not its skew, as before skews. */
			p->hot_at = UINT64_MAX;
		} else if (!pad && pos >= p->hot_at) {
			/* Past the hot window: if the consumer keeps up, start
			 * over at the beginning (a pad to the end).  Its tail is a
			 * line it writes: read it every VMSHM_HOT_RETRY bytes, not
			 * every record. */
			uint64_t t = __atomic_load_n(p->tail, __ATOMIC_ACQUIRE);

			p->hot_at = pos + VMSHM_HOT_RETRY;
			if (t <= p->head && p->head - t <= VMSHM_HOT_LAG && t >= p->tail_seen) {
				p->tail_seen = t;
				pad = p->size - pos;
				p->rewinds++;
			}
		}
	}
	if (!pad) {
		pad = skip;
	} else {
		/* Past the ring's end: the record starts the next lap. */
		skew = vmshm_skew(p, 0, len, page_off);
		need = vmshm_rec_need((uint64_t)len + skew);
	}
	int rc = vmshm_have_room(p, pad + need);
	if (rc)
		return rc;
	if (pad) {
		struct vmshm_rec *r = vmshm_rec_at(p->data, p->head, p->size);
		r->len = (uint32_t)(pad - VMSHM_REC_HDR);
		r->tag = 0;
		r->type = VMSHM_REC_PAD;
		r->skew = 0;
		__atomic_store_n(&r->stamp, vmshm_stamp(p->key, p->head, p->shift),
				 __ATOMIC_RELEASE);
		p->head += pad;
	}
	p->res = p->head;
	p->res_len = len;
	p->res_skew = skew;
	/* (a short payload is never skewed: VMSHM_MATCH_MIN is far larger) */
	*payload = (uint8_t *)vmshm_rec_at(p->data, p->head, p->size) +
		   (len <= VMSHM_SHORT_MAX ? VMSHM_SHORT_HDR : VMSHM_REC_HDR + skew);
	return 0;
}

static inline int vmshm_prod_reserve(struct vmshm_prod *p, uint32_t len, void **payload)
{
	return vmshm_prod_reserve_at(p, len, VMSHM_NO_MATCH, payload);
}

static inline void vmshm_prod_commit(struct vmshm_prod *p, uint32_t len, uint8_t tag)
{
	struct vmshm_rec *r = vmshm_rec_at(p->data, p->res, p->size);
	if (len > p->res_len)
		len = p->res_len;
	if (p->res_len <= VMSHM_SHORT_MAX) {
		uint8_t *b = (uint8_t *)r;

		b[VMSHM_REC_ALIGN - 2] = (uint8_t)len;
		b[VMSHM_REC_ALIGN - 1] = tag;
		__atomic_store_n(&r->stamp, vmshm_stamp(p->key, p->res, p->shift) ^ VMSHM_SHORT_BIT,
				 __ATOMIC_RELEASE);
		p->head = p->res + VMSHM_REC_ALIGN;
		return;
	}
	r->len = len;
	r->tag = tag;
	r->type = VMSHM_REC_DATA;
	r->skew = (uint16_t)p->res_skew;
	__atomic_store_n(&r->stamp, vmshm_stamp(p->key, p->res, p->shift), __ATOMIC_RELEASE);
	p->head = p->res + vmshm_long_need((uint64_t)len + p->res_skew);
}

static inline int vmshm_cons_peek(struct vmshm_cons *c, struct vmshm_msg *m,
				  char *err, size_t errlen)
{
	/* At most a pad and then a record: a hostile producer cannot keep us
	 * here by writing pads. */
	for (int i = 0; i < 2; i++) {
		uint64_t pos = c->tail & (c->size - 1);
		const struct vmshm_rec *r = (const void *)(c->data + pos);
		uint64_t s = __atomic_load_n(&r->stamp, __ATOMIC_ACQUIRE);
		uint64_t want = vmshm_stamp(c->key, c->tail, c->shift);

		if (s == (want ^ VMSHM_SHORT_BIT)) {
			const volatile uint8_t *b = (const volatile uint8_t *)r;
			uint8_t len = b[VMSHM_REC_ALIGN - 2];

			/* (pos is a multiple of 32, so the record is inside the ring) */
			if (len > VMSHM_SHORT_MAX) {
				snprintf(err, errlen, "short record at offset %llu claims %u bytes, "
					 "more than the %u it can hold", (unsigned long long)pos,
					 len, VMSHM_SHORT_MAX);
				return -EPROTO;
			}
			m->payload = (const uint8_t *)r + VMSHM_SHORT_HDR;
			m->len = len;
			m->tag = b[VMSHM_REC_ALIGN - 1];
			c->last_need = VMSHM_REC_ALIGN;
			return 1;
		}
		if (s != want)
			return 0;
		/* Read each field once; the producer may change them under us. */
		uint32_t len = *(const volatile uint32_t *)&r->len;
		uint8_t type = *(const volatile uint8_t *)&r->type;
		uint8_t tag = *(const volatile uint8_t *)&r->tag;
		uint16_t skew = *(const volatile uint16_t *)&r->skew;

		if (type == VMSHM_REC_PAD) {
			/* Either to the ring's end, or 32 bytes to the next line. */
			bool to_end = pos != 0 && pos + VMSHM_REC_HDR + len == c->size;
			bool to_line = (pos & (VMSHM_LINE - 1)) == VMSHM_REC_ALIGN &&
				       VMSHM_REC_HDR + len == VMSHM_REC_ALIGN;

			if (!to_end && !to_line) {
				snprintf(err, errlen, "pad record at offset %llu claims %u bytes, "
					 "neither to the ring's end (%llu bytes later) nor to the "
					 "next %u-byte line", (unsigned long long)pos, len,
					 (unsigned long long)(c->size - pos), VMSHM_LINE);
				return -EPROTO;
			}
			c->tail += VMSHM_REC_HDR + len;
			continue;
		}
		if (type != VMSHM_REC_DATA) {
			snprintf(err, errlen, "record at offset %llu has unknown type 0x%02x",
				 (unsigned long long)pos, type);
			return -EPROTO;
		}
		if (skew >= VMSHM_PAGE) {
			snprintf(err, errlen, "record at offset %llu puts its payload %u bytes "
				 "after its header, more than a page",
				 (unsigned long long)pos, skew);
			return -EPROTO;
		}
		if ((uint64_t)len + skew > c->size - pos - VMSHM_REC_HDR) {
			snprintf(err, errlen, "record at offset %llu claims %u bytes after a skew "
				 "of %u, past the end of the %u-byte ring",
				 (unsigned long long)pos, len, skew, c->size);
			return -EPROTO;
		}
		m->payload = (const uint8_t *)(r + 1) + skew;
		m->len = len;
		m->tag = tag;
		/* The lines after the header's, asked for now: ob1 matches the
		 * message before it copies them, and their fetch overlaps that
		 * instead of following it. */
		if (len <= VMSHM_PREFETCH_MAX)
			for (uint32_t o = VMSHM_LINE; o < VMSHM_REC_HDR + skew + len; o += VMSHM_LINE)
				__builtin_prefetch((const uint8_t *)r + o);
		c->last_need = (uint32_t)vmshm_long_need((uint64_t)len + skew);
		return 1;
	}
	return 0;
}

/* A record's header, then its payload, to dst, the bytes past dst's cache
 * line first.  The consumer spins on the record's first line (its stamp):
 * bytes stored there before the rest were written let it take the line
 * back in between, and the stamp then waits for the line a second time. */
static inline void vmshm_copy_lines_last_first(uint8_t *dst, const void *header, size_t hs,
					       const void *src, size_t n)
{
	size_t first = VMSHM_LINE - ((uintptr_t)dst & (VMSHM_LINE - 1));

	if (hs + n > first) {
		if (first <= hs) {
			memcpy(dst + first, (const uint8_t *)header + first, hs - first);
			memcpy(dst + hs, src, n);
			memcpy(dst, header, first);
			return;
		}
		memcpy(dst + first, (const uint8_t *)src + (first - hs), hs + n - first);
		n = first - hs;
	}
	memcpy(dst, header, hs);
	memcpy(dst + hs, src, n);
}

static inline void vmshm_cons_pop(struct vmshm_cons *c)
{
	c->tail += c->last_need;
	c->last_need = 0;
}

static inline void vmshm_cons_publish(struct vmshm_cons *c)
{
	if (c->published != c->tail) {
		__atomic_store_n(c->tail_pub, c->tail, __ATOMIC_RELEASE);
		c->published = c->tail;
	}
}

#endif
