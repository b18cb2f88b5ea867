#!/usr/bin/env bash
# timeout: 120
# Attack: an unprivileged user on a node of a job sends VXLAN frames for
# that job (its VNI, guest 0's MAC and address) from the node's own address:
# to the job's other node, which takes the job's VNI from this node, and to
# this node itself.  Before: both reached the guest.  Now the job's
# firewall on the sending node drops VXLAN with the job's VNI from any user
# socket but root's (the kernel's VXLAN socket has no user), and the one on
# guest 0's node takes its VNI only from the job's other nodes.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/net-lib.sh"

net_job_up || { fail "cluster and job A up"; done_testing; exit 1; }
nobody() { cl_in "$CL-n$1" setpriv --reuid 65534 --regid 65534 --clear-groups "${@:2}"; }
# Port 4789 on a node of the job is the kernel's: no listening for replies.
got=$(net_count_at_g0 3 nobody "$NB" "$INJ" send "$(ul "$NA")" "$VNI" "$G0MAC" "$G0IP" \
	02:00:00:00:00:97 "${G0IP%.*}.202" "$NET_PORT" 5 0)
diag "nobody on n$NB: $(cat "$CL_DIR/attack.out")"
check_eq "nothing nobody sends from n$NB, the job's other node, reaches guest 0 (of 5)" 0 "$got"
drops=$(net_fw_drops "$NB")
diag "job firewall on n$NB, drops in/out: $drops"
check "... n$NB's firewall dropped them on the way out (11 frames)" test "${drops##* }" -ge 11
got=$(net_count_at_g0 3 nobody "$NA" "$INJ" send "$(ul "$NA")" "$VNI" "$G0MAC" "$G0IP" \
	02:00:00:00:00:97 "${G0IP%.*}.202" "$NET_PORT" 5 0)
diag "nobody on n$NA: $(cat "$CL_DIR/attack.out")"
check_eq "nor what nobody sends on guest 0's own node to it (of 5)" 0 "$got"
check "the job's own traffic passes the same rules: a guest on n$NB reaches guest 0" \
	quiet ip netns exec "$G1NS" ping -c 1 -W 2 -q "$G0IP"
done_testing
