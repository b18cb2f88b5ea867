#!/usr/bin/env bash
# timeout: 600
# lab-kernel: @default
# lab-prepare: tests/cluster/ctr-image-prepare
# A container job whose two guests share a node and a vmshm region,
# checkpointed and restarted on another node (issue 36, item 3), where CRIU
# works: the lab's L1 (Debian 12's kernel 6.1; see ckpt-ctr-lab.t).
# Submitted with --no-single-copy: vmshm's region, and no pod, so each
# guest keeps its own user and PID namespace, which runc can checkpoint.
# Two nodes of two cpus each (vhpc-ctld, two vhpcd, one checkpoints dir):
#  - both 1-vCPU guests land on one node; it has a vmshm region and no pod
#    (no vhpc-pod, the guests' PID namespaces differ);
#  - ckpt_cksum (tests/mpi/README.md), 2 ranks, a round a second: its ranks
#    see the region, and Open MPI uses the vmshm BTL between them;
#  - `vhpc checkpoint J --stop` mid-run: CHECKPOINTED (75), nothing left;
#  - the node is drained, `vhpc restart NAME` brings both guests back on
#    the other node, with the region put back before them; the job ends
#    with exit 0 and exactly the reference's lines (computed on the host),
#    each round once;
#  - nothing of either job is left.
# Prints the checkpoint's size, the standstill and the restart time
# (nested/TCG).
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
[ "$(nproc)" -ge 2 ] || skip_all "a node needs two cpus of this machine for its two guests"
CKB=$VHPC_TOP/$B/testbin/ckpt_cksum
[ -x "$CKB" ] || { echo "Bail out! $CKB is not built (make tests)"; exit 1; }
CL=vcv$$
. "$(dirname "$0")/ckpt-ctr-lib.sh"
cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
mark "vhpc-ctld up, the image pushed"
before=$(cl_leftovers)
for i in 1 2; do cl_node_up $i --cpus 0-1 || fail "node $i starts with two cpus"; done
check "two nodes register" cl_wait_nodes_up 2

# pod_of N LOCAL: the pid of the job's pod init on node N, if any
pod_of() { pgrep -x vhpc-pod | while read -r p; do grep -q ":/vhpc/$2/pod\$" /proc/"$p"/cgroup 2>/dev/null && echo "$p"; done; }
pidns_of() { local f; for f in "$CL_DIR"/run-n"$1"/jobs/"$2"/g*/pid; do readlink "/proc/$(cat "$f")/ns/pid"; done | sort -u | wc -l; }
# look N LOCAL WHAT: node N's own view of the job: both guests, a region, no pod
look() {
	local n=$1 l=$2 what=$3
	check_eq "$what: both guests are on node n$n" 2 "$(ls -d "$CL_DIR"/run-n"$n"/jobs/"$l"/g*/pid 2>/dev/null | wc -l)"
	check "$what: the job has a vmshm region there" test -f "$CL_DIR/run-n$n/jobs/$l/vmshm/region"
	check_eq "$what: no pod (no vhpc-pod of the job)" "" "$(pod_of "$n" "$l")"
	check_eq "$what: each guest has a PID namespace of its own" 2 "$(pidns_of "$n" "$l")"
}

ROUNDS=30
ARGS=(--rounds $ROUNDS --every 1 --bytes 4096)
REF=$("$CKB" --reference --ranks 2 "${ARGS[@]}")
J=$(sub -N 2 --vcpus 1 --driver container --no-single-copy --timeout 400 --bind "$VHPC_TOP/$B/testbin:/opt/vt:ro" \
	-x OMPI_MCA_btl_base_verbose=1 -- /opt/vt/ckpt_cksum "${ARGS[@]}" --sleep-ms 1000)
check_match "the job is accepted" '^[0-9]+$' "$J"
check "job $J runs" wait_state "$J" RUNNING 150
mark "job $J runs"
held=$(nodes_of "$J")
check_match "its guests are on one node (n${held% })" '^[12] $' "$held"
H=${held% }
look "$H" "$(local_of "$J" "$H")" "before"
cksum_midrun "$J"
vc output "$J" >"$T/j.out" 2>&1
check_match "rank 0 sees both ranks on one host with the region: vmshm expected" \
	"rank 0 <-> rank 1: same host, two guests: vmshm expected" "$(cat "$T/j.out")"
check_match "Open MPI chose the vmshm BTL between the two guests" "mca: bml: Using vmshm btl for send to" "$(cat "$T/j.out")"
r0=$(cksum_round "$J")
cl_ckpt_stop "$J" "at round $r0"
out=$CKPT_OUT
bytes=$(vc checkpoints --json 2>/dev/null | tr -d ' \n' | grep -o "\"name\":\"$NAME\"[^}]*" | grep -o '"bytes":[0-9]*' | head -1 | cut -d: -f2)
still=$(sed -n 's/.*stood still \([0-9.]*\) s.*/\1/p' <<<"$out")
diag "nested/TCG, lab L1 on this 2-core machine: 2 container guests on one node, vmshm without single copy"
diag "checkpoint size: ${bytes:-?} bytes; standstill (--stop): ${still:-?} s"
diag "node n$H: $(grep "job $J: checkpoint $NAME:" "$CL_DIR/n$H.log" | tail -1 | sed 's/.*checkpoint [^:]*: //')"
diag "the checkpoint holds: $(cd "$CK/$NAME" 2>/dev/null && ls | tr '\n' ' ')"

# The restart goes to the other node: the one that held the job is drained.
O=$((3 - H))
out=$(vc node drain "n$H" 2>&1); rc=$?
check_eq "node n$H, which held the job, is drained" 0 "$rc"
[ "$rc" = 0 ] || diag "$out"
at_exit "nsenter --net=/run/netns/$CL_HUB -- '$BIN/vhpc' node undrain n$H"
cl_restart "$NAME" 'RUNNING|FAILED|EXITED|COMPLETED'
job_state_is "$R" FAILED && grep -B2 -A32 "CRIU's log" "$CL_DIR/n$O.log" | head -40 | sed "s/^/# n$O: /"
diag "restart to RUNNING (both guests restored and resumed): $RESTART_MS ms (nested/TCG)"
check_eq "the restarted job $R is on n$O" "$O " "$(nodes_of "$R")"
job_state_is "$R" RUNNING && look "$O" "$(local_of "$R" "$O")" "after the restart"
cksum_ends "$R" "$REF" "$r0"
check "nothing of the restarted job is left" cl_jobs_gone
for i in 1 2; do cl_node_kill $i TERM; done
check_eq "nothing is left" "$before" "$(cl_leftovers)"
done_testing
