/*
 * vhpc-slurmjob task: a Slurm task whose guest is a VM.  A process cannot
 * join a VM's namespaces, so the task's own process (the user's, exec'd by
 * the plugin in task_init instead of the program) asks the guest's agent to
 * run the program there: as the same user's guest session, in the same
 * folder (shared with the VM through virtio-fs), with the task's
 * environment, stdin, stdout and stderr, and forwards the signals Slurm
 * sends it.  Its exit status is the program's (128 + N when a signal N
 * ended it), so Slurm's exit codes and output files work as for any task.
 */
#include "lib/chan.h"
#include "lib/err.h"
#include "lib/gexec.h"
#include "lib/parse.h"
#include "slurm/holder.h"

#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static volatile int forward;

static void on_signal(int sig)
{
	forward = sig;
}

int vs_task_relay(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "sock", 1, 0, 's' }, { "vsock-port", 1, 0, 'p' }, { "key", 1, 0, 'k' }, { "guest", 1, 0, 'g' }, { 0 }
	};
	static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT, SIGWINCH };
	const char *sock = NULL, *keyfile = NULL, *guest = "?";
	struct sigaction sa = { .sa_handler = on_signal };
	struct gexec_req req = { .out_fd = STDOUT_FILENO, .err_fd = STDERR_FILENO, .send_stdin = true,
				 .in_fd = STDIN_FILENO, .cancel = &forward };
	uint8_t key[CHAN_KEY_LEN];
	char cwd[PATH_MAX];
	long long port = 0;
	struct chan c;
	struct verr e;
	int o, status = 255, rc;

	optind = 1;
	while ((o = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		if (o == 's')
			sock = optarg;
		else if (o == 'p' && parse_ll(optarg, 1, 0xffffffffll, &port) == 0)
			;
		else if (o == 'k')
			keyfile = optarg;
		else if (o == 'g')
			guest = optarg;
		else
			goto usage;
	}
	if (!sock || !keyfile || optind >= argc)
		goto usage;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	req.argv = (const char *const *)argv + optind;
	req.env = (const char *const *)environ;
	req.cwd = getcwd(cwd, sizeof(cwd));
	if (chan_key_load(keyfile, key, &e) < 0 ||
	    (port ? gexec_connect_vsock(&c, sock, (unsigned)port, key, 30000, &e)
		  : gexec_connect_unix(&c, sock, key, 30000, &e)) < 0) {
		fprintf(stderr, "vhpc: guest %s: %s\n", guest, e.msg);
		return 255;
	}
	explicit_bzero(key, sizeof(key));
	rc = gexec_run(&c, &req, &status, &e);
	/* A folder the VM does not share: as slurmstepd does on a node
	 * without the job's folder. */
	if (rc < 0 && req.cwd && strstr(e.msg, "cannot change to directory")) {
		fprintf(stderr, "vhpc: guest %s: no %s there: going to /tmp instead\n", guest, req.cwd);
		req.cwd = "/tmp";
		rc = gexec_run(&c, &req, &status, &e);
	}
	chan_close(&c);
	if (rc < 0) {
		fprintf(stderr, "vhpc: guest %s: %s\n", guest, e.msg);
		return 255;
	}
	return status;
usage:
	fprintf(stderr, "usage: vhpc-slurmjob task --sock PATH [--vsock-port N] --key FILE [--guest NAME] -- PROGRAM [ARGS...]\n");
	return 2;
}
