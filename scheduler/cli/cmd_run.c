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
	       "\n");
	job_args_help(stdout);
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
