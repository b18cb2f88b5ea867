#!/usr/bin/env bash
# timeout: 400
# lab-kernel: 7.3.4+deb13-amd64
# MPI in container guests on the fabric, by counters: `vhpc run --rdma`
# gives the ranks ob1 with vmshm and the ofi BTL over verbs
# (scheduler/launch.c).  Two guests, a rank each, PingPong between them:
#   --rdma:            the guests share a host, so vmshm carries the bytes
#                      (its counters) and their fabric interfaces do not;
#   --rdma --no-vmshm: the path a pair a host apart takes, verbs: the bml
#                      takes ofi, each guest's fabric interface (fab0, RoCE
#                      only) sent at least the bytes its rank sent, its rxe
#                      device a packet per 4 KiB or more, the job network
#                      (eth0, TCP) a small part; over the fabric link's
#                      jumbo frames (rxe MTU 4096), whose larger rxd
#                      pools need the guest's RLIMIT_MEMLOCK;
#   --no-rdma:         tcp over the job network, no fabric interface at all.
# The embedded scheduler places every guest on this machine: guests on two
# hosts need the cluster's fabric (not tested here yet; mpi-native.t runs
# the same transport between two node namespaces).
. "$(dirname "$0")/../integration/common.sh"
. "$(dirname "$0")/fabric-lib.sh"
fab_need
[ -e "$VHPC_TOP/$B/lib/vhpc/openmpi/mca_btl_vmshm.so" ] || skip_all "the vmshm BTL is not built"

fab_local_cluster 310-319 10.215.0.0/16

# job NAME ARGS...: the two-guest job; its output in $T/NAME.
job() {
	local name=$1; shift
	(cd "$T" && timeout -k 5 200 vhpc run -N 2 -n 2 --driver container "$@" --bind "$FAB_RANK_DIR:/t:ro" \
		-x OMPI_MCA_btl_vmshm_stats=1 -x OMPI_MCA_btl_base_verbose=1 -- /bin/sh /t/rank-counters.sh) >"$T/$name" 2>&1
	rc=$?
	[ $rc = 0 ] || diag "$(tail -n 25 "$T/$name")"
}
vmshm_tx() { sed -n "s/.*rank $2\] vmshm-stats: peer $3 slot [0-9]* .*tx_bytes \([0-9]*\).*/\1/p" "$T/$1" | head -1; }
before=$(resource_counts)

job vmshm --rdma
check_eq "--rdma: the job ends well" 0 $rc
b=$(pingpong_bytes "$T/vmshm")
check "... rank 0 sent bytes in PingPong ($b)" test "$b" -gt 0
check "... vmshm carried them between the co-located guests (rank 0 to 1: $(vmshm_tx vmshm 0 1) B)" \
	test "$(vmshm_tx vmshm 0 1)" -ge "$b"
check_match "... the bml took vmshm" 'Using vmshm btl' "$(cat "$T/vmshm")"
f=$(rank_field "$T/vmshm" 0 fab0)
check "... and the fabric interface did not ($f B sent)" test "$f" != - -a "$f" -lt $((b / 10))

job ofi --rdma --no-vmshm
check_eq "--rdma --no-vmshm: the job ends well" 0 $rc
check_ranks_on_verbs "$T/ofi" "of one machine, --no-vmshm"
check "... and vmshm nothing" sh -c "! grep -q 'vmshm-stats' '$T/ofi'"

job tcp --no-rdma --no-vmshm
check_eq "--no-rdma: the job ends well" 0 $rc
check_match "... the bml took tcp" 'Using tcp btl' "$(cat "$T/tcp")"
check_eq "... no fabric interface, no RDMA device in the guests" "- -" "$(rank_field "$T/tcp" 0 fab0) $(rank_field "$T/tcp" 0 rxe-pkts)"
check "... the job network carried the bytes" test "$(rank_field "$T/tcp" 0 eth0)" -ge "$(pingpong_bytes "$T/tcp")"
check_counts "nothing of the jobs is left (netns, links, cgroups, mounts)" "$before"
check_eq "... and no RDMA link" "" "$(rdma link show 2>/dev/null | grep 'vhpc-')"
done_testing
