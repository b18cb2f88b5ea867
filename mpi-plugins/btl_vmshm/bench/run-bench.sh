#!/usr/bin/env bash
# PingPong and Sendrecv over vader, vmshm and tcp, each on the same two
# cores (rank 0 on CPU 0, its peer on CPU 1), rounds interleaved:
#   job "shm" (one per round): rank 0 (driver) and rank 1 in guest A, rank 2
#     in guest B with the same host id; vader (0-1) and vmshm (0-2) take
#     turns for every size, the idle peer sleeping;
#   job "tcp" (one per round): rank 0 in guest A, rank 1 in guest C with
#     another host id: tcp.
# tcp gets its own job because once a tcp connection is up, Open MPI polls
# its event loop (a system call) in every progress call of the process,
# which would slow vader and vmshm down as well.  Guests are orteds started
# by tests/mpi-plugins/fake-guest-rsh (a stand-in for vhpc-rsh); the script
# checks in Open MPI's own verbose output that each pair used the transport
# it is labelled with.
#
#   mpi-plugins/btl_vmshm/bench/run-bench.sh [ROUNDS] [SIZE...]
#
# VMSHM_BENCH_KEEP=FILE keeps the raw RESULT lines.
# VMSHM_BENCH_REGION_DIR=DIR puts the region there (default /dev/shm), e.g. a
# tmpfs mounted with huge=always to compare page sizes.
# VMSHM_BENCH_VADER_NOCMA=1 turns off vader's single-copy (CMA) mechanism in
# guest A: vader then copies through shared memory twice, like vmshm must.
set -eu
top=$(cd "$(dirname "$0")/../../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$top/$B ;; esac
rounds=${1:-9}
[ $# -gt 0 ] && shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 1024 16384 65536 1048576 4194304)
sysdir=$(dirname "$(find /usr/lib -name mca_btl_vader.so -path '*openmpi*' | head -1)")
work=$(mktemp -d /tmp/vmshm-bench.XXXXXX)
region=${VMSHM_BENCH_REGION_DIR:-/dev/shm}/vmshm-bench.$$
trap 'rm -rf "$work"; rm -f "$region"' EXIT
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
vader=vader
if [ "${VMSHM_BENCH_VADER_NOCMA:-0}" = 1 ]; then
	export OMPI_MCA_btl_vader_single_copy_mechanism=none
	vader=vader-nocma
fi
export VMSHM_T_DIR=$work VMSHM_FAKE_HOST_IDS="127.0.0.2=hostX 127.0.0.3=hostX 127.0.0.4=hostY"

job() { # NAME ROUND HOSTS NP LABEL...
	local name=$1 r=$2 hosts=$3 np=$4
	shift 4
	rm -f "$region"
	truncate -s 64M "$region"
	VHPC_VMSHM_PATH=$region timeout 600 mpirun "${root[@]}" -np "$np" --bind-to none \
		-host "$hosts" --mca plm_rsh_agent "$top/tests/mpi-plugins/fake-guest-rsh" \
		--mca mca_base_component_path "$sysdir:$B/lib/vhpc/openmpi" \
		--mca btl self,vader,vmshm,tcp --mca btl_base_verbose 1 \
		"$B/vmshm/bin/vmshm-pingpong" 1 "$@" -- "${sizes[@]}" >"$work/$name.out" 2>&1 || {
		cat "$work/$name.out" >&2
		exit 1
	}
	local rank=1
	for label in "$@"; do
		local t=${label%-nocma}
		if ! grep -qE "Using $t btl for send to \[\[[0-9]+,1\],$rank\]" "$work/$name.out"; then
			echo "run-bench: rank 0 did not reach rank $rank through $t:" >&2
			grep "Using" "$work/$name.out" >&2
			exit 1
		fi
		rank=$((rank + 1))
	done
	sed -n "s/^RESULT \([^ ]*\) [0-9]* /\1 $r /p" "$work/$name.out" >>"$work/results"
}

for ((r = 0; r < rounds; r++)); do
	job shm "$r" 127.0.0.2:2,127.0.0.3:1 3 "$vader" vmshm
	job tcp "$r" 127.0.0.2:1,127.0.0.4:1 2 tcp
done
[ -n "${VMSHM_BENCH_KEEP:-}" ] && cp "$work/results" "$VMSHM_BENCH_KEEP"

python3 - "$work/results" "$vader" <<'PY'
import sys, statistics, collections
path, base = sys.argv[1], sys.argv[2]
us = collections.defaultdict(list)
rounds = collections.defaultdict(dict)
for line in open(path):
    t, r, bench, size, reps, u, m = line.split()
    us[(bench, int(size), t)].append(float(u))
    rounds[(bench, int(size), int(r))][t] = float(u)
def mbs(bench, size, u):   # unrounded MB/s from the time
    return (2 if bench == "Sendrecv" else 1) * size / u
ts = [base, "vmshm", "tcp"]
print("%-8s %8s | %-26s | %-26s | %-23s | %-23s" % (
    "", "", "median usec", "median MB/s",
    "vmshm/%s time (bw)" % base, "tcp/%s time (bw)" % base))
print("%-8s %8s | %8s %8s %8s | %8s %8s %8s | %11s %11s | %11s %11s" % (
    "bench", "bytes", base, "vmshm", "tcp", base, "vmshm", "tcp",
    "median", "best", "median", "best"))
for bench, size in sorted({(k[0], k[1]) for k in us}):
    med = {t: statistics.median(us[(bench, size, t)]) for t in ts}
    best = {t: min(us[(bench, size, t)]) for t in ts}
    row = "%-8s %8d | " % (bench, size)
    row += " ".join("%8.2f" % med[t] for t in ts) + " | "
    row += " ".join("%8.0f" % mbs(bench, size, med[t]) for t in ts) + " | "
    cells = []
    for t in ts[1:]:
        # Per-round ratios (the two sides ran within a second of each other),
        # then their median; and the ratio of the best rounds.
        rr = [rounds[(bench, size, r)][t] / rounds[(bench, size, r)][base]
              for (b, s_, r) in rounds if b == bench and s_ == size
              and t in rounds[(b, s_, r)] and base in rounds[(b, s_, r)]]
        cells.append("%5.2f(%4.2f) %5.2f(%4.2f)" % (statistics.median(rr), 1 / statistics.median(rr),
                                                  best[t] / best[base], best[base] / best[t]))
    row += " | ".join(cells)
    print(row)
n = len(next(iter(us.values())))
print("(%d rounds.  time ratio > 1: slower than %s; (bw) is its inverse, the bandwidth "
      "ratio.  median: median of per-round ratios; best: best round of each)" % (n, base))
PY
