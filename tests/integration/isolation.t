#!/usr/bin/env bash
# timeout: 180
# Guests of one job reach each other; guests of a concurrent job cannot be
# reached from them (each job has its own bridge in its own namespace).
. "$(dirname "$0")/common.sh"
need_root
[ -x "$BIN/vhpc" ] && [ -x "$BIN/vhpc-guestd" ] || skip_all "vhpc is not built"

vhpc run -N 1 --oversubscribe --timeout 120 -- sleep 100 >"$T/b.out" 2>"$T/b.err" &
bpid=$!
at_exit "kill -INT $bpid; wait $bpid"
for _ in $(seq 100); do grep -q 'ready in' "$T/b.err" && break; sleep 0.2; done
check "job B is up" grep -q 'ready in' "$T/b.err"
bnet=$(sed -n 's/.*network \(10\.[0-9.]*\)\.0\/24.*/\1/p' "$T/b.err")
baddr=$bnet.2
diag "job B's guest is $baddr"

# From job A's guest g0: its own g1 answers, job B's guest does not.
vhpc run -N 2 -n 2 --oversubscribe -- sh -c "
	[ \$OMPI_COMM_WORLD_RANK = 0 ] || exit 0
	nc -w 2 g1 7707 </dev/null && echo OWN=yes || echo OWN=no
	ping -c 1 -W 1 g1 >/dev/null 2>&1 && echo OWNPING=yes || echo OWNPING=no
	nc -w 2 $baddr 7707 </dev/null && echo OTHER=yes || echo OTHER=no
	ping -c 1 -W 1 $baddr >/dev/null 2>&1 && echo OTHERPING=yes || echo OTHERPING=no
	vhpc-rsh $baddr true; echo RSH=\$?
" >"$T/a.out" 2>"$T/a.err"
check_eq "job A ran" 0 "$?"
check "A's g0 reaches A's g1 (TCP to its agent)" grep -q OWN=yes "$T/a.out"
check "A's g0 pings A's g1" grep -q OWNPING=yes "$T/a.out"
check "A's g0 cannot connect to B's guest" grep -q OTHER=no "$T/a.out"
check "A's g0 cannot ping B's guest" grep -q OTHERPING=no "$T/a.out"
check "vhpc-rsh from A to B's guest fails (255)" grep -q RSH=255 "$T/a.out"
[ -s "$T/a.out" ] || diag "$(tail -20 "$T/a.err")"
check "the host itself has no route into a job network" sh -c "! ping -c 1 -W 1 $baddr >/dev/null 2>&1"
kill -INT $bpid; wait $bpid
check_eq "job B, interrupted, exits 130" 130 "$?"
done_testing
