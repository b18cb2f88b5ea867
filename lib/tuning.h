/*
 * Tuning profiles (configs/tuning/NAME.yaml).
 */
#ifndef VHPC_LIB_TUNING_H
#define VHPC_LIB_TUNING_H

#include <stdbool.h>
#include "lib/config.h"

/*
 * Tuning profile (configs/tuning/NAME.yaml): what the job network and each
 * guest's network stack get.  Only per-network-namespace sysctls (net.*)
 * are allowed, because a guest must never change its host.
 */
struct tuning {
	char *name;
	long long mtu;
	struct { bool tso, gso, gro, sg, tx_csum, rx_csum; } offload;
	struct cf_strmap sysctl;
	/* kvm guests: virtio-net on the kernel's vhost-net where the node has
	 * /dev/vhost-net (default), or always in vhpc-hv's userspace. */
	bool vhost_net;
};
extern const struct cf_schema tuning_schema;
/* NAME (looked up in <config dir>/tuning/NAME.yaml) or a path ending .yaml */
int tuning_load(const char *name_or_path, struct tuning *t, struct verr *err);
void tuning_free(struct tuning *t);
/* Writes each sysctl under /proc/sys/net for the caller's network
 * namespace and reads it back; names every key it could not set. */
int tuning_apply_sysctls(const struct tuning *t, struct verr *err);

#endif
