#!/usr/bin/env bash
# timeout: 600
# needs: hardware-virtualization
# lab-prepare: tests/kvm/compact-images
# A kvm cluster job whose guests share a node (see kvm.t): 2 nodes, vhpcd
# in two network namespaces, in the virtualization lab where the host has
# no VT-x/AMD-V; node 1 has two cores, node 2 one, so of three 1-vCPU
# guests the scheduler packs g0 and g1 on node 1 and g2 on node 2:
#  - node 1 alone creates a vmshm region, and its two VMs map it (ivshmem);
#  - ranks 0 and 1 (g0, g1: one node) talk through the vmshm BTL: Open
#    MPI's bml says so, and the BTL's own counters show the PingPong's
#    bytes went through its rings, sent and received alike;
#  - rank 2 (g2, the other node) talks TCP to both and never vmshm;
#  - nothing of the job is left (region file included).
# Times here are nested/TCG.
. "$(dirname "$0")/../lib.sh"
[ "$(nproc)" -ge 2 ] || skip_all "node 1 needs two cpus of this machine for its two guests"
CL=vcm$$
KVM_NODE_ARGS_1="--cpus 0-1"
. "$(dirname "$0")/kvm-lib.sh"

# guests_on J: "g<i>:n<k>" for each guest, in guest order
guests_on() { job_json "$1" | grep -o '"guest":[0-9]*,"node":"n[0-9]"' | sed 's/"guest":\([0-9]*\),"node":"\(n[0-9]\)"/g\1:\2/' | sort | tr '\n' ' ' | sed 's/ $//'; }
# counter RANK PEER FIELD: one field of rank RANK's vmshm-stats line for PEER
counter() { sed -n "s/.*rank $1\] vmshm-stats: peer $2 slot [0-9]* .*$3 \([0-9]*\).*/\1/p" "$T/j.out" | head -1; }
# imb_row BENCH NP BYTES: that row of the IMB table of BENCH at NP processes
imb_row() {
	awk -v b="$1" -v np="$2" -v sz="$3" '
		/^# Benchmarking / { cur = $3 } /^# #processes = / { p = $4 }
		cur == b && p == np && $1 == sz && NF >= 4 { print; exit }' "$T/job.imb"
}
# bml HOST BTL RANK: how often Open MPI in guest HOST chose BTL for RANK
# (-o: lines of two ranks may share one line of the spool)
bml() { grep -oE "\[$1:[0-9]+\] mca: bml: Using $2 btl for send to \[\[[0-9]+,1\],$3\]" "$T/j.out" | wc -l; }

# Reps and sizes (0 and 1 KiB) fix the PingPong's payload each way between
# ranks 0 and 1, the floor for what vmshm's counters must show.  Few of
# them: three guests booting take two minutes here, and a rank waiting in
# a barrier spins on the core of a guest of the other node.
REPS=200
PAYLOAD=$(( REPS * 1024 ))
t0=$(date +%s%N)
J=$(sub --driver kvm -N 3 -n 3 --vcpus 1 --mem 384M --timeout 600 \
	-x OMPI_MCA_btl_base_verbose=1 -x OMPI_MCA_btl_vmshm_stats=1 -- \
	vhpc-mpibench -msglog 10:10 -iter $REPS PingPong Sendrecv)
check_match "the job is accepted" '^[0-9]+$' "$J"
check "job $J runs" wait_state "$J" RUNNING 200
diag "submit to RUNNING: $(( ($(date +%s%N) - t0) / 1000000 )) ms (three VMs booting, nested/TCG)"
check_eq "g0 and g1 share node 1, g2 is on node 2" "g0:n1 g1:n1 g2:n2" "$(guests_on "$J")"
pids=$(hv_pids "$J")
check_match "three vhpc-hv ($pids)" '^[0-9]+ [0-9]+ [0-9]+ $' "$pids"
check_match "node 1 made a vmshm region for the job's 3 ranks" \
	"job [0-9a-z]+x[0-9a-z]+: vmshm region /[^ ]*/jobs/[0-9a-z]+x[0-9a-z]+/vmshm/region \(.*, 2 MiB pages, memory on node 0\) for 3 ranks" "$(cat "$CL_DIR/n1.log")"
region=$(sed -n 's/.*: vmshm region \(\/[^ ]*\) .*/\1/p' "$CL_DIR/n1.log" | head -1)
check "... which is there while the job runs ($region)" test -n "$region" -a -f "$region"
check_eq "node 2, with one guest, made none" 0 "$(grep -c 'vmshm region' "$CL_DIR/n2.log")"
vc wait "$J"
check_eq "the job completes with exit status 0" 0 "$?"
diag "submit to done: $(( ($(date +%s%N) - t0) / 1000000 )) ms (nested/TCG)"
vc output "$J" >"$T/j.out"
grep -av '^\[' "$T/j.out" >"$T/job.imb"
check "PingPong at 2 and Sendrecv at 2 and 3 ranks ran" \
	vhpc-imbcheck -iter $REPS -expect PingPong@2 -expect Sendrecv@2 -expect Sendrecv@3 "$T/job.imb"

# -- one node: vmshm -------------------------------------------------------
check_eq "g0's rank 0 reaches rank 1 (g1, same node) by vmshm, never tcp" "1 0" "$(bml g0 vmshm 1) $(bml g0 tcp 1)"
check_eq "g1's rank 1 reaches rank 0 (g0, same node) by vmshm, never tcp" "1 0" "$(bml g1 vmshm 0) $(bml g1 tcp 0)"
# bml only says what was chosen; the BTL's counters say what it carried.
tx01=$(counter 0 1 tx_bytes); rx10=$(counter 1 0 rx_bytes)
tx10=$(counter 1 0 tx_bytes); rx01=$(counter 0 1 rx_bytes)
diag "vmshm counters: 0->1 sent ${tx01:-none} received ${rx10:-none}; 1->0 sent ${tx10:-none} received ${rx01:-none} (PingPong payload $PAYLOAD each way)"
check "rank 0 sent rank 1 at least the PingPong's $PAYLOAD bytes through vmshm (${tx01:-none})" \
	test "${tx01:-0}" -ge "$PAYLOAD"
check "and rank 1 sent rank 0 as much back (${tx10:-none})" test "${tx10:-0}" -ge "$PAYLOAD"
check "every byte rank 0 put in the ring, rank 1 took out" test -n "$tx01" -a "$tx01" = "$rx10"
check "and the other way" test -n "$tx10" -a "$tx10" = "$rx01"

# -- two nodes: tcp --------------------------------------------------------
check_eq "g0 and g1 send to rank 2 (g2, other node) by tcp" "1 1" "$(bml g0 tcp 2) $(bml g1 tcp 2)"
check_eq "g2's rank 2 sends to ranks 0 and 1 by tcp" "1 1" "$(bml g2 tcp 0) $(bml g2 tcp 1)"
check_eq "no vmshm to or from rank 2" "0 0 0 0" \
	"$(bml g0 vmshm 2) $(bml g1 vmshm 2) $(grep -oE '\[g2:[0-9]+\] mca: bml: Using vmshm' "$T/j.out" | wc -l) $(grep -cE 'rank 2\] vmshm-stats|vmshm-stats: peer 2 ' "$T/j.out")"
diag "nested/TCG, not performance: PingPong 0<->1 (vmshm):" \
	"$(imb_row PingPong 2 0)" "$(imb_row PingPong 2 1024)" \
	"Sendrecv 2 ranks (vmshm only) and 3 ranks (two of the three hops tcp across nodes):" \
	"$(imb_row Sendrecv 2 1024)" "$(imb_row Sendrecv 3 1024)"

for i in 1 2; do
	for _ in $(seq 100); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "no vhpc-hv of the job is left" "" "$(alive "$pids")"
check "the region file is gone" test -n "$region" -a ! -e "$region"
check_eq "nothing is left of the job" "$before" "$(cl_leftovers)"
lab_check "$CL_DIR"/*.log "$T"/*.out
done_testing
