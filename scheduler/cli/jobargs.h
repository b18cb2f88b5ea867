/* The options `vhpc run` and `vhpc submit` share. */
#ifndef VHPC_SCHED_JOBARGS_H
#define VHPC_SCHED_JOBARGS_H

#include <stdio.h>
#include "lib/config.h"
#include "lib/jobspec.h"
#include "embedded.h"

/* Options, then the command (or --job FILE), into *out (checked with
 * job_spec_check).  Returns 0; 1 when help() was called for --help; or the
 * exit status of a usage error (printed).  Fields not given keep their
 * "not given" values (driver -1, mem 0, timeout 0). */
int job_args_parse(const char *cmd, int argc, char **argv, struct job_spec *out,
		   struct embedded_opts *eo_out, void (*help)(void));

/* The options of the job option rows in s (optgen.h) into j, which holds
 * defaults, up to the command (optind); 0, 1 when help() was called, or a
 * usage error's exit status (printed).  For commands that take some of
 * vhpc run's options (vhpc mpirun); j is the caller's to free. */
struct optset;
int job_args_options(const char *cmd, const struct optset *s, int argc, char **argv, struct job_spec *j,
		     void (*help)(void));

/* The option lines of vhpc run --help, from lib/jobopts.c. */
void job_args_help(FILE *f);

/* The one place a --driver value is read (vhpc run, submit, bench): into
 * *out, or a usage error's exit status (printed). */
int job_args_driver(const char *cmd, const char *name, int *out);

/* A value of the job option id (lib/jobopts.h) checked as vhpc run
 * checks it: 0, or a usage error's exit status (printed). */
int job_args_check(const char *cmd, int id, const char *val);

/* The job file's field (job_spec_schema) of that key; NULL if none. */
const struct cf_field *job_args_field(const char *key);

/* -x NAME=VALUE, or NAME alone for the caller's own value (as mpirun's
 * -x), into j's env; 0 or a usage error's exit status (printed). */
int job_args_env(struct job_spec *j, const char *kv, const char *cmd);

/* Submits j to the controller at ctl, streams its output to stdout until
 * it ends and returns its exit status (as `vhpc wait`). */
int cluster_run(const char *ctl, const struct job_spec *j);

#endif
