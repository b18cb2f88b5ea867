#!/usr/bin/env bash
# timeout: 300
# needs: hardware-virtualization
# bench/scripts/kvm-start runs once and prints where a kvm job's start goes,
# so the bench cannot break unnoticed (tests/bench/scripts.t has the others).
# In the lab (nested/TCG) the times mean nothing; only that each guest's
# row was filled from vhpc-hv's log, its console and vhpc's own lines.
. "$(dirname "$0")/../lib.sh"
need_root
[ -c /dev/kvm ] || skip_all "no /dev/kvm on this host"
[ -e "$VHPC_TOP/$B/kernels/linux-image-cloud-amd64/.complete" ] ||
	skip_all "no kernel package (make kernels fetches it during set-up)"
export VHPC_STATE_DIR=${VHPC_TEST_STATE_DIR:-$VHPC_TOP/$B/state}
# The script has a run dir of its own, which it sweeps and removes.
export VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
err=$(mktemp /tmp/vhpc-kvmstart.XXXXXX)
at_exit rm -f "$err"
out=$(B=$B "$VHPC_TOP/bench/scripts/kvm-start" --mem 384M 2>"$err")
rc=$?
check_eq "kvm-start: exits 0" 0 "$rc"
[ $rc -eq 0 ] || diag "$(tail -n 15 "$err")"
check_match "kvm-start: the job's ready time" "^2 guests, 384M each, ready [0-9.]+ s after vhpc run started" "$out"
for g in g0 g1; do
	check_match "kvm-start: $g's start, split in its parts" "^$g +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$out"
done
lab_check "$err"
done_testing
