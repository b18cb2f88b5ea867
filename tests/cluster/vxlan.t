#!/usr/bin/env bash
# timeout: 60
# The job network across nodes at the node agent's level (vhpc-na up, no
# daemons): two "nodes" (network namespaces on a test bridge) each build
# their part of a job with guests of job-wide indexes, joined by a VXLAN
# with the job's VNI.  Guests reach each other across the nodes, the MTU
# leaves room for the encapsulation (jumbo frames pass with DF set), a
# second job with another VNI on the same nodes cannot reach the first
# even from an address in its subnet, vxlan0 learns nothing, each node has
# the job's firewall (its VNI only from the peer), guests' MACs follow from
# their addresses, and nothing is left afterwards, the firewall included,
# also after a kill -9 and `vhpc-na cleanup` from another namespace.
. "$(dirname "$0")/../lib.sh"
need_root
CL=vcx$$
. "$(dirname "$0")/cluster-lib.sh"
NA=$BIN/vhpc-na

cl_net_up 2 || { fail "test network"; done_testing; exit 1; }
before=$(cl_leftovers)

fails() { ! "$@" >/dev/null 2>&1; }
quiet() { "$@" >/dev/null 2>&1; }
# up LABEL NODE JOB INDEX VNI PEER: one guest (network only) of a job on a node
up() {
	local label=$1 pid
	shift
	local n=$1 out=$CL_DIR/$2.out
	mkdir -p "$CL_DIR/run-n$n"
	VHPC_RUN_DIR=$CL_DIR/run-n$n nsenter --net=/run/netns/$CL-n$n -- "$NA" up --job "$2" -N 1 \
		--oversubscribe --subnet 10.77.0.0/24 --first-index "$3" --vni "$4" \
		--underlay "198.18.0.1$n" --peer "$5" >"$out" 2>&1 &
	pid=$!
	at_exit "kill -TERM $pid 2>/dev/null; sleep 0.5; VHPC_RUN_DIR='$CL_DIR/run-n$n' '$NA' cleanup >/dev/null 2>&1"
	eval "PID_$label=$pid"
	wait_log "$out" '^(ready|down)$' 20 && grep -q '^ready$' "$out"
}
A1=${CL}a1 A2=${CL}a2 B1=${CL}b1 B2=${CL}b2
check "job A, guest 0 on node 1 (VNI 5001)" up A1 1 "$A1" 0 5001 198.18.0.12
check "job A, guest 1 on node 2" up A2 2 "$A2" 1 5001 198.18.0.11
check "job B, guest 5 on node 1 (VNI 5002, the same subnet)" up B1 1 "$B1" 5 5002 198.18.0.12
check "job B, guest 6 on node 2" up B2 2 "$B2" 6 5002 198.18.0.11
diag "$(cat "$CL_DIR/$A1.out")"

check_match "guest addresses follow job-wide indexes" 'guest 1 netns vhpc-.*-1 addr 10.77.0.3/24' "$(cat "$CL_DIR/$A2.out")"
check_match "the job network's MTU is the profile's 9000 less 50" 'mtu 8950' "$(cat "$CL_DIR/$A1.out")"
vx=$(ip -n "vhpc-$A1" -d link show vxlan0 2>&1)
check_match "vxlan0 sits in the job namespace, VNI and local address of node 1" "vxlan id 5001 local 198.18.0.11 .*dstport 4789" "$vx"
check_match "... its underlay is node 1's namespace" "link-netns $CL-n1" "$vx"
check_match "... enslaved to the job's bridge" 'master br0' "$vx"
fdb=$(ip netns exec "vhpc-$A1" bridge fdb show dev vxlan0)
check_match "a flooding entry for the peer node" '00:00:00:00:00:00 dst 198.18.0.12 .*permanent' "$fdb"
check_match "vxlan0 learns nothing" "vxlan id 5001 .*nolearning" "$vx"
check_match "guest 0's MAC follows from its address (10.77.0.2)" "link/ether 52:54:0a:4d:00:02 " \
	"$(ip -n "vhpc-$A1-0" link show eth0)"
fw() { nsenter --net=/run/netns/$CL-n$1 -- nft list table ip "vhpc-$2" 2>/dev/null; }
# (nft shows the raw payload's value in hex: 5001 = 0x1389)
check_match "node 1 has job A's firewall: VNI 5001 only from node 2" \
	'udp dport 4789 @th,96,24 0x1389 ip saddr != 198.18.0.12 counter .* drop' "$(fw 1 "$A1")"
check_match "... and not from other users' sockets" '@th,96,24 0x1389 meta skuid != 0 counter .* drop' "$(fw 1 "$A1")"

check "A's guests reach each other across the nodes" quiet ip netns exec "vhpc-$A1-0" ping -c 2 -W 2 -q 10.77.0.3
check "jumbo frames (8900 bytes, DF) pass the VXLAN" quiet ip netns exec "vhpc-$A1-0" ping -c 1 -W 2 -q -M do -s 8900 10.77.0.3
check "B's guests reach each other too" quiet ip netns exec "vhpc-$B1-5" ping -c 2 -W 2 -q 10.77.0.8
check "A cannot reach B's guest on the other node" fails ip netns exec "vhpc-$A1-0" ping -c 1 -W 1 -q 10.77.0.8
check "nor B A's" fails ip netns exec "vhpc-$B1-5" ping -c 1 -W 1 -q 10.77.0.3
# Even an address of B's own on A's wire reaches nothing of B: separate L2.
ip -n "vhpc-$A1-0" addr add 10.77.0.200/24 dev eth0 2>/dev/null
check "an address of B's subnet on A's guest reaches nothing of B" \
	fails ip netns exec "vhpc-$A1-0" ping -c 1 -W 1 -q -I 10.77.0.200 10.77.0.7
check_eq "A's guest never learnt B's MAC" "" \
	"$(ip netns exec "vhpc-$A1-0" ip neigh show 10.77.0.7 | grep -v FAILED | grep lladdr)"

check "the guests still talk through it" quiet ip netns exec "vhpc-$A1-0" ping -c 1 -W 2 -q 10.77.0.3

for j in A1 A2 B1 B2; do eval "kill -TERM \$PID_$j"; done
for j in A1 A2 B1 B2; do eval "wait \$PID_$j"; done
check_eq "every job removed its part: no netns, no vxlan, no mounts" "$before" "$(cl_leftovers)"
check_eq "... no firewall on either node" "0 0" \
	"$(for n in 1 2; do nsenter --net=/run/netns/$CL-n$n -- nft list tables | grep -c vhpc-; done | tr '\n' ' ' | sed 's/ $//')"

# kill -9, then the sweep from this (the host's) namespace
C1=${CL}c1
check "job C on node 1" up C1 1 "$C1" 0 5003 198.18.0.12
check "... has its firewall" test -n "$(fw 1 "$C1")"
kill -9 "$PID_C1"
wait "$PID_C1" 2>/dev/null
check_match "vhpc-na cleanup, run in another namespace, removes it" "removed its firewall" \
	"$(VHPC_RUN_DIR=$CL_DIR/run-n1 "$NA" cleanup 2>&1)"
check_eq "... from node 1's namespace" "" "$(fw 1 "$C1")"
check_eq "nothing is left" "$before" "$(cl_leftovers)"
check_eq "no job netns of this test left" 0 "$(ls /run/netns | grep -c "vhpc-$CL")"
done_testing
