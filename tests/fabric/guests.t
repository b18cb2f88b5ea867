#!/usr/bin/env bash
# timeout: 600
# lab-kernel: 7.3.4+deb13-amd64
# Container guests on the soft-RoCE fabric (nodeagent/net/fabric.c), two
# nodes in namespaces of their own, each with its node agent (vhpc-na up):
# (b) a job's guests on the two nodes each see exactly their own RDMA
#     device and move verbs traffic between them;
# (c) a guest of another job cannot see or open that job's device, nor the
#     node's own, and its verbs traffic to that job's fabric addresses does
#     not arrive; each attempt is made and refused;
# (d) nothing of either job is left after it, nor after its agent is
#     killed and `vhpc-na cleanup` runs.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/fabric-lib.sh"
fab_need
need_built vhpc-na
NA=$BIN/vhpc-na
command -v runc >/dev/null || skip_all "runc is not installed"
[ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] || skip_all "needs cgroup2 alone on /sys/fs/cgroup (the lab's 7.3.4 L1 has it)"
T_DIR=$(mktemp -d /tmp/fab-guests.XXXXXX)
at_exit "rm -rf '$T_DIR'"
rootfs=$T_DIR/rootfs
"$(dirname "$0")/mkrootfs-verbs.sh" "$rootfs" >"$T_DIR/mkrootfs.log" 2>&1 || { cat "$T_DIR/mkrootfs.log"; skip_all "cannot make the verbs rootfs"; }
P=f$$
A1=${P}a1 A2=${P}a2 B2=${P}b2 C1=${P}c1

fab_nodes $P || { echo "not ok 1 - node namespaces"; exit 1; }
R1=$T_DIR/run1 R2=$T_DIR/run2
mkdir -p "$R1" "$R2"
fab_node_rdma 2 ${P}node || { echo "not ok 1 - node 2's own rxe device"; exit 1; }
uverbs_before=$(ls /dev/infiniband | grep -c uverbs)

# agent NAME NODE JOB ARGS...: vhpc-na up in node NODE's namespace and run
# dir, until "ready"; UP_PID_<NAME> set.  The two "nodes" share L1's CPUs,
# and each agent places on its own: node 2's get --busy 0, so a job's two
# guests poll on different CPUs as on two machines.
agent() {
	local name=$1 node=$2 job=$3 run out i; shift 3
	run=$(eval echo "\$R$node") out=$T_DIR/$name.out
	# exec: the pid is the agent's own, which `down` signals.
	(VHPC_RUN_DIR=$run exec nsenter --net="/run/netns/$(eval echo "\$FAB_N$node")" "$NA" up --job "$job" \
		-N 1 --tuning none "$@" --rootfs "$rootfs" -- /bin/sleep 100000 >"$out" 2>&1) &
	eval "UP_PID_$name=$!"
	at_exit "kill -TERM $! 2>/dev/null; sleep 2; kill -KILL $! 2>/dev/null"
	for ((i = 0; i < 600; i++)); do
		grep -q '^ready$' "$out" && return 0
		kill -0 $! 2>/dev/null || { cat "$out"; return 1; }
		sleep 0.2
	done
	cat "$out"
	return 1
}
down() { local pid; eval "pid=\$UP_PID_$1"; kill -"${2:-TERM}" "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
# in_guest NODE JOB INDEX CMD...: CMD inside that container guest (the
# agent's container 0 of the job: vhpc-na up counts its own guests from 0,
# while INDEX, the job-wide one, names the netns and device): its
# cgroup (and so its device rules) first, then all its namespaces, the user
# namespace last (nsenter's order; runc exec would join the user namespace
# first and then may not enter the agent's netns), then no capabilities,
# as the guest's own processes.  Its seccomp filter is not applied.
in_guest() {
	local node=$1 job=$2 pid; shift 3
	pid=$(cat "$(eval echo "\$R$node")/jobs/$job/g0/pid") || return 1
	(echo $BASHPID >"/sys/fs/cgroup/vhpc/$job/0/cgroup.procs" &&
		exec nsenter -t "$pid" -a setpriv --bounding-set=-all --inh-caps=-all "$@")
}
export -f in_guest
export R1 R2
devs_in() { in_guest "$@" ibv_devices 2>&1 | sed -n 's/^[[:space:]]*\([^[:space:]-][^[:space:]]*\)[[:space:]]\+[0-9a-f]\{16\}$/\1/p' | tr '\n' ' ' | sed 's/ $//'; }
guest_gid() { in_guest "$@" ibv_devinfo -v 2>/dev/null | sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:[0-9.]*, RoCE v2.*/\1/p' | head -1; }

# --- (b) one job on two nodes --------------------------------------------
check "job A's guest 0 comes up on node 1 with the fabric (VLAN 101)" \
	agent A1 1 $A1 --first-index 0 --fabric-link fab --fabric-vlan 101 --fabric-subnet 10.78.1.0/24
check "job A's guest 1 comes up on node 2 with the fabric (VLAN 101)" \
	agent A2 2 $A2 --busy 0 --first-index 1 --fabric-link fab --fabric-vlan 101 --fabric-subnet 10.78.1.0/24
diag "$(grep -E 'fabric|uverbs' "$T_DIR/A1.out" "$T_DIR/A2.out")"
check_eq "A's guest 0 lists exactly its own RDMA device" "vhpc-$A1-0" "$(devs_in 1 $A1 0)"
check_eq "A's guest 1 lists exactly its own RDMA device" "vhpc-$A2-1" "$(devs_in 2 $A2 1)"
a1_uverbs=$(sed -n 's/^guest 1 fabric .* uverbs \(.*\)$/\1/p' "$T_DIR/A2.out")
check_eq "A's guest 1 has its own uverbs node and rdma_cm in /dev/infiniband, nothing else" \
	"rdma_cm ${a1_uverbs##*/}" "$(in_guest 2 $A2 1 ls /dev/infiniband | sort | tr '\n' ' ' | sed 's/ $//')"
g0=$(guest_gid 1 $A1 0) g1=$(guest_gid 2 $A2 1)
check_match "each guest's device has an IPv4 RoCE v2 GID" '^[0-9]+ [0-9]+$' "$g0 $g1"
perf_pair in_guest 2 $A2 1 ib_send_lat -d vhpc-$A2-1 -x "$g1" -s 2 -n 200 -- \
	in_guest 1 $A1 0 ib_send_lat -d vhpc-$A1-0 -x "$g0" -s 2 -n 200 10.78.1.3
rc=$?
lat=$(perf_figure "$PERF_OUT" 2 5)
[ $rc = 0 ] && [ -n "$lat" ] && ok "verbs between A's guests on two nodes: ib_send_lat 2 B, typical $lat us (nested/TCG)" ||
	{ fail "ib_send_lat between A's guests (status $rc)"; diag "$PERF_OUT"; }
perf_pair in_guest 2 $A2 1 ib_write_bw -d vhpc-$A2-1 -x "$g1" -s 65536 -n 100 -- \
	in_guest 1 $A1 0 ib_write_bw -d vhpc-$A1-0 -x "$g0" -s 65536 -n 100 10.78.1.3
rc=$?
bw=$(perf_figure "$PERF_OUT" 65536 4)
[ $rc = 0 ] && [ -n "$bw" ] && ok "RDMA writes between A's guests: ib_write_bw 64 KiB, $bw MB/s (nested/TCG)" ||
	{ fail "ib_write_bw between A's guests (status $rc)"; diag "$PERF_OUT"; }

# A job's VLAN is its own on a node: another job asking for it is refused,
# and so is a fabric link that is no interface name.
out=$(VHPC_RUN_DIR=$R1 in_node 1 "$NA" up --job ${P}d1 -N 1 --tuning none --oversubscribe --fabric-link fab \
	--fabric-vlan 101 --fabric-subnet 10.78.9.0/24 2>&1)
check_match "a second job asking for A's VLAN 101 on node 1 is refused, saying so" "VLAN 101 .*exists already" "$out"
out=$(VHPC_RUN_DIR=$R1 in_node 1 "$NA" up --job ${P}d1 -N 1 --tuning none --oversubscribe --fabric-link '../fab' \
	--fabric-vlan 109 --fabric-subnet 10.78.9.0/24 2>&1)
check_match "a fabric link '../fab' is refused as no interface name" "fabric link '../fab' is not an interface name" "$out"

# --- (c) job B on node 2 attacks job A and the node -----------------------
check "job B's guest comes up on node 2 beside A's (VLAN 102)" \
	agent B2 2 $B2 --oversubscribe --first-index 0 --fabric-link fab --fabric-vlan 102 --fabric-subnet 10.78.2.0/24
check_eq "B's guest lists only its own device (not A's vhpc-$A2-1, not the node's ${P}node)" \
	"vhpc-$B2-0" "$(devs_in 2 $B2 0)"
out=$(in_guest 2 $B2 0 ibv_devinfo -d vhpc-$A2-1 2>&1)
check_match "B's guest asks for A's device by name: not found" "wasn't found" "$out"
out=$(in_guest 2 $B2 0 ibv_devinfo -d ${P}node 2>&1)
check_match "B's guest asks for the node's device by name: not found" "wasn't found" "$out"
out=$(in_guest 2 $B2 0 cat "$a1_uverbs" 2>&1)
check_match "B's guest opens A's uverbs node $a1_uverbs: not in its /dev" "No such file" "$out"
# Were the node there (the host's /dev), B's device cgroup refuses it...
out=$( (echo $BASHPID >/sys/fs/cgroup/vhpc/$B2/0/cgroup.procs && exec cat "$a1_uverbs") 2>&1)
check_match "a process in B's guest cgroup opens A's uverbs node on the host's /dev: refused by the device rules" \
	"Operation not permitted" "$out"
# ...and the kernel refuses it to any process in B's network namespace.
out=$(nsenter --net=/run/netns/vhpc-$B2-0 cat "$a1_uverbs" 2>&1)
check_match "a process in B's network namespace opens A's uverbs node: refused by the kernel (exclusive mode)" \
	"Operation not permitted" "$out"
a1_dev=$(stat -c '%t:%T' "$a1_uverbs")
out=$(in_guest 2 $B2 0 mknod /tmp/u c $((0x${a1_dev%:*})) $((0x${a1_dev#*:})) 2>&1)
check_match "B's guest makes a node for A's device ($a1_dev): refused" "mknod: .*Operation not permitted" "$out"
# A's guest 1 serves; B's guest tries to reach it by verbs over the fabric.
cnt() { ip netns exec vhpc-$A2-1 cat /sys/class/infiniband/vhpc-$A2-1/ports/1/hw_counters/rcvd_pkts 2>/dev/null; }
before=$(cnt)
gb=$(guest_gid 2 $B2 0)
timeout 60 bash -c '"$@"' _ in_guest 2 $A2 1 ib_send_lat -d vhpc-$A2-1 -x "$g1" -s 2 -n 20 >"$T_DIR/a-server.out" 2>&1 &
spid=$!
sleep 2
out=$(timeout 40 bash -c '"$@"' _ in_guest 2 $B2 0 ib_send_lat -d vhpc-$B2-0 -x "$gb" -s 2 -n 20 10.78.1.3 2>&1)
rc=$?
kill $spid 2>/dev/null; wait $spid 2>/dev/null
in_guest 2 $A2 1 sh -c 'kill $(pidof ib_send_lat) 2>/dev/null' 2>/dev/null
# perftest's own words: it ran in B's guest, and found no way to A.
[ $rc != 0 ] && grep -q "Couldn't connect to 10.78.1.3" <<<"$out" &&
	ok "B's guest runs ib_send_lat on its device to A's fabric address 10.78.1.3: no way there" ||
	{ fail "B's guest's verbs to A's address: status $rc"; diag "$out"; }
after=$(cnt)
check_match "A's device received nothing meanwhile (rcvd_pkts $before -> $after)" '^[0-9]+ [0-9]+$' "$before $after"
[ -n "$before" ] && [ "$before" = "$after" ] || fail "A's device's rcvd_pkts changed: $before -> $after"
out=$(in_guest 2 $B2 0 cat /proc/net/arp 2>&1)
check "B's guest never learnt A's fabric address" bash -c "! grep -q '10\.78\.1\.' <<<'$out'"

# --- (d) nothing left -----------------------------------------------------
down A1; down A2; down B2
left() {
	{ rdma dev; in_node 1 rdma dev; in_node 2 rdma dev; } 2>/dev/null | grep -E "vhpc-$P" | wc -l
	{ in_node 1 ip -o link; in_node 2 ip -o link; ip -o link; } | grep -cE "vf$P|macvlan"
	ls /run/netns | grep -c "vhpc-$P"
	echo $(( $(ls /dev/infiniband | grep -c uverbs) - uverbs_before ))
	ls "$R1/runc" "$R2/runc" 2>/dev/null | grep -c "$P"
}
check_eq "after the jobs: no RDMA device, VLAN or macvlan, netns, uverbs node or container is left" \
	"0 0 0 0 0" "$(left | tr '\n' ' ' | sed 's/ $//')"

check "job C comes up on node 1 with the fabric" \
	agent C1 1 $C1 --first-index 0 --fabric-link fab --fabric-vlan 103 --fabric-subnet 10.78.3.0/24
check_eq "C's guest lists its own device" "vhpc-$C1-0" "$(devs_in 1 $C1 0)"
down C1 KILL
check "C's agent killed: its RDMA device is still there before cleanup" \
	bash -c "ip netns exec vhpc-$C1-0 rdma dev | grep -q vhpc-$C1-0"
out=$(VHPC_RUN_DIR=$R1 in_node 1 "$NA" cleanup 2>&1)
diag "$out"
check_match "vhpc-na cleanup names the RDMA device and the VLAN it removed" "RDMA device.*vf$C1|vf$C1" "$out"
check_eq "after the cleanup: nothing of job C is left" "0 0 0 0 0" "$(left | tr '\n' ' ' | sed 's/ $//')"
done_testing
