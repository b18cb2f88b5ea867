#!/usr/bin/env bash
# timeout: 420
# needs: hardware-virtualization
# A kvm job ends cleanly, says what happened and leaves nothing, whatever
# ends it: Ctrl-C, kill -9 of one vhpc-hv, a guest kernel panic, a reboot
# inside a guest, a guest that never becomes ready.  Real guests booting
# the image's kernel: tests/run runs this in the virtualization lab where
# the host has no VT-x/AMD-V.
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmx
unset VHPC_KVM_ALLOW_EMULATION
RUN=(vhpc run --driver kvm --mem 384M --timeout 300)

# start_job NAME ARGS...: vhpc run in the background; sets pid, waits until
# every guest is ready (or vhpc ended), sets job.
start_job() {
	local name=$1; shift
	"${RUN[@]}" "$@" >"$T/$name.out" 2>"$T/$name.err" &
	pid=$!
	for _ in $(seq 600); do
		grep -q 'guests\? ready in' "$T/$name.err" && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.2
	done
	job=$(job_id_of "$T/$name.err")
}
# ends_within SECONDS: vhpc ($pid) ends in time; sets rc.
ends_within() {
	local i
	for i in $(seq $(($1 * 5))); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
	if kill -0 $pid 2>/dev/null; then
		diag "still running after $1 s; the guests' consoles:" "$(tail -n 30 "$VHPC_RUN_DIR"/jobs/*/kvm*/serial 2>/dev/null)"
		kill -9 $pid; wait $pid; rc=timeout
	else
		wait $pid; rc=$?
	fi
}
nothing_left() {   # NAME
	check_eq "$1: nothing of the job is left" "" \
		"$(job_leftovers "$job"; pgrep -f "vhpc-hv .*/jobs/$job/")"
}

# -- kill -9 of one vhpc-hv, mid-job -------------------------------------
start_job kill9 -N 2 -n 2 -- sleep 600
hv1=$(pgrep -f "vhpc-hv .*/jobs/$job/kvm1/")
check "kill9: both guests ready, the job running" test -n "$job" -a -n "$hv1"
kill -9 $hv1
ends_within 30
check_eq "kill9: vhpc ends with 125 (vhpc's own failure)" 125 "$rc"
check_match "kill9: it says which guest stopped and how" \
	"guest g1 stopped while the job ran: vhpc-hv was killed by signal 9" "$(cat "$T/kill9.err")"
nothing_left kill9

# -- a kernel panic in a guest --------------------------------------------
start_job panic -N 1 -- sh -c 'echo c >/proc/sysrq-trigger; sleep 600'
ends_within 60
check_eq "panic: vhpc ends with 125" 125 "$rc"
check_match "panic: it says the guest's kernel panicked" \
	"guest g0 stopped while the job ran: the guest's kernel panicked \(Kernel panic - not syncing" \
	"$(cat "$T/panic.err")"
nothing_left panic

# -- a reboot inside a guest ---------------------------------------------
start_job reboot -N 1 -- sh -c 'busybox reboot -f; sleep 600'
ends_within 60
check_eq "reboot: vhpc ends with 125" 125 "$rc"
check_match "reboot: it says the guest rebooted" "guest g0 stopped while the job ran: the guest rebooted" \
	"$(cat "$T/reboot.err")"
nothing_left reboot

# -- Ctrl-C ---------------------------------------------------------------
start_job int -N 2 -n 2 -- sleep 600
check "int: the job is running" test -n "$job"
kill -INT $pid
ends_within 30
check_eq "int: vhpc ends with 130 (128 + SIGINT)" 130 "$rc"
check_match "int: it says it was interrupted" "interrupted by signal 2|signal 2" "$(cat "$T/int.err")"
nothing_left int

# -- a guest that never becomes ready ------------------------------------
# One second at the machine's own pace is too short for any guest to boot.
VHPC_READY_TIMEOUT=1 VHPC_KVM_TIME_SCALE=1 "${RUN[@]}" -N 1 -- true >"$T/ready.out" 2>"$T/ready.err" &
pid=$!
ends_within 120
job=$(job_id_of "$T/ready.err")
check_eq "not ready: vhpc ends with 125" 125 "$rc"
check_match "not ready: it says which guest and the time-out" "guest g0 did not report ready within 1 s" \
	"$(cat "$T/ready.err")"
nothing_left "not ready"

VHPC_READY_TIMEOUT=soon "${RUN[@]}" -N 1 -- true >"$T/bad.out" 2>"$T/bad.err"
check_eq "a bad VHPC_READY_TIMEOUT is refused with 125" 125 "$?"
check_match "and named" "VHPC_READY_TIMEOUT='soon': give whole seconds" "$(cat "$T/bad.err")"
lab_check "$T"/*
done_testing
