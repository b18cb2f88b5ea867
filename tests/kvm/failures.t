#!/usr/bin/env bash
# timeout: 300
# needs: hardware-virtualization
# A kvm job ends cleanly, says what happened and leaves nothing, when one
# vhpc-hv is killed with SIGKILL mid-job and when a guest's kernel panics.
# Real guests booting the image's kernel: tests/run runs this in the
# virtualization lab where the host has no VT-x/AMD-V.  The other endings
# are in failures-reboot.t and failures-ready.t: one lab VM each, so a lab
# crash costs one short file's retry.
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmx
unset VHPC_KVM_ALLOW_EMULATION
RUN=(vhpc run --driver kvm --mem 384M --timeout 300)

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
# The console goes with the job's folder: what led to the panic stays in
# the node's log (vhpc run's stderr here).
check_match "panic: ... and the console's last lines, the panic's trace, are in the node's log" \
	"has stopped; its last words follow.*last lines of the guest's console:.*sysrq" \
	"$(tr '\n' ' ' <"$T/panic.err")"
nothing_left panic
done_testing
