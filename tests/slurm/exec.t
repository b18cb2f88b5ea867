#!/usr/bin/env bash
# timeout: 240
# vhpc exec's form under Slurm (tests/slurm/slurm-lib.sh): a step of a
# running job, `srun --jobid=ID --overlap`, runs in that job's guest as
# its user, in its folder, with its exit status and stderr apart, while
# the job runs on; another user is refused by Slurm; the job then ends as
# it would have.
. "$(dirname "$0")/../lib.sh"
need_root
SL=vsx$$
. "$(dirname "$0")/slurm-lib.sh"
sl_need
T=$SL_DIR

sl_test_up 1

id=$(sl_user sbatch --parsable -N 1 -n 1 --vhpc-image=default -o "$W/job.out" \
	--wrap 'srun sh -c "echo \$(hostname) \$(readlink /proc/self/ns/pid) >running; while [ ! -e stop ]; do sleep 0.2; done; echo done on \$(hostname)"' 2>"$T/err")
check_match "a job that waits is accepted" '^[0-9]+$' "$id"
check "its step runs in a guest" poll_until 60 test -s "$W/running"
read -r host ns <"$W/running"

ov() { sl_user srun --jobid="$id" --overlap -N 1 -n 1 "$@"; }
out=$(ov sh -c 'echo "$(hostname) $(readlink /proc/self/ns/pid) $(pwd) $(id -u)"' 2>"$T/ov.err"); rc=$?
check_eq "srun --jobid --overlap runs in the job's guest, its pid namespace, its folder, as its user" \
	"0 $host $ns $W $uid" "$rc $out"
ov sh -c 'echo out; echo err >&2; exit 3' >"$T/x.out" 2>"$T/x.err"; rc=$?
check_eq "the exit status comes back" 3 "$rc"
check_eq "stdout apart" out "$(cat "$T/x.out")"
check_match "stderr apart" '^err$' "$(grep -v '^srun:' "$T/x.err")"
check_eq "the job's step still runs" RUNNING "$(sl_in "$SL_HUB" squeue -h -j "$id" -o %T 2>&1)"

# Another user: Slurm itself refuses a step in someone else's job.
out=$(cd / && sl_in "$SL_HUB" setpriv --reuid 65534 --regid 65534 --clear-groups srun --jobid="$id" --overlap -N 1 -n 1 true 2>&1); rc=$?
check_match "another user's srun into the job is refused" "denied|[Aa]ccess|not authorized|Invalid" "$rc $out"
check "... and fails" test "$rc" -ne 0

touch "$W/stop"
sl_wait_empty 60
check_match "the job then completes, exit code 0" "JobId=$id .*JobState=COMPLETED .*ExitCode=0:0" "$(cat "$SL_DIR/jobcomp.txt")"
check_eq "with its own output only" "done on $host" "$(cat "$W/job.out")"
sl_wait_idle 1
check_eq "nothing of the job is left" "$before" "$(sl_leftovers)"
done_testing
