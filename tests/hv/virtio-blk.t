#!/usr/bin/env bash
# timeout: 60
# needs: hardware-virtualization
# virtio-blk on a raw image: a test guest reads the pattern this test wrote,
# writes sectors 8-15 and flushes (checked here in the image file), gets the
# serial, sees errors for out-of-range and unknown requests, and survives
# hostile descriptor chains; notifications take ioeventfds and completions
# irqfds.  Read-only: the write is refused and the file is unchanged.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
HVT=$VHPC_TOP/$B/hv-tools/hvt

img=$T/disk.img
"$HVT" pattern "$img" $((128 * 512)) 7
run_guest vblk -v --vcpus 1 --mem 32M --blk "path=$img,serial=vhpc-disk-0" \
	--cmdline "sectors=128 seed=7 wseed=9 serial=vhpc-disk-0"
guest_ok "vblk guest (read-write)"
guest_results "rw"
check "image: sectors 8-15 hold what the guest wrote" "$HVT" checkpat "$img" 4096 4096 9
check "image: sectors 0-7 unchanged" "$HVT" checkpat "$img" 0 4096 7
check "image: sectors 16-127 unchanged" "$HVT" checkpat "$img" 8192 $((112 * 512)) 7
check_match "completions went through irqfd" "MSI-X vector 1 through irqfd" "$(cat "$ERR")"
check "notifications went through the ioeventfd (no vCPU exit)" \
	bash -c "! grep -q 'notified through a vCPU exit' '$ERR'"

"$HVT" pattern "$img" $((128 * 512)) 7
sum=$(md5sum <"$img")
run_guest vblk --vcpus 1 --mem 32M --blk "$img,ro" --cmdline "sectors=128 seed=7 wseed=9 ro=1"
guest_ok "vblk guest (read-only, positional path)"
guest_results "ro"
check_eq "read-only image unchanged" "$sum" "$(md5sum <"$img")"

# Two writers of one image would corrupt it: the second is refused.  The
# first is a guest that waits for the power button, holding the image.
"$HV" --kernel "$GUESTS/power.elf" --vcpus 1 --mem 32M --cmdline mode=button --blk "path=$img" \
	>"$T/holder.out" 2>&1 </dev/null &
holder=$!
at_exit kill -9 $holder
for i in $(seq 100); do grep -q 'waiting for the power button' "$T/holder.out" && break; sleep 0.05; done
run_guest vblk --vcpus 1 --mem 32M --blk "path=$img"
check_eq "a second writer of the same image: set-up error" 1 "$RC"
check_match "... saying the image is in use" "in use by another process" "$(cat "$ERR")"
kill -9 $holder 2>/dev/null

run_guest vblk --vcpus 1 --mem 32M --blk "path=$T/nonexistent.img"
check_eq "missing image: set-up error" 1 "$RC"
check_match "... naming the option and the file" "--blk path=.*nonexistent.img: opening .*No such file" "$(cat "$ERR")"
run_guest vblk --vcpus 1 --mem 32M --blk "ro"
check_eq "--blk without path: usage error" 2 "$RC"
check_match "... saying path= is required" "path= \(the image file\) is required" "$(cat "$ERR")"
run_guest vblk --vcpus 1 --mem 32M --blk "path=$img,colour=red"
check_match "unknown key named" "unknown key 'colour' \(expected path, ro, serial\)" "$(cat "$ERR")"
printf 'kernel: %s\nvcpus: 1\nmem: 32M\nblk:\n  - {path: %s, serial: 123456789012345678901}\n' \
	"$GUESTS/vblk.elf" "$img" >"$T/blk.yaml"
run_guest vblk --config "$T/blk.yaml"
check_match "YAML: a bad serial is reported with file:line:column" "blk.yaml:5:[0-9]+: blk: serial= is at most 20" "$(cat "$ERR")"
done_testing
