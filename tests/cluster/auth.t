#!/usr/bin/env bash
# timeout: 90
# Who may say what to the cluster's daemons.  Forged (another munge key),
# tampered, replayed and expired credentials, frames that are not the
# protocol, malformed and unknown messages: each gets an error reply and a
# log line, and neither vhpc-ctld nor vhpcd stops.  Node messages are
# taken from root only, to either daemon.  Another user neither sees nor
# cancels, waits for or reads root's job, but handles its own.
. "$(dirname "$0")/../lib.sh"
need_cluster
WP=$VHPC_TOP/$B/testbin/wireprobe
[ -x "$WP" ] || { echo "Bail out! $WP is not built (make tests)"; exit 1; }
command -v munged >/dev/null || skip_all "munged is not installed"
command -v setpriv >/dev/null || skip_all "setpriv is not installed"
CL=vca$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
for i in 1 2; do cl_node_up $i || fail "node $i starts"; done
check "two nodes register" cl_wait_nodes_up 2
CTL=$CL_CTL NODE=198.18.0.11:6818
wp() { cl_in "$CL_HUB" "$WP" "$@" 2>&1; }
wp_nobody() { cl_in "$CL_HUB" setpriv --reuid 65534 --regid 65534 --clear-groups "$WP" "$@" 2>&1; }

# A munged with a key of its own: its credentials are forgeries here.
head -c 1024 /dev/urandom >"$T/forge.key"; chmod 600 "$T/forge.key"
munged -f -S "$T/forge.sock" --key-file="$T/forge.key" --pid-file="$T/forge.pid" \
	--log-file="$T/forge.log" --seed-file="$T/forge.seed"
at_exit "munged -S '$T/forge.sock' -s"

out=$(WIREPROBE_FORGE_SOCKET=$T/forge.sock wp forged "$CTL" '{"v":3,"type":"queue"}')
check_match "ctld: a credential of another munge key is rejected" 'no reply: refused: rejected message: munge credential' "$out"
out=$(WIREPROBE_FORGE_SOCKET=$T/forge.sock wp forged "$NODE" '{"v":3,"type":"job_stop","node":"n1","job":1}')
check_match "vhpcd: the same" 'no reply: refused: rejected message: munge credential' "$out"
out=$(wp replay "$CTL" '{"v":3,"type":"queue"}')
check_match "ctld: a credential is good once" '^reply\(uid 0\): \{"type":"jobs"' "$(echo "$out" | head -1)"
check_match "ctld: ... and replayed it is rejected" 'Replayed credential' "$(echo "$out" | sed -n 2p)"
out=$(wp replay "$NODE" '{"v":3,"type":"job_stop","node":"n1","job":99}')
check_match "vhpcd: a job_stop from root works once" '"type":"stopped"' "$(echo "$out" | head -1)"
check_match "vhpcd: ... and replayed it is rejected" 'Replayed credential' "$(echo "$out" | sed -n 2p)"
check_match "a tampered credential is rejected" 'rejected message: munge credential' "$(wp tamper "$CTL" '{"v":3,"type":"queue"}')"
check_match "an expired credential is rejected" 'rejected message: munge credential Expired' "$(wp expired "$CTL" '{"v":3,"type":"queue"}')"
check_match "a frame without a credential is rejected" 'rejected message: munge credential' "$(wp raw "$CTL" '{"v":3,"type":"queue"}')"
check_match "a frame header of 2 GiB is rejected" 'rejected message: frame of 2147483648 bytes' "$(wp huge "$CTL")"
check_match "HTTP instead of a frame is rejected" 'rejected message: frame of' "$(wp garbage "$NODE")"
check_match "a valid credential around something not JSON" 'not a JSON object' "$(wp payload "$CTL" 'hello')"
check_match "... another protocol version" 'unsupported version' "$(wp payload "$CTL" '{"v":1,"type":"queue"}')"
check_match "an unknown message type" "unknown message type 'launch_missiles'" "$(wp send "$CTL" '{"type":"launch_missiles"}')"
check_match "a malformed field is named" '\\"guests\\": expected an integer' \
	"$(wp send "$CTL" '{"type":"submit","job":{"guests":"two","command":["x"]}}')"
check_match "an unknown field is named" 'unknown field \\"sudo\\"' "$(wp send "$CTL" '{"type":"cancel","id":1,"sudo":true}')"
check_match "vhpcd: a malformed job_prepare is named" '\\"local\\"' \
	"$(wp send "$NODE" '{"type":"job_prepare","node":"n1","job":5,"local":"../etc"}')"
check_match "vhpcd: a message for another node is refused" 'this is node n1, not n2' \
	"$(wp send "$NODE" '{"type":"job_stop","node":"n2","job":5}')"

# Node-level messages: root only.
reg='{"type":"register","node":"evil","addr":"198.18.0.99:1","underlay":"198.18.0.99","numa":[{"os_index":0,"cores":64}],"jobs":[]}'
check_match "ctld: a register from another user is refused" "only root may send it" "$(wp_nobody send "$CTL" "$reg")"
check_match "ctld: a heartbeat from another user is refused" "only root may send it" \
	"$(wp_nobody send "$CTL" '{"type":"heartbeat","node":"n1","jobs":[]}')"
check_match "ctld: job output from another user is refused" "only root may send it" \
	"$(wp_nobody send "$CTL" '{"type":"job_output","node":"n1","job":1,"offset":0,"data":""}')"
check_match "vhpcd: a job_stop from another user is refused" "vhpcd takes messages from root only" \
	"$(wp_nobody send "$NODE" '{"type":"job_stop","node":"n1","job":1}')"
check_eq "no node 'evil' was registered" 0 "$(vc nodes --json | grep -c evil)"
check_match "a heartbeat from a node that never registered" 'node ghost is not registered' \
	"$(wp send "$CTL" '{"type":"heartbeat","node":"ghost","jobs":[]}')"
check "vhpc-ctld is still running" kill -0 "$CTLD_PID"
check "vhpcd is still running" kill -0 "$NODE_PID_1"
check_match "ctld logged the rejections" 'Replayed credential' "$(cat "$CL_DIR/ctld.log")"
check_match "... with who sent them" 'uid 65534\): rejected .register.: not root' "$(cat "$CL_DIR/ctld.log")"
check_match "vhpcd logged them" 'rejected .job_stop. from uid 65534' "$(cat "$CL_DIR/n1.log")"

# -- users: root's job is root's
J=$(vc submit --json -N 1 --vcpus 1 -- sleep 60 | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
check "root's job $J runs" wait_state "$J" RUNNING 30
nb() { as_nobody "$BIN/vhpc" "$@" 2>&1; }
check_eq "another user's queue does not show it" "[]" "$(nb queue --json | tr -d ' \n')"
out=$(nb cancel "$J"); rc=$?
check_match "another user cannot cancel it" "job $J: permission denied" "$out"
check_eq "... (exit 125)" 125 "$rc"
check_match "nor wait for it" 'permission denied' "$(nb wait "$J")"
check_match "nor read its output" 'permission denied' "$(nb output "$J")"
check_eq "it still runs" RUNNING "$(job_state "$J")"
N=$(nb submit --json -N 1 --vcpus 1 -- sleep 60 | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
check_match "another user submits a job of its own" '^[0-9]+$' "$N"
check_match "... sees it" "\"id\":$N,\"uid\":65534" "$(nb queue --json | tr -d ' \n')"
check "... it runs" wait_state "$N" RUNNING 30
# On the node, each job's command is its submitter's uid on the host (the
# munge credential's), not root: the guests' user namespaces map to it.
sleep_uids() {
	for p in $(pgrep -x sleep); do
		grep -q ':/vhpc/' "/proc/$p/cgroup" 2>/dev/null && awk '/^Uid:/ {print $2}' "/proc/$p/status"
	done | sort -un | tr '\n' ' '
}
for _ in $(seq 50); do [ "$(sleep_uids)" = "0 65534 " ] && break; sleep 0.1; done
check_eq "on the nodes, its command runs as uid 65534 and root's as root" "0 65534 " "$(sleep_uids)"
check_match "... cancels it" "job $N cancelled" "$(nb cancel "$N")"
check_match "root sees both jobs" "\"id\":$J,.*\"id\":$N," "$(vc queue --json | tr -d ' \n')"
check_match "root cancels its own" "job $J cancelled" "$(vc cancel "$J")"
check "both end CANCELLED" wait_state "$J" CANCELLED 20

for i in 1 2; do
	for _ in $(seq 50); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "nothing is left of any job" "$before" "$(cl_leftovers)"
done_testing
