/*
 * The scheduler thread: woken by every change (and a tick), it marks nodes
 * that missed their heartbeats down, ends jobs over their time limit,
 * retries owed job_stops, and runs a gang-scheduling pass (sched_pass:
 * FIFO with EASY backfill over the nodes' NUMA capacity) whose starts are
 * committed before their start threads run.  A restart from a checkpoint
 * is a job of that queue like any other, only bound to where its parts can
 * be restored (ctld_ckpt_parts): it neither jumps the queue nor the
 * reservation the head holds.  It also lets ended jobs
 * leave memory and watches the database's room on disk.
 */
#include "lib/bytes.h"
#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "ctld.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 500
/* The node's own timeout stops the job at its limit; this is the backstop. */
#define LIMIT_GRACE_S 10

/* A tick later than this past its time is a stall of the controller. */
#define STALL_MIN_MS 1000

/* The controller's own stalls are no node's fault: when its machine froze
 * it (a VM whose host paused or starved it, swapping, a suspend), the
 * nodes' heartbeats waited unread meanwhile, and judged on the clock alone
 * every node was "down" the moment it ran again (in the lab: "no heartbeat
 * for 8290 ms (limit 8 x 1000 ms)" after an RCU stall).  A tick that comes
 * late credits each node with the time the controller was not running;
 * a node that really died in that time is found one limit later. */
static void credit_own_stall(struct ctld *ctl, int64_t *last_tick, int64_t now)
{
	int64_t late = *last_tick ? now - *last_tick - TICK_MS : 0;

	*last_tick = now;
	if (late < STALL_MIN_MS)
		return;
	for (int i = 0; i < ctl->nnodes; i++)
		if (ctl->nodes[i].up)
			ctl->nodes[i].last_seen_ms += late;
	log_warn("vhpc-ctld did not run for %lld ms (its machine stalled): the nodes' heartbeat limits are extended by as much",
		 (long long)late);
}

static void check_heartbeats(struct ctld *ctl)
{
	int64_t now = ctld_mono_ms(), limit = (int64_t)ctl->hb_interval_ms * ctl->hb_misses;

	for (int i = 0; i < ctl->nnodes; i++) {
		struct cnode *n = &ctl->nodes[i];
		char why[128];

		if (!n->up || now - n->last_seen_ms <= limit)
			continue;
		snprintf(why, sizeof(why), "no heartbeat for %lld ms (limit %d x %d ms)",
			 (long long)(now - n->last_seen_ms), ctl->hb_misses, ctl->hb_interval_ms);
		ctld_node_down(ctl, n, why);
	}
}

static void check_limits(struct ctld *ctl)
{
	int64_t now = ctld_wall_s();

	for (int i = 0; i < ctl->njobs; i++) {
		struct cjob *j = ctl->jobs[i];

		if (j->state == JOB_RUNNING && now >= j->started + j->limit + LIMIT_GRACE_S)
			ctld_job_end(ctl, j, JOB_TIMEOUT, 124, "ran out of its time limit (%lld s)", (long long)j->limit);
	}
}

static void retry_stops(struct ctld *ctl)
{
	int64_t now = ctld_mono_ms();

	for (int i = 0; i < ctl->njobs; i++) {
		struct cjob *j = ctl->jobs[i];

		if (j->ncleanup && !j->stopping && now >= j->stop_retry_ms)
			ctld_rpc_stop_job(ctl, j);
	}
}

static void set_node(struct ctld *ctl, struct sched_node *sn, const struct cnode *n)
{
	ctld_fabric_caps(ctl, n, sn);
	/* A drained node takes no new guests (what runs there stays). */
	sn->up = n->up && n->have_info && !n->drained;
	sn->nnuma = n->nnuma;
	for (int k = 0; k < n->nnuma; k++) {
		sn->cores[k] = n->numa[k].cores;
		sn->mem[k] = n->numa[k].mem;
	}
}

/* Random, so that a job's VNI says nothing of another's and cannot be
 * guessed from its id (issue 31); unique among the jobs that hold one (a
 * job still being cleaned up included).  Recorded with the job at start
 * (ctld_job_commit), so a restarted controller keeps it. */
static uint32_t pick_vni(struct ctld *ctl, const struct cjob *j)
{
	for (;;) {
		uint8_t b[3];
		uint32_t v;
		bool used = false;

		random_bytes(b, sizeof(b));
		v = (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2];
		if (v == 0)
			continue;
		for (int i = 0; i < ctl->njobs && !used; i++)
			used = ctl->jobs[i] != j && ctl->jobs[i]->vni == v &&
			       (ctld_job_active(ctl->jobs[i]) || ctl->jobs[i]->ncleanup);
		if (!used)
			return v;
	}
}

/* Each job's network is an L2 of its own (its VNI) in namespaces of its
 * own, so subnets of concurrent jobs may repeat; they are spread over the
 * pool only so that addresses in logs tell jobs apart. */
int ctld_sched_job_prefix(struct ctld *ctl, int nguests)
{
	int prefix = (int)ctl->cl.job_prefix;

	/* guests from .2 on, and the broadcast address */
	while (prefix > ctl->cl.job_pool.prefix && (1ull << (32 - prefix)) < (uint64_t)nguests + 3)
		prefix--;
	return prefix;
}

static struct ipv4net pick_subnet(struct ctld *ctl, const struct cjob *j)
{
	int prefix = ctld_sched_job_prefix(ctl, j->nguests);
	uint64_t count = 1ull << (prefix - ctl->cl.job_pool.prefix);
	uint64_t k = (uint64_t)j->id % count;

	return (struct ipv4net){ ctl->cl.job_pool.addr + (uint32_t)(k << (32 - prefix)), prefix };
}

/* 0: started; -1: a pool of the fabric is exhausted, the job waits (its
 * reason says which). */
static int start(struct ctld *ctl, struct cjob *j, const struct sched_alloc *a)
{
	uint8_t key[CHAN_KEY_LEN];
	struct verr e;
	char why[sizeof(j->reason)];

	free(j->alloc);
	j->alloc = malloc(sizeof(*j->alloc) * a->nguests);
	if (!j->alloc) {
		log_err("out of memory");
		_exit(1);
	}
	memcpy(j->alloc, a->g, sizeof(*j->alloc) * a->nguests);
	j->nalloc = a->nguests;
	if (ctld_fabric_pick(ctl, j, why, sizeof(why)) < 0) {
		snprintf(j->reason, sizeof(j->reason), "%s", why);
		free(j->alloc);
		j->alloc = NULL;
		j->nalloc = 0;
		return -1;
	}
	j->vni = pick_vni(ctl, j);
	if (j->restart[0]) {
		struct ctld_ckpt_plan pl;

		/* Its guests keep their addresses and key: a new VNI, the
		 * checkpoint's subnet (job networks are L2s of their own, so a
		 * subnet may repeat). */
		if (ctld_ckpt_plan(ctl, j->restart, j->nguests, &pl, &e) < 0) {
			free(j->alloc);
			j->alloc = NULL;
			j->nalloc = 0;
			ctld_job_end(ctl, j, JOB_FAILED, 125, "%s", e.msg);
			return -1;
		}
		j->subnet = pl.subnet;
		snprintf(j->key_hex, sizeof(j->key_hex), "%s", pl.key_hex);
		ctld_ckpt_plan_free(&pl);
	} else {
		j->subnet = pick_subnet(ctl, j);
		random_bytes(key, sizeof(key));
		hex_encode(key, sizeof(key), j->key_hex);
	}
	j->state = JOB_STARTING;
	snprintf(j->reason, sizeof(j->reason), "starting");
	ctld_job_commit(ctl, j, true, &e);
	ctld_rpc_start_job(ctl, j);
	return 0;
}

/* What one scheduling pass weighs: the nodes, what holds them, and the
 * queued jobs that may start. */
struct pass {
	struct sched_node *sn;
	int up;                        /* nodes up */
	struct sched_running *run;     /* jobs that hold resources */
	int nrun;
	struct sched_guest **owned;    /* run's parts of jobs being torn down */
	int nowned;
	struct sched_pending *q;       /* at most sched_depth queued jobs */
	struct sched_parts *parts;     /* q's restarts' parts (nparts 0: not a restart) */
	struct cjob **qj;              /* q's jobs */
	int nq;
};

static int pass_alloc(struct ctld *ctl, struct pass *p)
{
	memset(p, 0, sizeof(*p));
	p->sn = calloc(ctl->nnodes ? ctl->nnodes : 1, sizeof(*p->sn));
	p->run = calloc(ctl->njobs ? ctl->njobs : 1, sizeof(*p->run));
	p->owned = calloc(ctl->njobs ? ctl->njobs : 1, sizeof(*p->owned));
	p->q = calloc(ctl->sched_depth, sizeof(*p->q));
	p->qj = calloc(ctl->sched_depth, sizeof(*p->qj));
	p->parts = calloc(ctl->sched_depth, sizeof(*p->parts));
	return p->sn && p->run && p->owned && p->q && p->qj && p->parts ? 0 : -1;
}

static void pass_free(struct pass *p)
{
	for (int i = 0; i < p->nowned; i++)
		free(p->owned[i]);
	free(p->owned);
	for (int i = 0; p->q && i < p->nq; i++)
		free(p->q[i].alloc.g);
	for (int i = 0; p->parts && i < p->nq; i++)
		ctld_ckpt_parts_free(&p->parts[i]);
	free(p->parts);
	free(p->q);
	free(p->qj);
	free(p->run);
	free(p->sn);
}

/* An active job holds its allocation until its time limit; one being torn
 * down holds its guests on the nodes that still owe a job_stop (what
 * ctld_nodes_usage counted), until about now.  Left out, the head would
 * seem unable to start ever, and the next job would take its place. */
static int add_running(struct pass *p, struct cjob *j, int64_t now)
{
	struct sched_running *r = &p->run[p->nrun];

	if (ctld_job_active(j)) {
		r->req = ctld_job_req(j, j->nguests);
		r->alloc = (struct sched_alloc){ j->nalloc, j->alloc };
		r->end = j->state == JOB_RUNNING ? j->started + j->limit : now + j->limit;
		p->nrun++;
	} else if (j->ncleanup && j->nalloc) {
		struct sched_guest *part = calloc(j->nalloc, sizeof(*part));
		int np = 0;

		if (!part)
			return -1;
		for (int k = 0; k < j->nalloc; k++)
			if (ctld_job_owes_stop(j, j->alloc[k].node))
				part[np++] = j->alloc[k];
		r->req = ctld_job_req(j, np);
		r->alloc = (struct sched_alloc){ np, part };
		r->end = now;
		p->owned[p->nowned++] = part;
		p->nrun++;
	}
	return 0;
}

/* A job that may start now joins the pass's queue.  One whose last attempt
 * is still being torn down waits. */
static int add_queued(struct ctld *ctl, struct pass *p, struct cjob *j)
{
	struct verr e;

	if (j->state != JOB_PENDING || j->ncleanup || ctld_mono_ms() < j->retry_ms || p->nq >= ctl->sched_depth)
		return 0;
	if (ctld_fabric_room(ctl, j, j->reason, sizeof(j->reason)) < 0)
		return 0;
	if (j->restart[0]) {
		/* Its checkpoint gone or damaged (or the cluster's guest_port
		 * changed): it can never start. */
		if (ctld_ckpt_parts(ctl, j, &p->parts[p->nq], &e) < 0) {
			ctld_job_end(ctl, j, JOB_FAILED, 125, "%s", e.msg);
			return 0;
		}
		p->q[p->nq].parts = &p->parts[p->nq];
	}
	/* Without --vcpus: one core per rank when a node could ever hold such
	 * guests, else the largest share that fits (as vhpc run does on one
	 * machine); ranks then share cores. */
	if (!j->spec.vcpus && !j->restart[0]) {
		struct sched_req r = ctld_job_req(j, j->nguests);

		r.vcpus = (j->ranks + j->nguests - 1) / j->nguests;

		while (r.vcpus > 1 && !sched_feasible(p->sn, ctl->nnodes, &r))
			r.vcpus--;
		j->vcpus = r.vcpus;
	}
	p->q[p->nq].req = ctld_job_req(j, j->nguests);
	p->q[p->nq].limit = j->limit;
	p->q[p->nq].alloc.g = calloc(j->nguests, sizeof(struct sched_guest));
	if (!p->q[p->nq].alloc.g) {
		ctld_ckpt_parts_free(&p->parts[p->nq]);
		return -1;
	}
	p->qj[p->nq++] = j;
	return 0;
}

/* Starts what the pass placed; the others say why they wait. */
static void apply(struct ctld *ctl, struct pass *p)
{
	for (int i = 0; i < p->nq; i++) {
		struct cjob *j = p->qj[i];

		if (p->q[i].start) {
			start(ctl, j, &p->q[i].alloc);
			continue;
		}
		if (p->q[i].parts) {
			if (!sched_feasible_parts(p->sn, ctl->nnodes, &p->q[i].req, p->q[i].parts))
				ctld_ckpt_parts_why(ctl, j, p->q[i].parts, j->reason, sizeof(j->reason));
			else
				snprintf(j->reason, sizeof(j->reason), "waiting for resources (restarts from checkpoint %s)",
					 j->restart);
			continue;
		}
		if (p->up && !sched_feasible(p->sn, ctl->nnodes, &p->q[i].req) &&
		    ctld_fabric_why(ctl, p->sn, &p->q[i].req, j->reason, sizeof(j->reason)))
			continue;
		if (!p->up)
			snprintf(j->reason, sizeof(j->reason), "waiting: no node is up");
		else if (!sched_feasible(p->sn, ctl->nnodes, &p->q[i].req))
			snprintf(j->reason, sizeof(j->reason),
				 "waiting: %d guest%s x %d vCPU%s do not fit the up nodes even when they are idle",
				 j->nguests, j->nguests == 1 ? "" : "s", j->vcpus, j->vcpus == 1 ? "" : "s");
		else
			snprintf(j->reason, sizeof(j->reason), "waiting for resources");
	}
}

static void schedule(struct ctld *ctl)
{
	struct pass p;
	int started;
	int64_t now = ctld_wall_s(), head = -1;
	uint64_t t0 = now_ns();

	if (pass_alloc(ctl, &p) < 0)
		goto out;
	for (int i = 0; i < ctl->nnodes; i++) {
		set_node(ctl, &p.sn[i], &ctl->nodes[i]);
		p.up += p.sn[i].up;
	}
	ctld_nodes_usage(ctl, p.sn);
	for (int i = 0; i < ctl->njobs; i++)
		if (add_running(&p, ctl->jobs[i], now) < 0 || add_queued(ctl, &p, ctl->jobs[i]) < 0)
			goto out;
	if (!p.nq)
		goto out;
	started = sched_pass(p.sn, ctl->nnodes, p.run, p.nrun, p.q, p.nq, now, &head);
	apply(ctl, &p);
	if (started)
		log_info("scheduling pass: %d of %d queued job%s started (%d nodes, %.2f ms)", started, p.nq,
			 p.nq == 1 ? "" : "s", ctl->nnodes, (now_ns() - t0) / 1e6);
out:
	pass_free(&p);
}

void *ctld_sched_thread(void *arg)
{
	struct ctld *ctl = arg;
	int64_t gc_next = 0, last_tick = 0;

	pthread_mutex_lock(&ctl->mu);
	while (!ctl->stop) {
		struct timespec dl;

		if (!ctl->kicked) {
			clock_gettime(CLOCK_REALTIME, &dl);
			dl.tv_nsec += TICK_MS * 1000000L;
			if (dl.tv_nsec >= 1000000000L) {
				dl.tv_sec++;
				dl.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&ctl->kick, &ctl->mu, &dl);
		}
		ctl->kicked = false;
		if (ctl->stop)
			break;
		credit_own_stall(ctl, &last_tick, ctld_mono_ms());
		check_heartbeats(ctl);
		check_limits(ctl);
		retry_stops(ctl);
		schedule(ctl);
		ctld_forget_ended(ctl);
		ctld_room_check(ctl);
		/* An image removed while jobs held it goes once they have ended. */
		if (ctl->img_gc_pending && ctld_mono_ms() >= gc_next) {
			gc_next = ctld_mono_ms() + 5000;
			pthread_mutex_unlock(&ctl->mu);
			ctld_image_gc(ctl);
			pthread_mutex_lock(&ctl->mu);
		}
	}
	pthread_mutex_unlock(&ctl->mu);
	return NULL;
}
