# TAP helpers for shell tests (tests/**/*.t).  Source it, call ok/fail/check,
# end with done_testing.  Every test registers its cleanup with at_exit so a
# failing or interrupted test still removes what it made.
T_N=0
T_FAILED=0
T_CLEANUPS=()
: "${B:=build}"
: "${VHPC_TOP:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
BIN=$VHPC_TOP/$B/bin

ok()     { T_N=$((T_N+1)); echo "ok $T_N - $*"; }
fail()   { T_N=$((T_N+1)); T_FAILED=$((T_FAILED+1)); echo "not ok $T_N - $*"; }
skip()   { T_N=$((T_N+1)); echo "ok $T_N # SKIP $*"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
diag()   { printf '%s\n' "$@" | sed 's/^/# /'; }
# check DESCRIPTION COMMAND...: ok if the command succeeds
check()  { local d=$1; shift; if "$@"; then ok "$d"; else fail "$d"; fi; }
# check_eq DESCRIPTION EXPECTED ACTUAL
check_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1"; diag "expected: $2" "got:      $3"; fi
}
# check_match DESCRIPTION REGEX TEXT
check_match() {
	if printf '%s' "$3" | grep -qE -- "$2"; then ok "$1"; else fail "$1"; diag "no match for /$2/ in:" "$3"; fi
}
at_exit() { T_CLEANUPS+=("$*"); }
# at_exit_said CMD: a cleanup whose output goes to the test's stderr (the
# others' is discarded), for one that must say when it failed.
at_exit_said() { T_CLEANUPS+=("!$*"); }
_run_cleanups() {
	local i c
	for ((i=${#T_CLEANUPS[@]}-1; i>=0; i--)); do
		c=${T_CLEANUPS[$i]}
		if [ "${c:0:1}" = '!' ]; then eval "${c:1}" >&2 || true; else eval "$c" >/dev/null 2>&1 || true; fi
	done
}
trap _run_cleanups EXIT
trap 'exit 130' INT TERM
done_testing() { echo "1..$T_N"; }
# live_cgroup_procs REGEX: pids of the tasks alive in cgroups whose path in
# /proc/PID/cgroup matches REGEX (grep -E).  Not alive: zombies and tasks being
# reaped (Z, X), and tasks whose cgroup v2 shows "(deleted)": the kernel
# removes a cgroup only once no live task is in it, so such a task is in its
# last steps of exit (cgroup v1 shows an exiting task in "/" instead).
live_cgroup_procs() {
	local f p st
	for f in $(grep -lE -- "$1" /proc/[0-9]*/cgroup 2>/dev/null); do
		p=${f%/cgroup}
		grep -q ' (deleted)$' "$f" 2>/dev/null && continue
		st=$(sed 's/.*) //' "$p/stat" 2>/dev/null | cut -d' ' -f1)
		case $st in Z | X | x | '') continue ;; esac
		echo "${p#/proc/}"
	done
}
# procs_diag PID...: one line per task (state, command, cgroups) for a diag
procs_diag() {
	local p
	for p in "$@"; do
		echo "pid $p: $(sed 's/.*) //' /proc/"$p"/stat 2>/dev/null | cut -d' ' -f1)" \
			"$(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-80)" \
			"| $(grep vhpc /proc/"$p"/cgroup 2>/dev/null | tr '\n' ' ')"
	done
}
# remove_user NAME (an at_exit_said cleanup): the user and their group go,
# even if a process of theirs is still ending (userdel refuses while one
# runs: exit 8); any other failure is said, since a user left in /etc/passwd
# outlives the test.
remove_user() {
	local rc out i
	for i in 1 2 3 4 5 6; do
		out=$(userdel -- "$1" 2>&1)
		rc=$?
		[ $rc = 8 ] || break
		pkill -KILL -u "$1"
		sleep 0.5
	done
	case $rc in 0 | 6) ;; *) echo "# cleanup: userdel $1 failed (exit $rc): $out" ;; esac
	out=$(groupdel -- "$1" 2>&1)
	rc=$?
	case $rc in 0 | 6) ;; *) echo "# cleanup: groupdel $1 failed (exit $rc): $out" ;; esac
}
# poll_pause [SECONDS]: the pause between two looks of a polling loop
# (default 0.1 s).  In the virtualization lab every process a look starts
# is emulated by TCG in L1, and the CPU it takes is the L2 guests' that the
# loop waits for: there the pause is 1 s.  Loops that wait for a state
# go through poll_until, which counts time, not looks.
poll_pause() { if [ -n "${VHPC_IN_LAB-}" ]; then sleep 1; else sleep "${1:-0.1}"; fi; }
# poll_until SECONDS CMD...: CMD until it succeeds (0) or SECONDS of wall
# time are over (1), poll_pause between looks.  Loops count time, not
# looks: a look's pause is ten times longer in the lab, and a count of
# looks made a 40 s wait there one of 400 s.  In the lab SECONDS is
# multiplied by VHPC_LAB_TIME_SCALE (default 4): what takes a second on a
# host takes several under TCG.
poll_until() {
	local secs=$1 end
	shift
	local scale=${VHPC_LAB_TIME_SCALE:-4}
	[[ $scale =~ ^[1-9][0-9]*$ ]] || { echo "# VHPC_LAB_TIME_SCALE='$scale' is not a whole number from 1: using 4" >&2; scale=4; }
	[ -n "${VHPC_IN_LAB-}" ] && secs=$((secs * scale))
	end=$((SECONDS + secs))
	while :; do
		"$@" && return 0
		[ "$SECONDS" -ge "$end" ] && return 1
		poll_pause
	done
}
need_root() { [ "$(id -u)" = 0 ] || skip_all "needs root (network namespaces, cgroups)"; }

# lab_check FILE...: inside the virtualization lab, a guest that crashed in
# a way only TCG's SVM emulation causes (a triple fault in early boot, a
# stack guard page hit) is the lab's failure, not the test's: say so, and
# tests/run runs the test again in a fresh lab (tests/lab/vhpc-lab).
lab_check() {
	local hit f re='triple fault or KVM internal error|guest triple fault|stack guard page was hit|Fatal exception in interrupt|corrupted stack end'
	[ -n "${VHPC_IN_LAB-}" ] || return 0
	hit=$(grep -h -m 1 -aE "$re" "$@" 2>/dev/null | head -n 1)
	if [ -z "$hit" ]; then
		# A job that failed because a guest was not ready within 30 s or
		# more (the kvm driver's deadline, scaled: 55-80 s here): healthy
		# guests are ready in 9-30 s in the lab, and 2 of 20 2-VM jobs
		# on 2026-12-06 hung at boot, with or without vhpc-hv's changes
		# of that week.  Only `vhpc run`'s own last word counts: a start
		# the controller tried again and got going is no failure.  (A
		# shorter deadline is a test's own: failures-ready.t.)  kvm/vfio.t's
		# vfio-job starts a job once, so its word is the last too.
		local line n
		line=$(grep -h -m 1 -aoE '(vhpc: error|vfio-job): guest g[0-9]+ did not report ready within [0-9]+ s' "$@" 2>/dev/null | head -n 1)
		n=${line##*within }; n=${n% s}
		if [ -n "$line" ] && [ "$n" -ge 30 ] 2>/dev/null; then
			line=${line#vhpc: error: }
			echo "# lab failure: an L2 guest hung at boot: ${line#vfio-job: }"
		fi
		return 0
	fi
	echo "# lab failure: an L2 guest crashed: $hit"
	# The console goes with the job's folder: keep what led to the crash
	# (an oops's trace) in the test's log.
	f=$(grep -l -m 1 -aE "$re" "$@" 2>/dev/null | head -n 1)
	[ -n "$f" ] && grep -a -B 60 -m 1 -E "$re" "$f" | tail -n 60 | sed "s|^|#   |"
	return 0
}

# lab_no_default_binds: inside the lab, jobs get neither the submission
# folder nor the home (VHPC_CLUSTER: the cluster file with bind_home and
# bind_workdir off).  Both are on L1's root, itself a virtio-fs mount from
# the host: a job's virtiofsd serving them there is virtio-fs over
# virtio-fs, which froze L1 in 3 of 3 runs of kvm/devices.t (the same
# test passed with them off).  Only the lab has that nesting; the kvm tests
# of shared folders (kvm/binds.t) share folders on L1's own tmpfs.
lab_no_default_binds() {
	[ -n "${VHPC_IN_LAB-}" ] || return 0
	sed -e 's/^bind_home: .*/bind_home: false/' -e 's/^bind_workdir: .*/bind_workdir: false/' \
		"$VHPC_TOP/configs/cluster.yaml" >"$T/cluster-lab.yaml" || return 1
	export VHPC_CLUSTER=$T/cluster-lab.yaml
}

# munged_up DIR: a munged of the test's own, with its key, socket
# (DIR/munge.sock), pid, log and seed in DIR; stopped at exit.
munged_up() {
	head -c 1024 /dev/urandom >"$1/munge.key"
	chmod 600 "$1/munge.key"
	munged -f -S "$1/munge.sock" --key-file="$1/munge.key" --pid-file="$1/munged.pid" \
		--log-file="$1/munged.log" --seed-file="$1/munged.seed" || return 1
	at_exit "munged -S '$1/munge.sock' -s"
}

# hello_user NAME: a user of the test's own (removed at exit) with a home
# in $T/home, who compiles tests/integration/hello.c with mpicc in $W
# ($H/run).  Sets U, uid, gid, H, W; asu CMD runs CMD as them.
asu() { setpriv --reuid "$uid" --regid "$gid" --init-groups "$@"; }
hello_user() {
	U=$1
	chmod 755 "$T"
	mkdir -p "$T/home"
	useradd -m -d "$T/home/$U" -U -s /bin/sh "$U" || { fail "useradd $U"; done_testing; exit 1; }
	at_exit_said "remove_user '$U'"
	uid=$(id -u "$U") gid=$(id -g "$U")
	H=$T/home/$U W=$T/home/$U/run
	asu mkdir -p "$W"
	cp "$VHPC_TOP/tests/integration/hello.c" "$W/hello.c" && chown "$uid:$gid" "$W/hello.c"
	(cd "$W" && asu mpicc -o hello hello.c) >"$T/cc.out" 2>&1
	check_eq "the user compiles hello.c with mpicc on the host" 0 "$?"
}
# hello_outputs N: the N ranks' out.<r> in $W, each written in $W by its
# rank, the user's, and ranks in guests g0 and g1.
hello_outputs() {
	local r
	for ((r = 0; r < $1; r++)); do
		check_match "out.$r: written by rank $r in the submission folder" "^rank $r of $1 on g[01] in $W\$" "$(cat "$W/out.$r" 2>/dev/null)"
		check_eq "out.$r is on the host, the user's" "$uid:$gid" "$(stat -c %u:%g "$W/out.$r" 2>/dev/null)"
	done
	check_eq "the ranks ran in both guests" "g0 g1" "$(sed -n 's/.* on \(g[01]\) in .*/\1/p' "$W"/out.* 2>/dev/null | sort -u | tr '\n' ' ' | sed 's/ $//')"
}

# alive PID: the process exists and is not a zombie waiting for its reaper
# (a guest's init is reparented to PID 1 of the machine, which reaps it
# when it gets to it).
alive() {
	local st
	st=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
gone() { ! alive "$1"; }

# need_built PROG...: skip unless each is built in $BIN.
need_built() {
	local p
	for p in "$@"; do [ -x "$BIN/$p" ] || skip_all "$p is not built"; done
}
# need_cluster [PROG...]: what a tests/cluster test needs (root, munged,
# the CLI and daemons), and PROG too.
need_cluster() {
	need_root
	need_built vhpc vhpc-ctld vhpcd vhpc-guestd "$@"
	command -v munged >/dev/null || skip_all "munged is not installed"
}
