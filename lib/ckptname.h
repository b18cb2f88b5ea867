/* A checkpoint's name: vhpc-ctld makes it (`<job>.<n>`), it becomes a
 * folder under the cluster's checkpoints.dir, and users send it back
 * (restart, checkpoint rm), and every node makes the folder.  One rule for
 * the CLI, the controller and the node agent, so a name one refuses no
 * other takes, and the CLI refuses it locally with the same words. */
#ifndef VHPC_LIB_CKPTNAME_H
#define VHPC_LIB_CKPTNAME_H

#include <stdbool.h>
#include "lib/err.h"

#define CKPT_NAME_MAX 64

/* [a-z0-9][a-z0-9.-]{0,63}: never "..", a slash or a leading dot; NULL is
 * not a name. */
bool ckpt_name_ok(const char *s);
/* ckpt_name_ok, or an error naming s and the form names have. */
int ckpt_name_check(const char *s, struct verr *err);

#endif
