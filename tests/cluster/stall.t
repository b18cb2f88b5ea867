#!/usr/bin/env bash
# timeout: 240
# A busy or frozen machine is no node failure.
#  - vhpc-ctld frozen (SIGSTOP) for twice its heartbeat limit while a job
#    runs, as a VM's host or an overloaded machine freezes it: on waking it
#    credits the nodes with the time it did not run, so neither node is
#    marked down and the job goes on and completes.  Before, both nodes
#    were "down" the moment it ran again and the job ended NODE_FAIL.
#  - a node that really dies while the controller is frozen is still
#    found, one heartbeat limit after the controller wakes.
#  - with every core of this machine busy (a CPU hog of 2 x the cores), a
#    2-node job starts, runs and completes, and no node misses its
#    heartbeats.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
CL=vst$$
. "$(dirname "$0")/cluster-lib.sh"

# heartbeat every 500 ms, limit 6 x 500 ms = 3 s (cluster-lib's defaults)
cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
for i in 1 2; do cl_node_up $i || fail "node $i starts"; done
check "two nodes register" cl_wait_nodes_up 2
sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }

# -- the controller frozen for 6 s, twice the limit
# Job A runs until the test lets it end (a file in the folder it was
# submitted from, which its guests share; 60 s at most), not for a fixed
# 12 s that the checks below had to fit in.
AW=$CL_DIR/job-a
mkdir -p "$AW"
A=$(cd "$AW" && sub -N 2 --vcpus 1 -- sh -c 'i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; echo done-$(hostname)')
check "job A runs" wait_state "$A" RUNNING 60
kill -STOP "$CTLD_PID"
sleep 6
kill -CONT "$CTLD_PID"
sleep 2
check "the controller says it stalled" grep -q "did not run for [0-9]* ms" "$CL_DIR/ctld.log"
check "no node was marked down" bash -c "! grep -q 'no heartbeat for' '$CL_DIR/ctld.log'"
check_eq "both nodes are up" 2 "$(cl_nodes_up)"
check "job A still runs" job_state_is "$A" RUNNING
touch "$AW/go"
check "job A completes" wait_state "$A" COMPLETED 60
check_eq "... with both guests' output" 2 "$(vc output "$A" | grep -c '^done-')"

# -- a node that dies while the controller is frozen is still found
B=$(sub -N 2 --vcpus 1 -- sleep 600)
check "job B runs" wait_state "$B" RUNNING 60
kill -STOP "$CTLD_PID"
cl_node_kill 2 KILL
sleep 5
kill -CONT "$CTLD_PID"
check "node 2, dead, is marked down after the limit" poll_until 10 grep -q "no heartbeat for" "$CL_DIR/ctld.log"
check "job B ends NODE_FAIL" wait_state "$B" NODE_FAIL 30
cl_node_up 2 || fail "node 2 starts again"
check "node 2 is back" cl_wait_nodes_up 2

# -- every core busy
hog=()
for _ in $(seq $((2 * $(nproc)))); do
	sh -c 'while :; do :; done' &
	hog+=($!)
done
at_exit "kill ${hog[*]} 2>/dev/null"
from=$(log_lines "$CL_DIR/ctld.log")
C=$(sub -N 2 --vcpus 1 -- sh -c 'for i in 1 2 3 4 5; do sleep 1; done; echo hog-$(hostname)')
check "under the CPU hog, a 2-node job completes" wait_state "$C" COMPLETED 120
check_eq "... with both guests' output" 2 "$(vc output "$C" | grep -c '^hog-')"
check "... and no node missed its heartbeats" bash -c "! tail -n +$((from + 1)) '$CL_DIR/ctld.log' | grep -q 'no heartbeat for'"
kill "${hog[@]}" 2>/dev/null
wait "${hog[@]}" 2>/dev/null
done_testing
