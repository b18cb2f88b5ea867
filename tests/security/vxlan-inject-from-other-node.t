#!/usr/bin/env bash
# timeout: 120
# Attack: a node of the cluster that is not part of a job (root there, or
# its vhpcd) sends correctly addressed VXLAN frames for that job (its VNI,
# guest 0's MAC and address) to guest 0's node.  Before: the node took any
# source; the frames reached the guest and vxlan0 learnt the sender, so the
# replies came back.  Now the job's firewall takes its VNI only from the
# job's own nodes: nothing reaches the guest, no reply comes back.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/net-lib.sh"

net_job_up || { fail "cluster and job A up"; done_testing; exit 1; }
got=$(net_count_at_g0 3 cl_in "$CL-n$NOUT" "$INJ" send "$(ul "$NA")" "$VNI" "$G0MAC" "$G0IP" \
	02:00:00:00:00:98 "${G0IP%.*}.201" "$NET_PORT" 5 1500)
diag "attacker on n$NOUT: $(cat "$CL_DIR/attack.out")"
check_eq "no injected datagram from n$NOUT reaches guest 0 (of 5)" 0 "$got"
check_eq "no reply comes back to n$NOUT" 0 "$(sed -n 's/^sent 11 replies //p' "$CL_DIR/attack.out")"
drops=$(net_fw_drops "$NA")
diag "job firewall on n$NA, drops in/out: $drops"
check "the job's firewall on n$NA dropped them (11 frames)" test "${drops%% *}" -ge 11
check "the job's own nodes still carry it: a guest on n$NB reaches guest 0" \
	quiet ip netns exec "$G1NS" ping -c 1 -W 2 -q "$G0IP"
done_testing
