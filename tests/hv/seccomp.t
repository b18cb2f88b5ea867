#!/usr/bin/env bash
# timeout: 120
# needs: kvm
# vhpc-hv --seccomp: the other hv tests run every guest under the allowlist
# (tests/hv/hvlib.sh), so the list holds every call a running guest's
# devices make.  A call outside it ends vhpc-hv with status 7 and a log line
# that names it (--seccomp-probe makes one: execve; =tiocsti the ioctl that
# would push keystrokes into vhpc-hv's terminal, which the allowlist let
# through until it named its ioctls one by one; =connect a connection to
# an abstract unix socket, which ignores the jail's mount namespace).
# Files passed open as /dev/fd/N work, and a bad one is refused by name.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
need_root

run_guest bootinfo --vcpus 1 --mem 32M --seccomp-probe --cmdline marker=x
check_eq "a forbidden call (the probe's execve) ends vhpc-hv with status 7" 7 "$RC"
check_match "its log names the call" "system call 59 \(execve\) is outside the seccomp allowlist" "$(cat "$ERR")"
check "the guest never ran" bash -c "! grep -q '^GUEST' '$OUT'"
run_guest bootinfo --vcpus 1 --mem 32M --seccomp-probe=tiocsti --cmdline marker=x
check_eq "ioctl TIOCSTI ends vhpc-hv with status 7" 7 "$RC"
check_match "its log names the call and the request" \
	"system call 16 \(ioctl, request 0x5412\) is outside the seccomp allowlist" "$(cat "$ERR")"
check "the guest never ran" bash -c "! grep -q '^GUEST' '$OUT'"
run_guest bootinfo --vcpus 1 --mem 32M --seccomp-probe=connect --cmdline marker=x
check_eq "connect ends vhpc-hv with status 7" 7 "$RC"
check_match "its log names the call" "system call 42 \(connect\) is outside the seccomp allowlist" "$(cat "$ERR")"
run_guest bootinfo --vcpus 1 --mem 32M --seccomp-probe=ptrace --cmdline marker=x
check_eq "--seccomp-probe=ptrace: a usage error" 2 "$RC"
check_match "... naming the calls it takes" "expected execve, tiocsti or connect" "$(cat "$ERR")"

# /dev/fd/N: the kernel passed open, from a file this process can read and
# vhpc-hv could not find by path.
cp "$GUESTS/bootinfo.elf" "$T/k.elf"
exec 7<"$T/k.elf"
rm -f "$T/k.elf"
timeout -k 5 60 "$HV" --kernel /dev/fd/7 --debug-exit --seccomp --vcpus 1 --mem 32M --cmdline "marker=fd quiet" \
	>"$T/fd.out" 2>"$T/fd.err" </dev/null
RC=$? OUT=$T/fd.out ERR=$T/fd.err
guest_ok "a kernel passed as /dev/fd/7 (its file already removed) boots"
exec 7<&-
timeout 20 "$HV" --kernel /dev/fd/9 --vcpus 1 --mem 32M >/dev/null 2>"$T/bad.err" </dev/null
check_eq "/dev/fd/9 not open: set-up error" 1 "$?"
check_match "... naming it" "kernel /dev/fd/9: Bad file descriptor" "$(cat "$T/bad.err")"
truncate -s 1M "$T/d.img"
exec 8<"$T/d.img"
timeout 20 "$HV" --kernel "$GUESTS/bootinfo.elf" --vcpus 1 --mem 32M --blk path=/dev/fd/8 >/dev/null 2>"$T/ro.err" </dev/null
check_eq "a read-only fd for a writable disk: set-up error" 1 "$?"
check_match "... naming it" "/dev/fd/8.*Permission denied" "$(cat "$T/ro.err")"
exec 8<&-
timeout 20 "$HV" --kernel /dev/fd/x --vcpus 1 --mem 32M >/dev/null 2>"$T/x.err" </dev/null
check_eq "/dev/fd/x: set-up error" 1 "$?"

# Every other hv test runs its guests under --seccomp (hvlib.sh); here,
# that vhpc-hv without it still boots a guest.
timeout -k 5 60 "$BIN/vhpc-hv" --kernel "$GUESTS/bootinfo.elf" --debug-exit --vcpus 1 --mem 32M --cmdline "marker=plain quiet" \
	>"$T/plain.out" 2>"$T/plain.err" </dev/null
RC=$? OUT=$T/plain.out ERR=$T/plain.err
guest_ok "without --seccomp a guest boots as well"
check "... and no filter was loaded" bash -c "! grep -q 'seccomp: allowlist' '$T/plain.err'"
run_guest bootinfo --vcpus 1 --mem 32M --cmdline "marker=hvlib quiet"
guest_ok "a guest under the hv tests' vhpc-hv boots"
check_match "... with the allowlist in force" "seccomp: allowlist of [0-9]+ system calls in force, ioctl for 30 requests" "$(cat "$ERR")"
done_testing
