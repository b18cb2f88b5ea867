# Shell helpers for the node agent's .t tests: run `vhpc-na up` in the
# background and talk about what it made.  Source after tests/lib.sh.

NA=$BIN/vhpc-na

# A run dir of this test's own, so cleanup in it never meets other tests'
# jobs, and job ids unique on this machine (netns and cgroup names are
# global): <prefix><pid><letter>.
na_run_dir() {
	VHPC_RUN_DIR=$(mktemp -d /tmp/vhpc-na-t.XXXXXX)
	export VHPC_RUN_DIR
	at_exit "rm -rf '$VHPC_RUN_DIR'"
}

# up NAME ARGS...: starts `vhpc-na up ARGS` with output in $VHPC_RUN_DIR/NAME.out,
# waits for "ready" (or its end); sets UP_PID_<NAME>.  Returns 1 if it
# did not get ready.
up() {
	local name=$1 out i; shift
	out=$VHPC_RUN_DIR/$name.out
	"$NA" up "$@" >"$out" 2>&1 &
	eval "UP_PID_$name=$!"
	at_exit "kill -TERM $! 2>/dev/null; sleep 1; kill -KILL $! 2>/dev/null"
	for ((i = 0; i < 200; i++)); do
		grep -q '^ready$' "$out" && return 0
		kill -0 $! 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# down NAME [SIGNAL]: signals the `up` and waits for it to finish.
down() {
	local pid
	eval "pid=\$UP_PID_$1"
	kill -"${2:-TERM}" "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

out_of() { cat "$VHPC_RUN_DIR/$1.out"; }
# field NAME REGEX: the first word after REGEX in NAME's output
field() { sed -nE "s/^$2 ([^ ]+).*/\1/p" "$VHPC_RUN_DIR/$1.out" | head -1; }

# Counts of everything a job can leave, scoped to job ids (other tests run
# beside this one and make their own): netns entries, nsfs mounts, any
# mount under the run dir, host links pointing into the job's namespaces,
# cgroup dirs, shm files, runc containers.
leftovers() {
	local job
	for job in "$@"; do
		echo "netns $(ls /run/netns 2>/dev/null | grep -cE "^vhpc-$job(-[0-9]+)?$")"
		echo "nsfs-mounts $(grep -cE "/run/netns/vhpc-$job(-[0-9]+)? " /proc/self/mountinfo)"
		echo "host-links $(ip -o link 2>/dev/null | grep -c "link-netns vhpc-$job")"
		echo "cgroups $(find /sys/fs/cgroup -maxdepth 4 -type d \( -path "*/vhpc/$job" -o -path "*/vhpc/$job/*" \) 2>/dev/null | wc -l)"
		echo "shm $(ls /dev/shm 2>/dev/null | grep -c "^vhpc-$job-")"
	done
	echo "mounts $(grep -c " $VHPC_RUN_DIR/" /proc/self/mountinfo)"
	echo "runc $(ls "$VHPC_RUN_DIR/runc" 2>/dev/null | wc -l)"
	echo "jobs $(ls "$VHPC_RUN_DIR/jobs" 2>/dev/null | wc -l)"
}

