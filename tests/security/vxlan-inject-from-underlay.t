#!/usr/bin/env bash
# timeout: 120
# Attack: a machine on the cluster's underlay that is not a node (here a
# namespace on the hub, 198.18.0.99) sends correctly addressed VXLAN frames
# for a running job (its VNI, guest 0's MAC and address) to guest 0's node:
# UDP datagrams and pings.  Before: they reached the guest and, because
# vxlan0 learnt the sender, the replies came back to it (issue 31, "Tried":
# 3 of 3 pings).  Now the job's firewall on the node drops them: nothing
# reaches the guest, no reply comes back, vxlan0 learns nothing.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/net-lib.sh"

net_job_up || { fail "cluster and job A up"; done_testing; exit 1; }
X=$CL-x
ip netns add "$X" && at_exit "ip netns del '$X' 2>/dev/null"
ip link add "${CL}vx" mtu 9000 netns "$CL_HUB" type veth peer name eth0 mtu 9000 netns "$X"
ip -n "$CL_HUB" link set "${CL}vx" master hub0 up
ip -n "$X" addr add 198.18.0.99/24 dev eth0
ip -n "$X" link set eth0 up
check "the attacker's namespace reaches guest 0's node" quiet ip netns exec "$X" ping -c 1 -W 2 -q "$(ul "$NA")"

check "the VNI is not 4096 + the job id ($VNI)" test "$VNI" != $((4096 + A))
got=$(net_count_at_g0 3 ip netns exec "$X" "$INJ" send "$(ul "$NA")" "$VNI" "$G0MAC" "$G0IP" \
	02:00:00:00:00:99 "${G0IP%.*}.200" "$NET_PORT" 5 1500)
check_eq "no injected datagram reaches guest 0 (of 5)" 0 "$got"
diag "attacker: $(cat "$CL_DIR/attack.out")"
rep=$(sed -n 's/^sent 11 replies //p' "$CL_DIR/attack.out")
check_eq "no reply comes back to the attacker" 0 "$rep"
check_eq "vxlan0 on n$NA has no entry for the attacker" "" \
	"$(ip netns exec "vhpc-$(ls "$CL_DIR/run-n$NA/jobs" | grep "^${A}x")" bridge fdb show dev vxlan0 | grep 198.18.0.99)"
drops=$(net_fw_drops "$NA")
diag "job firewall on n$NA, drops in/out: $drops"
check "the job's firewall on n$NA dropped them (11 frames)" test "${drops%% *}" -ge 11
check "the job's own guests still reach each other" quiet ip netns exec "$G1NS" ping -c 1 -W 2 -q "$G0IP"
done_testing
