# Shared set-up for integration tests: isolated runtime and state dirs, so
# tests neither see nor sweep anything of a real installation's.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
export VHPC_RUN_DIR=${VHPC_TEST_RUN_DIR:-/run/vhpc-test}
export VHPC_STATE_DIR=${VHPC_TEST_STATE_DIR:-$VHPC_TOP/$B/state}
export PATH=$BIN:$PATH
T=$(mktemp -d /tmp/vhpc-t.XXXXXX)
at_exit "rm -rf '$T'"

# Live processes in job cgroups (a guest init whose owner was SIGKILLed is
# left a zombie for the host's init to reap, in its own time).
live_job_procs() { live_cgroup_procs ':/vhpc/'; }

# Counts of everything a job may create, one per line, for before/after diffs.
resource_counts() {
	echo "netns $(ip netns list 2>/dev/null | grep -c '^vhpc-')"
	echo "links $(ip -o link show | wc -l)"
	echo "cgroups $(find /sys/fs/cgroup -maxdepth 3 -type d -path '*/vhpc/*' 2>/dev/null | wc -l)"
	echo "mounts $(grep -c -e "$VHPC_RUN_DIR" -e /run/netns/vhpc- /proc/self/mountinfo)"
	echo "shm $(ls /dev/shm 2>/dev/null | grep -c '^vhpc-')"
	# Processes in job cgroups, and runc working for this run dir.
	echo "procs $(live_job_procs | wc -l) $(pgrep -c -f "runc --root $VHPC_RUN_DIR" || true)"
	echo "jobdirs $(ls "$VHPC_RUN_DIR/jobs" 2>/dev/null | wc -l)"
}
# check_counts DESCRIPTION BEFORE: resource_counts are back to BEFORE; if not,
# the diag shows both and the tasks still in job cgroups
check_counts() {
	local now
	now=$(resource_counts)
	check_eq "$1" "$2" "$now"
	[ "$2" = "$now" ] || diag "tasks in job cgroups:" "$(procs_diag $(live_job_procs))"
}

# Everything that still exists of one job, by its id (netns, cgroups, live
# processes in them, mounts, shm files, runc state, its job dir); empty when
# the job left nothing.  Unlike host-wide counts, this ignores whatever
# other tests on the machine are doing.
job_leftovers() {
	local j=$1
	ip netns list 2>/dev/null | grep -E "^vhpc-$j(-| |\$)" | sed 's/^/netns /'
	find /sys/fs/cgroup -maxdepth 4 -type d -path "*/vhpc/$j*" 2>/dev/null | sed 's/^/cgroup /'
	live_cgroup_procs ":/vhpc/$j/" | sed 's/^/process /'
	grep -e "/$j/" -e "vhpc-$j" /proc/self/mountinfo | awk '{print "mount " $5}'
	ls /dev/shm 2>/dev/null | grep "^vhpc-$j-" | sed 's/^/shm /'
	ls -d "$VHPC_RUN_DIR"/runc/"$j"-* "$VHPC_RUN_DIR/jobs/$j" 2>/dev/null | sed 's/^/state /'
}
# The job id a `vhpc run` printed on stderr (file).
job_id_of() { sed -n 's/^vhpc: job \([0-9a-z]*\):.*/\1/p' "$1" | head -1; }

# service_setup: what a test of the local service (vhpc service) needs of
# its own: a munged (VHPC_MUNGE_SOCKET), a service folder in $T (reachable
# by the test's users) and a PORT for vhpc-ctld, apart from other tests'.
service_setup() {
	chmod 755 "$T"
	export VHPC_SERVICE_DIR=$T/svc
	export VHPC_RUN_DIR=$T/svc-run-unused   # the service's vhpcd has its own
	head -c 1024 /dev/urandom >"$T/munge.key"
	chmod 600 "$T/munge.key"
	munged -f -S "$T/munge.sock" --key-file="$T/munge.key" --pid-file="$T/munged.pid" \
		--log-file="$T/munged.log" --seed-file="$T/munged.seed" || skip_all "cannot start a munged of our own"
	at_exit "munged -S '$T/munge.sock' -s"
	export VHPC_MUNGE_SOCKET=$T/munge.sock
	# A port below the ephemeral range (32768-60999), which no outgoing
	# connection of another program can hold, and that nothing listens on.
	local _
	for _ in $(seq 50); do
		PORT=$((20000 + ($$ + RANDOM) % 12000))
		[ -z "$(ss -Hltn "sport = :$PORT" 2>/dev/null)" ] && break
	done
}
