# The set-up of tests/security/vxlan-*.t: the tests' 3-node cluster
# (tests/cluster/cluster-lib.sh), nodes of two cores each (all on this
# machine's), with a job A of three one-vCPU guests: they fill one node and
# half of another; the third node is not part of A.  Source after
# tests/lib.sh.
#
# After net_job_up:
#   A VNI        the job and its VNI (as root reads them from the queue)
#   NA NB NOUT   A's node of guest 0, A's other node, the node not in A (1..3)
#   G0NS G1NS    guest 0's network namespace, and that of a guest of A on NB
#   G0IP G0MAC   guest 0's address and MAC, the attack's target
# net_count_at_g0 SECONDS CMD...: runs CMD (the attack; its output in
# $CL_DIR/attack.out) while a socket in guest 0 counts datagrams
# "vhpc-inject ..." on UDP NET_PORT, and prints how many reached it.
need_cluster
INJ=$VHPC_TOP/$B/testbin/vxlan-inject
[ -x "$INJ" ] || skip_all "$INJ is not built (make tests)"
CL=vsn$$
. "$VHPC_TOP/tests/cluster/cluster-lib.sh"
NET_PORT=7777

quiet() { "$@" >/dev/null 2>&1; }
ul() { echo "198.18.0.$((10 + $1))"; }
gns() { ls /run/netns | grep -E "^vhpc-$1x[0-9a-z]+-$2\$"; }

net_job_up() {
	local q i
	cl_net_up 3 && cl_munge_up && cl_ctld_up || return 1
	for i in 1 2 3; do cl_node_up "$i" --cpus 0-$(($(nproc) > 1 ? 1 : 0)) || return 1; done
	cl_wait_nodes_up 3 || return 1
	A=$(net_submit -N 3 -n 3 --vcpus 1 --oversubscribe -- sleep 3600)
	wait_state "$A" RUNNING 40 || { diag "$(vc queue --all 2>&1 | tail -n 3)"; return 1; }
	q=$(job_json "$A")
	VNI=$(echo "$q" | sed -n 's/.*"vni":\([0-9]*\).*/\1/p')
	NA=$(guest_node 0 "$q")
	for i in 1 2; do [ "$(guest_node $i "$q")" != "$NA" ] && NB=$(guest_node $i "$q") && G1NS=$(gns "$A" $i); done
	for i in 1 2 3; do [ "$i" != "$NA" ] && [ "$i" != "$NB" ] && NOUT=$i; done
	G0NS=$(gns "$A" 0)
	G0IP=$(ip -n "$G0NS" -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1)
	G0MAC=$(ip -n "$G0NS" -o link show eth0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
	diag "job $A (VNI $VNI): g0 $G0IP $G0MAC on n$NA, $G1NS on n$NB; n$NOUT is not in it"
	[ -n "$VNI" ] && [ -n "$NA" ] && [ -n "$NB" ] && [ "$NA" != "$NB" ] && [ -n "$NOUT" ] && [ -n "$G0MAC" ] &&
		[ -n "$G1NS" ]
}

# net_encrypt: the controller's cluster file (before net_job_up) asks for
# underlay encryption: WireGuard addresses 10.254.0.0/16, a fresh secret.
net_encrypt() {
	head -c 64 /dev/urandom >"$CL_DIR/underlay.key" && chmod 600 "$CL_DIR/underlay.key" &&
		awk -v key="$CL_DIR/underlay.key" '{ print } /^  guest_port:/ {
			print "  underlay_encryption:"; print "    key: " key; print "    pool: 10.254.0.0/16" }' \
			"$VHPC_TOP/configs/cluster.yaml" >"$CL_DIR/cluster.yaml" &&
		grep -q underlay_encryption "$CL_DIR/cluster.yaml" && export VHPC_CLUSTER=$CL_DIR/cluster.yaml
}
wgaddr() { echo "10.254.0.$((10 + $1))"; }

net_submit() { vc submit --json --driver container "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
guest_node() { echo "$2" | grep -o "\"guest\":$1,\"node\":\"n[0-9]\"" | sed 's/.*"n\([0-9]\)"/\1/'; }

net_count_at_g0() {
	local secs=$1 out=$CL_DIR/count.$RANDOM pid
	shift
	[ -n "${VHPC_IN_LAB-}" ] && secs=$((secs * ${VHPC_LAB_TIME_SCALE:-4}))
	: >"$out"
	ip netns exec "$G0NS" "$INJ" listen "$NET_PORT" "$((secs * 1000))" >"$out" 2>&1 &
	pid=$!
	poll_until 10 grep -q listening "$out"
	"$@" >"$CL_DIR/attack.out" 2>&1
	wait "$pid"
	sed -n 's/^received //p' "$out"
}

# The job's firewall on node N: its drop counters, "in out"
net_fw_drops() {
	cl_in "$CL-n$1" nft list table ip "vhpc-$(ls "$CL_DIR/run-n$1/jobs" | grep "^${A}x")" 2>/dev/null |
		sed -n 's/.*counter packets \([0-9]*\) .*/\1/p' | tr '\n' ' ' | sed 's/ $//'
}
