#!/usr/bin/env bash
# timeout: 90
# Crash recovery: an owner SIGKILLed with a job up (dir, network,
# containers, shm file) leaves everything behind; `vhpc-na cleanup` removes
# every trace, and touches neither a live job in the same run dir nor a
# dead one in another run dir.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/na-lib.sh"
need_root
[ -x /usr/sbin/runc ] || command -v runc >/dev/null || skip_all "runc is not installed"

na_run_dir
run1=$VHPC_RUN_DIR
rootfs=$run1/rootfs
"$(dirname "$0")/mkrootfs.sh" "$rootfs" || { fail "build a test rootfs"; done_testing; exit 1; }
J=cr$$a L=cr$$b O=cr$$c
mark=vhpc-crash-test-$$
# processes of this test's guests: their inits carry the mark (the
# owner's command line does too, hence the anchor)
procs() { local n=0 p; for p in $(pgrep -f "^/bin/sh -c .*$mark"); do alive $p && n=$((n+1)); done; echo $n; }
before=$(leftovers $J $L $O; echo "procs $(procs)")
before_m=$(leftovers cr$$d)

check "job J (2 containers) comes up" \
	up J --job $J -N 2 --rootfs "$rootfs" -- /bin/sh -c "while :; do sleep 1; done # $mark"
check "live job L (network only) comes up beside it" up L --job $L -N 1 --oversubscribe
# the shared-memory region a job's co-located guests would get
echo x >/dev/shm/vhpc-$J-region0
at_exit "rm -f /dev/shm/vhpc-$J-region0 /dev/shm/vhpc-$L-region0"
echo x >/dev/shm/vhpc-$L-region0
during=$(leftovers $J $L $O; echo "procs $(procs)")
diag "$during"
check_match "the job had its netns (job + 2 guests)" '^netns 3$' "$during"
check_match "the job had cgroups" '^cgroups [1-9][0-9]*$' "$(echo "$during" | sed -n 4p)"
# Per guest its rootfs and the sysfs of its netns (its /sys).
check_match "the job had its rootfs and sysfs mounts and runc containers" 'mounts 4 runc 2' "$(echo $during)"

down J KILL
check_match "the owner is dead" '.' "$(kill -0 $UP_PID_J 2>&1)"
after_kill=$(leftovers $J $L $O; echo "procs $(procs)")
check_eq "SIGKILL left everything behind (it is real)" "$during" "$after_kill"
check_match "J's guests still run" '^procs 2$' "$after_kill"

# A dead job in another run dir must not be touched by cleanup of this one.
export VHPC_RUN_DIR=$(mktemp -d /tmp/vhpc-na-t.XXXXXX)
run2=$VHPC_RUN_DIR
at_exit "rm -rf '$run2'"
check "job O in another run dir comes up" up O --job $O -N 1
down O KILL
export VHPC_RUN_DIR=$run1

t0=$(date +%s%N)
out=$("$NA" cleanup 2>&1)
dt=$(( ($(date +%s%N) - t0) / 1000000 ))
diag "$out" "cleanup took $dt ms"
check_match "cleanup says what it removed" "removed network namespace vhpc-$J-0" "$out"
check_match "cleanup removed the containers" "removed container $J-1" "$out"
check_match "cleanup counts" '^removed [1-9][0-9]*$' "$out"
after=$(leftovers $J $L $O; echo "procs $(procs)")
check_eq "J is gone without a trace" "$(echo "$before" | sed -n '1,5p')" "$(echo "$after" | sed -n '1,5p')"
check_eq "no guest process of J survives" "procs 0" "$(echo "$after" | grep procs)"
check_eq "no mount under the run dir but the live job's" 0 "$(grep -c " $run1/jobs/$J" /proc/self/mountinfo)"
check "J's runc state is gone" [ ! -e "$run1/runc/$J-0" ] && [ ! -e "$run1/runc/$J-1" ]
check "J's dir is gone" [ ! -e "$run1/jobs/$J" ]
check "live job L untouched: its netns" [ -e /run/netns/vhpc-$L-0 ]
check "live job L untouched: its shm file" [ -e /dev/shm/vhpc-$L-region0 ]
check "live job L untouched: its dir" [ -e "$run1/jobs/$L/lock" ]
check "dead job O of another run dir untouched" [ -e /run/netns/vhpc-$O-0 ] && [ -e "$run2/jobs/$O" ]

out=$("$NA" cleanup 2>&1)
check_eq "a second cleanup finds nothing" "removed 0" "$out"

VHPC_RUN_DIR=$run2 "$NA" cleanup >/dev/null 2>&1
check "cleanup of the other run dir removes O" [ ! -e /run/netns/vhpc-$O-0 ] && [ ! -e "$run2/jobs/$O" ]
# A restarted agent can take a dead owner's job over instead of sweeping
# it: the guests then stop the orderly way (SIGTERM, grace).
out=$("$NA" adopt --job $L 2>&1)
check_match "a live job cannot be adopted" "owned by a live process" "$out"
M=cr$$d
mkdir -p "$run1/logs-m"
check "job M comes up" up M --job $M -N 1 --oversubscribe --rootfs "$rootfs" --log-dir "$run1/logs-m" -- \
	/bin/sh -c "trap 'echo got-term; exit 0' TERM; echo waiting; while :; do sleep 0.2 & wait; done # $mark"
down M KILL
out=$("$NA" adopt --job $M --grace 3000 2>&1)
diag "$out"
check_match "adopt took the running guest over" "^adopted guest 0 pid [0-9]+" "$out"
check_match "its init got SIGTERM, not SIGKILL" '^got-term$' "$(cat "$run1/logs-m/g0.log")"
check_eq "nothing left of M" "$(leftovers $M | sed -n '1,5p')" "$(echo "$before_m" | sed -n '1,5p')"

down L
rm -f /dev/shm/vhpc-$L-region0   # not the agent's: the job's user made it
check_eq "everything back to the before-values" "$before" "$(leftovers $J $L $O; echo "procs $(procs)")"
check_eq "and of M" "$before_m" "$(leftovers $M)"
done_testing
