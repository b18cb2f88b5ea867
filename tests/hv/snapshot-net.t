#!/usr/bin/env bash
# timeout: 240
# needs: kvm
# needs: vhost-net
# A snapshot of a guest whose NIC runs on vhost-net (hv/README.md,
# "Snapshots"), in a network namespace this test creates: the test guest
# of vhost-net.t sets up its rings on the kernel's data path and waits for
# the test's frame; it is paused there, saved (the save stops vhost for
# the rings' bases and attaches the tap again), killed, and restored under
# --seccomp onto a new tap of the same name: the restored guest gets the
# frame and its reply comes out of the new tap, vhost-net serving both
# (started once, on the snapshot's indexes, the userspace path moving
# nothing).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
need_root
HVT=$VHPC_TOP/$B/hv-tools/hvt
modprobe vhost_net 2>/dev/null
[ -c /dev/vhost-net ] || skip_all "no /dev/vhost-net here (modprobe vhost_net failed)"
hv_netns "vhpc-hvt-snapnet-$$"

mac=52:54:00:12:35:61 nonce=s$$ tap=vhsn0
mktap() {
	inns ip tuntap del dev "$tap" mode tap 2>/dev/null
	inns ip tuntap add dev "$tap" mode tap vnet_hdr
	inns ip link set "$tap" up
	inns ip addr add 10.99.0.1/24 dev "$tap"
}
status_field() { # CTL KEY: the first net device's KEY from vhpc-hv's status
	"$HVCTL" "$1" status 2>/dev/null | sed -n "s/.*\"net\": *\[ *{[^]]*\"$2\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"
}
ARGS=(--kernel "$GUESTS/vnet.elf" --debug-exit --vcpus 1 --mem 32M
	--net "tap=$tap,mac=$mac,mtu=1400,vhost=on" --cmdline "mac=$mac mtu=1400 nonce=$nonce")

mktap
inns "$HV" "${ARGS[@]}" --control "$T/a.ctl" >"$T/a.out" 2>"$T/a.err" </dev/null &
pid=$!
at_exit kill -9 $pid
for _ in $(seq 200); do [ -S "$T/a.ctl" ] && break; sleep 0.05; done
# The driver's set-up (DRIVER_OK starts vhost) before the pause.
for _ in $(seq 40); do [ "$(status_field "$T/a.ctl" vhost_starts)" = 1 ] && break; sleep 0.05; done
check_eq "the original guest's driver started vhost-net before the pause" "vhost-net 1" \
	"$(status_field "$T/a.ctl" datapath) $(status_field "$T/a.ctl" vhost_starts)"
check "pause" "$HVCTL" "$T/a.ctl" pause
"$HVCTL" "$T/a.ctl" snapshot "$T/n.snap" >"$T/snap.reply" 2>&1
check_eq "snapshot of a guest on vhost-net" 0 "$?"
diag "$(cat "$T/snap.reply")"
check_match "the save put the tap back: the paused guest still on vhost-net" vhost-net \
	"$(status_field "$T/a.ctl" datapath)"
"$HVCTL" "$T/a.ctl" kill >/dev/null
wait $pid

mktap                                  # a new tap: the restore's job network
inns "$HVT" taprecv "$tap" 0x88b5 15000 1 >"$T/frames" &
rpid=$!
inns "$HVT" udprecv 10.99.0.1 7777 15000 1 >"$T/udp" &
upid=$!
inns timeout -k 5 90 "$HV" "${ARGS[@]}" --restore "$T/n.snap" --paused --control "$T/b.ctl" \
	>"$T/b.out" 2>"$T/b.err" </dev/null &
pid2=$!
at_exit kill -9 $pid2
for _ in $(seq 200); do grep -q listening "$T/udp" && [ -S "$T/b.ctl" ] && break; sleep 0.05; done
check "resume the restored guest" "$HVCTL" "$T/b.ctl" resume
sleep 0.3
check "frame sent into the new tap" inns "$HVT" tapsend "$tap" "$mac" 0x88b5 "vhpc-go-$nonce" 1400
wait $pid2
RC=$?
wait $rpid
wait $upid
inns ip tuntap del dev "$tap" mode tap
OUT=$T/b.out ERR=$T/b.err
guest_ok "the restored guest finished"
guest_results restored
check_match "its reply came out of the new tap from its MAC" "^$mac [0-9a-f:]+ 60 vhpc-reply-$nonce\$" \
	"$(cat "$T/frames")"
check_match "vhost-net served the restored rings, userspace moved no frame" \
	"vnet0: userspace data path: 0 frames received \(0 dropped\), 0 sent \(0 dropped\); vhost-net starts 1, refused 0" \
	"$(cat "$T/b.err")"
done_testing
