#!/usr/bin/env bash
# timeout: 600
# lab-kernel: 7.3.4+deb13-amd64
# `vhpc run --rdma` on one machine, from the command line to the guests:
# the cluster file's fabric (soft-roce on a link of this machine), the
# embedded scheduler's VLAN and fabric subnet (lib/fabric_local.c), the node
# agent's fabric (nodeagent/net/fabric.c) and the container driver's device
# nodes.  Each of the job's two guests lists exactly one RDMA device of its
# own, and perftest moves verbs traffic between the two ranks over it, from
# the default image; `--no-rdma` gives a job no device; nothing is left
# after either job.
. "$(dirname "$0")/../integration/common.sh"
. "$(dirname "$0")/fabric-lib.sh"
fab_need

# The fabric link: a dummy of this test's own (fabric-lib.sh).
fab_local_cluster 300-309 10.214.0.0/16

# What each rank runs: its devices, its RoCE v2 GID's index, then rank 1
# serves ib_send_lat and rank 0 measures against it (perftest exchanges its
# queue pair's numbers over TCP to g1, the job network; the verbs traffic
# goes over the device).
cat >"$T/rank.sh" <<'EOF'
r=$OMPI_COMM_WORLD_RANK
devs=$(ibv_devices 2>&1 | awk 'NR > 2 && NF == 2 { print $1 }')
echo "rank $r devices $(echo $devs | wc -w) [$devs] uverbs [$(ls /dev/infiniband 2>/dev/null | tr '\n' ' ')]"
[ -n "$devs" ] || exit 0
gid=$(ibv_devinfo -v -d "$devs" | sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:[0-9.]*, RoCE v2.*/\1/p' | head -1)
if [ "$r" = 1 ]; then
	ib_send_lat -d "$devs" -x "$gid" -s 2 -n 200 >/dev/null 2>&1
else
	sleep 3
	ib_send_lat -d "$devs" -x "$gid" -s 2 -n 200 g1 2>&1 | awk '$1 == 2 { print "latency 2 B typical " $5 " us" }'
fi
EOF
chmod 755 "$T/rank.sh"
rdma_links() { rdma link show 2>/dev/null | grep -c 'vhpc-'; }
before=$(resource_counts)
links_before=$(rdma_links)

# No --driver: "auto" picks container guests for a job on the fabric, even
# where this L1 could run kvm guests, which get no verbs device.
out=$(cd "$T" && timeout 400 vhpc run -N 2 -n 2 --rdma --bind "$T:/t:ro" -- /bin/sh /t/rank.sh 2>"$T/err")
rc=$?
check_eq "vhpc run --rdma: the job ends well" 0 "$rc"
[ "$rc" = 0 ] || diag "$(tail -n 30 "$T/err")"
diag "$out"
check_match "rank 0's guest lists exactly one RDMA device of its own" 'rank 0 devices 1 \[vhpc-[a-z0-9]+-0\]' "$out"
check_match "rank 1's guest lists exactly one RDMA device of its own" 'rank 1 devices 1 \[vhpc-[a-z0-9]+-1\]' "$out"
check_match "... and has only its own uverbs node and rdma_cm" 'rank 1 devices 1 .* uverbs \[rdma_cm uverbs[0-9]+ \]' "$out"
check_match "verbs traffic between the job's two guests (ib_send_lat, nested/TCG)" 'latency 2 B typical [0-9.]+ us' "$out"
check_match "the agent says which VLAN and fabric subnet the job got" 'fabric .*vlan 30[0-9]|VLAN 30[0-9]' "$(cat "$T/err")"
check_match "auto picked container guests for it" 'auto picked container' "$(cat "$T/err")"
check_counts "nothing of the --rdma job is left (netns, links, cgroups, mounts)" "$before"
check_eq "... and no RDMA link" "$links_before" "$(rdma_links)"

# kvm guests asked by name with --rdma: refused before anything is made.
out=$(cd "$T" && timeout 120 vhpc run -N 1 -n 1 --driver kvm --rdma -- true 2>&1)
rc=$?
check_eq "vhpc run --driver kvm --rdma is refused" 1 "$([ "$rc" != 0 ] && echo 1 || echo 0)"
check_match "... saying that kvm guests get the fabric only through --device" \
	'--rdma: driver kvm cannot give its guests the RDMA fabric.*--device' "$out"
check_counts "... and leaves nothing" "$before"

out=$(cd "$T" && timeout 300 vhpc run -N 2 -n 2 --driver container --no-rdma --bind "$T:/t:ro" -- /bin/sh /t/rank.sh 2>"$T/err2")
rc=$?
check_eq "vhpc run --no-rdma: the job ends well" 0 "$rc"
[ "$rc" = 0 ] || diag "$(tail -n 30 "$T/err2")"
check_match "a --no-rdma job's guests have no RDMA device" 'rank 0 devices 0 \[\] uverbs \[\]' "$out"
check_counts "nothing of the --no-rdma job is left" "$before"
done_testing
