#!/usr/bin/env bash
# timeout: 240
# Attack: a user's job writes 48 MB of output, against a cluster whose
# output limit is 1 MiB (ctld.output_limit).  vhpc-ctld keeps the first
# MiB and a line saying where and why the output was cut, sends the node
# past the rest (it ships no more), and both daemons go on answering;
# another user's job, running at the same time, ends with its output whole.
# (main: the controller's spool took all 48 MB, with no limit.)
. "$(dirname "$0")/ctld-lib.sh"
ctld_cluster_file output_limit=1M
ctld_cluster_up 2

FLOOD='yes flood-flood-flood | head -c 48000000; echo flood-end'
A=$(nb_sub -N 1 --vcpus 1 -- sh -c "$FLOOD")
B=$(sub -N 1 --vcpus 1 -- sh -c "sleep 1; $OTHER_JOB")
check_match "a user submits the flood ($A), another user a job of its own ($B)" '^[0-9]+ [0-9]+$' "$A $B"
check "the flood job ends" wait_state "$A" COMPLETED 120
check "the other user's job ends" wait_state "$B" COMPLETED 120
size=$(stat -c %s "$T/ctld-spool/$A.out" 2>/dev/null)
diag "the flood's spool file: $size bytes (the job wrote 48000010)"
check "the spool holds the limit and a line, no more" test "${size:-0}" -gt 1048576 -a "${size:-0}" -le $((1048576 + 300))
out=$(nb output "$A")
check_eq "the user reads the first MiB of it" "$(yes flood-flood-flood | head -c 1048576)" "$(printf '%s' "$out" | head -c 1048576)"
check_match "... and then the line saying that the output was cut, and why" \
	'^\[vhpc: output cut here: the job wrote more than its limit of 1 MiB \(the cluster file.s ctld\.output_limit\); the rest was dropped\]$' \
	"$(printf '%s\n' "$out" | tail -n 1)"
check_match "the job's record says it was cut" '"output_cut":true' "$(job_json "$A")"
check_match "vhpc-ctld logged it" "job $A: output cut at [0-9]+ bytes: the job wrote more" "$(cat "$T/ctld.log")"
check_eq "the other user's job has its output whole" "$(other_output)" "$(vc output "$B")"
check "vhpc-ctld answers" ctld_answers
check_eq "both nodes are up" 2 "$(cl_nodes_up)"
C=$(nb_sub -N 1 --vcpus 1 -- sh -c 'echo after-the-flood')
check "the flooding user's next job runs" wait_state "$C" COMPLETED 60
check_eq "... with its output" "after-the-flood" "$(nb output "$C")"
done_testing
