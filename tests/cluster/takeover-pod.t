#!/usr/bin/env bash
# timeout: 120
# A vhpcd killed (-9) while a job's two container guests share its node,
# and so the job's pod (one user and PID namespace, for the vmshm BTL's
# single copy): the restarted vhpcd takes over the guests and the pod's
# init as well (found in cgroup vhpc/<job>/pod, checked to be the
# guests'), so the job's own teardown ends it, not a sweep for leftovers.
# One node with two cores, so both 1-vCPU guests land on it.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
[ "$(nproc)" -ge 2 ] || skip_all "the node needs two cpus of this machine for its two guests"
CL=vcp$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 1 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
cl_node_up 1 --cpus 0-1 || fail "node 1 starts with two cpus"
check "the node registers" cl_wait_nodes_up 1

TICKS='for i in $(seq 12); do echo "$(hostname) tick $i"; sleep 0.5; done'
J=$(vc submit --json -N 2 --vcpus 1 --timeout 120 -- sh -c "$TICKS" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
check "job $J runs" wait_state "$J" RUNNING 30
for _ in $(seq 100); do [ "$(job_field "$J" output_bytes)" -gt 0 ] 2>/dev/null && break; sleep 0.1; done
local_id=$(sed -n "s/.*job $J (\([0-9a-z]*\)).*/\1/p" "$CL_DIR/n1.log" | head -1)
check_match "the node names the job's local id" '^[0-9a-z]+x[0-9a-z]+$' "$local_id"
pod=$(pgrep -x vhpc-pod | while read -r p; do grep -q ":/vhpc/$local_id/pod\$" /proc/$p/cgroup 2>/dev/null && echo $p; done)
check_match "both guests are on the node, so the job has a pod" '^[0-9]+$' "$pod"
inits=$(for f in "$CL_DIR"/run-n1/jobs/"$local_id"/g*/pid; do echo -n "$(cat "$f") "; done)
check_match "two guest inits" '^[0-9]+ [0-9]+ $' "$inits"
for p in $inits; do
	check_eq "guest init $p is in the pod's PID namespace" "$(readlink /proc/$pod/ns/pid)" "$(readlink /proc/$p/ns/pid)"
done

cl_node_kill 1 KILL
sleep 0.5
check "the pod outlives its vhpcd" alive $pod
cl_node_up 1 --cpus 0-1
check_match "the restarted vhpcd takes the job over" "job $J \([0-9a-z]+\): taken over after a restart: 2 guests, running" "$(cat "$CL_DIR/n1.log")"
check_match "... and its pod, the same process" "job $local_id: its guests' pod is pid $pod\$" "$(cat "$CL_DIR/n1.log")"
vc wait "$J"
check_eq "the job completes with exit status 0" 0 "$?"
vc output "$J" >"$T/j.out"
check "its output is whole: every line of both guests, each once" cl_ticks_ok "$T/j.out"
for _ in $(seq 50); do [ -z "$(ls "$CL_DIR/run-n1/jobs")" ] && break; sleep 0.1; done
for _ in $(seq 50); do gone $pod && break; sleep 0.1; done
check "the pod's init is gone with the job" gone $pod
check_eq "no cgroup of the pod is left" "" "$(find /sys/fs/cgroup -maxdepth 4 -type d -path "*/vhpc/$local_id*")"
check_eq "nothing is left of the job" "$before" "$(cl_leftovers)"
done_testing
