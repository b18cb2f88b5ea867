/*
 * vfio-job: a one-guest kvm job whose guest gets PCI functions, for the
 * VFIO tests (tests/kvm/vfio.t) until `vhpc run --device` maps classes to
 * this node's functions.  It fills na_job_spec's pci fields and nothing
 * else of the lifecycle, so what it proves is the node agent's.
 *
 *   vfio-job [--mem SIZE] [--hold] --pci ADDR [--pci ADDR]... [-- CMD ARGS...]
 *
 * CMD runs in the guest (its output here, its status ours); --hold keeps
 * the job until SIGTERM or until the guest ends (which is reported).  The
 * line "vfio-job: job ID ready" says when the guest is up.
 */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/gexec.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/bytes.h"
#include "nodeagent/nodeagent.h"
#include "nodeagent/place/place.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PCI 4

static volatile sig_atomic_t stop;
static void on_sig(int sig) { stop = sig; }

static int cancelled(void *arg, struct verr *err)
{
	(void)arg;
	return stop ? verr_set(err, "interrupted by signal %d", (int)stop) : 0;
}

int main(int argc, char **argv)
{
	const char *pci[MAX_PCI];
	int guest[MAX_PCI] = { 0 }, npci = 0, status = 0, rc = 1, removed = 0, ranks = 1;
	uint64_t mem = 384ull << 20;
	bool hold = false;
	struct cluster_cfg cl = { 0 };
	struct job_spec js = { 0 };
	struct na_job_spec s = { 0 };
	struct na_topo *topo = NULL;
	struct na_job *nj = NULL;
	struct verr err;
	struct sigaction sa = { .sa_handler = on_sig };
	char job[16];
	uint8_t rnd[4];
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (!strcmp(argv[i], "--pci") && i + 1 < argc && npci < MAX_PCI) {
			pci[npci++] = argv[++i];
		} else if (!strcmp(argv[i], "--mem") && i + 1 < argc) {
			if (parse_size(argv[++i], &mem) < 0) {
				fprintf(stderr, "vfio-job: --mem %s is not a size\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--hold")) {
			hold = true;
		} else {
			fprintf(stderr, "usage: vfio-job [--mem SIZE] [--hold] --pci ADDR... [-- CMD ARGS...]\n");
			return 2;
		}
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (cluster_load(NULL, &cl, &err) < 0 || na_topo_load(&topo, NULL, &err) < 0 ||
	    na_cleanup_stale(&removed, &err) < 0)
		goto out;
	js.driver = -1;
	js.guests = 1;
	js.mem = mem;
	na_job_spec_from(&s, &js, &cl);
	random_bytes(rnd, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), job);
	s.driver = "kvm";
	s.label = job;
	s.allow_emulated = true;
	s.nguests = s.ntotal = 1;
	s.ranks = &ranks;
	s.subnet_pool = &cl;
	s.topo = topo;
	s.vcpus = 1;
	s.vmshm = false;
	s.host_id = na_boot_id();
	s.cancelled = cancelled;
	s.pci = pci;
	s.pci_guest = guest;
	s.npci = npci;
	{
		char host[65] = "";

		/* The admin's list, as `vhpc run` finds it: this host's entry. */
		gethostname(host, sizeof(host) - 1);
		s.fabric_node = cluster_fabric_node(&cl, host);
	}
	random_bytes(s.key, sizeof(s.key));
	if (na_job_start(&nj, job, &s, &err) < 0)
		goto out;
	printf("vfio-job: job %s ready\n", job);
	fflush(stdout);
	if (i < argc) {
		struct gexec_req req = { .argv = (const char *const *)argv + i, .out_fd = 1, .err_fd = 2,
					 .timeout_ms = 600000 };

		if (na_job_run(nj, 0, &req, &status, &err) < 0)
			goto out;
		rc = status;
	} else {
		char why[256];

		rc = 0;
		while (hold && !stop) {
			if (na_job_guest_gone(nj, why, sizeof(why))) {
				printf("vfio-job: guest gone: %s\n", why);
				rc = 3;
				break;
			}
			usleep(200000);
		}
	}
	na_job_stop(nj);
	nj = NULL;
	printf("vfio-job: job %s stopped\n", job);
	goto done;
out:
	fprintf(stderr, "vfio-job: %s\n", err.msg);
	rc = 1;
	na_job_stop(nj);
done:
	if (topo)
		na_topo_free(topo);
	cluster_free(&cl);
	return rc;
}
