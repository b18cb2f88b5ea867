#!/usr/bin/env bash
# timeout: 150
# Two jobs at once on shared nodes stay apart: each job's guests reach each
# other across nodes over the job's VXLAN, but not the other job's guests,
# not even from an address of the other job's subnet on the same node; two
# MPI benchmarks run side by side and both complete correctly.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-mpibench vhpc-imbcheck
CL=vci$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR
fails() { ! "$@" >/dev/null 2>&1; }
quiet() { "$@" >/dev/null 2>&1; }

cl_net_up 3 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
# Nodes of two cores each (all on this machine's two): 3-guest jobs of one
# vCPU each fill one node and a half, so two of them share a node.
for i in 1 2 3; do cl_node_up $i --cpus 0-$(( $(nproc) > 1 ? 1 : 0 )) || fail "node $i starts"; done
check "three nodes register" cl_wait_nodes_up 3

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
A=$(sub -N 3 -n 3 --vcpus 1 --oversubscribe -- sleep 60)
JB=$(sub -N 3 -n 3 --vcpus 1 --oversubscribe -- sleep 60)
check "job A runs" wait_state "$A" RUNNING 30
check "job B runs beside it" wait_state "$JB" RUNNING 30
qa=$(job_json "$A")
qb=$(job_json "$JB")
na=$(echo "$qa" | sed -n 's/.*"nodes":\[\([^]]*\)\].*/\1/p' | tr -d '"')
nb=$(echo "$qb" | sed -n 's/.*"nodes":\[\([^]]*\)\].*/\1/p' | tr -d '"')
shared=$(comm -12 <(echo "$na" | tr , '\n' | sort) <(echo "$nb" | tr , '\n' | sort))
diag "job A on $na, job B on $nb"
check "the jobs share a node ($shared)" test -n "$shared"
check "each job spans two nodes" test "$(echo "$na" | tr , '\n' | wc -l)" = 2 -a "$(echo "$nb" | tr , '\n' | wc -l)" = 2
vnia=$(echo "$qa" | sed -n 's/.*"vni":\([0-9]*\).*/\1/p')
vnib=$(echo "$qb" | sed -n 's/.*"vni":\([0-9]*\).*/\1/p')
check "they have different VNIs ($vnia, $vnib)" test -n "$vnia" -a -n "$vnib" -a "$vnia" != "$vnib"

# guest netns by job-wide index: vhpc-<job in base 36>x<node>-<index>
gns() { ls /run/netns | grep -E "^vhpc-$1x[0-9a-z]+-$2\$"; }
addr() { ip -n "$(gns "$1" "$2")" -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1; }
# a guest of each job on the shared node, and one elsewhere
node_of() { echo "$2" | grep -o "\"guest\":$1,\"node\":\"n[0-9]\"" | sed 's/.*"\(n[0-9]\)"/\1/'; }
for g in 0 1 2; do eval "na$g=$(node_of $g "$qa") nb$g=$(node_of $g "$qb")"; done
pick() {  # JOB QA VAR-PREFIX: index of a guest on the shared node, and one not there
	local g
	for g in 0 1 2; do eval "[ \"\$$3$g\" = \"$shared\" ] && echo $g && break"; done
}
a_sh=$(pick "$A" "$qa" na); b_sh=$(pick "$JB" "$qb" nb)
for g in 0 1 2; do eval "[ \"\$na$g\" != \"$shared\" ] && a_far=$g"; eval "[ \"\$nb$g\" != \"$shared\" ] && b_far=$g"; done
diag "A: g$a_sh on $shared, g$a_far elsewhere; B: g$b_sh on $shared, g$b_far elsewhere"
nsa=$(gns "$A" "$a_sh") nsb=$(gns "$JB" "$b_sh")
check "A's guest on $shared reaches A's guest on another node" quiet ip netns exec "$nsa" ping -c 1 -W 2 "$(addr "$A" "$a_far")"
check "B's guest on $shared reaches B's guest on another node" quiet ip netns exec "$nsb" ping -c 1 -W 2 "$(addr "$JB" "$b_far")"
check "A cannot reach B's guest on the same node" fails ip netns exec "$nsa" ping -c 1 -W 1 "$(addr "$JB" "$b_sh")"
check "A cannot reach B's guest on another node" fails ip netns exec "$nsa" ping -c 1 -W 1 "$(addr "$JB" "$b_far")"
check "B cannot reach A's guests" fails ip netns exec "$nsb" ping -c 1 -W 1 "$(addr "$A" "$a_far")"
bsub=$(echo "$qb" | sed -n 's/.*"subnet":"\([0-9.]*\)\.0\/24".*/\1/p')
ip -n "$nsa" addr add "$bsub.250/24" dev eth0
check "an address of B's subnet on A's guest reaches nothing of B, same node or not" \
	fails ip netns exec "$nsa" ping -c 1 -W 1 -I "$bsub.250" "$(addr "$JB" "$b_sh")"
check "... nor does its ARP learn B's guest" test -z "$(ip -n "$nsa" neigh show "$(addr "$JB" "$b_sh")" | grep lladdr)"
vc cancel "$A" >/dev/null
vc cancel "$JB" >/dev/null
check "both end CANCELLED" wait_state "$A" CANCELLED 20 && wait_state "$JB" CANCELLED 20

# Two MPI jobs at once on the shared nodes, both correct.
# (--oversubscribe: ranks yield, six of them share this machine's two cores)
A=$(sub -N 3 -n 3 --vcpus 1 --oversubscribe -- vhpc-mpibench -msglog 0:12 -npmin 3 Sendrecv Exchange)
JB=$(sub -N 3 -n 3 --vcpus 1 --oversubscribe -- vhpc-mpibench -msglog 0:12 -npmin 3 Sendrecv Exchange)
vc wait "$A"; ra=$?
vc wait "$JB"; rb=$?
check_eq "both benchmarks complete (exit 0 and 0)" "0 0" "$ra $rb"
vc output "$A" >"$T/a.out"
vc output "$JB" >"$T/b.out"
check "A's IMB tables are sane" vhpc-imbcheck -expect Sendrecv@3 -expect Exchange@3 "$T/a.out"
check "B's IMB tables are sane" vhpc-imbcheck -expect Sendrecv@3 -expect Exchange@3 "$T/b.out"

for i in 1 2 3; do
	for _ in $(seq 50); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "nothing is left of either job" "$before" "$(cl_leftovers)"
done_testing
