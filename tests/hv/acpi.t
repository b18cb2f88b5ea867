#!/usr/bin/env bash
# timeout: 120
# needs: hardware-virtualization
# ACPI and SMP as test guests see them: tables through the RSDP with valid
# checksums, MADT CPUs with the APIC IDs CPUID reports, SRAT/SLIT equal to
# --numa, and every vCPU up through INIT/SIPI reporting its APIC ID.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

lines() { grep "^$1 " "$OUT" | sed "s/^$1 //"; }

run_guest acpi --vcpus 2 --mem 64M
guest_ok "acpi guest, 1 node, 2 vCPUs"
guest_results "1 node"
check_eq "tables without NUMA: FADT, MADT and MCFG (PCI ECAM)" "FACP APIC MCFG" "$(lines TABLE | awk "{print \$1}" | tr "\n" " " | sed "s/ $//")"
check_eq "MADT CPUs are APIC IDs 0 1" "0 1" "$(lines MADT_CPU | tr '\n' ' ' | sed 's/ $//')"

# Two guest nodes (both bound to host node 0: this machine has one node),
# two sockets of three cores: APIC IDs 0,1,2 and 4,5,6.
run_guest acpi --vcpus 6 --mem 96M --topology 2x3x1 \
	--numa mem=32M,cpus=0-2,host-node=0 --numa mem=64M,cpus=3-5,host-node=0
guest_ok "acpi guest, 2 nodes, 2x3x1"
check_eq "tables with NUMA add SRAT and SLIT" "FACP APIC SRAT SLIT MCFG" "$(lines TABLE | awk "{print \$1}" | tr "\n" " " | sed "s/ $//")"
check_eq "MADT APIC IDs follow the topology" "0 1 2 4 5 6" "$(lines MADT_CPU | tr '\n' ' ' | sed 's/ $//')"
check_eq "SRAT CPU affinity: socket 0 in node 0, socket 1 in node 1" \
	"0 0
1 0
2 0
4 1
5 1
6 1" "$(lines SRAT_CPU)"
check_eq "SRAT memory: 32 MiB node 0 then 64 MiB node 1" \
	"0x0 0x2000000 0
0x2000000 0x4000000 1" "$(lines SRAT_MEM)"
check_eq "SLIT 10 local, 20 remote" "0 0 10
0 1 20
1 0 20
1 1 10" "$(lines SLIT)"
check_eq "CPUID 0xB: SMT level 1 thread, core level shift 2 with 3 CPUs" \
	"shift 0 count 1 type 1
shift 2 count 3 type 2" "$(lines CPUID_B0; lines CPUID_B1)"
check_eq "CPUID 0x1F agrees with 0xB" "shift 2 count 3 type 2" "$(lines CPUID_1F1)"
check_eq "CPUID 0x80000008 and 1: 3 cores per package" "cores 3
lps 3 htt 1" "$(lines CPUID_80000008; lines CPUID_1)"
if [ "$(lines CPUID_4 | sed 's/.* type //')" = 0 ]; then
	skip "CPUID 4: this CPU describes no caches in leaf 4 (AMD); cores per package are 0x80000008's"
else
	check_eq "CPUID 4: 3 cores per package" "cores 3" "$(lines CPUID_4 | sed 's/ type .*//')"
fi

# A node split by the 32-bit hole appears as two SRAT ranges.
run_guest acpi --vcpus 2 --mem 3584M --no-prefault --numa mem=2G --numa mem=1536M
guest_ok "acpi guest, node across the 32-bit hole"
check_eq "SRAT memory around the hole" \
	"0x0 0x80000000 0
0x80000000 0x40000000 1
0x100000000 0x20000000 1" "$(lines SRAT_MEM)"

for n in 1 2 4; do
	run_guest smp --vcpus $n --mem 32M --cmdline "cpus=$n"
	guest_ok "smp guest, $n vCPUs all up"
	check_eq "$n vCPUs report distinct APIC IDs" "$(seq 0 $((n-1)) | tr '\n' ' ')" \
		"$(grep '^CPU ' "$OUT" | awk '{print $4}' | sort -n | tr '\n' ' ')"
done
run_guest smp --vcpus 6 --mem 32M --topology 2x3x1 --cmdline "cpus=6"
guest_ok "smp guest, 2x3x1: 6 vCPUs with sparse APIC IDs"
check_eq "APIC IDs 0 1 2 4 5 6 came up" "0 1 2 4 5 6 " "$(grep '^CPU ' "$OUT" | awk '{print $4}' | sort -n | tr '\n' ' ')"
done_testing
