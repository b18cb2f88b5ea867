#!/usr/bin/env bash
# timeout: 300
# Attack: a user's job writes more output than the controller's disk
# holds (1 GiB: its output made a sparse file).  The state folder and the spool share a small filesystem (a
# 128 MiB tmpfs the test mounts), as they share one by default.  The spool
# stops short of the database's room: the job's output, and that of
# another user's job running beside it, is cut with a line naming the full
# folder; the controller stays up and refuses new jobs with a message
# naming the spool, also after a restart; once an admin makes room, jobs
# run again with their output whole.  (main: the spool took the disk to
# its last block and the controller ...)
. "$(dirname "$0")/ctld-lib.sh"
small_fs 128M
ctld_cluster_file
ctld_cluster_up 2 --state "$FS/ctld"
diag "with the image pushed, the filesystem has $(free_kib) KiB free"

# The other job runs until the test says it may end (a file in the folder
# it was submitted from, which the job shares), 60 s at most: a fixed
# sleep long enough for every check below was most of the test's time.
BW=$T/other-job
mkdir -p "$BW"
B=$(cd "$BW" && sub -N 1 --vcpus 1 -- sh -c 'echo other-begin; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; echo other-end')
for _ in $(seq 100); do [ "$(job_field "$B" output_bytes)" -gt 0 ] 2>/dev/null && break; sleep 0.1; done
# 1 GiB of output the job's guest holds as a sparse file (tmpfs there is
# 64 MiB): the controller's spool gets zeros until it is full.
A=$(nb_sub -N 1 --vcpus 1 -- sh -c 'echo flood-begin; truncate -s 1G /vhpc/spool/job.out; echo flood-end')
check_match "another user's job runs ($B), then a user submits the flood ($A)" '^[0-9]+ [0-9]+$' "$B $A"
check "the flood job ends" wait_state "$A" COMPLETED 120
check_eq "the other user's job still runs" RUNNING "$(job_state "$B")"
line="[vhpc: output cut here: the spool's filesystem ($FS/ctld-spool) is full; the rest of the job's output was dropped]"
check_eq "its output ends with a line saying it was cut, naming the folder" "$line" "$(nb output "$A" | tail -n 1)"
diag "the filesystem has $(free_kib) KiB free"
check "the database keeps its room: more than 8 MiB free" test "$(free_kib)" -gt 8192
check "vhpc-ctld answers" ctld_answers
out=$(nb submit -N 1 --vcpus 1 -- echo more 2>&1)
check_match "a new job is refused, naming the spool" "the output spool $FS/ctld-spool is full \(.* free, .* kept free\): new jobs are refused" "$out"
check_eq "the other user's job is still running when it is let go" RUNNING "$(job_state "$B")"
touch "$BW/go"
check "the other user's job ends, not killed" wait_state "$B" COMPLETED 60
check_eq "... its output up to the fill, and the line saying where it was cut" "other-begin $line" "$(echo $(vc output "$B"))"

# A restart with the spool still full: up, answering, refusing.
cl_ctld_kill KILL
CL_NO_PUSH=1 ctld_up_or_quit --state "$FS/ctld"
check "vhpc-ctld restarts on the full disk and answers" ctld_answers
check_match "... and still refuses new jobs" "the output spool $FS/ctld-spool is full" "$(nb submit -N 1 --vcpus 1 -- echo more 2>&1)"
check_eq "the jobs are as they ended" "COMPLETED COMPLETED" "$(job_state "$A") $(job_state "$B")"

# An admin makes room: jobs run again, whole.
rm -f "$FS/ctld-spool/$A.out"
check "vhpc output of the job whose file the admin removed ends at once" \
	cl_in "$CL_HUB" timeout 10 "$BIN/vhpc" output "$A"
C=$(nb_sub -N 1 --vcpus 1 -- sh -c "$OTHER_JOB")
check_match "with room again, a job is taken" '^[0-9]+$' "$C"
check "... runs" wait_state "$C" COMPLETED 60
check_eq "... and has its output whole" "$(other_output)" "$(nb output "$C")"
check_eq "both nodes are up" 2 "$(cl_nodes_up)"
done_testing
