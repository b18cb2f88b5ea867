# A rank of the fabric MPI tests (mpi-guests.t, mpi-cluster.t), run with
# /bin/sh inside a guest: PingPong at 1 B and 64 KiB, and what its guest's
# interfaces and RDMA device sent meanwhile, as one line
#   rank R sent: fab0 BYTES eth0 BYTES rxe-pkts PACKETS
# ("-" where the guest has no such thing), then its RLIMIT_MEMLOCK.
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
echo "rank $OMPI_COMM_WORLD_RANK memlock $(awk '/^Max locked memory/ { print $4 }' /proc/self/limits)"
