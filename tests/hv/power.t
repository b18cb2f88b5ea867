#!/usr/bin/env bash
# timeout: 60
# needs: hardware-virtualization
# How a guest ends: ACPI power-off exits 0, a reset and a triple fault exit
# with their own statuses and say so, and the control socket's "poweroff"
# presses the ACPI power button (GED interrupt) for the guest to act on.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

run_guest power --vcpus 1 --mem 32M --cmdline mode=poweroff
check_eq "ACPI S5 through the FADT sleep register: exit 0" 0 "$RC"
check_match "power-off is logged" "guest powered off" "$(cat "$ERR")"

run_guest power --vcpus 1 --mem 32M --cmdline mode=reset
check_eq "reset through the FADT reset register (i8042): exit 3" 3 "$RC"
check_match "reset is reported" "guest requested a reset" "$(cat "$ERR")"

run_guest power --vcpus 1 --mem 32M --cmdline mode=triple
check_eq "triple fault: exit 4" 4 "$RC"
check_match "triple fault is reported with registers" "triple fault on vCPU 0 \(RIP 0x" "$(cat "$ERR")"

# Power button: the guest waits for the GED interrupt, then powers off.
sock=$T/ctl.sock
"$HV" --kernel "$GUESTS/power.elf" --debug-exit --vcpus 2 --mem 32M --cmdline mode=button \
	--control "$sock" >"$T/button.out" 2>"$T/button.err" </dev/null &
pid=$!
at_exit kill -9 $pid
for i in $(seq 100); do grep -q 'waiting for the power button' "$T/button.out" && break; sleep 0.05; done
check "button guest is waiting" grep -q 'waiting for the power button' "$T/button.out"
check "control: poweroff accepted" "$HVCTL" "$sock" poweroff
timeout 20 tail --pid=$pid -f /dev/null
wait $pid
check_eq "guest saw the button and powered off: exit 0" 0 "$?"
check "guest printed the button press" grep -q 'power button pressed' "$T/button.out"
check "control socket removed at exit" [ ! -e "$sock" ]
done_testing
