#!/usr/bin/env bash
# timeout: 150
# Gang scheduling on a 3-node cluster of one core per node: a job that
# needs more than is free waits with none of its guests started; a short
# job backfills because it ends before the waiting head could start, a long
# one does not; FIFO otherwise; a job that can never fit says so; a job
# whose start fails on one node is torn down on the others and requeued,
# and then starts.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
CL=vcg$$
. "$(dirname "$0")/cluster-lib.sh"

cl_net_up 3 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
for i in 1 2 3; do cl_node_up $i || fail "node $i starts"; done
check "three nodes of one core each register" cl_wait_nodes_up 3

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
reason() { job_json "$1" | sed -n 's/.*"reason":"\([^"]*\)".*/\1/p'; }
# netns of a job's guests on any node: none while it waits
guest_ns() { ls /run/netns | grep -cE "^vhpc-$1x[0-9a-z]+-[0-9]+\$"; }

L=$(sub -N 2 --vcpus 1 --timeout 60 -- sleep 60)
check "L (2 nodes, 60 s limit) runs" wait_state "$L" RUNNING 30
H=$(sub -N 3 --vcpus 1 --timeout 20 -- true)
S2=$(sub -N 1 --vcpus 1 --timeout 600 -- true)
S=$(sub -N 1 --vcpus 1 --timeout 20 -- sh -c 'echo backfilled')
X=$(sub -N 4 --vcpus 1 -- true)
check "S (1 node, ends within 20 s, before L's limit) backfills and completes" wait_state "$S" COMPLETED 30
check_eq "... its output" backfilled "$(vc output "$S")"
check_eq "H (needs all 3 nodes) still waits" PENDING "$(job_state "$H")"
check_match "... and says why" 'waiting for resources' "$(reason "$H")"
check_eq "... with none of its guests started anywhere" 0 "$(guest_ns "$H")"
check_eq "S2 (600 s limit: it would delay H) does not backfill" PENDING "$(job_state "$S2")"
check_match "X (4 nodes on a 3-node cluster) waits and says it can never fit now" \
	'do not fit the up nodes even when they are idle' "$(reason "$X")"

vc cancel "$L" >/dev/null
check "with L gone, H starts (all 3 nodes at once) and completes" wait_state "$H" COMPLETED 30
check "then S2" wait_state "$S2" COMPLETED 30
hs=$(job_json "$H" | sed -n 's/.*"started":\([0-9]*\).*/\1/p')
s2s=$(job_json "$S2" | sed -n 's/.*"started":\([0-9]*\).*/\1/p')
check "FIFO: H started no later than S2 ($hs <= $s2s)" test -n "$hs" -a -n "$s2s" -a "$hs" -le "$s2s"
check_eq "H ran on all three nodes" '"n1" "n2" "n3"' "$(echo $(job_json "$H" | grep -o '"nodes":\[[^]]*\]' | grep -o '"n[0-9]"' | sort))"
vc cancel "$X" >/dev/null

# -- all or nothing: node 3's only core is taken behind the scheduler's
#    back (another agent's job in its run dir), so its part fails
blk=gb$$
VHPC_RUN_DIR=$CL_DIR/run-n3 "$BIN/vhpc-na" up --job "$blk" -N 1 --no-net \
	$( [ "$(nproc)" -gt 1 ] && echo --busy 1-$(( $(nproc) - 1 )) ) >"$CL_DIR/blk.out" 2>&1 &
bpid=$!
at_exit "kill $bpid 2>/dev/null"
check "another agent's job takes cpu 0, node 3's only core" wait_log "$CL_DIR/blk.out" '^ready$' 10
G=$(sub -N 3 --vcpus 1 --timeout 30 -- sh -c 'echo all three')
for _ in $(seq 100); do reason "$G" | grep -q requeued && break; sleep 0.1; done
check_match "a start that fails on one node requeues the job, naming the node and why" \
	'requeued after a failed start: node n3: .*(cpu|core)' "$(reason "$G")"
# (their job_stop follows the requeue; the retry waits 2 s)
no_guests() { for _ in $(seq 40); do [ "$(guest_ns "$1")" = 0 ] && return 0; sleep 0.05; done; return 1; }
check "the other nodes tore their part down (no guest of it anywhere)" no_guests "$G"
kill $bpid
wait $bpid
check "with the core free again, the retry starts it on all three" wait_state "$G" COMPLETED 30
check_match "its record counts the failed attempt" '"attempts":[1-2],' "$(job_json "$G")"
check_eq "and its output is there" "all three all three all three" "$(echo $(vc output "$G" | grep '^all three'))"

for i in 1 2 3; do
	for _ in $(seq 50); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "nothing is left of any job" "$before" "$(cl_leftovers)"
done_testing
