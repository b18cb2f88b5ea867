#!/usr/bin/env bash
# timeout: 300
# lab-kernel: 7.3.4+deb13-amd64
# Open MPI between two nodes over verbs, natively, with the transport vhpc
# gives jobs on the fabric (scheduler/launch.c): the ob1 PML with the ofi
# BTL on libfabric's verbs;ofi_rxd, one rank in each node namespace.  The
# bml says it took ofi, and each node's rxe device sent at least one packet
# per 4 KiB (RoCE's largest MTU) of what its rank sent; the same job with
# the tcp BTL moves no rxe packet.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/fabric-lib.sh"
fab_need
need_built vhpc-mpibench
for t in mpirun fi_info; do
	command -v $t >/dev/null || skip_all "$t is not installed (make deps: openmpi-bin, libfabric-bin)"
done
T_DIR=$(mktemp -d /tmp/fab-mpi.XXXXXX)
at_exit "rm -rf '$T_DIR'"
P=fm$$
fab_two_nodes $P
check_match "libfabric's verbs;ofi_rxd sees node 1's device there" "domain: ${P}r1" \
	"$(ip netns exec $FAB_N1 fi_info -p 'verbs;ofi_rxd' -t FI_EP_RDM 2>&1)"

# The ranks' launcher: into the node's namespace (with its own sysfs, where
# libibverbs finds the node's device) under the node's name.
cat >"$T_DIR/rsh" <<'A'
#!/bin/sh
host=$1; shift
exec ip netns exec "$host" unshare --uts -- sh -c 'hostname "$1" && exec sh -c "$2"' sh "$host" "$*"
A
chmod 755 "$T_DIR/rsh"
printf '%s slots=1\n%s slots=1\n' $FAB_N1 $FAB_N2 >"$T_DIR/hostfile"
printf '1\n65536\n' >"$T_DIR/sizes"
pkts() { ip netns exec $(eval echo "\$FAB_N$1") cat /sys/class/infiniband/${P}r$1/ports/1/hw_counters/sent_pkts; }
# mpi NAME BTL-ARGS...: PingPong between the nodes; the rxe devices'
# sent packets around it in NAME.pkts (node 1's, then node 2's).
mpi() {
	local name=$1 a1 a2; shift
	a1=$(pkts 1) a2=$(pkts 2)
	ip netns exec $FAB_N1 timeout -k 5 120 mpirun --allow-run-as-root -np 2 --hostfile "$T_DIR/hostfile" \
		--map-by node --bind-to none --mca plm_rsh_agent "$T_DIR/rsh" --mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include fab --mca pml ob1 --mca btl_base_verbose 1 "$@" \
		"$BIN/vhpc-mpibench" -msglen "$T_DIR/sizes" -iter 100,4M PingPong >"$T_DIR/$name" 2>&1
	rc=$?
	echo "$(($(pkts 1) - a1)) $(($(pkts 2) - a2))" >"$T_DIR/$name.pkts"
}
# sent BYTES-TABLE: the bytes each rank sent in PingPong (bytes x repetitions).
sent() { awk '$1 ~ /^[0-9]+$/ && NF == 4 { s += $1 * $2 } END { print s + 0 }' "$1"; }

mpi ofi --mca btl self,ofi --mca btl_ofi_provider_include 'verbs;ofi_rxd' --mca btl_ofi_mode 2
check_eq "MPI over verbs between the nodes: the job ends well" 0 $rc
[ $rc = 0 ] || diag "$(tail -20 "$T_DIR/ofi")"
check_match "each rank's bml took the ofi BTL for the other node" \
	"Using ofi btl for send to .* on node $FAB_N2" "$(grep 'Using ofi btl' "$T_DIR/ofi")"
b=$(sent "$T_DIR/ofi")
read p1 p2 <"$T_DIR/ofi.pkts"
diag "PingPong (nested/TCG): $(awk '$1 ~ /^[0-9]+$/ && NF == 4 { printf "%s B %s us %s MB/s; ", $1, $3, $4 }' "$T_DIR/ofi")rxe packets sent $p1 / $p2 for $b B a rank"
check "node 1's rxe device sent a packet per 4 KiB of the $b B rank 0 sent, or more ($p1)" test "$b" -gt 0 -a "$p1" -ge $((b / 4096))
check "node 2's likewise ($p2)" test "$b" -gt 0 -a "$p2" -ge $((b / 4096))

mpi tcp --mca btl self,tcp --mca btl_tcp_if_include fab
check_eq "the same job over the tcp BTL ends well" 0 $rc
read p1 p2 <"$T_DIR/tcp.pkts"
check_eq "... and moves no rxe packet" "0 0" "$p1 $p2"

in_node 1 rdma link del ${P}r1; in_node 2 rdma link del ${P}r2
check_eq "no rxe device of the test is left" "" "$( (rdma dev; in_node 1 rdma dev; in_node 2 rdma dev) 2>/dev/null | grep "$P")"
done_testing
