#!/usr/bin/env bash
# timeout: 60
# needs: kvm
# Command line and YAML config: good settings boot, bad ones fail with a
# message that names the problem (and file:line:column for YAML), and the
# hardware-virtualization check warns or, with --require-hw, refuses.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

bad() {   # bad DESC STATUS PATTERN ARGS...
	local d=$1 st=$2 pat=$3; shift 3
	timeout 20 "$HV" "$@" >"$T/bad.out" 2>"$T/bad.err" </dev/null
	local rc=$?
	if [ "$rc" = "$st" ] && grep -qE -- "$pat" "$T/bad.err"; then ok "$d"; else
		fail "$d"; diag "exit $rc (want $st)" "$(cat "$T/bad.err")"; fi
}
K=$GUESTS/bootinfo.elf
bad "unknown option" 2 "unknown option '--bogus'" --bogus
bad "missing --kernel" 2 "--kernel is required" --vcpus 1 --mem 64M
bad "missing --vcpus" 2 "--vcpus is required" --kernel "$K" --mem 64M
bad "--mem too small" 2 "--mem 1K: expected a size from 16M to 1T" --kernel "$K" --vcpus 1 --mem 1K
bad "--vcpus out of range" 2 "--vcpus 999: expected 1..256" --kernel "$K" --vcpus 999 --mem 64M
bad "NUMA sizes must add up" 2 "node sizes add up to 64 MiB but --mem is 96 MiB" \
	--kernel "$K" --vcpus 2 --mem 96M --numa mem=32M --numa mem=32M
bad "NUMA: unknown key" 2 "--numa mem=32M,colour=red: unknown key 'colour'" --kernel "$K" --vcpus 1 --numa mem=32M,colour=red
bad "NUMA: vCPU in two nodes" 2 "vCPU 1 is in nodes 0 and 1" \
	--kernel "$K" --vcpus 2 --numa mem=32M,cpus=0-1 --numa mem=32M,cpus=1
bad "cpu-affinity needs one CPU per vCPU" 2 "3 CPUs listed for 2 vCPUs" --kernel "$K" --vcpus 2 --mem 64M --cpu-affinity 0-2
bad "topology must match --vcpus" 2 "2x2x1 is 4 CPUs but --vcpus is 2" --kernel "$K" --vcpus 2 --mem 64M --topology 2x2x1
bad "unknown CPUID feature" 2 "unknown feature 'warp'" --kernel "$K" --vcpus 1 --mem 64M --cpuid-hide cx16,warp
bad "mem not a multiple of the hugepage size" 2 "numa node 0: mem is not a multiple of the page size \(1048576 KiB\)" --kernel "$K" --vcpus 1 --mem 3G --hugepages=1G --numa mem=1536M --numa mem=1536M
bad "bad serial backend" 1 "serial: 'tcp:1' is not stdio, none or file:PATH" --kernel "$K" --vcpus 1 --mem 32M --serial tcp:1
head -c 4096 /dev/urandom >"$T/junk"
bad "not a kernel" 1 "neither a bzImage \(no HdrS header\) nor an ELF vmlinux" --kernel "$T/junk" --vcpus 1 --mem 32M
bad "ELF without a PVH note" 1 "ELF file without a PVH entry note" --kernel /bin/true --vcpus 1 --mem 32M
bad "missing kernel file (before RAM is allocated)" 1 "kernel $T/none: No such file or directory" --kernel "$T/none" --vcpus 1 --mem 32M
bad "command line too long" 1 "cmdline is 70000 bytes" --kernel "$K" --vcpus 1 --mem 32M --cmdline "$(head -c 70000 /dev/zero | tr '\0' x)"
truncate -s 20M "$T/big.img"
bad "initrd too big for guest RAM" 1 "initrd .*big.img \(20 MiB\) does not fit in guest RAM" --kernel "$K" --vcpus 1 --mem 16M --initrd "$T/big.img"

# YAML: the same settings from a file; the command line wins over it.
cat >"$T/g.yaml" <<EOY
kernel: $K
vcpus: 2
mem: 64M
cmdline: "marker=yaml"
numa:
  - mem: 32M
    cpus: "0"
    host_node: 0
  - mem: 32M
    cpus: "1"
serial: stdio
debug_exit: true
EOY
timeout 20 "$HV" --config "$T/g.yaml" >"$T/y.out" 2>"$T/y.err" </dev/null
check_eq "guest from a YAML config passes" 64 "$?"
check "YAML cmdline reached the guest" grep -q '^CMDLINE marker=yaml$' "$T/y.out"
timeout 20 "$HV" --config "$T/g.yaml" --cmdline marker=cli >"$T/y.out" 2>"$T/y.err" </dev/null
check "command line overrides the file" grep -q '^CMDLINE marker=cli$' "$T/y.out"
printf 'kernel: %s\nvcpus: two\nmem: 64M\n' "$K" >"$T/bad.yaml"
bad "YAML type error names file:line:column" 2 "$T/bad.yaml:2:8: .*vcpus" --config "$T/bad.yaml"
printf 'kernel: %s\nvcpus: 1\nmem: 64M\nmemory: 1G\n' "$K" >"$T/bad2.yaml"
bad "YAML unknown key is named" 2 "$T/bad2.yaml:4:1: .*unknown key 'memory'" --config "$T/bad2.yaml"
printf 'kernel: %s\nvcpus: 1\nnuma:\n  - cpus: "0"\n' "$K" >"$T/bad3.yaml"
bad "YAML numa node without mem" 2 "missing required key 'mem'" --config "$T/bad3.yaml"

# Hardware virtualization: said at start either way.
if grep -qwE 'vmx|svm' /proc/cpuinfo && [ -d /sys/module/kvm_intel -o -d /sys/module/kvm_amd ]; then
	run_guest bootinfo --vcpus 1 --mem 32M --require-hw --cmdline marker=hw
	guest_ok "--require-hw runs with hardware virtualization"
	skip "no software-KVM warning to check on a machine with VT-x/AMD-V"
else
	run_guest bootinfo --vcpus 1 --mem 32M --cmdline marker=sw
	guest_ok "software KVM: the guest still runs"
	check_match "software KVM: warning about emulation" "warning: KVM here is software-only .*about 1000x slower" "$(cat "$ERR")"
	bad "--require-hw refuses a software KVM (exit 6)" 6 "--require-hw: KVM here is software-only" \
		--kernel "$K" --vcpus 1 --mem 32M --require-hw
fi
done_testing
