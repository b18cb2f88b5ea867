/*
 * vhpc-hv: the VMM for one guest on Linux KVM.  This header is everything
 * the node agent may rely on: the command line (and the equivalent YAML
 * keys), the control-socket protocol and the exit statuses.
 *
 * Command line (each option also has a YAML key in --config FILE; the
 * command line wins over the file):
 *
 *   --kernel FILE        bzImage (Linux 64-bit boot protocol) or ELF vmlinux
 *                        with a PVH note (XEN_ELFNOTE_PHYS32_ENTRY)   kernel:
 *   --initrd FILE                                                      initrd:
 *   --cmdline STR                                                      cmdline:
 *   --vcpus N            1..HV_MAX_VCPUS                               vcpus:
 *   --mem SIZE           "512M", "4G"; RAM above 3 GiB is placed above
 *                        4 GiB (the 32-bit hole is 3..4 GiB)           mem:
 *   --numa mem=SIZE[,cpus=LIST][,host-node=N]   one guest NUMA node per
 *                        use; the sizes must add up to --mem; without
 *                        cpus= the vCPUs are split evenly in order.    numa: [{mem, cpus, host_node}]
 *   --host-node N        bind all guest RAM to host node N (no --numa)  host_node:
 *   --cpu-affinity LIST  vCPU i runs only on the i-th CPU of LIST     cpu_affinity:
 *   --topology SxCxT     sockets x cores x threads (default: one socket
 *                        per guest node, one thread per core)         topology:
 *   --hugepages [2M|1G]  back RAM with hugetlb pages; fails at start when
 *                        the pool (per bound host node) is too small  hugepages:
 *   --prefault-threads N threads that fault RAM in (default: CPUs)    prefault_threads:
 *   --no-prefault        leave RAM to be faulted on first touch       prefault: false
 *   --serial stdio|none|file:PATH    COM1 backend (default stdio)     serial:
 *   --control PATH       control socket (unix, mode 0600)             control:
 *   --require-hw         refuse to run without hardware virtualization require_hw:
 *   --debug-exit         enable the test-guest exit port (HV_DEBUG_EXIT_PORT) debug_exit:
 *   --cpuid-hide LIST    hide CPUID features (cx16,xsave,avx,...)      cpuid_hide:
 *   --config FILE        YAML file with the keys above
 *   -v / -q              more / less logging (also $VHPC_LOG)
 *
 * Control socket: one JSON object per line in each direction.  Only root
 * or the uid that runs vhpc-hv may connect (SO_PEERCRED).  Requests:
 *   {"cmd":"status"}   -> {"ok":true,"state":"running"|"paused"|"stopping",
 *                          "pid":N,"uptime_ms":N,
 *                          "vcpus":[{"id":0,"apic_id":0,"tid":N,
 *                                    "affinity":"2","host_cpu":2}],
 *                          "memory":[{"guest_node":0,"gpa_ranges":[[start,end]],
 *                                     "size":N,"host_node":0|null,
 *                                     "hugepages":false}]}
 *   {"cmd":"pause"} / {"cmd":"resume"}  -> {"ok":true,"state":...}
 *   {"cmd":"poweroff"}  presses the ACPI power button (the guest decides)
 *   {"cmd":"kill"}      stops the guest now; exit status HV_EXIT_KILLED
 * Errors: {"ok":false,"error":"words"}.
 */
#ifndef VHPC_HV_H
#define VHPC_HV_H

#define HV_MAX_VCPUS 256
#define HV_MAX_NODES 8

/* Exit statuses of vhpc-hv. */
#define HV_EXIT_POWEROFF    0   /* the guest powered off (ACPI S5) */
#define HV_EXIT_ERROR       1   /* set-up failed; the message says why */
#define HV_EXIT_USAGE       2   /* bad command line or config file */
#define HV_EXIT_RESET       3   /* the guest asked for a reset (reboot) */
#define HV_EXIT_CRASH       4   /* triple fault or KVM internal error */
#define HV_EXIT_KILLED      5   /* "kill" on the control socket, or SIGTERM/SIGINT */
#define HV_EXIT_NO_HW       6   /* --require-hw and no hardware virtualization */
/* With --debug-exit, a guest byte V written to HV_DEBUG_EXIT_PORT ends the
 * process with HV_EXIT_DEBUG_BASE + (V & 63): test guests write 0 for pass. */
#define HV_EXIT_DEBUG_BASE  64
#define HV_DEBUG_EXIT_PORT  0xf4

#endif
