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
UDS=$T/v.sock
nonce=v$$

"$HVT" uds-serve "${UDS}_1234" 30000 >"$T/serve.out" &
spid=$!
at_exit kill -9 $spid
for i in $(seq 100); do grep -q listening "$T/serve.out" && break; sleep 0.05; done
"$BIN/vhpc-hv" --kernel "$GUESTS/vvsock.elf" --debug-exit --vcpus 1 --mem 32M --vsock "cid=7,uds=$UDS" \
	--cmdline "cid=7 nonce=$nonce" >"$T/g.out" 2>"$T/g.err" </dev/null &
gpid=$!
at_exit kill -9 $gpid
"$HVT" uds-connect "$UDS" 5999 20000 >"$T/refused.out" &
r1=$!
"$HVT" uds-connect "$UDS" 5000 20000 >"$T/connect.out" &
r2=$!
timeout 60 tail --pid=$gpid -f /dev/null
wait $gpid
RC=$?
wait $spid $r1 $r2
OUT=$T/g.out ERR=$T/g.err
guest_ok "vvsock guest"
guest_results "vsock"
check_eq "guest-initiated: line and 64 KiB arrived, then EOF" "listening
line: hello host $nonce
bulk: ok
eof" "$(cat "$T/serve.out")"
check_eq "host-initiated: OK, then the guest's answer" "OK
pong $nonce" "$(cat "$T/connect.out")"
check_eq "host-initiated to a port without listener: refused" "refused" "$(cat "$T/refused.out")"
check "the host socket is removed at exit" [ ! -e "$UDS" ]

if [ -z "${HV_NO_SECCOMP-}" ]; then
	UDS=$T/s.sock
	"$HVT" uds-serve "${UDS}_1234" 30000 >"$T/serve2.out" &
	spid=$!
	at_exit kill -9 $spid
	for i in $(seq 100); do grep -q listening "$T/serve2.out" && break; sleep 0.05; done
	"$HV" --kernel "$GUESTS/vvsock.elf" --debug-exit --vcpus 1 --mem 32M --vsock "cid=7,uds=$UDS" \
		--cmdline "cid=7 nonce=$nonce seccomp=1" >"$T/s.out" 2>"$T/s.err" </dev/null &
	gpid=$!
	at_exit kill -9 $gpid
	"$HVT" uds-connect "$UDS" 5000 20000 >"$T/connect2.out" &
	r2=$!
	timeout 60 tail --pid=$gpid -f /dev/null
	wait $gpid
	RC=$?
	wait $r2
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	OUT=$T/s.out ERR=$T/s.err
	guest_ok "under --seccomp: vvsock guest"
	guest_results "vsock under --seccomp"
	check_match "... the guest's connection was reset, and the log says why" \
		"vsock: the guest's connection to host port 1234 reset: under --seccomp" "$(cat "$T/s.err")"
	check_eq "... and nothing reached the host socket it asked for" "listening" "$(cat "$T/serve2.out")"
	check_eq "... while the host's connection works as before" "OK
pong $nonce" "$(cat "$T/connect2.out")"
fi

run_guest vvsock --vcpus 1 --mem 32M --vsock "cid=2,uds=$UDS"
check_match "CID 2 (the host's) refused" "cid=2 is not a number from 3 to" "$(cat "$ERR")"
run_guest vvsock --vcpus 1 --mem 32M --vsock "cid=9"
check_match "uds= required" "uds= \(the host unix socket\) is required" "$(cat "$ERR")"
touch "$T/plain"
run_guest vvsock --vcpus 1 --mem 32M --vsock "cid=9,uds=$T/plain"
check_match "uds= on a regular file refused" "exists and is not a socket" "$(cat "$ERR")"
done_testing
