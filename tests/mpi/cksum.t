#!/usr/bin/env bash
# timeout: 150
# ckpt_cksum, the checksum job of the checkpoint tests (README.md here):
#  - its single-process --reference prints what an independent Python
#    copy of the definition prints (ckpt_cksum_ref.py), with and without
#    the scratch blocks; other --rounds, --bytes or ranks change the sum;
#  - bad arguments are refused, naming the option, with exit status 2;
#  - on a 2-node test cluster (container guests), 4 ranks in 4 guests, two
#    guests on each node: the run prints the reference's lines; a second
#    run with the same arguments prints the same; the co-located ranks
#    talked through the vmshm BTL (its counters carried every round's
#    bytes) and the ranks on different nodes through tcp (Open MPI's bml
#    says so); with --no-vmshm the sum is the same and vmshm carried
#    nothing; --rounds 21 and a --scratch run (each guest writing its
#    /scratch every round) print their own references' lines;
#  - nothing of the jobs is left.
. "$(dirname "$0")/../lib.sh"
need_cluster
CK=$VHPC_TOP/$B/testbin/ckpt_cksum
[ -x "$CK" ] || { echo "Bail out! $CK is not built (make tests)"; exit 1; }
PYREF=$VHPC_TOP/tests/mpi/ckpt_cksum_ref.py
CL=vck$$
. "$VHPC_TOP/tests/cluster/cluster-lib.sh"
T=$CL_DIR

# -- the reference, against the definition computed apart ------------------
ref() { "$CK" --reference "$@"; }
if command -v python3 >/dev/null; then
	check_eq "--reference prints what the Python copy of the definition prints (4 ranks, 12 rounds, 1000 bytes)" \
		"$(python3 "$PYREF" --ranks 4 --rounds 12 --bytes 1000 --every 4)" "$(ref --ranks 4 --rounds 12 --bytes 1000 --every 4)"
	check_eq "... and with the scratch blocks folded in (3 ranks, 5 rounds, 13 bytes)" \
		"$(python3 "$PYREF" --ranks 3 --rounds 5 --bytes 13 --every 2 --scratch)" \
		"$(ref --ranks 3 --rounds 5 --bytes 13 --every 2 --scratch /nowhere)"
else
	skip "python3 is not installed: no independent copy of the definition to compare with"
	skip "python3 is not installed"
fi
final() { sed -n 's/^final checksum \([0-9a-f]\{16\}\) .*/\1/p' <<<"$1"; }
base=$(final "$(ref --ranks 4 --rounds 20 --bytes 4096)")
check_match "the reference ends with a final checksum" '^[0-9a-f]{16}$' "$base"
sums="$base $(final "$(ref --ranks 4 --rounds 21 --bytes 4096)") $(final "$(ref --ranks 4 --rounds 20 --bytes 4097)")"
sums+=" $(final "$(ref --ranks 3 --rounds 20 --bytes 4096)") $(final "$(ref --ranks 4 --rounds 20 --bytes 4096 --scratch x)")"
check_eq "other --rounds, --bytes, ranks or --scratch: five different sums ($sums)" 5 "$(tr ' ' '\n' <<<"$sums" | sort -u | grep -c .)"

bad() {  # DESCRIPTION REGEX ARGS...
	local d=$1 re=$2 out rc
	shift 2
	out=$("$CK" "$@" 2>&1)
	rc=$?
	check_match "$d: exit 2 ($rc), saying why" "^ckpt_cksum: $re" "$([ $rc = 2 ] && echo "$out")"
}
bad "--rounds 0" "--rounds: '0' is not a whole number from 1 to" --rounds 0
bad "--bytes 12x" "--bytes: '12x' is not a whole number from 1 to" --rounds 2 --bytes 12x
bad "--sleep-ms -1" "--sleep-ms: '-1' is not a whole number" --rounds 2 --sleep-ms -1
bad "an unknown argument" "unknown argument '--bogus'" --rounds 2 --bogus
bad "--rounds without a value" "--rounds needs a value" --rounds
bad "--reference without --ranks" "--reference needs --ranks" --reference --rounds 2
bad "--ranks outside --reference" "--ranks is for --reference only" --ranks 2 --rounds 2

# -- 4 ranks in 4 guests on 2 nodes ----------------------------------------
cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; cat "$CL_DIR"/*.log; done_testing; exit 1; }
before=$(cl_leftovers)
# Two cpus each, so each node takes two of the 1-vCPU guests.
for i in 1 2; do cl_node_up $i --cpus 0-1 || fail "node $i starts"; done
check "two nodes register" cl_wait_nodes_up 2

# Four ranks spin on two shared cores: they must yield (vhpc only knows
# each node's cpus, not that the nodes share them).
JOBARGS=(-N 4 -n 4 --vcpus 1 --timeout 100 -x OMPI_MCA_mpi_yield_when_idle=1
	-x OMPI_MCA_btl_vmshm_stats=1 -x OMPI_MCA_btl_base_verbose=1)
# job NAME [vhpc submit options] -- ckpt_cksum ARGS: runs it, its output in $T/NAME.out
job() {
	local name=$1 id t0=$SECONDS
	shift
	local opts=()
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	id=$(cd "$VHPC_TOP" && vc submit --json "${JOBARGS[@]}" "${opts[@]}" -- "$CK" "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
	vc wait "$id" >/dev/null 2>&1
	echo "$?" >"$T/$name.rc"
	vc output "$id" >"$T/$name.out" 2>&1
	job_json "$id" >"$T/$name.json"
	diag "$name: job $id, $((SECONDS - t0)) s, exit $(cat "$T/$name.rc")"
}
lines() { grep -E '^(round|final) ' "$T/$1.out"; }
# node_of NAME G: the node guest G of job NAME ran on
node_of() { grep -o "\"guest\":$2,\"node\":\"n[0-9]\"" "$T/$1.json" | sed 's/.*"node":"\(n[0-9]\)"/\1/'; }
# counter NAME RANK PEER FIELD: one field of RANK's vmshm-stats line for PEER
counter() { sed -n "s/.*rank $2\] vmshm-stats: peer $3 slot [0-9]* .*$4 \([0-9]*\).*/\1/p" "$T/$1.out" | head -1; }
# bml NAME RANK BTL PEER: how often rank RANK's Open MPI chose BTL for PEER
bml() { grep -oE "\[g$2:[0-9]+\] mca: bml: Using $3 btl for send to \[\[[0-9]+,1\],$4\]" "$T/$1.out" | wc -l; }

ARGS=(--rounds 20 --bytes 4096 --every 5 --sleep-ms 20)
REF=$(ref --ranks 4 "${ARGS[@]}")
job a -- "${ARGS[@]}"
check_eq "the run completes" 0 "$(cat "$T/a.rc")"
check_eq "it prints the reference's progress and final lines" "$REF" "$(lines a)"
for g in 0 1 2 3; do eval "n$g=$(node_of a $g)"; done
pl="g0:$n0 g1:$n1 g2:$n2 g3:$n3"
check_eq "two guests on each node ($pl)" "n1 n1 n2 n2" "$(echo "$n0 $n1 $n2 $n3" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')"
# (a node's host id is the cluster's uuid and the node's name)
check_match "rank 0 prints where the ranks run" "^# rank 3: guest g3, host [^ ]*:$n3, vmshm region yes\$" "$(cat "$T/a.out")"
for pair in "0 1" "0 2" "2 3"; do
	set -- $pair
	eval "na=\$n$1 nb=\$n$2"
	if [ "$na" = "$nb" ]; then want="same host, two guests: vmshm expected"; else want="tcp expected"; fi
	check_match "... and which BTL that implies between ranks $1 and $2 ($want)" "^#   rank $1 <-> rank $2: $want\$" "$(cat "$T/a.out")"
done
# Every round each rank sends each peer --bytes; the least vmshm must carry
# between two co-located ranks is 20 rounds of 4096 bytes each way.
MIN=$((20 * 4096))
for a in 0 1 2 3; do
	for b in 0 1 2 3; do
		[ $a = $b ] && continue
		eval "na=\$n$a nb=\$n$b"
		if [ "$na" = "$nb" ]; then
			tx=$(counter a $a $b tx_bytes) rx=$(counter a $b $a rx_bytes)
			check "rank $a -> rank $b (same node $na): vmshm carried the exchange (${tx:-none} bytes sent, ${rx:-none} received)" \
				test "${tx:-0}" -ge "$MIN" -a "${tx:-0}" = "${rx:-x}"
			check_eq "... Open MPI chose vmshm, not tcp" "1 0" "$(bml a $a vmshm $b) $(bml a $a tcp $b)"
		else
			check_eq "rank $a -> rank $b ($na, $nb): tcp, no vmshm" "1 0 0" \
				"$(bml a $a tcp $b) $(bml a $a vmshm $b) $(grep -c "rank $a\] vmshm-stats: peer $b " "$T/a.out")"
		fi
	done
done

job b -- "${ARGS[@]}"
check_eq "a second run with the same arguments prints the same lines" "$(lines a)" "$(lines b)"

job novmshm --no-vmshm -- "${ARGS[@]}"
check_eq "--no-vmshm: the same lines" "$(lines a)" "$(lines novmshm)"
check_eq "... and vmshm carried nothing (no counters, no bml choice of it)" "0 0" \
	"$(grep -c 'vmshm-stats' "$T/novmshm.out") $(grep -c 'Using vmshm btl' "$T/novmshm.out")"
check_eq "... as rank 0 expected: tcp between all 6 pairs of guests" 6 "$(grep -c '^#   rank [0-3] <-> rank [0-3]: tcp expected$' "$T/novmshm.out")"

job rounds -- --rounds 21 --bytes 4096 --every 5
check_eq "--rounds 21: the reference's lines for 21 rounds" "$(ref --ranks 4 --rounds 21 --bytes 4096 --every 5)" "$(lines rounds)"
check "... whose final checksum is not the 20 rounds' one" test -n "$(final "$(lines rounds)")" -a "$(final "$(lines rounds)")" != "$(final "$(lines a)")"

job scratch --scratch 16M -- --rounds 20 --bytes 65536 --every 5 --scratch /scratch
check_eq "--scratch (each guest writes, syncs and re-reads its /scratch every round): the reference's lines" \
	"$(ref --ranks 4 --rounds 20 --bytes 65536 --every 5 --scratch /scratch)" "$(lines scratch)"

# -- stopped mid-run: what a checkpoint's pause does to it --------------------
# The state file is written by rank 0 in g0, in the job's working folder
# (this checkout, shared into the guests).
ST=$(mktemp "$VHPC_TOP/$B/cksum-state.XXXXXX")
at_exit "rm -f '$ST' '$ST.tmp'"
rm -f "$ST"
state_round() { sed -n 's/^round \([0-9]*\) of .*/\1/p' "$ST" 2>/dev/null; }
past_round() { [ "$(state_round)" -ge "$1" ] 2>/dev/null; }
# job_cgroups ID: the cgroups of job ID's guests on every node
job_cgroups() {
	local d
	for d in "$CL_DIR"/run-n*/jobs/"$1"x*; do
		[ -d "$d" ] && find /sys/fs/cgroup -maxdepth 4 -type d -path "*/vhpc/$(basename "$d")"
	done
}
# Through the cgroup v1 freezer where the machine has one (hybrid
# hierarchies, like this VM's), else cgroup v2's cgroup.freeze: the node
# agent's own teardown thaws either.
freeze_dirs() {
	local c v1=
	for c in $CGS; do [ -f "$c/freezer.state" ] && v1+="$c "; done
	if [ -n "$v1" ]; then echo "$v1"; else for c in $CGS; do [ -f "$c/cgroup.freeze" ] && echo "$c"; done; fi
}
freeze() {  # 1 or 0
	local c
	for c in $(freeze_dirs); do
		if [ -f "$c/freezer.state" ]; then
			if [ "$1" = 1 ]; then echo FROZEN; else echo THAWED; fi >"$c/freezer.state"
		else
			echo "$1" >"$c/cgroup.freeze"
		fi
	done
}
all_frozen() {
	local c
	for c in $(freeze_dirs); do
		grep -qx FROZEN "$c/freezer.state" 2>/dev/null || grep -qx 'frozen 1' "$c/cgroup.events" 2>/dev/null || return 1
	done
}
sub() { (cd "$VHPC_TOP" && vc submit --json "${JOBARGS[@]}" "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'); }
F=$(sub -- "$CK" --rounds 30 --bytes 4096 --every 1 --sleep-ms 100 --state "$ST")
check "a 30-round run ($F) with --sleep-ms 100 says in its state file when it is past round 5" poll_until 30 past_round 5
CGS=$(job_cgroups "$F")
check_eq "its guests' cgroups to freeze on both nodes: ${F}x1 and ${F}x2" "${F}x1 ${F}x2" "$(for c in $(freeze_dirs); do basename "$c"; done | sort | tr '\n' ' ' | sed 's/ $//')"
at_exit "freeze 0"
freeze 1
check "frozen (cgroup freezer) mid-run" poll_until 10 all_frozen
r1=$(state_round)
sleep 2
r2=$(state_round)
freeze 0
check "it stood still for 2 s at round $r1 of 30 (then $r2)" test -n "$r1" -a "$r1" = "$r2" -a "${r1:-30}" -lt 30
vc wait "$F" >/dev/null 2>&1
check_eq "thawed, it completes" 0 "$?"
vc output "$F" >"$T/frozen.out" 2>&1
check_eq "... with the reference's lines for every round" "$(ref --ranks 4 --rounds 30 --bytes 4096 --every 1)" "$(lines frozen)"
check_match "... and its state file says it finished, with the final checksum" \
	"^round 30 of 30 checksum $(final "$(lines frozen)") ranks 4 final\$" "$(cat "$ST")"

# -- a scratch file that lost what was written: the job fails, naming it -------
rm -f "$ST"
S=$(sub --scratch 16M -- "$CK" --rounds 40 --bytes 4096 --every 1 --sleep-ms 100 --state "$ST" --scratch /scratch)
check "a 40-round --scratch run ($S) gets past round 3" poll_until 30 past_round 3
g1=$(cat "$CL_DIR"/run-n*/jobs/"$S"x*/g1/pid 2>/dev/null)
check "guest g1's /scratch/ckpt_cksum.1 is there (init pid ${g1:-none})" test -n "$g1" -a -f "/proc/$g1/root/scratch/ckpt_cksum.1"
truncate -s 0 "/proc/$g1/root/scratch/ckpt_cksum.1"
vc wait "$S" >/dev/null 2>&1
rc=$?
vc output "$S" >"$T/lost.out" 2>&1
check "the job fails ($rc)" test "$rc" != 0
check_match "rank 1 says the previous round's block of its file is gone" \
	"ckpt_cksum: rank 1 round [0-9]+: (cannot read the previous round's block of /scratch/ckpt_cksum\.1 \(truncated\?\)|the previous round's block of /scratch/ckpt_cksum\.1 is not what was written)" \
	"$(cat "$T/lost.out")"
check "and prints no final checksum" sh -c "! grep -q '^final checksum' '$T/lost.out'"

cl_wait_nodes_idle 30 || fail "the nodes remove the jobs"
check_eq "nothing is left of the jobs" "$before" "$(cl_leftovers)"
done_testing
