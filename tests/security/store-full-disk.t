#!/usr/bin/env bash
# timeout: 300
# Attack on the controller's database: its filesystem fills up (here a
# file written to the last block of a 128 MiB tmpfs holding the state
# folder; in life a root push, logs, another program).  vhpc-ctld gives
# the database the reserve it keeps beside it, refuses new jobs with a
# message naming the folder, and keeps committing the running jobs (a
# cancel, an end); a running job ends with its output whole (the spool is on a filesystem of
# its own: ctld.spool).  A restart on the full disk comes up and refuses
# the same way, rather than stopping again; once there is room, jobs are
# taken again.  (main: ...)
. "$(dirname "$0")/ctld-lib.sh"
small_fs 128M
ctld_cluster_file "spool=$T/spool"
ctld_cluster_up 2 --state "$FS/ctld"
check "the database has a reserve beside it" test -s "$FS/ctld/ctld.db-reserve"

B=$(nb_sub -N 1 --vcpus 1 -- sh -c "echo begin; sleep 6; $OTHER_JOB")
C=$(nb_sub -N 1 --vcpus 1 -- sleep 600)
check "a user's job runs" wait_state "$B" RUNNING 60
check "... and another" wait_state "$C" RUNNING 60
dd if=/dev/zero of="$FS/filler" bs=1M 2>/dev/null
diag "filled: $(free_kib) KiB free"
for _ in $(seq 50); do grep -q 'gave its .* reserve to the database' "$T/ctld.log" && break; sleep 0.1; done
check_match "vhpc-ctld gives the database its reserve" "the state folder $FS/ctld is nearly full .*: gave its [0-9.]+ MiB reserve to the database; new jobs are refused" "$(cat "$T/ctld.log")"
out=$(nb submit -N 1 --vcpus 1 -- echo more 2>&1)
check_match "a new job is refused, naming the folder" "the state folder $FS/ctld \(the controller's database\) is nearly full \(.* free\): new jobs are refused" "$out"
check "vhpc-ctld answers" ctld_answers
check_match "a running job is cancelled (a commit)" "job $C cancelled" "$(nb cancel "$C")"
check "... it ends so" wait_state "$C" CANCELLED 30
check "vhpc-ctld answers" ctld_answers
check "the other running job ends" wait_state "$B" COMPLETED 60
check_eq "... with its output whole" "begin
$(other_output)" "$(nb output "$B")"

# A restart on the full disk.
cl_ctld_kill KILL
CL_NO_PUSH=1 ctld_up_or_quit --state "$FS/ctld"
check "vhpc-ctld restarts on the full disk and answers" ctld_answers
check_match "... refusing new jobs" "the state folder $FS/ctld \(the controller's database\) is nearly full" \
	"$(nb submit -N 1 --vcpus 1 -- echo more 2>&1)"
check_eq "the jobs are as they ended" "COMPLETED CANCELLED" "$(job_state "$B") $(job_state "$C")"

# Room again.
rm -f "$FS/filler"
for _ in $(seq 50); do grep -q 'has room again' "$T/ctld.log" && break; sleep 0.1; done
check_match "with room again, vhpc-ctld says so" "the state folder $FS/ctld has room again" "$(cat "$T/ctld.log")"
check "... and makes its reserve anew" test -s "$FS/ctld/ctld.db-reserve"
C=$(nb_sub -N 1 --vcpus 1 -- sh -c "$OTHER_JOB")
check "a job is taken and runs" wait_state "$C" COMPLETED 60
check_eq "... with its output whole" "$(other_output)" "$(nb output "$C")"
done_testing
