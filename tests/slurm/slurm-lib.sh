# A Slurm cluster from Debian's packages, on this machine, for
# tests/slurm/*.t: slurmctld in a hub network namespace holding a bridge
# (198.18.2.1/24, the test-only range of RFC 2544), N slurmd each in a
# network and UTS namespace of its own (node nI at 198.18.2.1I), and a
# munged of the test's own.  vhpc's SPANK plugin is in the plugstack;
# each node has its own vhpc run dir ($SL_DIR/run-nI).  Source after
# tests/lib.sh; every resource is named after $SL and removed at exit.

. "$(dirname "${BASH_SOURCE[0]}")/../hub.sh"
: "${SL:=vsl$$}"
SL_DIR=$(mktemp -d /tmp/vhpct-sl.XXXXXX)
chmod 755 "$SL_DIR"
SL_HUB=$SL-hub
SL_NODES=0
export VHPC_STATE_DIR=${VHPC_TEST_STATE_DIR:-$VHPC_TOP/$B/state}
export VHPC_CONFIG_DIR=${SL_CONFIG_DIR:-$VHPC_TOP/configs}
export SLURM_CONF=$SL_DIR/slurm.conf
export PATH=$BIN:$PATH
SL_PLUGIN=$VHPC_TOP/$B/lib/slurm/spank_vhpc.so
at_exit "rm -rf '$SL_DIR'"
SL_KEEP=$VHPC_TOP/$B/test-logs/$(basename "$(dirname "$0")")_$(basename "$0").daemons
at_exit 'sl_keep_logs'
sl_keep_logs() {
	[ "$T_FAILED" -gt 0 ] || return 0
	mkdir -p "$SL_KEEP" && cp "$SL_DIR"/*.log "$SL_KEEP"/ 2>/dev/null
	for f in "$SL_DIR"/run-n*/slurm/*.log; do [ -f "$f" ] && cp "$f" "$SL_KEEP/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")"; done
	true
}

sl_need() {
	local p
	for p in slurmctld slurmd srun sbatch scancel sinfo munged; do
		command -v "$p" >/dev/null || skip_all "$p is not installed (Debian: slurmctld slurmd slurm-client munge)"
	done
	[ -f "$SL_PLUGIN" ] || skip_all "the SPANK plugin was not built (libslurm-dev missing at build time)"
	for p in vhpc vhpc-slurmjob vhpc-guestd; do
		[ -x "$BIN/$p" ] || skip_all "$p is not built"
	done
}

sl_in() { local ns=$1; shift; nsenter --net=/run/netns/"$ns" -- "$@"; }
# sl_user CMD...: CMD in the hub as the test user (hello_user), from $W
sl_user() { (cd "$W" && sl_in "$SL_HUB" setpriv --reuid "$uid" --regid "$gid" --init-groups "$@"); }

sl_net_up() {  # N
	local i
	at_exit sl_net_down
	hub_up "$SL_HUB" 198.18.2 02:00:c6:12:02:01 || return 1
	SL_NODES=$1
	for ((i = 1; i <= $1; i++)); do
		hub_node "$SL_HUB" 198.18.2 "$SL" "$i" || return 1
		echo "n$i 198.18.2.$((10 + i))" >>"$SL_DIR/peers"
	done
}

sl_net_down() { hub_down "$SL_HUB" "$SL" "$SL_NODES"; }


# sl_conf [EXTRA slurm.conf LINES]: node i has 2 CPUs, cores 0-1 of this
# machine, shared by all nodes; or, with SL_CPUS="C1 C2 ..." (1 or 2 per
# node), node i with 1 has core (i - 1) mod nproc of its own (the plugin's
# cpus= file says which).
sl_conf() {
	local i cpus c=(${SL_CPUS:-})
	head -c 64 /dev/urandom >"$SL_DIR/secret"
	chmod 600 "$SL_DIR/secret"
	cat >"$SL_DIR/slurm.conf" <<EOF
ClusterName=$SL
SlurmctldHost=ctl(198.18.2.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SL_DIR/munge.sock
StateSaveLocation=$SL_DIR/ctld
SlurmctldPidFile=$SL_DIR/ctld.pid
SlurmctldLogFile=$SL_DIR/ctld.log
SlurmdSpoolDir=$SL_DIR/%n/spool
SlurmdPidFile=$SL_DIR/%n/slurmd.pid
SlurmdLogFile=$SL_DIR/%n.log
TmpFS=$SL_DIR/%n/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PrologFlags=Alloc,Contain
SlurmdParameters=config_overrides
PlugStackConfig=$SL_DIR/plugstack.conf
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/filetxt
JobCompLoc=$SL_DIR/jobcomp.txt
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
SlurmctldDebug=info
SlurmdDebug=debug
$*
EOF
	for ((i = 1; i <= SL_NODES; i++)); do
		cpus=${c[i - 1]:-2}
		echo "NodeName=n$i NodeAddr=198.18.2.$((10 + i)) CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=2000 State=UNKNOWN" >>"$SL_DIR/slurm.conf"
		if [ "$cpus" = 1 ]; then
			echo "n$i $(( (i - 1) % $(nproc) ))" >>"$SL_DIR/cpus"
		else
			echo "n$i 0-$(( $(nproc) - 1 ))" >>"$SL_DIR/cpus"
		fi
		mkdir -p "$SL_DIR/n$i/spool" "$SL_DIR/n$i/tmp"
	done
	echo "PartitionName=p Nodes=n[1-$SL_NODES] Default=YES MaxTime=INFINITE State=UP" >>"$SL_DIR/slurm.conf"
	sl_cgroup_conf
	echo "required $SL_PLUGIN secret=$SL_DIR/secret peers=$SL_DIR/peers cpus=$SL_DIR/cpus run_dir=$SL_DIR/run-%h" \
		"state_dir=$VHPC_STATE_DIR config_dir=$VHPC_CONFIG_DIR bindir=$BIN" >"$SL_DIR/plugstack.conf"
	mkdir -p "$SL_DIR/ctld"
}

# With cgroup2 alone (the lab's 7.3.4 L1, tests/fabric) slurmd takes
# cgroup/v2, which asks systemd over D-Bus for its stepd scope; where no
# D-Bus runs it fails to start ("cannot initialize cgroup directory for
# stepds").  There it makes the scope itself (cgroup.conf IgnoreSystemd),
# <node>_slurmstepd.scope in system.slice, which must exist; the test
# removes whichever of the two it made.
sl_cgroup_conf() {
	local slice=/sys/fs/cgroup/system.slice i
	[ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] && [ ! -S /run/dbus/system_bus_socket ] || return 0
	printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' >"$SL_DIR/cgroup.conf"
	if [ ! -e $slice ]; then
		mkdir $slice || return 1
		at_exit "rmdir $slice"
	fi
	for ((i = 1; i <= SL_NODES; i++)); do
		[ -e "$slice/n${i}_slurmstepd.scope" ] ||
			at_exit "find $slice/n${i}_slurmstepd.scope -depth -type d -exec rmdir {} +"
	done
}

sl_ctld_up() {
	sl_in "$SL_HUB" unshare --uts sh -c "hostname ctl; exec slurmctld -D -i -f '$SL_DIR/slurm.conf'" \
		>>"$SL_DIR/ctld.out" 2>&1 &
	SL_CTLD_PID=$!
	# $! is the subshell's: slurmctld is what runs in the hub namespace.
	at_exit "ip netns pids '$SL_HUB' 2>/dev/null | xargs -r kill -9; kill -9 $SL_CTLD_PID 2>/dev/null; wait $SL_CTLD_PID 2>/dev/null"
}

# sl_node_up I: slurmd of node nI (again, after sl_node_kill)
sl_node_up() {
	local i=$1 pid
	sl_in "$SL-n$i" unshare --uts sh -c "hostname n$i; exec slurmd -D -f '$SL_DIR/slurm.conf' -N n$i" \
		>>"$SL_DIR/n$i.out" 2>&1 &
	pid=$!
	eval "SL_NODE_PID_$i=$pid"
	at_exit "sl_node_down $i"
}

# Everything of node nI: slurmd, its slurmstepds and what they started
# (all of them in the node's network namespace), then what vhpc left.
sl_node_down() {
	local i=$1 pid
	eval "pid=\${SL_NODE_PID_$i:-}"
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	sl_node_procs "$i" | xargs -r kill -9 2>/dev/null
	sleep 0.2
	VHPC_RUN_DIR=$SL_DIR/run-n$i "$BIN/vhpc-slurmjob" sweep >/dev/null 2>&1
	true
}

# Pids of the processes in node nI's network namespace.
sl_node_procs() { ip netns pids "$SL-n$1" 2>/dev/null; }

# sl_node_kill I: slurmd of node nI dies (kill -9); its steps keep running
sl_node_kill() {
	local pid
	eval "pid=\$SL_NODE_PID_$1"
	kill -9 "$(sl_slurmd_pid "$1")" "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	true
}

# slurmd of node nI (its parent is the subshell sl_node_up started).
sl_slurmd_pid() {
	local p
	for p in $(sl_node_procs "$1"); do
		[ "$(cat /proc/"$p"/comm 2>/dev/null)" = slurmd ] && echo "$p" && return 0
	done
}

# Until N nodes are idle (slurmctld sees them).
sl_wait_idle() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(sl_in "$SL_HUB" sinfo -h -o '%T %D' 2>/dev/null | awk '$1 == "idle" { n += $2 } END { print n + 0 }')" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

sl_up() {  # N
	sl_net_up "$1" && munged_up "$SL_DIR" && sl_conf && sl_ctld_up || return 1
	local i
	for ((i = 1; i <= $1; i++)); do sl_node_up "$i"; done
	sl_wait_idle "$1"
}

# sl_test_up N: the test's user (hello_user ${SL}u: $U, $uid, $gid, $W)
# and a cluster of N nodes, or the test ends failed; $before is what the
# test must leave.
sl_test_up() {
	hello_user "${SL}u"
	sl_up "$1" || { fail "a Slurm cluster of $1 node(s) comes up"; tail -n 20 "$SL_DIR"/*.out "$SL_DIR"/*.log; done_testing; exit 1; }
	before=$(sl_leftovers)
}

# sl_ready JOB NODE: until the job's guests on node nNODE are ready (20 s).
sl_ready() { poll_until 20 grep -qs 'status ready' "$SL_DIR/run-n$2/slurm/$1.state"; }

# Until no job is left in slurmctld's queue.
sl_queue_empty() { [ -z "$(sl_in "$SL_HUB" squeue -h 2>/dev/null)" ]; }
sl_wait_empty() { poll_until "${1:-30}" sl_queue_empty; }

# What vhpc's Slurm jobs could leave on this machine, for before/after
# comparisons (only names of this cluster's run dirs and jobs count).
sl_leftovers() {
	local i
	echo "netns $(ls /run/netns 2>/dev/null | grep -cE '^vhpc-[0-9]+s[0-9a-v]+(-[0-9]+)?$')"
	for ((i = 1; i <= SL_NODES; i++)); do
		echo "n$i jobs $(ls "$SL_DIR/run-n$i/jobs" 2>/dev/null | grep -c .) runc $(ls "$SL_DIR/run-n$i/runc" 2>/dev/null | grep -c .)" \
			"state $(ls "$SL_DIR/run-n$i/slurm" 2>/dev/null | grep -cE '\.(state|user|opts)$')"
		echo "n$i vxlan $(ip -n "$SL-n$i" -d link 2>/dev/null | grep -c vxlan)"
		echo "n$i holders $(for p in $(sl_node_procs "$i"); do cat /proc/"$p"/comm 2>/dev/null; done | grep -c vhpc-slurmjob)"
	done
	echo "mounts $(grep -c " $SL_DIR/" /proc/self/mountinfo)"
	echo "cgroups $(find /sys/fs/cgroup -maxdepth 3 -type d -path '*/vhpc/*s*' 2>/dev/null | grep -cE '/vhpc/[0-9]+s[0-9a-v]+(/|$)')"
	echo "procs $(live_cgroup_procs ':/vhpc/[0-9]+s[0-9a-v]+/' | wc -l)"
}
