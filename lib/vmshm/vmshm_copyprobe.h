/*
 * Does this CPU copy slowly with `rep movsb` when the destination is a few
 * bytes past the source modulo 4 KiB?  The vmshm rings' copies out (ob1's
 * memcpy from the ring into the application's buffer, or into its own
 * buffer for an unexpected message) have distances nobody chooses; where
 * glibc copies 2 KiB-512 KiB with `rep movsb`, the AMD EPYC machines here
 * run such copies 15-25 times slower (btl_vmshm README, "Copy distance").
 * The node agent then gives guests that use vmshm a glibc tunable that
 * keeps memcpy on its vector loop.
 */
#ifndef VHPC_VMSHM_COPYPROBE_H
#define VHPC_VMSHM_COPYPROBE_H

#include <stdbool.h>

/* The setting guests get: rep movsb only from 1 GiB up, i.e. never for a
 * message (the vector loop and non-temporal stores keep the sizes above). */
#define VMSHM_AVOID_MOVSB_ENV "GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=1073741824"

/* Times this process's memcpy of 64 KiB at distances 16 and 2048 (best of
 * several, interleaved; a few milliseconds in all).  True when the short
 * distance is more than 3 times slower; *ratio gets slow/fast time. */
bool vmshm_short_copies_slow(double *ratio);

#endif
