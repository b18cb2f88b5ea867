#!/usr/bin/env bash
# timeout: 90
# needs: kvm
# virtio-net over a tap, inside a network namespace this test creates: the
# test sends a frame into the tap (AF_PACKET) that the guest receives in
# two mergeable buffers; the guest's frames come out of the tap: a raw
# reply, and two UDP datagrams to a socket here, of which only the one
# whose checksum the host completes (NEEDS_CSUM offload) may arrive.  Then
# two queue pairs (multiqueue tap) and a frame out of the second pair.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
need_root
HVT=$VHPC_TOP/$B/hv-tools/hvt
hv_netns "vhpc-hvt-net-$$"

# net_round NAME QUEUES: one guest run; results into $T/NAME.*
net_round() {
	local name=$1 queues=$2 mac=52:54:00:12:34:5$2 nonce=n$$x$2 tap=vhpt$2
	local extra=; [ "$queues" -gt 1 ] && extra="mq=2"
	inns timeout -k 5 60 "$HV" --kernel "$GUESTS/vnet.elf" --debug-exit --vcpus 1 --mem 32M \
		--net "tap=$tap,mac=$mac,mtu=1400,queues=$queues" \
		--cmdline "mac=$mac mtu=1400 nonce=$nonce $extra" >"$T/$name.out" 2>"$T/$name.err" </dev/null &
	local pid=$!
	at_exit kill -9 $pid
	for i in $(seq 100); do inns ip link show "$tap" >/dev/null 2>&1 && break; sleep 0.05; done
	inns ip link set "$tap" up
	inns ip addr add 10.99.0.1/24 dev "$tap"
	inns "$HVT" taprecv "$tap" 0x88b5 20000 $((queues > 1 ? 2 : 1)) >"$T/$name.frames" &
	local rpid=$!
	inns "$HVT" udprecv 10.99.0.1 7777 20000 1 >"$T/$name.udp" &
	local upid=$!
	for i in $(seq 100); do grep -q listening "$T/$name.udp" && break; sleep 0.05; done
	sleep 0.2      # taprecv's socket is bound
	check "$name: frame sent into the tap" inns "$HVT" tapsend "$tap" "$mac" 0x88b5 "vhpc-go-$nonce" 1400
	wait $pid
	RC=$?
	wait $rpid
	wait $upid
	OUT=$T/$name.out ERR=$T/$name.err
	guest_ok "$name: vnet guest"
	guest_results "$name"
	check_match "$name: the guest's reply came out of the tap from its MAC" \
		"^$mac [0-9a-f:]+ 60 vhpc-reply-$nonce\$" "$(cat "$T/$name.frames")"
	check_eq "$name: only the datagram with the offloaded checksum arrived" "listening
csum-offload-$nonce" "$(cat "$T/$name.udp")"
	check "$name: tap $tap gone with vhpc-hv" bash -c "! ip netns exec $NS ip link show $tap >/dev/null 2>&1"
}

net_round single 1
net_round multi 2
check_match "multi: a frame from the second queue pair" "^52:54:00:12:34:52 .* vhpc-q1-n$$x2\$" "$(cat "$T/multi.frames")"
check_match "multi: the tap was opened with two queues" "2 queue pair" "$(cat "$T/multi.err")"

run_guest vnet --vcpus 1 --mem 32M --net "tap=x,mac=01:00:00:00:00:01"
check_match "multicast MAC refused" "mac=01:00:00:00:00:01 is a multicast address" "$(cat "$ERR")"
run_guest vnet --vcpus 1 --mem 32M --net "tap=x,queues=9"
check_match "too many queues refused" "queues=9 is not a number from 1 to 8" "$(cat "$ERR")"
run_guest vnet --vcpus 1 --mem 32M --net "mtu=1500"
check_match "no tap refused" "give tap=NAME or fd=N" "$(cat "$ERR")"
done_testing
