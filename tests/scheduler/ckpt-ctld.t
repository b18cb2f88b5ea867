#!/usr/bin/env bash
# timeout: 240
# vhpc checkpoint as vhpc-ctld orders it, on simulated nodes (vhpcd
# --simulate logs each job_pause, job_checkpoint and job_resume it is
# sent, in order, and refuses a save of a job not paused): every node
# checks, then every node pauses, and only then does any save, then every
# node resumes; --stop ends the job CHECKPOINTED (vhpc wait: 75); refused
# for another user, for a job not running, for a second checkpoint of the
# same job at once, and when a node cannot save its part (nothing paused);
# a save failing on one node resumes the job on every node and drops the
# partial checkpoint; a controller killed mid-save resumes the job's
# guests when it comes back and drops the partial checkpoint; vhpc
# checkpoints and vhpc checkpoint rm for owners and root; vhpc node drain
# keeps new jobs off a node, and with --checkpoint checkpoints its jobs
# and requeues them as restarts of their checkpoints, which vhpc-ctld
# places on another node (checkpoints.shared) with the checkpoint's subnet.
# The follow-up's gaps: a restart waits in the queue behind the head's
# backfill reservation like any job; a drain checkpoints its jobs at once,
# and one whose checkpoint fails runs on where it is; a restart under a
# changed guest_port is refused saying how to get it back; a restart
# after the job's image name was pushed again runs the id the job ran;
# vhpc restart and checkpoint rm refuse a path-like name locally; vhpc
# checkpoints --by-node and --older-than, and checkpoint rm --older-than.
# A restart whose node finds its part of the checkpoint damaged (code
# ckpt_damaged) fails at once, after 1 attempt, naming the node and its
# reason, and vhpc checkpoints says the checkpoint is damaged; one refused
# for a passing reason is tried 3 times as before (the time of each to
# FAILED is measured).
. "$(dirname "$0")/../lib.sh"
need_root
need_built vhpc vhpc-ctld vhpcd
command -v munged >/dev/null || skip_all "munged is not installed"

T=$(mktemp -d /tmp/vhpct-ckc.XXXXXX)
chmod 755 "$T"
at_exit "rm -rf '$T'"
munged_up "$T" || { fail "munged"; done_testing; exit 1; }
export VHPC_MUNGE_SOCKET=$T/munge.sock VHPC_STATE_DIR=$T/state
port=$(( 20000 + RANDOM % 20000 ))
export VHPC_CONTROLLER=127.0.0.1:$port
mkdir -m 700 "$T/ckpt"
cat >"$T/cluster.yaml" <<EOF
name: ckc
job_network:
  pool: 10.215.0.0/16
checkpoints:
  dir: $T/ckpt
  shared: true
EOF
export VHPC_CLUSTER=$T/cluster.yaml

ctld_up() {
	local from
	from=$(cat "$T/ctld.log" 2>/dev/null | wc -l)
	"$BIN/vhpc-ctld" --listen "$VHPC_CONTROLLER" --state "$T/ctld" \
		--heartbeat-interval 300 --heartbeat-misses 20 --log "$T/ctld.log" &
	CTLD=$!
	at_exit "kill -9 $CTLD 2>/dev/null"
	poll_until 10 sh -c "tail -n +$((from + 1)) '$T/ctld.log' | grep -q ready"
}
sim_up() {  # NAME N PORT [VHPC_SIM_CKPT_FAIL [VHPC_SIM_CKPT_SAVE_MS [CORES]]]
	VHPC_SIM_CKPT_FAIL=${4-} VHPC_SIM_CKPT_SAVE_MS=${5-} "$BIN/vhpcd" --simulate "$2" --name "$1" \
		--listen 127.0.0.1:"$3" --controller "$VHPC_CONTROLLER" --topology "synthetic:numa:1 core:${6:-2} pu:1" \
		--sim-runtime 600000 --log "$T/$1.log" &
	at_exit "kill -9 $! 2>/dev/null"
}
v() { "$BIN/vhpc" "$@"; }
nodes_up() { [ "$(v nodes --json | grep -c '"state": *"up"')" -ge 6 ]; }
sub() { v submit --json --mem 64M "$@" -- true | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
rec() { v queue --all --json | tr -d ' \n' | sed 's/},{"id"/}\n{"id"/g' | grep -o "{\"id\":$1,.*" | head -1; }
state() { rec "$1" | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
is() { [ "$(state "$1")" = "$2" ]; }
# only NODE... take new jobs
only() { local n; for n in s-0 s-1 bad-0 bad-1 slow-0 wide-0; do
	if [[ " $* " == *" $n "* ]]; then v node undrain "$n" >/dev/null; else v node drain "$n" >/dev/null; fi; done; }
# the checkpoint messages a simulated node was sent for job J, in order: "NODE OP"
msgs() { cat "$T"/s.log "$T"/bad.log "$T"/slow.log "$T"/wide.log 2>/dev/null | sort -s -k1,2 |
	sed -n "s/.*simulated node \([a-z0-9-]*\): \(job_[a-z]*\) job $1\( \([a-z]*\)\)\{0,1\}.*/\1 \2\3/p" | cut -d' ' -f1-3; }
# log lines are timestamped; one process's are in order, and across the
# three the timestamps order them (sort -s keeps ties in file order)

check "vhpc-ctld starts" ctld_up
sim_up s 2 $((port + 1))
sim_up bad 2 $((port + 2)) "check@bad-0,save@bad-1,restore@bad-0,prepare@bad-1"
sim_up slow 1 $((port + 3)) "" 3000
sim_up wide 1 $((port + 4)) "" 3000 4
check "six simulated nodes register" poll_until 20 nodes_up
printf '%s\n' 'name: ckcsim' 'description: busybox only' 'packages:' '  - busybox-static' >"$T/img.yaml"
check "an image for the jobs" sh -c "'$BIN/vhpc' image build '$T/img.yaml' >'$T/img.log' 2>&1 &&
	'$BIN/vhpc' image push ckcsim --as default >>'$T/img.log' 2>&1"

# -- drain: only s-0 and s-1 take jobs
only s-0 s-1
check_match "vhpc nodes shows the drained nodes" '^bad-0 +drain' "$(v nodes)"
A=$(sub -N 2 --vcpus 2)
check "A (2 guests x 2 cores) runs" poll_until 20 is "$A" RUNNING
check_match "... on s-0 and s-1, the nodes not drained" '"nodes":\["s-[01]","s-[01]"\]' "$(rec "$A")"

out=$(v checkpoint "$A" 2>&1); rc=$?
check_eq "vhpc checkpoint A succeeds" 0 "$rc"
check_match "... and prints the checkpoint's name, size and standstill" "^checkpoint $A\\.1 of job $A: 0 B, the job stood still [0-9.]+ s$" "$out"
m=$(msgs "$A")
diag "$m"
check_eq "each node: check, pause, save, resume" "s-0 job_checkpoint check
s-0 job_pause
s-0 job_checkpoint save
s-0 job_resume
s-1 job_checkpoint check
s-1 job_pause
s-1 job_checkpoint save
s-1 job_resume" "$(printf '%s\n' "$m" | sort -s -k1,1)"
# across nodes, from the ordered log: the last pause before the first save
order=$(cat "$T/s.log" | sed -n "s/.*simulated node s-[01]: \(job_[a-z]*\) job $A\( \([a-z]*\)\)\{0,1\}.*/\1\2/p" | tr '\n' ' ')
diag "in the order s's log has them: $order"
check_match "every node checked before any paused, and paused before any saved, then resumed" \
	'^(job_checkpoint check ){2}(job_pause ){2}(job_checkpoint save ){2}(job_resume ){2}$' "$order"
check "A still runs" is "$A" RUNNING
l=$(v checkpoints)
check_match "vhpc checkpoints lists it: name, job, user, size, state, nodes" "^$A\\.1 +$A +root +0 B +[0-9T:-]+Z +done +s-[01],s-[01]$" "$l"
check "the store keeps its record before any node was asked (ctld's log: paused after the record)" \
	grep -q "job $A: paused on 2 nodes for checkpoint $A.1" "$T/ctld.log"

# -- refusals
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$BIN/vhpc" checkpoint "$A" 2>&1); rc=$?
check_eq "another user may not checkpoint A" 125 "$rc"
check_match "... told why" "permission denied .*only its owner and root" "$out"
P=$(sub -N 1 --vcpus 64)
out=$(v checkpoint "$P" 2>&1); rc=$?
check_eq "a pending job cannot be checkpointed" 125 "$rc"
check_match "... saying so" "job $P is PENDING: only a running job can be checkpointed" "$out"
v cancel "$P" >/dev/null
out=$(v checkpoint "$P" 2>&1)
check_match "... nor a cancelled one" "job $P is CANCELLED: only a running job" "$out"
check_eq "no node was asked anything for them" "" "$(msgs "$P")"
# closes LOG JOB: its node messages, each with "(close sessions)" when it
# asked for the sessions a container guest cannot keep to be closed
closes() { sed -n "s/.*simulated node [a-z0-9-]*: \(job_[a-z]*\) job $2\( \(check\|save\) [0-9.]*\)\{0,1\}\( (close sessions)\)\{0,1\}$/\1 \3\4/p" "$1" | tr -s ' ' | tr '\n' '|'; }
check_eq "a plain checkpoint asks no node to close sessions" "8 messages, 0 closing" \
	"$(closes "$T/s.log" "$A" | cut -d'|' -f1-8 | tr '|' '\n' | awk '{ n++ } /close/ { c++ } END { printf "%d messages, %d closing", n, c }')"
out=$(v checkpoint --close-sessions "$A" 2>&1); rc=$?
check_eq "vhpc checkpoint --close-sessions A succeeds" 0 "$rc"
check_eq "... its check and pause ask each node to close them, its save and resume do not" \
	"job_checkpoint check (close sessions)|job_checkpoint check (close sessions)|job_checkpoint save|job_checkpoint save|job_pause (close sessions)|job_pause (close sessions)|job_resume |job_resume |" \
	"$(closes "$T/s.log" "$A" | cut -d'|' -f9-16 | tr '|' '\n' | sort | tr '\n' '|')"
v checkpoint rm "$A.2" >/dev/null
v cancel "$A" >/dev/null
check "A is cancelled (its nodes free for the next jobs)" poll_until 10 is "$A" CANCELLED

# -- a node that cannot save its part: nothing changes
only bad-0
C=$(sub -N 1 --vcpus 2)
check "C runs on bad-0" poll_until 20 is "$C" RUNNING
out=$(v checkpoint "$C" 2>&1); rc=$?
check_eq "C's checkpoint is refused" 125 "$rc"
check_match "... naming the node and its reason, nothing changed" "job $C cannot be checkpointed: node bad-0: simulated failure of check on bad-0.*nothing was changed" "$out"
check_eq "bad-0 was only asked to check: never paused" "bad-0 job_checkpoint check" "$(msgs "$C")"
check "C runs on" is "$C" RUNNING
check "no checkpoint of C is listed" sh -c "! '$BIN/vhpc' checkpoints | grep -q '^$C\\.'"

# -- a save failing on one node: every node resumes, the partial checkpoint goes
only bad-1 s-0
D=$(sub -N 2 --vcpus 2)
check "D runs on bad-1 and s-0" poll_until 20 is "$D" RUNNING
out=$(v checkpoint "$D" 2>&1); rc=$?
check_eq "D's checkpoint fails" 125 "$rc"
check_match "... naming the node that failed and why; the job runs on" "checkpoint failed: saving on node bad-1: simulated failure of save on bad-1 .*; the job runs on" "$out"
m=$(msgs "$D")
diag "$m"
check_match "bad-1 was paused, failed its save, and was resumed" 'bad-1 job_pause.*bad-1 job_checkpoint save.*bad-1 job_resume' "$(printf '%s\n' "$m" | grep bad-1 | tr '\n' ' ')"
check_match "s-0 too was resumed" 's-0 job_pause.* s-0 job_resume' "$(printf '%s\n' "$m" | grep s-0 | tr '\n' ' ')"
check "D runs on" is "$D" RUNNING
check "no checkpoint of D is listed" sh -c "! '$BIN/vhpc' checkpoints | grep -q '^$D\\.'"
v cancel "$C" >/dev/null 2>&1; v cancel "$D" >/dev/null 2>&1

# -- one checkpoint of a job at a time; a controller killed mid-save
only slow-0
B=$(sub -N 1 --vcpus 2)
check "B runs on slow-0 (whose saves take 3 s)" poll_until 20 is "$B" RUNNING
v checkpoint "$B" >"$T/b1.out" 2>&1 &
first=$!
poll_until 10 grep -q "slow-0: job_pause job $B" "$T/slow.log"
out=$(v checkpoint "$B" 2>&1); rc=$?
check_eq "a second checkpoint of B while one is under way is refused" 125 "$rc"
check_match "... saying why" "job $B is being checkpointed already: one checkpoint of a job at a time" "$out"
wait $first
check_match "the first one completes" "^checkpoint $B\\.1 of job $B" "$(cat "$T/b1.out")"

v checkpoint "$B" >/dev/null 2>&1 &
check "a second checkpoint of B is saving" poll_until 10 grep -q "slow-0: job_checkpoint job $B save $B.2" "$T/slow.log"
kill -9 "$CTLD"; wait "$CTLD" 2>/dev/null
check "vhpc-ctld, killed mid-save, comes back" ctld_up
check "... and resumes B's guests" poll_until 15 sh -c "grep 'slow-0: job_' '$T/slow.log' | tail -1 | grep -q 'job_resume job $B'"
check "... B runs on" poll_until 10 is "$B" RUNNING
check "... and the partial checkpoint B.2 is gone" poll_until 10 sh -c "! '$BIN/vhpc' checkpoints | grep -q '^$B\\.2 '"
check_match "... its log says so" "checkpoint $B.2: partial, removed" "$(cat "$T/ctld.log")"
check "B.1 is still there" sh -c "'$BIN/vhpc' checkpoints | grep -q '^$B\\.1 '"

# -- --stop
out=$(v checkpoint --stop "$B" 2>&1); rc=$?
check_eq "vhpc checkpoint --stop B succeeds" 0 "$rc"
check_match "... saying the job is stopped" "the job is stopped" "$out"
check "B ends CHECKPOINTED" poll_until 10 is "$B" CHECKPOINTED
v wait "$B" >/dev/null 2>&1; rc=$?
check_eq "vhpc wait B exits 75 (EX_TEMPFAIL: restart it)" 75 "$rc"
check_match "... its reason names the checkpoint (B.3: B.2's name is never given again)" "checkpointedto$B\\.3andstopped" "$(rec "$B")"
check_eq "slow-0 was not resumed after its last save: the job was stopped instead" "slow-0 job_checkpoint save" \
	"$(msgs "$B" | tail -1)"

# -- rm
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$BIN/vhpc" checkpoint rm "$B.1" 2>&1); rc=$?
check_eq "another user may not remove B.1" 125 "$rc"
check_match "... told why" "only its owner and root may remove it" "$out"
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$BIN/vhpc" restart "$B.1" 2>&1); rc=$?
check_eq "... nor restart it" 125 "$rc"
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$BIN/vhpc" checkpoints 2>&1)
check "... nor does it see it listed" sh -c "! printf '%s' '$out' | grep -q '^$B\\.'"
mkdir -m 700 "$T/ckpt/$B.1"; echo part >"$T/ckpt/$B.1/part.g0.sha256"
check_match "root removes B.1, and its folder" "checkpoint $B.1 removed" "$(v checkpoint rm "$B.1" 2>&1)"
check "... gone from the list" sh -c "! '$BIN/vhpc' checkpoints | grep -q '^$B\\.1 '"
check "... and from the checkpoint folder" test ! -e "$T/ckpt/$B.1"
out=$(v checkpoint rm ../etc 2>&1); rc=$?
check_eq "a name that is not a checkpoint's is refused, by vhpc itself (usage)" 2 "$rc"

# -- vhpc node drain --checkpoint: requeued as a restart elsewhere
only s-0
E=$(sub -N 1 --vcpus 2)
check "E runs on s-0" poll_until 20 sh -c "[ \"\$('$BIN/vhpc' queue --all --json | tr -d ' \n' | grep -o '{\"id\":$E,[^]]*' | grep -o 'RUNNING.*s-0')\" ]"
esub=$(rec "$E" | grep -o '"subnet":"[^"]*"')
v node undrain s-1 >/dev/null
out=$(v node drain s-0 --checkpoint 2>&1); rc=$?
diag "$out"
check_eq "vhpc node drain s-0 --checkpoint succeeds" 0 "$rc"
R=$(printf '%s' "$out" | sed -n "s/^job $E: checkpointed to $E\\.1, requeued as job \([0-9]*\)$/\1/p")
check "... E was checkpointed and requeued as a new job" test -n "$R"
check "E ends CHECKPOINTED" is "$E" CHECKPOINTED
check_match "... saying where it went" "requeuedasjob$R\\(nodes-0drained\\)" "$(rec "$E")"
check "the restart R goes to s-1: s-0 is drained, the checkpoints shared" \
	poll_until 20 sh -c "'$BIN/vhpc' queue --all --json | tr -d ' \n' | grep -o '{\"id\":$R,.*' | grep -q '\"nodes\":\\[\"s-1\"\\]'"
check_match "... it says what it restarts" "\"restart\":\"$E\\.1\"" "$(rec "$R")"
check_match "... with E's subnet (the guests keep their addresses)" "$esub" "$(rec "$R")"
check_eq "a drain does not wait for a user's open shell: its check and pause close them" \
	"job_checkpoint check (close sessions)|job_pause (close sessions)|job_checkpoint save|" "$(closes "$T/s.log" "$E")"
v cancel "$R" >/dev/null 2>&1

# -- a restart is a job of the queue: it waits behind the head's reservation
only s-0 s-1
X=$(sub -N 1 --vcpus 2 --timeout 10m)
check "X (10 min) runs on one node" poll_until 20 is "$X" RUNNING
Z=$(sub -N 1 --vcpus 2 --timeout 1h)
check "Z (1 h) runs on the other" poll_until 20 is "$Z" RUNNING
H=$(sub -N 2 --vcpus 2 --timeout 10m)
sleep 1
check "H (both nodes) waits at the head of the queue, its start reserved for X's end" is "$H" PENDING
check "Z is checkpointed and stopped, freeing its node" sh -c "'$BIN/vhpc' checkpoint --stop '$Z' >/dev/null"
# The jobs' image name pushed again with other content before the
# restart: the restart runs the content Z ran (its snapshot needs it).
zid=$(rec "$Z" | grep -o '"image_id":"[0-9a-f]*"' | cut -d'"' -f4)
printf '%s\n' 'name: ckcsim2' 'description: busybox and dash' 'packages:' '  - busybox-static' '  - dash' >"$T/img2.yaml"
check "another image is pushed as default, the jobs' image" sh -c "'$BIN/vhpc' image build '$T/img2.yaml' >>'$T/img.log' 2>&1 &&
	'$BIN/vhpc' image push ckcsim2 --as default >>'$T/img.log' 2>&1"
check_match "Z's record names the image id it ran (${zid:0:12})" "^[0-9a-f]{64}$" "$zid"
check "... and default is another id now (the controller's log)" sh -c "grep 'image default is now' '$T/ctld.log' | tail -1 | grep -qv ' ${zid:0:12} '"
out=$(v restart "$Z.1"); rc=$?
Rz=$(printf '%s' "$out" | sed -n 's/^Submitted job \([0-9]*\):.*/\1/p')
check "Z.1 is restarted as a new job" test "$rc" = 0 -a -n "$Rz"
check_match "... with Z's image id, not the one pushed since" "\"image_id\":\"$zid\"" "$(rec "$Rz")"
sleep 2
check "the restart (1 h on the free node) waits: it would delay H's reserved start" is "$Rz" PENDING
check_match "... and says it waits in the queue" "waitingforresources\(restartsfromcheckpoint$Z\.1\)" "$(rec "$Rz")"
check_match "... never started" '"attempts":0' "$(rec "$Rz")"
check "H still waits for X" is "$H" PENDING
v cancel "$H" >/dev/null
# Started: running, or tried and refused by its node (a simulated node
# restores a part it saved; which one Rz lands on is the scheduler's).
started() { is "$1" RUNNING || rec "$1" | grep -q '"attempts":[1-9]'; }
check "with H gone, nothing is reserved: the restart is started" poll_until 20 started "$Rz"
v cancel "$Rz" >/dev/null; v cancel "$X" >/dev/null
ended() { is "$1" CANCELLED || is "$1" FAILED; }
check "the restart ends" poll_until 10 ended "$Rz"

# -- a restart under another guest_port is refused, saying how to get it back
sed 's/^job_network:$/job_network:\n  guest_port: 7708/' "$T/cluster.yaml" >"$T/cluster2.yaml"
kill -9 "$CTLD"; wait "$CTLD" 2>/dev/null
export VHPC_CLUSTER=$T/cluster2.yaml
check "vhpc-ctld restarts with job_network.guest_port 7708" ctld_up
export VHPC_CLUSTER=$T/cluster.yaml
out=$(v restart "$Z.1" 2>&1); rc=$?
check_eq "a restart of Z.1 (saved under port 7707) is refused" 125 "$rc"
check_match "... naming both ports and the way back" "its guests' agents listen on port 7707 \(inside the snapshot\), and the cluster's job_network.guest_port is now 7708: set it back to 7707" "$out"
kill -9 "$CTLD"; wait "$CTLD" 2>/dev/null
check "vhpc-ctld restarts with the first cluster file" ctld_up
check "... and the nodes are up again" poll_until 20 nodes_up

# -- a checkpoint name that is a path is refused by vhpc itself
out=$(VHPC_CONTROLLER=127.0.0.1:1 "$BIN/vhpc" restart ../etc 2>&1); rc=$?
check_eq "vhpc restart ../etc fails before asking any controller (none at port 1)" 2 "$rc"
check_match "... with the name's rule" "vhpc restart: '../etc' is not a checkpoint's name \(JOB.N" "$out"
out=$(VHPC_CONTROLLER=127.0.0.1:1 "$BIN/vhpc" submit --restart 1.1/x 2>&1); rc=$?
check_eq "vhpc submit --restart 1.1/x too" 2 "$rc"
out=$(VHPC_CONTROLLER=127.0.0.1:1 "$BIN/vhpc" checkpoint rm .1 2>&1); rc=$?
check_eq "and vhpc checkpoint rm .1" 2 "$rc"

# -- drain --checkpoint: every job's checkpoint at once; one that fails runs on
only wide-0
F=$(sub -N 1 --vcpus 2)
check "F takes half of wide-0 (4 cores)" poll_until 20 is "$F" RUNNING
only wide-0 bad-1
J1=$(sub -N 2 --vcpus 2)
check "J1 runs on wide-0 and bad-1 (whose saves fail)" poll_until 20 is "$J1" RUNNING
check_match "... one guest on each" '"nodes":\["(wide-0","bad-1|bad-1","wide-0)"\]' "$(rec "$J1")"
v cancel "$F" >/dev/null
only wide-0
J2=$(sub -N 1 --vcpus 2)
check "J2 runs on wide-0 once F is gone" poll_until 20 is "$J2" RUNNING
t0=$(date +%s%N)
out=$(v node drain wide-0 --checkpoint 2>&1); rc=$?
t1=$(date +%s%N)
diag "$out"
check_eq "vhpc node drain wide-0 --checkpoint reports a failure" 125 "$rc"
check_match "... J1's checkpoint failed on bad-1, and it runs on" "job $J1: job $J1: checkpoint failed: saving on node bad-1: .*the job runs on" "$out"
R2=$(printf '%s' "$out" | sed -n "s/^job $J2: checkpointed to $J2\\.1, requeued as job \([0-9]*\)$/\1/p")
check "... J2 was checkpointed and requeued all the same" test -n "$R2"
check "J1 runs on, on the drained node" is "$J1" RUNNING
check "J2 ended CHECKPOINTED" is "$J2" CHECKPOINTED
check_match "J1's guests were resumed on both nodes" "bad-1 job_resume.*wide-0 job_resume" "$(msgs "$J1" | tr '\n' ' ')"
ms=$(( (t1 - t0) / 1000000 ))
diag "the drain took $ms ms; wide-0 takes 3000 ms for each save, so one after the other would be 6000 ms or more"
check "... the two checkpoints ran at once: the drain took less than two saves" test "$ms" -lt 5500
check_eq "... both were saved on wide-0" 2 "$(grep -c "wide-0: job_checkpoint job \($J1\|$J2\) save" "$T/wide.log")"
check_match "the restart waits: no other node is up and undrained" "waiting:noup,undrainednodescantakecheckpoint$J2\.1" "$(rec "$R2")"
v cancel "$J1" >/dev/null; v cancel "$R2" >/dev/null

# -- a restart a node refuses: tried again for a passing reason; failed at
# once when the node finds its part of the checkpoint damaged
only s-1
G=$(sub -N 1 --vcpus 2)
check "G runs on s-1" poll_until 20 is "$G" RUNNING
check "G is checkpointed and stopped" sh -c "'$BIN/vhpc' checkpoint --stop '$G' >/dev/null"
tried() { rec "$1" | grep -q '"attempts":[2-9]'; }
prepares() { grep -c "simulated node $1: job_prepare job $2 restore" "$T/bad.log"; }
only bad-1
t0=$(date +%s%N)
Rt=$(v restart "$G.1" | sed -n 's/^Submitted job \([0-9]*\):.*/\1/p')
check "a restart of G.1 that bad-1 refuses for a passing reason (an image pull) is tried again" poll_until 20 tried "$Rt"
check "... and fails after its 3 attempts" poll_until 30 is "$Rt" FAILED
t1=$(date +%s%N)
check_match "... saying so" 'couldnotstart\(3attempts\);last:nodebad-1:image[0-9a-f]*:pullingitfailed.*"attempts":3,' "$(rec "$Rt")"
check_eq "... bad-1 was asked 3 times" 3 "$(prepares bad-1 "$Rt")"
check "G.1 is not said to be damaged" sh -c "! '$BIN/vhpc' checkpoints --json | grep -q damaged"
only bad-0
t2=$(date +%s%N)
Rd=$(v restart "$G.1" | sed -n 's/^Submitted job \([0-9]*\):.*/\1/p')
check "a restart of G.1 on bad-0, which finds its part damaged, fails" poll_until 20 is "$Rd" FAILED
t3=$(date +%s%N)
check_match "... after 1 attempt" '"attempts":1,' "$(rec "$Rd")"
check_match "... naming the checkpoint, the node and the node's reason" \
	"\"reason\":\"checkpoint$G\\.1isdamaged,nottriedagain:nodebad-0:checkpoint$G\\.1onnodebad-0:thisnode'spartfailsitscheck" \
	"$(rec "$Rd")"
check_eq "... bad-0 was asked once" 1 "$(prepares bad-0 "$Rd")"
sleep 1
check_eq "... and never again" 1 "$(prepares bad-0 "$Rd")"
tt=$(( (t1 - t0) / 1000000 )) td=$(( (t3 - t2) / 1000000 ))
diag "restart to FAILED: refused for a passing reason ${tt} ms (3 attempts, as every damaged restart was), damaged ${td} ms (1 attempt)"
check "... well before the 2 s pause of a second attempt" test "$td" -lt 2000
l=$(v checkpoints)
diag "$l"
check_match "vhpc checkpoints says G.1 is damaged" "^$G\\.1 +$G +root +0 B +[0-9T:-]+Z +damaged +s-1$" "$l"
check_match "... and why" "^checkpoint $G\\.1 is damaged \\(a restart from it failed\\): node bad-0: checkpoint $G\\.1 on node bad-0: this node's part fails its check" "$l"
check_match "... --json too" "\"damaged\": *\"node bad-0: checkpoint $G\\.1 on node bad-0: this node's part" "$(v checkpoints --json)"
check_match "the other checkpoints are not" "^$Z\\.1 .* done " "$l"

# -- space: per node, and by age
db=$T/ctld/ctld.db
sqlite3 "$db" "UPDATE checkpoints SET record = json_set(record, '\$.parts[0].bytes', 3145728), bytes = 3145728,
	created = created - 10 * 86400 WHERE name = '$E.1'" || fail "sqlite3 could not age E.1"
l=$(v checkpoints --by-node)
diag "$l"
check_match "vhpc checkpoints --by-node: s-0 holds E.1's 3 MiB (and Z.1's 0)" "s-0 +2 +3 MiB" "$l"
check_match "... and wide-0 holds J2.1" "wide-0 +1 +0 B" "$l"
l=$(v checkpoints --older-than 7)
check_match "vhpc checkpoints --older-than 7 lists E.1 (made 10 days ago)" "^$E\.1 " "$(printf '%s' "$l" | sed 1d)"
check_eq "... and nothing else" 1 "$(printf '%s\n' "$l" | sed 1d | grep -c .)"
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$BIN/vhpc" checkpoint rm --older-than 7 2>&1); rc=$?
check_eq "another user's rm --older-than 7 removes none of root's" "0 no checkpoint is 7 days old or older" "$rc $out"
out=$(v checkpoint rm --older-than 7 2>&1); rc=$?
check_eq "root's vhpc checkpoint rm --older-than 7 removes E.1 only" "0 checkpoint $E.1 removed" "$rc $out"
check "... Z.1 and J2.1 are still there" sh -c "'$BIN/vhpc' checkpoints | grep -q '^$Z\.1 ' && '$BIN/vhpc' checkpoints | grep -q '^$J2\.1 '"
out=$(v checkpoint rm --older-than 1x 2>&1); rc=$?
check_eq "--older-than 1x is refused" 2 "$rc"

kill -9 "$CTLD"; wait "$CTLD" 2>/dev/null
done_testing
