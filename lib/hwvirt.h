/*
 * What /dev/kvm has behind it.
 */
#ifndef VHPC_LIB_HWVIRT_H
#define VHPC_LIB_HWVIRT_H

#include <stdbool.h>

/* Whether /dev/kvm has hardware virtualization behind it (VT-x/AMD-V) or is
 * a software KVM such as kvm_pvm; why says which, in words for users. */
struct hwvirt {
	bool kvm;          /* /dev/kvm opens and speaks the KVM API */
	bool hw;           /* hardware virtualization */
	char module[32];   /* kvm_intel, kvm_amd, kvm_pvm, ... */
	char why[256];
};
int hwvirt_detect(struct hwvirt *h);

#endif
