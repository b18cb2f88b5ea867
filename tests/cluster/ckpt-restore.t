#!/usr/bin/env bash
# timeout: 120
# A node's checks before it restores a job from a checkpoint (issue 36;
# job_prepare with restore, scheduler/PROTOCOL.md), on a loopback cluster
# with one vhpcd and container guests: the job_prepare is a real one (a
# running job's, from its job.json) sent again for another job with
# restore: {ckpt}.  Each is refused naming the problem, before or after
# the job's resources were made, and nothing of the refused jobs is left:
#  - a checkpoint that is not in the node's checkpoints.dir;
#  - <dir>/<name> swapped for a link to a folder of the attacker's (not
#    followed, the folder's files not read);
#  - a part without its part file (not whole);
#  - a snapshot file with one byte changed, one truncated (named, with
#    the part file that says so);
#  - a whole part: verified, then the container driver's restore refuses
#    it (CRIU cannot run on this host's kernel, or, where it can, the
#    part holds no CRIU image), and the job's network, dirs and cgroups
#    go again.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
WP=$VHPC_TOP/$B/testbin/wireprobe
[ -x "$WP" ] || { echo "Bail out! $WP is not built (make tests)"; exit 1; }
command -v jq >/dev/null || skip_all "jq is not installed"
CL=vcr$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR
CK=$T/ckpt
mkdir -m 700 "$CK" "$T/theirs"
{ cat "$VHPC_TOP/configs/cluster.yaml"; printf 'checkpoints:\n  dir: %s\n  shared: true\n' "$CK"; } >"$T/cluster.yaml"
export VHPC_CLUSTER=$T/cluster.yaml

cl_net_up 1 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
cl_node_up 1 || fail "node 1 starts"
check "node 1 registers" cl_wait_nodes_up 1

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
J=$(sub -N 1 --vcpus 1 --timeout 120 -- sleep 60)
check "job $J runs" wait_state "$J" RUNNING 60
local_of() { sed -n "s/.*job $1 (\([0-9a-z]*x[0-9a-z]*\)).*/\1/p" "$CL_DIR/n1.log" | head -1; }
L=$(local_of "$J")
prep=$(cat "$T/run-n1/jobs/$L/job.json" 2>/dev/null)
check_match "its job_prepare is kept in its job dir" '"type": *"job_prepare"' "$prep"

# restore NAME N: job_prepare of job 90000+N, a checkpoint's restore (its
# guest may share job $J's one core)
R=0
restore() {
	local id=$((90000 + $2)) m
	m=$(jq -c --arg c "$1" --argjson id "$id" --arg l "${id}x1" --argjson vni "$((70000 + $2))" \
		'.job = $id | .local = $l | .vni = $vni | .oversubscribe = true | .restore = {ckpt: $c} | .v = 3' <<<"$prep")
	# the reply as JSON writes it, its slashes unescaped
	cl_in "$CL_HUB" "$WP" send 198.18.0.11:6818 "$m" 2>&1 | sed 's#\\/#/#g'
}
gone() { [ ! -e "$T/run-n1/jobs/$((90000 + $1))x1" ] && ! ip netns list | grep -q "vhpc-$((90000 + $1))x1"; }

r=$(restore c1 1)
check_match "a checkpoint that is not there is refused, named" \
	"\"type\":\"error\".*checkpoint c1 in $CK on node n1: c1: No such file" "$r"
check_match "... as damaged (code ckpt_damaged: the controller tries it no more)" '"code":"ckpt_damaged"' "$r"
check "... and nothing of the job is left" gone 1

# <dir>/c2 a link to the attacker's folder, which holds a part that
# would verify: not followed.
mkdir -m 700 "$T/theirs/g0"
echo "their state" >"$T/theirs/g0/snapshot"
(cd "$T/theirs" && printf '# size g0/snapshot %s\n%s\n' "$(stat -c %s g0/snapshot)" "$(sha256sum g0/snapshot)" >part.g0.sha256)
ln -s "$T/theirs" "$CK/c2"
r=$(restore c2 2)
check_match "a checkpoint folder swapped for a link is refused" \
	'"type":"error".*c2: not a directory \(a link is never followed\)' "$r"
check_match "... as damaged" '"code":"ckpt_damaged"' "$r"
check "... and nothing of the job is left" gone 2

# c3: a part as a node writes it (g0's files, then the part file).
mkdir -m 700 "$CK/c3" "$CK/c3/g0"
head -c 100000 /dev/urandom >"$CK/c3/g0/snapshot"
echo "0123456789abcdef" >"$CK/c3/g0/image"
r=$(restore c3 3)
check_match "a part without its part file is refused" \
	'"type":"error".*c3 on node n1: this node.s part of the checkpoint is not whole.*part.g0.sha256: No such file' "$r"
check_match "... as damaged" '"code":"ckpt_damaged"' "$r"
check "... and nothing of the job is left" gone 3
(cd "$CK/c3" && for f in g0/image g0/snapshot; do
	printf '# size %s %s\n%s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f")"; done >part.g0.sha256)
cp "$CK/c3/g0/snapshot" "$T/snapshot.good"
printf 'X' | dd of="$CK/c3/g0/snapshot" bs=1 seek=5000 conv=notrunc status=none
r=$(restore c3 4)
check_match "a snapshot with one byte changed is refused, naming it" \
	'"type":"error".*g0/snapshot does not match its sha256 in part.g0.sha256' "$r"
check_match "... as damaged" '"code":"ckpt_damaged"' "$r"
check "... and nothing of the job is left" gone 4
truncate -s 4096 "$CK/c3/g0/snapshot"
r=$(restore c3 5)
check_match "a truncated snapshot is refused, naming it" \
	'"type":"error".*g0/snapshot has 4096 bytes, part.g0.sha256 says 100000' "$r"
check_match "... as damaged" '"code":"ckpt_damaged"' "$r"
check "... and nothing of the job is left" gone 5
cp "$T/snapshot.good" "$CK/c3/g0/snapshot"
chmod 600 "$CK/c3/g0/snapshot"
r=$(restore c3 6)
# Verified, the part goes to the container driver, whose restore runs
# CRIU: here either CRIU cannot run on this kernel (said before anything
# of the guest is made) or it refuses a snapshot that is no CRIU image.
check_match "a whole part is verified, then the container driver's restore refuses it, CRIU's words" \
	'"type":"error".*restoring guest g0.*CRIU|"type":"error".*guest g0: CRIU .* cannot checkpoint any process on this kernel' "$r"
undamaged() { ! printf '%s' "$1" | grep -q ckpt_damaged; }
check "... which is not the checkpoint's fault: no code ckpt_damaged" undamaged "$r"
check_match "... after the job was being made here" "job 90006x1: 1 guest x 1 vCPU" "$(cat "$T/n1.log")"
check "... and nothing of the job is left" gone 6
check_eq "the checkpoint is left as it was" "$(cd "$CK/c3" && sha256sum -c --quiet part.g0.sha256 2>&1)" ""
check_eq "the attacker's folder was not written" "g0 part.g0.sha256" "$(ls "$T/theirs" | tr '\n' ' ' | sed 's/ $//')"

vc cancel "$J" >/dev/null 2>&1
check "job $J ends" wait_state "$J" CANCELLED 30
check "the node removes it" cl_wait_nodes_idle 30
cl_node_kill 1 TERM
check_eq "nothing is left" "$before" "$(cl_leftovers)"
done_testing
