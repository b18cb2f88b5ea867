#!/usr/bin/env bash
# PingPong and Sendrecv over vader, vmshm and tcp in ONE job, measurements
# interleaved round by round, each transport on the same two cores:
#   rank 0 (CPU 0) - driver, in guest A
#   rank 1 (CPU 1) - guest A too:             vader (native shared memory)
#   rank 2 (CPU 1) - guest B, same host id:   vmshm
#   rank 3 (CPU 1) - guest C, other host id:  tcp
# Guests are orteds started by tests/mpi-plugins/fake-guest-rsh (a stand-in
# for vhpc-rsh).  The script checks in Open MPI's own verbose output that
# each pair really used the transport it is labelled with.
#
#   mpi-plugins/btl_vmshm/bench/run-bench.sh [ROUNDS] [SIZE...]
#
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
region=/dev/shm/vmshm-bench.$$
trap 'rm -rf "$work"; rm -f "$region"' EXIT
truncate -s 64M "$region"
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
vader=vader
if [ "${VMSHM_BENCH_VADER_NOCMA:-0}" = 1 ]; then
	export OMPI_MCA_btl_vader_single_copy_mechanism=none
	vader=vader-nocma
fi

VMSHM_T_DIR=$work VMSHM_FAKE_HOST_IDS="127.0.0.2=hostX 127.0.0.3=hostX 127.0.0.4=hostY" \
VHPC_VMSHM_PATH=$region timeout 900 mpirun "${root[@]}" -np 4 --bind-to none \
	-host 127.0.0.2:2,127.0.0.3:1,127.0.0.4:1 \
	--mca plm_rsh_agent "$top/tests/mpi-plugins/fake-guest-rsh" \
	--mca mca_base_component_path "$sysdir:$B/lib/openmpi" \
	--mca btl self,vader,vmshm,tcp --mca btl_base_verbose 1 \
	"$B/vmshm/bin/vmshm-pingpong" "$rounds" $vader vmshm tcp -- "${sizes[@]}" >"$work/out" 2>&1 || {
	cat "$work/out" >&2
	exit 1
}
for want in "vader 1" "vmshm 2" "tcp 3"; do
	set -- $want
	if ! grep -qE "Using $1 btl for send to \[\[[0-9]+,1\],$2\]" "$work/out"; then
		echo "run-bench: rank 0 did not reach rank $2 through $1:" >&2
		grep "Using" "$work/out" >&2
		exit 1
	fi
done
sed -n 's/^RESULT //p' "$work/out" >"$work/results"

python3 - "$work/results" "$vader" <<'PY'
import sys, statistics, collections
path, base = sys.argv[1], sys.argv[2]
us = collections.defaultdict(list); mbs = collections.defaultdict(list)
ratio_lat = collections.defaultdict(list); ratio_bw = collections.defaultdict(list)
rows = [l.split() for l in open(path)]
byround = collections.defaultdict(dict)
for t, r, bench, size, reps, u, m in rows:
    k = (bench, int(size))
    us[k + (t,)].append(float(u)); mbs[k + (t,)].append(float(m))
    byround[k + (int(r),)][t] = (float(u), float(m))
# Ratios are taken within a round (same few hundred milliseconds), then the
# median over rounds: a noisy neighbour hits both sides of each ratio.
for (bench, size, r), d in byround.items():
    for t in d:
        if t != base and base in d:
            ratio_lat[(bench, size, t)].append(d[t][0] / d[base][0])
            ratio_bw[(bench, size, t)].append(d[t][1] / d[base][1])
ts = [base, "vmshm", "tcp"]
print("%-9s %8s | %9s %9s %9s | %9s %9s %9s | %-17s | %-17s" % (
    "bench", "bytes", base + " us", "vmshm us", "tcp us", base + " MB/s", "vmshm MB/s",
    "tcp MB/s", "vmshm/" + base + " lat bw", "tcp/" + base + " lat bw"))
for bench, size in sorted({(k[0], k[1]) for k in us}):
    row = "%-9s %8d | " % (bench, size)
    row += " ".join("%9.2f" % statistics.median(us[(bench, size, t)]) for t in ts) + " | "
    row += " ".join("%9.0f" % statistics.median(mbs[(bench, size, t)]) for t in ts) + " | "
    row += " | ".join("%6.2fx %6.2f    " % (statistics.median(ratio_lat[(bench, size, t)]),
                                           statistics.median(ratio_bw[(bench, size, t)]))
                      for t in ts[1:])
    print(row)
n = len(next(iter(us.values())))
print("(one job; %d rounds interleaved; cells are medians, ratios are medians of per-round "
      "ratios; lat ratio > 1: slower than %s; bw ratio < 1: less bandwidth)" % (n, base))
PY
