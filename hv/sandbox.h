/* vhpc-hv's system-call allowlist (--seccomp). */
#ifndef HV_SANDBOX_H
#define HV_SANDBOX_H

#include "lib/err.h"
#include <stdbool.h>

/* From here on, in every thread of the process, only the calls a running
 * guest needs; any other ends the process with HV_EXIT_SECCOMP and a log
 * line naming the call (and an ioctl's request).  Also makes the process
 * non-dumpable, so a process of the same uid can neither ptrace it nor
 * read its memory.  probe (HV_PROBE_*, config.h) other than HV_PROBE_NONE
 * makes that forbidden call at once: the filter's own test. */
int sandbox_enter(int probe, struct verr *err);

#endif
