#!/usr/bin/env bash
# timeout: 300
# `make demo`, the README's first command, at a small scale (DEMO_ARGS:
# one repetition, sizes up to 16 bytes): it must fit the machine (never
# more ranks than cores, a core each, one rank per guest, so PingPong goes
# from one guest to the other) and show native beside guests in IMB's
# tables with the ratio, naming the cores, ranks per guest and transport.
# Until issue 35 it ran 4 ranks in 2 guests on 2 cores, guests only.
# On one core it refuses, saying why.  Numbers are not judged, only that
# both sides measured them and the ratio is theirs.
. "$(dirname "$0")/../lib.sh"
export VHPC_STATE_DIR=${VHPC_TEST_STATE_DIR:-$VHPC_TOP/$B/state}

need_root
[ -x "$BIN/vhpc" ] && [ -x "$BIN/vhpc-mpibench" ] || { fail "vhpc and vhpc-mpibench are built (run make)"; done_testing; exit 1; }
command -v runc >/dev/null || skip_all "runc is not installed: no container guests"
command -v jq >/dev/null || skip_all "jq is not installed (Debian package jq)"
command -v hwloc-calc >/dev/null || skip_all "hwloc-calc is not installed (Debian package hwloc)"
cores=$(hwloc-calc --number-of core "$(hwloc-bind --get)")
[ "$cores" -ge 2 ] || skip_all "this machine has $cores core: the demo refuses to run (checked where there are two)"
tmp=$(mktemp -d /tmp/vhpc-demo.XXXXXX)
at_exit rm -rf "$tmp"
netns_before=$(ip netns list | sort)

# The Makefile's target, as the README gives it (its build is up to date).
make -s -C "$VHPC_TOP" B="$B" demo DEMO_ARGS="--reps 1 --msglog 0:4 --out $tmp/d" >"$tmp/out" 2>"$tmp/err"
rc=$?
check_eq "make demo: exits 0" 0 "$rc"
[ $rc -eq 0 ] || diag "$(tail -n 20 "$tmp/err")"
out=$(cat "$tmp/out")

# -- it fits the machine ----------------------------------------------------
ranks=$(sed -n 's/^# cores: [0-9]*; ranks: \([0-9]*\),.*/\1/p' "$tmp/out")
check_match "the cores are named (hwloc's count: $cores)" "^# cores: $cores; ranks: " "$out"
check "ranks ($ranks) are no more than cores ($cores)" test "${ranks:-99}" -le "$cores"
check_match "one rank per guest, two guests" "^# guests: vhpc run -N 2 -n 2 \(container guests\), 1 rank per guest$" "$out"
check_match "natively a core each" "^# native: mpirun -np 2 on this host \(btl self,vader,tcp\), a core each$" "$out"
check_eq "vhpc run gave the guests different cores" "2" \
	"$(sed -n 's/^vhpc:   g[01]: cpus \([0-9,-]*\),.*/\1/p' "$tmp/d/raw/guest-1.err" | sort -u | wc -l)"
check_match "the transport between the guests is vmshm, by its counters: rank 0 in g0, rank 1 in g1" \
	"^# between the guests: vmshm, shared memory between guests \(its counters: rank 0 in g0 sent rank 1 in g1 [0-9.]+ MB through it in 1 of 1 guest runs\)$" "$out"
check "the guests' raw stderr holds those counters" grep -q '^\[vmshm g0:[0-9]* rank 0\] vmshm-stats: peer 1 ' "$tmp/d/raw/guest-1.err"

# -- IMB's tables, both sides and the ratio --------------------------------
for b in PingPong Sendrecv; do
	check_match "$b: an IMB section" "# Benchmarking $b
# #processes = 2
" "$out"
done
check_eq "no other benchmark ran" "PingPong Sendrecv" "$(sed -n 's/^# Benchmarking //p' "$tmp/out" | paste -sd' ')"
check_eq "IMB's header with native, guests and ratio columns, per section" "2" \
	"$(grep -cE '^ +#bytes +#repetitions +native +guests +ratio +native +guests +ratio$' "$tmp/out")"
check_eq "t[usec] and Mbytes/sec over the columns" "2 2" \
	"$(grep -cE '^#.*t(_max)?\[usec\].*Mbytes/sec' "$tmp/out") $(grep -cE '^#.*-- (t\[usec\]|t_max\[usec\]) --' "$tmp/out")"
# Rows: bytes reps native guests ratio native guests ratio; sizes 0..16.
rows=$(awk '/^# Benchmarking PingPong/{p=1} /^# Benchmarking Sendrecv/{p=0} p && $1 ~ /^[0-9]+$/' "$tmp/out")
check_eq "PingPong: a row per size (0 1 2 4 8 16)" "0 1 2 4 8 16" "$(awk '{print $1}' <<<"$rows" | paste -sd' ')"
check_eq "PingPong: native and guest times measured at every size" "" \
	"$(awk '!($3 > 0 && $4 > 0) {print}' <<<"$rows")"
# The ratio is results.json's guest/native of the medians for that size.
bad=""
while read -r bytes reps nt gt ratio rest; do
	want=$(jq -r --arg k "PingPong np=2/t/$bytes" '.metrics[] | select(.key == $k) | .ratio.median' "$tmp/d/results.json")
	[ "$(printf '%.3f' "$want")" = "$ratio" ] || bad="$bad $bytes: $ratio vs $want;"
	[ "$reps" = 10000 ] || bad="$bad $bytes: $reps repetitions;"
done <<<"$rows"
check_eq "PingPong: each ratio is guests/native of results.json; the demo's 10000 repetitions (--iter)" "" "$bad"
check_eq "PingPong: bandwidth of both sides and its ratio above 0 bytes" "" \
	"$(awk '$1 > 0 && !($6 > 0 && $7 > 0 && $8 > 0) {print}' <<<"$rows")"
check_match "the last line names the results folder" "^# results: $tmp/d \(results.json, results.txt, imb.txt, plot.png, ratio.png, raw/\)$" "$out"
check "imb.txt holds the same tables" grep -qE '^ +#bytes +#repetitions +native +guests' "$tmp/d/imb.txt"

# -- one core: refused, not oversubscribed ---------------------------------
one=$(taskset -c 0 env B="$B" "$VHPC_TOP/bench/scripts/demo" --out "$tmp/one" 2>&1)
check_eq "on one core the demo refuses (exit 2)" 2 "$?"
check_match "... saying why" "this machine has 1 core; the demo's two ranks need a core each" "$one"
check "... and runs nothing" test ! -e "$tmp/one"

check_eq "no network namespace left behind" "$netns_before" "$(ip netns list | sort)"
check_eq "no bench program outlives the demo" "" "$(pgrep -x vhpc-mpibench)"
done_testing
