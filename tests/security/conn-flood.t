#!/usr/bin/env bash
# timeout: 180
# Attack: 2,000 connections opened at once, to vhpc-ctld and to a vhpcd
# (hole 3, lib/wire_serve.c).  Each one got a thread, with no limit: the
# daemons' threads, descriptors and memory grew with the flood.  Now a
# daemon takes at most VHPC_WIRE_MAX_CONNS at once (1024) and
# VHPC_WIRE_MAX_CONNS_PER_ADDR from one address (256); the rest get a
# notice and are closed at once, and the daemons answer when it is over.
. "$(dirname "$0")/../lib.sh"
CL=vcf$$
. "$(dirname "$0")/wire-lib.sh"
T=$CL_DIR
N=2000
wl_up 1
cl_node_up 1 || fail "node 1 starts"
check "node 1 registers" cl_wait_nodes_up 1
NODE=198.18.0.11:6818
# Eight more addresses of the hub: the flood comes from several peers.
SRC=""
for i in $(seq 200 207); do
	ip -n "$CL_HUB" addr add "198.18.0.$i/24" dev hub0 && SRC="$SRC 198.18.0.$i"
done

# settle PID: waits (15 s at most) until the daemon's threads are back to
# what they were before any flood (quiet[PID]); says how many it has
declare -A quiet=([$CTLD_PID]=$(wl_status "$CTLD_PID" Threads) [$NODE_PID_1]=$(wl_status "$NODE_PID_1" Threads))
settle() {
	local i
	for ((i = 0; i < 150; i++)); do
		[ "$(wl_status "$1" Threads)" -le $((quiet[$1] + 4)) ] && break
		sleep 0.1
	done
	wl_status "$1" Threads
}

# flood NAME PID ADDR:PORT MAX SRC...: N idle connections held 6 s; the
# daemon's threads and memory while they are held, against MAX
flood() {
	local name=$1 pid=$2 target=$3 max=$4 t0 r0 t1 r1 out
	shift 4
	t0=$(settle "$pid") r0=$(wl_status "$pid" VmRSS)
	wl_bg "$CL_HUB" "$T/flood.out" "$FLOOD" idle "$target" $N 6 "$@"
	local fp=$WL_BG
	wait_log "$T/flood.out" '^connected' 15
	sleep 2
	t1=$(wl_status "$pid" Threads) r1=$(wl_status "$pid" VmRSS)
	wait "$fp"
	out=$(cat "$T/flood.out" | tr '\n' ' ')
	diag "$name: $out" "$name: threads $t0 -> $t1, VmRSS $((r0 / 1024)) -> $((r1 / 1024)) MiB"
	check "$name: at most $max connections held (threads $t0 -> $t1)" test $((t1 - t0)) -le "$max"
	check "$name: ... its memory grows by less than 64 MiB ($(( (r1 - r0) / 1024 )) MiB)" test $((r1 - r0)) -lt 65536
	check_match "$name: the rest are closed at once, with a notice" \
		"still open [0-9]+" "$out"
	check_match "$name: ... $max held" "closed by the daemon $((N - max)) \\($((N - max)) with a notice\\), still open $max," "$out"
}

flood "vhpc-ctld, from 8 addresses" "$CTLD_PID" "$CL_CTL" 1024 $SRC
check "vhpc-ctld answers after" vc nodes --json
flood "vhpc-ctld, from one address" "$CTLD_PID" "$CL_CTL" 256
check "vhpc-ctld answers after" vc nodes --json
flood "vhpcd, from 8 addresses" "$NODE_PID_1" "$NODE" 1024 $SRC
check_match "vhpcd answers after" '"type":"stopped"' \
	"$(cl_in "$CL_HUB" "$WP" send "$NODE" '{"type":"job_stop","node":"n1","job":99}')"
check "node 1 is still up at the controller" cl_wait_nodes_up 1
check "vhpc-ctld's threads are back when the flood is over ($(settle "$CTLD_PID"))" \
	test "$(settle "$CTLD_PID")" -le $((quiet[$CTLD_PID] + 4))
check "vhpcd's too ($(settle "$NODE_PID_1"))" test "$(settle "$NODE_PID_1")" -le $((quiet[$NODE_PID_1] + 4))
check "vhpc-ctld is still running" kill -0 "$CTLD_PID"
check "vhpcd is still running" kill -0 "$NODE_PID_1"
check_match "vhpc-ctld logged the refusals, once a second at most" \
	'refused: busy: .*more refused since the last such line' "$(cat "$T/ctld.log")"
check "... not one line each" test "$(grep -c 'refused: busy' "$T/ctld.log")" -lt 40
done_testing
