#!/usr/bin/env bash
# timeout: 180
# needs: kvm
# needs: vhost-net
# virtio-net on the kernel's data path (vhost-net), in a network namespace
# this test creates, with the test guest of virtio-net.t (frames both
# ways, mergeable buffers, the checksum offload, two queue pairs) and a
# reset in the middle of traffic followed by hostile rings and a fresh
# start.  Proof that the kernel moved the frames: vhpc-hv's kernel worker
# thread (vhost-PID) while the guest runs, its own userspace frame
# counters at 0 while the tap's statistics rose.  Then the same guest with
# /dev/vhost-net hidden (a private mount namespace) and with a
# /dev/vhost-net that is not one: the userspace data path serves it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
need_root
HVT=$VHPC_TOP/$B/hv-tools/hvt
modprobe vhost_net 2>/dev/null
[ -c /dev/vhost-net ] || skip_all "no /dev/vhost-net here (modprobe vhost_net failed)"
hv_netns "vhpc-hvt-vhost-$$"

# Runs CMD in a mount namespace whose /dev lacks vhost-net (a tmpfs with
# the nodes vhpc-hv needs bound back in).
no_vhost_dev() {
	unshare -m --propagation private sh -c '
d=$(mktemp -d) && mount --rbind /dev "$d" && mount -t tmpfs -o mode=755 vhpc-novhost /dev && mkdir /dev/net &&
for f in null zero urandom random kvm net/tun; do touch /dev/$f && mount --bind "$d/$f" /dev/$f || exit 125; done &&
umount -l "$d" && rmdir "$d" && exec "$@"' sh "$@"
}
# Runs CMD with /dev/null where /dev/vhost-net is: opens, but is no vhost.
fake_vhost_dev() {
	unshare -m --propagation private sh -c 'mount --bind /dev/null /dev/vhost-net && exec "$@"' sh "$@"
}

stat_of() { inns cat "/sys/class/net/$1/statistics/$2" 2>/dev/null || echo 0; }
status_field() { # CTL KEY: the first net device's KEY from vhpc-hv's status
	"$HVCTL" "$1" status 2>/dev/null | sed -n "s/.*\"net\": *\[ *{[^]]*\"$2\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"
}

# vround NAME QUEUES WRAP [GUEST ARGS]: one guest run with vhost=on under
# WRAP (a command prefix, or "none"); results in $T/NAME.*, $PID_SEEN
# says whether vhost-<pid> ran, $DP the data path status reported.
vround() {
	local name=$1 queues=$2 wrap=$3 extra=${4-} mac=52:54:00:12:35:5$2 nonce=v$$x$1 tap=vhvt$2 nframes
	local mq=; [ "$queues" -gt 1 ] && mq=multi_queue extra="mq=2 $extra"
	inns ip tuntap del dev "$tap" mode tap $mq 2>/dev/null
	inns ip tuntap add dev "$tap" mode tap vnet_hdr $mq
	inns ip link set "$tap" up
	inns ip addr add 10.99.0.1/24 dev "$tap"
	local pre=(); [ "$wrap" != none ] && pre=("$wrap")
	nframes=$((queues > 1 ? 2 : 1)); case $extra in *reset=1*) nframes=3 ;; esac
	inns "$HVT" taprecv "$tap" 0x88b5 15000 $nframes >"$T/$name.frames" &
	local rpid=$!
	inns "$HVT" udprecv 10.99.0.1 7777 15000 1 >"$T/$name.udp" &
	local upid=$!
	local ctl=$T/$name.ctl
	"${pre[@]}" ip netns exec "$NS" timeout -k 5 90 "$HV" --kernel "$GUESTS/vnet.elf" --debug-exit --vcpus 1 --mem 32M \
		--control "$ctl" --net "tap=$tap,mac=$mac,mtu=1400,queues=$queues,vhost=on" \
		--cmdline "mac=$mac mtu=1400 nonce=$nonce $extra" >"$T/$name.out" 2>"$T/$name.err" </dev/null &
	local pid=$!
	at_exit kill -9 $pid
	for i in $(seq 200); do grep -q listening "$T/$name.udp" && [ -S "$ctl" ] && break; sleep 0.05; done
	local hvpid
	hvpid=$("$HVCTL" "$ctl" status 2>/dev/null | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
	PID_SEEN=no
	[ -n "$hvpid" ] && pgrep -x "vhost-$hvpid" >/dev/null && PID_SEEN=yes
	DP=$(status_field "$ctl" datapath)
	local rx0 tx0
	rx0=$(stat_of "$tap" rx_packets) tx0=$(stat_of "$tap" tx_packets)
	sleep 0.3
	check "$name: frame sent into the tap" inns "$HVT" tapsend "$tap" "$mac" 0x88b5 "vhpc-go-$nonce" 1400
	wait $pid
	RC=$?
	wait $rpid
	wait $upid
	TAP_RX=$(( $(stat_of "$tap" rx_packets) - rx0 )) TAP_TX=$(( $(stat_of "$tap" tx_packets) - tx0 ))
	inns ip tuntap del dev "$tap" mode tap $mq
	OUT=$T/$name.out ERR=$T/$name.err
	guest_ok "$name: vnet guest"
	guest_results "$name"
	check_match "$name: the guest's reply came out of the tap from its MAC" \
		"^$mac [0-9a-f:]+ 60 vhpc-reply-$nonce\$" "$(cat "$T/$name.frames")"
	check_eq "$name: only the datagram with the offloaded checksum arrived" "listening
csum-offload-$nonce" "$(cat "$T/$name.udp")"
	check_match "$name: the tap counted the guest's frames ($TAP_RX) and the test's ($TAP_TX)" \
		"^[1-9][0-9]* [1-9][0-9]*\$" "$TAP_RX $TAP_TX"
}

# -- vhost-net ---------------------------------------------------------------
vround single 1 none
check_eq "single: vhpc-hv's vhost worker thread (vhost-PID) ran" yes "$PID_SEEN"
check_eq "single: status says vhost-net" vhost-net "$DP"
check_match "single: the log names the data path" "vnet0: data path vhost-net" "$(cat "$ERR")"
check_match "single: vhpc-hv's userspace path moved no frame" \
	"vnet0: userspace data path: 0 frames received \(0 dropped\), 0 sent \(0 dropped\); vhost-net starts 1, refused 0" \
	"$(cat "$ERR")"

vround multi 2 none
check_match "multi: a frame from the second queue pair" "^52:54:00:12:35:52 .* vhpc-q1-v$$xmulti\$" "$(cat "$T/multi.frames")"
check_match "multi: two queue pairs on vhost-net" "vnet0: data path vhost-net \(the kernel's\), 2 queue pair" "$(cat "$ERR")"
check_match "multi: userspace moved no frame" "vnet0: userspace data path: 0 frames received \(0 dropped\), 0 sent" "$(cat "$ERR")"

vround reset 1 none reset=1
check_match "reset: the frame after the restart came out" "^52:54:00:12:35:51 .* vhpc-again-v$$xreset\$" "$(cat "$T/reset.frames")"
check_match "reset: both starts ran on vhost-net, userspace moved no frame" \
	"vnet0: userspace data path: 0 frames received \(0 dropped\), 0 sent \(0 dropped\); vhost-net starts 2, refused 0" \
	"$(cat "$ERR")"

# -- fallbacks -----------------------------------------------------------------
vround hidden 1 no_vhost_dev
check_eq "hidden: no vhost worker thread" no "$PID_SEEN"
check_eq "hidden: status says userspace" userspace "$DP"
check_match "hidden: the log says why" "vnet0: data path userspace \(vhost-net: /dev/vhost-net: No such file or directory\)" "$(cat "$ERR")"
check_match "hidden: the userspace path moved the frames" "vnet0: userspace data path: [1-9][0-9]* frames received \(0 dropped\), [1-9][0-9]* sent" "$(cat "$ERR")"

vround notvhost 1 fake_vhost_dev
check_match "not a vhost device: refused at set-up, userspace serves" "vnet0: data path userspace \(vhost-net: pair 0: VHOST_SET_OWNER" "$(cat "$ERR")"
check_match "not a vhost device: the userspace path moved the frames" "vnet0: userspace data path: [1-9][0-9]* frames received" "$(cat "$ERR")"

run_guest vnet --vcpus 1 --mem 32M --net "tap=x,vhostfd=5:6"
check_match "a descriptor per queue pair" "vhostfd=5:6 names 2 descriptor\(s\) for 1 queue pair\(s\)" "$(cat "$ERR")"
run_guest vnet --vcpus 1 --mem 32M --net "tap=x,vhostfd=2"
check_match "vhostfd must be a descriptor above stderr" "vhostfd=2 is not a list of descriptors" "$(cat "$ERR")"
done_testing
