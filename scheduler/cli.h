/* The `vhpc` command's subcommands; each returns the process exit status. */
#ifndef VHPC_SCHED_CLI_H
#define VHPC_SCHED_CLI_H

#include "vhpc.h"

/* Exit statuses of vhpc itself, apart from a job's own (as docker does). */
#define EXIT_USAGE   2
#define EXIT_TIMEOUT 124
#define EXIT_VHPC    125

int cmd_run(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_cleanup(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* Prints "vhpc <cmd>: <message>" and returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
