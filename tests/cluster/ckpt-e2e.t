#!/usr/bin/env bash
# timeout: 200
# vhpc checkpoint through vhpc-ctld to a real vhpcd with container guests
# (loopback cluster of one node).  On this project's machines a node
# refuses every container job's `check` (Debian 12's CRIU cannot read a
# 6.13+ kernel's vDSO; nodeagent/README.md), and where CRIU could check,
# the node does not save yet: either way the user gets the node's reason,
# no checkpoint is listed, and the job runs on untouched: it completes with
# every line of its output, in order, nothing paused for long and nothing
# left behind.  Another user may not checkpoint it.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
command -v setpriv >/dev/null || skip_all "setpriv is not installed"
CL=vce$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 1 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
cl_node_up 1 || fail "node 1 starts"
check "the node registers" cl_wait_nodes_up 1
# Job numbers other test clusters do not reach (cgroups are named after them).
for ((k = 0; k < 50; k++)); do
	id=$(vc submit --json -N 9 -- true 2>/dev/null | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
	[ -n "$id" ] && vc cancel "$id" >/dev/null 2>&1
done

J=$(vc submit --json -N 1 -n 1 --vcpus 1 -- sh -c 'i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo "line $i"; sleep 0.5; done' |
	sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
check "a job of one container guest runs" wait_state "$J" RUNNING 60
writes() { vc output "$J" 2>/dev/null | grep -q 'line 2'; }
check "... and writes" poll_until 20 writes

out=$(as_nobody "$BIN/vhpc" checkpoint "$J" 2>&1); rc=$?
check_eq "another user may not checkpoint it" 125 "$rc"
check_match "... told why" "permission denied" "$out"

out=$(vc checkpoint "$J" 2>&1); rc=$?
diag "$out"
check_eq "vhpc checkpoint of the job fails" 125 "$rc"
check_match "... with node n1's reason (CRIU cannot on this host, or saving is not there yet)" \
	"(cannot be checkpointed: node n1: .*(CRIU|criu|pod).*nothing was changed|checkpoint failed: saving on node n1: .*; the job runs on)" "$out"
check_eq "no checkpoint is listed" "" "$(vc checkpoints --json | tr -d ' \n[]')"
check "the job runs on" wait_state "$J" COMPLETED 60
check_eq "... with exit status 0" 0 "$(job_field "$J" exit_status)"
check_eq "... and every line of its output, in order" "$(seq 1 40 | sed 's/^/line /' | paste -sd,)" "$(vc output "$J" 2>&1 | paste -sd,)"
check "its node removes it" cl_wait_nodes_idle 30
mine() { grep -E '^(n[0-9]|mounts) '; }
check_eq "nothing of the job is left" "$(echo "$before" | mine)" "$(cl_leftovers | mine)"
done_testing
