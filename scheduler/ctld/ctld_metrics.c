/*
 * vhpc-ctld --metrics: what the controller counts, and the page Prometheus
 * scrapes (its text exposition format, version 0.0.4).
 *
 * Counters live since this controller started (Prometheus takes a restart
 * as a counter reset); gauges are read from memory at each scrape.  Labels
 * are node names (identifiers the node agents, root, registered), job
 * states and start-failure reasons from fixed lists: never a user, a job's
 * name, a command, a path or an error's text.
 *
 * A scrape takes ctl->mu once, to copy what it needs; the text is made
 * after, and the HTTP server (ctld_metrics_http.c) writes it to the
 * client without any lock.
 */
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "ctld.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Queue waits, seconds: a busy cluster's jobs wait minutes to days. */
static const int wait_le[] = { 1, 5, 15, 60, 300, 900, 3600, 14400, 86400 };
#define NWAIT ((int)(sizeof(wait_le) / sizeof(wait_le[0])))

static const char *const fail_names[CTLD_SF_MAX] = {
	[CTLD_SF_NODE_UNREACHABLE] = "node_unreachable",
	[CTLD_SF_NODE_REFUSED] = "node_refused",
	[CTLD_SF_LAUNCH] = "launch_failed",
	[CTLD_SF_PATHS] = "paths",
	[CTLD_SF_IMAGE] = "image_missing",
	[CTLD_SF_INTERNAL] = "internal",
};

struct counters {
	uint64_t start_failed[CTLD_SF_MAX];
	uint64_t ended[JOB_STATE_MAX];
	uint64_t wait_bucket[NWAIT];   /* not cumulative: waits <= wait_le[i] and > wait_le[i - 1] */
	uint64_t wait_count, wait_sum;
	uint64_t pulls, pull_bytes;
};

struct ctld_metrics {
	pthread_mutex_t mu;            /* c; taken after ctl->mu, never before */
	struct counters c;
};

int ctld_metrics_start(struct ctld *ctl, const char *addr, const char *token_file, struct verr *err)
{
	struct ctld_metrics *m = calloc(1, sizeof(*m));
	struct verr e;
	int fd, port;

	if (!m)
		return verr_set(err, "out of memory");
	pthread_mutex_init(&m->mu, NULL);
	if ((fd = tcp_listen(addr, &port, &e)) < 0) {
		free(m);
		return verr_set(err, "--metrics %s: %s", addr, e.msg);
	}
	/* Before the server's thread reads it; no other thread runs yet. */
	ctl->metrics = m;
	if (ctld_metrics_http_start(ctl, fd, token_file, err) < 0) {
		ctl->metrics = NULL;
		close(fd);
		free(m);
		return -1;
	}
	log_info("metrics on %s (port %d), %s", addr, port,
		 token_file ? "for scrapers with the token of --metrics-token" : "for anyone who reaches it");
	if (addr[0] == ':' || addr[0] == '*' || !strncmp(addr, "0.0.0.0:", 8))
		log_warn("--metrics %s listens on every address: bind it to loopback or a management network", addr);
	return 0;
}

void ctld_metrics_start_failed(struct ctld *ctl, enum ctld_start_fail why)
{
	struct ctld_metrics *m = ctl->metrics;

	if (!m || why < 0 || why >= CTLD_SF_MAX)
		return;
	pthread_mutex_lock(&m->mu);
	m->c.start_failed[why]++;
	pthread_mutex_unlock(&m->mu);
}

void ctld_metrics_job_running(struct ctld *ctl, const struct cjob *j)
{
	struct ctld_metrics *m = ctl->metrics;
	int64_t w;
	int b = 0;

	if (!m)
		return;
	/* A clock set back makes no negative wait. */
	w = j->started > j->submitted ? j->started - j->submitted : 0;
	while (b < NWAIT && w > wait_le[b])
		b++;
	pthread_mutex_lock(&m->mu);
	if (b < NWAIT)
		m->c.wait_bucket[b]++;
	m->c.wait_count++;
	m->c.wait_sum += (uint64_t)w;
	pthread_mutex_unlock(&m->mu);
}

void ctld_metrics_job_ended(struct ctld *ctl, enum job_state st)
{
	struct ctld_metrics *m = ctl->metrics;

	if (!m || st < 0 || st >= JOB_STATE_MAX)
		return;
	pthread_mutex_lock(&m->mu);
	m->c.ended[st]++;
	pthread_mutex_unlock(&m->mu);
}

void ctld_metrics_image_sent(struct ctld *ctl, bool pull, uint64_t bytes)
{
	struct ctld_metrics *m = ctl->metrics;

	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->c.pulls += pull;
	m->c.pull_bytes += bytes;
	pthread_mutex_unlock(&m->mu);
}

/* ------------------------------------------------------------ the page */

struct node_snap {
	char name[65];
	bool up;
	int cores, used_cores;
	uint64_t mem, used_mem;
};

struct snap {
	int jobs[JOB_STATE_MAX];       /* in memory: the active states are exact */
	int64_t oldest_pending;        /* submit time of the longest waiting job; 0: none */
	int64_t now;
	struct node_snap *nodes;
	int nnodes;
	struct counters c;
};

/* Copies what the page shows; 0, or -1 when out of memory. */
static int take_snapshot(struct ctld *ctl, struct snap *s)
{
	struct sched_node *sn;

	pthread_mutex_lock(&ctl->mu);
	s->now = ctld_wall_s();
	sn = calloc(ctl->nnodes ? ctl->nnodes : 1, sizeof(*sn));
	s->nodes = calloc(ctl->nnodes ? ctl->nnodes : 1, sizeof(*s->nodes));
	if (!sn || !s->nodes) {
		pthread_mutex_unlock(&ctl->mu);
		free(sn);
		return -1;
	}
	ctld_nodes_usage(ctl, sn);
	s->nnodes = ctl->nnodes;
	for (int i = 0; i < ctl->nnodes; i++) {
		const struct cnode *n = &ctl->nodes[i];
		struct node_snap *o = &s->nodes[i];

		snprintf(o->name, sizeof(o->name), "%s", n->name);
		o->up = n->up;
		for (int k = 0; k < n->nnuma; k++) {
			o->cores += n->numa[k].cores;
			o->mem += n->numa[k].mem;
			o->used_cores += sn[i].used_cores[k];
			o->used_mem += sn[i].used_mem[k];
		}
	}
	for (int i = 0; i < ctl->njobs; i++) {
		const struct cjob *j = ctl->jobs[i];

		if (j->state >= 0 && j->state < JOB_STATE_MAX)
			s->jobs[j->state]++;
		if (j->state == JOB_PENDING && (!s->oldest_pending || j->submitted < s->oldest_pending))
			s->oldest_pending = j->submitted;
	}
	pthread_mutex_unlock(&ctl->mu);
	free(sn);
	if (ctl->metrics) {
		pthread_mutex_lock(&ctl->metrics->mu);
		s->c = ctl->metrics->c;
		pthread_mutex_unlock(&ctl->metrics->mu);
	}
	return 0;
}

/* A label value as the format escapes it (node names are identifiers
 * already; this holds whatever they become). */
static void put_label(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Job states as labels: the names vhpc shows, in lower case. */
static void put_state(FILE *f, enum job_state st)
{
	for (const char *p = store_job_state_names[st]; *p; p++)
		fputc(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p, f);
}

static void jobs_text(FILE *f, const struct snap *s)
{
	static const enum job_state active[] = { JOB_PENDING, JOB_STARTING, JOB_RUNNING };
	uint64_t cum = 0;

	head(f, "vhpc_jobs", "gauge", "Jobs not ended, by state.");
	for (size_t i = 0; i < sizeof(active) / sizeof(active[0]); i++) {
		fputs("vhpc_jobs{state=\"", f);
		put_state(f, active[i]);
		fprintf(f, "\"} %d\n", s->jobs[active[i]]);
	}
	head(f, "vhpc_jobs_ended_total", "counter", "Jobs that ended since this controller started, by final state.");
	for (int st = 0; st < JOB_STATE_MAX; st++) {
		if (!store_job_state_final(st))
			continue;
		fputs("vhpc_jobs_ended_total{state=\"", f);
		put_state(f, st);
		fprintf(f, "\"} %llu\n", (unsigned long long)s->c.ended[st]);
	}
	head(f, "vhpc_job_queue_wait_seconds", "histogram",
	     "Time from submit to running of the jobs that started since this controller started (1 s resolution).");
	for (int b = 0; b < NWAIT; b++) {
		cum += s->c.wait_bucket[b];
		fprintf(f, "vhpc_job_queue_wait_seconds_bucket{le=\"%d\"} %llu\n", wait_le[b], (unsigned long long)cum);
	}
	fprintf(f, "vhpc_job_queue_wait_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)s->c.wait_count);
	fprintf(f, "vhpc_job_queue_wait_seconds_sum %llu\n", (unsigned long long)s->c.wait_sum);
	fprintf(f, "vhpc_job_queue_wait_seconds_count %llu\n", (unsigned long long)s->c.wait_count);
	head(f, "vhpc_job_queue_oldest_wait_seconds", "gauge", "How long the longest waiting pending job has waited (0: none waits).");
	fprintf(f, "vhpc_job_queue_oldest_wait_seconds %lld\n",
		(long long)(s->oldest_pending && s->now > s->oldest_pending ? s->now - s->oldest_pending : 0));
	head(f, "vhpc_job_start_failures_total", "counter",
	     "Failed starts of jobs (each attempt; a job is tried 3 times) since this controller started, by reason.");
	for (int r = 0; r < CTLD_SF_MAX; r++)
		fprintf(f, "vhpc_job_start_failures_total{reason=\"%s\"} %llu\n", fail_names[r],
			(unsigned long long)s->c.start_failed[r]);
}

static void nodes_text(FILE *f, const struct snap *s)
{
	int up = 0;

	for (int i = 0; i < s->nnodes; i++)
		up += s->nodes[i].up;
	head(f, "vhpc_nodes", "gauge", "Nodes the controller knows, by state.");
	fprintf(f, "vhpc_nodes{state=\"up\"} %d\nvhpc_nodes{state=\"down\"} %d\n", up, s->nnodes - up);
	head(f, "vhpc_node_up", "gauge", "Whether the node is up (1) or down (0).");
	for (int i = 0; i < s->nnodes; i++) {
		fputs("vhpc_node_up{node=\"", f);
		put_label(f, s->nodes[i].name);
		fprintf(f, "\"} %d\n", s->nodes[i].up);
	}
	head(f, "vhpc_node_cores", "gauge",
	     "The node's cores: used (held by jobs' guests) and free (for new guests; 0 while the node is down).");
	for (int i = 0; i < s->nnodes; i++) {
		const struct node_snap *n = &s->nodes[i];
		int free_cores = n->up && n->cores > n->used_cores ? n->cores - n->used_cores : 0;

		fputs("vhpc_node_cores{node=\"", f);
		put_label(f, n->name);
		fprintf(f, "\",state=\"used\"} %d\nvhpc_node_cores{node=\"", n->used_cores);
		put_label(f, n->name);
		fprintf(f, "\",state=\"free\"} %d\n", free_cores);
	}
	head(f, "vhpc_node_memory_bytes", "gauge",
	     "The node's memory for guests: used (held by jobs' guests) and free (0 while the node is down).");
	for (int i = 0; i < s->nnodes; i++) {
		const struct node_snap *n = &s->nodes[i];
		uint64_t free_mem = n->up && n->mem > n->used_mem ? n->mem - n->used_mem : 0;

		fputs("vhpc_node_memory_bytes{node=\"", f);
		put_label(f, n->name);
		fprintf(f, "\",state=\"used\"} %llu\nvhpc_node_memory_bytes{node=\"", (unsigned long long)n->used_mem);
		put_label(f, n->name);
		fprintf(f, "\",state=\"free\"} %llu\n", (unsigned long long)free_mem);
	}
}

static void images_text(FILE *f, const struct snap *s)
{
	head(f, "vhpc_image_pulls_total", "counter",
	     "Image pulls nodes began from the controller's image store (an image's manifest asked for from its start).");
	fprintf(f, "vhpc_image_pulls_total %llu\n", (unsigned long long)s->c.pulls);
	head(f, "vhpc_image_pull_bytes_total", "counter", "Bytes of images the controller's store sent to nodes.");
	fprintf(f, "vhpc_image_pull_bytes_total %llu\n", (unsigned long long)s->c.pull_bytes);
}

char *ctld_metrics_text(struct ctld *ctl, size_t *len)
{
	struct snap s = { 0 };
	char *buf = NULL;
	FILE *f;

	if (take_snapshot(ctl, &s) < 0)
		return NULL;
	if (!(f = open_memstream(&buf, len))) {
		free(s.nodes);
		return NULL;
	}
	jobs_text(f, &s);
	nodes_text(f, &s);
	images_text(f, &s);
	if (fclose(f) != 0) {
		free(buf);
		buf = NULL;
	}
	free(s.nodes);
	return buf;
}
