# The test network of a cluster on one machine, for tests/cluster and
# tests/slurm alike: a hub namespace whose bridge hub0 joins node
# namespaces PREFIX-n1..N by veths (eth0 in each node), jumbo frames so
# that job networks keep the profile's 9000 less the VXLAN's 50.  Each
# suite gives its own /24 and bridge MAC, so two suites' hubs never meet.

# hub_up HUB NET MAC: the hub namespace, its bridge at NET.1/24 (NET is
# three octets).  The bridge has a MAC of its own: one without takes its
# lowest port's, and a node killed with its port would change it under
# every node's ARP cache (all heartbeats then time out for seconds).
hub_up() {
	ip netns add "$1" || return 1
	ip -n "$1" link set lo up
	ip -n "$1" link add name hub0 address "$3" mtu 9000 type bridge
	ip -n "$1" addr add "$2.1/24" dev hub0
	ip -n "$1" link set hub0 up
}

# hub_node HUB NET PREFIX I: node I's namespace PREFIX-nI on the hub, at
# NET.(10+I) (again, after a test killed it).
hub_node() {
	local hub=$1 net=$2 p=$3 i=$4
	ip netns add "$p-n$i" || return 1
	ip link add "${p}v$i" mtu 9000 netns "$hub" type veth peer name eth0 mtu 9000 netns "$p-n$i" || return 1
	ip -n "$hub" link set "${p}v$i" master hub0 up
	ip -n "$p-n$i" addr add "$net.$((10 + i))/24" dev eth0
	ip -n "$p-n$i" link set eth0 up
	ip -n "$p-n$i" link set lo up
}

# hub_down HUB PREFIX N: the nodes' namespaces (their veths go with them)
# and the hub's.
hub_down() {
	local i
	for ((i = 1; i <= $3; i++)); do ip netns del "$2-n$i" 2>/dev/null; done
	ip netns del "$1" 2>/dev/null
	true
}
