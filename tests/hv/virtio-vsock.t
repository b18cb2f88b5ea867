#!/usr/bin/env bash
# timeout: 90
# needs: hardware-virtualization
# virtio-vsock bridged to unix sockets (Firecracker's hybrid vsock): the
# guest connects to host port 1234 (this test listens on UDS_1234) and
# exchanges a line and 64 KiB each way; a port nobody listens on resets;
# this test connects through UDS with "CONNECT 5000" and gets "OK", sends
# 64 KiB that the guest takes within the credit it gives, and gets the
# answer; "CONNECT 5999" (no listener in the guest) is refused.  That run
# is vhpc-hv without --seccomp: under the allowlist vhpc-hv makes no
# connections once the guest runs, so a second run under it checks that
# the guest's connection is reset (and reaches nobody) while the host's
# still work.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
HVT=$VHPC_TOP/$B/hv-tools/hvt
nonce=v$$

# vsock_run TAG HV [CMDLINE...]: the vvsock guest under HV, bridged to
# $T/TAG.sock, a listener on its _1234 and the test's connections to
# ports 5999 and 5000; once it ends RC, OUT and ERR are set, and what the
# host's ends got is in $T/TAG.serve, TAG.refused and TAG.connect.
vsock_run() {
	local tag=$1 hv=$2 uds=$T/$1.sock spid gpid r1 r2 i
	shift 2
	"$HVT" uds-serve "${uds}_1234" 30000 >"$T/$tag.serve" &
	spid=$!
	at_exit kill -9 $spid
	for i in $(seq 100); do grep -q listening "$T/$tag.serve" && break; sleep 0.05; done
	"$hv" --kernel "$GUESTS/vvsock.elf" --debug-exit --vcpus 1 --mem 32M --vsock "cid=7,uds=$uds" \
		--cmdline "cid=7 nonce=$nonce${*:+ $*}" >"$T/$tag.out" 2>"$T/$tag.err" </dev/null &
	gpid=$!
	at_exit kill -9 $gpid
	"$HVT" uds-connect "$uds" 5999 20000 >"$T/$tag.refused" &
	r1=$!
	"$HVT" uds-connect "$uds" 5000 20000 >"$T/$tag.connect" &
	r2=$!
	timeout 60 tail --pid=$gpid -f /dev/null
	wait $gpid
	RC=$?
	wait $r1 $r2
	# The listener is done once its client closed; one nobody reached
	# would wait out its 30 s.
	timeout 5 tail --pid=$spid -f /dev/null
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	OUT=$T/$tag.out ERR=$T/$tag.err
}

vsock_run plain "$BIN/vhpc-hv"
guest_ok "vvsock guest"
guest_results "vsock"
check_eq "guest-initiated: line and 64 KiB arrived, then EOF" "listening
line: hello host $nonce
bulk: ok
eof" "$(cat "$T/plain.serve")"
check_eq "host-initiated: OK, then the guest's answer" "OK
pong $nonce" "$(cat "$T/plain.connect")"
check_eq "host-initiated to a port without listener: refused" "refused" "$(cat "$T/plain.refused")"
check "the host socket is removed at exit" [ ! -e "$T/plain.sock" ]

if [ -z "${HV_NO_SECCOMP-}" ]; then
	vsock_run seccomp "$HV" seccomp=1
	guest_ok "under --seccomp: vvsock guest"
	guest_results "vsock under --seccomp"
	check_match "... the guest's connection was reset, and the log says why" \
		"vsock: the guest's connection to host port 1234 reset: under --seccomp" "$(cat "$ERR")"
	check_eq "... and nothing reached the host socket it asked for" "listening" "$(cat "$T/seccomp.serve")"
	check_eq "... while the host's connections work as before" "refused|OK|pong $nonce" \
		"$(cat "$T/seccomp.refused" "$T/seccomp.connect" | tr '\n' '|' | sed 's/|$//')"
fi

UDS=$T/v.sock
run_guest vvsock --vcpus 1 --mem 32M --vsock "cid=2,uds=$UDS"
check_match "CID 2 (the host's) refused" "cid=2 is not a number from 3 to" "$(cat "$ERR")"
run_guest vvsock --vcpus 1 --mem 32M --vsock "cid=9"
check_match "uds= required" "uds= \(the host unix socket\) is required" "$(cat "$ERR")"
touch "$T/plain"
run_guest vvsock --vcpus 1 --mem 32M --vsock "cid=9,uds=$T/plain"
check_match "uds= on a regular file refused" "exists and is not a socket" "$(cat "$ERR")"
done_testing
