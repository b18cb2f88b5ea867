#!/usr/bin/env bash
# timeout: 90
# Attack: a reply caught on the way, and never delivered, is handed to the
# same user's next request (hole 4, munge; lib/wire_call.c).  munge's
# replay cache does not stop it (that credential was never decoded), and
# nothing bound a reply to its request: the client took a stale answer as
# the current one.  Now every request carries a random id that its reply
# must name, and wire_call refuses any other.
. "$(dirname "$0")/../lib.sh"
CL=vrr$$
. "$(dirname "$0")/wire-lib.sh"
T=$CL_DIR
wl_up 1
RELAYED=198.18.0.1:7003

# 1: the relay passes the request on, keeps the reply, drops the client.
mkdir "$T/r"
wl_bg "$CL_HUB" "$T/relay.log" "$RELAY" "$RELAYED" "$CL_CTL" "$T/r" keep replay
wait_log "$T/relay.log" listening 5
out=$(VHPC_CONTROLLER=$RELAYED vc nodes --json 2>&1)
check_match "the first request gets no reply" 'closed the connection without a reply' "$out"
check_match "... the relay kept it" '^1 keep' "$(cat "$T/relay.log")"
# The cluster changes: a node registers.
cl_node_up 1 || fail "node 1 starts"
check "node 1 registers" cl_wait_nodes_up 1
check_match "the controller lists it" '"name":"n1"' "$(vc nodes --json | tr -d ' \n')"
# 2: the kept reply answers the next request.
out=$(VHPC_CONTROLLER=$RELAYED vc nodes --json 2>&1)
rc=$?
diag "the second request, answered with the first one's reply: exit $rc:" "$out"
check_match "the client refuses a reply to another request" 'rejected reply: it answers another request' "$out"
check "... exits non-zero" test "$rc" -ne 0
check "... and shows nothing of it" test -z "$(echo "$out" | grep -E '^\[')"
check_match "the relay did answer with the kept reply" '^2 replay' "$(cat "$T/relay.log")"
done_testing
