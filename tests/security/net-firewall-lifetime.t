#!/usr/bin/env bash
# timeout: 180
# A job's firewall lives exactly as long as its network, wherever the job
# ends: made on each node of the job (not elsewhere) before its VXLAN, kept
# when a vhpcd killed with -9 restarts and takes the job over (injection is
# still dropped), gone when the job ends, and gone after a kill -9 of vhpcd
# when `vhpc-na cleanup` sweeps, even run from another network namespace
# (the host's, as here: the table lives in the node's).  Also what the
# firewall comes with: vxlan0 learns nothing, its bridge port neither learns
# nor floods unknown unicast, and remote guests' MACs are static entries
# that name their nodes.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/net-lib.sh"

net_job_up || { fail "cluster and job A up"; done_testing; exit 1; }
local_id() { ls "$CL_DIR/run-n$1/jobs" 2>/dev/null | grep "^$2x"; }
table() { cl_in "$CL-n$1" nft list table ip "vhpc-$(local_id "$1" "$2")" 2>/dev/null; }
tables() { cl_in "$CL-n$1" nft list tables 2>/dev/null | grep -c "vhpc-"; }
LA=$(local_id "$NA" "$A")
# nft shows a raw payload's value in hex, and a set of one without braces
HVNI=$(printf '0x%x' "$VNI")
check_match "n$NA has job $A's table, its VNI ($HVNI) and its peer n$NB" \
	"@th,96,24 $HVNI ip saddr != $(ul "$NB") counter .* drop" "$(table "$NA" "$A")"
check_match "... and the rule against other users' sockets" "@th,96,24 $HVNI meta skuid != 0 counter .* drop" \
	"$(table "$NA" "$A")"
check_match "n$NB has one that names n$NA" "@th,96,24 $HVNI ip saddr != $(ul "$NA") counter" "$(table "$NB" "$A")"
check_eq "n$NOUT, not in the job, has none" 0 "$(tables "$NOUT")"
check_match "vxlan0 learns nothing" "vxlan id $VNI .*nolearning" "$(ip -n "vhpc-$LA" -d link show vxlan0)"
check_match "its bridge port neither learns nor floods unknown unicast" "learning off flood off" \
	"$(ip -n "vhpc-$LA" -d link show vxlan0 | tr -s ' ' | grep -o 'learning [a-z]* flood [a-z]*')"
q=$(job_json "$A")
for i in 1 2; do
	[ "$(guest_node $i "$q")" = "$NB" ] || continue
	mac=52:54:$(printf '%02x:%02x:%02x:%02x' $(echo "${G0IP%.*}.$((2 + i))" | tr . ' '))
	fdb=$(ip netns exec "vhpc-$LA" bridge fdb show dev vxlan0 | grep "^$mac ")
	check_match "guest $i's MAC ($mac) goes to n$NB only" "^$mac dst $(ul "$NB") .*self permanent" "$fdb"
	check_match "... and sits on vxlan0 in the bridge, static" "^$mac master br0 static" "$fdb"
done

cl_node_kill "$NA" KILL
check "the job's firewall outlives a kill -9 of n$NA's vhpcd" test -n "$(table "$NA" "$A")"
cl_node_up "$NA" --cpus 0-$(($(nproc) > 1 ? 1 : 0))
check "the restarted vhpcd takes the job over" wait_log "$CL_DIR/n$NA.log" "job $A \\($LA\\): taken over after a restart" 20
check_eq "the job still runs" RUNNING "$(job_state "$A")"
check "... with its firewall" test -n "$(table "$NA" "$A")"
got=$(net_count_at_g0 3 cl_in "$CL-n$NOUT" "$INJ" send "$(ul "$NA")" "$VNI" "$G0MAC" "$G0IP" \
	02:00:00:00:00:95 "${G0IP%.*}.204" "$NET_PORT" 5 1000)
check_eq "injection from n$NOUT is still dropped (0 of 5 reach guest 0)" 0 "$got"
check "the job's guests still reach each other" quiet ip netns exec "$G1NS" ping -c 1 -W 2 -q "$G0IP"

vc cancel "$A" >/dev/null
check "job A ends" wait_state "$A" CANCELLED 30
for n in "$NA" "$NB"; do
	for _ in $(seq 50); do [ -z "$(local_id "$n" "$A")" ] && break; sleep 0.1; done
	check_eq "n$n has no job table left" 0 "$(tables "$n")"
done
check_eq "no firewall record is left" "" "$(ls "$CL_DIR"/run-n*/jobs/*/fw.netns 2>/dev/null)"

# kill -9, then the crash sweep from the host's namespace
J=$(net_submit -N 3 -n 3 --vcpus 1 --oversubscribe -- sleep 120)
check "job $J runs" wait_state "$J" RUNNING 40
n0=$(guest_node 0 "$(job_json "$J")")
check "n$n0 has its table" test -n "$(table "$n0" "$J")"
cl_node_kill "$n0" KILL
VHPC_RUN_DIR=$CL_DIR/run-n$n0 "$BIN/vhpc-na" cleanup >"$CL_DIR/cleanup.out" 2>&1
diag "$(grep -i firewall "$CL_DIR/cleanup.out")"
check_eq "vhpc-na cleanup, run in the host's namespace, removed n$n0's table" 0 "$(tables "$n0")"
check_match "... and says so" "removed its firewall" "$(cat "$CL_DIR/cleanup.out")"
check_eq "... and its record" "" "$(ls "$CL_DIR/run-n$n0"/jobs/*/fw.netns 2>/dev/null)"
done_testing
