#!/usr/bin/env bash
# timeout: 600
# lab-kernel: @default
# lab-prepare: tests/cluster/ctr-image-prepare
# Checkpoints of container guests (issue 36), end to end where CRIU works:
# the lab's L1 runs Debian 12's own kernel (6.1), where Debian's CRIU 3.17
# passes `criu check`; this host's 6.18 is one CRIU 3.17 cannot start on,
# and there the test skips saying so (checkpoint.t checks that refusal).
# On a loopback cluster (vhpc-ctld, three vhpcd, one checkpoints dir), a job
# of two guests, one per node, as submitted by default (vmshm on: one guest per node
# has neither a region nor a pod), each guest
# holding 128 MiB, then printing a numbered tick 4 times a second; guest
# 1's lines reach mpirun
# in guest 0 over its orted's TCP connection across the job network:
#  - each guest's network namespace belongs to its own user namespace;
#  - `vhpc checkpoint J` while a `vhpc exec` session is open: refused,
#    naming it, nothing paused;
#  - `vhpc checkpoint --close-sessions J` mid-run: the session is closed,
#    its command gone; the job runs on, its output too;
#  - `vhpc checkpoint J --stop` later: the job ends CHECKPOINTED (75),
#    nothing of it is left on either node, and `vhpc checkpoints` lists
#    the checkpoint (each node's part: runc checkpoint of its guest, CRIU's
#    images, guestd's output folder, guest 0's spool);
#  - one of the two nodes is drained, and `vhpc restart NAME` puts the new
#    job on the other and the third node, which never had it; it runs on,
#    its guests restored by
#    `runc restore` in new network namespaces on a new job network with
#    the same addresses, and ends with exit 0 and every tick of both
#    guests exactly once: the processes went on where they were, and the
#    orted's TCP connection to mpirun survived;
#  - nothing of either job is left.
# Prints the checkpoint's size, the nodes' save times and the restart
# time (nested/TCG).
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
CL=vcl$$
. "$(dirname "$0")/ckpt-ctr-lib.sh"
cl_net_up 3 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
mark "vhpc-ctld up, the image pushed"
before=$(cl_leftovers)
for i in 1 2 3; do cl_node_up $i || fail "node $i starts"; done
check "three nodes register" cl_wait_nodes_up 3

runc_n() { local n=$1; shift; runc --root "$CL_DIR/run-n$n/runc" "$@"; }
tick_of() { vc output "$1" 2>/dev/null | sed -n "s/^$2 tick \([0-9]*\)$/\1/p" | tail -1; }
past_tick() { [ "$(tick_of "$1" g1)" -ge "$2" ] 2>/dev/null; }

N=200
# Each rank first holds FILL MiB of memory (a shell variable: anonymous
# pages, what CRIU saves page by page), so that the figures per GiB say
# something.
FILL=128
TICKS="x=\$(head -c $((FILL << 20)) /dev/zero | tr '\\0' x); for i in \$(seq $N); do echo \"\$(hostname) tick \$i\"; sleep 0.25; done; echo \"\$(hostname) held \${#x} bytes\""
J=$(sub -N 2 --vcpus 1 --driver container --timeout 400 -- sh -c "$TICKS")
mark "job $J submitted"
check "job $J runs" wait_state "$J" RUNNING 100
mark "job $J runs"
held=$(nodes_of "$J")
check_match "the job has a guest on each of two nodes (n${held% })" '^[1-3] [1-3] $' "$held"
for n in $held; do
	l=$(local_of "$J" "$n")
	pid=$(runc_n "$n" state "$(runc_n "$n" list -q | grep "^$l-" | head -1)" 2>/dev/null | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
	check_eq "node $n: the guest's (pid $pid) network namespace belongs to its user namespace" \
		"$(lsns -n -o NS -t user -p "$pid" 2>&1 | tr -d ' ')" "$(lsns -n -o ONS -t net -p "$pid" 2>&1 | tr -d ' ')"
done
check "guest 1's ticks come through, past tick 10" poll_until 240 past_tick "$J" 10
# A vhpc exec session open into a guest: its connection ends outside the
# guest, which CRIU cannot save, so the checkpoint is refused, saying so,
# before anything is paused; with --close-sessions (what a drain does)
# the session is closed, its command stopped, and the checkpoint goes on.
vc exec "$J" -- sleep 3600 >"$T/exec.out" 2>&1 &
XP=$!
opened() { grep -q "job $J: exec stream to g0 opened" "$CL_DIR"/n[123].log; }
check "a vhpc exec session into guest 0 is open" poll_until 60 opened
out=$(vc checkpoint "$J" 2>&1); rc=$?
check "vhpc checkpoint is refused while it is open" test "$rc" != 0
check_match "... naming the session, and --close-sessions" "cannot be checkpointed on node n[123] now: 1 vhpc exec or vhpc shell session is open into its guests.*or checkpoint with --close-sessions" "$out"
check_eq "... and the job was never paused: RUNNING" RUNNING "$(job_state "$J")"
check "... the session still runs" kill -0 "$XP"
# First a checkpoint that lets the job run on: vhpcd's monitor of mpirun,
# closed for the dump, connects again, and the ticks go on.
out=$(vc checkpoint --close-sessions "$J" 2>&1); rc=$?
diag "$out"
check_eq "vhpc checkpoint --close-sessions $J (no --stop) succeeds" 0 "$rc"
check "... the session's client has ended" poll_until 10 sh -c "! kill -0 $XP 2>/dev/null"
wait "$XP"; xrc=$?
check "... with a failure status ($xrc)" test "$xrc" != 0
check_match "... saying the node may have closed it for a checkpoint" \
	"vhpc exec: job $J g0: the connection closed before the command finished .*closed the job's sessions for a checkpoint" \
	"$(cat "$T/exec.out")"
check_match "the node closed it before the pause" "job $J: 1 exec or shell session closed for a checkpoint" "$(cat "$CL_DIR"/n[123].log)"
check_eq "... and its command is gone from the guest" "" "$(pgrep -f '^sleep 3600$')"
FIRST=$(sed -n 's/^checkpoint \([a-z0-9.-]*\) of job.*/\1/p' <<<"$out")
k1=$(tick_of "$J" g1)
check "... the job runs on: guest 1's ticks pass ${k1:-?} + 8" poll_until 120 past_tick "$J" $((${k1:-0} + 8))
check_eq "... RUNNING" RUNNING "$(job_state "$J")"
k0=$(tick_of "$J" g1)
cl_ckpt_stop "$J" "at g1's tick $k0"
out=$CKPT_OUT
check "... another checkpoint than the first ($FIRST)" test -n "$NAME" -a "$NAME" != "$FIRST"
check_match "vhpc checkpoints lists $NAME" "^$NAME +$J " "$(vc checkpoints 2>&1)"
bytes=$(vc checkpoints --json 2>/dev/null | tr -d ' \n' | grep -o "\"name\":\"$NAME\"[^}]*" | grep -o '"bytes":[0-9]*' | head -1 | cut -d: -f2)
still=$(sed -n 's/.*stood still \([0-9.]*\) s.*/\1/p' <<<"$out")
gib=$(awk -v f=$FILL 'BEGIN { print 2 * f / 1024 }')
diag "nested/TCG, lab L1 on this 2-core machine: 2 guests, each rank holding $FILL MiB ($gib GiB in all)"
diag "checkpoint size: ${bytes:-?} bytes ($(awk -v b="${bytes:-0}" -v g="$gib" 'BEGIN { printf "%.2f GiB, %.0f%% of what the ranks hold", b / 1073741824, 100 * b / (g * 1073741824) }'))"
diag "standstill (first pause to end of the save, --stop): ${still:-?} s, $(awk -v s="${still:-0}" -v g="$gib" 'BEGIN { printf "%.1f", s / g }') s per GiB held"
for n in $held; do
	diag "node n$n: $(grep "job $J: checkpoint $NAME:" "$CL_DIR/n$n.log" | tail -1 | sed 's/.*checkpoint [^:]*: //')"
done
for g in 0 1; do
	diag "guest g$g's part: $(ls "$CK/$NAME/g$g" 2>/dev/null | wc -l) files, $(du -sk "$CK/$NAME/g$g" 2>/dev/null | cut -f1) KiB"
done

# The restart goes to another node: one that held a part is drained.
D=${held% } D=${D##* }
F=
for i in 1 2 3; do [[ " $held" == *" $i "* ]] || F=$i; done
out=$(vc node drain "n$D" 2>&1); rc=$?
check_eq "node n$D, which held a part, is drained" 0 "$rc"
[ "$rc" = 0 ] || diag "$out"
at_exit "nsenter --net=/run/netns/$CL_HUB -- '$BIN/vhpc' node undrain n$D"

cl_restart "$NAME" 'RUNNING|FAILED|EXITED'
job_state_is "$R" RUNNING || for n in 1 2 3; do grep -B2 -A32 "CRIU's log" "$CL_DIR/n$n.log" | head -40 | sed "s/^/# n$n: /"; done
rms=$RESTART_MS
diag "restart to RUNNING (both guests restored and resumed): $rms ms, $(awk -v n=$rms -v g="$gib" 'BEGIN { printf "%.1f", n / 1000 / g }') s per GiB held (nested/TCG)"
rheld=$(nodes_of "$R")
check_eq "... on n$F (a node that never had the job) and the one not drained, not n$D" \
	"$(tr ' ' '\n' <<<"$held $F" | grep -vx "$D" | grep . | sort | tr '\n' ' ')" "$(tr ' ' '\n' <<<"$rheld" | grep . | sort | tr '\n' ' ')"
for n in $rheld; do diag "node n$n: $(grep "job $R" "$CL_DIR/n$n.log" | grep -m1 -o 'restored (paused) in [0-9.]* ms\|ready in [0-9.]* ms' )"; done
if ! job_state_is "$R" RUNNING; then
	diag "job $R: $(job_state "$R"): $(job_field "$R" reason)"
	for n in 1 2 3; do grep -E "restor|CRIU|error" "$CL_DIR/n$n.log" | tail -4 | sed "s/^/# n$n: /"; done
fi
vc wait "$R"; rc=$?
check_eq "the restarted job completes with exit status 0" 0 "$rc"
vc output "$R" >"$T/r.out" 2>&1
lines_ok() {
	local g i
	for g in g0 g1; do
		for i in $(seq $N); do
			[ "$(grep -cx "$g tick $i" "$1")" = 1 ] || { echo "# $g tick $i: $(grep -cx "$g tick $i" "$1") times"; return 1; }
		done
	done
}
check "its output is whole: every tick of both guests once, from the first (tick $k0 was before the checkpoint)" lines_ok "$T/r.out"
check_eq "each rank still held its $FILL MiB at the end" "g0 held $((FILL << 20)) bytes g1 held $((FILL << 20)) bytes" \
	"$(grep -E '^g[01] held' "$T/r.out" | sort | tr '\n' ' ' | sed 's/ $//')"
lines_ok "$T/r.out" >/dev/null || diag "$(tail -n 8 "$T/r.out")"
check "nothing of the restarted job is left" cl_jobs_gone
for i in 1 2 3; do cl_node_kill $i TERM; done
check_eq "nothing is left" "$before" "$(cl_leftovers)"
done_testing
