#!/usr/bin/env bash
# timeout: 600
# needs: hardware-virtualization
# Slurm tasks in kvm guests (tests/slurm/slurm-lib.sh, in the
# virtualization lab where the host has no VT-x/AMD-V): an allocation
# with --vhpc-driver=kvm boots its VM once; each step's task runs in it
# through vhpc-slurmjob task and the VM's vsock bridge, with stdin, stdout,
# stderr, exit code and a forwarded signal; nothing is left.  Times here
# are nested/TCG.
. "$(dirname "$0")/../lib.sh"
need_root
SL=vsk$$
. "$(dirname "$0")/slurm-lib.sh"
sl_need
[ -x "$BIN/vhpc-hv" ] || skip_all "vhpc-hv is not built"
export VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
[ -e "$VHPC_KERNEL_CACHE/linux-image-cloud-amd64/.complete" ] ||
	skip_all "no kernel package in $VHPC_KERNEL_CACHE (make kernels fetches it during set-up)"
unset VHPC_KVM_ALLOW_EMULATION
T=$SL_DIR
# The lab's root is itself virtio-fs: no home or submission folder in the
# VMs (lab_no_default_binds), through the config dir the plugin is given.
mkdir -p "$T/configs"
cp -r "$VHPC_TOP/configs/." "$T/configs/"
sed -i -e 's/^bind_home: .*/bind_home: false/' -e 's/^bind_workdir: .*/bind_workdir: false/' "$T/configs/cluster.yaml"
export VHPC_CONFIG_DIR=$T/configs

sl_test_up 1

cat >"$W/steps.sh" <<'EOF'
#!/bin/sh
echo from-stdin | srun sh -c 'cat; hostname; echo to-err >&2; exit 5' >step1.out 2>step1.err
echo "step1 exit $?" >>steps.log
# The sleep ignores USR1: Slurm signals it too, and had it died first the
# shell's wait could end 0 before the shell's own USR1 came.
srun sh -c 'trap "kill \$! 2>/dev/null; echo got-usr1; exit 4" USR1; echo trap-set; (trap "" USR1; exec sleep 120) & wait' >step2.out 2>/dev/null &
s=$!
# The signal goes once the step says its trap is set (its start in the VM
# takes seconds under nested TCG; a fixed wait was either long or short).
for _ in $(seq 400); do grep -q trap-set step2.out 2>/dev/null && break; sleep 0.5; done
kill -USR1 $s
wait $s
echo "step2 exit $?" >>steps.log
EOF
chmod 755 "$W/steps.sh"
# The VM's console goes with its job's folder at teardown: keep a copy
# while the job runs, so that an L2 crash under TCG (the lab's own
# fault, lab_check) is told from this test's failure.
(while :; do for f in "$SL_DIR"/run-n1/jobs/*/kvm*/hv/serial; do [ -f "$f" ] && cp "$f" "$T/serial.copy"; done; sleep 2; done) &
copier=$!
at_exit "kill $copier 2>/dev/null"
t0=$(date +%s%N)
# 300 s: the step runs in 60-90 s nested/TCG; a hang is then reported
# with its logs within the test's own limit, not cut off by it.
sl_user timeout 300 salloc -N 1 -n 1 --vhpc-image=default --vhpc-driver=kvm --vhpc-mem=384M ./steps.sh \
	>"$T/salloc.out" 2>&1
rc=$?
kill $copier 2>/dev/null
lab_check "$T/serial.copy" "$SL_DIR"/run-n1/slurm/*.log
diag "salloc with two steps in a kvm guest: $(( ($(date +%s%N) - t0) / 1000000 )) ms (nested/TCG)"
check_eq "salloc --vhpc-driver=kvm with two steps exits 0" 0 "$rc"
[ "$rc" = 0 ] || diag "$(tail -20 "$T/salloc.out")" "$(tail -20 "$SL_DIR"/run-n1/slurm/holder.log 2>/dev/null)" \
	"guest console, last lines:" "$(tail -20 "$T/serial.copy" 2>/dev/null)" "L1: $(grep -E 'MemFree|MemAvailable|HugePages_Free' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
check_match "step 1's exit code is its program's in the VM" "step1 exit 5" "$(cat "$W/steps.log" 2>/dev/null)"
check_eq "it read srun's stdin and ran in guest g0" "from-stdin|g0" \
	"$(tr '\n' '|' <"$W/step1.out" 2>/dev/null | sed 's/|$//')"
check_match "its stderr came back as srun's" "to-err" "$(cat "$W/step1.err" 2>/dev/null)"
check_eq "a signal srun forwards reached the program in the VM" "step2 exit 4 trap-set got-usr1" \
	"$(grep step2 "$W/steps.log" 2>/dev/null) $(tr '\n' ' ' <"$W/step2.out" 2>/dev/null | sed 's/ $//')"
sl_wait_empty 60
sleep 1
check_eq "nothing is left" "$before" "$(sl_leftovers)"
check_eq "no vhpc-hv is left" 0 "$(pgrep -c -x vhpc-hv)"
done_testing
