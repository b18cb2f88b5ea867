#!/usr/bin/env bash
# timeout: 240
# needs: hardware-virtualization
# Boot to userspace: Debian's cloud kernel with an initramfs whose /init
# prints a marker and powers off; vhpc-hv must exit 0.  Needs hardware
# virtualization (under the software KVM here the kernel stops in early
# boot); tests/run runs it in the virtualization lab where the host has none.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

paths=$("$VHPC_TOP/tests/hv/fetch-kernel.sh" "$VHPC_TOP/$B/hv-kernel" 2>"$T/fetch.err") ||
	skip_all "kernel not available: $(cat "$T/fetch.err")"
read -r BZ VMLINUX <<<"$paths"

cc -static -O2 -o "$T/init" "$VHPC_TOP/tests/hv/init.c" || { fail "building /init"; done_testing; exit 1; }
# newc cpio by hand: one directory and one file, then the trailer.
cpio_entry() {   # NAME MODE FILE|""
	local name=$1 mode=$2 file=$3 size=0 nlen
	[ -n "$file" ] && size=$(stat -c %s "$file")
	nlen=$(( ${#name} + 1 ))
	printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
		$((RANDOM + 1)) "$mode" 0 0 1 0 "$size" 0 0 0 0 "$nlen" 0
	printf '%s\0' "$name"
	head -c $(( (4 - (110 + nlen) % 4) % 4 )) /dev/zero
	if [ -n "$file" ]; then
		cat "$file"
		head -c $(( (4 - size % 4) % 4 )) /dev/zero
	fi
}
{
	cpio_entry dev $((0040755)) ""
	cpio_entry init $((0100755)) "$T/init"
	cpio_entry TRAILER!!! 0 ""
} >"$T/initrd.cpio"

for k in "$BZ" "$VMLINUX"; do
	timeout 180 "$HV" --kernel "$k" --initrd "$T/initrd.cpio" --vcpus 2 --mem 512M --require-hw \
		--cmdline "console=ttyS0 rdinit=/init panic=-1" >"$T/u.out" 2>"$T/u.err" </dev/null
	rc=$?
	check "$(basename "$k"): /init ran in userspace" grep -q 'VHPC-USERSPACE-MARKER' "$T/u.out"
	check_eq "$(basename "$k"): power-off from userspace ends vhpc-hv with 0" 0 "$rc"
done
done_testing
