/*
 * The cluster's fabric (RDMA) and PCI functions for passthrough, as users
 * ask for them (`--rdma`, `--device CLASS[:N]`) and the cluster file and
 * the nodes describe them: the words every component checks the same way.
 */
#ifndef VHPC_LIB_FABRIC_H
#define VHPC_LIB_FABRIC_H

#include <stdbool.h>
#include <stddef.h>

enum fabric_mode { FABRIC_NONE = 0, FABRIC_ROCE, FABRIC_SOFT_ROCE, FABRIC_IB };
extern const char *const fabric_mode_names[];

/* A job's use of the fabric: on where every node of the job has it. */
enum job_rdma { JOB_RDMA_AUTO = 0, JOB_RDMA_ON, JOB_RDMA_OFF };
extern const char *const job_rdma_names[];

#define FABRIC_CLASS_MAX   16    /* bytes of a class name ("nic", "gpu", "vf") */
#define JOB_DEVICES_MAX    8     /* --device rows of one job */
#define JOB_DEVICE_N_MAX   16    /* functions of one class per guest */
#define NODE_PCI_MAX       64    /* functions a node offers for passthrough */
#define PCI_ADDR_LEN       12    /* "0000:00:05.0" */

/* A class: [a-z][a-z0-9_-]{0,15}: it is a word in messages and in
 * `vhpc nodes`, never a path or an address. */
bool fabric_class_ok(const char *s);
/* "CLASS" or "CLASS:N" (N 1..JOB_DEVICE_N_MAX, default 1); -1 and why. */
int job_device_parse(const char *s, char cls[FABRIC_CLASS_MAX + 1], int *n, char *why, size_t len);
/* A PCI function's address as sysfs names it: DDDD:BB:DD.F, lowercase
 * hex, device 00..1f, function 0..7. */
bool pci_addr_ok(const char *s);
/* A network interface's name as the kernel takes it (IFNAMSIZ, no '/'). */
bool netdev_name_ok(const char *s);
/* Whether the caller's network namespace has interface s.  Not sysfs:
 * /sys/class/net shows the namespace of whoever mounted it, so an agent
 * entered into a node's namespace (nsenter --net) would look at the
 * host's. */
bool netdev_exists(const char *s);
/* "LO-HI" or "N", decimal or 0x hex, within [min, max], LO <= HI. */
int fabric_range_parse(const char *s, long long min, long long max, long long *lo, long long *hi);

#endif
