#include "sched.h"

#include <stdlib.h>
#include <string.h>

static int free_cores(const struct sched_node *n, int k)
{
	return n->cores[k] - n->used_cores[k];
}

/* Memory 0 means the node did not say: only cores count there. */
static bool mem_fits(const struct sched_node *n, int k, uint64_t want)
{
	return n->mem[k] == 0 || n->used_mem[k] + want <= n->mem[k];
}

static struct sched_dev *dev_of(struct sched_node *n, const char *cls)
{
	for (int i = 0; i < n->ndev; i++)
		if (!strcmp(n->dev[i].cls, cls))
			return &n->dev[i];
	return NULL;
}

/* The node has the fabric if the guest needs it, and the functions the
 * guest asks for are free there. */
static bool extras_fit(struct sched_node *n, const struct sched_req *r)
{
	if (r->rdma && !n->fabric)
		return false;
	for (int i = 0; i < r->ndev; i++) {
		struct sched_dev *d = dev_of(n, r->dev[i].cls);

		if (!d || d->total - d->used < r->dev[i].n)
			return false;
	}
	return true;
}

void sched_take_extras(struct sched_node *n, const struct sched_req *r, int sign)
{
	for (int i = 0; i < r->ndev; i++) {
		struct sched_dev *d = dev_of(n, r->dev[i].cls);

		if (d)
			d->used += sign * r->dev[i].n;
	}
}

/* One guest on one node: best fit on a single NUMA node (least free cores
 * that still fit, keeping big holes for big guests), else spread across the
 * node's NUMA nodes, most free first. */
static bool place_cores(struct sched_node *n, int vcpus, uint64_t mem, struct sched_guest *g)
{
	int best = -1, total = 0, left = vcpus;
	uint64_t mleft = mem;
	int order[SCHED_MAX_NUMA];

	for (int k = 0; k < n->nnuma; k++) {
		total += free_cores(n, k);
		if (free_cores(n, k) >= vcpus && mem_fits(n, k, mem) &&
		    (best < 0 || free_cores(n, k) < free_cores(n, best)))
			best = k;
	}
	if (best >= 0) {
		g->ntakes = 1;
		g->take[0] = (struct sched_take){ best, vcpus, mem };
		n->used_cores[best] += vcpus;
		n->used_mem[best] += mem;
		return true;
	}
	if (total < vcpus)
		return false;
	for (int k = 0; k < n->nnuma; k++)
		order[k] = k;
	for (int a = 0; a < n->nnuma; a++)
		for (int b = a + 1; b < n->nnuma; b++)
			if (free_cores(n, order[b]) > free_cores(n, order[a])) {
				int t = order[a];

				order[a] = order[b];
				order[b] = t;
			}
	g->ntakes = 0;
	for (int i = 0; i < n->nnuma && left > 0; i++) {
		int k = order[i], c = free_cores(n, k) < left ? free_cores(n, k) : left;
		uint64_t m;

		if (c <= 0)
			continue;
		/* Memory follows the cores it serves. */
		m = c == left ? mleft : mem / (uint64_t)vcpus * (uint64_t)c;
		if (!mem_fits(n, k, m))
			goto undo;
		g->take[g->ntakes++] = (struct sched_take){ k, c, m };
		n->used_cores[k] += c;
		n->used_mem[k] += m;
		left -= c;
		mleft -= m;
	}
	if (left == 0)
		return true;
undo:
	for (int t = 0; t < g->ntakes; t++) {
		n->used_cores[g->take[t].numa] -= g->take[t].cores;
		n->used_mem[g->take[t].numa] -= g->take[t].mem;
	}
	g->ntakes = 0;
	return false;
}

static bool place_guest(struct sched_node *n, const struct sched_req *r, struct sched_guest *g)
{
	if (!extras_fit(n, r) || !place_cores(n, r->vcpus, r->mem, g))
		return false;
	sched_take_extras(n, r, +1);
	return true;
}

static int guests_fitting(const struct sched_node *n, const struct sched_req *r, int cap)
{
	struct sched_node copy = *n;
	struct sched_guest g;
	int cnt = 0;

	if (!n->up)
		return 0;
	while (cnt < cap && place_guest(&copy, r, &g))
		cnt++;
	return cnt;
}

struct fit_rank {
	int node, fits;
};

/* Fullest fits first; equal fits keep node order, so decisions do not
 * depend on the sort. */
static int by_fits(const void *a, const void *b)
{
	const struct fit_rank *x = a, *y = b;

	if (x->fits != y->fits)
		return y->fits - x->fits;
	return x->node - y->node;
}

int sched_fit(const struct sched_node *nodes, int nnodes, const struct sched_req *req,
	      struct sched_alloc *out)
{
	struct fit_rank *rank;
	struct sched_node *work;
	int placed = 0;

	if (req->nguests <= 0 || req->nguests > SCHED_MAX_GUESTS || req->vcpus <= 0 || nnodes <= 0)
		return -1;
	rank = calloc(nnodes, sizeof(*rank));
	work = malloc(nnodes * sizeof(*work));
	if (!rank || !work) {
		free(rank);
		free(work);
		return -1;
	}
	memcpy(work, nodes, nnodes * sizeof(*work));
	for (int i = 0; i < nnodes; i++)
		rank[i] = (struct fit_rank){ i, guests_fitting(&nodes[i], req, req->nguests) };
	/* Fullest fits first: the fewest nodes for identical guests.  qsort,
	 * because clusters have thousands of nodes. */
	qsort(rank, nnodes, sizeof(*rank), by_fits);
	for (int i = 0; i < nnodes && placed < req->nguests; i++) {
		int ni = rank[i].node;

		if (!rank[i].fits)
			break;
		while (placed < req->nguests &&
		       place_guest(&work[ni], req, &out->g[placed])) {
			out->g[placed].node = ni;
			placed++;
		}
	}
	free(rank);
	free(work);
	if (placed < req->nguests)
		return -1;
	out->nguests = req->nguests;
	return 0;
}

/* One part whole on node n: its guests there, in the job's guest order in
 * out.  False when n cannot take it. */
static bool put_part(struct sched_node *work, int n, const struct sched_req *req, const struct sched_part *p,
		     struct sched_guest *tmp, struct sched_alloc *out)
{
	struct sched_req r = *req;
	struct sched_alloc a = { p->nguests, tmp };

	r.nguests = p->nguests;
	if (!work[n].up || sched_fit(&work[n], 1, &r, &a) < 0)
		return false;
	/* a's guests name node 0 of the one-node array. */
	sched_apply(&work[n], &r, &a, +1);
	for (int i = 0; i < p->nguests; i++) {
		out->g[p->guests[i]] = tmp[i];
		out->g[p->guests[i]].node = n;
	}
	return true;
}

int sched_fit_parts(const struct sched_node *nodes, int nnodes, const struct sched_req *req,
		    const struct sched_parts *parts, struct sched_alloc *out)
{
	struct sched_node *work;
	struct sched_guest *tmp;
	bool *taken, *placed;
	int rc = -1, total = 0, left = parts ? parts->nparts : 0;

	if (!parts)
		return sched_fit(nodes, nnodes, req, out);
	if (req->nguests <= 0 || req->nguests > SCHED_MAX_GUESTS || nnodes <= 0)
		return -1;
	for (int k = 0; k < parts->nparts; k++) {
		const struct sched_part *p = &parts->part[k];

		if (p->nguests <= 0 || (total += p->nguests) > req->nguests)
			return -1;
		for (int i = 0; i < p->nguests; i++)
			if (p->guests[i] < 0 || p->guests[i] >= req->nguests)
				return -1;
	}
	if (total != req->nguests)
		return -1;
	work = malloc((size_t)nnodes * sizeof(*work));
	taken = calloc((size_t)nnodes, sizeof(*taken));
	placed = calloc((size_t)parts->nparts + 1, sizeof(*placed));
	tmp = calloc((size_t)req->nguests, sizeof(*tmp));
	if (!work || !taken || !placed || !tmp)
		goto out;
	memcpy(work, nodes, (size_t)nnodes * sizeof(*work));
	/* Every part that can go home does, before any takes another's home. */
	for (int k = 0; k < parts->nparts; k++) {
		int h = parts->part[k].home;

		if (h >= 0 && h < nnodes && !taken[h] && put_part(work, h, req, &parts->part[k], tmp, out)) {
			taken[h] = placed[k] = true;
			left--;
		}
	}
	for (int k = 0; k < parts->nparts && parts->anywhere; k++)
		for (int n = 0; n < nnodes && !placed[k]; n++)
			if (!taken[n] && put_part(work, n, req, &parts->part[k], tmp, out)) {
				taken[n] = placed[k] = true;
				left--;
			}
	if (left == 0) {
		out->nguests = req->nguests;
		rc = 0;
	}
out:
	free(work);
	free(taken);
	free(placed);
	free(tmp);
	return rc;
}

void sched_apply(struct sched_node *nodes, const struct sched_req *req,
		 const struct sched_alloc *a, int sign)
{
	for (int i = 0; i < a->nguests; i++) {
		struct sched_node *n = &nodes[a->g[i].node];

		sched_take_extras(n, req, sign);
		for (int t = 0; t < a->g[i].ntakes; t++) {
			n->used_cores[a->g[i].take[t].numa] += sign * a->g[i].take[t].cores;
			n->used_mem[a->g[i].take[t].numa] += (uint64_t)(int64_t)sign * a->g[i].take[t].mem;
		}
	}
}

bool sched_feasible(const struct sched_node *nodes, int nnodes, const struct sched_req *req)
{
	return sched_feasible_parts(nodes, nnodes, req, NULL);
}

bool sched_feasible_parts(const struct sched_node *nodes, int nnodes, const struct sched_req *req,
			  const struct sched_parts *parts)
{
	struct sched_node *empty = malloc((nnodes ? nnodes : 1) * sizeof(*empty));
	struct sched_alloc a = { 0 };
	bool ok;

	a.g = calloc(req->nguests > 0 ? req->nguests : 1, sizeof(*a.g));
	if (!empty || !a.g) {
		free(empty);
		free(a.g);
		return false;
	}
	memcpy(empty, nodes, nnodes * sizeof(*empty));
	for (int i = 0; i < nnodes; i++) {
		memset(empty[i].used_cores, 0, sizeof(empty[i].used_cores));
		memset(empty[i].used_mem, 0, sizeof(empty[i].used_mem));
		for (int d = 0; d < empty[i].ndev; d++)
			empty[i].dev[d].used = 0;
	}
	ok = sched_fit_parts(empty, nnodes, req, parts, &a) == 0;
	free(empty);
	free(a.g);
	return ok;
}

int sched_nodes_used(const struct sched_alloc *a)
{
	int n = 0;

	for (int i = 0; i < a->nguests; i++) {
		bool seen = false;

		for (int j = 0; j < i && !seen; j++)
			seen = a->g[j].node == a->g[i].node;
		n += !seen;
	}
	return n;
}

struct busy {
	const struct sched_req *req;
	const struct sched_alloc *alloc;
	int64_t end;
};

static int by_end(const void *a, const void *b)
{
	const struct busy *x = a, *y = b;

	return (x->end > y->end) - (x->end < y->end);
}

/* When could req start if nothing new started: releases jobs in order of
 * their end until it fits.  extra (may be NULL) is a job assumed to run
 * from now until its end as well. */
static int64_t earliest_start(const struct sched_node *nodes, int nnodes, struct busy *busy,
			      int nbusy, const struct busy *extra, const struct sched_pending *p,
			      int64_t now, struct sched_alloc *scratch)
{
	struct sched_node *work = malloc(nnodes * sizeof(*work));
	int64_t when = -1;

	if (!work)
		return -1;
	memcpy(work, nodes, nnodes * sizeof(*work));
	if (extra)
		sched_apply(work, extra->req, extra->alloc, +1);
	if (sched_fit_parts(work, nnodes, &p->req, p->parts, scratch) == 0) {
		when = now;
		goto out;
	}
	for (int i = 0; i < nbusy; i++) {
		sched_apply(work, busy[i].req, busy[i].alloc, -1);
		if (extra && extra->end <= busy[i].end && extra->end > 0) {
			sched_apply(work, extra->req, extra->alloc, -1);
			extra = NULL;
		}
		if (sched_fit_parts(work, nnodes, &p->req, p->parts, scratch) == 0) {
			when = busy[i].end;
			break;
		}
	}
	if (when < 0 && extra) {
		sched_apply(work, extra->req, extra->alloc, -1);
		if (sched_fit_parts(work, nnodes, &p->req, p->parts, scratch) == 0)
			when = extra->end;
	}
out:
	free(work);
	return when;
}

/* sched_fit on the nodes an allocation does not use. */
static int fit_avoiding(const struct sched_node *nodes, int nnodes, const struct sched_pending *p,
			struct sched_alloc *out, const struct sched_alloc *avoid)
{
	struct sched_node *work = malloc(nnodes * sizeof(*work));
	int r;

	if (!work)
		return -1;
	memcpy(work, nodes, nnodes * sizeof(*work));
	for (int i = 0; i < avoid->nguests; i++)
		work[avoid->g[i].node].up = false;
	r = sched_fit_parts(work, nnodes, &p->req, p->parts, out);
	free(work);
	return r;
}

int sched_pass(struct sched_node *nodes, int nnodes,
	       const struct sched_running *running, int nrunning,
	       struct sched_pending *queue, int nqueue, int64_t now,
	       int64_t *head_start)
{
	struct busy *busy = calloc(nrunning + nqueue + 1, sizeof(*busy));
	struct sched_alloc scratch = { 0 }, head_alloc = { 0 };
	int nbusy = 0, started = 0, head = -1;
	int64_t shadow = -1;

	*head_start = -1;
	scratch.g = calloc(SCHED_MAX_GUESTS, sizeof(*scratch.g));
	head_alloc.g = calloc(SCHED_MAX_GUESTS, sizeof(*head_alloc.g));
	if (!busy || !scratch.g || !head_alloc.g) {
		free(busy);
		free(scratch.g);
		free(head_alloc.g);
		return 0;
	}
	for (int i = 0; i < nrunning; i++)
		busy[nbusy++] = (struct busy){ &running[i].req, &running[i].alloc, running[i].end };
	qsort(busy, nbusy, sizeof(*busy), by_end);
	for (int q = 0; q < nqueue; q++) {
		struct sched_pending *p = &queue[q];

		p->start = false;
		if (!sched_feasible_parts(nodes, nnodes, &p->req, p->parts))
			continue;
		if (head < 0) {
			if (sched_fit_parts(nodes, nnodes, &p->req, p->parts, &p->alloc) == 0) {
				p->start = true;
				sched_apply(nodes, &p->req, &p->alloc, +1);
				busy[nbusy++] = (struct busy){ &p->req, &p->alloc, now + p->limit };
				qsort(busy, nbusy, sizeof(*busy), by_end);
				started++;
				continue;
			}
			/* The head waits: reserve the earliest time it fits. */
			shadow = earliest_start(nodes, nnodes, busy, nbusy, NULL, p, now, &scratch);
			if (shadow < 0)
				continue;
			head_alloc.nguests = scratch.nguests;
			memcpy(head_alloc.g, scratch.g, scratch.nguests * sizeof(*scratch.g));
			head = q;
			*head_start = shadow;
			continue;
		}
		/* Backfill: fits now, and the head still starts at shadow.
		 * Nodes the head will not use are tried first, so a long job
		 * lands where it cannot get in the head's way. */
		if (fit_avoiding(nodes, nnodes, p, &p->alloc, &head_alloc) == 0 ||
		    sched_fit_parts(nodes, nnodes, &p->req, p->parts, &p->alloc) == 0) {
			struct busy me = { &p->req, &p->alloc, now + p->limit };
			int64_t h;

			if (me.end <= shadow) {
				h = shadow;
			} else {
				h = earliest_start(nodes, nnodes, busy, nbusy, &me, &queue[head], now, &scratch);
			}
			if (h >= 0 && h <= shadow) {
				p->start = true;
				sched_apply(nodes, &p->req, &p->alloc, +1);
				busy[nbusy++] = me;
				qsort(busy, nbusy, sizeof(*busy), by_end);
				started++;
			}
		}
	}
	free(busy);
	free(scratch.g);
	free(head_alloc.g);
	return started;
}
