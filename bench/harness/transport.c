/* What carried the guests' pair of ranks: the job asks for vmshm, but
 * only its counters say that bytes went through it (ob1 falls back to tcp
 * quietly), so a table that names the transport reads them.  The lines come
 * from the guests: read strictly, never trusted beyond a label. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

/* A guest's name as vhpc names them: g and up to 4 digits. */
static bool guest_name(const char *s, size_t n, char *out, size_t len)
{
	if (n < 2 || n > 5 || n >= len || s[0] != 'g')
		return false;
	for (size_t i = 1; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	memcpy(out, s, n);
	out[n] = 0;
	return true;
}

/* A decimal number of at most 19 digits at *p, which moves past it. */
static bool number(const char **p, const char *end, unsigned long long *v)
{
	const char *s = *p;

	*v = 0;
	while (s < end && s - *p < 19 && *s >= '0' && *s <= '9')
		*v = *v * 10 + (unsigned long long)(*s++ - '0');
	if (s == *p || (s < end && *s >= '0' && *s <= '9'))
		return false;
	*p = s;
	return true;
}

static bool lit(const char **p, const char *end, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(end - *p) < n || memcmp(*p, w, n))
		return false;
	*p += n;
	return true;
}

/* "[vmshm GUEST:PID rank R] vmshm-stats: peer P slot S tx_frags F tx_bytes B"
 * and the rest of the line: R, P, GUEST and B. */
static bool stats_line(const char *p, const char *end, unsigned long long *rank,
		       unsigned long long *peer, char *guest, size_t glen, unsigned long long *bytes)
{
	const char *colon = memchr(p, ':', (size_t)(end - p));
	unsigned long long pid, slot, frags;

	if (!lit(&p, end, "[vmshm ") || !colon || !guest_name(p, (size_t)(colon - p), guest, glen))
		return false;
	p = colon + 1;
	return number(&p, end, &pid) && lit(&p, end, " rank ") && number(&p, end, rank) &&
	       lit(&p, end, "] vmshm-stats: peer ") && number(&p, end, peer) && lit(&p, end, " slot ") &&
	       number(&p, end, &slot) && lit(&p, end, " tx_frags ") && number(&p, end, &frags) &&
	       lit(&p, end, " tx_bytes ") && number(&p, end, bytes) && (p == end || *p == ' ');
}

void bh_vmshm_sent(const char *text, size_t len, struct bh_vmshm_sent *s)
{
	const char *p = text, *end = text + len;

	memset(s, 0, sizeof(*s));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
		unsigned long long rank, peer, bytes;
		char guest[16];

		if (stats_line(p, le, &rank, &peer, guest, sizeof(guest), &bytes)) {
			/* One line per rank and peer: a second one is not ours to add up. */
			if (rank == 0 && peer == 1 && !s->seen) {
				s->seen = true;
				s->bytes = bytes;
				snprintf(s->guest0, sizeof(s->guest0), "%s", guest);
			} else if (rank == 1 && peer == 0 && !s->guest1[0])
				snprintf(s->guest1, sizeof(s->guest1), "%s", guest);
		}
		p = le + 1;
	}
}

const char *bh_transport_str(const struct bh_ctx *c, char *buf, size_t len)
{
	size_t used = 0, runs = 0;
	unsigned long long lo = 0, hi = 0;
	const char *g0 = "", *g1 = "";

	if (c->o->fabric)
		snprintf(buf, len, "%s (--fabric %s; vmshm left out)", bh_fabric_rdma(c) ? "the RDMA fabric (ofi BTL)" : "tcp",
			 c->o->fabric);
	else if (c->o->no_vmshm)
		snprintf(buf, len, "tcp over the job network (--no-vmshm)");
	else if (!c->vmshm)
		snprintf(buf, len, "vmshm asked for (not measured yet)");
	else {
		for (size_t r = 0; r < (size_t)c->reps; r++) {
			const struct bh_vmshm_sent *s = &c->vmshm[r];

			if (!s->seen && !s->guest1[0] && !s->bytes)
				continue;
			runs++;
			if (!s->seen || s->bytes == 0)
				continue;
			if (!used++) {
				lo = hi = s->bytes;
				g0 = s->guest0;
				g1 = s->guest1;
			}
			lo = s->bytes < lo ? s->bytes : lo;
			hi = s->bytes > hi ? s->bytes : hi;
		}
		if (used == 0)
			snprintf(buf, len, "not vmshm: no guest run showed bytes through it (its counters%s), so tcp",
				 runs ? " were zero" : " were not printed");
		else {
			char amount[64];

			if (hi - lo < 50000)
				snprintf(amount, sizeof(amount), "%.1f MB", hi / 1e6);
			else
				snprintf(amount, sizeof(amount), "%.1f-%.1f MB", lo / 1e6, hi / 1e6);
			snprintf(buf, len, "vmshm, shared memory between guests%s (its counters: rank 0%s%s sent rank 1%s%s "
				 "%s through it in %zu of %d guest runs)",
				 c->o->no_single_copy ? ", without the single copy (--no-single-copy)" : "",
				 g0[0] ? " in " : "", g0, g1[0] ? " in " : "", g1, amount, used, c->reps);
		}
	}
	return buf;
}
