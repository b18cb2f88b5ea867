#!/usr/bin/env bash
# timeout: 600
# needs: hardware-virtualization
# lab-prepare: tests/kvm/compact-images
# vhpc exec and vhpc shell into kvm guests (a 2-node cluster, one VM on
# each; in the virtualization lab where the host has no VT-x/AMD-V): the
# stream reaches each guest's agent through its VMM's vsock bridge; stdout,
# stderr and the exit status come back apart, --all prefixes each guest's
# lines, and a shell has a pty in the VM (devpts, mounted by its init).
# Times here are nested/TCG.
. "$(dirname "$0")/../lib.sh"
command -v script >/dev/null || skip_all "script (util-linux) is not installed"
CL=vcq$$
. "$(dirname "$0")/kvm-lib.sh"

J=$(sub "${KVM[@]}" -- sleep 500)
check_match "the job is accepted" '^[0-9]+$' "$J"
check "job $J runs" wait_state "$J" RUNNING 200
t0=$(date +%s%N)
out=$(vc exec "$J" -- hostname 2>&1); rc=$?
diag "the first exec: $(( ($(date +%s%N) - t0) / 1000000 )) ms (nested/TCG)"
check_eq "exec runs in the VM of guest 0" "0 g0" "$rc $out"
check_eq "--guest 1 in the other VM, on the other node" g1 "$(vc exec "$J" --guest 1 -- hostname 2>&1)"
vc exec "$J" --guest 1 -- sh -c 'echo out; echo err >&2; exit 4' >"$T/x.out" 2>"$T/x.err"; rc=$?
check_eq "exit status, stdout and stderr apart" "4 out err" "$rc $(cat "$T/x.out") $(cat "$T/x.err")"
check_eq "--all" "g0: g0|g1: g1" "$(vc exec "$J" --all -- hostname 2>&1 | sort | paste -sd'|')"
# The shell's input is typed once it has printed its prompt, and held open
# until the shell has ended (a feeder that slept a fixed 10 + 60 s cost the
# test 70 s every run: bash waits for the whole pipeline).
ts=$T/shell.typescript
: >"$ts"
out=$({ for _ in $(seq 300); do grep -qE '[$#] ?$' "$ts" 2>/dev/null && break; sleep 0.1; done
	printf 'tty; exit 5\n'
	for _ in $(seq 600); do [ -e "$T/shell.done" ] && break; sleep 0.1; done; } |
	{ script -qfec "nsenter --net=/run/netns/$CL_HUB -- $BIN/vhpc shell $J" "$ts" 2>&1; echo "rc=$?"; touch "$T/shell.done"; })
rc=$(sed -n 's/^rc=//p' <<<"$out" | tail -n 1)
diag "the shell: $(tr -d '\r' <"$ts" | tail -n 4 | paste -sd'|')"
check_match "a shell in the VM has a pty" '/dev/pts/[0-9]+' "$out"
check_eq "... and exits with its status" 5 "$rc"
check_eq "the job still runs" RUNNING "$(job_state "$J")"
vc cancel "$J" >/dev/null
check "it is cancelled" wait_state "$J" CANCELLED 60
check "its nodes remove it" cl_wait_nodes_idle 120
check_eq "nothing of the job is left" "$before" "$(cl_leftovers)"
done_testing
