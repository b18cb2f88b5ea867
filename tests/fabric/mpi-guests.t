#!/usr/bin/env bash
# timeout: 400
# lab-kernel: 7.3.4+deb13-amd64
# MPI in container guests on the fabric, by counters: `vhpc run --rdma`
# gives the ranks ob1 with vmshm and the ofi BTL over verbs
# (scheduler/launch.c).  Two guests, a rank each, PingPong between them:
#   --rdma:            the guests share a host, so vmshm carries the bytes
#                      (its counters) and their fabric interfaces do not;
#   --rdma --no-vmshm: the path a pair a host apart takes, verbs: the bml
#                      takes ofi, each guest's fabric interface (fab0, RoCE
#                      only) sent at least the bytes its rank sent, its rxe
#                      device a packet per 4 KiB or more, the job network
#                      (eth0, TCP) a small part;
#   --no-rdma:         tcp over the job network, no fabric interface at all.
# The embedded scheduler places every guest on this machine: guests on two
# hosts need the cluster's fabric (not tested here yet; mpi-native.t runs
# the same transport between two node namespaces).
. "$(dirname "$0")/../integration/common.sh"
. "$(dirname "$0")/fabric-lib.sh"
fab_need
[ -e "$VHPC_TOP/$B/lib/vhpc/openmpi/mca_btl_vmshm.so" ] || skip_all "the vmshm BTL is not built"

fab_local_cluster 310-319 10.215.0.0/16

# Each rank: its counters (fabric interface and job network bytes sent,
# rxe packets sent), PingPong, the counters again.
cat >"$T/rank.sh" <<'RANK'
snap() {
	dev=$(ls /sys/class/infiniband 2>/dev/null | head -1)
	f=-; [ -e /sys/class/net/fab0 ] && f=$(cat /sys/class/net/fab0/statistics/tx_bytes)
	p=-; [ -n "$dev" ] && p=$(cat /sys/class/infiniband/$dev/ports/1/hw_counters/sent_pkts)
	echo "$f $(cat /sys/class/net/eth0/statistics/tx_bytes) $p"
}
d() { [ "$1" = - ] && echo - || echo $(($2 - $1)); }
printf '1\n65536\n' >/tmp/sizes
s0=$(snap)
vhpc-mpibench -msglen /tmp/sizes -iter 100,4M PingPong || exit
s1=$(snap)
set -- $s0 $s1
echo "rank $OMPI_COMM_WORLD_RANK sent: fab0 $(d $1 $4) eth0 $(d $2 $5) rxe-pkts $(d $3 $6)"
RANK
chmod 755 "$T/rank.sh"
# job NAME ARGS...: the two-guest job; its output in $T/NAME.
job() {
	local name=$1; shift
	(cd "$T" && timeout -k 5 200 vhpc run -N 2 -n 2 --driver container "$@" --bind "$T:/t:ro" \
		-x OMPI_MCA_btl_vmshm_stats=1 -x OMPI_MCA_btl_base_verbose=1 -- /bin/sh /t/rank.sh) >"$T/$name" 2>&1
	rc=$?
	[ $rc = 0 ] || diag "$(tail -n 25 "$T/$name")"
}
# field NAME RANK WHAT: a counter of RANK's "sent:" line.
field() { sed -n "s/^.*rank $2 sent: .*$3 \([-0-9]*\).*/\1/p" "$T/$1" | head -1; }
sent() { awk '$1 ~ /^[0-9]+$/ && NF == 4 { s += $1 * $2 } END { print s + 0 }' "$T/$1"; }
vmshm_tx() { sed -n "s/.*rank $2\] vmshm-stats: peer $3 slot [0-9]* .*tx_bytes \([0-9]*\).*/\1/p" "$T/$1" | head -1; }
before=$(resource_counts)

job vmshm --rdma
check_eq "--rdma: the job ends well" 0 $rc
b=$(sent vmshm)
check "... rank 0 sent bytes in PingPong ($b)" test "$b" -gt 0
check "... vmshm carried them between the co-located guests (rank 0 to 1: $(vmshm_tx vmshm 0 1) B)" \
	test "$(vmshm_tx vmshm 0 1)" -ge "$b"
check_match "... the bml took vmshm" 'Using vmshm btl' "$(cat "$T/vmshm")"
f=$(field vmshm 0 fab0)
check "... and the fabric interface did not ($f B sent)" test "$f" != - -a "$f" -lt $((b / 10))

job ofi --rdma --no-vmshm
check_eq "--rdma --no-vmshm: the job ends well" 0 $rc
b=$(sent ofi)
diag "PingPong over verbs between the guests (nested/TCG): $(awk '$1 ~ /^[0-9]+$/ && NF == 4 { printf "%s B %s us %s MB/s; ", $1, $3, $4 }' "$T/ofi")"
check_match "... the bml took the ofi BTL" 'Using ofi btl' "$(cat "$T/ofi")"
for r in 0 1; do
	f=$(field ofi $r fab0) e=$(field ofi $r eth0) p=$(field ofi $r rxe-pkts)
	diag "rank $r: fab0 $f B, eth0 $e B, rxe $p packets sent; PingPong $b B a rank"
	check "... rank $r's fabric interface sent at least its PingPong bytes ($f >= $b)" test "$b" -gt 0 -a "$f" -ge "$b"
	check "... its rxe device a packet per 4 KiB or more ($p)" test "$p" -ge $((b / 4096))
	check "... its job network (TCP) a small part ($e B)" test "$e" -lt $((b / 10))
done
check "... and vmshm nothing" sh -c "! grep -q 'vmshm-stats' '$T/ofi'"

job tcp --no-rdma --no-vmshm
check_eq "--no-rdma: the job ends well" 0 $rc
check_match "... the bml took tcp" 'Using tcp btl' "$(cat "$T/tcp")"
check_eq "... no fabric interface, no RDMA device in the guests" "- -" "$(field tcp 0 fab0) $(field tcp 0 rxe-pkts)"
check "... the job network carried the bytes" test "$(field tcp 0 eth0)" -ge "$(sent tcp)"
check_counts "nothing of the jobs is left (netns, links, cgroups, mounts)" "$before"
check_eq "... and no RDMA link" "" "$(rdma link show 2>/dev/null | grep 'vhpc-')"
done_testing
