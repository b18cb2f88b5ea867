#!/usr/bin/env bash
# timeout: 60
# Detached commands of vhpc-guestd (spawn, status, wait, kill, output): they outlive
# the connection that started them, write their output to the spool, record
# their exit status, honour timeouts and signals, stop what they left in
# their process group, and stop with guestd.  Bad requests are refused.
. "$(dirname "$0")/../lib.sh"

GD=$BIN/vhpc-guestd
PROBE=$VHPC_TOP/$B/testbin/gprobe
for p in "$GD" "$PROBE"; do
	[ -x "$p" ] || { echo "Bail out! $p is not built (make tests)"; exit 1; }
done

tmp=$(mktemp -d /tmp/vhpct-detached-XXXXXX)
at_exit "rm -rf $tmp"
mark=$$$RANDOM     # marks processes this test starts (numeric: it goes into sleep times)
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key"
mkdir "$tmp/spool"

start_gd() {  # extra options
	"$GD" --name det --key "$tmp/key" --control "$tmp/ctl.sock" --log "$tmp/gd.log" \
		--kill-grace 500 "$@" &
	gd=$!
	at_exit "kill -9 $gd 2>/dev/null"
	for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && grep -q ready "$tmp/gd.log" 2>/dev/null && break; sleep 0.05; done
}
start_gd --spool "$tmp/spool"
P=("$PROBE" --unix "$tmp/ctl.sock" --key "$tmp/key")

# -- a command outlives the connection that spawned it
pid=$("${P[@]}" spawn job -- sh -c "echo started; echo to-err >&2; sleep 1.5; echo finished; exit 3 # $mark")
check_match "spawn answers with the command's pid" '^[0-9]+$' "$pid"
check_match "the spawning client is gone, the command runs on" '^running bytes=' "$("${P[@]}" state job)"
check_match "its process is alive" "$pid" "$(pgrep -f "exit 3 # $mark")"
keeper=$(sed -n 's/.*"keeper": *\([0-9]*\).*/\1/p' "$tmp/spool/job.state" 2>/dev/null)
check_match "its keeper is named in the state file" '^[0-9]+$' "$keeper"
# The keeper is forked by the session: the client's connection must not
# outlive the session in it (CRIU cannot dump a guest holding the node
# agent's socket).
check_eq "the keeper holds no socket of the session's" "" \
	"$(ls -l "/proc/$keeper/fd" 2>/dev/null | grep -o 'socket:.*')"
sleep 0.3
check_eq "stdout and stderr go to the spool while it runs" "started to-err" "$(cat "$tmp/spool/job.out" | tr '\n' ' ' | sed 's/ $//')"
out=$("${P[@]}" state job 10000)
check_match "wait returns the exit status" '^exited 3 bytes=[0-9]+$' "$out"
check_eq "all of the output is there" "started to-err finished" "$(tr '\n' ' ' <"$tmp/spool/job.out" | sed 's/ $//')"
check_match "the reported size is the file's" "bytes=$(stat -c %s "$tmp/spool/job.out")\$" "$out"
check_match "status after the end says the same" '^exited 3 ' "$("${P[@]}" state job)"
out=$("${P[@]}" spawn job -- true 2>&1)
check_match "an id cannot be reused" "exists already" "$out"

# -- wait with a short timeout returns while it still runs
"${P[@]}" spawn long -- sleep 30$mark >/dev/null
t0=$(date +%s%N)
out=$("${P[@]}" state long 300)
dt=$(( ($(date +%s%N) - t0) / 1000000 ))
check_match "wait times out with the command still running" '^running' "$out"
check "... after about its timeout (${dt} ms)" test $dt -ge 250 -a $dt -lt 3000
"${P[@]}" kill long 15
check_match "kill delivers a signal: killed by SIGTERM is 128+15" '^exited 143 ' "$("${P[@]}" state long 5000)"

# -- a timeout stops the command and says so
"${P[@]}" spawn tmo --timeout 300 -- sleep 30$mark >/dev/null
check_match "a command over its timeout is stopped and marked" '^exited 143 bytes=0 timeout$' "$("${P[@]}" state tmo 5000)"

# -- what a command leaves in its process group is stopped when it ends
"${P[@]}" spawn bg -- sh -c "sleep 31$mark & echo bg" >/dev/null
check_match "a command that leaves a background process ends" '^exited 0 ' "$("${P[@]}" state bg 5000)"
for _ in $(seq 40); do pgrep -f "sleep 31$mark" >/dev/null || break; sleep 0.05; done
check_eq "its background process is gone too" "" "$(pgrep -f "sleep 31$mark")"

# -- the command's exec errors come back like exec's
out=$("${P[@]}" spawn nope -- /nonexistent/prog 2>&1)
check_match "a missing program is an error naming it" "cannot execute '/nonexistent/prog'" "$out"
check "... and leaves no files behind" test ! -e "$tmp/spool/nope.out" -a ! -e "$tmp/spool/nope.state"

# -- malformed requests are refused with reasons
r() { "${P[@]}" send "1:$1" | sed 's/^reply(type 1): //'; }
check_match "an id that could leave the spool is refused" 'not a plain name' "$(r '{"v":1,"op":"status","id":"../x"}')"
check_match "a dotted id is refused" 'not a plain name' "$(r '{"v":1,"op":"spawn","id":"a.out","argv":["true"]}')"
check_match "status of an unknown id" "no detached command 'ghost'" "$(r '{"v":1,"op":"status","id":"ghost"}')"
check_match "wait needs its timeout" 'missing \\"timeout_ms\\"' "$(r '{"v":1,"op":"wait","id":"job"}')"
check_match "wait is bounded" 'timeout_ms: 600001 is outside 0..60000' "$(r '{"v":1,"op":"wait","id":"job","timeout_ms":600001}')"
check_match "kill of an ended command" "'job' is not running" "$(r '{"v":1,"op":"kill","id":"job","signal":9}')"
check_match "unknown fields are refused" 'status: unknown field \\"argv\\"' "$(r '{"v":1,"op":"status","id":"job","argv":[]}')"

# -- output over the channel: what the spool holds, from any offset
whole=$(cat "$tmp/spool/job.out")
check_eq "output from 0 is the whole spool file" "$whole" "$("${P[@]}" output job 0 4096 2>/dev/null)"
check_eq "output from an offset, at most max bytes" "${whole:8:6}" "$("${P[@]}" output job 8 6 2>/dev/null)"
check_eq "it says how long the output is now" "size=$(stat -c %s "$tmp/spool/job.out")" "$("${P[@]}" output job 0 1 2>&1 >/dev/null)"
check_eq "past the end: nothing (yet)" "" "$("${P[@]}" output job 100000 16 2>/dev/null)"
check_match "output of an unknown id" "no detached command 'ghost'" "$(r '{"v":1,"op":"output","id":"ghost","offset":0,"max":16}')"
check_match "output needs max" 'missing \\"max\\"' "$(r '{"v":1,"op":"output","id":"job","offset":0}')"
check_match "output max is bounded" 'max: 262145 is outside 1..262144' "$(r '{"v":1,"op":"output","id":"job","offset":0,"max":262145}')"
check_match "a negative offset is refused" 'offset: -1 is outside' "$(r '{"v":1,"op":"output","id":"job","offset":-1,"max":16}')"
ln -s /etc/shadow "$tmp/spool/evil.out"
check_match "an output file the command replaced by a link is refused" "output: .*evil" "$(r '{"v":1,"op":"output","id":"evil","offset":0,"max":16}')"
rm -f "$tmp/spool/evil.out"

# -- guestd stopping stops detached commands, and records it
"${P[@]}" spawn last -- sh -c "trap 'echo got-term; exit 9' TERM; sleep 32$mark & wait" >/dev/null
sleep 0.2
kill -TERM $gd
for _ in $(seq 100); do kill -0 $gd 2>/dev/null || break; sleep 0.05; done
check "guestd exits on SIGTERM" test ! -d /proc/$gd
check_match "its detached command got SIGTERM first" 'got-term' "$(cat "$tmp/spool/last.out")"
check_match "and its end is recorded" '"state":"exited".*"status":9' "$(cat "$tmp/spool/last.state")"
check_eq "no process of this test is left" "" "$(pgrep -f "$mark")"

# -- without --spool there are no detached commands
rm -f "$tmp/ctl.sock"
start_gd
out=$("${P[@]}" spawn x -- true 2>&1)
check_match "spawn without --spool is refused" 'no --spool directory' "$out"
kill -TERM $gd
done_testing
