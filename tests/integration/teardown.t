#!/usr/bin/env bash
# timeout: 240
# Nothing leaks: nothing of a job (netns, cgroups, processes, mounts, shm
# files, runc state, job dir) is left after it, and host-wide counts of
# namespaces, links, cgroups, mounts, shm files, processes and job dirs are
# the same after a job as before (those can move if other tests run on the
# machine at the same time; CI runs the suite alone); after `vhpc run` is killed
# with SIGKILL, `vhpc cleanup` (or the next run) removes what it left; Ctrl-C
# tears a job down.
. "$(dirname "$0")/common.sh"
need_root
[ -x "$BIN/vhpc" ] && [ -x "$BIN/vhpc-guestd" ] || skip_all "vhpc is not built"
vhpc cleanup >/dev/null 2>&1
before=$(resource_counts)

vhpc run -N 2 -n 2 -- true >/dev/null 2>"$T/err"
check_eq "a job runs" 0 "$?"
j=$(job_id_of "$T/err")
check "its id is reported" test -n "$j"
check_eq "after a job nothing of it is left" "" "$(job_leftovers "$j")"
check_counts "after a job every count is back" "$before"

start_and_wait() {  # starts a 2-guest job in the background, waits for ready
	vhpc run -N 2 -n 2 --timeout 120 -- sleep 100 >/dev/null 2>"$T/k.err" &
	kpid=$!
	for _ in $(seq 150); do grep -q 'ready in' "$T/k.err" && return 0; sleep 0.2; done
	return 1
}

check "a job starts" start_and_wait
j=$(job_id_of "$T/k.err")
kill -KILL $kpid; wait $kpid 2>/dev/null
sleep 0.5
check "SIGKILL leaves the job's resources behind (before the sweep)" test -n "$(job_leftovers "$j")"
vhpc cleanup >"$T/c.out" 2>&1
check_match "vhpc cleanup says what it removed" "removed [1-9][0-9]* leftover" "$(cat "$T/c.out")"
check_eq "after cleanup nothing of the killed job is left" "" "$(job_leftovers "$j")"
check_counts "after cleanup every count is back" "$before"

check "another job starts" start_and_wait
j=$(job_id_of "$T/k.err")
kill -KILL $kpid; wait $kpid 2>/dev/null
vhpc run -N 1 -- true >/dev/null 2>"$T/n.err"
check_eq "the next run works" 0 "$?"
check_match "and removed what the killed one left" "removed [1-9][0-9]* resources that earlier jobs left" "$(cat "$T/n.err")"
check_eq "nothing of the killed job is left" "" "$(job_leftovers "$j")"
check_counts "after that run every count is back" "$before"

check "a third job starts" start_and_wait
j=$(job_id_of "$T/k.err")
kill -INT $kpid; wait $kpid
check_eq "Ctrl-C: the run exits 130" 130 "$?"
check_eq "after Ctrl-C nothing of the job is left" "" "$(job_leftovers "$j")"
check_counts "after Ctrl-C every count is back" "$before"
done_testing
