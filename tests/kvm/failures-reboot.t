#!/usr/bin/env bash
# timeout: 300
# needs: hardware-virtualization
# A kvm job ends cleanly, says what happened and leaves nothing, after a
# reboot inside a guest and after Ctrl-C (see failures.t).
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmr
unset VHPC_KVM_ALLOW_EMULATION
RUN=(vhpc run --driver kvm --mem 384M --timeout 300)

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
done_testing
