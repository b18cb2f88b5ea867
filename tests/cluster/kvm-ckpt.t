#!/usr/bin/env bash
# timeout: 420
# needs: hardware-virtualization
# lab-prepare: tests/cluster/kvm-ckpt-image
# A kvm job's checkpoint and restart, end to end (issue 36, item 4; in the
# virtualization lab, nested/TCG): a real vhpc-ctld, two vhpcd nodes, one
# checkpoints dir for both (shared: true).
#  - a 3-guest job runs ckpt_cksum (tests/mpi/README.md), a round a
#    second: node 1 has two cores and takes g0 and g1, which share its
#    vmshm region (ivshmem), node 2 takes g2, which talks TCP to both; it
#    is checkpointed with --stop mid-run: it ends CHECKPOINTED (exit 75),
#    nothing of it is left on either node (the region included), and
#    `vhpc checkpoints` lists the checkpoint;
#  - `vhpc restart NAME`: the new job, on the same layout with a new
#    region holding the saved one's bytes, ends with exit 0 and exactly
#    the reference's lines (--reference, computed on the host), each round
#    once: its output goes on from where the checkpoint took it, through
#    vmshm and TCP both;
#  - one byte of a guest's snapshot changed: the restart is refused, the
#    node naming the file, and nothing of the refused job is left;
#  - the same, the part's sha256 file sealed again to match: vhpc-hv
#    refuses the snapshot's own checksum and the restart fails after 1
#    attempt, the checkpoint marked damaged.
# Prints as diagnostics the checkpoint's size, the nodes' save times, the
# restore time and the standstill, per GiB of guest RAM (nested/TCG).
. "$(dirname "$0")/../lib.sh"
CL=vkc$$
CKDIR=/tmp/vhpct-kvmckpt.$$
mkdir -m 700 "$CKDIR" || { echo "Bail out! cannot make $CKDIR"; exit 1; }
at_exit "rm -rf '$CKDIR'"
KVM_CLUSTER_EXTRA=$(printf 'checkpoints:\n  dir: %s\n  shared: true' "$CKDIR")
KVM_IMAGE_SCRIPT=$(dirname "$0")/kvm-ckpt-image
KVM_PUSH_IMAGE=kvmckpt
KVM_NODE_ARGS_1="--cpus 0-1"
. "$(dirname "$0")/kvm-lib.sh"
CK=$VHPC_TOP/$B/testbin/ckpt_cksum
[ -x "$CK" ] || { echo "Bail out! $CK is not built (make tests)"; exit 1; }

ROUNDS=12
ARGS=(--rounds $ROUNDS --every 1 --bytes 4096)
REF=$("$CK" --reference --ranks 3 "${ARGS[@]}")
# guests_on J: "g<i>:n<k>" for each guest, in guest order
guests_on() { job_json "$1" | grep -o '"guest":[0-9]*,"node":"n[0-9]"' | sed 's/"guest":\([0-9]*\),"node":"\(n[0-9]\)"/g\1:\2/' | sort | tr '\n' ' ' | sed 's/ $//'; }
region_of() { sed -n "s/.*job $1x[0-9a-z]*: vmshm region \(\/[^ ]*\) .*/\1/p" "$CL_DIR/n1.log" | tail -1; }

KVM3=(--driver kvm -N 3 -n 3 --vcpus 1 --mem 384M --timeout 600 -x OMPI_MCA_btl_base_verbose=1)
J=$(sub "${KVM3[@]}" -- /usr/local/bin/ckpt_cksum "${ARGS[@]}" --sleep-ms 1000)
check_match "the job is accepted" '^[0-9]+$' "$J"
check "job $J runs" wait_state "$J" RUNNING 200
check_eq "g0 and g1 share node 1, g2 is on node 2" "g0:n1 g1:n1 g2:n2" "$(guests_on "$J")"
region=$(region_of "$J")
check "node 1 made a vmshm region for the job ($region)" test -n "$region" -a -f "$region"
pids=$(hv_pids "$J")
cksum_midrun "$J"
vc output "$J" >"$T/j.out" 2>&1
check_match "ranks 0 and 1 are two guests of one host with the region: vmshm expected" \
	"rank 0 <-> rank 1: same host, two guests: vmshm expected" "$(cat "$T/j.out")"
check_match "... and Open MPI chose the vmshm BTL between guests" "mca: bml: Using vmshm btl for send to" "$(cat "$T/j.out")"
check_match "rank 2 is on the other node: TCP" "rank 0 <-> rank 2: tcp expected" "$(cat "$T/j.out")"
r0=$(cksum_round "$J")
cl_ckpt_stop "$J" "at round $r0"
out=$CKPT_OUT
check_eq "... no vhpc-hv of it runs" "" "$(alive "$pids")"
check "... nor its vmshm region" test ! -e "$region"
check_match "vhpc checkpoints lists $NAME" "^$NAME +$J " "$(vc checkpoints 2>&1)"
diag "$(vc checkpoints 2>&1)"

# The measurements, from the CLI and the nodes' logs (nested/TCG).
gib=$(awk 'BEGIN { print 3 * 384 / 1024 }')  # three guests of 384 MiB
bytes=$(vc checkpoints --json 2>/dev/null | tr -d ' \n' | grep -o "\"name\":\"$NAME\"[^}]*" | grep -o '"bytes":[0-9]*' | head -1 | cut -d: -f2)
still=$(sed -n 's/.*stood still \([0-9.]*\) s.*/\1/p' <<<"$out")
diag "nested/TCG, lab L1 on this 2-core machine: 3 guests x 384 MiB = $gib GiB of guest RAM"
diag "checkpoint size: ${bytes:-?} bytes ($(awk -v b="${bytes:-0}" -v g="$gib" 'BEGIN { printf "%.1f MiB, %.1f%% of guest RAM", b / 1048576, 100 * b / (g * 1073741824) }'))"
diag "standstill (first pause to end of the save, --stop): ${still:-?} s, $(awk -v s="${still:-0}" -v g="$gib" 'BEGIN { printf "%.2f", s / g }') s per GiB"
for i in 1 2; do
	ms=$(sed -n "s/.*job $J: checkpoint $NAME: .* in \([0-9]*\) ms.*/\1/p" "$CL_DIR/n$i.log" | tail -1)
	g=$((3 - i))  # node 1 holds two guests, node 2 one
	diag "node n$i saved its part ($g guest(s) of 384 MiB) in ${ms:-?} ms: $(awk -v m="${ms:-0}" -v g=$g 'BEGIN { printf "%.2f", m / 1000 / (0.375 * g) }') s per GiB"
done

restart_running "$NAME"
diag "restart to RUNNING (all 3 guests restored and resumed): $RESTART_MS ms, $(awk -v n=$RESTART_MS -v g="$gib" 'BEGIN { printf "%.2f", n / 1000 / g }') s per GiB (nested/TCG)"
rpids=$(hv_pids "$R")
check_eq "the restarted job has the same layout" "g0:n1 g1:n1 g2:n2" "$(guests_on "$R")"
rregion=$(region_of "$R")
check "... and a vmshm region of its own on node 1 ($rregion)" test -n "$rregion" -a -f "$rregion" -a "$rregion" != "$region"
cksum_ends "$R" "$REF" "$r0"
check "nothing of the restarted job is left" cl_jobs_gone
check_eq "... no vhpc-hv of it runs" "" "$(alive "$rpids")"

# One byte of guest g0's largest file changed (its size kept): the node
# checks the part's sha256 file before it restores anything.
f=$(find "$CKDIR/$NAME/g0" -type f -printf '%s %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2-)
check "the checkpoint still has guest g0's files (${f:-none})" test -n "$f" -a -f "$f"
off=$(( $(stat -c %s "$f") / 2 ))
b=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
printf "\\$(printf %03o $(( (b ^ 1) & 255 )))" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
fname=${f#"$CKDIR/$NAME/"}
out=$(vc restart "$NAME" 2>&1)
diag "$out"
R2=$(sed -n 's/^Submitted job \([0-9]*\):.*/\1/p' <<<"$out")
refused() { grep -h "$fname" "$CL_DIR"/n[12].log | grep -qiE "sha256|differ|checksum|refus"; }
check "the restart of the changed checkpoint is refused by the node, naming $fname" poll_until 90 refused
diag "$(grep -h "$fname" "$CL_DIR"/n[12].log | tail -2)"
check "... and the job does not run" wait_state "$R2" 'FAILED|CANCELLED|PENDING' 60
diag "job $R2: $(job_state "$R2"): $(job_field "$R2" reason)"
job_state_is "$R2" PENDING && vc cancel "$R2" >/dev/null 2>&1
check "nothing of the refused job is left" cl_jobs_gone

# The same change with the part's sha256 file sealed again to match it (a
# snapshot saved wrong, or changed by someone who could write both): the
# node's check passes, vhpc-hv refuses the snapshot's own checksum, and
# the restart fails at once, the checkpoint marked damaged, not tried three
# times as a passing failure is.
part=$(grep -l "  $fname\$" "$CKDIR/$NAME"/part.g*.sha256 2>/dev/null | head -1)
check "the part file listing $fname is there (${part##*/})" test -n "$part"
sum=$(sha256sum "$f" | cut -d' ' -f1)
sed -i "s|^[0-9a-f]\{64\}  $fname\$|$sum  $fname|" "$part"
out=$(vc restart "$NAME" 2>&1)
diag "$out"
R3=$(sed -n 's/^Submitted job \([0-9]*\):.*/\1/p' <<<"$out")
check "the restart of the resealed checkpoint fails" wait_state "$R3" FAILED 120
r3=$(job_json "$R3")
diag "job $R3: $r3"
check_match "... at once, after 1 attempt" '"attempts":1,' "$(tr -d ' ' <<<"$r3")"
check_match "... as damaged, vhpc-hv's words quoted" \
	'is damaged, not tried again.*(checksum mismatch|truncated|the snapshot to restore is damaged)' "$r3"
check "nothing of the refused job is left" cl_jobs_gone
lab_check "$CL_DIR"/*.log "$T"/*.out
done_testing
