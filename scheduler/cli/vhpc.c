/* vhpc: the user's and admin's command. */
#include "lib/consts.h"
#include "lib/log.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vhpc COMMAND [ARGS]\n"
		"\n"
		"  run [OPTIONS] -- COMMAND...   run an MPI job in guests on this machine\n"
		"                                (or on the cluster, when one is configured)\n"
		"  submit JOB.yaml | [OPTIONS] -- COMMAND...  queue a job with vhpc-ctld\n"
		"  queue [--all] [--json]        jobs of the cluster\n"
		"  cancel ID                     cancel a job\n"
		"  wait ID                       wait for a job; exit with its exit status\n"
		"  output [-f] ID                what a job wrote (so far)\n"
		"  exec ID [--guest N|--all] -- COMMAND...  run a command in a running job's guest\n"
		"  shell ID [--guest N]          an interactive shell in a running job's guest\n"
		"  checkpoint ID [--stop]        checkpoint a running job (and stop it)\n"
		"  checkpoint rm NAME            remove a checkpoint\n"
		"  checkpoints [--json]          the checkpoints of your jobs\n"
		"  restart CKPT                  a checkpointed job back, as a new job (= submit --restart CKPT)\n"
		"  nodes [--json]                the cluster's nodes\n"
		"  node drain NODE [--checkpoint] | undrain NODE  (root) no new jobs there; its jobs checkpointed, requeued\n"
		"  history [--user U] [--since T] [--json]  ended jobs: state, CPU time, peak memory\n"
		"  mpirun [OPTIONS] PROGRAM...   in a Slurm batch script (--vhpc-image): mpirun in guest 0\n"
		"  image build FILE [--force] [--format F] [--no-kvm]  build a node image from its YAML\n"
		"  image import oci:DIR[:TAG] | docker-archive:FILE  an OCI image as a node image\n"
		"  image push NAME               (root) into the cluster's image store\n"
		"  image list [--json] [--local] the cluster's store and each node's cache (--local: this machine's)\n"
		"  image rm NAME                 (root) remove it from the cluster's store\n"
		"  image verify NAME|ID          recompute an image's content hash\n"
		"  image fetch-kernel PACKAGE    download a Debian kernel package for kvm images\n"
		"  cleanup                       remove what crashed jobs left behind\n"
		"  service start|stop|status     (root) the local service: ordinary users' vhpc run\n"
		"  bench [--suite S] | compare A B   a benchmark natively and in guests, side by side\n"
		"  version                       print the version\n"
		"\n"
		"`vhpc COMMAND --help` describes a command.\n");
}

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "vhpc %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see: vhpc %s --help)\n", cmd);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	vlog_init("vhpc");
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "service"))
		return cmd_service(argc - 1, argv + 1);
	if (!strcmp(argv[1], "image"))
		return cmd_image(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bench"))
		return cmd_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "cleanup"))
		return cmd_cleanup(argc - 1, argv + 1);
	if (!strcmp(argv[1], "submit"))
		return cmd_submit(argc - 1, argv + 1);
	if (!strcmp(argv[1], "queue"))
		return cmd_queue(argc - 1, argv + 1);
	if (!strcmp(argv[1], "nodes"))
		return cmd_nodes(argc - 1, argv + 1);
	if (!strcmp(argv[1], "cancel"))
		return cmd_cancel(argc - 1, argv + 1);
	if (!strcmp(argv[1], "wait"))
		return cmd_wait(argc - 1, argv + 1);
	if (!strcmp(argv[1], "output"))
		return cmd_output(argc - 1, argv + 1);
	if (!strcmp(argv[1], "exec"))
		return cmd_exec(argc - 1, argv + 1);
	if (!strcmp(argv[1], "shell"))
		return cmd_shell(argc - 1, argv + 1);
	if (!strcmp(argv[1], "checkpoint"))
		return cmd_checkpoint(argc - 1, argv + 1);
	if (!strcmp(argv[1], "node"))
		return cmd_node(argc - 1, argv + 1);
	if (!strcmp(argv[1], "restart"))
		return cmd_restart(argc - 1, argv + 1);
	if (!strcmp(argv[1], "checkpoints"))
		return cmd_checkpoints(argc - 1, argv + 1);
	if (!strcmp(argv[1], "history"))
		return cmd_history(argc - 1, argv + 1);
	if (!strcmp(argv[1], "mpirun"))
		return cmd_mpirun(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("vhpc %s\n", VHPC_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "vhpc: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
