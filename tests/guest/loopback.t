#!/usr/bin/env bash
# timeout: 90
# vhpc-guestd on loopback, driven by vhpc-rsh and by gprobe (a client that
# can misbehave): output, exit statuses, env/cwd, 50 MB intact, timeouts,
# signals, disconnects, wrong keys, replays, malformed requests, limits.
. "$(dirname "$0")/../lib.sh"

GD=$BIN/vhpc-guestd
RSH=$BIN/vhpc-rsh
PROBE=$VHPC_TOP/$B/testbin/gprobe
for p in "$GD" "$RSH" "$PROBE"; do
	[ -x "$p" ] || { echo "Bail out! $p is not built (make tests)"; exit 1; }
done

tmp=$(mktemp -d /tmp/vhpct-guest-XXXXXX)
at_exit "rm -rf $tmp"
mark=$$$RANDOM     # marks processes this test starts
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/otherkey"
ms() { echo $(( $(date +%s%N) / 1000000 )); }
# wait_for PID SECONDS: wait for a child, but not forever (124 if it lingers).
wait_for() {
	for _ in $(seq $(($2 * 20))); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
	kill -0 "$1" 2>/dev/null && return 124
	wait "$1"
}

"$GD" --name lo --key "$tmp/key" --listen 127.0.0.1:0 --control "$tmp/ctl.sock" \
	--log "$tmp/gd.log" --handshake-timeout 500 --kill-grace 500 --max-sessions 8 &
gd=$!
at_exit "kill -9 $gd"
for _ in $(seq 100); do grep -q ready "$tmp/gd.log" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*listening on tcp 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/gd.log")
[ -n "$port" ] || { cat "$tmp/gd.log"; echo "Bail out! guestd did not start"; exit 1; }
export VHPC_JOB_KEY=$tmp/key VHPC_GUEST_PORT=$port
P=("$PROBE" --tcp "127.0.0.1:$port" --key "$tmp/key")
PU=("$PROBE" --unix "$tmp/ctl.sock" --key "$tmp/key")

# -- hello on the control socket
hello=$("${PU[@]}" hello)
check_match "hello says ready" '"ready":true' "$hello"
check_match "hello reports guestd's pid" "\"pid\":$gd[,}]" "$hello"
check_match "hello reports this network namespace" "\"netns\":$(stat -L -c %i /proc/self/ns/net)," "$hello"
check_match "hello reports CPUs, memory nodes and addresses" '"cpus":"[0-9].*"mems":"[0-9].*"addrs":\[.*127\.0\.0\.1/8' "$hello"
check_match "vhpc-rsh --hello works over the control socket" '"name":"lo"' "$("$RSH" --hello "$tmp/ctl.sock")"

# -- commands, output and status
check_eq "echo over TCP" "hello world" "$("$RSH" 127.0.0.1 echo hello world)"
check_eq "words joined like ssh, quoting is the remote shell's" "a   b c" \
	"$("$RSH" localhost echo '"a   b"' c)"
out=$("$RSH" 127.0.0.1 'echo out; echo err >&2' 2>"$tmp/err")
check_eq "stdout and stderr stay apart (stdout)" "out" "$out"
check_eq "stdout and stderr stay apart (stderr)" "err" "$(cat "$tmp/err")"
"$RSH" 127.0.0.1 'exit 7'; check_eq "exit status relayed" 7 $?
"$RSH" 127.0.0.1 'kill -KILL $$'; check_eq "killed by SIGKILL is 128+9" 137 $?
"$RSH" 127.0.0.1 'kill -TERM $$'; check_eq "killed by SIGTERM is 128+15" 143 $?
"$RSH" 127.0.0.1 "yes $mark" | head -1 >/dev/null; rc=${PIPESTATUS[0]}
check_eq "a closed stdout ends vhpc-rsh by SIGPIPE, like a local pipeline" 141 $rc
for _ in $(seq 40); do pgrep -f "^yes $mark" >/dev/null || break; sleep 0.05; done
check_eq "... and the remote writer is stopped" "" "$(pgrep -f "^yes $mark")"
check_eq "stdin is /dev/null" "done" "$(echo secret | "$RSH" 127.0.0.1 'cat; echo done')"
check_eq "exec with stdin: the command reads what the client sends, to its end" "secret|done" \
	"$(echo secret | "${P[@]}" exec --stdin -- sh -c 'cat; echo done' | tr '\n' '|' | sed 's/|$//')"
head -c 3000000 /dev/urandom >"$tmp/in"
check_eq "3 MB through stdin and back out at once, intact (neither side stops the other)" \
	"$(sha256sum <"$tmp/in" | cut -c1-64)" "$("${P[@]}" exec --stdin -- cat <"$tmp/in" | sha256sum | cut -c1-64)"
check_eq "a command that reads no stdin ends, and so does the client" "7" \
	"$(head -c 5000000 /dev/zero | "${P[@]}" exec --stdin -- sh -c 'exit 7'; echo $?)"
check_eq "the control socket runs commands too" "via unix" "$("$RSH" "$tmp/ctl.sock" echo via unix)"
check_eq "env and cwd of a request" "bar $tmp" \
	"$("${P[@]}" exec --env FOO=bar --env PATH=/usr/bin:/bin --cwd "$tmp" -- sh -c 'echo $FOO $(pwd)')"
check_eq "no cwd means \$HOME" "$HOME" "$("${P[@]}" exec -- pwd)"
out=$("${P[@]}" exec -- /nonexistent/prog 2>&1); rc=$?
check_match "a missing program is an error naming it" "cannot execute '/nonexistent/prog': No such file" "$out"
check_eq "... and the client fails with 255" 255 $rc
out=$("${P[@]}" exec --cwd /nonexistent -- true 2>&1)
check_match "a missing cwd is an error naming it" "cannot change to directory '/nonexistent'" "$out"

# -- 50 MB on stdout and 5 MB on stderr at once, intact
head -c 50000000 /dev/urandom >"$tmp/big"
head -c 5000000 /dev/urandom >"$tmp/big2"
t0=$(ms)
"$RSH" 127.0.0.1 "cat $tmp/big & cat $tmp/big2 >&2; wait" >"$tmp/big.out" 2>"$tmp/big2.out"
rc=$?; t1=$(ms)
check_eq "large output: status" 0 $rc
check_eq "large output: 50 MB stdout checksum" "$(sha256sum <"$tmp/big")" "$(sha256sum <"$tmp/big.out")"
check_eq "large output: 5 MB stderr checksum" "$(sha256sum <"$tmp/big2")" "$(sha256sum <"$tmp/big2.out")"
diag "55 MB relayed in $((t1 - t0)) ms"
rm -f "$tmp/big" "$tmp/big.out" "$tmp/big2" "$tmp/big2.out"

# -- backpressure: a client that stops reading holds the command back
#    instead of guestd buffering its output
zero=$tmp/../../dev/zero   # /dev/zero under a name only this test uses
"$RSH" 127.0.0.1 "head -c 100000000 $zero" | (sleep 1.5; wc -c >"$tmp/bp.count") &
bp=$!
sleep 1
sess=$(pgrep -P $gd | head -1)
rss=$(awk '/^VmRSS/ {print $2}' /proc/$sess/status 2>/dev/null)
check "backpressure: the session holds little memory (${rss:-?} kB)" test "${rss:-999999}" -lt 16000
check "backpressure: the writer is held back, not finished" pgrep -f "^head -c 100000000 $zero"
wait_for $bp 20
check_eq "backpressure: all 100 MB arrived in the end" 100000000 "$(tr -d ' ' <"$tmp/bp.count")"

# -- timeout: the guest stops the command
t0=$(ms)
out=$("${P[@]}" exec --timeout 300 -- sleep 30$mark 2>&1); rc=$?
t1=$(ms)
check_eq "timeout: killed by SIGTERM" 143 $rc
check_match "timeout: reported as a timeout" "gprobe: timeout" "$out"
check "timeout: within a second or two ($((t1 - t0)) ms)" test $((t1 - t0)) -lt 2500

# -- signals are forwarded to the remote process group
"$RSH" 127.0.0.1 "trap 'echo got TERM; exit 7' TERM; sleep 30$mark & wait" >"$tmp/sig.out" &
rsh=$!
sleep 0.5
kill -TERM $rsh
wait_for $rsh 5; rc=$?
check_eq "SIGTERM forwarded: the remote trap ran" "got TERM" "$(cat "$tmp/sig.out")"
check_eq "SIGTERM forwarded: its status came back" 7 $rc

# -- a client that vanishes takes its whole process group with it,
#    even processes that ignore SIGTERM
"$RSH" 127.0.0.1 "trap '' TERM; sleep 31$mark & sleep 32$mark & wait" &
rsh=$!
for _ in $(seq 50); do [ "$(pgrep -fc "^sleep 3[12]$mark")" = 2 ] && break; sleep 0.05; done
check_eq "disconnect: the remote group is running" 2 "$(pgrep -fc "^sleep 3[12]$mark")"
kill -KILL $rsh; wait $rsh 2>/dev/null
for _ in $(seq 60); do pgrep -f "^sleep 3[12]$mark" >/dev/null || break; sleep 0.05; done
check_eq "disconnect: no process of the group remains" 0 "$(pgrep -fc "^sleep 3[12]$mark")"
check_match "disconnect: guestd says why" "stopping process group [0-9]+ \(the client is gone\)" "$(cat "$tmp/gd.log")"

# -- authentication
out=$(VHPC_JOB_KEY=$tmp/otherkey "$RSH" 127.0.0.1 "touch $tmp/wrongkey" 2>&1); rc=$?
check_eq "wrong key: 255 like ssh" 255 $rc
check_match "wrong key: the client says so" "wrong job key" "$out"
check "wrong key: the command did not run" test ! -e "$tmp/wrongkey"
check_match "wrong key: guestd logs the bad MAC" "bad message authentication code" "$(cat "$tmp/gd.log")"
chmod 644 "$tmp/otherkey"
out=$(VHPC_JOB_KEY=$tmp/otherkey "$RSH" 127.0.0.1 true 2>&1); rc=$?
check_match "a key readable by others is refused" "readable by group or others" "$out"
out=$("${P[@]}" replay "$tmp/replayed")
check_match "replay: the recorded session ran" "session 1: marker created" "$out"
check_match "replay in the same session is refused" "same session: closed" "$out"
check_match "... and did not run" "same session: marker missing" "$out"
check_match "replay in a new session is refused" "new session: closed" "$out"
check_match "... and did not run" "new session: marker missing" "$out"

out=$("$RSH" -p 1 127.0.0.1 true 2>&1); rc=$?
check_eq "nobody listening: 255 like ssh" 255 $rc
check_match "... naming the address" "cannot connect to guest 127.0.0.1:1 \(127.0.0.1\): Connection refused" "$out"

# -- malformed and unexpected requests get an error reply, and the session lives on
out=$("${P[@]}" send '1:{"v":1,"op":' '1:{"v":1,"op":"exec","argv":[]}' '1:{"v":1,"op":"signal","signal":9}' \
	'4:data' '9:x' '1:{"v":1,"op":"hello"}')
check_match "truncated JSON: error reply" '"ok":false,"error":"request is not valid JSON: it ends early' "$out"
check_match "empty argv: error reply" '"error":"argv: must not be empty"' "$out"
check_match "signal while idle: error reply" '"error":"signal: no command is running' "$out"
check_match "stdin frame: error reply" 'stdin frames are not accepted' "$out"
check_match "unknown frame type: error reply" 'unexpected frame type 9' "$out"
check_match "the same connection still answers hello" '"op":"hello","ok":true' "$out"
out=$("${P[@]}" big 700000)
check_match "an oversized request is refused" 'request of 700000 bytes exceeds the 524288-byte limit' "$out"
check_eq "garbage instead of the protocol: guestd's handshake, then closed" "closed after 16 bytes" \
	"$("${P[@]}" garbage)"
t=$("${P[@]}" idle)
check "a silent client is dropped after the handshake timeout ($t ms)" test "$t" -ge 400 -a "$t" -lt 3000
check "guestd survived all of it" kill -0 $gd

# -- concurrency: 12 sessions at once with --max-sessions 8: all succeed,
#    the last ones wait in the backlog for a free slot
t0=$(ms)
pids=()
for i in $(seq 12); do "$RSH" 127.0.0.1 "sleep 0.4; echo ok $i" >"$tmp/c$i" & pids+=($!); done
wait "${pids[@]}"
t1=$(ms)
n=0; for i in $(seq 12); do [ "$(cat "$tmp/c$i")" = "ok $i" ] && n=$((n + 1)); done
check_eq "12 concurrent sessions all answered" 12 $n
check "the session limit held: two rounds ($((t1 - t0)) ms)" test $((t1 - t0)) -ge 780 -a $((t1 - t0)) -lt 6000

# -- latency, side by side in this run
N=30
t0=$(ms); for _ in $(seq $N); do "$RSH" 127.0.0.1 true; done; t1=$(ms)
for _ in $(seq $N); do sh -c true; done; t2=$(ms)
rsh_us=$(( (t1 - t0) * 1000 / N )); sh_us=$(( (t2 - t1) * 1000 / N ))
diag "latency: vhpc-rsh 127.0.0.1 true ${rsh_us} us, sh -c true ${sh_us} us (mean of $N)"
check "vhpc-rsh round trip under 50 ms (${rsh_us} us)" test $rsh_us -lt 50000

# -- nothing left behind, then a clean shutdown over the control socket
sleep 0.2
check_eq "no session process lingers" "" "$(pgrep -P $gd)"
"${PU[@]}" shutdown; check_eq "shutdown request accepted" 0 $?
wait_for $gd 5; rc=$?
check_eq "guestd exited 0 after shutdown" 0 $rc
check "the control socket is gone" test ! -e "$tmp/ctl.sock"
done_testing
