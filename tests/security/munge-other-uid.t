#!/usr/bin/env bash
# timeout: 90
# Attack: another user reads what a user and the controller say to each
# other (hole 4, munge; lib/wire.c, lib/wire_cred.c).  munge credentials
# were not restricted to their recipient, so anyone with munge could
# decode one caught on the way, and the wire put the whole message inside
# it (job keys, users' output).  Now each credential is restricted to its
# recipient's uid (MUNGE_OPT_UID_RESTRICTION): munged refuses to decode it
# for anyone else, and the message is sealed with a key only it carries.
# A daemon refuses a credential restricted to another uid, or to no one.
. "$(dirname "$0")/../lib.sh"
CL=vmu$$
. "$(dirname "$0")/wire-lib.sh"
T=$CL_DIR
command -v unmunge >/dev/null || skip_all "unmunge is not installed"
wl_up 0
EVIL=12345

# The victim (uid 65534) asks for its queue through a relay that keeps a
# copy of both directions: what a user on the path would see.
mkdir "$T/cap"
chmod 755 "$T/cap"
wl_bg "$CL_HUB" "$T/relay.log" "$RELAY" 198.18.0.1:7002 "$CL_CTL" "$T/cap" pass
wait_log "$T/relay.log" listening 5
out=$(VHPC_CONTROLLER=198.18.0.1:7002 as_nobody "$BIN/vhpc" queue --json 2>&1)
check_match "the victim's request is answered through the relay" '^\[' "$out"
# cred FILE: the credential a frame starts with (after its length word)
cred() {
	local n
	n=$(od -An -tu4 --endian=big -N4 "$1" | tr -d ' ')
	tail -c +5 "$1" | head -c "$n"
}
cred "$T/cap/1.req" >"$T/req.cred"
cred "$T/cap/1.rep" >"$T/rep.cred"
chmod 644 "$T"/*.cred
check_match "the captured frames hold munge credentials" '^MUNGE:' "$(head -c 6 "$T/rep.cred")"
unm() {  # UID FILE: unmunge as UID
	setpriv --reuid "$1" --regid "$1" --clear-groups unmunge --socket "$VHPC_MUNGE_SOCKET" --input "$2" 2>&1
}
out=$(unm $EVIL "$T/rep.cred")
diag "uid $EVIL decodes the controller's reply to uid 65534:" "$(echo "$out" | head -c 600)"
check_match "another uid cannot decode the reply" 'Unauthorized credential' "$out"
check "... and sees nothing of it" test -z "$(echo "$out" | grep -E '"type"|jobs')"
out=$(unm $EVIL "$T/req.cred")
diag "uid $EVIL decodes uid 65534's request:" "$(echo "$out" | head -c 600)"
check_match "another uid cannot decode the request" 'Unauthorized credential' "$out"
check "... and sees nothing of it" test -z "$(echo "$out" | grep -E '"type"|queue')"
check_match "the reply was for uid 65534" 'UID_RESTRICTION: *nobody \(65534\)|Replayed' "$(unm 65534 "$T/rep.cred")"

# The daemon's side: credentials restricted to another uid, or to no one.
check_match "vhpc-ctld refuses a credential restricted to uid $EVIL" 'refused: rejected message: munge credential Unauthorized' \
	"$(cl_in "$CL_HUB" "$WP" foruid "$CL_CTL" $EVIL '{"v":3,"type":"queue"}')"
check_match "... and one restricted to no one" 'refused: rejected message: its credential .* is not restricted to its recipient' \
	"$(cl_in "$CL_HUB" "$WP" anyuid "$CL_CTL" '{"v":3,"type":"queue"}')"
check_match "... but takes one restricted to it" '^reply\(uid 0\): \{"type":"jobs"' \
	"$(cl_in "$CL_HUB" "$WP" send "$CL_CTL" '{"type":"queue"}')"
check "vhpc-ctld is still running" kill -0 "$CTLD_PID"
done_testing
