# For the wire's attacks (tests/security/wire-*.t, conn-*.t, munge-*.t):
# the tests' cluster of namespaces (tests/cluster/cluster-lib.sh) with a
# controller and no image (none of these attacks needs a job), and what
# they measure of a daemon.  Source after tests/lib.sh.
need_cluster
RELAY=$VHPC_TOP/$B/testbin/wirerelay
FLOOD=$VHPC_TOP/$B/testbin/connflood
WP=$VHPC_TOP/$B/testbin/wireprobe
for p in "$RELAY" "$FLOOD" "$WP"; do
	[ -x "$p" ] || { echo "Bail out! $p is not built (make tests)"; exit 1; }
done
. "$VHPC_TOP/tests/cluster/cluster-lib.sh"

# wl_up NODES: the hub, NODES node namespaces, munged and vhpc-ctld
wl_up() {
	cl_net_up "$1" && cl_munge_up && CL_NO_PUSH=1 cl_ctld_up || { echo "Bail out! cluster set-up"; exit 1; }
}

# wl_status PID FIELD: a number of /proc/PID/status (Threads; VmRSS in kB)
wl_status() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }

# wl_bg NS LOG CMD...: CMD in namespace NS in the background, its output in
# LOG, killed at exit.  nsenter execs CMD, so $! is CMD's own pid (a
# function run with & would leave CMD behind when its subshell is killed).
wl_bg() {
	local ns=$1 log=$2
	shift 2
	nsenter --net=/run/netns/"$ns" -- "$@" >"$log" 2>&1 &
	WL_BG=$!
	at_exit "kill -9 $WL_BG"
}
