# The set-up the container checkpoint tests share (ckpt-ctr-lab.t,
# ckpt-ctr-vmshm-lab.t): skipped where CRIU cannot run (the lab's L1 can),
# cluster-lib.sh with one checkpoints dir for every node ($CK, shared),
# and helpers over the cluster's nodes (nodes_of and cl_jobs_gone: cluster-lib.sh).  Set CL before sourcing; source
# after tests/lib.sh and need_cluster.
command -v criu >/dev/null || skip_all "CRIU is not installed (the Debian package criu)"
if ! why=$(criu check 2>&1); then
	skip_all "CRIU cannot checkpoint any process on this kernel ($(uname -r)): $(echo "$why" | sed -n 's/^Error ([^)]*): //p' | head -1) (the lab's L1 runs one where it can)"
fi
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR
CK=$T/ckpt
mkdir -m 700 "$CK"
lab_no_default_binds
# Ours to change: lab_no_default_binds's copy in the lab, else a copy.
case ${VHPC_CLUSTER-} in "$T"/*) ;; *) cp "$VHPC_TOP/configs/cluster.yaml" "$T/cluster.yaml"; export VHPC_CLUSTER=$T/cluster.yaml ;; esac
printf 'checkpoints:\n  dir: %s\n  shared: true\n' "$CK" >>"$VHPC_CLUSTER"

t0=$SECONDS
mark() { diag "$* after $((SECONDS - t0)) s"; }
# Stopped at its time limit: where the jobs J and R were, from the logs.
on_term() {
	local f
	diag "stopped at the time limit; job ${J-?}: $(job_state "${J-0}" 2>&1); job ${R-?}: $(job_state "${R-0}" 2>&1)"
	# A line a node repeats (a job it cannot remove yet) once.
	for f in "$CL_DIR"/ctld.log "$CL_DIR"/n[0-9]*.log; do
		[ -f "$f" ] && uniq "$f" | tail -n 15 | sed "s|^|# ${f##*/}: |"
	done
	# A restore that never ended: where CRIU got to.
	for f in "$CL_DIR"/run-n*/jobs/*/criu*/restore.log; do
		[ -f "$f" ] && tail -n 20 "$f" | sed "s|^|# ${f#"$CL_DIR"/}: |"
	done
	exit 1
}
trap on_term TERM

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
# local_of JOB N: the job's local id on node N
local_of() { sed -n "s/.*job $1 (\([0-9a-z]*x[0-9a-z]*\)).*/\1/p" "$CL_DIR/n$2.log" | head -1; }
