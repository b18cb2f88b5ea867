#!/usr/bin/env bash
# timeout: 180
# A Slurm job on a cluster whose file asks for underlay encryption
# (job_network.underlay_encryption), where the kernel has no WireGuard (as
# on this project's hosts): the plugin must not carry the job's VXLAN in
# clear instead.  Before, it never read the option, and the job ran with
# its MPI traffic in clear on the underlay.  Now srun fails with the
# reason naming WireGuard, and nothing of the job is left on the nodes.
# Where the kernel has WireGuard, net-wireguard.t tests the shared
# network code (nodeagent/net/wg.c) that a Slurm job now reaches too.
. "$(dirname "$0")/../lib.sh"
need_root
unshare -n ip link add wgprobe type wireguard 2>/dev/null && skip_all "this kernel has WireGuard (net-wireguard.t runs)"
SL_CONFIG_DIR=$(mktemp -d /tmp/vhpct-slwg.XXXXXX)
at_exit "rm -rf '$SL_CONFIG_DIR'"
for f in "$VHPC_TOP"/configs/*; do [ "$(basename "$f")" = cluster.yaml ] || ln -s "$f" "$SL_CONFIG_DIR/"; done
head -c 64 /dev/urandom >"$SL_CONFIG_DIR/underlay.key" && chmod 600 "$SL_CONFIG_DIR/underlay.key"
awk -v key="$SL_CONFIG_DIR/underlay.key" '{ print } /^  guest_port:/ {
	print "  underlay_encryption:"; print "    key: " key; print "    pool: 10.254.0.0/16" }' \
	"$VHPC_TOP/configs/cluster.yaml" >"$SL_CONFIG_DIR/cluster.yaml"
chmod 755 "$SL_CONFIG_DIR"
check "the cluster file asks for underlay encryption" grep -q underlay_encryption "$SL_CONFIG_DIR/cluster.yaml"
SL=vsw$$
. "$(dirname "$0")/../slurm/slurm-lib.sh"
sl_need
T=$SL_DIR

sl_test_up 2
before=$(sl_leftovers)
out=$(sl_user srun -N 2 -n 2 --vhpc-image=default sh -c 'ping -c 1 -W 2 g1 >/dev/null && echo "reached g1 in clear"' 2>"$T/err")
rc=$?
check "srun -N 2 fails" test "$rc" != 0
check_eq "no task ran (the job network was not made in clear)" "" "$out"
check_match "the reason names underlay encryption and WireGuard" "underlay encryption.*WireGuard" "$(cat "$T/err")"
[ "$rc" != 0 ] || diag "srun said: $(tail -n 5 "$T/err")"
sl_wait_empty 30
sleep 1
check_eq "nothing of the job is left on any node" "$before" "$(sl_leftovers)"
for i in 1 2; do
	check_eq "n$i: no job table, no WireGuard device" "0 0" \
		"$(ip netns exec "$SL-n$i" nft list tables 2>/dev/null | grep -c vhpc-) $(ip -n "$SL-n$i" link show 2>/dev/null | grep -c vhpcwg)"
done
done_testing
