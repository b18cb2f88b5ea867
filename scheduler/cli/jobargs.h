/* The options `vhpc run` and `vhpc submit` share. */
#ifndef VHPC_SCHED_JOBARGS_H
#define VHPC_SCHED_JOBARGS_H

#include "lib/jobspec.h"
#include "embedded.h"

/* Options, then the command (or --job FILE), into *out (checked with
 * job_spec_check).  Returns 0; 1 when help() was called for --help; or the
 * exit status of a usage error (printed).  Fields not given keep their
 * "not given" values (driver -1, mem 0, timeout 0). */
int job_args_parse(const char *cmd, int argc, char **argv, struct job_spec *out,
		   struct embedded_opts *eo_out, void (*help)(void));

/* -x NAME=VALUE, or NAME alone for the caller's own value (as mpirun's
 * -x), into j's env; 0 or a usage error's exit status (printed). */
int job_args_env(struct job_spec *j, const char *kv, const char *cmd);

/* Submits j to the controller at ctl, streams its output to stdout until
 * it ends and returns its exit status (as `vhpc wait`). */
int cluster_run(const char *ctl, const struct job_spec *j);

#endif
