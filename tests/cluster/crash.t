#!/usr/bin/env bash
# timeout: 180
# Crashes on a 3-node cluster, each in the middle of a running job:
#  - kill -9 of vhpc-ctld, then a restart: the queue, the running job and
#    the nodes are recovered from SQLite; the job's guests keep running (the
#    same processes: re-adopted, not restarted) and it completes with all of
#    its output, once;
#  - kill -9 of the vhpcd of the job's guest-0 node, then a restart: it
#    takes the job over and the job completes, its output whole;
#  - a node killed (its vhpcd and its namespace gone): it is marked down
#    after missed heartbeats, the job ends NODE_FAIL and the other node
#    removes its part; the node comes back after its "reboot";
#  - a node's vhpcd killed and the job's mpirun failing right after:
#    NODE_FAIL too, not mpirun's exit status.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
CL=vcc$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 3 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
for i in 1 2 3; do cl_node_up $i || fail "node $i starts"; done
check "three nodes register" cl_wait_nodes_up 3

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
# A job that writes 12 numbered lines per guest, over about 6 s.
TICKS='for i in $(seq 12); do echo "$(hostname) tick $i"; sleep 0.5; done'
# guest init pids of a job, from the node agents' job dirs
guest_pids() { for f in "$CL_DIR"/run-n*/jobs/"$1"x*/g*/pid; do [ -f "$f" ] && echo "$(cat "$f")"; done | sort | tr '\n' ' '; }
wait_output() {  # ID: until some output arrived
	for _ in $(seq 100); do [ "$(job_field "$1" output_bytes)" -gt 0 ] 2>/dev/null && return 0; sleep 0.1; done
	return 1
}

# -- kill -9 of the controller right after it accepted jobs (queued or
#    starting): a job it answered for is never lost
A=$(sub -N 2 --vcpus 1 -- sh -c 'echo accepted-then-crash')
JB=$(sub -N 1 --vcpus 1 -- sh -c 'echo second')
cl_ctld_kill KILL
cl_ctld_up
check "jobs accepted just before a kill -9 are there after the restart" test -n "$(job_state "$A")" -a -n "$(job_state "$JB")"
check "... and complete" wait_state "$A" COMPLETED 30 && wait_state "$JB" COMPLETED 30
check_match "... with their output" 'accepted-then-crash.*accepted-then-crash' "$(vc output "$A" | tr '\n' ' ')"

# -- kill -9 of the controller mid-job
J=$(sub -N 2 --vcpus 1 --timeout 120 -- sh -c "$TICKS")
check "job $J runs" wait_state "$J" RUNNING 30
P=$(sub -N 3 --vcpus 1 -- sh -c 'echo queued-before-the-crash')
check "some of its output has arrived" wait_output "$J"
pids=$(guest_pids "$J")
check_match "its two guests' inits ($pids)" '^[0-9]+ [0-9]+ $' "$pids"
cl_ctld_kill KILL
check "vhpc-ctld is gone (kill -9)" test ! -d /proc/$CTLD_PID
sleep 1
check_eq "the guests run on without it" "$pids" "$(for p in $pids; do [ -d /proc/$p ] && echo -n "$p "; done)"
cl_ctld_up
check "vhpc-ctld restarts on the same state" grep -q "recovered 3 nodes and 4 jobs" "$CL_DIR/ctld.log"
check_match "it re-attaches to the running job" "job $J: was running; re-attaching" "$(cat "$CL_DIR/ctld.log")"
check_eq "the job is still RUNNING" RUNNING "$(job_state "$J")"
check_eq "the queued job is still queued" PENDING "$(job_state "$P")"
check "the nodes are known and up again" cl_wait_nodes_up 3
check_eq "the same guest processes run (re-adopted, not restarted)" "$pids" "$(guest_pids "$J")"
vc wait "$J"
check_eq "the job completes with exit status 0" 0 "$?"
vc output "$J" >"$T/j1.out"
check "its output is whole: every line of both guests, each once" cl_ticks_ok "$T/j1.out"
check "the job queued before the crash runs after it" wait_state "$P" COMPLETED 30
check_match "... with its output" queued-before-the-crash "$(vc output "$P")"

# -- kill -9 of the vhpcd of guest 0's node, mid-job
J=$(sub -N 2 --vcpus 1 --timeout 120 -- sh -c "$TICKS")
check "job $J runs" wait_state "$J" RUNNING 30
check "some of its output has arrived" wait_output "$J"
n0=$(job_json "$J" | grep -o '"guest":0,"node":"n[0-9]"' | sed 's/.*"n\([0-9]\)"/\1/')
pids=$(guest_pids "$J")
cl_node_kill "$n0" KILL
sleep 1
check_eq "node $n0's vhpcd is dead, the guests run on" "$pids" "$(for p in $pids; do [ -d /proc/$p ] && echo -n "$p "; done)"
cl_node_up "$n0"
check_match "the restarted vhpcd takes the job over" "job $J \([0-9a-z]+\): taken over after a restart: 1 guest, running" "$(cat "$CL_DIR/n$n0.log")"
check_match "... and re-attaches to its mpirun" "job $J: re-attached to mpirun in g0" "$(cat "$CL_DIR/n$n0.log")"
check_eq "the same guest processes run" "$pids" "$(guest_pids "$J")"
vc wait "$J"
check_eq "the job completes with exit status 0" 0 "$?"
vc output "$J" >"$T/j2.out"
check "its output is whole: every line of both guests, each once" cl_ticks_ok "$T/j2.out"

# -- a node dies mid-job: its vhpcd and its namespace are gone
J=$(sub -N 2 --vcpus 1 --timeout 120 -- sleep 100)
check "job $J runs" wait_state "$J" RUNNING 30
nodes=$(job_json "$J" | grep -o '"guest":[01],"node":"n[0-9]"' | sed 's/.*"n\([0-9]\)"/\1/' | tr '\n' ' ')
live=$(echo $nodes | cut -d' ' -f1); dead=$(echo $nodes | cut -d' ' -f2)
diag "job $J on nodes $nodes; killing node $dead"
cl_node_kill "$dead" KILL
ip netns del "$CL-n$dead"
t0=$(date +%s%N)
check "the job ends NODE_FAIL" wait_state "$J" NODE_FAIL 20
diag "NODE_FAIL after $(( ($(date +%s%N) - t0) / 1000000 )) ms (heartbeats every 500 ms, 6 may be missed)"
check_match "the reason names the node and the missed heartbeats" "node n$dead failed: no heartbeat" "$(job_json "$J")"
vc wait "$J" 2>/dev/null
check_eq "vhpc wait says it failed (125)" 125 "$?"
check_match "the node is down" "n$dead +down" "$(vc nodes)"
for _ in $(seq 50); do [ -z "$(ls "$CL_DIR/run-n$live/jobs")" ] && break; sleep 0.1; done
check_eq "the surviving node removed its part" "" "$(ls "$CL_DIR/run-n$live/jobs")"
# (node ids are the order the nodes first registered in: n1 is 1, ...)
check_eq "... no netns of the job on it" 0 "$(ls /run/netns | grep -cE "^vhpc-${J}x${live}(-[0-9]+)?\$")"
# The dead node's guests are still processes of this machine: what its
# reboot would end, its cleanup ends here.
VHPC_RUN_DIR=$CL_DIR/run-n$dead "$BIN/vhpc-na" cleanup >/dev/null 2>&1
cl_node_net "$dead"
cl_node_up "$dead"
check "the node comes back after its reboot" cl_wait_nodes_up 3
check_eq "a job can use it again" 0 "$(vc run -N 3 --vcpus 1 -- true >/dev/null 2>&1; echo $?)"

# -- a node's vhpcd dies and the job's mpirun fails right after (CI saw
#    exit 255 about 3 s after a node went, before it missed its
#    heartbeats): the failed exit is held until that node is heard from
#    again, and as it is not, the job ends NODE_FAIL, not COMPLETED with
#    mpirun's status.  Rank 0 exits 3 once the test makes a file, 1.2 s
#    after the kill; mpirun takes about 4 s to end after that, so the
#    controller allows 20 missed heartbeats (10 s) here, so that its exit
#    is always reported before the node is marked down.
cl_ctld_kill TERM
CL_HB_MISSES=20 cl_ctld_up
check "the nodes are up under a vhpc-ctld that allows 20 missed heartbeats" cl_wait_nodes_up 3
GO=$(mktemp -d /tmp/vhpct-go.XXXXXX)
chmod 755 "$GO"
at_exit "rm -rf '$GO'"
J=$(sub -N 2 --vcpus 1 --timeout 120 --bind "$GO:/go:ro" -- \
	sh -c 'while [ ! -e /go/now ]; do sleep 0.1; done; exit 3')
check "job $J runs" wait_state "$J" RUNNING 30
nodes=$(job_json "$J" | grep -o '"guest":[01],"node":"n[0-9]"' | sed 's/.*"n\([0-9]\)"/\1/' | tr '\n' ' ')
live=$(echo $nodes | cut -d' ' -f1); dead=$(echo $nodes | cut -d' ' -f2)
from=$(log_lines "$CL_DIR/ctld.log")
cl_node_kill "$dead" KILL
sleep 1.2
touch "$GO/now"
check "the job ends NODE_FAIL" wait_state "$J" NODE_FAIL 30
check_match "mpirun's failed exit was held for the dead node" "job $J: exit status [0-9]+ held until node n$dead is heard from" \
	"$(tail -n +$((from + 1)) "$CL_DIR/ctld.log")"
check_match "the reason names the node" "node n$dead failed: no heartbeat" "$(job_json "$J")"
vc wait "$J" 2>/dev/null
check_eq "vhpc wait says it failed (125)" 125 "$?"
VHPC_RUN_DIR=$CL_DIR/run-n$dead "$BIN/vhpc-na" cleanup >/dev/null 2>&1
cl_node_up "$dead"
check "the node comes back again" cl_wait_nodes_up 3

for i in 1 2 3; do
	for _ in $(seq 50); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "nothing is left of any job" "$before" "$(cl_leftovers)"
done_testing
