#!/usr/bin/env bash
# timeout: 600
# needs: hardware-virtualization
# lab-prepare: tests/kvm/compact-images
# A cluster job with kvm guests on a 2-node cluster (vhpcd in two network
# namespaces; in the virtualization lab where the host has no VT-x/AMD-V):
#  - the guests boot the image's kernel on both nodes and mpirun in g0
#    starts g1's ranks across the VXLAN job network (TCP between nodes, no
#    vmshm: the guests are on different nodes);
#  - the detached mpirun's output comes back over the guest channel;
#  - kill -9 of the vhpcd of guest 0's node, then a restart: it takes the
#    VMs over (the same vhpc-hv processes) and the job completes with its
#    output whole;
#  - nothing of the job is left.
# A node lost mid-job: kvm-nodefail.t; two guests on one node, vmshm
# between them: kvm-vmshm.t (one lab VM per file, so a lab crash costs one
# short retry).
# Times here are nested/TCG.
. "$(dirname "$0")/../lib.sh"
CL=vck$$
. "$(dirname "$0")/kvm-lib.sh"
# 12 numbered lines per guest, one a second: each guest's rank prints its
# own; then a PingPong across the nodes, 20 repetitions a size: in the
# lab its half round trip over TCP took 7.4-11.7 ms (nested/TCG), so the
# default 1000 took about 3 minutes, and CI's slower lab ran out of time.
TICKS='for i in $(seq 12); do echo "$(hostname) tick $i"; sleep 1; done'
has_output() { [ "$(job_field "$1" output_bytes)" -gt 0 ] 2>/dev/null; }
wait_output() {  # ID
	poll_until 60 has_output "$1"
}

# -- a kvm job across the two nodes, and a vhpcd restart under it --------
t0=$(date +%s%N)
J=$(sub "${KVM[@]}" -x OMPI_MCA_btl_base_verbose=1 -- sh -c "$TICKS; exec vhpc-mpibench -msglog 0:6 -iter 20 PingPong")
check_match "the job is accepted" '^[0-9]+$' "$J"
check "job $J runs" wait_state "$J" RUNNING 200
diag "submit to RUNNING: $(( ($(date +%s%N) - t0) / 1000000 )) ms (two VMs booting, nested/TCG)"
check_eq "one guest on each node" "n1 n2" \
	"$(job_json "$J" | grep -o '"guest":[01],"node":"n[0-9]"' | sed 's/.*"\(n[0-9]\)"/\1/' | sort | tr '\n' ' ' | sed 's/ $//')"
check "some of its output has arrived" wait_output "$J"
pids=$(hv_pids "$J")
check_match "two vhpc-hv ($pids)" '^[0-9]+ [0-9]+ $' "$pids"
n0=$(job_json "$J" | grep -o '"guest":0,"node":"n[0-9]"' | sed 's/.*"n\([0-9]\)"/\1/')
cl_node_kill "$n0" KILL
sleep 1
check_eq "node $n0's vhpcd is dead (kill -9), the VMs run on" "$pids" "$(alive "$pids")"
cl_node_up "$n0"
log=$(cat "$CL_DIR/n$n0.log")
check_match "the restarted vhpcd takes the VM over" "guest g0: vhpc-hv pid [0-9]+ taken over" "$log"
check_match "... and the job" "job $J \([0-9a-z]+\): taken over after a restart: 1 guest, running" "$log"
check_match "... and re-attaches to its mpirun" "job $J: re-attached to mpirun in g0" "$log"
check_eq "the same vhpc-hv processes run" "$pids" "$(hv_pids "$J")"
vc wait "$J"
check_eq "the job completes with exit status 0" 0 "$?"
vc output "$J" >"$T/j1.out"
check "its output is whole: every line of both guests, each once" cl_ticks_ok "$T/j1.out"
check "the PingPong across the nodes ran" vhpc-imbcheck -iter 20 -expect PingPong@2 "$T/j1.out"
check_match "the ranks talk TCP between the nodes" "Using tcp btl" "$(cat "$T/j1.out")"
check_eq "and never vmshm (no two guests share a node)" 0 "$(grep -c 'Using vmshm btl' "$T/j1.out")"
for i in 1 2; do
	for _ in $(seq 100); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "no vhpc-hv of the job is left" "" "$(alive "$pids")"

check_eq "nothing is left of the job" "$before" "$(cl_leftovers)"
done_testing
