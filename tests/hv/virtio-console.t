#!/usr/bin/env bash
# timeout: 60
# needs: hardware-virtualization
# virtio-console: guest text out (one buffer, three descriptors, emergency
# write) to a file and to stdout, and a line from stdin into the guest and
# back, with COM1 moved off stdio; devices from a YAML file.
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

# The same from a YAML file, with the other devices' keys alongside.
"$VHPC_TOP/$B/hv-tools/hvt" pattern "$T/y.img" 4096 1
cat >"$T/dev.yaml" <<EOF
kernel: $GUESTS/vcons.elf
vcpus: 1
mem: 32M
debug_exit: true
serial: "file:$T/com1c.out"
console: {to: "file:$T/cons-yaml.out"}
blk:
  - {path: $T/y.img, ro: true, serial: yaml}
vsock: {cid: 9, uds: $T/y.vsock}
shm: [{path: /dev/shm/vhpc-hvt-yaml-$$, size: 64K}]
EOF
at_exit rm -f /dev/shm/vhpc-hvt-yaml-$$
run_guest vcons --config "$T/dev.yaml"
check_eq "YAML devices: guest passed" 64 "$RC"
check_match "YAML devices: console output in the file" "hello from virtio-console" "$(cat "$T/cons-yaml.out" 2>/dev/null)"
check_match "YAML devices: blk came up read-only" "vblk0: .*read-only" "$(cat "$ERR")"
check_match "... vsock" "vsock: guest CID 9" "$(cat "$ERR")"
check_match "... shm" "ivshmem0: /dev/shm/vhpc-hvt-yaml-$$, 64 KiB" "$(cat "$ERR")"
printf 'kernel: %s\nvcpus: 1\nmem: 32M\nvsock: {cid: 9, uds: x, colour: red}\n' "$GUESTS/vcons.elf" >"$T/bad.yaml"
run_guest vcons --config "$T/bad.yaml"
check_match "YAML: unknown device key with file:line:column" "bad.yaml:4:[0-9]+: .*unknown key 'colour'" "$(cat "$ERR")"

run_guest vcons --vcpus 1 --mem 32M --console "tty:x"
check_eq "bad console backend: usage error" 2 "$RC"
check_match "... naming the option" "--console tty:x: 'tty:x' is not stdio, none or file:PATH" "$(cat "$ERR")"
done_testing
