#!/usr/bin/env bash
# PingPong and Sendrecv between two ranks pinned to two different cores,
# over vmshm, tcp and native vader, as ratios to vader.  The transports take
# turns round after round (rotating who goes first), so a noisy neighbour
# hurts them alike; each cell is the median over the rounds.
#
#   mpi-plugins/btl_vmshm/bench/run-bench.sh [ROUNDS] [SIZE...]
#
# Env: B (build dir, default build), VMSHM_BENCH_TRANSPORTS (default
# "vader vmshm tcp"; "vader-nocma" is vader without its single-copy
# mechanism, i.e. two copies through shared memory like vmshm).
set -eu
top=$(cd "$(dirname "$0")/../../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$top/$B ;; esac
rounds=${1:-5}
[ $# -gt 0 ] && shift
sizes=("$@")
transports=(${VMSHM_BENCH_TRANSPORTS:-vader vmshm tcp})
sysdir=$(dirname "$(find /usr/lib -name mca_btl_vader.so -path '*openmpi*' | head -1)")
work=$(mktemp -d /tmp/vmshm-bench.XXXXXX)
region=/dev/shm/vmshm-bench.$$
trap 'rm -rf "$work"; rm -f "$region"' EXIT

run_one() { # transport round
	local t=$1 r=$2 btl args=()
	case $t in
	vader) btl=self,vader ;;
	vader-nocma) btl=self,vader; args=(--mca btl_vader_single_copy_mechanism none) ;;
	tcp) btl=self,tcp ;;
	vmshm)
		btl=self,vmshm
		rm -f "$region"
		truncate -s 64M "$region"
		args=(--mca btl_vmshm_host_id bench --mca btl_vmshm_region "$region") ;;
	*) echo "unknown transport $t" >&2; exit 2 ;;
	esac
	timeout 300 mpirun --allow-run-as-root -np 2 --bind-to core --map-by core \
		--mca mca_base_component_path "$B/lib/openmpi:$sysdir" \
		--mca btl "$btl" "${args[@]}" "$B/vmshm/bin/vmshm-pingpong" "${sizes[@]}" \
		2>&1 | sed -n "s/^RESULT /$t $r /p" >>"$work/results"
	rm -f "$region"
}

for ((r = 0; r < rounds; r++)); do
	n=${#transports[@]}
	for ((i = 0; i < n; i++)); do
		run_one "${transports[$(((i + r) % n))]}" "$r"
	done
done

# transport round bench size reps usec MBps  ->  median per (bench, size, transport)
python3 - "$work/results" "${transports[@]}" <<'EOF'
import sys, statistics, collections
path, transports = sys.argv[1], sys.argv[2:]
lat = collections.defaultdict(list); bw = collections.defaultdict(list)
for line in open(path):
    t, r, bench, size, reps, us, mbs = line.split()
    lat[(bench, int(size), t)].append(float(us)); bw[(bench, int(size), t)].append(float(mbs))
keys = sorted({(b, s) for (b, s, t) in lat})
others = [t for t in transports if t != "vader"]
print("%-9s %9s  " % ("bench", "bytes") +
      "  ".join("%10s" % (t + " us") for t in transports) + "  " +
      "  ".join("%10s" % (t + " MB/s") for t in transports) + "  " +
      "  ".join("%17s" % (t + "/vader lat bw") for t in others))
for b, s in keys:
    row = "%-9s %9d  " % (b, s)
    row += "  ".join("%10.2f" % statistics.median(lat[(b, s, t)]) for t in transports) + "  "
    row += "  ".join("%10.0f" % statistics.median(bw[(b, s, t)]) for t in transports) + "  "
    for t in others:
        lr = statistics.median(lat[(b, s, t)]) / statistics.median(lat[(b, s, "vader")])
        br = statistics.median(bw[(b, s, t)]) / statistics.median(bw[(b, s, "vader")])
        row += "  %7.2fx %6.2f  " % (lr, br)
    print(row)
n = len(next(iter(lat.values())))
print("(medians of %d interleaved rounds; lat ratio >1 = slower than vader, bw ratio <1 = less bandwidth)" % n)
EOF
