/* vhpc run: flags (or a job file) to a job spec, then the embedded
 * scheduler runs it on this machine, or, when a cluster is configured,
 * vhpc-ctld runs it (cluster_run: submit, stream the output, wait). */
#include "lib/err.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "cli.h"
#include "client.h"
#include "embedded.h"
#include "jobargs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_usage(void)
{
	printf("usage: vhpc run [OPTIONS] [--] COMMAND [ARGS...]\n"
	       "\n"
	       "Runs COMMAND as an MPI job (through mpirun in guest 0) in guests on this\n"
	       "machine, streams its output, removes the guests, and exits with the job's\n"
	       "exit status (124: timed out; 125: vhpc itself failed).\n"
	       "With a cluster configured (`controller:` in the cluster file, or\n"
	       "$VHPC_CONTROLLER=HOST:PORT) the job goes to vhpc-ctld instead: it runs on\n"
	       "the cluster's nodes, its output (stdout and stderr together) streams back,\n"
	       "and Ctrl-C cancels it.\n"
	       "\n"
	       "  -N, --guests N        guests (default 1)\n"
	       "  -n, --ranks N         MPI ranks (default: guests x vCPUs)\n"
	       "      --vcpus N         vCPUs (host cores) per guest (default: ranks per\n"
	       "                        guest, or the largest equal share that fits)\n"
	       "      --mem SIZE        memory per guest, e.g. 512M, 2G (default 512M)\n"
	       "      --image NAME      node image (default: default; built if missing)\n"
	       "      --tuning NAME     network tuning profile in configs/tuning (default: hpc)\n"
	       "      --driver D        auto, container or kvm (default: auto)\n"
	       "      --user NAME|UID   (root) run the job as this user: what runs in the\n"
	       "                        guests is that uid and gid on the host\n"
	       "      --allow-emulated-kvm  with --driver kvm on a host whose KVM lacks\n"
	       "                        hardware virtualization: start the guests anyway\n"
	       "                        (they will not finish booting; for tests)\n"
	       "      --timeout T       job time limit: seconds, or 30s, 10m, 2h (default 1h)\n"
	       "      --oversubscribe   let guests share host cores\n"
	       "      --map-by node|slot  consecutive ranks in different guests (node, default)\n"
	       "                        or filling each guest first (slot)\n"
	       "      --no-vmshm        TCP between guests on this host (for comparison)\n"
	       "      --scratch SIZE    an empty writable /scratch of SIZE in each guest,\n"
	       "                        removed with the job (kvm: a disk; container: tmpfs)\n"
	       "      --job FILE        take the job from a YAML file; later flags override\n"
	       "  -x NAME[=VALUE]       environment variable for the ranks (repeatable);\n"
	       "                        NAME alone passes your own value\n"
	       "      --bind SRC[:DST][:ro]  share host path SRC at DST (default SRC) in\n"
	       "                        every guest (repeatable); your home, the current\n"
	       "                        directory and the cluster's site paths are shared\n"
	       "                        by default, and the job runs in this directory\n"
	       "      --chdir DIR       run the job in DIR instead of this directory\n"
	       "      --topology SPEC   place on an hwloc topology instead of this machine's\n"
	       "                        (testing: \"synthetic:numa:2 core:4\" or FILE.xml)\n");
}

int cmd_run(int argc, char **argv)
{
	struct job_spec j;
	struct embedded_opts eo = { 0 };
	struct verr err;
	char ctl[300];
	int r, status;

	r = job_args_parse("run", argc, argv, &j, &eo, run_usage);
	if (r)
		return r == 1 ? 0 : r;
	r = client_controller(ctl, sizeof(ctl), &err);
	if (r < 0) {
		job_spec_free(&j);
		log_err("%s", err.msg);
		return EXIT_USAGE;
	}
	if (r > 0) {
		/* A cluster is configured: the job goes through vhpc-ctld. */
		if (eo.topology || eo.allow_emulated_kvm || eo.user) {
			job_spec_free(&j);
			return usage_error("run", "%s is for this machine only; not with a cluster (controller %s)",
					   eo.topology ? "--topology" : eo.user ? "--user" : "--allow-emulated-kvm", ctl);
		}
		status = cluster_run(ctl, &j);
		job_spec_free(&j);
		return status;
	}
	status = embedded_run(&j, &eo, &err);
	if (status < 0) {
		log_err("%s", err.msg);
		status = EXIT_VHPC;
	}
	job_spec_free(&j);
	return status;
}
