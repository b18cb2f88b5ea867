# Helpers for the hv tests: run a test guest under vhpc-hv and look at what
# it printed.  Source after tests/lib.sh.
#
# $HV runs vhpc-hv with --seccomp, as the node agent always does, so every
# guest these tests boot also proves the allowlist holds each system call
# its devices make (a call outside it ends vhpc-hv with status 7).  Until
# 2026-12-04 seccomp.t ran all of these tests a second time under a wrapper
# instead: about 100 s of the suite spent on a path nothing deploys.
# HV_NO_SECCOMP=1 runs vhpc-hv as it is (seccomp.t checks that it still boots so).
HVCTL=$BIN/vhpc-hvctl
GUESTS=$VHPC_TOP/$B/hv-guests
[ -e /dev/kvm ] || skip_all "no /dev/kvm on this machine"
[ -x "$BIN/vhpc-hv" ] || skip_all "vhpc-hv not built (run make)"
T=$(mktemp -d /tmp/vhpc-hvtest.XXXXXX)
at_exit rm -rf "$T"
if [ -n "${HV_NO_SECCOMP-}" ]; then
	HV=$BIN/vhpc-hv
else
	HV=$T/vhpc-hv-seccomp
	printf '#!/bin/sh\nexec %s --seccomp "$@"\n' "$BIN/vhpc-hv" >"$HV"
	chmod 755 "$HV"
fi

# run_guest NAME [vhpc-hv args...]: sets $OUT (guest serial), $ERR (log), $RC
run_guest() {
	local g=$1; shift
	OUT=$T/$g.out ERR=$T/$g.err
	timeout -k 5 60 "$HV" --kernel "$GUESTS/$g.elf" --debug-exit "$@" >"$OUT" 2>"$ERR" </dev/null
	RC=$?
}
# guest_ok DESC: the guest passed (debug exit 0) and printed no failure
guest_ok() {
	if [ "$RC" = 64 ] && ! grep -q '^GUEST not ok' "$OUT" && grep -q '^GUEST done' "$OUT"; then
		ok "$1"
	else
		fail "$1 (exit status $RC)"
		diag "$(grep -E '^GUEST not ok' "$OUT")" "$(tail -n 5 "$OUT")" "$(tail -n 3 "$ERR")"
		# In the lab, a guest that died the emulation's way (a triple
		# fault at start: hv/ivshmem.t's in a clean run, 2026-12-07) is
		# the lab's failure, tried again, not the test's (tests/lib.sh).
		lab_check "$OUT" "$ERR"
	fi
}
# Reports each GUEST ok/not ok line as a TAP result of its own.
guest_results() {
	while IFS= read -r l; do
		case $l in
		"GUEST ok - "*) ok "$1: ${l#GUEST ok - }" ;;
		"GUEST not ok - "*) fail "$1: ${l#GUEST not ok - }" ;;
		esac
	done <"$OUT"
}

# need_virtiofsd: VFSD is QEMU's virtiofsd ($VHPC_VIRTIOFSD, as the kvm
# driver takes it), or the test is skipped; HVT the test tool.
need_virtiofsd() {
	VFSD=${VHPC_VIRTIOFSD:-/usr/lib/qemu/virtiofsd}
	[ -x "$VFSD" ] || skip_all "$VFSD not installed (qemu-system-common)"
	HVT=$VHPC_TOP/$B/hv-tools/hvt
}

# hv_netns NAME: NS, a network namespace of the test's own (removed at
# exit) without IPv6, so a guest's NIC sees only the frames the test sends;
# inns CMD runs CMD in it.
hv_netns() {
	NS=$1
	ip netns add "$NS" || skip_all "cannot create a network namespace"
	at_exit ip netns del "$NS"
	ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1
}
inns() { ip netns exec "$NS" "$@"; }
