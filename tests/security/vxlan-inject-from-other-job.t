#!/usr/bin/env bash
# timeout: 150
# Attack: a guest of another job B, on a node that job A shares, aims at A's
# guest 0 (as root in its own namespace: more than a guest holds): VXLAN
# frames with A's VNI to A's nodes, and datagrams straight to guest 0's MAC
# and address on B's own wire.  Neither reaches guest 0: a guest has no
# route to the underlay, and B's wire is B's VNI.  This held before the
# firewall too (tests/cluster/isolation.t shows the same by ping); the
# test keeps it so, counting what arrives.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/net-lib.sh"

net_job_up || { fail "cluster and job A up"; done_testing; exit 1; }
JB=$(net_submit -N 3 -n 3 --vcpus 1 --oversubscribe -- sleep 120)
check "job B runs beside A" wait_state "$JB" RUNNING 40
qb=$(job_json "$JB")
for i in 0 1 2; do
	[ "$(guest_node $i "$qb")" = "$NA" ] && BNS=$(gns "$JB" $i)
	[ "$(guest_node $i "$qb")" = "$NB" ] && BNS=${BNS:-$(gns "$JB" $i)}
done
diag "B's guest $BNS shares a node with A"
check "a guest of B is on a node of A" test -n "$BNS"
got=$(net_count_at_g0 3 ip netns exec "$BNS" "$INJ" send "$(ul "$NA")" "$VNI" "$G0MAC" "$G0IP" \
	02:00:00:00:00:96 "${G0IP%.*}.203" "$NET_PORT" 5 0)
diag "from B's guest: $(cat "$CL_DIR/attack.out")"
check_eq "no VXLAN frame from B's guest reaches A's guest 0 (of 5)" 0 "$got"
# On B's wire: a route and a neighbour entry for A's guest 0, then datagrams.
ip -n "$BNS" route add "$G0IP/32" dev eth0
ip -n "$BNS" neigh replace "$G0IP" lladdr "$G0MAC" dev eth0 nud permanent
send_plain() { local i; for i in 1 2 3 4 5; do echo "vhpc-inject $i" >/dev/udp/"$G0IP"/"$NET_PORT"; sleep 0.05; done; }
got=$(net_count_at_g0 2 ip netns exec "$BNS" bash -c "$(declare -f send_plain); G0IP=$G0IP NET_PORT=$NET_PORT; send_plain")
check_eq "no datagram to guest 0's MAC on B's wire reaches it (of 5)" 0 "$got"
got=$(net_count_at_g0 2 ip netns exec "$G1NS" bash -c "$(declare -f send_plain); G0IP=$G0IP NET_PORT=$NET_PORT; send_plain")
check_eq "the same datagrams from A's own guest on n$NB all reach guest 0 (the count works)" 5 "$got"
done_testing
