/*
 * vhpc-rsh's command line, parsed as OpenSSH parses its own, so that Open
 * MPI (plm_rsh_agent) and people can call vhpc-rsh wherever they call ssh.
 */
#ifndef VHPC_RSH_ARGS_H
#define VHPC_RSH_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "lib/err.h"

struct rsh_args {
	char host[256];           /* host name/address, or a unix socket path */
	bool is_unix;             /* host contains '/': guestd's control socket */
	int port;                 /* 0 = $VHPC_GUEST_PORT, else GUEST_PORT_DEFAULT */
	int connect_timeout_ms;   /* -o ConnectTimeout=SECONDS; 0 = default */
	int verbose;              /* -v (repeatable) */
	bool quiet;               /* -q */
	bool hello;               /* --hello: print the guest's report, run nothing */
	bool version;             /* -V */
	bool help;                /* --help */
	char *command;            /* the words after the host joined with spaces (malloc'd) */
};

/* Fills a; on error the message names the offending argument.  Options that
 * would change what ssh does in ways vhpc-rsh cannot honour (forwarding,
 * backgrounding, no command) are errors, not silently ignored. */
int rsh_parse_args(int argc, char *const *argv, struct rsh_args *a, struct verr *err);
void rsh_args_free(struct rsh_args *a);
void rsh_usage(FILE *f);

#endif
