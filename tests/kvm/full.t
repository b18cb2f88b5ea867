#!/usr/bin/env bash
# timeout: 250
# needs: hardware-virtualization
# The whole kvm path: two VMs boot the image's kernel and initramfs, mount
# their ext4 root and config disk, vhpc-guestd reports ready over vsock,
# mpirun in guest 0 starts orted in guest 1 through vhpc-rsh over the job
# network, and a 2-rank PingPong across the guests (vmshm between them,
# through ivshmem) prints its IMB table; then nothing is left.  Needs KVM
# with hardware virtualization: tests/run runs it in the virtualization lab
# where the host has none.  All of it with vhpc-hv confined (nobody, no
# capabilities, no_new_privs, the seccomp allowlist, a mount namespace of
# its own), as the agent always runs it: read from /proc while it runs.
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmf
unset VHPC_KVM_ALLOW_EMULATION


# What vhpc-hv is and holds, seen once it runs.
(
	for _ in $(seq 1200); do
		pid=$(pgrep -f 'vhpc-hv .*--seccomp' | head -n 1)
		if [ -n "$pid" ] && grep -q '^Seccomp:[[:space:]]*2' "/proc/$pid/status" 2>/dev/null; then
			{ cat "/proc/$pid/status"; echo "mntns: $(readlink "/proc/$pid/ns/mnt")"; } >"$T/hv.status"
			exit 0
		fi
		poll_pause
	done
) &
wpid=$!
at_exit kill $wpid
t0=$(date +%s.%N)
vhpc run --driver kvm -N 2 -n 2 --mem 512M --timeout 240 -x OMPI_MCA_btl_base_verbose=1 -- \
	vhpc-mpibench -show-hosts -msglog 0:16 PingPong >"$T/out" 2>"$T/err"
rc=$?
check_eq "a 2-guest PingPong in kvm guests exits 0" 0 "$rc"
[ $rc = 0 ] || diag "$(tail -n 40 "$T/err")"
job=$(sed -n 's/^vhpc: job \([a-z0-9]*\): .*/\1/p' "$T/err" | head -n 1)
check_match "both guests reported ready over vsock" "job $job: 2 guests ready in [0-9.]+ s" "$(cat "$T/err")"
diag "$(grep -o "guest g[01]: vhpc-hv pid .*" "$T/err")" "$(grep -o "2 guests ready in .*" "$T/err")" \
	"whole job: $(echo "$(date +%s.%N) - $t0" | bc) s"
grep '^# rank ' "$T/out" >"$T/ranks"
check_eq "one rank in guest g0" 1 "$(grep -c 'host=g0 ' "$T/ranks")"
check_eq "one rank in guest g1" 1 "$(grep -c 'host=g1 ' "$T/ranks")"
check "the IMB table parses (PingPong at 2 ranks)" vhpc-imbcheck -expect PingPong@2 "$T/out"
check_match "the guests talked through vmshm (ivshmem), not TCP" "Using vmshm btl" "$(cat "$T/out" "$T/err")"
check_eq "nothing of the job is left" "" \
	"$(ip netns list | grep "^vhpc-$job"; ls /dev/shm | grep "^vhpc-$job-"; ls "$VHPC_RUN_DIR/jobs" 2>/dev/null; pgrep -f "vhpc-hv .*/jobs/$job/")"
wait $wpid 2>/dev/null
st=$(cat "$T/hv.status" 2>/dev/null)
check_eq "vhpc-hv ran as nobody, with no capability, no_new_privs and its seccomp filter" \
	"$(id -u nobody) 0000000000000000 1 2" \
	"$(awk '/^Uid:/ {u=$3} /^CapEff:/ {e=$2} /^NoNewPrivs:/ {n=$2} /^Seccomp:/ {s=$2} END {print u, e, n, s}' <<<"$st")"
check "... in a mount namespace of its own" test -n "$st" -a "$(sed -n 's/^mntns: //p' <<<"$st")" != "$(readlink /proc/self/ns/mnt)"
done_testing
