/*
 * The scheduler thread: woken by every change (and a tick), it marks nodes
 * that missed their heartbeats down, ends jobs over their time limit,
 * retries owed job_stops, and runs a gang-scheduling pass (sched_pass:
 * FIFO with EASY backfill over the nodes' NUMA capacity) whose starts are
 * committed before their start threads run.  It also lets ended jobs
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

static void set_node(struct sched_node *sn, const struct cnode *n)
{
	sn->up = n->up && n->have_info;
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

static void start(struct ctld *ctl, struct cjob *j, const struct sched_alloc *a)
{
	uint8_t key[CHAN_KEY_LEN];
	struct verr e;

	free(j->alloc);
	j->alloc = malloc(sizeof(*j->alloc) * a->nguests);
	if (!j->alloc) {
		log_err("out of memory");
		_exit(1);
	}
	memcpy(j->alloc, a->g, sizeof(*j->alloc) * a->nguests);
	j->nalloc = a->nguests;
	j->vni = pick_vni(ctl, j);
	j->subnet = pick_subnet(ctl, j);
	random_bytes(key, sizeof(key));
	hex_encode(key, sizeof(key), j->key_hex);
	j->state = JOB_STARTING;
	snprintf(j->reason, sizeof(j->reason), "starting");
	ctld_job_commit(ctl, j, true, &e);
	ctld_rpc_start_job(ctl, j);
}

static void schedule(struct ctld *ctl)
{
	struct sched_node *sn = calloc(ctl->nnodes ? ctl->nnodes : 1, sizeof(*sn));
	struct sched_running *run = NULL;
	struct sched_pending *q = NULL;
	struct cjob **qj = NULL;
	struct sched_guest **owned = NULL;
	int nrun = 0, nq = 0, up = 0, started, nowned = 0;
	int64_t now = ctld_wall_s(), head = -1;
	uint64_t t0 = now_ns();

	if (!sn)
		goto out;
	for (int i = 0; i < ctl->nnodes; i++) {
		set_node(&sn[i], &ctl->nodes[i]);
		up += sn[i].up;
	}
	ctld_nodes_usage(ctl, sn);
	run = calloc(ctl->njobs ? ctl->njobs : 1, sizeof(*run));
	owned = calloc(ctl->njobs ? ctl->njobs : 1, sizeof(*owned));
	q = calloc(ctl->sched_depth, sizeof(*q));
	qj = calloc(ctl->sched_depth, sizeof(*qj));
	if (!run || !q || !qj || !owned)
		goto out;
	for (int i = 0; i < ctl->njobs; i++) {
		struct cjob *j = ctl->jobs[i];

		if (ctld_job_active(j)) {
			run[nrun].req = (struct sched_req){ j->nguests, j->vcpus, j->mem };
			run[nrun].alloc = (struct sched_alloc){ j->nalloc, j->alloc };
			run[nrun].end = j->state == JOB_RUNNING ? j->started + j->limit : now + j->limit;
			nrun++;
		} else if (j->ncleanup && j->nalloc) {
			/* Being torn down: it holds its guests on the nodes that
			 * still owe a job_stop (what ctld_nodes_usage counted), until
			 * about now.  Left out, the head would seem unable to start
			 * ever, and the next job would take its place. */
			struct sched_guest *part = calloc(j->nalloc, sizeof(*part));
			int np = 0;

			if (!part)
				goto out;
			for (int k = 0; k < j->nalloc; k++)
				if (ctld_job_owes_stop(j, j->alloc[k].node))
					part[np++] = j->alloc[k];
			run[nrun].req = (struct sched_req){ np, j->vcpus, j->mem };
			run[nrun].alloc = (struct sched_alloc){ np, part };
			run[nrun].end = now;
			owned[nowned++] = part;
			nrun++;
		}
		/* A job whose last attempt is still being torn down waits. */
		if (j->state == JOB_PENDING && !j->ncleanup && ctld_mono_ms() >= j->retry_ms && nq < ctl->sched_depth) {
			/* Without --vcpus: one core per rank when a node could ever
			 * hold such guests, else the largest share that fits (as
			 * vhpc run does on one machine); ranks then share cores. */
			if (!j->spec.vcpus) {
				struct sched_req r = { j->nguests, (j->ranks + j->nguests - 1) / j->nguests, j->mem };

				while (r.vcpus > 1 && !sched_feasible(sn, ctl->nnodes, &r))
					r.vcpus--;
				j->vcpus = r.vcpus;
			}
			q[nq].req = (struct sched_req){ j->nguests, j->vcpus, j->mem };
			q[nq].limit = j->limit;
			q[nq].alloc.g = calloc(j->nguests, sizeof(struct sched_guest));
			if (!q[nq].alloc.g)
				goto out;
			qj[nq++] = j;
		}
	}
	if (!nq)
		goto out;
	started = sched_pass(sn, ctl->nnodes, run, nrun, q, nq, now, &head);
	for (int i = 0; i < nq; i++) {
		struct cjob *j = qj[i];

		if (q[i].start) {
			start(ctl, j, &q[i].alloc);
			continue;
		}
		if (!up)
			snprintf(j->reason, sizeof(j->reason), "waiting: no node is up");
		else if (!sched_feasible(sn, ctl->nnodes, &q[i].req))
			snprintf(j->reason, sizeof(j->reason),
				 "waiting: %d guest%s x %d vCPU%s do not fit the up nodes even when they are idle",
				 j->nguests, j->nguests == 1 ? "" : "s", j->vcpus, j->vcpus == 1 ? "" : "s");
		else
			snprintf(j->reason, sizeof(j->reason), "waiting for resources");
	}
	if (started)
		log_info("scheduling pass: %d of %d queued job%s started (%d nodes, %.2f ms)", started, nq,
			 nq == 1 ? "" : "s", ctl->nnodes, (now_ns() - t0) / 1e6);
out:
	for (int i = 0; i < nowned; i++)
		free(owned[i]);
	free(owned);
	for (int i = 0; q && i < nq; i++)
		free(q[i].alloc.g);
	free(q);
	free(qj);
	free(run);
	free(sn);
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
