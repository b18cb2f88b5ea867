/* The `vhpc` command's subcommands; each returns the process exit status. */
#ifndef VHPC_SCHED_CLI_H
#define VHPC_SCHED_CLI_H

#include <stdbool.h>
#include "lib/err.h"


/* Exit statuses of vhpc itself, apart from a job's own (as docker does). */
#define EXIT_USAGE   2
#define EXIT_TIMEOUT 124
#define EXIT_VHPC    125

int cmd_run(int argc, char **argv);
int cmd_image(int argc, char **argv);
/* vhpc image keygen|sign: signed images (cmd_image_sign.c). */
int cmd_image_sign(int argc, char **argv);
/* vhpc image push|rm: the cluster's image store (cmd_image_store.c). */
int cmd_image_store(int argc, char **argv);
/* Pushes the local image name (as `as`, or its own name) into the store of
 * the controller at ctl; progress on stderr unless quiet. */
int image_push_to(const char *ctl, const char *name, const char *as, bool quiet, struct verr *err);
/* vhpc image list with a cluster: the store and the nodes' caches. */
int cmd_image_store_list(const char *ctl, bool json);
int cmd_cleanup(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* In a Slurm batch job's script: mpirun in the job's guest 0 (slurm/). */
int cmd_mpirun(int argc, char **argv);
/* The cluster (vhpc-ctld, scheduler/PROTOCOL.md). */
int cmd_submit(int argc, char **argv);
int cmd_queue(int argc, char **argv);
int cmd_nodes(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_wait(int argc, char **argv);
int cmd_output(int argc, char **argv);
/* vhpc exec and vhpc shell: into a running job's guests (cmd_exec.c, cmd_shell.c). */
int cmd_exec(int argc, char **argv);
int cmd_shell(int argc, char **argv);
/* Ended jobs with what they used (cmd_history.c). */
int cmd_history(int argc, char **argv);
/* vhpc checkpoint [rm] and vhpc checkpoints (cmd_ckpt.c). */
int cmd_checkpoint(int argc, char **argv);
int cmd_checkpoints(int argc, char **argv);
/* vhpc node drain|undrain (cmd_node.c). */
int cmd_node(int argc, char **argv);
/* vhpc restart CKPT; vhpc submit --restart CKPT comes here too. */
int cmd_restart(int argc, char **argv);
/* The local service for ordinary users (vhpc-ctld and vhpcd on loopback). */
int cmd_service(int argc, char **argv);

/* Prints "vhpc <cmd>: <message>" and returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
