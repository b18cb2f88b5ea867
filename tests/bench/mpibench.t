#!/usr/bin/env bash
# timeout: 150
# vhpc-mpibench under mpirun on this machine (2 cores, so 4 ranks are
# oversubscribed): every benchmark with -check at 2 and 4 processes, the
# tables parsed and checked with vhpc-imbcheck, IMB's exact headers, the
# process-count handling, -show-hosts, detection of corrupted data (through
# the test-only VHPC_MPIBENCH_TEST_CORRUPT), and bad arguments.
. "$(dirname "$0")/../lib.sh"

command -v mpirun >/dev/null || skip_all "mpirun (openmpi-bin) is not installed"
MB=$BIN/vhpc-mpibench
CHK=$BIN/vhpc-imbcheck
[ -x "$MB" ] && [ -x "$CHK" ] || { fail "vhpc-mpibench and vhpc-imbcheck are built (run make)"; done_testing; exit 1; }

tmp=$(mktemp -d /tmp/vhpc-bench-t.XXXXXX)
at_exit rm -rf "$tmp"
# Open MPI's session directory and vader's shared-memory files go to our own
# folders, so the test can see that a run leaves nothing behind.
mkdir -p "$tmp/session" "$tmp/shm"
export OMPI_MCA_orte_tmpdir_base=$tmp/session
export OMPI_MCA_btl_vader_backing_directory=$tmp/shm

mpi() {
	local np=$1; shift
	timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp \
		--mca mpi_yield_when_idle 1 -np "$np" "$@"
}

leftovers() { find "$tmp/session" "$tmp/shm" -mindepth 1 2>/dev/null | head -3; }

# ---- every benchmark with -check, 2 processes
SECONDS=0
mpi 2 "$MB" -check -msglog 0:12 >"$tmp/np2.out" 2>"$tmp/np2.err"
rc=$?
check_eq "np 2, all benchmarks with -check: exit 0" 0 "$rc"
[ $rc -eq 0 ] || diag "$(tail -5 "$tmp/np2.err")"
check "np 2: data check passed" grep -qx '# Data check: every received byte was as sent' "$tmp/np2.out"
out=$("$CHK" -expect PingPong@2 -expect PingPing@2 -expect Sendrecv@2 -expect Exchange@2 \
	-expect Allreduce@2 -expect Bcast@2 -expect Barrier@2 "$tmp/np2.out" 2>&1)
rc=$?
check_eq "np 2: vhpc-imbcheck finds 7 sane tables" "0 $tmp/np2.out: 7 tables, 83 rows: sane" "$rc $out"
check_eq "np 2: no Sendrecv table beyond 2 processes" 1 \
	"$("$CHK" -q -expect Sendrecv@4 "$tmp/np2.out" >/dev/null 2>&1; echo $?)"
check_eq "np 2: no run leaves session or shared-memory files" "" "$(leftovers)"

# ---- 4 processes (oversubscribed), sizes from a -msglen file read by rank 0
printf '# sizes\n0\n1\n1000\n64K\n1M\n' >"$tmp/lens"
mpi 4 "$MB" -check -show-hosts -msglen "$tmp/lens" >"$tmp/np4.out" 2>"$tmp/np4.err"
rc=$?
check_eq "np 4, all benchmarks with -check and -msglen: exit 0" 0 "$rc"
[ $rc -eq 0 ] || diag "$(tail -5 "$tmp/np4.err")"
out=$("$CHK" -expect PingPong@2 -expect PingPing@2 -expect Sendrecv@2 -expect Sendrecv@4 \
	-expect Exchange@2 -expect Exchange@4 -expect Allreduce@4 -expect Bcast@4 \
	-expect Barrier@4 "$tmp/np4.out" 2>&1)
check_eq "np 4: tables at 2 and 4 processes, all sane" 0 "$?"
diag "$out"
check_eq "np 4: PingPong runs on 2 ranks, 2 wait as in IMB" \
	"$(printf '# #processes = 2 \n# ( 2 additional processes waiting in MPI_Barrier)')" \
	"$(grep -A2 -x '# Benchmarking PingPong ' "$tmp/np4.out" | tail -2)"
check_eq "np 4: a waiting note for each 2-process table" 7 \
	"$(grep -cx '# ( 2 additional processes waiting in MPI_Barrier)' "$tmp/np4.out")"
check "np 4: user-defined lengths noted" grep -qx '# Message lengths were user defined' "$tmp/np4.out"
# 1 MiB: min(1000, 40 MiB / 1 MiB) = 40 repetitions
check_match "np 4: 1 MiB PingPong row has 40 repetitions" '^ +1048576 +40 ' \
	"$(awk '/Benchmarking PingPong/{p=1} p && $1==1048576 {print; exit}' "$tmp/np4.out")"
check_match "np 4: Allreduce skips sizes that are not whole floats (1 byte)" \
	'^0 1000 65536 1048576 $' \
	"$(awk '/Benchmarking Allreduce/{p=1; n++} p && n==2 && /^ +[0-9]/ {printf "%s ", $1} /Benchmarking Bcast/{p=0}' "$tmp/np4.out")"
hosts=$(grep -E '^# rank [0-9]+: host=[^ ]+ netns=[0-9]+ utsns=[0-9]+ cpu=-?[0-9]+ cpus=[0-9,-]+ pid=[0-9]+$' "$tmp/np4.out")
check_eq "-show-hosts: one line per rank" 4 "$(printf '%s\n' "$hosts" | grep -c .)"
check_eq "-show-hosts: this host's network namespace" \
	"$(stat -L -c %i /proc/self/ns/net)" "$(printf '%s\n' "$hosts" | sed -n 's/.* netns=\([0-9]*\) .*/\1/p' | sort -u)"
alive=0
for pid in $(printf '%s\n' "$hosts" | sed -n 's/.* pid=\([0-9]*\)$/\1/p'); do
	kill -0 "$pid" 2>/dev/null && alive=$((alive+1))
done
check_eq "-show-hosts: 4 distinct pids, none alive after the run" "4 0" \
	"$(printf '%s\n' "$hosts" | sed -n 's/.* pid=//p' | sort -u | wc -l) $alive"
check_eq "np 4: no leftovers" "" "$(leftovers)"

# ---- IMB's headers, byte for byte (scripts written for IMB grep for them)
mpi 4 "$MB" -msglog 0:2 PingPong sendrecv ALLREDUCE barrier >"$tmp/hdr.out" 2>&1
check_eq "headers run: exit 0" 0 "$?"
check "PingPong banner" grep -qx '# Benchmarking PingPong ' "$tmp/hdr.out"
check "PingPong columns" grep -qx '       #bytes #repetitions      t\[usec\]   Mbytes/sec' "$tmp/hdr.out"
check "Sendrecv columns" \
	grep -qx '       #bytes #repetitions  t_min\[usec\]  t_max\[usec\]  t_avg\[usec\]   Mbytes/sec' "$tmp/hdr.out"
check "collective columns" \
	grep -qx '       #bytes #repetitions  t_min\[usec\]  t_max\[usec\]  t_avg\[usec\]' "$tmp/hdr.out"
check "Barrier columns" grep -qx ' #repetitions  t_min\[usec\]  t_max\[usec\]  t_avg\[usec\]' "$tmp/hdr.out"
check "rules as wide as the table" grep -qx "#$(printf -- '-%.0s' $(seq 51))" "$tmp/hdr.out"
check "closing line" grep -qx '# All processes entering MPI_Finalize' "$tmp/hdr.out"
check_eq "only the benchmarks named, in IMB's order" "PingPong Sendrecv Sendrecv Allreduce Allreduce Barrier Barrier " \
	"$(sed -n 's/^# Benchmarking \([A-Za-z]*\) $/\1/p' "$tmp/hdr.out" | tr '\n' ' ')"
check_match "Barrier with default repetitions" '^ +1000 +[0-9.]+ +[0-9.]+ +[0-9.]+$' \
	"$(grep -A1 -x ' #repetitions.*' "$tmp/hdr.out" | tail -1)"

# ---- -np-only and -iter
mpi 4 "$MB" -np-only -iter 50 -msglog 0:3 Sendrecv Bcast >"$tmp/only.out" 2>&1
check_eq "-np-only run: exit 0" 0 "$?"
check_eq "-np-only: only 4-process tables" "4 4 " \
	"$(sed -n 's/^# #processes = \([0-9]*\) $/\1/p' "$tmp/only.out" | tr '\n' ' ')"
out=$("$CHK" -q -iter 50 "$tmp/only.out" 2>&1)
check_eq "-iter 50: vhpc-imbcheck -iter 50 accepts it" 0 "$?"
[ -z "$out" ] || diag "$out"
check_eq "-iter 50: the default rule does not" 1 \
	"$("$CHK" -q "$tmp/only.out" >/dev/null 2>&1; echo $?)"

# ---- without a launcher: one process
timeout 30 "$MB" -msglog 0:1 PingPong Sendrecv >"$tmp/one.out" 2>&1
check_eq "singleton run: exit 0" 0 "$?"
check "singleton: PingPong skipped with a reason" \
	grep -qx '# PingPong skipped: it needs 2 processes, this run has 1' "$tmp/one.out"
check "singleton: Sendrecv on 1 process is sane" "$CHK" -q -expect Sendrecv@1 "$tmp/one.out"

# ---- corrupted data is detected (test-only fault injection)
VHPC_MPIBENCH_TEST_CORRUPT=1 mpi 2 -x VHPC_MPIBENCH_TEST_CORRUPT "$MB" -check -msglog 4:6 \
	PingPong Sendrecv >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
check_eq "corruption on rank 1: exit 1" 1 "$rc"
check_match "corruption: the error names rank, benchmark, size, offset and bytes" \
	'check failed: rank 1, PingPong with 2 processes, 16 bytes, repetition 0: 1 wrong byte\(s\) in the data from rank 0, first at offset 8: expected 0x[0-9a-f]{2}, got 0x[0-9a-f]{2}' \
	"$(cat "$tmp/bad.err")"
check "corruption: summary in the output" grep -qx '# Data check FAILED: 6 wrong bytes received' "$tmp/bad.out"
out=$("$CHK" "$tmp/bad.out" 2>&1)
check_eq "corruption: vhpc-imbcheck flags each row's defects" "1 6" \
	"$? $(printf '%s\n' "$out" | grep -c 'data check found defects (1.00)')"
VHPC_MPIBENCH_TEST_CORRUPT=3:Allreduce mpi 4 -x VHPC_MPIBENCH_TEST_CORRUPT "$MB" -check -msglog 2:3 \
	Allreduce Bcast >"$tmp/bad4.out" 2>"$tmp/bad4.err"
check_eq "corrupted Allreduce result on rank 3: exit 1" 1 "$?"
check_match "Allreduce corruption named" 'rank 3, Allreduce with 4 processes, 4 bytes, .* from the reduction' \
	"$(cat "$tmp/bad4.err")"
check_eq "only Allreduce at 4 processes is hit (2 sizes)" "2" \
	"$(grep -c 'check failed: rank 3, Allreduce with 4' "$tmp/bad4.err")"
VHPC_MPIBENCH_TEST_CORRUPT=1 mpi 2 -x VHPC_MPIBENCH_TEST_CORRUPT "$MB" -msglog 4:4 PingPong >/dev/null 2>&1
check_eq "fault injection acts only in -check mode" 0 "$?"
check_eq "failed runs leave nothing either" "" "$(leftovers)"

# ---- bad arguments: exit 2 and a message that names the problem
# ---- Allreduce and Bcast as IMB times them: each call alone, then an
# MPI_Barrier outside the time (-sync 1).  A PMPI shim counts the barriers
# and makes each one take 2 ms: inside the time it would show as >= 2000 us.
cat >"$tmp/slowbar.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
static long n;
int MPI_Barrier(MPI_Comm c) { n++; usleep(2000); return PMPI_Barrier(c); }
int MPI_Finalize(void)
{
	int r;
	PMPI_Comm_rank(MPI_COMM_WORLD, &r);
	fprintf(stderr, "slowbar: rank %d barriers %ld\n", r, n);
	return PMPI_Finalize();
}
EOF
printf '4\n' >"$tmp/len4"
if mpicc -shared -fPIC -o "$tmp/slowbar.so" "$tmp/slowbar.c" 2>"$tmp/slowbar.err"; then
	for sync in 1 0; do
		mpi 2 -x LD_PRELOAD="$tmp/slowbar.so" "$MB" -sync $sync -iter 50 -msglen "$tmp/len4" \
			Allreduce Bcast >"$tmp/sync$sync.out" 2>"$tmp/sync$sync.err"
		check_eq "-sync $sync: exit 0" 0 "$?"
		bars=$(sed -n 's/^slowbar: rank 0 barriers //p' "$tmp/sync$sync.err")
		tmax=$(awk '/^# Benchmarking/ { b = $3 } $1 == 4 && NF >= 5 { printf "%s %s ", b, $4 }' "$tmp/sync$sync.out")
		diag "-sync $sync: rank 0 called MPI_Barrier ${bars:-?} times; t_max (us): $tmax"
		check "-sync $sync: both tables have a 4-byte row" test "$(wc -w <<<"$tmax")" = 4
		check "-sync $sync: Allreduce and Bcast t_max under 1000 us, though each barrier takes 2000 ($tmax)" \
			awk -v t="$tmax" 'BEGIN { n = split(t, a, " "); exit !(n == 4 && a[2] < 1000 && a[4] < 1000) }'
		if [ $sync = 1 ]; then
			# 50 timed and 5 warm-up repetitions of each, a barrier after each.
			check "-sync 1: a barrier after every call (${bars:-none}, want >= 110)" test "${bars:-0}" -ge 110
		else
			check "-sync 0: no barrier between calls (${bars:-none}, want < 20)" test "${bars:-999}" -lt 20
		fi
	done
else
	fail "mpicc builds the PMPI shim: $(head -3 "$tmp/slowbar.err")"
fi

bad() {
	local want=$1; shift
	local out rc
	out=$("$MB" "$@" 2>&1)
	rc=$?
	check_match "bad args '$*': exit 2, says '$want'" "^2 vhpc-mpibench: .*$want" "$rc $out"
}
bad "unknown benchmark 'Alltoall'" PingPong Alltoall
bad "MAX 'x' must be an integer" -msglog x
bad "MIN is larger than MAX" -msglog 9:3
bad "N must be an integer" -iter 0
bad "IMB option -time is not supported" -time 5
bad "unknown option '-frobnicate'" -frobnicate
bad "needs a value" -npmin
bad "expected 0 or 1" -zero_size 7
bad "-sync '2': expected 0 or 1" -sync 2
VHPC_MPIBENCH_TEST_CORRUPT=x bad "VHPC_MPIBENCH_TEST_CORRUPT='x'" -check
out=$(mpi 2 "$MB" -msglog 1:x 2>&1)
rc=$?
check_eq "bad args under mpirun: non-zero exit, message printed once" "1" \
	"$([ $rc -ne 0 ] && printf '%s\n' "$out" | grep -c "vhpc-mpibench: -msglog: MAX 'x'")"
out=$(mpi 2 "$MB" -msglen "$tmp/nonexistent" 2>&1)
check_match "missing -msglen file named" "-msglen: cannot open $tmp/nonexistent" "$out"
printf '1\nlots\n' >"$tmp/badlens"
out=$(mpi 2 "$MB" -msglen "$tmp/badlens" 2>&1)
check_match "bad -msglen line named with file:line" "$tmp/badlens:2: length 'lots'" "$out"
out=$("$MB" -help)
check_eq "-help: exit 0 with usage" "0 1" "$? $(printf '%s\n' "$out" | grep -c '^usage: vhpc-mpibench')"
check_eq "no leftovers at the end" "" "$(leftovers)"
diag "elapsed: ${SECONDS}s"

done_testing
