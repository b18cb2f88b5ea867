/* A checkpoint's name: vhpc-ctld makes it (`<job>.<n>`), it becomes a
 * folder under the cluster's checkpoints.dir, and users send it back
 * (restart, checkpoint rm).  One rule for the CLI and the controller, so a
 * name the controller would refuse is refused locally with the same words. */
#ifndef VHPC_SCHED_CKPTNAME_H
#define VHPC_SCHED_CKPTNAME_H

#include <stdbool.h>
#include "lib/err.h"

#define CKPT_NAME_MAX 64

/* [a-z0-9][a-z0-9.-]{0,63}: never "..", a slash or a leading dot. */
bool ckpt_name_ok(const char *s);
/* ckpt_name_ok, or an error naming s and the form names have. */
int ckpt_name_check(const char *s, struct verr *err);

#endif
