# A cluster of network namespaces on this machine for tests/cluster/*.t:
# a hub namespace with a bridge (hub0, 198.18.0.1/24: the test-only range
# of RFC 2544) where vhpc-ctld listens and the CLI runs, and N node
# namespaces (198.18.0.1N) each with its own vhpcd and run dir.  One munged
# of the test's own serves all.  Source after tests/lib.sh; every resource
# is named after $CL and removed at exit.

. "$(dirname "${BASH_SOURCE[0]}")/../hub.sh"
: "${CL:=vct$$}"
CL_DIR=$(mktemp -d /tmp/vhpct-cl.XXXXXX)
chmod 755 "$CL_DIR"
CL_HUB=$CL-hub
CL_CTL=198.18.0.1:6817
CL_NODES=0
export VHPC_STATE_DIR=${VHPC_TEST_STATE_DIR:-$VHPC_TOP/$B/state}
export VHPC_CONTROLLER=$CL_CTL
export PATH=$BIN:$PATH
at_exit "rm -rf '$CL_DIR'"
# A failed test keeps the daemons' logs next to its own (runs before the rm).
CL_KEEP=$VHPC_TOP/$B/test-logs/$(basename "$(dirname "$0")")_$(basename "$0").daemons
at_exit 'cl_keep_logs'
cl_keep_logs() {
	[ "$T_FAILED" -gt 0 ] || return 0
	mkdir -p "$CL_KEEP" && cp "$CL_DIR"/*.log "$CL_KEEP"/ 2>/dev/null
}

cl_in() { local ns=$1; shift; nsenter --net=/run/netns/"$ns" -- "$@"; }
# vc ARGS: the vhpc CLI, in the hub (where the controller is)
vc() { cl_in "$CL_HUB" "$BIN/vhpc" "$@"; }
# as_nobody CMD...: the same as another user
as_nobody() { cl_in "$CL_HUB" setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }

cl_net_up() {  # N
	local i
	at_exit cl_net_down
	hub_up "$CL_HUB" 198.18.0 02:00:c6:12:00:01 || return 1
	CL_NODES=$1
	for ((i = 1; i <= $1; i++)); do
		cl_node_net "$i" || return 1
	done
}

# cl_node_net I: node I's namespace on the hub (again, after it was killed)
cl_node_net() { hub_node "$CL_HUB" 198.18.0 "$CL" "$1"; }

cl_net_down() { hub_down "$CL_HUB" "$CL" "$CL_NODES"; }

cl_munge_up() {
	munged_up "$CL_DIR" || return 1
	export VHPC_MUNGE_SOCKET=$CL_DIR/munge.sock
	# other users (the permission tests) reach it too
	chmod 755 "$CL_DIR"
}

# wait_log FILE REGEX [SECONDS [FROM_LINE]]: a line matching REGEX (after
# line FROM_LINE: a restarted daemon appends to its old log)
wait_log() {
	local i
	for ((i = 0; i < ${3:-20} * 20; i++)); do
		tail -n +"$(( ${4:-0} + 1 ))" "$1" 2>/dev/null | grep -qE "$2" && return 0
		sleep 0.05
	done
	return 1
}
log_lines() { cat "$1" 2>/dev/null | wc -l; }

cl_ctld_up() {  # extra vhpc-ctld options
	local from
	from=$(log_lines "$CL_DIR/ctld.log")
	# nsenter execs the daemon: $! is its pid
	nsenter --net=/run/netns/"$CL_HUB" -- "$BIN/vhpc-ctld" --listen "$CL_CTL" --state "$CL_DIR/ctld" \
		--heartbeat-interval "${CL_HB_MS:-500}" --heartbeat-misses "${CL_HB_MISSES:-6}" \
		--start-retry-pause "${CL_RETRY_MS:-200}" --log "$CL_DIR/ctld.log" "$@" &
	CTLD_PID=$!
	at_exit "kill -9 $CTLD_PID 2>/dev/null"
	wait_log "$CL_DIR/ctld.log" "listening on.*$CL_CTL" 10 "$from" && wait_log "$CL_DIR/ctld.log" 'ready' 10 "$from" &&
		{ [ -n "${CL_NO_PUSH-}" ] || cl_push_default; }
}

# cl_ctr_image: builds the default image without its kvm parts under the
# name default-ctr (container guests need none of them: 65 MiB against 245
# to push, pull and check for every job).  Not as "default": the state
# folder's default is the lab's, kernel, initramfs and ext4 root included,
# and a --no-kvm build of it would replace it for every test after.
CL_CTR_IMAGE=default-ctr
cl_ctr_image() {
	sed -e '/^kvm:/,$d' -e "s/^name: default$/name: $CL_CTR_IMAGE/" \
		"$VHPC_TOP/configs/images/default.yaml" >"$CL_DIR/$CL_CTR_IMAGE.yaml" &&
		"$BIN/vhpc" image build "$CL_DIR/$CL_CTR_IMAGE.yaml"
}

# cl_push_default: the cluster's default image, built on this machine
# (cl_ctr_image; with its kvm parts when CL_KVM is set), pushed into the
# controller's store as "default": nodes pull it from there, and a job
# names it.  CL_PUSH_IMAGE=NAME pushes that image of this machine as the
# cluster's default instead.  Kept in $CL_DIR/push.log.
cl_push_default() {
	if [ -n "${CL_PUSH_IMAGE-}" ]; then
		vc image push "$CL_PUSH_IMAGE" --as default >>"$CL_DIR/push.log" 2>&1
		return
	fi
	if [ -n "${CL_KVM-}" ]; then
		"$BIN/vhpc" image build "$VHPC_TOP/configs/images/default.yaml" >>"$CL_DIR/push.log" 2>&1 &&
			vc image push default >>"$CL_DIR/push.log" 2>&1
		return
	fi
	cl_ctr_image >>"$CL_DIR/push.log" 2>&1 &&
		vc image push "$CL_CTR_IMAGE" --as default >>"$CL_DIR/push.log" 2>&1
}

cl_ctld_kill() {  # SIGNAL
	kill -"${1:-TERM}" "$CTLD_PID" 2>/dev/null
	wait "$CTLD_PID" 2>/dev/null
	true
}

# cl_node_up I [vhpcd options]: node I owns one cpu of this machine (its
# guests are pinned there; node 3 shares node 1's on two cores).
cl_node_up() {
	local i=$1 pid from
	shift
	from=$(log_lines "$CL_DIR/n$i.log")
	mkdir -p "$CL_DIR/run-n$i"
	VHPC_RUN_DIR=$CL_DIR/run-n$i nsenter --net=/run/netns/"$CL-n$i" -- "$BIN/vhpcd" --name "n$i" \
		--listen "198.18.0.$((10 + i)):6818" --log "$CL_DIR/n$i.log" --cpus $(((i - 1) % $(nproc))) \
		--image-cache "$CL_DIR/cache-n$i" "$@" &
	pid=$!
	eval "NODE_PID_$i=$pid"
	# Its job dirs' locks go when it is really gone: wait, then sweep
	# what it may have been tearing down.
	at_exit "kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; VHPC_RUN_DIR='$CL_DIR/run-n$i' '$BIN/vhpc-na' cleanup >/dev/null 2>&1; cl_unmount_cache $i"
	wait_log "$CL_DIR/n$i.log" "node n$i ready" 20 "$from"
}

# cl_unmount_cache I: node I's compact images are mounted once for all
# its jobs, and stay so while it runs; the test's end unmounts them.
cl_unmount_cache() {
	local m
	for m in $(awk -v d="$CL_DIR/cache-n$1/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo); do
		umount "$m"
	done
}

cl_node_kill() {  # I [SIGNAL]
	local pid
	eval "pid=\$NODE_PID_$1"
	kill -"${2:-TERM}" "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	true
}

# Nodes up as vhpc-ctld sees them.
cl_nodes_up() { vc nodes --json 2>/dev/null | grep -c '"state":"up"'; }
cl_nodes_at_least() { [ "$(vc nodes --json 2>/dev/null | tr -d ' \n' | grep -o '"state":"up"' | wc -l)" -ge "$1" ]; }
cl_wait_nodes_up() { poll_until 20 cl_nodes_at_least "$1"; }  # N

# job_json ID: a job's record on one line
job_json() { vc queue --all --json 2>/dev/null | sed 's/^ *//' | tr -d '\n' | sed 's/},{"id"/}\n{"id"/g' | grep "^\[\{0,1\}{\"id\":$1,"; }
# job_state ID: the state vhpc-ctld has for a job
job_state() { vc queue --all --json 2>/dev/null | tr -d ' \n' | grep -o "{\"id\":$1,[^}]*" | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
job_state_is() { [[ $(job_state "$1") =~ ^($2)$ ]]; }  # ID REGEX
wait_state() {  # ID REGEX [SECONDS]
	poll_until "${3:-60}" job_state_is "$1" "$2" && return 0
	echo "# job $1 is '$(job_state "$1")', not /$2/ after ${3:-60}s"
	return 1
}
# cl_restart NAME [REGEX]: vhpc restart NAME, checked; the new job's id in
# R, then a wait (200 s) for its state to match REGEX (RUNNING), and the
# milliseconds from the restart to that in RESTART_MS.
cl_restart() {
	local t0 out rc
	t0=$(date +%s%N)
	out=$(vc restart "$1" 2>&1); rc=$?
	diag "$out"
	check_eq "vhpc restart $1 succeeds" 0 "$rc"
	R=$(sed -n 's/^Submitted job \([0-9]*\):.*/\1/p' <<<"$out")
	check_match "... as a new job" '^[0-9]+$' "$R"
	check "the restarted job $R runs" wait_state "$R" "${2:-RUNNING}" 200
	RESTART_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
}
# job_field ID FIELD: a scalar field of a job's record
job_field() { job_json "$1" | grep -o "\"$2\":[^,}]*" | head -1 | cut -d: -f2- | tr -d '"'; }
# nodes_of JOB: the nodes that hold a part of it, by their job folders ("1 3 ")
nodes_of() { local i; for ((i = 1; i <= CL_NODES; i++)); do ls -d "$CL_DIR/run-n$i/jobs/$1"x* >/dev/null 2>&1 && echo -n "$i "; done; }
# cl_jobs_gone: no job left on any node (each given 10 s to remove its
# own), and nothing left of any: cl_leftovers as in $before, taken once
# the cluster was up.
cl_jobs_gone() {
	local i
	for ((i = 1; i <= CL_NODES; i++)); do
		for _ in $(seq 100); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
	done
	[ "$before" = "$(cl_leftovers)" ]
}
# cl_ckpt_stop JOB WHAT: `vhpc checkpoint JOB --stop`, what it said in
# CKPT_OUT and the checkpoint's name in NAME; checks it succeeded (WHAT:
# where the job was), named the checkpoint, and that the job ended
# CHECKPOINTED (75) with nothing of it left on any node.  On a failure,
# the nodes' last words on it.
cl_ckpt_stop() {
	local rc n
	CKPT_OUT=$(vc checkpoint "$1" --stop 2>&1); rc=$?
	diag "$CKPT_OUT"
	check_eq "vhpc checkpoint $1 --stop succeeds ($2)" 0 "$rc"
	if [ "$rc" != 0 ]; then
		for ((n = 1; n <= CL_NODES; n++)); do grep -E "checkpoint|CRIU|vhpc-hv|panicked|rebooted" "$CL_DIR/n$n.log" | tail -3 | sed "s/^/# n$n: /"; done
	fi
	NAME=$(sed -n 's/^checkpoint \([a-z0-9.-]*\) of job.*/\1/p' <<<"$CKPT_OUT")
	check_match "... naming the checkpoint" '^[a-z0-9][a-z0-9.-]*$' "$NAME"
	vc wait "$1"; rc=$?
	check_eq "the job ends with exit status 75" 75 "$rc"
	n=$(job_state "$1")
	check_eq "... CHECKPOINTED" CHECKPOINTED "$n"
	# What ended it otherwise, right under the failure, as the report
	# shows only the first lines there.
	[ "$n" = CHECKPOINTED ] || diag "job $1: $(job_json "$1" | grep -o '"reason":"[^"]*"')"
	check "nothing of it is left on any node" cl_jobs_gone
}
# A job running ckpt_cksum (tests/mpi/README.md), the checkpoint tests':
# cksum_lines FILE: its checksum lines, what --reference prints;
# cksum_round JOB: the last round its output has; cksum_past JOB N: past N.
cksum_lines() { grep -E '^(round [0-9]+ checksum|final checksum)' "$1"; }
cksum_round() { vc output "$1" 2>/dev/null | sed -n 's/^round \([0-9]*\) checksum.*/\1/p' | tail -1; }
cksum_past() { [ "$(cksum_round "$1")" -ge "$2" ] 2>/dev/null; }
# cksum_wait JOB N SECONDS: until its output is past round N; a job that
# is no longer running ends the wait at once, saying why (a launch that
# failed once kept kvm-ckpt.t waiting to its limit).
cksum_wait() {
	poll_until "$3" _cksum_done "$1" "$2"
	cksum_past "$1" "$2" && return 0
	diag "job $1 is not past round $2: $(job_state "$1"): $(job_field "$1" reason)"
	return 1
}
_cksum_done() { cksum_past "$1" "$2" || ! job_state_is "$1" 'RUNNING|PENDING'; }
# cksum_ends JOB REF FROM: the restarted JOB ends with exit status 0 and
# exactly REF's lines (ckpt_cksum --reference), each round once (FROM:
# the round its checkpoint was taken at or after); its output in
# $CL_DIR/r.out.
cksum_ends() {
	local rc
	vc wait "$1"; rc=$?
	check_eq "the restarted job completes with exit status 0" 0 "$rc"
	vc output "$1" >"$CL_DIR/r.out" 2>&1
	check_eq "its output is the reference's, every round once: it went on from round $3 or later" "$2" "$(cksum_lines "$CL_DIR/r.out")"
	[ "$2" = "$(cksum_lines "$CL_DIR/r.out")" ] || diag "$(tail -n 15 "$CL_DIR/r.out")"
}
# cksum_midrun JOB: the job is past round 3 (a check), or the test ends
# here, saying why: nothing after can pass without it.  Where the test
# has lab_crashed (kvm-lib.sh), a guest the lab crashed is said so.
cksum_midrun() {
	if ! cksum_wait "$1" 3 150; then
		fail "it is past round 3 (mid-run, a round a second)"
		declare -F lab_crashed >/dev/null && lab_crashed "$1"
		done_testing
		exit 1
	fi
	ok "it is past round 3 (mid-run, a round a second)"
}

# A job is COMPLETED once its exit status is in, and its nodes remove it
# after that; a node stopped with TERM leaves a job it holds for its
# restart to take over.  So a test that stops its nodes to count what is
# left waits for the removals first (SECONDS, default 30).
cl_nodes_idle() {
	local i
	for ((i = 1; i <= CL_NODES; i++)); do
		[ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] || return 1
	done
}
cl_wait_nodes_idle() {
	poll_until "${1:-30}" cl_nodes_idle && return 0
	echo "# jobs still on the nodes after ${1:-30}s: $(ls "$CL_DIR"/run-n*/jobs 2>/dev/null | tr '\n' ' ')"
	return 1
}

# Everything of this cluster's jobs that could leak, for before/after
# comparisons (other tests' jobs run beside: only names of ours count).
cl_leftovers() {
	local i
	echo "netns $(ls /run/netns 2>/dev/null | grep -cE '^vhpc-[0-9a-z]+x[0-9a-z]+(-[0-9]+)?$' )"
	for ((i = 1; i <= CL_NODES; i++)); do
		echo "n$i jobs $(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null | grep -c .) runc $(ls "$CL_DIR/run-n$i/runc" 2>/dev/null | grep -c .)"
		echo "n$i vxlan $(ip -n "$CL-n$i" -d link 2>/dev/null | grep -c vxlan)"
	done
	# Compact images mounted in a node's cache stay for its later jobs.
	echo "mounts $(grep " $CL_DIR/" /proc/self/mountinfo | grep -vc " $CL_DIR/cache-n")"
	echo "cgroups $(find /sys/fs/cgroup -maxdepth 3 -type d -path '*/vhpc/*x*' 2>/dev/null | grep -cE '/vhpc/[0-9a-z]+x[0-9a-z]+(/|$)')"
	echo "shm $(ls /dev/shm 2>/dev/null | grep -cE '^vhpc-[0-9a-z]+x[0-9a-z]+-')"
	echo "procs $(live_cgroup_procs ':/vhpc/[0-9a-z]+x[0-9a-z]+/' | wc -l)"
}

# cl_ticks_ok OUTPUT: a job's TICKS output (12 numbered lines per guest,
# "<hostname> tick <i>") holds every line of g0 and g1 exactly once.
cl_ticks_ok() {
	local g i
	for g in g0 g1; do
		for i in $(seq 12); do
			[ "$(grep -cx "$g tick $i" "$1")" = 1 ] || { echo "# $g tick $i: $(grep -cx "$g tick $i" "$1") times"; return 1; }
		done
	done
	[ "$(grep -c ' tick ' "$1")" = 24 ]
}
