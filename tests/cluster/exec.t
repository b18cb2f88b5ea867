#!/usr/bin/env bash
# timeout: 150
# vhpc exec and vhpc shell into a running job's container guests on a
# loopback cluster (vhpc-ctld and two vhpcd): the command runs in the
# guest asked for, as the job's user, in its folder and environment, with
# stdout, stderr and the exit status apart; --all prefixes lines with the
# guest; Ctrl-C reaches it.  Another user is denied, the relay cannot be
# pointed at another socket, a shell on a real terminal (tmux) follows
# resizes, takes Ctrl-C and exits, and the job then finishes as it would
# have, with nothing left behind.
. "$(dirname "$0")/../lib.sh"
need_cluster
WP=$VHPC_TOP/$B/testbin/wireprobe
[ -x "$WP" ] || { echo "Bail out! $WP is not built (make tests)"; exit 1; }
command -v setpriv >/dev/null || skip_all "setpriv is not installed"
command -v tmux >/dev/null || skip_all "tmux is not installed (the shell's terminal)"
command -v mpicc >/dev/null || skip_all "mpicc is not installed"
CL=vcx$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
for i in 1 2; do cl_node_up $i || fail "node $i starts"; done
check "two nodes register" cl_wait_nodes_up 2

# Every test cluster numbers its jobs from 1, and a job's cgroups are
# named after its number and its node's (vhpc/1x1/...): a job of another
# test cluster running beside would share them, and its teardown end this
# job.  Numbers others do not reach: jobs that wait (5 guests, 2 nodes)
# and are cancelled at once.
for ((k = 0; k < 40; k++)); do
	id=$(vc submit --json -N 5 -n 5 -- true 2>/dev/null | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
	[ -n "$id" ] && vc cancel "$id" >/dev/null 2>&1
done
diag "job numbers used up to ${id:-none}"
hello_user vhx$$
chmod 755 "$T/home"
# uvc ARGS: vhpc as the job's user; nvc: as nobody
uvc() { cl_in "$CL_HUB" setpriv --reuid "$uid" --regid "$gid" --init-groups env HOME="$H" "$BIN/vhpc" "$@"; }
nvc() { as_nobody "$BIN/vhpc" "$@"; }

# The job waits, in every rank, until the test says stop; so it is known
# to be running through everything below, and to end as it would have.
J=$(cd "$W" && uvc submit --json -N 2 -n 2 --vcpus 1 -x FOO='bar baz' -- \
	sh -c 'while [ ! -e stop ]; do sleep 0.1; done; echo "rank on $(hostname) done"' |
	sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
check "the user's job runs" wait_state "$J" RUNNING 60
job_nodes=$(job_field "$J" nodes)
# A daemon's descriptors at a quiet moment.  Heartbeats (every 500 ms,
# each node to vhpc-ctld) hold a TCP connection and munged's socket on
# both sides for the few ms of a call, so a single count caught one now
# and then (11 against 10 in full-suite runs, under load): the least of 6
# counts over 0.6 s, more than a heartbeat's period.  A leaked descriptor
# is in every count.
quiet_fds() {
	local m='' c k
	for k in 1 2 3 4 5 6; do
		c=$(ls /proc/"$1"/fd | wc -l)
		if [ -z "$m" ] || [ "$c" -lt "$m" ]; then m=$c; fi
		sleep 0.1
	done
	echo "$m"
}
node_pid() { eval "echo \$NODE_PID_$1"; }
ctld_fds() { quiet_fds "$CTLD_PID"; }
node_fds() { quiet_fds "$(node_pid "$1")"; }
fd_list() { local f; for f in /proc/"$1"/fd/*; do echo "${f##*/} $(readlink "$f")"; done; }
# the job's processes are all the test user's (its ranks' sleeps come and go)
guest_procs() { ps -u "$uid" -o comm= | grep -vxc sleep; }
# RUNNING means mpirun was launched, not that the ranks run yet: the
# count below is taken once both ranks' shells are there.
ranks_up() { [ "$(ps -u "$uid" -o comm= | grep -cx sh)" -ge 2 ]; }
check "both ranks run" poll_until 60 ranks_up
fd0=$(ctld_fds) fd1=$(node_fds 1) fd2=$(node_fds 2) p0=$(guest_procs) ps0=$(ps -u "$uid" -o pid=,args=)
fl0=$(fd_list "$CTLD_PID") fl1=$(fd_list "$(node_pid 1)") fl2=$(fd_list "$(node_pid 2)")

out=$(uvc exec "$J" -- hostname 2>&1); rc=$?
check_eq "exec runs in guest 0 by default" "0 g0" "$rc $out"
check_eq "--guest 1 runs in guest 1" "g1" "$(uvc exec "$J" --guest 1 -- hostname 2>&1)"
check_eq "in the ranks' working folder (the submission folder)" "$W" "$(uvc exec "$J" -- pwd 2>&1)"
check_eq "with the job's environment (-x FOO)" "bar baz" "$(uvc exec "$J" --guest 1 -- sh -c 'echo "$FOO"' 2>&1)"
uvc exec "$J" -- sh -c 'echo out; echo err >&2; exit 3' >"$T/x.out" 2>"$T/x.err"; rc=$?
check_eq "the exit status comes back" 3 "$rc"
check_eq "stdout apart" "out" "$(cat "$T/x.out")"
check_eq "stderr apart" "err" "$(cat "$T/x.err")"
check_eq "a signal that ended it: 128+N" 137 "$(uvc exec "$J" -- sh -c 'kill -9 $$' >/dev/null 2>&1; echo $?)"
echo "from stdin" | uvc exec "$J" -- cat >"$T/x.in" 2>&1
check_eq "stdin reaches the command" "from stdin" "$(cat "$T/x.in")"
uvc exec "$J" --guest 1 -- sh -c 'echo made >"$PWD/by-exec"' >/dev/null 2>&1
check_eq "the command ran as the job's user (its file on the host)" "$uid:$gid" "$(stat -c %u:%g "$W/by-exec" 2>&1)"
out=$(uvc exec "$J" --all -- sh -c 'hostname; echo "two words"; printf partial' 2>&1 | sort)
check_eq "--all: every guest, each line after its guest" \
	"$(printf 'g0: g0\ng0: partial\ng0: two words\ng1: g1\ng1: partial\ng1: two words')" "$out"
check_eq "--all: the highest exit status" 5 "$(uvc exec "$J" --all -- sh -c 'exit $((3 + ${VHPC_GUEST_INDEX:-0} * 2))' >/dev/null 2>&1; echo $?)"
check_eq "root may exec into the user's job" "g1" "$(vc exec "$J" --guest 1 -- hostname 2>&1)"
out=$(uvc exec "$J" --guest 2 -- true 2>&1); rc=$?
check_match "a guest the job does not have is refused, saying so" "job $J has 2 guests \\(g0..g1\\), not g2" "$rc $out"
check_eq "... with vhpc's own status" 125 "$rc"

# Ctrl-C: SIGINT to vhpc exec goes to the command, whose status comes back.
uvc exec "$J" -- sleep 30 >/dev/null 2>&1 &
xp=$!
poll_until 10 pgrep -u "$uid" -f '^sleep 30$' >/dev/null || diag "the remote sleep did not start"
start=$(date +%s%N)
kill -INT "$(pgrep -f "^$BIN/vhpc exec $J -- sleep 30" | head -1)"
wait $xp; rc=$?
el=$(( ($(date +%s%N) - start) / 1000000 ))
check_eq "Ctrl-C (SIGINT) ends the remote sleep: 128+2" 130 "$rc"
check "... at once (${el} ms, not 30 s)" test "$el" -lt 10000

# Another user: the same `denied` as cancel, and nothing runs.
out=$(nvc exec "$J" -- touch /tmp/nobody-was-here 2>&1); rc=$?
check_match "another user's exec is denied" "permission denied.*only its owner and root" "$out"
check_eq "... with vhpc's status" 125 "$rc"
check_match "cancel says the same" "permission denied.*only its owner and root" "$(nvc cancel "$J" 2>&1)"
out=$(nvc exec "$J" --all -- true 2>&1)
check_match "--all too" "permission denied" "$out"
check_match "another user's shell is denied before any terminal is needed" "permission denied" "$(nvc shell "$J" </dev/null 2>&1)"

# The relay goes to the guest named, and nowhere else.
wp() { cl_in "$CL_HUB" "$WP" "$@" 2>&1; }
wp_user() { cl_in "$CL_HUB" setpriv --reuid "$uid" --regid "$gid" --init-groups "$WP" "$@" 2>&1; }
n1=$(echo "$job_nodes" | sed 's/\[//;s/,.*//;s/[]"]//g')
naddr=198.18.0.1${n1#n}:6818
check_match "the user cannot ask a node for a stream itself (vhpcd takes root's messages only)" 'vhpcd takes messages from root only' \
	"$(wp_user send "$naddr" "{\"v\":3,\"type\":\"guest_open\",\"node\":\"$n1\",\"job\":$J,\"guest\":0,\"pipe_key\":\"$(printf '%064d' 0)\"}")"
check_match "exec names a job and a guest, nothing else (no socket path)" 'unknown field.*path' \
	"$(wp_user send "$CL_CTL" "{\"v\":3,\"type\":\"exec\",\"id\":$J,\"guest\":0,\"path\":\"/run/munge/munge.socket.2\"}")"
check_match "guest_open too" 'unknown field.*sock' \
	"$(wp send "$naddr" "{\"v\":3,\"type\":\"guest_open\",\"node\":\"$n1\",\"job\":$J,\"guest\":0,\"pipe_key\":\"$(printf '%064d' 0)\",\"sock\":\"/x\"}")"
# vhpc shell on a real terminal: tmux, of its own server.
TM="tmux -L vhx$$"
at_exit "$TM kill-server 2>/dev/null"
cat >"$T/shell.sh" <<SH
#!/bin/sh
cd "$W"
nsenter --net=/run/netns/$CL_HUB -- setpriv --reuid $uid --regid $gid --init-groups \
	env HOME="$H" TERM=xterm VHPC_MUNGE_SOCKET="$VHPC_MUNGE_SOCKET" VHPC_CONTROLLER="$CL_CTL" \
	"$BIN/vhpc" shell $J --guest 1
echo "SHELL-EXIT:\$?" | tee "$T/shell.log"
sleep 60
SH
chmod 755 "$T/shell.sh"
$TM new-session -d -s sh -x 100 -y 30 "$T/shell.sh"
$TM set -g window-size manual 2>/dev/null
diag "tmux: $($TM ls 2>&1)"
screen() { $TM capture-pane -p -t sh -S -200; }
seen() { screen | grep -q -- "$1"; }
type_in() { $TM send-keys -t sh "$@"; }
type_in 'PS1="vsh""> "; export PS1' Enter
poll_until 15 seen '^vsh> ' || diag "$(screen 2>&1)" "$(cat "$T/shell.log" 2>/dev/null)"
type_in 'echo "on $(hostname) in $(pwd) size $(stty size)"' Enter
check "the shell runs in guest 1, in the job's folder, on a 30x100 terminal" poll_until 10 seen "on g1 in $W size 30 100"
$TM resize-window -t sh -x 120 -y 40
sleep 0.5
type_in 'echo "now $(stty size)"' Enter
check "a resize reaches the guest's terminal" poll_until 10 seen "now 40 120" || diag "$(screen)"
type_in 'sleep 30' Enter
sleep 1
t0=$(date +%s)
type_in C-c
type_in 'echo "sleep ended with $?"' Enter
check "Ctrl-C stops the foreground sleep (130)" poll_until 10 seen "^sleep ended with 130"
seen "^sleep ended with 130" || diag "$(screen)"
check "... at once" test $(( $(date +%s) - t0 )) -lt 10
type_in 'tty; exit 7' Enter
check "exit leaves the shell with its status" poll_until 10 seen "SHELL-EXIT:7"
check_match "the shell had a pty" '^/dev/pts/[0-9]+' "$(screen | grep -E '^/dev/pts/' | head -1)"
$TM kill-server 2>/dev/null
# A checkpoint that closes sessions (a drain's) closes an idle shell too:
# its bash ignores SIGTERM, so guestd's SIGKILL after the grace ends it.
g1n=$(job_json "$J" | grep -o '"guest":1,"node":"n[0-9]"' | sed 's/.*"n\([0-9]\)"/\1/')
rm -f "$T/shell.log"
$TM new-session -d -s sh -x 100 -y 30 "$T/shell.sh"
# What is typed before the shell is up may be lost: typed until seen.
prompt() { type_in 'PS1="vsh""> "; export PS1' Enter; sleep 1; seen '^vsh> '; }
check "a second shell into guest 1 (node n${g1n:-?}) waits at its prompt" poll_until 20 prompt
t0=$(date +%s%N)
check_match "job_pause with close_sessions on its node: paused" '"type":"paused"' \
	"$(wp send "198.18.0.1$g1n:6818" "{\"v\":3,\"type\":\"job_pause\",\"node\":\"n$g1n\",\"job\":$J,\"close_sessions\":true}")"
el=$(( ($(date +%s%N) - t0) / 1000000 ))
check "... the shell was closed first: vhpc shell ended with vhpc's status" poll_until 5 grep -q "SHELL-EXIT:125" "$T/shell.log"
diag "the pause with an idle shell to close took $el ms (guestd's grace before SIGKILL is 2 s)"
check_match "job_resume: resumed" '"type":"resumed"' \
	"$(wp send "198.18.0.1$g1n:6818" "{\"v\":3,\"type\":\"job_resume\",\"node\":\"n$g1n\",\"job\":$J}")"
$TM kill-server 2>/dev/null

# A guest that puts a link to a host socket (munged's) where its agent's
# socket was: vhpcd refuses to follow it, rather than connecting there.
uvc exec "$J" --guest 1 -- sh -c "rm -f /vhpc/run/ctl.sock && ln -s '$CL_DIR/munge.sock' /vhpc/run/ctl.sock" >/dev/null 2>&1
out=$(uvc exec "$J" --guest 1 -- hostname 2>&1); rc=$?
check_match "a guest's link in place of its socket is not followed" "not a socket \\(a symlink or file in its place\\)" "$out"
check_eq "... and the exec fails" 125 "$rc"

# A user's open sessions are bounded (each holds a connection of
# vhpc-ctld for as long as it lasts): the 33rd is refused, saying why,
# and ending them gives the room back.
xs=()
for k in $(seq 32); do uvc exec "$J" -n -- sleep 120 >/dev/null 2>&1 & xs+=($!); done
poll_until 30 eval '[ "$(pgrep -u "$uid" -fc "^sleep 120$")" -ge 32 ]' || diag "only $(pgrep -u "$uid" -fc "^sleep 120$") sessions started"
out=$(uvc exec "$J" -- true 2>&1); rc=$?
check_match "the 33rd session of a user is refused, saying why" "has 32 vhpc exec and vhpc shell sessions open, the most one user may" "$out"
check_eq "... with vhpc's status" 125 "$rc"
check_eq "root is not held to it" g0 "$(vc exec "$J" -- hostname 2>&1)"
kill -TERM $(pgrep -f "^$BIN/vhpc exec $J -n -- sleep 120") 2>/dev/null
for p in "${xs[@]}"; do wait "$p"; done
check_eq "once they ended, the user may again" g0 "$(uvc exec "$J" -- hostname 2>&1)"

# Nothing left: the daemons' descriptors and the guests' processes are
# what they were before the first exec.  A stream's relay in vhpcd ends
# (and closes its two descriptors) after vhpc has its exit status, so
# each node's streams are waited for, and the counts for a quiet moment.
streams() { grep -c "exec stream to g[0-9]* opened" "$CL_DIR/n$1.log"; }
ended() { grep -c "the exec stream to g[0-9]* ended" "$CL_DIR/n$1.log"; }
all_ended() { [ "$(streams 1) $(streams 2)" = "$(ended 1) $(ended 2)" ]; }
check "every exec stream a node opened has ended" poll_until 15 all_ended
diag "exec streams opened on the nodes: $(streams 1) $(streams 2); ended: $(ended 1) $(ended 2)"
fds_back() { [ "$(ctld_fds) $(node_fds 1) $(node_fds 2)" = "$fd0 $fd1 $fd2" ]; }
poll_until 15 fds_back
check_eq "vhpc-ctld holds no descriptor more" "$fd0" "$(ctld_fds)"
check_eq "the nodes hold no descriptor more" "$fd1 $fd2" "$(node_fds 1) $(node_fds 2)"
fds_back || diag "descriptors before (vhpc-ctld, n1, n2):" "$fl0" "--" "$fl1" "--" "$fl2" "after:" \
	"$(fd_list "$CTLD_PID")" "--" "$(fd_list "$(node_pid 1)")" "--" "$(fd_list "$(node_pid 2)")"
check_eq "the guests run no process more (no session left in guestd)" "$p0" "$(guest_procs)"
[ "$p0" = "$(guest_procs)" ] || diag "before:" "$ps0" "after:" "$(ps -u "$uid" -o pid=,args=)"

# The job was left as it was: it finishes with its normal output.
touch "$W/stop"
check "the job completes" wait_state "$J" COMPLETED 60
check_eq "... with exit status 0" 0 "$(job_field "$J" exit_status)"
check_eq "... and its normal output" "rank on g0 done,rank on g1 done" "$(uvc output "$J" 2>&1 | sort | paste -sd,)"
check_match "an exec into the ended job says so" "job $J has ended \\(COMPLETED\\)" "$(uvc exec "$J" -- true 2>&1)"
check "its nodes remove it" cl_wait_nodes_idle 30
# (what the other lines count may be other tests' jobs, running beside)
mine() { grep -E '^(n[0-9]|mounts) '; }
check_eq "nothing of the job is left" "$(echo "$before" | mine)" "$(cl_leftovers | mine)"
done_testing
