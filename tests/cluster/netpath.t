#!/usr/bin/env bash
# timeout: 90
# The TCP path of a real job (vhpc run through vhpc-ctld, container guests
# on two nodes) is the fast one (nodeagent/README.md, "Job networks: the
# data path"): the guest's eth0 has the underlay's MTU less the VXLAN's 50
# bytes, so a full frame crosses with DF set and nothing is fragmented on
# the underlay; no veth of the job and not vxlan0 does GRO (which on a
# veth means a NAPI queue per frame); the job namespace's bridge hands no
# frame to netfilter (br_netfilter's bridge-nf-call-*), while the node's
# namespace and the host's keep their own settings.  Settings are read
# back from the interfaces while the job runs.
. "$(dirname "$0")/../lib.sh"
need_cluster
command -v ethtool >/dev/null || skip_all "needs ethtool (Debian ethtool) to read offloads back"
CL=vcp$$
. "$(dirname "$0")/cluster-lib.sh"

cl_net_up 2 && cl_munge_up && cl_ctld_up && cl_node_up 1 && cl_node_up 2 ||
	{ fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
check "two nodes register" cl_wait_nodes_up 2

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
J=$(sub -N 2 -n 2 --vcpus 1 -- sh -c 'cat /sys/class/net/eth0/mtu; sleep 12')
check "the job runs" wait_state "$J" RUNNING 30
gns() { ls /run/netns | grep -E "^vhpc-$1x[0-9a-z]+-$2\$"; }
jns() { echo "${1%-*}"; }  # a guest's netns -> its job netns on that node
g0=$(gns "$J" 0) g1=$(gns "$J" 1)
diag "guest namespaces: $g0 $g1"
check "each guest has its namespace" test -n "$g0" -a -n "$g1"
addr1=$(ip -n "$g1" -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1)

mtu=$(ip -n "$g0" -o link show eth0 | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
check_eq "guest 0's eth0 MTU is the underlay's 9000 less VXLAN's 50" 8950 "$mtu"
frags() { ip netns exec "$CL-n$1" awk '/^Ip:/ { if (h) print $13; h = 1 }' /proc/net/snmp; }
f1=$(frags 1)
check "a full 8950-byte frame crosses to the other node with DF set" \
	ip netns exec "$g0" ping -M do -s $((8950 - 28)) -c 2 -W 2 "$addr1"
check "... and one byte more is refused at the guest, not fragmented" \
	bash -c "! ip netns exec '$g0' ping -M do -s $((8950 - 27)) -c 1 -W 1 '$addr1' >/dev/null 2>&1"
check_eq "the node's underlay fragmented nothing (Ip FragCreates)" "$f1" "$(frags 1)"

gro() { ip netns exec "$1" ethtool -k "$2" | sed -n 's/^generic-receive-offload: \([a-z]*\).*/\1/p'; }
for g in "$g0" "$g1"; do
	j=$(jns "$g") i=${g##*-}
	check_eq "$g: the guest's eth0 (a veth) does no GRO" off "$(gro "$g" eth0)"
	check_eq "$j: its bridge port v$i does no GRO" off "$(gro "$j" "v$i")"
	check_eq "$j: vxlan0 does no GRO (no GRO cell between decap and the bridge)" off "$(gro "$j" vxlan0)"
	if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
		check_eq "$j: the job's bridge calls no netfilter hook (bridge-nf-call-iptables/ip6tables/arptables)" "0 0 0" \
			"$(ip netns exec "$j" sh -c 'cd /proc/sys/net/bridge && echo $(cat bridge-nf-call-iptables bridge-nf-call-ip6tables bridge-nf-call-arptables)')"
	else
		skip "$j: bridge-nf-call-*: this kernel has no br_netfilter"
	fi
	check_eq "$j: the guest's eth0 and v$i keep TSO (the frames stay large)" "on on" \
		"$(ip netns exec "$g" ethtool -k eth0 | sed -n 's/^tcp-segmentation-offload: \([a-z]*\).*/\1/p') $(ip netns exec "$j" ethtool -k "v$i" | sed -n 's/^tcp-segmentation-offload: \([a-z]*\).*/\1/p')"
done
check_eq "the node's own namespace keeps its bridge-nf-call-iptables" \
	"$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)" "$(ip netns exec "$CL-n1" cat /proc/sys/net/bridge/bridge-nf-call-iptables)"

check "the job ends" wait_state "$J" COMPLETED 30
check_match "the guest read its own MTU: 8950" '^8950' "$(vc output "$J" 2>&1)"
for i in 1 2; do
	for _ in $(seq 50); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "nothing is left of the job" "$before" "$(cl_leftovers)"
done_testing
