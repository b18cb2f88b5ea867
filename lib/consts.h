/*
 * Constants that more than one component must agree on.  They live here,
 * not in a component's header, so that (for example) the controller does
 * not include the node agent's API to learn how large a VNI may be.
 */
#ifndef VHPC_LIB_CONSTS_H
#define VHPC_LIB_CONSTS_H

#define VHPC_VERSION "0.1.0"

/* Sizes the wire messages, the scheduler and the node agent all check. */
#define VHPC_MAX_GUESTS 256
#define VHPC_MAX_VCPUS  256
#define VHPC_MAX_NODES  64
/* VXLAN network identifiers are 24 bits. */
#define VHPC_VNI_MAX    ((1u << 24) - 1)

/* Where images keep vhpc's programs (mpirun's --prefix-free launch relies
 * on it), and where a guest finds the job's vmshm region. */
#define VHPC_GUEST_BIN        "/usr/local/bin"
#define VHPC_VMSHM_GUEST_PATH "/run/vhpc-vmshm"
/* Where images keep the vmshm BTL (mca_btl_vmshm.so), outside Open MPI's
 * own component folder. */
#define VHPC_VMSHM_COMPONENT_DIR "/usr/local/lib/vhpc/openmpi"

#endif
