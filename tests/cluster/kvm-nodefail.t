#!/usr/bin/env bash
# timeout: 400
# needs: hardware-virtualization
# lab-prepare: tests/kvm/compact-images
# A kvm cluster job that loses a node (see kvm.t): 2 nodes, vhpcd in two
# network namespaces, in the virtualization lab where the host has no
# VT-x/AMD-V:
#  - the node of guest 1 dies mid-job (its vhpcd and namespace gone): the
#    job ends NODE_FAIL, the other node removes its part, nothing is left.
# Times here are nested/TCG.
. "$(dirname "$0")/../lib.sh"
CL=vcf$$
. "$(dirname "$0")/kvm-lib.sh"

# -- a node lost mid-job ---------------------------------------------------
J=$(sub "${KVM[@]}" -- sleep 600)
check "job $J runs" wait_state "$J" RUNNING 180
nodes=$(job_json "$J" | grep -o '"guest":[01],"node":"n[0-9]"' | sed 's/.*"n\([0-9]\)"/\1/' | tr '\n' ' ')
live=$(echo $nodes | cut -d' ' -f1); dead=$(echo $nodes | cut -d' ' -f2)
pids=$(hv_pids "$J")
cl_node_kill "$dead" KILL
ip netns del "$CL-n$dead"
check "the job ends NODE_FAIL" wait_state "$J" NODE_FAIL 30
check_match "the reason names the node" "node n$dead failed" "$(job_json "$J")"
for _ in $(seq 100); do [ -z "$(ls "$CL_DIR/run-n$live/jobs")" ] && break; sleep 0.1; done
check_eq "the surviving node removed its part" "" "$(ls "$CL_DIR/run-n$live/jobs")"
# The dead node's VM is still a process of this machine: what its reboot
# would end, its cleanup ends here.
VHPC_RUN_DIR=$CL_DIR/run-n$dead "$BIN/vhpc-na" cleanup >/dev/null 2>&1
check_eq "no vhpc-hv of the job is left" "" "$(alive "$pids")"
cl_node_net "$dead"
check_eq "nothing is left of the job" "$before" "$(cl_leftovers)"
done_testing
