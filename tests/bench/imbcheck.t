#!/usr/bin/env bash
# timeout: 30
# vhpc-imbcheck on hand-written IMB-MPI1 output (IMB 2021 and IMB 3.2 style)
# and on damaged copies: one message per violation, exit 1; unreadable or
# non-IMB input exits 2.
. "$(dirname "$0")/../lib.sh"

CHK=$BIN/vhpc-imbcheck
D=$VHPC_TOP/tests/bench/data
[ -x "$CHK" ] || { fail "vhpc-imbcheck is built (run make)"; done_testing; exit 1; }
tmp=$(mktemp -d /tmp/vhpc-imbcheck-t.XXXXXX)
at_exit rm -rf "$tmp"

out=$("$CHK" "$D/imb-sample.txt" 2>&1)
check_eq "IMB 2021 sample is sane" "0 $D/imb-sample.txt: 12 tables, 238 rows: sane" "$? $out"
out=$("$CHK" "$D/imb-v3-sample.txt" 2>&1)
check_eq "IMB 3.2 sample (MB = 2^20, startup noise) is sane" "0 $D/imb-v3-sample.txt: 2 tables, 48 rows: sane" "$? $out"
"$CHK" -q -mb 1e6 "$D/imb-v3-sample.txt" >/dev/null 2>&1
check_eq "IMB 3.2 sample read with 10^6 bytes per MB fails" 1 "$?"
check "vhpc-mpibench sample is sane" "$CHK" -q "$D/mpibench-sample.txt"
check "reads stdin" sh -c "\"$CHK\" -q - <\"$D/imb-sample.txt\""

out=$("$CHK" -expect Alltoall -expect Sendrecv@16 -expect PingPong@2 "$D/imb-sample.txt" 2>&1)
check_eq "-expect: missing tables are problems" 1 "$?"
check_match "-expect: names the missing table" "no table Alltoall found" "$out"
check_match "-expect: names the missing process count" "no table Sendrecv with #processes = 16 found" "$out"

# Damage: a bandwidth (line 65: PingPong 4 MiB), a repetition count (line 62:
# PingPong 512 KiB) and a t_max (line 230: Allreduce at 2 processes, 32 bytes).
sed -e '65s/8904.66/9904.66/' -e '62s/ 80 / 90 /' -e '230s/^\( *32 *1000 *[0-9.]*\) *[0-9.]*/\1         0.01/' \
	"$D/imb-sample.txt" >"$tmp/damaged.txt"
out=$("$CHK" "$tmp/damaged.txt" 2>&1)
check_eq "damaged copy: exit 1" 1 "$?"
check_match "bandwidth violation with file:line" \
	"damaged.txt:65: PingPong \(#processes = 2\): 4194304 bytes: Mbytes/sec 9904.66 does not match 1 x 4194304 bytes / t_max 471.02 usec = 8904.73" "$out"
check_match "repetition violation" \
	"damaged.txt:62: PingPong .*524288 bytes: 90 repetitions; the rule .* gives 80" "$out"
check_match "time order violation" "damaged.txt:230: Allreduce .*32 bytes: t_min .* <= t_avg .* <= t_max 0.01 does not hold" "$out"
check_match "summary counts them" "3 problem\(s\) in 12 tables, 238 rows" "$out"
"$CHK" -q -fewer-reps-ok "$tmp/damaged.txt" 2>"$tmp/fewer.err" >/dev/null
check_eq "-fewer-reps-ok does not excuse more repetitions than the rule" 3 "$(grep -c . "$tmp/fewer.err")"

printf 'this is not\nIMB output\n' >"$tmp/garbage.txt"
out=$("$CHK" "$tmp/garbage.txt" 2>&1)
check_eq "garbage: exit 2 with a reason" "2 vhpc-imbcheck: $tmp/garbage.txt: no IMB benchmark table found (no '# Benchmarking' line)" "$? $out"
head -c 3000 /dev/urandom >"$tmp/random.bin"
"$CHK" "$tmp/random.bin" >/dev/null 2>&1
check_eq "random bytes: exit 2" 2 "$?"
head -45 "$D/imb-sample.txt" >"$tmp/cut.txt"
printf '        32768         10' >>"$tmp/cut.txt"
out=$("$CHK" "$tmp/cut.txt" 2>&1)
check_match "truncated row: exit 2, file:line" "^2 vhpc-imbcheck: $tmp/cut.txt:46: PingPong: row has 2 values, its header has 4 columns" "$? $out"
out=$("$CHK" "$tmp/nope.txt" 2>&1)
check_match "missing file: exit 2" "^2 vhpc-imbcheck: cannot open $tmp/nope.txt" "$? $out"
out=$("$CHK" -mb 3 "$D/imb-sample.txt" 2>&1)
check_match "bad -mb: exit 2" "^2 .*-mb '3': expected auto, 1e6 or 1048576" "$? $out"
out=$("$CHK" -iter x "$D/imb-sample.txt" 2>&1)
check_match "bad -iter: exit 2" "^2 .*-iter 'x'" "$? $out"
out=$("$CHK" -bogus 2>&1)
check_match "unknown option: exit 2" "^2 .*unknown option '-bogus'" "$? $out"
out=$("$CHK" 2>&1)
check_match "no file: exit 2" "^2 .*no input file" "$? $out"

out=$("$CHK" -dump "$D/imb-sample.txt")
check_match "-dump shows tables and rows" "table PingPong nprocs=2 waiting=2 line=37 columns=#bytes,#repetitions,t\[usec\],Mbytes/sec" "$out"
check_match "-dump rows" "  4194304 10 471.02 8904.66" "$out"
if command -v python3 >/dev/null; then
	out=$("$CHK" -q -json "$D/imb-sample.txt" | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = [x for x in d["tables"] if x["name"] == "Sendrecv" and x["nprocs"] == 4][0]
r = t["rows"][-1]
print(len(d["tables"]), t["bw_factor"], r["bytes"], r["reps"], r["t_max_usec"] > 0)')
	check_eq "-json is valid JSON with the tables" "12 2 4194304 10 True" "$out"
else
	skip "python3 not installed to read the JSON"
fi

done_testing
