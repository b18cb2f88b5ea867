#!/usr/bin/env bash
# timeout: 120
# Underlay encryption asked for where the kernel has no WireGuard (as on
# this project's hosts): the job does not start, its reason says why, and
# nothing of it is left on the nodes: no job table, no firewall record, no
# WireGuard device.  Where the kernel has WireGuard, net-wireguard.t is the
# test.
. "$(dirname "$0")/../lib.sh"
unshare -n ip link add wgprobe type wireguard 2>/dev/null && skip_all "this kernel has WireGuard (net-wireguard.t runs)"
. "$(dirname "$0")/net-lib.sh"

net_encrypt || { fail "cluster file with underlay encryption"; done_testing; exit 1; }
cl_net_up 3 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
for i in 1 2 3; do cl_node_up "$i" --cpus 0-$(($(nproc) > 1 ? 1 : 0)) || fail "node $i starts"; done
check "three nodes register" cl_wait_nodes_up 3
A=$(net_submit -N 3 -n 3 --vcpus 1 --oversubscribe -- true)
check "the job fails to start" wait_state "$A" FAILED 60
check_match "its reason names WireGuard" "underlay encryption.*WireGuard" "$(job_json "$A")"
for i in 1 2 3; do
	check_eq "n$i: no job table, no WireGuard device" "0 0" \
		"$(cl_in "$CL-n$i" nft list tables | grep -c vhpc-) $(ip -n "$CL-n$i" link show 2>/dev/null | grep -c vhpcwg)"
done
check_eq "no firewall record is left" "" "$(ls "$CL_DIR"/run-n*/jobs/*/fw.netns 2>/dev/null)"
done_testing
