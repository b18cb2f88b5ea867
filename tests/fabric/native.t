#!/usr/bin/env bash
# timeout: 400
# lab-kernel: 7.3.4+deb13-amd64
# Verbs between two nodes over the soft-RoCE fabric, natively: an rxe
# device on each node namespace's fabric link, ib_send_lat and ib_write_bw
# between them (the baseline guests are measured against), and each
# node's device seen by that node alone.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/fabric-lib.sh"
fab_need
T_DIR=$(mktemp -d /tmp/fab-native.XXXXXX)
at_exit "rm -rf '$T_DIR'"
P=fx$$
fab_two_nodes $P
check_eq "node 1 sees its own device only" "${P}r1" \
	"$(ip netns exec $FAB_N1 ibv_devices | awk 'NR > 2 { print $1 }' | grep "^$P" | tr '\n' ' ' | sed 's/ $//')"
check_eq "the initial namespace sees neither" "" "$(ibv_devices 2>/dev/null | awk 'NR > 2 { print $1 }' | grep "^$P")"
g1=$(gid_index $FAB_N1 ${P}r1) g2=$(gid_index $FAB_N2 ${P}r2)
check_match "each device has an IPv4 RoCE v2 GID" '^[0-9]+ [0-9]+$' "$g1 $g2"

perf_pair ip netns exec $FAB_N2 ib_send_lat -d ${P}r2 -x "$g2" -s 2 -n 200 -- \
	ip netns exec $FAB_N1 ib_send_lat -d ${P}r1 -x "$g1" -s 2 -n 200 10.77.0.2
rc=$?
lat=$(perf_figure "$PERF_OUT" 2 5); diag "$PERF_OUT"
[ $rc = 0 ] && [ -n "$lat" ] && ok "ib_send_lat node 1 -> node 2 over rxe: 2 B typical $lat us (nested/TCG)" ||
	{ fail "ib_send_lat node 1 -> node 2 (status $rc)"; diag "$PERF_OUT"; }

perf_pair ip netns exec $FAB_N2 ib_write_bw -d ${P}r2 -x "$g2" -s 65536 -n 200 -- \
	ip netns exec $FAB_N1 ib_write_bw -d ${P}r1 -x "$g1" -s 65536 -n 200 10.77.0.2
rc=$?
bw=$(perf_figure "$PERF_OUT" 65536 4)
[ $rc = 0 ] && [ -n "$bw" ] && ok "ib_write_bw node 1 -> node 2 over rxe: 64 KiB average $bw MB/s (nested/TCG)" ||
	{ fail "ib_write_bw node 1 -> node 2 (status $rc)"; diag "$PERF_OUT"; }

# Node 2's device from node 1: not there to open.
out=$(ip netns exec $FAB_N1 ibv_devinfo -d ${P}r2 2>&1)
check_match "node 1 cannot open node 2's device (exclusive netns mode)" "wasn't found|No IB devices found" "$out"

in_node 1 rdma link del ${P}r1; in_node 2 rdma link del ${P}r2
check_eq "no rxe device of the test is left" "" "$( (rdma dev; in_node 1 rdma dev; in_node 2 rdma dev) 2>/dev/null | grep "$P")"
done_testing
