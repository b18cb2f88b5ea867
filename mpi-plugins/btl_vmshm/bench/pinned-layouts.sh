#!/usr/bin/env bash
# One IMB-MPI1 benchmark with 4 ranks on this host in four layouts, rounds
# interleaved, to tell the cost of the transport from the cost of the
# guests' pinning (README, "On the next machine"):
#   floating  native vader, ranks free to move between cores;
#   pinned    native vader, rank r pinned to CPU r % 2, as `vhpc run -N 2
#             -n 4` places ranks (map-by node: ranks 0 and 2 in g0 on CPU 0,
#             1 and 3 in g1 on CPU 1);
#   sim       the same pinning, ranks in two simulated guests of one host
#             (tests/mpi-plugins/fake-guest-rsh): vmshm between them, vader
#             inside each, no containers; the region on a huge=always tmpfs
#             as vhpc gives guests (4 KiB pages stall at every new page);
#   guests    container guests through `vhpc run -N 2 -n 4`.
# vader gets 64 KiB fast boxes everywhere, as vhpc gives ranks that share a
# guest's cores.  Prints t_max and t_avg (us) per round, then medians.
#
#   mpi-plugins/btl_vmshm/bench/pinned-layouts.sh IMB-MPI1 [ROUNDS] [BENCH] [SIZE...]
#
# Defaults: 6 rounds, Bcast, sizes 1 and 1024.  Needs root (the tmpfs mount)
# and 2 free CPUs; IMB-MPI1's folder is bound into the guests read-only.
set -eu
top=$(cd "$(dirname "$0")/../../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$top/$B ;; esac
usage() { echo "usage: pinned-layouts.sh IMB-MPI1 [ROUNDS] [BENCH] [SIZE...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
given=$1 imb=$(readlink -f "$1") rounds=${2:-6} bench=${3:-Bcast}
[ $# -gt 3 ] && shift 3 || set --
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 1024)
[ -f "$imb" ] && [ -x "$imb" ] || { echo "pinned-layouts: '$given' is not an executable IMB-MPI1" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "pinned-layouts: ROUNDS must be a positive number, got '$rounds'" >&2; exit 2; }
[[ $bench =~ ^[A-Za-z_]+$ ]] || { echo "pinned-layouts: BENCH must be an IMB-MPI1 benchmark name, got '$bench'" >&2; exit 2; }
for s in "${sizes[@]}"; do
	[[ $s =~ ^[0-9]+$ ]] || { echo "pinned-layouts: a SIZE is bytes, got '$s'" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "pinned-layouts: needs root (it mounts a tmpfs for the region)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "pinned-layouts: needs 2 CPUs, this has $(nproc)" >&2; exit 2; }

sysdir=$(dirname "$(find /usr/lib -name mca_btl_vader.so -path '*openmpi*' | head -1)")
work=$(mktemp -d /tmp/vmshm-layouts.XXXXXX)
chmod 755 "$work"
mkdir "$work/huge"
mount -t tmpfs -o huge=always,size=64M,mode=700 vmshm-layouts "$work/huge"
trap 'umount "$work/huge" 2>/dev/null; rm -rf "$work"' EXIT
printf '%s\n' "${sizes[@]}" >"$work/sizes"
cat >"$work/pin" <<'EOF'
#!/bin/sh
exec taskset -c $((OMPI_COMM_WORLD_RANK % 2)) "$@"
EOF
chmod 755 "$work/pin"

args=(-npmin 4 -msglen "$work/sizes" -iter 2000 -time 10 "$bench")
mpi=(mpirun --allow-run-as-root --oversubscribe -np 4 --bind-to none --mca btl_vader_fbox_size 65536)
# Rows of the benchmark's own table (IMB-MPI1 runs others for a name it does
# not know): bytes reps t_min t_max t_avg, or for PingPong and PingPing
# bytes reps t MB/s (t stands for both).
rows() {
	awk -v L="$1" -v R="$2" -v B="$bench" '/^# Benchmarking / { on = ($3 == B) }
		on && NF >= 4 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ { print L, R, $1, NF == 4 ? $3 : $4, NF == 4 ? $3 : $5; n++ }
		END { exit n ? 0 : 1 }'
}
run_one() { # LAYOUT ROUND
	local out=$work/$1.out
	case $1 in
	floating) (cd "$work" && "${mpi[@]}" --mca btl self,vader "$imb" "${args[@]}") >"$out" 2>&1 ;;
	pinned) (cd "$work" && "${mpi[@]}" --mca btl self,vader "$work/pin" "$imb" "${args[@]}") >"$out" 2>&1 ;;
	sim)
		rm -f "$work/huge/region"
		truncate -s 32M "$work/huge/region"
		(cd "$work" && VMSHM_T_DIR=$work VMSHM_FAKE_HOST_IDS="127.0.0.2=hostX 127.0.0.3=hostX" \
			VHPC_VMSHM_PATH=$work/huge/region "${mpi[@]}" -host 127.0.0.2:2,127.0.0.3:2 --map-by node \
			--mca plm_rsh_agent "$top/tests/mpi-plugins/fake-guest-rsh" \
			--mca mca_base_component_path "$sysdir:$B/lib/vhpc/openmpi" --mca btl self,vader,vmshm \
			--mca mpi_yield_when_idle 1 --mca btl_base_verbose 1 "$work/pin" "$imb" "${args[@]}") >"$out" 2>&1
		grep -q "Using vmshm btl" "$out" || { echo "pinned-layouts: the simulated guests did not use vmshm:" >&2; tail -5 "$out" >&2; exit 1; }
		;;
	guests) (cd "$work" && "$B/bin/vhpc" run -N 2 -n 4 --bind "$(dirname "$imb"):ro" -- "$imb" "${args[@]}") >"$out" 2>&1 ;;
	esac || { echo "pinned-layouts: the $1 run failed:" >&2; tail -5 "$out" >&2; exit 1; }
	rows "$1" "$2" <"$out" >>"$work/rows" ||
		{ echo "pinned-layouts: the $1 run printed no $bench table:" >&2; tail -5 "$out" >&2; exit 1; }
}
for ((r = 1; r <= rounds; r++)); do
	for l in floating pinned sim guests; do run_one "$l" "$r"; done
done

python3 - "$work/rows" "$bench" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    layout, rnd, size, tmax, tavg = line.split()
    rows[(int(size), layout)][int(rnd)] = (float(tmax), float(tavg))
layouts = ["floating", "pinned", "sim", "guests"]
print("%s, 4 ranks, t_max us per round (t_avg)" % sys.argv[2])
for size in sorted({k[0] for k in rows}):
    for l in layouts:
        got = rows.get((size, l), {})
        print("%8d %-8s %s" % (size, l, " ".join("%6.2f(%5.2f)" % got[r] for r in sorted(got))))
print("medians of t_max; ratios to pinned of the medians, and the range of per-round ratios")
print("%8s %9s %9s %9s %9s | %-17s %-17s %-17s" % ("bytes", *layouts, "floating/pinned", "sim/pinned", "guests/pinned"))
for size in sorted({k[0] for k in rows}):
    med = {l: statistics.median(v[0] for v in rows[(size, l)].values()) for l in layouts}
    cells = []
    for l in ("floating", "sim", "guests"):
        per = [rows[(size, l)][r][0] / rows[(size, "pinned")][r][0] for r in rows[(size, l)] if r in rows[(size, "pinned")]]
        cells.append("%4.2f [%4.2f-%4.2f]" % (med[l] / med["pinned"], min(per), max(per)))
    print("%8d %9.2f %9.2f %9.2f %9.2f | %-17s %-17s %-17s" % (size, *[med[l] for l in layouts], *cells))
PY
