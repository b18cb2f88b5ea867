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
# A guest cannot reach the nodes' own network stacks over the VLAN.
# Nothing of the jobs is left after them.
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
check_ranks_on_verbs "$T/job" "on two nodes"
b=$PP_BYTES
check "node 1's link carried them ($n1 B sent)" test "$b" -gt 0 -a "$n1" -ge "$b"
check "node 2's link carried them ($n2 B sent)" test "$b" -gt 0 -a "$n2" -ge "$b"

# The attack: a guest sends to the nodes' own addresses over its fabric
# interface (iputils' ping binds to fab0 without any capability, and with
# no route there the kernel takes the address as on-link and asks by ARP
# on the job's VLAN).  Had the VLAN device sat in a node's namespace, that
# node's stack would answer and take the packets (weak host), one way
# across the VLAN boundary.  A counter in each node's input hook counts
# anything from the fabric's pool; the guests' pings to each other over
# fab0 show the same pings do leave.  The nodes run without a reverse-path
# filter, the kernel's default (Debian's systemd sets loose mode, which
# drops what arrives on an interface without an address, so a node's stack
# with it would ignore these requests; a site's nodes may run either), and
# with a default route, as nodes have.
for i in 1 2; do
	nsenter --net="/run/netns/$CL-n$i" -- ip route add default via 198.18.0.1 || fail "node $i: default route"
	nsenter --net="/run/netns/$CL-n$i" -- sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
		net.ipv4.conf.eth0.rp_filter=0
	nsenter --net="/run/netns/$CL-n$i" -- nft -f - <<'NFT' || fail "node $i: probe counter"
table inet vhpcprobe {
	chain in {
		type filter hook input priority -500; policy accept;
		ip saddr 10.217.0.0/16 counter
	}
}
NFT
	at_exit "nsenter --net=/run/netns/$CL-n$i -- nft delete table inet vhpcprobe 2>/dev/null"
done
cat >"$T/attack.sh" <<'ATTACK'
me=$(ip -4 -o addr show dev fab0 | awk '{ split($4, a, "/"); print a[1] }')
peer=${me%.*}.$(( 5 - ${me##*.} ))
ping -c 2 -W 2 -I fab0 "$peer" >/dev/null 2>&1 && echo "rank $OMPI_COMM_WORLD_RANK peer $peer answers"
for n in 198.18.0.11 198.18.0.12; do
	ping -c 2 -W 1 -I fab0 "$n" >/dev/null 2>&1 && echo "rank $OMPI_COMM_WORLD_RANK node $n answers"
done
ip neigh show dev fab0 | sed "s/^/rank $OMPI_COMM_WORLD_RANK neigh /"
true
ATTACK
(cd "$T" && timeout -k 5 200 nsenter --net=/run/netns/$CL_HUB -- "$BIN/vhpc" run -N 2 -n 2 --driver container --rdma \
	--bind "$T:/t:ro" -- /bin/sh /t/attack.sh) >"$T/attack" 2>&1
check_eq "a job whose guests ping the nodes over their fabric interface ends well" 0 $?
check_eq "... each guest reaches the other over fab0 (so its pings do leave)" 2 "$(grep -c 'peer .* answers' "$T/attack")"
check_eq "... no node answers" "" "$(grep 'node .* answers' "$T/attack")"
for i in 1 2; do
	c=$(nsenter --net="/run/netns/$CL-n$i" -- nft list table inet vhpcprobe | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
	check_eq "... node $i's own stack took no packet from a guest's fabric address" 0 "${c:-none}"
done
check "... no guest learned a node's MAC on the VLAN" sh -c "! grep -E 'neigh 198\.18\.0\.1[12] .*lladdr' '$T/attack'"
grep -qE 'node .* answers|neigh 198\.18\.0\.1[12] .*lladdr' "$T/attack" && diag "$(cat "$T/attack")"

check "the nodes are idle again" cl_wait_nodes_idle
check_eq "nothing of the job is left (namespaces, job dirs, runc state, VXLANs, mounts)" "$before" "$(cl_leftovers)"
check_eq "no RDMA link of the job is left" "$links_before" "$(rdma link show 2>/dev/null | grep -c 'vhpc-')"
done_testing
