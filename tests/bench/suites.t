#!/usr/bin/env bash
# timeout: 300
# vhpc bench end to end on this machine (container guests): a short run of
# each suite (tiny sizes and durations, 1-2 repetitions) whose JSON, table
# and PNGs (plot.png, ratio.png and their data) are checked; --iter; --imb
# with an IMB-compatible binary; the default results folder; a failing guest
# run; SIGTERM during a guest run; bad options.  Numbers are not judged (they are this machine's), only that
# they were measured, are consistent and end up where they belong.
. "$(dirname "$0")/../lib.sh"
# The tests' image store, never the machine's (/var/lib/vhpc): the mpi
# suite builds the guests' image when it finds none.
export VHPC_STATE_DIR=${VHPC_TEST_STATE_DIR:-$VHPC_TOP/$B/state}

need_root
V=$BIN/vhpc
[ -x "$V" ] && [ -x "$BIN/vhpc-sysbench" ] && [ -x "$BIN/vhpc-netbench" ] ||
	{ fail "vhpc and the bench programs are built (run make)"; done_testing; exit 1; }
command -v jq >/dev/null || skip_all "jq is not installed (Debian package jq)"
command -v gnuplot >/dev/null || skip_all "gnuplot is not installed (Debian package gnuplot-nox)"
command -v runc >/dev/null || skip_all "runc is not installed: no container guests"
tmp=$(mktemp -d /tmp/vhpc-bench-suites.XXXXXX)
at_exit rm -rf "$tmp"

# bench DESCRIPTION OUTDIR ARGS...: runs vhpc bench, keeps its output
bench() {
	local d=$1 out=$2 rc
	shift 2
	"$V" bench --out "$out" "$@" >"$out.stdout" 2>"$out.stderr"
	rc=$?
	check_eq "$d: exit 0" 0 "$rc"
	[ $rc -eq 0 ] || diag "$(tail -20 "$out.stderr")"
	return $rc
}

# results DIR SUITE REPS NMETRICS: the folder's JSON, table and plot
results() {
	local dir=$1 suite=$2 reps=$3 n=$4 j=$1/results.json
	check_eq "$suite: results.json: format, suite, repetitions, metric count" \
		"vhpc-bench/1 $suite $reps $n" \
		"$(jq -r '"\(.format) \(.suite) \(.config.reps) \(.metrics | length)"' "$j" 2>&1)"
	check_eq "$suite: machine description (hwloc, kernel, Open MPI, driver)" "true true true container" \
		"$(jq -r '.machine | "\(.hwloc | test("[0-9]+ cores")) \(.kernel | startswith("Linux")) \(.versions.openmpi | test("Open MPI")) \(.driver)"' "$j" 2>&1)"
	# the machine's state: a cache line's round trip before each repetition,
	# between two different CPUs, a plausible time (0.01-100 us), and its
	# median in the table
	check_eq "$suite: machine state: one round trip per repetition, two CPUs, 10 ns-100 us" "true" \
		"$(jq -r --argjson r "$reps" '.machine_state | (.values | length) == $r and .n == $r
			and (.cpus | length) == 2 and .cpus[0] != .cpus[1]
			and all(.values[]; . > 10 and . < 100000) and .min <= .median and .median <= .max' "$j" 2>&1)"
	check_match "$suite: the table gives the state's median" \
		"^# machine state: a cache line's round trip CPU [0-9]+<->[0-9]+, median $(jq -r '.machine_state.median | round' "$j") ns" \
		"$(cat "$dir/results.txt")"
	check_eq "$suite: every metric measured on both sides in every repetition" "[]" \
		"$(jq -c --argjson r "$reps" '[.metrics[] | select(.native.n != $r or .guest.n != $r or (.native.values | length) != $r) | .key]' "$j" 2>&1)"
	# ratio = guest median / native median, positive, wherever no value is 0
	# (a 0.00 usec Allreduce of 0 bytes has none)
	check_eq "$suite: ratios positive and equal to guest/native of the medians" "[]" \
		"$(jq -c '[.metrics[] | select(.native.min > 0 and .guest.min > 0) | select(.ratio == null or .ratio.median <= 0 or .ratio.best <= 0
			or ((.ratio.median - .guest.median / .native.median) | if . < 0 then -. else . end) > 1e-9) | .key]' "$j" 2>&1)"
	for png in plot ratio; do
		check_eq "$suite: $png.png is a PNG" "89504e470d0a1a0a" "$(head -c 8 "$dir/$png.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')"
		check "$suite: $png.png is a real picture (> 5 KB)" test "$(stat -c %s "$dir/$png.png" 2>/dev/null || echo 0)" -gt 5000
		check "$suite: $png.gp redraws it" grep -q "set output \"$png.png\"" "$dir/$png.gp"
	done
	check_match "$suite: stdout lists the folder's files, ratio.png too" \
		"^# results: $dir \(results.json, results.txt, plot.png, ratio.png, raw/\)$" "$(cat "$dir.stdout")"
	check "$suite: results.txt and stdout hold the table" \
		grep -q "ratio guest/native" "$dir/results.txt" "$dir.stdout"
	check "$suite: raw outputs of both sides kept" test -s "$(ls "$dir"/raw/native*-1.out | head -1)" -a \
		-s "$(ls "$dir"/raw/guest*-1.out | head -1)"
}

metric() {  # DIR KEY FIELD -> value
	jq -r --arg k "$2" ".metrics[] | select(.key == \$k) | $3" "$1/results.json"
}

SECONDS=0
# ---- mpi: vhpc-mpibench, 3 sizes, 2 repetitions, --iter
if bench "mpi" "$tmp/mpi" --suite mpi --reps 2 --sizes 0,1K,64K --iter 2000,16M; then
	# PingPong, Sendrecv, Exchange: t at 3 sizes, bw at 2; Allreduce and
	# Bcast t at 3; wall
	results "$tmp/mpi" mpi 2 22
	check_eq "mpi: the benchmarks asked for" \
		"Allreduce np=2,Bcast np=2,Exchange np=2,PingPong np=2,Sendrecv np=2,whole run" \
		"$(jq -r '[.metrics[].group] | unique | join(",")' "$tmp/mpi/results.json")"
	check_eq "mpi: Bcast's t at every size, no bandwidth (a collective)" "Bcast np=2/t/0 Bcast np=2/t/1024 Bcast np=2/t/65536" \
		"$(jq -r '[.metrics[].key | select(startswith("Bcast"))] | join(" ")' "$tmp/mpi/results.json")"
	check_match "mpi: Bcast in the table" "^Bcast np=2 t 64K +usec " "$(cat "$tmp/mpi/results.txt")"
	# The value in the JSON is the one the benchmark printed (t; Bcast: t_max).
	for side in native guest; do
		printed=$(awk '/Benchmarking PingPong/{p=1} p && $1 == 1024 {print $3; exit}' "$tmp/mpi/raw/$side-2.out")
		check_eq "mpi: $side PingPong 1K of repetition 2 as printed" "$printed" \
			"$(metric "$tmp/mpi" "PingPong np=2/t/1024" ".${side}.values[1]" | awk '{printf "%.2f", $1}')"
		printed=$(awk '/Benchmarking Bcast/{p=1} p && $1 == 65536 {print $4; exit}' "$tmp/mpi/raw/$side-1.out")
		check_eq "mpi: $side Bcast 64K t_max of repetition 1 as printed" "$printed" \
			"$(metric "$tmp/mpi" "Bcast np=2/t/65536" ".${side}.values[0]" | awk '{printf "%.2f", $1}')"
	done
	# --iter 2000,16M: min(2000, 16M / size) repetitions, on both sides.
	for side in native guest; do
		check_eq "mpi --iter: $side ran 2000, 2000 and 256 repetitions (PingPong, Bcast)" "2000 2000 256 2000 2000 256" \
			"$(awk '/Benchmarking (PingPong|Bcast)/{p=1} /Benchmarking (Sendrecv|Exchange|Allreduce)/{p=0}
				p && $1 ~ /^[0-9]+$/ {printf "%s%s", s, $2; s=" "}' "$tmp/mpi/raw/$side-1.out")"
		check_match "mpi --iter: the $side command passes -iter" "-iter 2000,16M PingPong Sendrecv Exchange Allreduce Bcast" \
			"$(jq -r ".${side}.commands[0]" "$tmp/mpi/results.json")"
	done
	check_eq "mpi --iter: recorded in results.json" '{"n":2000,"vol":16777216}' "$(jq -c .config.iter "$tmp/mpi/results.json")"
	check_match "mpi --iter: in the header of results.txt" "^# --iter 2000,16M: min\(2000, 16M / size\) repetitions per size$" \
		"$(cat "$tmp/mpi/results.txt")"
	# ratio.png's data: the ratios of results.json, one line per benchmark.
	check_eq "mpi: ratio.png's lines: t of the five benchmarks, bw of three" \
		"PingPong np=2 t,Sendrecv np=2 t,Exchange np=2 t,Allreduce np=2 t,Bcast np=2 t,PingPong np=2 bw,Sendrecv np=2 bw,Exchange np=2 bw" \
		"$(cd "$tmp/mpi" && for f in ratio-time-*.dat ratio-rate-*.dat; do sed -n '1s/^# \(.*\) (.*/\1/p' "$f"; done | paste -sd,)"
	f=$(grep -l '^# Bcast np=2 t ' "$tmp/mpi"/ratio-time-*.dat)
	want=$(metric "$tmp/mpi" "Bcast np=2/t/65536" '.ratio | "\(.median) \(.pair_min) \(.pair_max)"' |
		awk '$1 > 0 {printf "%.6f %.6f %.6f", $1, $2, $3}')
	check_eq "mpi: ratio.png's Bcast 64K point: ratio of the medians and its range, as in results.json" \
		"${want:-(no ratio in results.json)}" "$(awk '$1 == 65536 {printf "%.6f %.6f %.6f", $2, $3, $4}' "$f")"
	check "mpi: ratio.png leaves out the whole run's wall time" test -z "$(grep -l 'whole run' "$tmp/mpi"/ratio*)"
	check_match "mpi: guest ranks ran in guests" "vhpc: job [0-9a-f]+: 2 guests" "$(cat "$tmp/mpi/raw/guest-1.err")"
	check_match "mpi: the plot has latency and bandwidth against size" \
		'set title "latency.*set title "bandwidth' "$(tr '\n' ' ' <"$tmp/mpi/plot.gp")"
	# A run against itself: B/A 1 everywhere, all within noise.
	check_eq "compare a run with itself: all the same" "same" \
		"$("$V" bench compare --json "$tmp/mpi" "$tmp/mpi" | jq -r '[.metrics[] | .native.change, .guest.change | select(. != null)] | unique | join(",")')"
fi

# ---- mpi --no-single-copy: vmshm between the guests, without their pod
if bench "mpi --no-single-copy" "$tmp/nsc" --suite mpi --reps 1 --sizes 1K,1M --benchmarks PingPong --table imb \
	--no-single-copy; then
	check_eq "mpi --no-single-copy: the guests' run is vhpc run --no-single-copy" 1 \
		"$(jq -r '[.. | objects | .commands? // empty | .[] | select(test("/vhpc run .* --no-single-copy -x OMPI_MCA_btl_vmshm_stats=1 -- "))] | length' "$tmp/nsc/results.json")"
	check_eq "mpi --no-single-copy: recorded with the run" true "$(jq -r .config.no_single_copy "$tmp/nsc/results.json")"
	check_match "mpi --no-single-copy: vmshm still carried the pair, and the table says it had no single copy" \
		"^# between the guests: vmshm, shared memory between guests, without the single copy \(--no-single-copy\) \(its counters: rank 0 in g0 sent rank 1 in g1 [0-9.]+ MB" \
		"$(cat "$tmp/nsc.stdout")"
	check_match "mpi --no-single-copy: compared with the default run, the difference is named" \
		"^# differs: no_single_copy: A false, B true" "$("$V" bench compare "$tmp/mpi" "$tmp/nsc" 2>&1)"
fi

# ---- mpi with --imb: an IMB-compatible binary goes into its own image
# (built in a state folder of this test's, so the shared store stays as it was)
mkdir -p "$tmp/imbstate"
if VHPC_STATE_DIR=$tmp/imbstate bench "mpi --imb" "$tmp/imb" --suite mpi --imb "$BIN/vhpc-mpibench" --reps 1 --sizes 1K \
	--native-env VHPC_BENCH_T=a=b; then
	results "$tmp/imb" mpi 1 9
	check_eq "--native-env: the native mpirun passes it on, the guests' run does not" "1 0" \
		"$(jq -r '[(.native.commands | map(select(test(" -x VHPC_BENCH_T=a=b "))) | length),
			   (.guest.commands | map(select(test("VHPC_BENCH_T"))) | length)] | join(" ")' "$tmp/imb/results.json")"
	check_eq "--native-env: kept with the results" "VHPC_BENCH_T=a=b" "$(jq -r .config.native_env "$tmp/imb/results.json")"
	check_match "--imb: without --iter, IMB's own repetition rule" "^# no --iter, the programs' default: min\(1000, 40M / size\)" \
		"$(cat "$tmp/imb/results.txt")"
	check_eq "--imb: without --iter, no -iter or -time" "null" \
		"$(jq -c '.config.iter // ([.native.commands[], .guest.commands[]] | map(select(test(" -iter | -time "))) | first)' "$tmp/imb/results.json")"
	check_match "--imb: its image was built (or found built) from that YAML" "bench-imb-[0-9a-f]+" \
		"$(cat "$tmp/imb/raw/image-build.out" "$tmp/imb/raw/image-build.err")"
	check_match "--imb: the image YAML copies the binary to a fixed path" "/usr/local/bin/IMB-MPI1: $BIN/vhpc-mpibench" \
		"$(cat "$tmp/imb/image-imb.yaml")"
	check_match "--imb: guests ran it from that image" "image bench-imb-[0-9a-f]+ " "$(cat "$tmp/imb/raw/guest-1.err")"
	check_eq "--imb: container guests' image leaves out the kvm parts" "" "$(grep '^kvm:' "$tmp/imb/image-imb.yaml")"
fi

# ---- net: guest to guest against loopback
if bench "net" "$tmp/net" --suite net --reps 2 --sizes 1,4K --time 0.05; then
	results "$tmp/net" net 2 5
	check_match "net: native ranks share one network namespace (loopback)" "one network namespace" \
		"$(cat "$tmp/net/raw/native-1.out")"
	check_match "net: guest ranks are in two (the job network)" "rank 1 -> rank 0 at 10\.[0-9.]+:[0-9]+ \(two network namespaces\)" \
		"$(cat "$tmp/net/raw/guest-1.out")"
	check_eq "net: stream and rr at each size" "TCP rr/round trip/1 TCP rr/round trip/4096 TCP stream/throughput/1 TCP stream/throughput/4096" \
		"$(jq -r '[.metrics[].key | select(startswith("TCP"))] | sort | join(" ")' "$tmp/net/results.json")"
fi

# ---- mem: two sizes, each a pair of runs
if bench "mem" "$tmp/mem" --suite mem --reps 2 --sizes 16M,32M; then
	results "$tmp/mem" mem 2 8
	check_eq "mem: touch per GiB and start-up at each size" \
		"memset/touch/16777216 memset/touch/33554432 start/memory touched/16777216 start/memory touched/33554432 start/program running/16777216 start/program running/33554432" \
		"$(jq -r '[.metrics[].key | select(startswith("whole") | not)] | sort | join(" ")' "$tmp/mem/results.json")"
	check_eq "mem: the guest had the size plus 256M" "--mem 272M" \
		"$(jq -r '.guest.commands[0]' "$tmp/mem/results.json" | grep -o -- '--mem [0-9]*M')"
	check_eq "mem: memory is touched after the program starts, on both sides" "true" \
		"$(jq '[.metrics[] | select(.key == "start/memory touched/33554432")][0] as $t |
			[.metrics[] | select(.key == "start/program running/33554432")][0] as $r |
			$t.native.median > $r.native.median and $t.guest.median > $r.guest.median' "$tmp/mem/results.json")"
fi

# ---- sys, into the default folder under $VHPC_STATE_DIR
mkdir -p "$tmp/state"
VHPC_STATE_DIR=$tmp/state "$V" bench --suite sys --reps 1 --time 0.05 >"$tmp/sys.stdout" 2>"$tmp/sys.stderr"
check_eq "sys: exit 0" 0 "$?"
sysdir=$(ls -d "$tmp"/state/bench/*-sys 2>/dev/null | head -1)
check "sys: results in \$VHPC_STATE_DIR/bench/TIME-sys" test -n "$sysdir"
if [ -n "$sysdir" ]; then
	cp "$tmp/sys.stdout" "$sysdir.stdout"
	ranks=$(jq .config.ranks "$sysdir/results.json")
	results "$sysdir" sys 1 $(( ranks > 1 ? 9 : 5 ))
	check_match "sys: the guest had as many vCPUs as copies" "host g0, CPUs [0-9,-]+" "$(cat "$sysdir/raw/guest-1.out")"
	check_eq "sys: UnixBench's four tests" "Pipe Throughput,Pipe-based Context Switching,Process Creation,System Call Overhead" \
		"$(jq -r '[.metrics[].group | select(. != "whole run")] | unique | join(",")' "$sysdir/results.json")"
	check_match "sys: the plot draws bars" "histogram" "$(cat "$sysdir/plot.gp")"
	check_match "sys: so does ratio.png, with error bars" "histogram errorbars" "$(cat "$sysdir/ratio.gp")"
	check_eq "sys: ratio.png's bars: every test, not the wall time" "$(( ranks > 1 ? 8 : 4 ))" \
		"$(grep -c '^"' "$sysdir/ratio-rate.dat")"
	check_match "sys: stdout names the folder" "# results: $sysdir " "$(cat "$tmp/sys.stdout")"
fi
diag "suite runs took ${SECONDS}s"

# ---- a guest run that fails: named, with its output, and no results
"$V" bench --out "$tmp/fail" --suite mpi --image no-such-image --reps 1 --sizes 1K >"$tmp/fail.out" 2>&1
rc=$?
check_eq "failing guest run: exit 1" 1 "$rc"
check_match "failing guest run: says which run and how" "guest run 1 failed with exit status 125" "$(cat "$tmp/fail.out")"
check_match "failing guest run: shows vhpc run's reason" "no-such-image" "$(cat "$tmp/fail.out")"
check_match "failing guest run: points at its output" "its output: $tmp/fail/raw/guest-1.out" "$(cat "$tmp/fail.out")"
check "failing guest run: no results.json" test ! -e "$tmp/fail/results.json"

# ---- SIGTERM while guests run: passed to vhpc run, which removes them
"$V" bench --out "$tmp/int" --suite net --reps 3 --sizes 1 --time 1 >"$tmp/int.out" 2>&1 &
pid=$!
at_exit kill $pid
for _ in $(seq 300); do grep -q "ready in" "$tmp/int/raw/guest-1.err" 2>/dev/null && break; sleep 0.1; done
job=$(sed -n 's/^vhpc: job \([0-9a-f]*\):.*/\1/p' "$tmp/int/raw/guest-1.err" 2>/dev/null | head -1)
kill -TERM $pid
wait $pid
rc=$?
check_eq "SIGTERM during a guest run: exit 143 (128 + 15)" 143 "$rc"
check_match "SIGTERM: says it was interrupted" "interrupted \(signal 15\) during the guest run 1" "$(cat "$tmp/int.out")"
check "SIGTERM: the guest job was found" test -n "$job"
check_eq "SIGTERM: the job's runtime folder, network namespaces and containers are gone" "" \
	"$(ls -d "${VHPC_RUN_DIR:-/run/vhpc}/jobs/$job" 2>/dev/null; ip netns list | grep -F "$job"; runc --root "${VHPC_RUN_DIR:-/run/vhpc}/runc" list -q 2>/dev/null | grep -F "$job")"
check "SIGTERM: no results.json" test ! -e "$tmp/int/results.json"

# ---- bad options: exit 2 with the reason, before anything runs
bad() {  # DESCRIPTION REGEX ARGS...
	local d=$1 re=$2 out rc
	shift 2
	out=$("$V" bench "$@" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && printf '%s' "$out" | grep -qE -- "$re"; then ok "bad options: $d"; else
		fail "bad options: $d"; diag "status $rc:" "$out"; fi
}
bad "unknown suite" "--suite: expected mpi, net, mem or sys, got 'gpu'" --suite gpu
bad "zero repetitions" "--reps: expected 1\.\.1000, got '0'" --reps 0
bad "net with 3 ranks" "the net suite runs exactly 2 ranks" --suite net --ranks 3 --out "$tmp/b1"
bad "sys in 2 guests" "the sys suite runs in one guest" --suite sys --guests 2 --out "$tmp/b2"
bad "sys with sizes" "the sys suite has no sizes" --suite sys --sizes 1K --out "$tmp/b3"
bad "sizes and msglog" "give one of them" --sizes 1,2 --msglog 3 --out "$tmp/b4"
bad "mem with msglog" "the mem suite takes --sizes" --suite mem --msglog 3 --out "$tmp/b5"
bad "mem with a duration" "the mem suite has no duration" --suite mem --time 1 --out "$tmp/b6"
bad "mpi with 1 rank" "at least 2 ranks" --ranks 1 --out "$tmp/b7"
bad "mpi size too large" "--sizes: expected sizes from 0 to 1G" --sizes 1K,2G --out "$tmp/b8"
bad "missing IMB binary" "--imb $tmp/IMB-MPI1: No such file" --imb "$tmp/IMB-MPI1" --out "$tmp/b9"
bad "IMB for the net suite" "only the mpi suite runs IMB" --suite net --imb "$BIN/vhpc-mpibench" --out "$tmp/b10"
bad "a results folder again" "--out $tmp/net: already holds results" --suite net --out "$tmp/net"
bad "a bad duration" "--time: expected seconds" --suite net --time fast
bad "a bad time limit" "--timeout: expected seconds" --timeout 0
bad "a stray argument" "unexpected argument 'PingPong'" PingPong
bad "a missing value" "--reps needs a value" --reps
bad "native BTLs with shell characters" "--native-btl: expected Open MPI BTL names" --native-btl 'self;tcp'
bad "native BTLs for the sys suite" "only the mpi suite" --suite sys --native-btl self,tcp --out "$tmp/b11"
bad "an unknown fabric" "--fabric: expected rdma or tcp, got 'ib'" --fabric ib
bad "a fabric for the net suite" "--fabric: only the mpi suite" --suite net --fabric tcp --out "$tmp/b19"
bad "no single copy without vmshm" "--no-single-copy: the single copy is vmshm's, which --no-vmshm leaves out" \
	--no-single-copy --no-vmshm --out "$tmp/b21"
bad "no single copy on a fabric" "--no-single-copy: the single copy is vmshm's, which --fabric leaves out" \
	--no-single-copy --fabric tcp --out "$tmp/b22"
bad "a native variable without a name" "--native-env: expected NAME=VALUE" --native-env =1 --out "$tmp/b17"
bad "a native variable with a space in its name" "--native-env: expected NAME=VALUE .*got 'A B=1'" --native-env 'A B=1' --out "$tmp/b18"
bad "a line break in a native variable's value, shown on one line" \
	"^vhpc bench: --native-env: the value has a control character \(0x0a\) at offset 3: 'A=1\?2'$" \
	--native-env "$(printf 'A=1\n2')" --out "$tmp/b20"
bad "a native variable for the net suite" "--native-env: only the mpi suite" --suite net --native-env A=1 --out "$tmp/b19"
bad "an unknown driver" "--driver: expected auto, container or kvm" --driver xen
bad "--iter 0" "--iter '0': N must be a whole number from 1 to 1000000000" --iter 0 --out "$tmp/b12"
bad "--iter that is not a number" "--iter 'many': N must be" --iter many --out "$tmp/b13"
bad "--iter with VOL in bytes" "--iter '1000,40': VOL must be whole MiB from 1M to 2047M" --iter 1000,40 --out "$tmp/b14"
bad "--iter with VOL too large for IMB" "--iter '1000,4G': VOL must be whole MiB" --iter 1000,4G --out "$tmp/b15"
bad "--iter for the net suite" "--iter: only the mpi suite" --suite net --iter 1000 --out "$tmp/b16"
bad "--iter without a value" "--iter needs a value" --iter
bad "IMB sizes that Allreduce runs as one" \
	"^vhpc bench: --sizes 1 and 3 with --imb: IMB-MPI1 runs Allreduce on whole floats and measures both as 4 bytes; leave one of them out$" \
	--imb "$BIN/vhpc-mpibench" --sizes 0,1,3,8,9 --out "$tmp/b21"
bad "an unknown benchmark, by name" "^vhpc bench: --benchmarks: 'Barrier' is not one of PingPong, Sendrecv, Exchange, Allreduce, Bcast$" \
	--benchmarks PingPong,Barrier --out "$tmp/b22"
bad "a benchmark named twice" "^vhpc bench: --benchmarks: Sendrecv is named twice$" --benchmarks sendrecv,Sendrecv --out "$tmp/b23"
bad "benchmarks for the net suite" "--benchmarks: only the mpi suite" --suite net --benchmarks PingPong --out "$tmp/b24"
bad "an unknown table" "--table: expected imb or metrics, got 'csv'" --table csv
bad "IMB tables of the sys suite" "--table imb: only the mpi suite" --suite sys --table imb --out "$tmp/b25"
check_eq "bad options leave no results folder behind" "" "$(ls -d "$tmp"/b[0-9]* 2>/dev/null)"
hv=$(grep -cwE 'vmx|svm' /proc/cpuinfo)
if [ "$hv" = 0 ]; then
	bad "kvm without hardware virtualization, with the reason" "driver kvm: .*(software-only|no vmx/svm|/dev/kvm cannot be opened \(no KVM on this host\))" --driver kvm
else
	skip "this host has hardware virtualization: --driver kvm is not refused here"
fi

check_eq "no bench program outlives the runs" "" "$(pgrep -x vhpc-netbench; pgrep -x vhpc-sysbench)"
done_testing
