#!/usr/bin/env bash
# timeout: 500
# lab-kernel: 7.3.4+deb13-amd64
# MPI between container guests on two nodes over the fabric, the way a
# cluster runs it: vhpc-ctld places `vhpc run -N 2 -n 2 --rdma` on two
# nodes (network namespaces on a hub bridge, one cpu each, so one guest
# each), whose cluster file gives them a soft-RoCE fabric on their link to
# the hub (the job's VLAN crosses the bridge tagged; jumbo frames, so rxe's
# MTU is 4096).  By counters: the bml took the ofi BTL, each guest's fabric
# interface sent at least its rank's PingPong bytes and its rxe device a
# packet per 4 KiB or more, the job network (TCP) a small part, and each
# node's link carried the bytes (so they crossed between the nodes).  Until
# container guests could pin their memory this job hung for ever (rxd's
# pools over a 4096-byte MTU outgrew the inherited 8 MiB RLIMIT_MEMLOCK).
# Nothing of the job is left after it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/fabric-lib.sh"
fab_need
need_cluster vhpc-na
command -v runc >/dev/null || skip_all "runc is not installed"
[ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] || skip_all "needs cgroup2 alone on /sys/fs/cgroup (the lab's 7.3.4 L1 has it)"
CL=vfm$$
. "$(dirname "$0")/../cluster/cluster-lib.sh"
T=$CL_DIR
awk '{ print } END { print "fabric:"; print "  mode: soft-roce"; print "  link: eth0"
	print "  vlans: 420-429"; print "  pool: 10.217.0.0/16"; print "  prefix: 24" }' \
	"$VHPC_TOP/configs/cluster.yaml" >"$T/cluster-fabric.yaml"
export VHPC_CLUSTER=$T/cluster-fabric.yaml
links_before=$(rdma link show 2>/dev/null | grep -c 'vhpc-')
cl_up() { cl_net_up 2 && cl_munge_up && cl_ctld_up && cl_node_up 1 && cl_node_up 2 && cl_wait_nodes_up 2; }
if ! cl_up; then
	fail "a cluster of two nodes with the fabric, through vhpc-ctld"
	diag "$(tail -n 20 "$CL_DIR"/*.log)"
	done_testing
	exit 1
fi
ok "a cluster of two nodes with the fabric, through vhpc-ctld"
check_eq "both nodes have the fabric on their link to the hub (vhpc nodes)" 2 "$(vc nodes 2>&1 | grep -c 'fabric soft-roce on eth0')"
before=$(cl_leftovers)

# What node N's link sent (its own namespace's /proc/net/dev: L1's /sys
# shows the initial namespace).
node_tx() { nsenter --net="/run/netns/$CL-n$1" -- cat /proc/net/dev | awk '$1 == "eth0:" { print $10 }'; }
n1=$(node_tx 1) n2=$(node_tx 2)
(cd "$T" && timeout -k 5 300 nsenter --net=/run/netns/$CL_HUB -- "$BIN/vhpc" run -N 2 -n 2 --driver container --rdma \
	--bind "$FAB_RANK_DIR:/t:ro" -x OMPI_MCA_btl_base_verbose=1 -- /bin/sh /t/rank-counters.sh) >"$T/job" 2>&1
rc=$?
check_eq "vhpc run -N 2 -n 2 --rdma through vhpc-ctld ends well" 0 $rc
[ $rc = 0 ] || diag "$(tail -n 25 "$T/job")"
n1=$(( $(node_tx 1) - n1 )) n2=$(( $(node_tx 2) - n2 ))
b=$(pingpong_bytes "$T/job")
diag "PingPong over verbs between guests on two nodes (nested/TCG): $(awk '$1 ~ /^[0-9]+$/ && NF == 4 { printf "%s B %s us %s MB/s; ", $1, $3, $4 }' "$T/job")"
check_match "the bml took the ofi BTL" 'Using ofi btl' "$(cat "$T/job")"
for r in 0 1; do
	f=$(rank_field "$T/job" $r fab0) e=$(rank_field "$T/job" $r eth0) p=$(rank_field "$T/job" $r rxe-pkts)
	diag "rank $r: fab0 $f B, eth0 $e B, rxe $p packets sent; PingPong $b B a rank"
	check "rank $r's fabric interface sent at least its PingPong bytes ($f >= $b)" test "$b" -gt 0 -a "${f:--}" != - -a "${f:-0}" -ge "$b"
	check "... its rxe device a packet per 4 KiB or more ($p)" test "${p:--}" != - -a "${p:-0}" -ge $((b / 4096))
	check "... its job network (TCP) a small part ($e B)" test "${e:-0}" -lt $((b / 10 + 1))
done
check "node 1's link carried them ($n1 B sent)" test "$b" -gt 0 -a "$n1" -ge "$b"
check "node 2's link carried them ($n2 B sent)" test "$b" -gt 0 -a "$n2" -ge "$b"
check "the nodes are idle again" cl_wait_nodes_idle
check_eq "nothing of the job is left (namespaces, job dirs, runc state, VXLANs, mounts)" "$before" "$(cl_leftovers)"
check_eq "no RDMA link of the job is left" "$links_before" "$(rdma link show 2>/dev/null | grep -c 'vhpc-')"
done_testing
