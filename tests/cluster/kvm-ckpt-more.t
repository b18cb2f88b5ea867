#!/usr/bin/env bash
# timeout: 420
# needs: hardware-virtualization
# lab-prepare: tests/cluster/kvm-ckpt-image
# The kvm checkpoint cases kvm-ckpt.t leaves out (issue 36, item 4; in the
# virtualization lab, nested/TCG), with one job, as every L2 boot costs
# much under TCG: a real vhpc-ctld, three vhpcd nodes, one checkpoints dir
# for all (shared: true) on a tmpfs of the test's own.  A 2-guest job runs
# ckpt_cksum (a round a second, its own scratch blocks too) and, in each
# guest, scratch_log writing numbered, checksummed, fdatasync'ed records
# to /scratch all the while (tests/mpi/scratch_log.c):
#  - full disk: the tmpfs is 2 MiB; `vhpc checkpoint` (no --stop) fails
#    naming the folder, the job keeps running, nothing of the partial
#    checkpoint is left (files or record); the tmpfs made 512 MiB, a
#    checkpoint --stop succeeds;
#  - replaced image: another image (kvmckpt2) is pushed under the job's
#    image name; the restart runs the checkpoint's image id;
#  - another node: a node that held a part is drained; the restart puts
#    that part on the third node;
#  - busy scratch disk: every record written before the checkpoint is read
#    back intact at the end, in each guest;
#  - and the restarted job ends with exactly the reference's lines.
# Prints the sizes and times it saw as diagnostics (nested/TCG).
. "$(dirname "$0")/../lib.sh"
CL=vkm$$
CKDIR=/tmp/vhpct-kvmckpt2.$$
mkdir -m 700 "$CKDIR" || { echo "Bail out! cannot make $CKDIR"; exit 1; }
# Registered first, so run last: after the nodes are gone.
at_exit "umount '$CKDIR' || umount -l '$CKDIR'; rmdir '$CKDIR'"
mount -t tmpfs -o size=2m,mode=0700 vhpct-ckpt "$CKDIR" || { echo "Bail out! cannot mount a tmpfs on $CKDIR"; exit 1; }
KVM_CLUSTER_EXTRA=$(printf 'checkpoints:\n  dir: %s\n  shared: true' "$CKDIR")
KVM_IMAGE_SCRIPT=$(dirname "$0")/kvm-ckpt-image
KVM_PUSH_IMAGE=kvmckpt
KVM_NODES=3
# Not one node's cache seeded (kvm-lib.sh): the node that takes a part at
# the restart must be one that never had the image.
KVM_SEED_NODES=none
. "$(dirname "$0")/kvm-lib.sh"
CK=$VHPC_TOP/$B/testbin/ckpt_cksum
[ -x "$CK" ] || { echo "Bail out! $CK is not built (make tests)"; exit 1; }

ROUNDS=18
ARGS=(--rounds $ROUNDS --every 1 --bytes 4096 --scratch /scratch)
REF=$("$CK" --reference --ranks 2 "${ARGS[@]}")
# Each rank: its scratch writer in the background, ckpt_cksum, then the
# writer stopped and its file read back.
SH='f=/scratch/log.$OMPI_COMM_WORLD_RANK; /usr/local/bin/scratch_log write "$f" & w=$!
/usr/local/bin/ckpt_cksum "$@"; rc=$?; kill $w; wait $w; /usr/local/bin/scratch_log check "$f" || rc=1; exit $rc'
# written JOB RANK: the last count scratch_log printed for that rank's file
written() { vc output "$1" 2>/dev/null | sed -n "s|^scratch_log /scratch/log.$2: \([0-9]*\) records$|\1|p" | tail -1; }
ids() { vc image list --json 2>/dev/null | grep -o '[0-9a-f]\{64\}' | sort -u; }

J=$(sub "${KVM[@]}" --scratch 64M -- /bin/sh -c "$SH" sh "${ARGS[@]}" --sleep-ms 1000)
check_match "the job is accepted" '^[0-9]+$' "$J"
check "job $J runs" wait_state "$J" RUNNING 200
pids=$(hv_pids "$J")
held=$(nodes_of "$J")
check_eq "its 2 guests are on 2 of the 3 nodes ($held)" 2 "$(wc -w <<<"$held")"
cksum_midrun "$J"
check "scratch_log writes in both guests" poll_until 30 eval '[ -n "$(written "$J" 0)" ] && [ -n "$(written "$J" 1)" ]'

# Full disk: 2 MiB cannot take a guest's snapshot.
t0=$(date +%s%N)
out=$(vc checkpoint "$J" 2>&1); rc=$?
t1=$(date +%s%N)
diag "$out"
check "vhpc checkpoint $J on a full disk fails" test "$rc" -ne 0
check "... the error names the checkpoint folder ($CKDIR) and the lack of space" \
	eval 'grep -q "$CKDIR" <<<"$out" && grep -qi "no space" <<<"$out"'
check_eq "... the job keeps running" RUNNING "$(job_state "$J")"
check_eq "... nothing of the partial checkpoint is left in $CKDIR" "" "$(ls -A "$CKDIR" 2>&1)"
check "... nor in vhpc checkpoints" eval '! vc checkpoints 2>&1 | grep -qE "^$J\.[0-9]+ "'
diag "the failed checkpoint took $(( (t1 - t0) / 1000000 )) ms (nested/TCG)"
r1=$(cksum_round "$J")
check "... and goes on: past round $((r1 + 1))" cksum_wait "$J" $((r1 + 1)) 60
lab_crashed "$J"

mount -o remount,size=512m "$CKDIR"
check_match "the tmpfs is 512 MiB now" '^524288$' "$(df -k --output=size "$CKDIR" | tail -1 | tr -d ' ')"
w0=$(written "$J" 0) w1=$(written "$J" 1)
r0=$(cksum_round "$J")
cl_ckpt_stop "$J" "then, at round $r0; $w0 and $w1 records on the scratch disks"
out=$CKPT_OUT
check_eq "... no vhpc-hv of it runs" "" "$(alive "$pids")"
bytes=$(du -sb "$CKDIR/$NAME" 2>/dev/null | cut -f1)
still=$(sed -n 's/.*stood still \([0-9.]*\) s.*/\1/p' <<<"$out")
diag "nested/TCG: checkpoint $NAME of 2 x 384 MiB guests, each busy writing its scratch disk: ${bytes:-?} bytes on the tmpfs; stood still ${still:-?} s"

# The image replaced under the job's name after the checkpoint.
old=$(job_field "$J" image_id)
before_ids=$(ids)
out=$(vc image push kvmckpt2 --as default 2>&1); rc=$?
diag "$out"
check_eq "another image (kvmckpt2) is pushed as default, the job's image" 0 "$rc"
new=$(comm -13 <(echo "$before_ids") <(ids) | head -1)
check "... under a new id (${new:0:12}, the job ran ${old:0:12})" test -n "$new" -a "$new" != "$old"

# Another node: one that held a part is drained.
D=${held%% *}
F=
for ((i = 1; i <= KVM_NODES; i++)); do [[ " $held" == *" $i "* ]] || F=$i; done
out=$(vc node drain "n$D" 2>&1); rc=$?
check_eq "node n$D, which held a part, is drained" 0 "$rc"
[ "$rc" = 0 ] || diag "$out"
at_exit "nsenter --net=/run/netns/$CL_HUB -- '$BIN/vhpc' node undrain n$D"

restart_running "$NAME"
diag "restart to RUNNING, one part on a node that never had the job nor its image: $RESTART_MS ms (nested/TCG)"
[ "$(job_state "$R")" = RUNNING ] || diag "job $R: $(job_state "$R"): $(job_field "$R" reason)" "$(tail -n 5 "$CL_DIR"/n[0-9]*.log)"
rheld=$(nodes_of "$R")
check_eq "... on n$F (the new node) and the undrained one, not n$D" \
	"$(tr ' ' '\n' <<<"$held $F" | grep -vx "$D" | grep . | sort | tr '\n' ' ')" "$(tr ' ' '\n' <<<"$rheld" | grep . | sort | tr '\n' ' ')"
check_eq "... with the checkpoint's image id, not the one pushed since" "$old" "$(job_field "$R" image_id)"
rpids=$(hv_pids "$R")
# The restored guests' consoles, kept as they go (the job's folders go
# with it): a failed test keeps them with the daemons' logs.
( while [ -n "$(nodes_of "$R")" ]; do
	for c in "$CL_DIR"/run-n*/jobs/"$R"x*/kvm*/hv/serial; do
		[ -f "$c" ] && cp "$c" "$CL_DIR/console-$(cut -d/ -f1 <<<"${c#"$CL_DIR"/run-}")-$(basename "$(dirname "$(dirname "$c")")").log" 2>/dev/null
	done
	sleep 2
done ) &
cksum_ends "$R" "$REF" "$r0"
for k in 0 1; do
	n=$(sed -n "s|^scratch_log /scratch/log.$k: \([0-9]*\) records intact$|\1|p" "$CL_DIR/r.out")
	w=$([ $k = 0 ] && echo "$w0" || echo "$w1")
	check "rank $k's scratch records are all intact: ${n:-none} read back, $w written before the checkpoint" \
		test -n "$n" -a -n "$w" -a "${n:-0}" -ge "${w:-1}"
done
grep -E '^scratch_log .*(not what|cannot)' "$CL_DIR/r.out" | while read -r l; do diag "$l"; done
check "nothing of the restarted job is left" cl_jobs_gone
check_eq "... no vhpc-hv of it runs" "" "$(alive "$rpids")"
lab_check "$CL_DIR"/*.log "$T"/*.out
done_testing
