#!/usr/bin/env bash
# timeout: 90
# Attack: peers with no credential announce a frame of 1 MiB and send
# garbage after it, never the last byte (hole 3, lib/wire.c).  Version 1
# of the wire allocated and filled 1 MiB per connection before munge
# checked anything, and held it until the receive deadline.  Now a
# receiver reads at most a credential's 1 KiB before munged has checked
# it: the length is refused at once, with a notice, and nothing grows.
. "$(dirname "$0")/../lib.sh"
CL=vhf$$
. "$(dirname "$0")/wire-lib.sh"
T=$CL_DIR
N=200
wl_up 0
r0=$(wl_status "$CTLD_PID" VmRSS)
wl_bg "$CL_HUB" "$T/flood.out" "$FLOOD" bigframe "$CL_CTL" $N 5
fp=$WL_BG
wait_log "$T/flood.out" '^connected' 15
sleep 3
r1=$(wl_status "$CTLD_PID" VmRSS)
wait "$fp"
out=$(tr '\n' ' ' <"$T/flood.out")
diag "$out" "vhpc-ctld VmRSS $((r0 / 1024)) -> $((r1 / 1024)) MiB with $N frames of 1 MiB on the way"
check "vhpc-ctld's memory grows by less than 16 MiB ($(( (r1 - r0) / 1024 )) MiB)" test $((r1 - r0)) -lt 16384
check_match "every such connection is closed at once, with a notice" \
	"closed by the daemon $N \\($N with a notice\\), still open 0," "$out"
check_match "... the notice says why" 'refused: rejected message: frame of 2000 bytes \(a credential is at most 1024' \
	"$(cl_in "$CL_HUB" "$WP" raw "$CL_CTL" "$(head -c 2000 /dev/zero | tr '\0' x)")"
check "vhpc-ctld answers" vc nodes --json
check "vhpc-ctld is still running" kill -0 "$CTLD_PID"
done_testing
