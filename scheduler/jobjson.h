/* A job spec as JSON, for `vhpc submit` and vhpc-ctld: the one place that
 * knows the submit message's job object (scheduler/PROTOCOL.md). */
#ifndef VHPC_SCHED_JOBJSON_H
#define VHPC_SCHED_JOBJSON_H

#include "lib/err.h"
#include "lib/jobspec.h"

#define JOB_MAX_ARGS      4096
#define JOB_MAX_ENV       1024
#define JOB_MAX_ARG_BYTES (256u * 1024)

/* Fields left at their "not given" value (driver -1, mem 0, timeout 0,
 * vcpus 0, ranks 0, NULL names) are left out. */
struct json_object *job_spec_to_json(const struct job_spec *j);
/* Strict: unknown fields, wrong types and values out of range are errors
 * naming the field; the result also passes job_spec_check.  On error j is
 * released. */
int job_spec_from_json(struct json_object *o, struct job_spec *j, struct verr *err);

#endif
