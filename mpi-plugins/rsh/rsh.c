/*
 * vhpc-rsh: Open MPI's plm_rsh_agent for vhpc guests.  `vhpc-rsh HOST CMD...`
 * asks vhpc-guestd on HOST to run `sh -c "CMD..."` and behaves like ssh
 * towards its caller: the remote stdout/stderr appear on ours, the remote
 * exit status becomes ours (128+N when the remote shell was killed by
 * signal N), and 255 means the guest could not be reached or refused us.
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the remote command;
 * if vhpc-rsh itself dies, guestd sees the connection close and stops the
 * remote command's whole process group.
 */
#include "lib/chan.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/gexec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "args.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 10000

static volatile int cancel_sig;

static void on_signal(int sig)
{
	cancel_sig = sig;
}

static int guest_port(const struct rsh_args *a, struct verr *err)
{
	const char *env = getenv("VHPC_GUEST_PORT");
	long long n;

	if (a->port)
		return a->port;
	if (!env || !*env)
		return GUEST_PORT_DEFAULT;
	if (parse_ll(env, 1, 65535, &n) < 0)
		return verr_set(err, "$VHPC_GUEST_PORT '%s' is not a port number 1..65535", env);
	return (int)n;
}

static int connect_guest(struct chan *c, const struct rsh_args *a, struct verr *err)
{
	const char *keypath = getenv("VHPC_JOB_KEY");
	uint8_t key[CHAN_KEY_LEN];
	int timeout = a->connect_timeout_ms ? a->connect_timeout_ms : CONNECT_TIMEOUT_MS;
	int port, r;

	if (!keypath || !*keypath)
		keypath = GUEST_KEY_PATH_DEFAULT;
	if (chan_key_load(keypath, key, err) < 0)
		return -1;
	if (a->is_unix) {
		r = gexec_connect_unix(c, a->host, key, timeout, err);
	} else {
		port = guest_port(a, err);
		if (port < 0)
			return -1;
		log_debug("connecting to %s port %d", a->host, port);
		r = gexec_connect_tcp(c, a->host, port, key, timeout, err);
	}
	memset(key, 0, sizeof(key));
	return r;
}

int main(int argc, char **argv)
{
	struct rsh_args a;
	struct verr err;
	struct chan c;
	struct sigaction sa = { .sa_handler = on_signal };
	int status = 255, r;

	vlog_init("vhpc-rsh");
	if (rsh_parse_args(argc, argv, &a, &err) < 0) {
		fprintf(stderr, "vhpc-rsh: %s\n", err.msg);
		return 255;
	}
	if (a.help) {
		rsh_usage(stdout);
		return 0;
	}
	if (a.version) {
		fprintf(stderr, "vhpc-rsh %s\n", VHPC_VERSION);
		return 0;
	}
	if (a.verbose)
		vlog_set_level(VLOG_DEBUG);
	else if (a.quiet)
		vlog_set_level(VLOG_ERR);
	if (connect_guest(&c, &a, &err) < 0) {
		if (!a.quiet)
			fprintf(stderr, "vhpc-rsh: %s\n", err.msg);
		rsh_args_free(&a);
		return 255;
	}
	if (a.hello) {
		char *info;

		r = gexec_hello(&c, &info, CONNECT_TIMEOUT_MS, &err);
		if (r == 0) {
			printf("%s\n", info);
			free(info);
			status = 0;
		}
	} else {
		const char *cmd[] = { "/bin/sh", "-c", a.command, NULL };
		struct gexec_req req = { .argv = cmd, .out_fd = STDOUT_FILENO,
					 .err_fd = STDERR_FILENO, .cancel = &cancel_sig };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		sigaction(SIGQUIT, &sa, NULL);
		/* SIGPIPE stays fatal: `vhpc-rsh host yes | head` ends quietly
		 * like a local pipeline, and guestd then stops the remote side. */
		log_debug("running: %s", a.command);
		r = gexec_run(&c, &req, &status, &err);
	}
	if (r < 0) {
		if (!a.quiet)
			fprintf(stderr, "vhpc-rsh: %s: %s\n", a.host, err.msg);
		status = 255;
	}
	chan_close(&c);
	rsh_args_free(&a);
	return status;
}
