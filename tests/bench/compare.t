#!/usr/bin/env bash
# timeout: 60
# vhpc bench compare on two hand-written results folders (tests/bench/data/
# bench-a and bench-b; the expected ratios are worked out below from their
# values), its JSON, and the errors for folders that are not results.
. "$(dirname "$0")/../lib.sh"

V=$BIN/vhpc
D=$VHPC_TOP/tests/bench/data
[ -x "$V" ] || { fail "vhpc is built (run make)"; done_testing; exit 1; }
command -v jq >/dev/null || skip_all "jq is not installed (Debian package jq)"
tmp=$(mktemp -d /tmp/vhpc-bench-cmp.XXXXXX)
at_exit rm -rf "$tmp"

out=$("$V" bench compare "$D/bench-a" "$D/bench-b" 2>&1)
check_eq "compare: exit 0" 0 "$?"
# stream 1K, a rate: native A 100 [90..110], B 100 [99..101]: 1.000, range
# 99/110 .. 101/90; guest A 50 [40..60], B 80 [75..85]: 1.600 [75/60..85/40],
# all above 1 and higher is better: better.  guest/native 0.5 -> 0.8.
check_match "stream: native same, guest 1.6x better" \
	'^TCP stream throughput 1K +Mbit/s +1\.000 \[0\.900\.\.1\.122\] same +1\.600 \[1\.250\.\.2\.125\] better +0\.500 -> 0\.800$' "$out"
# rr 1, a time: native 11 [10..12] -> 11: [11/12..11/10]; guest 21 [20..22]
# -> 31 [30..33]: 31/21 = 1.476 [30/22..33/20], a time that went up: worse.
check_match "rr: native same, guest 1.476x worse" \
	'^TCP rr round trip 1 +usec +1\.000 \[0\.917\.\.1\.100\] same +1\.476 \[1\.364\.\.1\.650\] worse +1\.909 -> 2\.818$' "$out"
check_match "metrics in one run only are counted" '# 2 metrics compared; 1 only in A, 1 only in B' "$out"
check_match "the machines' differences are named" '# differs: kernel: A Linux 6\.1\.0 x86_64, B Linux 6\.2\.0 x86_64' "$out"
check "settings both runs share are not" sh -c "! echo '$out' | grep -qE '# differs: (guests|ranks|iter|seconds|no_vmshm|native_btl):'"
# B measured with other settings: --iter and another rank count.
cp -r "$D/bench-a" "$D/bench-b" "$tmp/"
jq '.config.iter = {"n": 20000, "vol": 419430400} | .config.ranks = 4' "$D/bench-b/results.json" >"$tmp/bench-b/results.json"
out=$("$V" bench compare "$tmp/bench-a" "$tmp/bench-b" 2>&1)
check_match "other repetition counts (--iter) are named" '# differs: iter: A \(none\), B \{"n":20000,"vol":419430400\}' "$out"
check_match "another rank count is named" '# differs: ranks: A 2, B 4' "$out"

j=$("$V" bench compare --json "$D/bench-a" "$D/bench-b")
check_eq "--json: exit 0" 0 "$?"
check_eq "--json: guest ratio, range and change of stream 1K" "1.6 1.25 2.125 better" \
	"$(jq -r '.metrics[] | select(.key == "TCP stream/throughput/1024") | .guest | "\(.ratio) \(.lo) \(.hi) \(.change)"' <<<"$j")"
check_eq "--json: only_a and only_b" "whole run/wall/- TCP stream/throughput/65536" \
	"$(jq -r '"\(.only_a[0]) \(.only_b[0])"' <<<"$j")"
check_eq "a run against itself: every ratio 1, every change same" "1 same" \
	"$("$V" bench compare --json "$D/bench-a" "$D/bench-a" | jq -r '[.metrics[] | .native.ratio, .guest.ratio] | unique | .[]' | tr '\n' ' ')$("$V" bench compare --json "$D/bench-a" "$D/bench-a" | jq -r '[.metrics[] | .native.change, .guest.change] | unique | .[]')"

# ---- errors: exit 1 with the folder and the reason; usage errors exit 2
err_case() {  # DESCRIPTION EXPECTED_STATUS REGEX ARGS...
	local d=$1 st=$2 re=$3 out rc
	shift 3
	out=$("$V" bench compare "$@" 2>&1)
	rc=$?
	if [ "$rc" = "$st" ] && printf '%s' "$out" | grep -qE -- "$re"; then ok "$d"; else
		fail "$d"; diag "status $rc, output:" "$out"; fi
}
err_case "missing folder" 1 "A: $tmp/none: No such file or directory" "$tmp/none" "$D/bench-b"
mkdir "$tmp/empty"
err_case "folder without results.json" 1 "B: $tmp/empty: no results.json here" "$D/bench-a" "$tmp/empty"
mkdir "$tmp/junk" && printf '{"format": "vhpc-bench/1", "suite"' >"$tmp/junk/results.json"
err_case "results.json that is not JSON" 1 "B: $tmp/junk/results.json: not JSON" "$D/bench-a" "$tmp/junk"
mkdir "$tmp/other" && jq '.format = "something-else"' "$D/bench-a/results.json" >"$tmp/other/results.json"
err_case "JSON that is not vhpc bench's" 1 "not a vhpc bench results file" "$D/bench-a" "$tmp/other"
mkdir "$tmp/short" && jq '.metrics[0].guest.values = [1, 2]' "$D/bench-a/results.json" >"$tmp/short/results.json"
err_case "a metric with fewer values than repetitions" 1 \
	"A: $tmp/short/results.json: metrics\[0\] \(TCP stream/throughput/1024\): 2 guest values for 3 repetitions" "$tmp/short" "$D/bench-b"
mkdir "$tmp/mpi" && jq '.suite = "mpi"' "$D/bench-a/results.json" >"$tmp/mpi/results.json"
err_case "runs of different suites" 1 "is a net run and .* a mpi run: nothing to compare" "$D/bench-a" "$tmp/mpi"
# (Root reads files whatever their mode; a folder in its place cannot be read.)
mkdir -p "$tmp/unreadable/results.json"
err_case "results.json that cannot be read" 1 "A: cannot read $tmp/unreadable/results.json: Is a directory" "$tmp/unreadable" "$D/bench-b"
err_case "one folder" 2 "expected two results folders" "$D/bench-a"
err_case "three folders" 2 "got a third" "$D/bench-a" "$D/bench-b" "$D/bench-b"
err_case "unknown option" 2 "unknown option '--fast'" --fast "$D/bench-a" "$D/bench-b"

done_testing
