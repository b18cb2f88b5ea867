/*
 * Where vhpc's programs, configs, state and runtime files are.
 */
#ifndef VHPC_LIB_PATHS_H
#define VHPC_LIB_PATHS_H

#include <stddef.h>

/* Directory of the running executable (for finding sibling programs). */
const char *self_dir(void);
/* Where vhpc keeps things; each honours an environment override:
 *   configs  $VHPC_CONFIG_DIR, else the checkout's configs/ for a build
 *            tree's programs (<self>/../deps.mk is there), else /etc/vhpc
 *   state    $VHPC_STATE_DIR,  else /var/lib/vhpc   (images, spool)
 *   runtime  $VHPC_RUN_DIR,    else /run/vhpc        (jobs, sockets)
 *   service  $VHPC_SERVICE_DIR, else /run/vhpc-service (vhpc service)  */
const char *vhpc_config_dir(void);
const char *vhpc_state_dir(void);
const char *vhpc_run_dir(void);
const char *vhpc_service_dir(void);
/* Full path of a vhpc program: <self_dir>/<name> if it exists, else name. */
const char *vhpc_prog(const char *name, char *buf, size_t len);

#endif
