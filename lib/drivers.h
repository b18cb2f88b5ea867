/*
 * The guest drivers' names, as job specs, the wire and the Slurm options
 * spell them.  Each folder nodeagent/drivers/<name>/ is one driver, and
 * lib/module.mk writes their names into the generated driver_names.h, so a
 * new driver is its folder plus its line in the agent's table
 * (nodeagent/drivers/table.c): nothing here changes.  Which driver "auto"
 * means on a host is the node agent's to say (na_driver_resolve).
 */
#ifndef VHPC_LIB_DRIVERS_H
#define VHPC_LIB_DRIVERS_H

/* VHPC_DRIVER_NAMES: "auto", then each driver's name, sorted;
 * VHPC_DRIVER_CHOICES: the same in words, "auto, a or b", for messages. */
#include "driver_names.h"

/* Index 0 of vhpc_driver_names: the node agent picks. */
#define DRIVER_AUTO 0

/* VHPC_DRIVER_NAMES, NULL-terminated (a job spec's driver is an index). */
extern const char *const vhpc_driver_names[];

/* The index of name in vhpc_driver_names, or -1. */
int vhpc_driver_index(const char *name);
/* vhpc_driver_names[d], or NULL when d is no index of it. */
const char *vhpc_driver_name(int d);

#endif
