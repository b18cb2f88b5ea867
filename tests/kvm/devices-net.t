#!/usr/bin/env bash
# timeout: 300
# needs: hardware-virtualization
# vhpc-hv's virtio-net under the guests' real Linux driver, in a 2-guest
# kvm job: TCP streams between the VMs and between a VM and the host, both
# ways (vhpc-netbench).  The offloads and the MTU are checked from inside
# the guests by devices.t.  Its own file, so that a lab failure costs a
# retry of this job alone.
# Speeds here are nested/TCG: they prove nothing about hardware.
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmn
unset VHPC_KVM_ALLOW_EMULATION
RUN=(vhpc run --driver kvm -N 2 -n 2 --mem 384M --timeout 240)

# -- TCP streams between the VMs, and between a VM and the host ------------
# The host's side of a job network is its namespace (vhpc-<job>), where
# the bridge lives: the test gives br0 the subnet's last address there and
# runs vhpc-netbench's client against rank 0, which serves once the
# VM-to-VM stream is done.
"${RUN[@]}" -- sh -c 'vhpc-netbench -sizes 64K -time 2 stream || exit
[ "$OMPI_COMM_WORLD_RANK" = 0 ] || exit 0
exec vhpc-netbench -serve 0.0.0.0:5201 -idle 180' >"$T/nb.out" 2>"$T/nb.err" &
pid=$!
job= g0=
g0_addr_or_gone() {
	job=$(job_id_of "$T/nb.err")
	[ -n "$job" ] && g0=$(pgrep -af "vhpc-hv .*/jobs/$job/kvm0/" | sed -n 's/.*vhpc\.addr=\([0-9.]*\/[0-9]*\).*/\1/p' | head -n 1)
	[ -n "$g0" ] || ! kill -0 $pid 2>/dev/null
}
poll_until 60 g0_addr_or_gone
check_match "g0 has an address on the job network" '^[0-9.]+/[0-9]+$' "$g0"
IFS=./ read -r a b c d plen <<<"${g0:-0.0.0.0/32}"
ga=$(( (a << 24) | (b << 16) | (c << 8) | d ))
h=$(( (ga | ((1 << (32 - plen)) - 1)) - 1 ))
host="$((h >> 24 & 255)).$((h >> 16 & 255)).$((h >> 8 & 255)).$((h & 255))"
ip -n "vhpc-$job" addr add "$host/$plen" dev br0 2>"$T/addr.err"
check_eq "the test gives br0 $host/$plen in the job's namespace" "" "$(cat "$T/addr.err")"
ip netns exec "vhpc-$job" vhpc-netbench -connect "${g0%/*}:5201" -wait 200 -sizes 64K -time 1 -stop \
	stream maerts rr >"$T/vh.out" 2>"$T/vh.err"
check_eq "host to VM: vhpc-netbench's client exits 0" 0 "$?"
wait $pid
check_eq "the job (VM-to-VM stream, then g0 serving the host) exits 0" 0 "$?"
fig() { sed -n "s/^vhpc-bench {\"test\":\"$1\",\"size\":65536,\"value\":\([0-9.]*\),.*/\1/p" "$2" | head -n 1; }
mbit=$(fig stream "$T/nb.out") h2v=$(fig stream "$T/vh.out") v2h=$(fig maerts "$T/vh.out") rr=$(fig rr "$T/vh.out")
check_match "VM to VM: the stream was measured" '^[0-9]+\.[0-9]+$' "$mbit"
check_match "host to VM: the stream was measured" '^[0-9]+\.[0-9]+$' "$h2v"
check_match "VM to host: the stream was measured" '^[0-9]+\.[0-9]+$' "$v2h"
check_match "host and VM: round trips were measured" '^[0-9]+\.[0-9]+$' "$rr"
[ -n "$h2v" ] || diag "$(cat "$T/vh.err" "$T/nb.err" | tail -n 20)"
diag "TCP, 64 KiB writes (nested/TCG): VM to VM ${mbit:-?} Mbit/s, host to VM ${h2v:-?} Mbit/s," \
	"VM to host ${v2h:-?} Mbit/s; host-VM round trip of 64 KiB ${rr:-?} usec"
done_testing
