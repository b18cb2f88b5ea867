#!/usr/bin/env bash
# timeout: 60
# vhpc-netbench's peer mode on loopback (no MPI): a server, a client that
# measures stream, maerts and rr and stops it; a client that waits for a
# server starting late; a server that outlives hostile connections (bad
# magic, unknown test, a size over 16M, a header cut short); -idle; bad
# options named.  The figures are this machine's; only their shape is
# checked.
. "$(dirname "$0")/../lib.sh"

N=$BIN/vhpc-netbench
[ -x "$N" ] || { fail "vhpc-netbench is built (run make)"; done_testing; exit 1; }
tmp=$(mktemp -d /tmp/vhpc-netbench-peer.XXXXXX)
at_exit rm -rf "$tmp"

# serve NAME ARGS...: a server on a loopback port of the kernel's choice;
# sets spid and port (read from the line it prints).
serve() {
	local name=$1; shift
	"$N" -serve 127.0.0.1:0 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	spid=$!
	port=
	for _ in $(seq 50); do
		port=$(sed -n 's/^# vhpc-netbench: serving on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/$name.out")
		[ -n "$port" ] && break
		sleep 0.1
	done
}
# send HEX: those bytes on one connection, then hang up.
send() {
	exec 3<>/dev/tcp/127.0.0.1/$port || return
	printf "$(sed 's/../\\x&/g' <<<"$1")" >&3
	exec 3>&-
}

# -- a whole run ----------------------------------------------------------
serve s -idle 30
p=$port
"$N" -connect 127.0.0.1:$p -sizes 1K,64K -time 0.2 -stop stream maerts rr >"$tmp/c.out" 2>"$tmp/c.err"
check_eq "the client exits 0" 0 "$?"
wait $spid
check_eq "-stop ends the server with 0" 0 "$?"
c=$(cat "$tmp/c.out")
for t in stream maerts; do
	for s in 1024 65536; do
		check_match "$t $s: a throughput figure" "^vhpc-bench \{\"test\":\"$t\",\"size\":$s,\"value\":[0-9]+\.[0-9]+,\"unit\":\"Mbit/s\",\"bytes\":[1-9][0-9]*," "$c"
	done
done
check_match "rr: a round trip in usec" '^vhpc-bench \{"test":"rr","size":65536,"value":[0-9]+\.[0-9]+,"unit":"usec","transactions":[1-9]' "$c"
check_eq "six figures, in the order asked" "stream stream maerts maerts rr rr" \
	"$(sed -n 's/^vhpc-bench {"test":"\([a-z]*\)".*/\1/p' "$tmp/c.out" | tr '\n' ' ' | sed 's/ $//')"
check_match "the server says where it serves" "serving on 127.0.0.1:$p" "$(cat "$tmp/s.out")"
check_eq "the server reported no error" "" "$(cat "$tmp/s.err")"

# -- the client waits for a server that starts late -----------------------
serve probe -idle 5
p=$port
"$N" -connect 127.0.0.1:$p -sizes 1 -time 0.05 -stop rr >/dev/null
wait $spid
( sleep 1; exec "$N" -serve 127.0.0.1:$p -idle 20 ) >/dev/null 2>&1 &
spid=$!
"$N" -connect 127.0.0.1:$p -wait 15 -sizes 1 -time 0.05 -stop rr >"$tmp/w.out" 2>"$tmp/w.err"
check_eq "-wait: the client waits for a server starting 1 s late" 0 "$?"
wait $spid
"$N" -connect 127.0.0.1:$p -wait 0.5 -sizes 1 -time 0.05 rr >/dev/null 2>"$tmp/nw.err"
check_eq "no server: the client exits 1" 1 "$?"
check_match "and says where it tried" "connect to 127.0.0.1:$p: Connection refused" "$(cat "$tmp/nw.err")"

# -- hostile connections cost that connection only ------------------------
# The header: magic "bnhv" (0x76686e62, little-endian), test, size.
serve h -idle 20
p=$port
send 6761726261676521676172626167652121                # bad magic
send 626e6876                                          # cut short
send 626e6876090000000100000000000000                  # test 9
send 626e6876010000000000000001000000                  # stream of 2^32 bytes
send 626e6876020000000000000000000000                  # rr of size 0
"$N" -connect 127.0.0.1:$p -sizes 1 -time 0.05 -stop rr >/dev/null 2>"$tmp/h2.err"
check_eq "after them a real client still gets served" 0 "$?"
wait $spid
check_eq "and -stop still ends the server with 0" 0 "$?"
h=$(cat "$tmp/h.err")
check_match "bad magic: refused by name" "a connection refused: not a vhpc-netbench test header \(magic 0x62726167\)" "$h"
check_match "a cut header: refused" "a connection refused: the test header was cut short \\(16 bytes expected\\)" "$h"
check_match "an unknown test: refused" "a connection refused: unknown test 9 in the header" "$h"
check_match "a size over 16M: refused" "a connection refused: stream: size 4294967296 is outside 1..16M" "$h"
check_match "a size of 0: refused" "a connection refused: rr: size 0 is outside 1..16M" "$h"

# -- -idle ----------------------------------------------------------------
t0=$(date +%s)
timeout 20 "$N" -serve 127.0.0.1:0 -idle 1 >/dev/null 2>"$tmp/i.err"
check_eq "-idle 1: the server ends with 1 when nobody comes" 1 "$?"
check "and within a few seconds" test $(( $(date +%s) - t0 )) -le 5
check_match "and says why" "nobody connected within 1 s; the server ends" "$(cat "$tmp/i.err")"

# -- bad options ----------------------------------------------------------
bad() {  # DESCRIPTION PATTERN ARGS...
	local d=$1 pat=$2; shift 2
	"$N" "$@" >/dev/null 2>"$tmp/b.err"
	check_eq "$d: exit 2" 2 "$?"
	check_match "$d: named" "$pat" "$(head -n 1 "$tmp/b.err")"
}
bad "-serve without a port" "-serve: expected IPV4-ADDRESS:PORT" -serve 127.0.0.1
bad "-connect to a name" "-connect: expected IPV4-ADDRESS:PORT" -connect localhost:1
bad "-serve and -connect" "one program is either the server or the client" -serve 127.0.0.1:1 -connect 127.0.0.1:1
bad "tests given to the server" "-serve: the client chooses" -serve 127.0.0.1:1 stream
bad "-stop without -connect" "-wait and -stop are for -connect" -stop
bad "-idle without -serve" "-idle is for -serve" -connect 127.0.0.1:1 -idle 3
bad "an unknown test" "unknown test 'tcp_crr'" -connect 127.0.0.1:1 tcp_crr
bad "-time 0" "-time: expected seconds from 0.001 to 3600" -connect 127.0.0.1:1 -time 0
done_testing
