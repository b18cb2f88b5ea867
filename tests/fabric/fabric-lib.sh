# Shell helpers for the fabric tests: a soft-RoCE fabric between two
# "nodes" (network namespaces joined by a veth, each end the node's fabric
# link "fab"), in an L1 whose kernel has per-namespace rxe (the lab's
# 7.3.4, "# lab-kernel:").  Source after tests/lib.sh.

# Skips the test, saying why, where this kernel cannot carry verbs between
# namespaces or the tools are missing.
fab_need() {
	need_root
	local t
	for t in rdma ibv_devices ib_send_lat ib_write_bw nsenter; do
		command -v "$t" >/dev/null || skip_all "$t is not installed (make deps: rdma-core, ibverbs-utils, perftest)"
	done
	modprobe rdma_rxe 2>/dev/null
	[ -d /sys/module/rdma_rxe ] || skip_all "no rdma_rxe in this kernel ($(uname -r)); the lab's 7.3.4 has it"
	modprobe ib_uverbs 2>/dev/null; modprobe rdma_ucm 2>/dev/null
	# rxe's per-namespace sockets came after 6.12: before, no verbs
	# traffic crosses namespaces (issue 34).
	local v; v=$(uname -r); v=${v%%-*}; v=${v%%+*}
	printf '%s\n7.0\n' "$v" | sort -V -C && skip_all "kernel $(uname -r) has no per-namespace rxe sockets (7.3.4 has)"
	# The node's setting, made at boot (tests/lab/inside does it in L1).
	rdma system show 2>/dev/null | grep -q 'netns exclusive' ||
		skip_all "the RDMA subsystem is in shared netns mode here; the fabric needs exclusive (ib_core netns_mode=0)"
}

# fab_nodes P: node namespaces ${P}n1 and ${P}n2, each with its end of a
# veth as "fab" (up, 10.77.0.N/24, untagged: the node's own traffic).
fab_nodes() {
	local p=$1 i
	export FAB_N1=${p}n1 FAB_N2=${p}n2
	ip netns add "$FAB_N1" && ip netns add "$FAB_N2" || return 1
	at_exit "ip netns del $FAB_N1 2>/dev/null; ip netns del $FAB_N2 2>/dev/null"
	ip -n "$FAB_N1" link add fab type veth peer name fab netns "$FAB_N2" || return 1
	for i in 1 2; do
		ip -n "${p}n$i" link set lo up
		ip -n "${p}n$i" addr add "10.77.0.$i/24" dev fab
		ip -n "${p}n$i" link set fab up
	done
}

# fab_two_nodes P: fab_nodes P, and an rxe device ${P}rN on each node's
# link, each a check of its own.
fab_two_nodes() {
	check "two node namespaces joined by their fabric links" fab_nodes "$1"
	check "node 1 gets rxe device ${1}r1 on its fabric link" fab_node_rdma 1 "${1}r1"
	check "node 2 gets rxe device ${1}r2 on its fabric link" fab_node_rdma 2 "${1}r2"
}

# fab_local_cluster VLANS POOL: this machine as a node with a soft-RoCE
# fabric, for `vhpc run --rdma`: a dummy link of the test's own (the job's
# VLAN goes on it and each guest's macvlan on that, in bridge mode, so two
# guests of one machine reach each other through it), named in a copy of
# the checkout's config dir (VHPC_CONFIG_DIR) with the VLANS and POOL
# given.  Skips the test where container guests cannot run here or no
# dummy link can be made.
fab_local_cluster() {
	local link=vfab$$
	need_built vhpc
	command -v runc >/dev/null || skip_all "runc is not installed"
	[ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] ||
		skip_all "needs cgroup2 alone on /sys/fs/cgroup (the lab's 7.3.4 L1 has it)"
	# Jumbo frames, as RoCE fabrics run them: rxe's MTU is then 4096.
	ip link add $link mtu 9000 type dummy && ip link set $link up || skip_all "cannot make a dummy link"
	at_exit "ip link del $link 2>/dev/null"
	export VHPC_CONFIG_DIR=$T/etc
	mkdir -p "$VHPC_CONFIG_DIR" && cp -r "$VHPC_TOP/configs/." "$VHPC_CONFIG_DIR/"
	cat >>"$VHPC_CONFIG_DIR/cluster.yaml" <<EOF2
fabric:
  mode: soft-roce
  link: $link
  vlans: $1
  pool: $2
  prefix: 24
EOF2
}

# in_node N CMD...: CMD in node N's network namespace, with this mount
# namespace (ip netns exec would remount /sys over the cgroup mounts).
in_node() { local n=$1; shift; nsenter --net="/run/netns/$(eval echo "\$FAB_N$n")" "$@"; }
export -f in_node

# fab_node_rdma N NAME: an rxe device NAME on node N's fab, moved into
# the node's namespace (exclusive mode makes it in the initial one).
fab_node_rdma() {
	local ns; ns=$(eval echo "\$FAB_N$1")
	in_node "$1" rdma link add "$2" type rxe netdev fab || return 1
	at_exit "nsenter --net=/run/netns/$ns rdma link del $2 2>/dev/null; rdma link del $2 2>/dev/null"
	rdma dev set "$2" netns "$ns"
}

# gid_index NS DEV: the index of DEV's IPv4 (RoCE v2) GID, seen from NS.
gid_index() {
	ip netns exec "$1" ibv_devinfo -v -d "$2" 2>/dev/null |
		sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:[0-9.]*, RoCE v2.*/\1/p' | head -1
}

# perf_pair SERVER_CMD... -- CLIENT_CMD...: runs a perftest server, then
# its client until it connects (the server needs a moment under TCG);
# the client's output in PERF_OUT, its status returned.  The commands may
# be exported shell functions.
perf_pair() {
	local srv=() cli=() i rc spid
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	timeout 120 bash -c '"$@"' _ "${srv[@]}" >"$T_DIR/perf-server.out" 2>&1 &
	spid=$!
	for ((i = 0; i < 20; i++)); do
		sleep 1
		PERF_OUT=$(timeout 100 bash -c '"$@"' _ "${cli[@]}" 2>&1)
		rc=$?
		case $PERF_OUT in *"Couldn't connect"*|*"Unable to open file descriptor"*) continue ;; esac
		break
	done
	wait "$spid" 2>/dev/null
	return $rc
}

# perf_figure OUT BYTES COLUMN: a perftest result line's column for BYTES.
perf_figure() { awk -v b="$2" -v c="$3" '$1 == b && NF >= c { print $c; exit }' <<<"$1"; }

# What the MPI tests' ranks run (rank-counters.sh), for --bind DIR:/t:ro.
FAB_RANK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# rank_field FILE RANK WHAT: a counter of RANK's "sent:" line in FILE.
rank_field() { sed -n "s/^.*rank $2 sent: .*$3 \([-0-9]*\).*/\1/p" "$1" | head -1; }
# pingpong_bytes FILE: what a rank sent in the PingPong table(s) in FILE.
pingpong_bytes() { awk '$1 ~ /^[0-9]+$/ && NF == 4 { s += $1 * $2 } END { print s + 0 }' "$1"; }
# check_ranks_on_verbs FILE WHERE: the checks of a two-rank job whose ranks
# (rank-counters.sh, output in FILE) must have talked over verbs: the bml
# took ofi, each rank's fab0 sent at least its PingPong bytes, its rxe
# device a packet per 4 KiB or more, its job network (TCP) a small part,
# and it may pin its guest's memory (default --mem 512M).  WHERE says
# where the guests were, for the diagnostics.  Sets PP_BYTES.
check_ranks_on_verbs() {
	local file=$1 where=$2 r f e p m b
	b=$(pingpong_bytes "$file") PP_BYTES=$b
	diag "PingPong over verbs between guests $where (nested/TCG): $(awk '$1 ~ /^[0-9]+$/ && NF == 4 { printf "%s B %s us %s MB/s; ", $1, $3, $4 }' "$file")"
	check_match "the bml took the ofi BTL" 'Using ofi btl' "$(cat "$file")"
	for r in 0 1; do
		f=$(rank_field "$file" $r fab0) e=$(rank_field "$file" $r eth0) p=$(rank_field "$file" $r rxe-pkts)
		m=$(sed -n "s/^rank $r memlock //p" "$file" | head -1)
		diag "rank $r: fab0 $f B, eth0 $e B, rxe $p packets sent; PingPong $b B a rank"
		check "rank $r's fabric interface sent at least its PingPong bytes ($f >= $b)" \
			test "$b" -gt 0 -a "${f:--}" != - -a "${f:-0}" -ge "$b"
		check "... its rxe device a packet per 4 KiB or more ($p)" test "${p:--}" != - -a "${p:-0}" -ge $((b / 4096))
		check "... its job network (TCP) a small part ($e B)" test "${e:-0}" -lt $((b / 10 + 1))
		check_eq "... it may pin its guest's memory (RLIMIT_MEMLOCK; at 8 MiB rxd's pools over a 4096-byte MTU never registered and the job hung)" \
			536870912 "$m"
	done
}
