#!/usr/bin/env bash
# timeout: 240
# needs: hardware-virtualization
# Debian's cloud kernel booted by vhpc-hv as a bzImage (64-bit boot
# protocol) and as a PVH vmlinux, each to userspace: an initramfs whose
# /init prints a marker and powers off, and vhpc-hv must exit 0.  On the
# way, its early console shows what vhpc-hv gave it: our command line, e820
# equal to our map (with the PCI ECAM area reserved), the ACPI tables (MCFG
# too) and "Allowing 2 CPUs".  Needs hardware virtualization; tests/run
# runs it in the virtualization lab where the host has none.
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

CL="console=ttyS0 rdinit=/init panic=-1 vhpc_smoke=$$"
for k in "$BZ" "$VMLINUX"; do
	n=$(basename "$k")
	timeout 180 "$HV" --kernel "$k" --initrd "$T/initrd.cpio" --vcpus 2 --mem 256M --require-hw \
		--cmdline "$CL" >"$T/u.out" 2>"$T/u.err" </dev/null
	rc=$?
	o=$(tr -d '\r' <"$T/u.out")
	check_match "$n: Linux version line" '\] Linux version 6\.[0-9.]+-[0-9]+-cloud-amd64' "$o"
	check_match "$n: our command line" "Command line: $CL\$" "$o"
	check_eq "$n: e820 equals our map" \
"BIOS-e820: [mem 0x0000000000000000-0x000000000009fbff] usable
BIOS-e820: [mem 0x000000000009fc00-0x00000000000fffff] reserved
BIOS-e820: [mem 0x0000000000100000-0x000000000fffffff] usable
BIOS-e820: [mem 0x00000000e0000000-0x00000000efffffff] reserved" \
		"$(printf '%s\n' "$o" | grep -o 'BIOS-e820: .*')"
	check_match "$n: RSDP found at our address" 'ACPI: RSDP 0x00000000000E0000 000024 \(v02 VHPC' "$o"
	for t in XSDT FACP DSDT APIC MCFG; do
		check_match "$n: ACPI $t found" "ACPI: $t 0x00000000000E0[0-9A-F]{3} [0-9A-F]{6} \(v0[0-9] VHPC   VHPC-HV" "$o"
	done
	check_match "$n: IOAPIC and override from the MADT" 'INT_SRC_OVR \(bus 0 bus_irq 0 global_irq 2' "$o"
	check_match "$n: Allowing 2 CPUs" 'smpboot: Allowing 2 CPUs, 0 hotplug CPUs' "$o"
	check "$n: /init ran in userspace" grep -q 'VHPC-USERSPACE-MARKER' "$T/u.out"
	if ! grep -q 'VHPC-USERSPACE-MARKER' "$T/u.out"; then
		diag "exit $rc; the console's last lines and vhpc-hv's stderr:"
		tail -n 8 "$T/u.out" | tr -d '\r' | while IFS= read -r l; do diag "  $l"; done
		tail -n 5 "$T/u.err" | while IFS= read -r l; do diag "  $l"; done
	fi
	check_eq "$n: power-off from userspace ends vhpc-hv with 0" 0 "$rc"
done
done_testing
