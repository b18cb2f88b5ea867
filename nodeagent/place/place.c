/*
 * Placement: which host cores and NUMA nodes each guest of a job gets.
 *
 * Rules (seed 001: a guest whose vCPUs float or share cores fights the
 * host scheduler; seed 002: remote memory costs bandwidth):
 *   - one vCPU per physical core, pinned to the core's first PU; the core's
 *     SMT siblings stay idle and are given to nobody else, so a vCPU never
 *     shares an execution unit with another guest;
 *   - a guest's cores and memory sit on one NUMA node when they fit there
 *     (best fit: the node with the fewest free cores that still holds it,
 *     so large holes stay for large guests); otherwise the guest is split
 *     over the fewest nodes, within one package when possible;
 *   - cores pinned by other live jobs (busy cpus) are never used, and no two
 *     guests share a core, unless the caller asks for oversubscription; then
 *     exclusive placement is still tried first, and only when it fails are
 *     vCPUs spread over the least loaded cores, with shared set.
 */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "nodeagent/place/place.h"
#include "topo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pstate {
	int *load;          /* per core: vCPUs pinned to it (busy counts 1) */
	uint64_t *memfree;  /* per node */
};

static bool core_busy(const struct na_topo *t, int c, const struct na_place_req *r)
{
	const struct na_core *co = &t->cores[c];

	for (int i = 0; i < r->nbusy; i++)
		for (int p = 0; p < co->npu; p++)
			if (t->pus[co->first_pu + p] == r->busy_cpus[i])
				return true;
	return false;
}

static void pstate_reset(const struct na_topo *t, const struct na_place_req *r,
			 struct pstate *s)
{
	for (int c = 0; c < t->ncores; c++)
		s->load[c] = core_busy(t, c, r) ? 1 : 0;
	for (int n = 0; n < t->nnodes; n++)
		s->memfree[n] = t->nodes[n].mem;
}

static int node_free_cores(const struct na_topo *t, const struct pstate *s, int n)
{
	int k = 0;

	for (int c = t->nodes[n].first_core; c < t->nodes[n].first_core + t->nodes[n].ncores; c++)
		k += s->load[c] == 0;
	return k;
}

static bool mem_fits(const struct na_topo *t, const struct pstate *s, int n, uint64_t mem)
{
	return !t->nodes[n].mem || s->memfree[n] >= mem;
}

static void mem_take(const struct na_topo *t, struct pstate *s, int n, uint64_t mem)
{
	if (t->nodes[n].mem)
		s->memfree[n] = s->memfree[n] > mem ? s->memfree[n] - mem : 0;
}

static void add_mem_node(struct na_placement *p, int os_index)
{
	for (int i = 0; i < p->nmems; i++)
		if (p->mems[i] == os_index)
			return;
	if (p->nmems < VHPC_MAX_NODES)
		p->mems[p->nmems++] = os_index;
}

static void pin(const struct na_topo *t, struct pstate *s, struct na_placement *p, int c)
{
	s->load[c]++;
	p->cpus[p->ncpus++] = t->pus[t->cores[c].first_pu];
	add_mem_node(p, t->nodes[t->cores[c].node].os_index);
}

static void take_free_in_node(const struct na_topo *t, struct pstate *s,
			      struct na_placement *p, int n, int k)
{
	const struct na_node *nd = &t->nodes[n];

	for (int c = nd->first_core; c < nd->first_core + nd->ncores && k > 0; c++)
		if (s->load[c] == 0) {
			pin(t, s, p, c);
			k--;
		}
}

/* Memory of a split guest goes to the nodes of its cores in proportion to
 * the cores it has there; what they cannot hold spills to other nodes, the
 * same package first (and memory-only nodes are candidates like any other).
 * False when the machine cannot hold it. */
static bool split_mem(const struct na_topo *t, struct pstate *s,
		      struct na_placement *p, uint64_t mem)
{
	uint64_t left = mem;
	int pkg = p->ncpus ? -2 : -1;

	for (int pass = 0; pass < 2 && left; pass++)
		for (int m = 0; m < p->nmems && left; m++) {
			int n = -1, cnt = 0;
			uint64_t want, got;

			for (int k = 0; k < t->nnodes; k++)
				if (t->nodes[k].os_index == p->mems[m])
					n = k;
			if (n < 0)
				continue;
			for (int i = 0; i < p->ncpus; i++)
				for (int c = t->nodes[n].first_core; c < t->nodes[n].first_core + t->nodes[n].ncores; c++)
					cnt += t->pus[t->cores[c].first_pu] == p->cpus[i];
			if (pkg == -2)
				pkg = t->nodes[n].pkg;
			want = pass ? left : mem / (uint64_t)p->ncpus * (uint64_t)cnt;
			want = want < left ? want : left;
			if (!t->nodes[n].mem) {
				left -= want;
				continue;
			}
			got = want < s->memfree[n] ? want : s->memfree[n];
			s->memfree[n] -= got;
			left -= got;
		}
	for (int pass = 0; pass < 2 && left; pass++)
		for (int n = 0; n < t->nnodes && left; n++) {
			uint64_t got;
			bool mine = false;

			for (int m = 0; m < p->nmems; m++)
				mine |= p->mems[m] == t->nodes[n].os_index;
			if (mine || (pass == 0) != (t->nodes[n].pkg == pkg) || !t->nodes[n].mem ||
			    !s->memfree[n] || p->nmems >= VHPC_MAX_NODES)
				continue;
			got = left < s->memfree[n] ? left : s->memfree[n];
			s->memfree[n] -= got;
			left -= got;
			add_mem_node(p, t->nodes[n].os_index);
		}
	return left == 0;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Nodes with the most free cores first (ties: lower index). */
static void sort_by_free(const struct na_topo *t, const struct pstate *s, int *order, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0; j--) {
			int fa = node_free_cores(t, s, order[j - 1]), fb = node_free_cores(t, s, order[j]);

			if (fa > fb || (fa == fb && order[j - 1] < order[j]))
				break;
			int tmp = order[j];
			order[j] = order[j - 1];
			order[j - 1] = tmp;
		}
}

/* Exclusive placement of one guest; false when it does not fit.
 *  1. a node with enough free cores and memory (best fit);
 *  2. else a node with enough free cores (best fit), memory spilling over;
 *  3. else cores over several nodes: the package whose free cores hold the
 *     guest most tightly (else the whole machine), nodes with the most free
 *     cores first, memory in proportion. */
static bool place_exclusive(const struct na_topo *t, struct pstate *s, int vcpus,
			    uint64_t mem, struct na_placement *p)
{
	int best = -1, best_free = 0, cores_only = -1, co_free = 0;
	int npkg = 0, best_pkg = -2, best_pkg_free = 0, order[VHPC_MAX_NODES], norder = 0, left = vcpus;
	int *load = malloc(sizeof(int) * t->ncores);
	uint64_t *mf = malloc(sizeof(uint64_t) * t->nnodes);
	bool ok = false;

	if (!load || !mf)
		goto out;
	for (int n = 0; n < t->nnodes; n++) {
		int f = node_free_cores(t, s, n);

		if (f >= vcpus && mem_fits(t, s, n, mem) && (best < 0 || f < best_free)) {
			best = n;
			best_free = f;
		}
		if (f >= vcpus && (cores_only < 0 || f < co_free)) {
			cores_only = n;
			co_free = f;
		}
		if (t->nodes[n].pkg + 1 > npkg)
			npkg = t->nodes[n].pkg + 1;
	}
	if (best >= 0) {
		take_free_in_node(t, s, p, best, vcpus);
		mem_take(t, s, best, mem);
		ok = true;
		goto out;
	}
	memcpy(load, s->load, sizeof(int) * t->ncores);
	memcpy(mf, s->memfree, sizeof(uint64_t) * t->nnodes);
	if (cores_only >= 0) {
		take_free_in_node(t, s, p, cores_only, vcpus);
		left = 0;
	} else {
		for (int pk = -1; pk < npkg; pk++) {
			int f = 0;

			for (int n = 0; n < t->nnodes; n++)
				if (t->nodes[n].pkg == pk)
					f += node_free_cores(t, s, n);
			if (f >= vcpus && (best_pkg == -2 || f < best_pkg_free)) {
				best_pkg = pk;
				best_pkg_free = f;
			}
		}
		for (int n = 0; n < t->nnodes && norder < VHPC_MAX_NODES; n++)
			if (best_pkg == -2 || t->nodes[n].pkg == best_pkg)
				order[norder++] = n;
		sort_by_free(t, s, order, norder);
		for (int i = 0; i < norder && left > 0; i++) {
			int f = node_free_cores(t, s, order[i]), k = f < left ? f : left;

			take_free_in_node(t, s, p, order[i], k);
			left -= k;
		}
	}
	ok = left == 0 && split_mem(t, s, p, mem);
	if (!ok) {
		memcpy(s->load, load, sizeof(int) * t->ncores);
		memcpy(s->memfree, mf, sizeof(uint64_t) * t->nnodes);
		p->ncpus = p->nmems = 0;
	}
	p->split = ok;
out:
	free(load);
	free(mf);
	return ok;
}

/* Oversubscribed placement of one guest: on the node whose least loaded
 * cores are least loaded (memory permitting), else over the whole machine;
 * a guest with more vCPUs than cores wraps around. */
static bool place_shared(const struct na_topo *t, struct pstate *s, int vcpus,
			 uint64_t mem, struct na_placement *p)
{
	int best = -1;
	long best_load = 0;
	int *pick = malloc(sizeof(int) * (size_t)vcpus);
	bool *used = calloc(t->ncores, sizeof(bool));

	if (!pick || !used) {
		free(pick);
		free(used);
		return false;
	}
	for (int n = 0; n < t->nnodes; n++) {
		const struct na_node *nd = &t->nodes[n];
		long sum = 0;

		if (nd->ncores < vcpus || !mem_fits(t, s, n, mem))
			continue;
		memset(used, 0, sizeof(bool) * t->ncores);
		for (int k = 0; k < vcpus; k++) {
			int m = -1;

			for (int c = nd->first_core; c < nd->first_core + nd->ncores; c++)
				if (!used[c] && (m < 0 || s->load[c] < s->load[m]))
					m = c;
			used[m] = true;
			sum += s->load[m];
		}
		if (best < 0 || sum < best_load) {
			best = n;
			best_load = sum;
		}
	}
	memset(used, 0, sizeof(bool) * t->ncores);
	for (int k = 0; k < vcpus; k++) {
		int m = -1, lo = best >= 0 ? t->nodes[best].first_core : 0;
		int hi = best >= 0 ? lo + t->nodes[best].ncores : t->ncores;

		for (int c = lo; c < hi; c++)
			if (!used[c] && (m < 0 || s->load[c] < s->load[m]))
				m = c;
		if (m < 0) {    /* more vCPUs than cores: wrap */
			memset(used, 0, sizeof(bool) * t->ncores);
			k--;
			continue;
		}
		used[m] = true;
		pick[k] = m;
	}
	for (int k = 0; k < vcpus; k++)
		pin(t, s, p, pick[k]);
	free(pick);
	free(used);
	if (best >= 0) {
		mem_take(t, s, best, mem);
		return true;
	}
	p->split = p->nmems > 1;
	return split_mem(t, s, p, mem);
}

/* Appends to buf, never past its end (long lists are cut, not overrun). */
static void append(char *buf, size_t len, size_t *off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= len - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off = *off + (size_t)n < len ? *off + (size_t)n : len - 1;
}

/* "2 of 2 cores free [node 0: 2 of 2 cores free (cpus 0-1), 4 GiB of
 * 4.5 GiB memory free; ...]" */
static void describe_free(const struct na_topo *t, const struct pstate *s,
			  char *buf, size_t len)
{
	size_t off = 0;
	int total = 0;

	buf[0] = 0;
	for (int n = 0; n < t->nnodes; n++)
		total += node_free_cores(t, s, n);
	append(buf, len, &off, "%d of %d cores free", total, t->ncores);
	for (int n = 0; n < t->nnodes; n++) {
		const struct na_node *nd = &t->nodes[n];
		int ids[VHPC_MAX_VCPUS], nfree = node_free_cores(t, s, n);
		size_t k = 0;
		char cl[256], sz[32], sz2[32];

		for (int c = nd->first_core; c < nd->first_core + nd->ncores; c++)
			if (s->load[c] == 0 && k < VHPC_MAX_VCPUS)
				ids[k++] = t->pus[t->cores[c].first_pu];
		qsort(ids, k, sizeof(int), cmp_int);
		cpulist_format(ids, k, cl, sizeof(cl));
		append(buf, len, &off, "%snode %d: %d of %d cores free%s%s%s, ",
		       n ? "; " : " [", nd->os_index, nfree, nd->ncores,
		       k ? " (cpus " : "", k ? cl : "", k ? ")" : "");
		if (nd->mem)
			append(buf, len, &off, "%s of %s memory free", fmt_size(s->memfree[n], sz, sizeof(sz)),
			       fmt_size(nd->mem, sz2, sizeof(sz2)));
		else
			append(buf, len, &off, "memory unknown");
	}
	append(buf, len, &off, "]");
}

static void mark_shared(const struct na_topo *t, const struct na_place_req *r,
			struct na_placement *out)
{
	int *cnt = calloc(t->ncores, sizeof(int));

	if (!cnt)
		return;
	for (int c = 0; c < t->ncores; c++)
		cnt[c] = core_busy(t, c, r) ? 1 : 0;
	for (int g = 0; g < r->nguests; g++)
		for (int i = 0; i < out[g].ncpus; i++)
			for (int c = 0; c < t->ncores; c++)
				if (t->pus[t->cores[c].first_pu] == out[g].cpus[i])
					cnt[c]++;
	for (int g = 0; g < r->nguests; g++) {
		out[g].shared = false;
		for (int i = 0; i < out[g].ncpus; i++)
			for (int c = 0; c < t->ncores; c++)
				if (t->pus[t->cores[c].first_pu] == out[g].cpus[i] && cnt[c] > 1)
					out[g].shared = true;
	}
	free(cnt);
}

int na_place(const struct na_topo *t, const struct na_place_req *r,
	     struct na_placement *out, struct verr *err)
{
	struct pstate s;
	char asked[160], sz[32], freebuf[700];
	int g, rc = -1;

	if (r->nguests < 1 || r->nguests > VHPC_MAX_GUESTS)
		return verr_set(err, "placement: %d guests asked; 1..%d allowed", r->nguests, VHPC_MAX_GUESTS);
	if (r->vcpus < 1 || r->vcpus > VHPC_MAX_VCPUS)
		return verr_set(err, "placement: %d vCPUs per guest asked; 1..%d allowed", r->vcpus, VHPC_MAX_VCPUS);
	if (r->nbusy < 0 || (r->nbusy && !r->busy_cpus))
		return verr_set(err, "placement: bad busy cpu list");
	s.load = calloc(t->ncores, sizeof(int));
	s.memfree = calloc(t->nnodes, sizeof(uint64_t));
	if (!s.load || !s.memfree) {
		verr_set(err, "out of memory");
		goto out;
	}
	snprintf(asked, sizeof(asked), "%d guest%s x %d vCPU%s, %s memory each",
		 r->nguests, r->nguests > 1 ? "s" : "", r->vcpus, r->vcpus > 1 ? "s" : "",
		 r->mem ? fmt_size(r->mem, sz, sizeof(sz)) : "any");
	memset(out, 0, sizeof(*out) * r->nguests);

	pstate_reset(t, r, &s);
	describe_free(t, &s, freebuf, sizeof(freebuf));
	for (g = 0; g < r->nguests; g++)
		if (!place_exclusive(t, &s, r->vcpus, r->mem, &out[g]))
			break;
	if (g == r->nguests) {
		rc = 0;
		goto out;
	}
	if (!r->oversubscribe) {
		verr_set(err, "placement: cannot give guest %d of %d its own %d core%s (one vCPU per core)%s%s: "
			 "asked %s; this host has %s; oversubscribe lets guests share cores",
			 g + 1, r->nguests, r->vcpus, r->vcpus > 1 ? "s" : "",
			 r->mem ? " and " : "", r->mem ? fmt_size(r->mem, sz, sizeof(sz)) : "",
			 asked, freebuf);
		goto out;
	}

	memset(out, 0, sizeof(*out) * r->nguests);
	pstate_reset(t, r, &s);
	for (g = 0; g < r->nguests; g++)
		if (!place_shared(t, &s, r->vcpus, r->mem, &out[g])) {
			verr_set(err, "placement: not enough memory for guest %d of %d even when sharing cores: asked %s; this host has %s",
				 g + 1, r->nguests, asked, freebuf);
			goto out;
		}
	mark_shared(t, r, out);
	log_warn("placement: %s does not fit on free cores (%s); oversubscribed: guests share cores, spread evenly",
		 asked, freebuf);
	rc = 0;
out:
	free(s.load);
	free(s.memfree);
	return rc;
}
