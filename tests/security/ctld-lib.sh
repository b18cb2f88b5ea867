# For the attacks on vhpc-ctld (tests/security/{spool,queue,store}-*.t):
# a cluster of tests/cluster/cluster-lib.sh whose cluster file sets the
# controller's limits.  Source it first; it sets T (the cluster's folder).
. "$(dirname "$0")/../lib.sh"
need_cluster
: "${CL:=vsc$$}"
. "$(dirname "$0")/../cluster/cluster-lib.sh"
T=$CL_DIR

# ctld_cluster_file KEY=VALUE...: the project's cluster file with these
# keys of its `ctld:` section set (a commented-out key too), for every
# program of the test (VHPC_CLUSTER).
ctld_cluster_file() {
	local kv args=(-e '')
	for kv in "$@"; do args+=(-e "s|^  #\{0,1\} *${kv%%=*}: .*|  ${kv%%=*}: ${kv#*=}|"); done
	sed "${args[@]}" "$VHPC_TOP/configs/cluster.yaml" >"$T/cluster.yaml" || return 1
	export VHPC_CLUSTER=$T/cluster.yaml
}

# ctld_cluster_up N [vhpc-ctld options]: the hub, munge, vhpc-ctld and N
# nodes registered, or the test ends there (with vhpc-ctld's log); the
# parts: ctld_up_or_quit [vhpc-ctld options], nodes_up_or_quit N.
ctld_cluster_up() {
	local n=$1
	shift
	cl_net_up "$n" && cl_munge_up || { fail "cluster set-up"; done_testing; exit 1; }
	ctld_up_or_quit "$@"
	[ "$n" = 0 ] || nodes_up_or_quit "$n"
}
ctld_up_or_quit() {
	cl_ctld_up "$@" && return 0
	fail "vhpc-ctld starts"
	diag "$(tail -20 "$T/ctld.log" 2>/dev/null)"
	done_testing
	exit 1
}
nodes_up_or_quit() {
	local i
	for ((i = 1; i <= $1; i++)); do cl_node_up "$i" || fail "node $i starts"; done
	cl_wait_nodes_up "$1" && return 0
	fail "$1 nodes register"
	done_testing
	exit 1
}

# small_fs SIZE: a tmpfs of that size at $FS ($T/fs), unmounted at exit
# (after the daemons have stopped); free_kib: what it has free.
FS=$T/fs
small_fs() {
	mkdir "$FS" && mount -t tmpfs -o "size=$1,mode=0700" "vhpc-test-$CL" "$FS" ||
		{ fail "mount a tmpfs"; done_testing; exit 1; }
	at_exit "umount '$FS'"
}
free_kib() { df -k --output=avail "$FS" | tail -n 1 | tr -d ' '; }

# sub ARGS / nb_sub ARGS: vhpc submit as root / as nobody; the job's id
sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
nb_sub() { as_nobody "$BIN/vhpc" submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
nb() { as_nobody "$BIN/vhpc" "$@" 2>&1; }

# ctld_answers: vhpc-ctld runs and answers a user's request.
ctld_answers() { kill -0 "$CTLD_PID" 2>/dev/null && nb queue >/dev/null; }

# OTHER_JOB: another user's job (root's) whose output is known line by line
OTHER_JOB='i=0; while [ $i -lt 2000 ]; do i=$((i + 1)); echo "other job line $i"; done'
other_output() { sh -c "$OTHER_JOB"; }
