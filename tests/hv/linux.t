#!/usr/bin/env bash
# timeout: 300
# Linux smoke test: Debian's cloud kernel, booted as a bzImage (64-bit boot
# protocol) and as a PVH vmlinux, side by side.  On this software KVM it
# stops at an instruction the emulator lacks, after its early console has
# shown what we check: version, our command line, e820 equal to our map
# (with the PCI ECAM area reserved), the ACPI tables (MCFG too), and
# "Allowing N CPUs".  CX16 and XSAVE are hidden from CPUID here only, so
# the kernel gets that far.  Skips when the kernel package cannot be
# fetched.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

paths=$("$VHPC_TOP/tests/hv/fetch-kernel.sh" "$VHPC_TOP/$B/hv-kernel" 2>"$T/fetch.err") ||
	skip_all "kernel not available: $(cat "$T/fetch.err")"
read -r BZ VMLINUX <<<"$paths"
CL="console=ttyS0 earlyprintk=serial,ttyS0 nokaslr vhpc_smoke=$$"

boot() {   # boot NAME KERNEL: in the background, serial to $T/NAME.out
	"$HV" --kernel "$2" --vcpus 2 --mem 256M --cpuid-hide cx16,xsave --cmdline "$CL" \
		>"$T/$1.out" 2>"$T/$1.err" </dev/null &
	eval "pid_$1=$!"
	at_exit kill -9 $!
}
boot bz "$BZ"
[ -n "$VMLINUX" ] && boot pvh "$VMLINUX"

# Wait until both have said "Allowing" (or ended); 240 s at most.
for i in $(seq 480); do
	done_bz=0 done_pvh=0
	grep -q 'Allowing 2 CPUs' "$T/bz.out" || ! kill -0 $pid_bz 2>/dev/null && done_bz=1
	grep -q 'Allowing 2 CPUs' "$T/pvh.out" || ! kill -0 $pid_pvh 2>/dev/null && done_pvh=1
	[ $done_bz = 1 ] && [ $done_pvh = 1 ] && break
	sleep 0.5
done
kill $pid_bz $pid_pvh 2>/dev/null
wait 2>/dev/null

for k in bz pvh; do
	o=$(tr -d '\r' <"$T/$k.out")
	check_match "$k: Linux version line" '\] Linux version 6\.[0-9.]+-[0-9]+-cloud-amd64' "$o"
	check_match "$k: our command line" "Command line: $CL\$" "$o"
	check_eq "$k: e820 equals our map" \
"BIOS-e820: [mem 0x0000000000000000-0x000000000009fbff] usable
BIOS-e820: [mem 0x000000000009fc00-0x00000000000fffff] reserved
BIOS-e820: [mem 0x0000000000100000-0x000000000fffffff] usable
BIOS-e820: [mem 0x00000000e0000000-0x00000000efffffff] reserved" \
		"$(printf '%s\n' "$o" | grep -o 'BIOS-e820: .*')"
	check_match "$k: RSDP found at our address" 'ACPI: RSDP 0x00000000000E0000 000024 \(v02 VHPC' "$o"
	for t in XSDT FACP DSDT APIC MCFG; do
		check_match "$k: ACPI $t found" "ACPI: $t 0x00000000000E0[0-9A-F]{3} [0-9A-F]{6} \(v0[0-9] VHPC   VHPC-HV" "$o"
	done
	check_match "$k: IOAPIC and override from the MADT" 'INT_SRC_OVR \(bus 0 bus_irq 0 global_irq 2' "$o"
	check_match "$k: Allowing 2 CPUs" 'smpboot: Allowing 2 CPUs, 0 hotplug CPUs' "$o"
	diag "$k: $(grep -c . "$T/$k.out") console lines; stopped: $(grep -o 'error: .*' "$T/$k.err" | tail -n 1)"
done
done_testing
