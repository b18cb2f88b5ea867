# Shared set-up of the kvm driver's tests: root, vhpc built, the kernel
# package `make kernels` unpacked, and a run dir of the test's own, so
# nothing here sees or sweeps another test's jobs; `vhpc cleanup` at exit.
. "$(dirname "${BASH_SOURCE[0]}")/../integration/common.sh"

# kvm_setup TAG: the run dir is /run/vhpc-TAG-PID.  In the lab the jobs
# get no default binds (lab_no_default_binds) unless KVM_DEFAULT_BINDS=1.
kvm_setup() {
	need_root
	[ -x "$BIN/vhpc" ] && [ -x "$BIN/vhpc-hv" ] || skip_all "vhpc is not built"
	export VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
	[ -e "$VHPC_KERNEL_CACHE/linux-image-cloud-amd64/.complete" ] ||
		skip_all "no kernel package in $VHPC_KERNEL_CACHE (make kernels fetches it during set-up)"
	export VHPC_RUN_DIR=/run/vhpc-$1-$$
	[ "${KVM_DEFAULT_BINDS-}" = 1 ] || lab_no_default_binds
	at_exit "rm -rf '$VHPC_RUN_DIR'"
	at_exit "VHPC_RUN_DIR='$VHPC_RUN_DIR' '$BIN/vhpc' cleanup"
	# A guest the emulation crashed or hung anywhere in the test is the
	# lab's failure, said at its end whatever it checked (tests/lib.sh).
	at_exit_said 'lab_check "$T"/*'
}


# The failure tests' steps (tests/kvm/failures*.t), with RUN set to the
# vhpc run command line.
# start_job NAME ARGS...: "${RUN[@]}" ARGS in the background; sets pid, waits until
# every guest is ready (or vhpc ended), sets job.
start_job() {
	local name=$1; shift
	"${RUN[@]}" "$@" >"$T/$name.out" 2>"$T/$name.err" &
	pid=$!
	# Wall time, not looks: a look is 1 s in the lab, and 600 looks outlived
	# the test's own 300 s limit, which then printed nothing at all.  45 s
	# is 180 s in the lab, where guests are ready in about 10.
	poll_until 45 ready_or_gone "$T/$name.err" $pid
	job=$(job_id_of "$T/$name.err")
	# Not ready in time and still waiting: say where vhpc and each guest got to.
	ready_or_gone "$T/$name.err" $pid ||
		diag "$name: no guest ready in time; vhpc said:" "$(tail -n 10 "$T/$name.err")" \
			"the consoles' last lines:" "$(tail -n 15 "$VHPC_RUN_DIR"/jobs/*/kvm*/hv/serial 2>/dev/null)"
}
ready_or_gone() { grep -q 'guests\? ready in' "$1" || ! kill -0 "$2" 2>/dev/null; }
# ends_within SECONDS: vhpc ($pid) ends in time; sets rc.
ends_within() {
	local i
	for i in $(seq $(($1 * 5))); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
	if kill -0 $pid 2>/dev/null; then
		diag "still running after $1 s; the guests' consoles:" "$(tail -n 30 "$VHPC_RUN_DIR"/jobs/*/kvm*/hv/serial 2>/dev/null)"
		kill -9 $pid; wait $pid; rc=timeout
	else
		wait $pid; rc=$?
	fi
}
nothing_left() {   # NAME
	check_eq "$1: nothing of the job is left" "" \
		"$(job_leftovers "$job"; pgrep -f "vhpc-hv .*/jobs/$job/")"
}

