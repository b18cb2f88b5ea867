#!/usr/bin/env bash
# timeout: 240
# Attack: a user's job makes its own output a sparse file of 4 GiB (it
# extends the file in guest 0 that its mpirun writes to: no memory, no
# disk there), so the node reads 4 GiB of zeros to ship to the controller.
# vhpc-ctld keeps its output limit (1 MiB here) and a line saying so, and
# sends the node past the rest, which it then never reads; the spool stays
# a MiB, the job ends at once, and another user's job ends with its output
# whole.  (main: the node shipped the zeros and the controller wrote them,
# dense, to its spool, for as long as the job lasted.)
. "$(dirname "$0")/ctld-lib.sh"
ctld_cluster_file output_limit=1M
ctld_cluster_up 2

# (mpirun forwards a rank's lines in its own time: a pause lets the first
# reach the file before the file grows)
SPARSE='echo sparse-begin; sleep 1; truncate -s 4G /vhpc/spool/job.out; echo sparse-end'
t0=$(date +%s)
A=$(nb_sub -N 1 --vcpus 1 -- sh -c "$SPARSE")
B=$(sub -N 1 --vcpus 1 -- sh -c "sleep 1; $OTHER_JOB")
check_match "a user submits the sparse output ($A), another user a job of its own ($B)" '^[0-9]+ [0-9]+$' "$A $B"
check "the sparse job ends" wait_state "$A" COMPLETED 60
took=$(( $(date +%s) - t0 ))
check "... within 30 s of its submission (it took $took s): the node did not ship 4 GiB" test "$took" -le 30
check "the other user's job ends" wait_state "$B" COMPLETED 90
sz=$(stat -c %s "$T/ctld-spool/$A.out" 2>/dev/null) du=$(du -k "$T/ctld-spool/$A.out" 2>/dev/null | cut -f1)
diag "the job's spool file: ${sz:-none} bytes, ${du:-0} KiB on disk (its output was 4 GiB and 11 bytes)"
check "the spool holds the limit and a line, no more" test "${sz:-0}" -gt 1048576 -a "${sz:-0}" -le $((1048576 + 300))
out=$(nb output "$A" | tr -d '\0')
check_eq "the user's output: its first line, the zeros up to the limit, the line saying it was cut" \
	"sparse-begin [vhpc: output cut here: the job wrote more than its limit of 1 MiB (the cluster file's ctld.output_limit); the rest was dropped]" \
	"$(echo $out)"
check_eq "the other user's job has its output whole" "$(other_output)" "$(vc output "$B")"
check "vhpc-ctld answers" ctld_answers
check_eq "both nodes are up" 2 "$(cl_nodes_up)"
done_testing
