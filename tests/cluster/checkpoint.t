#!/usr/bin/env bash
# timeout: 150
# The node side of a job's checkpoint (issue 36), container guests, on a
# loopback cluster: vhpc-ctld and two vhpcd, the messages sent to the
# nodes directly as vhpc-ctld sends them (scheduler/PROTOCOL.md).
#  - job_pause freezes every guest of the job on a node (the cgroup
#    freezer: no output while paused), again is no error, job_resume lets
#    them go on, and the job ends with every line of every guest once;
#  - job_checkpoint check says why the job cannot be checkpointed, before
#    anything changes: the pod of two guests on one node, and CRIU's own
#    reason on this host (Debian 12's CRIU 3.17 cannot read a 6.13+
#    kernel's vDSO); without check it refuses the same and leaves the
#    guests paused; a job submitted with --no-single-copy has no pod on
#    node 1, so node 1's reason and vhpc checkpoint's are CRIU's, not the
#    pod; a checkpoint name that could leave the checkpoint dir
#    is refused; a user cannot send any of them;
#  - an open vhpc exec session is closed by a job_pause with
#    close_sessions (its client ends, its command is gone), not by a
#    plain one nor by the check; no session opens while paused; a
#    session the guest's user holds open (its agent's session process
#    stopped) makes that pause fail after 10 s, nothing frozen;
#  - a job stopped while paused goes, and nothing is left behind.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
WP=$VHPC_TOP/$B/testbin/wireprobe
[ -x "$WP" ] || { echo "Bail out! $WP is not built (make tests)"; exit 1; }
[ "$(nproc)" -ge 2 ] || skip_all "node 1 needs two cpus of this machine for its two guests (the pod)"
command -v setpriv >/dev/null || skip_all "setpriv is not installed"
CL=vck$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
cl_node_up 1 --cpus 0-1 || fail "node 1 starts with two cpus"
cl_node_up 2 || fail "node 2 starts"
check "two nodes register" cl_wait_nodes_up 2

# Job numbers other test clusters do not reach (their cgroups are named
# after job and node): jobs that cannot be placed, cancelled at once.
for ((k = 0; k < 30; k++)); do
	id=$(vc submit --json -N 9 -- true 2>/dev/null | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
	[ -n "$id" ] && vc cancel "$id" >/dev/null 2>&1
done

wp() { cl_in "$CL_HUB" "$WP" "$@" 2>&1; }
addr() { echo "198.18.0.1$1:6818"; }
msg() {  # TYPE NODE JOB [EXTRA JSON FIELDS]
	wp send "$(addr "$2")" "{\"v\":3,\"type\":\"$1\",\"node\":\"n$2\",\"job\":$3${4:+,$4}}"
}
sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
local_of() { sed -n "s/.*job $1 (\([0-9a-z]*x[0-9a-z]*\)).*/\1/p" "$CL_DIR/n$2.log" | head -1; }
# freezer state of each of the job's guests on node I: "FROZEN FROZEN "
# (cgroup v1's freezer where it is mounted, as runc uses it; else v2's)
freezer() {
	local f d=/sys/fs/cgroup/freezer
	[ -d "$d/vhpc" ] || d=/sys/fs/cgroup
	for f in "$d"/vhpc/"$1"/[0-9]*/freezer.state "$d"/vhpc/"$1"/[0-9]*/cgroup.freeze; do
		[ -f "$f" ] || continue
		case "$(cat "$f")" in FROZEN | 1) echo -n "FROZEN " ;; *) echo -n "THAWED " ;; esac
	done
}

# Three guests, 80 numbered lines each over 8 s: g0 and g1 on node 1
# (its two cpus: a pod), g2 on node 2.
TICKS='for i in $(seq 80); do echo "$(hostname) tick $i"; sleep 0.1; done'
J=$(sub -N 3 --vcpus 1 --timeout 120 -- sh -c "$TICKS")
check "job $J runs" wait_state "$J" RUNNING 60
for _ in $(seq 100); do [ "$(job_field "$J" output_bytes)" -gt 0 ] 2>/dev/null && break; sleep 0.1; done
l1=$(local_of "$J" 1) l2=$(local_of "$J" 2)
check_match "the job has a part on each node ($l1, $l2)" '^[0-9a-z]+x1 [0-9a-z]+x2$' "$l1 $l2"
pod=$(pgrep -x vhpc-pod | while read -r p; do grep -q ":/vhpc/$l1/pod\$" /proc/$p/cgroup 2>/dev/null && echo $p; done)
check_match "node 1's two guests share a pod" '^[0-9]+$' "$pod"

# -- pause
check_match "job_pause on node 1: paused" '"type":"paused"' "$(msg job_pause 1 "$J")"
check_match "job_pause on node 2: paused" '"type":"paused"' "$(msg job_pause 2 "$J")"
check_eq "node 1's two guests are frozen" "FROZEN FROZEN " "$(freezer "$l1")"
check_eq "node 2's guest is frozen" "FROZEN " "$(freezer "$l2")"
b0=$(job_field "$J" output_bytes)
sleep 1.5
check_eq "no output while paused" "$b0" "$(job_field "$J" output_bytes)"
check_match "job_pause again: paused (idempotent)" '"type":"paused"' "$(msg job_pause 1 "$J")"

# -- check: the reasons, before anything changes
r1=$(msg job_checkpoint 1 "$J" '"ckpt":"'"$J"'.1","check":true')
check_match "node 1 refuses: the pod, which CRIU cannot restore" \
	'"type":"error".*share a pod.*CRIU cannot restore: it brings a guest back in a new user namespace of its own.*--no-single-copy' "$r1"
# What check says of guests in their own namespaces on this host: CRIU's
# reason, or where CRIU works (the lab's kernel; ckpt-ctr-lab.t saves and
# restores such a job) that they can be checkpointed.
check_criu() {  # WHAT REPLY
	if command -v criu >/dev/null && ! criu check >/dev/null 2>&1; then
		why=$(criu check 2>&1 | sed -n 's/^Error ([^)]*): //p' | head -1)
		diag "criu check here: $why"
		check_match "$1 refuses with CRIU's own reason and this kernel" \
			"\"type\":\"error\".*CRIU \\(.*\\) cannot checkpoint any process on this kernel \\($(uname -r)\\): ${why//[\[\]().*]/.}" "$2"
	elif ! command -v criu >/dev/null; then
		check_match "$1 refuses: CRIU is not installed" '"type":"error".*CRIU is not installed' "$2"
	else
		check_match "$1 can be checkpointed" '"type":"checkable"' "$2"
	fi
}
r2=$(msg job_checkpoint 2 "$J" '"ckpt":"'"$J"'.1","check":true')
check_criu "node 2's guest, alone and in its own namespaces," "$r2"
check_match "without check: node 1 is refused the same" '"type":"error".*cannot be checkpointed' \
	"$(msg job_checkpoint 1 "$J" '"ckpt":"'"$J"'.1"')"
check_eq "... and the guests stay paused" "FROZEN FROZEN FROZEN " "$(freezer "$l1")$(freezer "$l2")"
check_match "a checkpoint name that leaves the dir is refused" 'ckpt.*\.\..*/x.* is not a checkpoint name' \
	"$(msg job_checkpoint 2 "$J" '"ckpt":"../x","check":true')"
check_match "a user cannot resume a job (root's messages only)" 'vhpcd takes messages from root only' \
	"$(as_nobody "$WP" send "$(addr 1)" "{\"v\":3,\"type\":\"job_resume\",\"node\":\"n1\",\"job\":$J}" 2>&1)"
check_match "a job that is not there: said so" '"type":"error".*job 999999 is not on this node' "$(msg job_pause 1 999999)"

# -- the vhpcd of guest 0's node killed while the guests are paused: its
#    restart takes the job over, paused, without waiting on guest 0's
#    frozen agent; mpirun's monitor starts at the resume
n0=$(job_json "$J" | grep -o '"guest":0,"node":"n[0-9]"' | sed 's/.*"n\([0-9]\)"/\1/')
check_match "guest 0's node ($n0)" '^[12]$' "$n0"
from=$(log_lines "$CL_DIR/n$n0.log")
cl_node_kill "$n0" KILL
# node 1 with its two cpus again: the --no-single-copy job below has two
# guests there too
cl_node_up "$n0" $([ "$n0" = 1 ] && echo --cpus 0-1) || fail "node $n0 restarts"
check "node $n0 takes the paused job over" wait_log "$CL_DIR/n$n0.log" "job $J .*taken over after a restart: .* running" 20 "$from"
check_match "... knowing it is paused" "job $J: its guests here are paused" "$(tail -n +"$from" "$CL_DIR/n$n0.log")"
check_eq "... its guests still frozen" "FROZEN FROZEN FROZEN " "$(freezer "$l1")$(freezer "$l2")"
check "the controller still has it running" job_state_is "$J" RUNNING

# -- resume
check_match "job_resume on node 1: resumed" '"type":"resumed"' "$(msg job_resume 1 "$J")"
check_match "job_resume on node 2: resumed" '"type":"resumed"' "$(msg job_resume 2 "$J")"
check_match "job_resume again: resumed (idempotent)" '"type":"resumed"' "$(msg job_resume 2 "$J")"
check_eq "every guest runs again" "THAWED THAWED THAWED " "$(freezer "$l1")$(freezer "$l2")"
vc wait "$J"
check_eq "the job completes with exit status 0" 0 "$?"
vc output "$J" >"$T/j.out"
lines_ok() {
	local g i
	for g in g0 g1 g2; do
		for i in $(seq 80); do
			[ "$(grep -cx "$g tick $i" "$1")" = 1 ] || { echo "# $g tick $i: $(grep -cx "$g tick $i" "$1") times"; return 1; }
		done
	done
}
check "its output is whole: every line of the three guests, each once" lines_ok "$T/j.out"

# -- --no-single-copy: node 1's two guests keep vmshm without the pod
cl_wait_nodes_idle 30
S=$(sub -N 3 --vcpus 1 --no-single-copy --timeout 120 -- sleep 100)
check "job $S (--no-single-copy) runs" wait_state "$S" RUNNING 60
ls1=$(local_of "$S" 1)
check "node 1 has two of its guests and their vmshm region" \
	wait_log "$CL_DIR/n1.log" "job $ls1: vmshm region .* for [0-9]+ ranks" 5
check_eq "... and no pod" "" \
	"$(pgrep -x vhpc-pod | while read -r p; do grep -q ":/vhpc/$ls1/pod\$" /proc/$p/cgroup 2>/dev/null && echo $p; done)"
check_criu "node 1's two guests without a pod" "$(msg job_checkpoint 1 "$S" '"ckpt":"'"$S"'.1","check":true')"
out=$(vc checkpoint "$S" 2>&1)
diag "vhpc checkpoint: $out"
if command -v criu >/dev/null && criu check >/dev/null 2>&1; then
	check "vhpc checkpoint does not refuse it for a pod" eval '! grep -q pod <<<"$out"'
else
	check_match "vhpc checkpoint refuses it for CRIU, not a pod" 'cannot be checkpointed: node n[12]: .*CRIU' "$out"
	check "... the pod is not named" eval '! grep -q pod <<<"$out"'
fi
# -- close_sessions: an open vhpc exec session into a container guest is
#    closed by a job_pause that asks for it, and only by such a one
vc exec "$S" -- sleep 3600 >"$T/exec.out" 2>&1 &
XP=$!
sn0=$(job_json "$S" | grep -o '"guest":0,"node":"n[0-9]"' | sed 's/.*"n\([0-9]\)"/\1/')
check "a vhpc exec session into $S's guest 0 (node ${sn0:-?}) is open" \
	wait_log "$CL_DIR/n$sn0.log" "job $S: exec stream to g0 opened" 20
check_match "job_checkpoint check with close_sessions: the session does not refuse it (CRIU may)" \
	'"type":"(checkable|error)"' "$(msg job_checkpoint "$sn0" "$S" '"ckpt":"'"$S"'.9","check":true,"close_sessions":true')"
check "... nor is it closed by the check" kill -0 "$XP"
check_match "a plain job_pause: paused" '"type":"paused"' "$(msg job_pause "$sn0" "$S")"
check "... with the session still open" kill -0 "$XP"
check_match "no new session while the guests are paused for a checkpoint" \
	"job $S is being checkpointed on this node; open the session again once that is done" \
	"$(vc exec "$S" -- true 2>&1)"
check_match "job_resume: resumed" '"type":"resumed"' "$(msg job_resume "$sn0" "$S")"
check_match "job_pause with close_sessions: paused" '"type":"paused"' \
	"$(msg job_pause "$sn0" "$S" '"close_sessions":true')"
check "... after closing the session: its client ends" poll_until 10 sh -c "! kill -0 $XP 2>/dev/null"
wait "$XP"; xrc=$?
check_eq "... with vhpc's own failure status" 125 "$xrc"
check_match "... saying the node may have closed it for a checkpoint" \
	"the connection closed before the command finished .*closed the job's sessions for a checkpoint" "$(cat "$T/exec.out")"
check_match "the node logged it" "job $S: 1 exec or shell session closed for a checkpoint$" "$(cat "$CL_DIR/n$sn0.log")"
check_eq "... its command is gone from the guest" "" "$(pgrep -f '^sleep 3600$')"
check_match "job_resume: resumed" '"type":"resumed"' "$(msg job_resume "$sn0" "$S")"
check_eq "the job runs on" 0 "$(vc exec "$S" -- true >/dev/null 2>&1; echo $?)"
# The attack: the guest is the user's, and so is its agent's session
# process, which the user can stop so that it never lets go of the
# stream.  The pause then gives up after its 10 s, says why, and freezes
# nothing (the controller resumes the job, as for any failed pause).
vc exec "$S" -- sleep 3601 >"$T/exec2.out" 2>&1 &
XP=$!
check "another session is open" wait_log "$CL_DIR/n$sn0.log" "job $S: exec stream to g0 opened" 20
for _ in $(seq 50); do sp=$(pgrep -f '^sleep 3601$') && break; sleep 0.1; done
sess=$(ps -o ppid= -p "${sp:-0}" 2>/dev/null | tr -d ' ')
check_eq "its command's parent is the agent's session process" vhpc-guestd "$(cat /proc/"${sess:-0}"/comm 2>/dev/null)"
kill -STOP "$sess"
t0=$SECONDS
out=$(msg job_pause "$sn0" "$S" '"close_sessions":true')
check_match "a job_pause with close_sessions, the session held by a stopped agent: refused, saying why" \
	'"type":"error".*cannot pause its guests on node n[12]: 1 vhpc exec or vhpc shell session was still open 10 s after its connection was closed' "$out"
check "... after its 10 s ($((SECONDS - t0)) s)" test $((SECONDS - t0)) -lt 20
check_match "... nothing frozen" '^(THAWED )+$' "$(freezer "$(local_of "$S" "$sn0")")"
kill -CONT "$sess"
check "let go, the session ends" poll_until 10 sh -c "! kill -0 $XP 2>/dev/null"
wait "$XP"
check_eq "... its command gone" "" "$(pgrep -f '^sleep 3601$')"
vc cancel "$S" >/dev/null 2>&1
check "job $S ends" wait_state "$S" CANCELLED 30

# -- a job stopped while paused, by a vhpcd that took it over paused
#    (its guest 0's agent is frozen: the node must thaw it to stop it)
K=$(sub -N 1 --vcpus 1 --timeout 120 -- sleep 100)
check "job $K runs" wait_state "$K" RUNNING 60
lk=$(local_of "$K" 1)
n=1; [ -n "$lk" ] || { n=2; lk=$(local_of "$K" 2); }
check_match "job_pause: paused" '"type":"paused"' "$(msg job_pause "$n" "$K")"
check_match "its guest is frozen" '^(FROZEN )+$' "$(freezer "$lk")"
cl_node_kill "$n" KILL
cl_node_up "$n" || fail "node $n restarts"
check "node $n takes it over" wait_log "$CL_DIR/n$n.log" "job $K .*taken over after a restart: .* running" 20
vc cancel "$K" >/dev/null 2>&1
check "cancelled while paused, it ends" wait_state "$K" CANCELLED 30
check "the nodes remove it" cl_wait_nodes_idle 30
for i in 1 2; do cl_node_kill $i TERM; done
check_eq "nothing is left" "$before" "$(cl_leftovers)"
done_testing
