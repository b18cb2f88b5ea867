# Shared set-up of the kvm driver's tests: root, vhpc built, the kernel
# package `make kernels` unpacked, and a run dir of the test's own, so
# nothing here sees or sweeps another test's jobs; `vhpc cleanup` at exit.
. "$(dirname "${BASH_SOURCE[0]}")/../integration/common.sh"

# kvm_setup TAG: the run dir is /run/vhpc-TAG-PID.
kvm_setup() {
	need_root
	[ -x "$BIN/vhpc" ] && [ -x "$BIN/vhpc-hv" ] || skip_all "vhpc is not built"
	export VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
	[ -e "$VHPC_KERNEL_CACHE/linux-image-cloud-amd64/.complete" ] ||
		skip_all "no kernel package in $VHPC_KERNEL_CACHE (make kernels fetches it during set-up)"
	export VHPC_RUN_DIR=/run/vhpc-$1-$$
	at_exit "rm -rf '$VHPC_RUN_DIR'"
	at_exit "VHPC_RUN_DIR='$VHPC_RUN_DIR' '$BIN/vhpc' cleanup"
}

# lab_check FILE...: inside the virtualization lab, a guest that crashed in
# a way only TCG's SVM emulation causes (a triple fault in early boot, a
# stack guard page hit) is the lab's failure, not the test's: say so, and
# tests/run runs the test again in a fresh lab (tests/lab/vhpc-lab).
lab_check() {
	local hit
	[ -n "${VHPC_IN_LAB-}" ] || return 0
	hit=$(grep -h -m 1 -aE 'triple fault or KVM internal error|guest triple fault|stack guard page was hit|Fatal exception in interrupt|corrupted stack end' "$@" 2>/dev/null | head -n 1)
	[ -n "$hit" ] && echo "# lab failure: an L2 guest crashed: $hit"
	return 0
}
