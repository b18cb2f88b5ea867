#!/usr/bin/env bash
# timeout: 120
# Attack: clients that send a request and never read the reply (hole 3,
# lib/fdio.c, lib/wire_serve.c).  Each held a daemon's thread for as long
# as it kept its connection open: replies were written with no time limit.
# Now the daemon gives a peer VHPC_WIRE_TIMEOUT_MS to take its reply,
# resets it after, and answers everyone else meanwhile.
#
# The hub's TCP send buffers are held at 16 KiB, so that the reply a user
# asks for here (the node list of 400 simulated nodes, ~100 KB) fills
# them: by default the kernel takes up to 4 MiB per connection before a
# send blocks, and a few hundred such clients fill its memory first.
. "$(dirname "$0")/../lib.sh"
CL=vsr$$
. "$(dirname "$0")/wire-lib.sh"
T=$CL_DIR
N=20 LIMIT_MS=8000
export VHPC_WIRE_TIMEOUT_MS=$LIMIT_MS
cl_net_up 1 && ip netns exec "$CL_HUB" sysctl -qw net.ipv4.tcp_wmem="4096 16384 16384" &&
	cl_munge_up && CL_HB_MS=60000 CL_NO_PUSH=1 cl_ctld_up || { echo "Bail out! cluster set-up"; exit 1; }
wl_bg "$CL-n1" "$T/sim.out" "$BIN/vhpcd" --simulate 400 --name sim --listen 198.18.0.11:6818 \
	--controller "$CL_CTL" --topology "synthetic:pack:1 numa:1 core:2 pu:1" --log "$T/sim.log"
check "400 simulated nodes register" wait_log "$T/sim.log" "simulated nodes registered" 60
size=$(vc nodes --json | wc -c)
check "the node list is bigger than the buffers ($size bytes)" test "$size" -gt 65536
base=$(wl_status "$CTLD_PID" Threads)

# The clients: each through a relay that stops reading (wirerelay stall).
mkdir "$T/relay"
wl_bg "$CL_HUB" "$T/relay.log" "$RELAY" 198.18.0.1:7001 "$CL_CTL" "$T/relay" $(for _ in $(seq $N); do echo stall; done)
wait_log "$T/relay.log" listening 5
t0=$(date +%s%N)
for _ in $(seq $N); do
	VHPC_CONTROLLER=198.18.0.1:7001 as_nobody "$BIN/vhpc" nodes --json >/dev/null 2>&1 &
done
wait_log "$T/relay.log" "^$N stall" 30
check_eq "the relay stalled $N replies" "$N" "$(grep -c stall "$T/relay.log")"
sleep 0.5
held=$(( $(wl_status "$CTLD_PID" Threads) - base ))
diag "vhpc-ctld: $base threads before, $held more with $N clients that do not read"
check "... they hold threads" test "$held" -ge $((N / 2))
a=$(date +%s%N)
out=$(vc nodes --json | grep -c '"name":"sim-')
ms=$(( ($(date +%s%N) - a) / 1000000 ))
check_eq "another client is answered meanwhile ($ms ms)" 400 "$out"

# Past the limit (from the last one's request), every stuck thread is gone.
elapsed=$(( ($(date +%s%N) - t0) / 1000000 ))
sleep $(( (LIMIT_MS + 2000 - elapsed + 999) / 1000 > 0 ? (LIMIT_MS + 2000 - elapsed + 999) / 1000 : 0 ))
for _ in $(seq 30); do
	[ $(( $(wl_status "$CTLD_PID" Threads) - base )) -le 2 ] && break
	sleep 0.5
done
left=$(( $(wl_status "$CTLD_PID" Threads) - base ))
diag "vhpc-ctld: $left threads more than before, $(( ($(date +%s%N) - t0) / 1000000 )) ms after the first stalled reply"
check "the stuck connections are closed after the limit" test "$left" -le 2
check_eq "... each one said so in the log" "$N" \
	"$(grep -c "reply: sending a message: the peer did not take it within $LIMIT_MS ms" "$T/ctld.log")"
check_eq "vhpc-ctld answers" 400 "$(vc nodes --json | grep -c '"name":"sim-')"
check "vhpc-ctld is still running" kill -0 "$CTLD_PID"
done_testing
