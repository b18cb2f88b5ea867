#!/usr/bin/env bash
# timeout: 120
# Choosing the driver: --driver auto picks kvm only with hardware
# virtualization and says which and why; --driver kvm without it is refused
# with the reason (unless --allow-emulated-kvm); kvm-related options and
# settings that cannot work give clear errors and start nothing.
. "$(dirname "$0")/../integration/common.sh"
need_root
[ -x "$BIN/vhpc" ] || skip_all "vhpc is not built"
export VHPC_RUN_DIR=/run/vhpc-kvmc-$$
at_exit "rm -rf '$VHPC_RUN_DIR'"
unset VHPC_KVM_ALLOW_EMULATION

expect_error() {  # DESC STATUS REGEX CMD...
	local desc=$1 want=$2 re=$3; shift 3
	local out rc
	out=$("$@" 2>&1); rc=$?
	if [ "$rc" = "$want" ] && printf '%s' "$out" | grep -qE -- "$re"; then ok "$desc"
	else fail "$desc"; diag "status $rc (want $want), output:" "$out"; fi
}

# No /dev/kvm at all (no KVM module, not even a software one): auto runs
# containers and --driver kvm is refused saying so; every check after that
# needs a KVM that opens, if only a software one.
if [ ! -e /dev/kvm ]; then
	vhpc run -N 1 -- true >/dev/null 2>"$T/auto.err"
	check_eq "--driver auto runs the job here" 0 "$?"
	check_match "and says it picked container, and why" \
		"container driver \(auto picked container: /dev/kvm cannot be opened \(no KVM on this host\)" "$(cat "$T/auto.err")"
	expect_error "--driver kvm is refused, with the reason" 125 \
		"driver kvm: /dev/kvm cannot be opened \(no KVM on this host\); use --driver container \(or auto\)" \
		vhpc run --driver kvm -- true
	check_eq "the refusal made nothing (no job dir)" "" "$(ls "$VHPC_RUN_DIR/jobs" 2>/dev/null)"
	skip "kvm option and image checks: this host has no /dev/kvm; the lab's kvm tests run these paths"
	done_testing
	exit 0
fi

hw=0
grep -qwE 'vmx|svm' /proc/cpuinfo && [ -e /sys/module/kvm_intel -o -e /sys/module/kvm_amd ] && hw=1

if [ $hw = 0 ]; then
	vhpc run --driver auto -N 1 -- true >"$T/auto.out" 2>"$T/auto.err"
	check_eq "--driver auto runs the job here" 0 "$?"
	check_match "and says it picked container, and why" \
		"container driver \(auto picked container: KVM here is software-only \([a-z_]+, no vmx/svm" "$(cat "$T/auto.err")"
	vhpc run -N 1 -- true >/dev/null 2>"$T/default.err"
	check_match "auto is the default" "container driver \(auto picked container" "$(cat "$T/default.err")"
	expect_error "--driver kvm is refused, with the reason" 125 \
		"driver kvm: KVM here is software-only .*so guests would not finish booting; use --driver container \(or auto\), or --allow-emulated-kvm" \
		vhpc run --driver kvm -- true
	check_eq "the refusal made nothing (no job dir)" "" "$(ls "$VHPC_RUN_DIR/jobs" 2>/dev/null)"
	expect_error "VHPC_KVM_ALLOW_EMULATION=0 does not allow it" 125 "driver kvm: KVM here is software-only" \
		env VHPC_KVM_ALLOW_EMULATION=0 vhpc run --driver kvm -- true
	expect_error "--allow-emulated-kvm does not make auto pick kvm" 125 \
		"--allow-emulated-kvm applies to --driver kvm only \(auto picked container" vhpc run --allow-emulated-kvm -- true
else
	skip "auto picks container: this host has hardware virtualization"
	skip "auto picks container and says why: this host has hardware virtualization"
	vhpc run -N 1 -- true >/dev/null 2>"$T/default.err"
	check_match "auto picks kvm here, and says why" "kvm driver \(auto picked kvm: KVM with" "$(cat "$T/default.err")"
	skip "--driver kvm is refused: this host has hardware virtualization"
	skip "the refusal made nothing: this host has hardware virtualization"
	skip "VHPC_KVM_ALLOW_EMULATION=0: this host has hardware virtualization"
	skip "--allow-emulated-kvm with auto: this host has hardware virtualization"
fi

expect_error "--allow-emulated-kvm with another driver" 2 "--allow-emulated-kvm applies to --driver kvm only" \
	vhpc run --driver container --allow-emulated-kvm -- true
expect_error "VHPC_KVM_ALLOW_EMULATION must be 0 or 1" 125 "VHPC_KVM_ALLOW_EMULATION='yes': expected 0 or 1" \
	env VHPC_KVM_ALLOW_EMULATION=yes vhpc run --driver kvm -- true
expect_error "too little memory for a kvm guest" 125 "--mem 64 MiB: a kvm guest needs whole MiB, at least 128 MiB" \
	vhpc run --driver kvm --allow-emulated-kvm --mem 64M -- true
expect_error "memory that is not whole MiB" 125 "a kvm guest needs whole MiB" \
	vhpc run --driver kvm --allow-emulated-kvm --mem 200000K -- true

# An image without a kvm: section cannot boot a VM.
mkdir -p "$T/conf/images" "$T/conf/tuning"
cp "$VHPC_TOP/configs/cluster.yaml" "$T/conf/"
cp "$VHPC_TOP/configs/tuning/"*.yaml "$T/conf/tuning/"
printf 'name: plain\nprograms: [vhpc-guestd]\nbusybox: true\n' >"$T/conf/images/plain.yaml"
expect_error "an image without kvm parts" 125 "plain.yaml has no kvm: section \\(kernel and modules for kvm guests\\)" \
	env VHPC_CONFIG_DIR="$T/conf" VHPC_STATE_DIR="$T/state" vhpc run --driver kvm --allow-emulated-kvm --image plain -- true
check_eq "none of these left a job dir" "" "$(ls "$VHPC_RUN_DIR/jobs" 2>/dev/null)"
done_testing
