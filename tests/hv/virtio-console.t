#!/usr/bin/env bash
# timeout: 60
# virtio-console: guest text out (one buffer, three descriptors, emergency
# write) to a file and to stdout, and a line from stdin into the guest and
# back, with COM1 moved off stdio.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

run_guest vcons --vcpus 1 --mem 32M --serial "file:$T/com1.out" --console "file:$T/cons.out"
check_eq "guest passed (console to a file)" 64 "$RC"
cp "$T/com1.out" "$OUT"
guest_results "file"
check_eq "console file has the guest's text" "hello from virtio-console
split over three descriptors
!" "$(cat "$T/cons.out")"

printf 'ping-7\n' | timeout -k 5 60 "$HV" --kernel "$GUESTS/vcons.elf" --debug-exit --vcpus 1 --mem 32M \
	--serial "file:$T/com1b.out" --console --cmdline input=ping-7 >"$T/stdio.out" 2>"$T/stdio.err"
check_eq "guest passed (console on stdio)" 64 "$?"
cp "$T/com1b.out" "$OUT"
guest_results "stdio"
check_match "stdin reached the guest and came back" "^echo: ping-7$" "$(cat "$T/stdio.out")"
check_match "stdout has the guest's text" "hello from virtio-console" "$(cat "$T/stdio.out")"

run_guest vcons --vcpus 1 --mem 32M --console "tty:x"
check_eq "bad console backend: usage error" 2 "$RC"
check_match "... naming the option" "--console tty:x: 'tty:x' is not stdio, none or file:PATH" "$(cat "$ERR")"
done_testing
