#!/usr/bin/env bash
# timeout: 600
# Every bench script runs once with tiny sizes and prints what it measures,
# so a bench that breaks fails here.  bench/scripts/cluster-sched had
# stopped working when images went into the controller's store (its jobs
# named an image the store did not have) and nothing noticed.  The numbers
# are not judged: at these sizes they mean nothing; only that each script
# ran to its end, printed its table and left nothing behind.
# bench/scripts/kvm-start needs hardware virtualization: kvm-start.t.
. "$(dirname "$0")/../lib.sh"
export VHPC_STATE_DIR=${VHPC_TEST_STATE_DIR:-$VHPC_TOP/$B/state}

need_root
command -v runc >/dev/null || skip_all "runc is not installed: no container guests"
S=$VHPC_TOP/bench/scripts
tmp=$(mktemp -d /tmp/vhpc-bench-scripts.XXXXXX)
at_exit rm -rf "$tmp"
before=$(ip netns list | sort; ls /run/netns 2>/dev/null | sort)

# script NAME ARGS...: runs bench/scripts/NAME; its output in $tmp/NAME.out
script() {
	local name=$1 rc
	shift
	B=$B "$S/$name" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	rc=$?
	check_eq "$name $*: exits 0" 0 "$rc"
	[ $rc -eq 0 ] || diag "$(tail -n 15 "$tmp/$name.err")"
}

# -- the scheduler: simulated nodes, submits and a gang job ---------------
script cluster-sched -n 8 -j 40 -c 2 -t "synthetic:pack:1 numa:1 core:2 pu:1"
out=$(cat "$tmp/cluster-sched.out")
check_match "cluster-sched: 8 simulated nodes registered" "^# 8 simulated nodes .* registered in [0-9]+ ms" "$out"
check_match "cluster-sched: submits per second measured" "submit: 40 jobs from 2 clients in [0-9.]+ s: [0-9]+ jobs/s" "$out"
check_match "cluster-sched: every job drained" "drain: all 40 jobs scheduled, run and completed" "$out"
check_match "cluster-sched: the 8-guest job placed and running" "gang: a 8-guest job .*RUNNING [0-9.]+ s after submit" "$out"
check_eq "cluster-sched: its bad counts are named" \
	"cluster-sched: -n, -j and -c take a count from 1, got 'x'" "$("$S/cluster-sched" -n x 2>&1)"

# -- image formats: build, size and start from each ------------------------
script image-formats 2
out=$(cat "$tmp/image-formats.out")
check_match "image-formats: the three sizes" "^size: tree [0-9]+ bytes in [0-9]+ files .*squashfs [0-9]+ bytes; erofs [0-9]+ bytes" "$out"
for f in tree squashfs erofs; do
	check_match "image-formats: jobs started from $f, first and median" "^$f +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$out"
done
check_match "image-formats: a single run is refused, with the reason" "RUNS '1': give 2 to 999" \
	"$("$S/image-formats" 1 2>&1)"

# -- registry pulls: first import, one sharing a layer, cold ---------------
# The registry program: build/tools' (make tools), else one on the PATH.
if [ -x "$VHPC_TOP/$B/tools/docker-registry" ] || command -v docker-registry >/dev/null; then
	script registry-pull 1 1
	out=$(cat "$tmp/registry-pull.out")
	for l in "app:1, empty cache" "app:2 after app:1" "app:2, empty cache"; do
		check_match "registry-pull: $l: times and bytes" "^$l.* +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+$" "$out"
	done
	check_match "registry-pull: the ratio" "^app:2 after app:1 / app:2 cold: bytes from the registry 0\.[0-9]+" "$out"
	check_eq "registry-pull: no registry left" "" "$(pgrep -f 'docker-registry serve /tmp/vhpc-regpull' || true)"
else
	skip "registry-pull: no docker-registry program (make tools takes it out of Debian's package)"
fi

# -- inter-node MPI, native against guests ---------------------------------
script cluster-native-vs-guest -r 1 -t 240
out=$(cat "$tmp/cluster-native-vs-guest.out")
for b in PingPong Sendrecv; do
	for n in 1 1048576; do
		check_match "cluster-native-vs-guest: $b at $n B, both sides and their ratio" \
			"^$b +$n B \| native t +[0-9.]+ .* \| guest t +[0-9.]+ .* \| t x[0-9.]+ bw x[0-9.]+" "$out"
	done
done

# -- under Slurm -------------------------------------------------------------
if command -v slurmctld >/dev/null && [ -f "$BIN/../lib/slurm/spank_vhpc.so" ]; then
	script slurm-native-vs-guest -r 1
	out=$(cat "$tmp/slurm-native-vs-guest.out")
	for k in alloc step; do
		check_match "slurm-native-vs-guest: a $k's start, both sides, and their ratio" \
			"(^| )$k +native +first task +[0-9]+ ms.*$k +guest +first task +[0-9]+ ms.*$k +guest/native first task x[0-9.]+" \
			"$(echo "$out" | tr '\n' ' ')"
	done
	for w in inter intra; do
		check_match "slurm-native-vs-guest: $w-node PingPong at 1 B, both sides and their ratio" \
			"^$w PingPong +1 B \| native t +[0-9.]+ .* \| guest t +[0-9.]+ .* \| t x[0-9.]+ bw x[0-9.]+" "$out"
	done
else
	skip "slurm-native-vs-guest: no Slurm here (slurmctld, or the SPANK plugin, which needs libslurm-dev at build time)"
fi

check_eq "no network namespace is left" "$before" "$(ip netns list | sort; ls /run/netns 2>/dev/null | sort)"
check_eq "no munged, vhpc-ctld or vhpcd of theirs is left" "" \
	"$(pgrep -af 'vhpc-schedbench|vhpcd --simulate|munged -S /tmp/vhpc-schedbench' || true)"
done_testing
