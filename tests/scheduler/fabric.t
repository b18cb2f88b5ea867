#!/usr/bin/env bash
# timeout: 180
# The fabric and PCI functions as vhpc-ctld's resources, on simulated
# nodes (vhpcd --simulate: the controller cannot tell them from real
# ones): two nodes with a RoCE fabric and functions from the cluster file,
# one without.  A job that asks for functions lands where they are free and
# holds them; two jobs never hold the same function or VLAN; an exhausted
# VLAN pool or a class no node offers leaves a job pending with the reason;
# cancel and a controller restart keep what is held and release it at the
# end; `vhpc nodes` shows who holds what; a cluster file whose fabric pool
# overlaps job_network.pool is refused at start.
. "$(dirname "$0")/../lib.sh"
need_root
need_built vhpc vhpc-ctld vhpcd
command -v munged >/dev/null || skip_all "munged is not installed"

T=$(mktemp -d /tmp/vhpct-fab.XXXXXX)
chmod 755 "$T"
at_exit "rm -rf '$T'"
munged_up "$T" || { fail "munged"; done_testing; exit 1; }
export VHPC_MUNGE_SOCKET=$T/munge.sock VHPC_STATE_DIR=$T/state
port=$(( 20000 + RANDOM % 20000 ))
export VHPC_CONTROLLER=127.0.0.1:$port

cluster() {  # FILE MODE: the controller's and the fabric nodes' cluster file
	cat >"$1" <<EOF
name: fab
job_network:
  pool: 10.213.0.0/16
fabric:
  mode: $2
  link: eth9
  vlans: 100-101
  pool: ${POOL:-10.214.0.0/24}
  prefix: 28
  nodes:
    - name: fab-0
      pci:
        - { addr: "0000:00:05.0", class: gpu }
        - { addr: "0000:00:06.0", class: gpu }
    - name: fab-1
      link: eth7
      pci:
        - { addr: "0000:00:07.0", class: nic }
EOF
}
cluster "$T/cluster.yaml" roce
# The node without a fabric has a cluster file without one.
printf 'name: fab\njob_network:\n  pool: 10.213.0.0/16\n' >"$T/nofabric.yaml"

ctld_up() {
	local from
	from=$(cat "$T/ctld.log" 2>/dev/null | wc -l)
	VHPC_CLUSTER=$T/cluster.yaml "$BIN/vhpc-ctld" --listen "$VHPC_CONTROLLER" --state "$T/ctld" \
		--heartbeat-interval 300 --heartbeat-misses 20 --log "$T/ctld.log" &
	CTLD=$!
	at_exit "kill -9 $CTLD 2>/dev/null"
	poll_until 10 sh -c "tail -n +$((from + 1)) '$T/ctld.log' | grep -q ready"
}
sim_up() {  # NAME N CLUSTER_FILE PORT
	VHPC_CLUSTER=$3 "$BIN/vhpcd" --simulate "$2" --name "$1" --listen 127.0.0.1:"$4" \
		--controller "$VHPC_CONTROLLER" --topology "synthetic:numa:1 core:4 pu:1" --sim-runtime 600000 \
		--log "$T/$1.log" &
	at_exit "kill -9 $! 2>/dev/null"
}
nodes_up() { [ "$("$BIN/vhpc" nodes --json | grep -c '"state": *"up"')" -ge 3 ]; }

check "vhpc-ctld starts with a fabric in its cluster file" ctld_up
sim_up fab 2 "$T/cluster.yaml" $((port + 1))
sim_up tcp 1 "$T/nofabric.yaml" $((port + 2))
check "three simulated nodes register" poll_until 20 nodes_up
printf '%s\n' 'name: fabsim' 'description: busybox only' 'packages:' '  - busybox-static' >"$T/img.yaml"
check "an image for the jobs" sh -c "'$BIN/vhpc' image build '$T/img.yaml' >'$T/img.log' 2>&1 &&
	'$BIN/vhpc' image push fabsim --as default >>'$T/img.log' 2>&1"

sub() { "$BIN/vhpc" submit --json --mem 64M "$@" -- true | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
rec() { "$BIN/vhpc" queue --all --json | tr -d ' \n' | sed 's/},{"id"/}\n{"id"/g' | grep -o "{\"id\":$1,.*" | head -1; }
state() { rec "$1" | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
reason() { rec "$1" | sed -n 's/.*"reason":"\([^"]*\)".*/\1/p'; }
is() { [ "$(state "$1")" = "$2" ]; }
nodes() { "$BIN/vhpc" nodes; }

n=$(nodes)
check_match "vhpc nodes: fab-0's fabric and its link from the cluster file" 'fabric roce on eth9; RDMA devices: none; jobs: none' "$n"
check_match "... fab-1's own link" 'fabric roce on eth7' "$n"
check_match "... each function, its class, free" 'pci 0000:00:05.0 gpu .* free' "$n"
check_eq "... the node without a fabric shows none" 2 "$(echo "$n" | grep -c '^  fabric')"

A=$(sub -N 1 --vcpus 1 --rdma --device gpu:2)
check "A (--rdma, 2 gpus per guest) runs" poll_until 20 is "$A" RUNNING
a=$(rec "$A")
check_match "... on fab-0, the node with two gpus" '"nodes":\["fab-0"\]' "$a"
check_match "... with the first VLAN of the pool" '"vlan":100' "$a"
check_match "... and the first fabric subnet" '"fabric_subnet":"10.214.0.0/28"' "$a"
check_match "... holding both gpus" '"addr":"0000:00:05.0".*"addr":"0000:00:06.0"' "$a"
check "... and the node took its share, checked against its own cluster file" \
	poll_until 5 grep -q "job $A on fab-0: fabric roce on eth9, vlan 100, subnet 10.214.0.0/28 (--rdma: the job needs it)" "$T/fab.log"
check "... its functions for guest 0" sh -c "grep -q 'job $A on fab-0: PCI function 0000:00:05.0 for guest 0' '$T/fab.log' &&
	grep -q 'job $A on fab-0: PCI function 0000:00:06.0 for guest 0' '$T/fab.log'"
n=$(nodes)
diag "$n"
check_match "vhpc nodes shows which job holds each function" "pci 0000:00:05.0 gpu .* job $A guest 0" "$n"
check_match "... and the jobs on the fabric with their VLAN" "fabric roce on eth9; RDMA devices: none; jobs: $A \\(vlan 100\\)" "$n"

B=$(sub -N 1 --vcpus 1 --device gpu)
check "B (1 gpu) waits: A holds both" poll_until 10 sh -c "[ \"\$(\"$BIN/vhpc\" queue --json | tr -d ' \n' | grep -o '{\"id\":$B,[^}]*' | grep -o PENDING)\" = PENDING ]"
sleep 1
check_match "... for resources" 'waitingforresources' "$(reason "$B")"
C=$(sub -N 1 --vcpus 1 --rdma)
check "C (--rdma) runs" poll_until 20 is "$C" RUNNING
check_match "... with the other VLAN, never A's" '"vlan":101' "$(rec "$C")"
check_match "... and another fabric subnet" '"fabric_subnet":"10.214.0.16/28"' "$(rec "$C")"
D=$(sub -N 1 --vcpus 1 --rdma)
check "D (--rdma) waits: the pool has two VLANs" poll_until 10 sh -c "'$BIN/vhpc' queue | grep -q 'VLAN pool (100-101) is exhausted'"
check_match "... and vhpc queue says why" "^ *$D .*PENDING .*waiting: the fabric's VLAN pool \\(100-101\\) is exhausted" "$(vhpc_q=$("$BIN/vhpc" queue); echo "$vhpc_q")"
E=$(sub -N 1 --vcpus 1 --no-rdma)
check "E (--no-rdma) runs though the pool is exhausted" poll_until 20 is "$E" RUNNING
check_match "... over TCP" '"rdma":false' "$(rec "$E")"
F=$(sub -N 1 --vcpus 1 --device fpga)
check "F (a class no node offers) waits, saying so" poll_until 10 sh -c "'$BIN/vhpc' queue | grep -q '1 fpga function per guest asked for; the most an up node offers is 0'"
"$BIN/vhpc" cancel "$F" >/dev/null
G=$(sub -N 2 --vcpus 1 --device nic)
check "G (2 guests with a nic each; one node has one) waits, saying so" poll_until 10 sh -c "'$BIN/vhpc' queue | grep -q '2 guests with 1 nic function each; the up nodes have one for 1'"
"$BIN/vhpc" cancel "$G" >/dev/null
G=$(sub -N 1 --vcpus 1 --rdma --device nic)
check "a --rdma job waits for the pool before anything else, saying so" poll_until 10 sh -c "'$BIN/vhpc' queue | grep -q \"^ *$G .*VLAN pool (100-101) is exhausted\""
"$BIN/vhpc" cancel "$G" >/dev/null

# -- a restart of the controller keeps what jobs hold
kill -9 "$CTLD"
wait "$CTLD" 2>/dev/null
check "vhpc-ctld restarts" ctld_up
check "the nodes report again" poll_until 20 nodes_up
sleep 1
check_match "A still holds VLAN 100 and both gpus" '"vlan":100.*"addr":"0000:00:05.0".*"addr":"0000:00:06.0"' "$(rec "$A")"
check_eq "D still waits" PENDING "$(state "$D")"
check_eq "B still waits" PENDING "$(state "$B")"

# -- cancel releases them
"$BIN/vhpc" cancel "$C" >/dev/null
check "with C cancelled, D starts" poll_until 20 is "$D" RUNNING
check_match "... with the VLAN C gave back" '"vlan":101' "$(rec "$D")"
"$BIN/vhpc" cancel "$A" >/dev/null
check "with A cancelled, B gets a gpu" poll_until 20 is "$B" RUNNING
check_match "... one of those A held" '"addr":"0000:00:0[56].0","class":"gpu"' "$(rec "$B")"
n=$(nodes)
check_eq "vhpc nodes: one gpu held, one free" "1 1" \
	"$(echo "$n" | grep -c 'gpu .* job') $(echo "$n" | grep -c 'gpu .* free')"
check_no_job_a() { ! nodes | grep -q "job $A "; }
check "... and nothing held by A any more" check_no_job_a
for j in $B $D $E; do "$BIN/vhpc" cancel "$j" >/dev/null; done
check "with every job cancelled, every function is free" poll_until 20 sh -c "! '$BIN/vhpc' nodes | grep -q ' job [0-9]* guest'"

# -- a cluster file whose fabric pool overlaps the job network is refused
POOL=10.213.64.0/24 cluster "$T/bad.yaml" roce
out=$(VHPC_CLUSTER=$T/bad.yaml "$BIN/vhpc-ctld" --listen 127.0.0.1:$((port + 3)) --state "$T/ctld2" 2>&1)
check_match "vhpc-ctld refuses a fabric pool that overlaps job_network.pool, naming both" \
	"bad.yaml: fabric.pool 10.213.64.0/24 overlaps job_network.pool 10.213.0.0/16" "$out"
done_testing
