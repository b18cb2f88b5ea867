#!/usr/bin/env bash
# timeout: 150
# needs: hardware-virtualization
# A kvm guest that never becomes ready ends the job at its time-out, which
# says so and leaves nothing; a bad VHPC_READY_TIMEOUT is refused (see
# failures.t).
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmt
unset VHPC_KVM_ALLOW_EMULATION
RUN=(vhpc run --driver kvm --mem 384M --timeout 300)

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
done_testing
