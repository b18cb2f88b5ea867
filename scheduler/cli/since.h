/* `vhpc history --since T`: a point in time as people write it. */
#ifndef VHPC_SCHED_SINCE_H
#define VHPC_SCHED_SINCE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* T to unix time, now being `now`:
 *   an age: 90s, 30m, 2h, 1d, 1w, or several (1h30m): now less that much;
 *   a date 2026-12-05 (its midnight), or a date and time 2026-12-05T14:30,
 *   2026-12-05 14:30:15, local time, or UTC with a trailing Z;
 *   @1733400000, unix time.
 * -1 with why (naming t and the forms taken) otherwise. */
int since_parse(const char *t, time_t now, int64_t *out, char *why, size_t len);

#endif
