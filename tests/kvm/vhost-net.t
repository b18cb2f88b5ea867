#!/usr/bin/env bash
# timeout: 600
# needs: hardware-virtualization
# A kvm guest's NIC on the kernel's vhost-net, under its real Linux
# driver: TCP streams between the host and the VM, proven to take the
# kernel's path by /proc (vhpc-hv's vhost-PID worker thread, its
# /dev/vhost-net descriptor) and by counters (the tap's statistics rise
# by the stream's bytes while vhpc-hv's own userspace frame counters stay
# at 0).  The guest then unbinds and binds its virtio-net driver (a
# device reset) and serves a second stream.  The same traffic with
# /dev/vhost-net hidden (a private mount namespace) and with the tuning
# profile's vhost_net: false runs through vhpc-hv's userspace back end.
# Speeds here are nested/TCG and prove nothing: bench/scripts/kvm-vhost-net
# measures.
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmvh
unset VHPC_KVM_ALLOW_EMULATION
[ -c /dev/vhost-net ] || modprobe vhost_net 2>/dev/null
[ -c /dev/vhost-net ] || skip_all "no /dev/vhost-net on this machine"
RUN=(vhpc run --driver kvm -N 1 -n 1 --mem 384M --timeout 400)
HVCTL=$BIN/vhpc-hvctl

# A private mount namespace whose /dev has everything but vhost-net.
no_vhost_dev() {
	unshare -m --propagation private sh -c '
d=$(mktemp -d) && mount --rbind /dev "$d" && mount -t tmpfs -o mode=755 vhpc-novhost /dev || exit 125
for e in "$d"/* "$d"/.[!.]*; do
	[ -e "$e" ] || [ -L "$e" ] || continue
	n=${e##*/}
	[ "$n" = vhost-net ] && continue
	if [ -L "$e" ]; then cp -P "$e" "/dev/$n"
	elif [ -d "$e" ]; then mkdir "/dev/$n" && mount --rbind "$e" "/dev/$n"
	else touch "/dev/$n" && mount --bind "$e" "/dev/$n"; fi || exit 125
done
umount -l "$d" && rmdir "$d" && exec "$@"' sh "$@"
}

# The guest serves the host's streams; with REBIND it then resets its NIC
# (driver unbind and bind), puts its address back and serves again.
serve='vhpc-netbench -serve 0.0.0.0:5201 -idle 300 || exit 1
[ "$REBIND" = 1 ] || exit 0
a=$(ip -o -4 addr show eth0 | awk "{print \$4}") dev=$(basename "$(readlink /sys/class/net/eth0/device)")
echo "$dev" >/sys/bus/virtio/drivers/virtio_net/unbind && echo "$dev" >/sys/bus/virtio/drivers/virtio_net/bind || exit 2
for i in $(seq 100); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
ip link set eth0 up && ip addr add "$a" dev eth0 || exit 3
echo "vhost-net-t rebound $dev" >/dev/hvc0
exec vhpc-netbench -serve 0.0.0.0:5201 -idle 300'

job= g0= hvpid= ctl= ns= agent=
find_guest() {
	job=$(job_id_of "$T/$1.err")
	[ -n "$job" ] && g0=$(pgrep -af "vhpc-hv .*/jobs/$job/kvm0/" | sed -n 's/.*vhpc\.addr=\([0-9.]*\/[0-9]*\).*/\1/p' | head -n 1)
	[ -n "$g0" ] || ! kill -0 $pid 2>/dev/null
}
# The job's namespaces are named in its agent's mount namespace: a job run
# under no_vhost_dev has its /run/netns entries there alone.
inagent() { if [ -n "$agent" ]; then nsenter -m -t "$agent" "$@"; else "$@"; fi; }
tapstat() { inagent ip netns exec "$ns" cat "/sys/class/net/t0/statistics/$1" 2>/dev/null || echo 0; }
hvstat() { inagent "$HVCTL" "$ctl" status 2>/dev/null | sed -n "s/.*\"net\": *\[ *{[^]]*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
client() { # NAME: the host's streams against the guest; figures in $T/NAME.nb
	inagent ip netns exec "$ns" vhpc-netbench -connect "${g0%/*}:5201" -wait 200 -sizes 64K -time 1 \
		stream maerts >"$T/$1.nb" 2>"$T/$1.nberr"
}
# The guest's server ends (after the counters were read).
stop_server() {
	inagent ip netns exec "$ns" vhpc-netbench -connect "${g0%/*}:5201" -wait 60 -sizes 1 -time 1 -stop rr \
		>/dev/null 2>&1
}
fig() { sed -n "s/^vhpc-bench {\"test\":\"$1\",\"size\":65536,\"value\":\([0-9.]*\),.*/\1/p" "$2" | head -n 1; }

# round NAME REBIND WRAP [vhpc run args]: one job; the guest address, vhpc-hv
# pid, control socket and counters before/after the first stream.
round() {
	local name=$1 rebind=$2 wrap=$3; shift 3
	local pre=(); [ "$wrap" != none ] && pre=("$wrap")
	"${pre[@]}" "${RUN[@]}" "$@" -- sh -c "REBIND=$rebind; $serve" >"$T/$name.out" 2>"$T/$name.err" &
	pid=$!
	g0= job=
	poll_until 90 find_guest "$name"
	check_match "$name: the guest has an address on the job network" '^[0-9.]+/[0-9]+$' "$g0"
	ns=vhpc-$job
	hvpid=$(pgrep -f "vhpc-hv .*/jobs/$job/kvm0/" | head -n 1)
	ctl=$VHPC_RUN_DIR/jobs/$job/kvm0/hv/ctl
	agent=
	[ "$wrap" != none ] && [ -n "$hvpid" ] && agent=$(ps -o ppid= -p "$hvpid" | tr -d ' ')
	IFS=./ read -r a b c d plen <<<"${g0:-0.0.0.0/32}"
	local ga=$(( (a << 24) | (b << 16) | (c << 8) | d ))
	local h=$(( (ga | ((1 << (32 - plen)) - 1)) - 1 ))
	inagent ip -n "$ns" addr add "$((h >> 24 & 255)).$((h >> 16 & 255)).$((h >> 8 & 255)).$((h & 255))/$plen" dev br0
	RX0=$(tapstat rx_bytes) TX0=$(tapstat tx_bytes) URX0=$(hvstat rx_frames) UTX0=$(hvstat tx_frames)
	client "$name"
	check_eq "$name: host and VM streams: the client exits 0" 0 "$?"
	RXB=$(( $(tapstat rx_bytes) - RX0 )) TXB=$(( $(tapstat tx_bytes) - TX0 ))
	URX=$(( $(hvstat rx_frames) - ${URX0:-0} )) UTX=$(( $(hvstat tx_frames) - ${UTX0:-0} ))
	DP=$(hvstat datapath)
	VHTHREAD=no; [ -n "$hvpid" ] && pgrep -x "vhost-$hvpid" >/dev/null && VHTHREAD=yes
	VHFD=no; [ -n "$hvpid" ] && ls -l "/proc/$hvpid/fd" 2>/dev/null | grep -q -- '-> /dev/vhost-net$' && VHFD=yes
	check_match "$name: the tap carried the streams both ways ($RXB bytes from the VM, $TXB to it)" \
		'^[0-9]{7,} [0-9]{7,}$' "$RXB $TXB"
	diag "$name (nested/TCG): host to VM $(fig stream "$T/$name.nb") Mbit/s, VM to host $(fig maerts "$T/$name.nb") Mbit/s"
	# The guest serves on until it is told to stop: the server ending
	# ends the job, and vhpc-hv's counters with it.
	stop_server
}

# -- vhost-net, and a driver reset inside the guest ---------------------------
round vhost 1 none
check_eq "vhost: vhpc-hv's status says vhost-net" vhost-net "$DP"
check_eq "vhost: vhpc-hv's vhost worker thread (vhost-$hvpid) runs" yes "$VHTHREAD"
check_eq "vhost: vhpc-hv holds /dev/vhost-net" yes "$VHFD"
check_eq "vhost: vhpc-hv's userspace path moved no frame during the streams" "0 0" "$URX $UTX"
check_match "vhost: the agent logged the back end" "guest g0: virtio-net on the kernel's vhost-net" "$(cat "$T/vhost.err")"
rebound() { grep -q 'vhost-net-t rebound' "$VHPC_RUN_DIR"/jobs/"$job"/kvm0/hv/console 2>/dev/null || ! kill -0 $pid 2>/dev/null; }
poll_until 60 rebound
check_match "vhost: the guest unbound and bound its virtio-net driver" "vhost-net-t rebound virtio[0-9]+" \
	"$(cat "$VHPC_RUN_DIR"/jobs/"$job"/kvm0/hv/console 2>/dev/null)"
before=$(hvstat vhost_starts)
RX0=$(tapstat rx_bytes)
client vhost2
check_eq "vhost: after the reset, the streams run again" 0 "$?"
check_match "vhost: after the reset, the tap carried them" '^[0-9]{7,}$' "$(( $(tapstat rx_bytes) - RX0 ))"
check_match "vhost: the reset gave the rings back and the new start took vhost-net again (starts $before)" '^[2-9]$' "$before"
check_eq "vhost: still no frame through vhpc-hv's userspace path" "0 0" "$(hvstat rx_frames) $(hvstat tx_frames)"
check_eq "vhost: vhost-net never refused a start" 0 "$(hvstat vhost_refused)"
stop_server
wait $pid
check_eq "vhost: the job exits 0" 0 "$?"

# -- /dev/vhost-net missing -----------------------------------------------------
round hidden 0 no_vhost_dev
check_eq "hidden: vhpc-hv's status says userspace" userspace "$DP"
check_eq "hidden: no vhost worker thread" no "$VHTHREAD"
check_match "hidden: vhpc-hv's userspace path moved the streams ($URX received, $UTX sent)" '^[1-9][0-9]{2,} [1-9][0-9]{2,}$' "$URX $UTX"
check_match "hidden: the agent logged the back end and why" \
	"guest g0: virtio-net on vhpc-hv's userspace back end \(/dev/vhost-net: No such file or directory\)" "$(cat "$T/hidden.err")"
wait $pid
check_eq "hidden: the job exits 0" 0 "$?"

# -- the tuning profile turns it off ---------------------------------------------
cp -r "$VHPC_TOP/configs" "$T/cfg"
sed -e 's/^name: stock/name: novhost/' -e '/^vhost_net:/d' "$VHPC_TOP/configs/tuning/stock.yaml" >"$T/cfg/tuning/novhost.yaml"
echo "vhost_net: false" >>"$T/cfg/tuning/novhost.yaml"
VHPC_CONFIG_DIR=$T/cfg round knob 0 none --tuning novhost
check_eq "knob: vhpc-hv's status says userspace" userspace "$DP"
check_match "knob: vhpc-hv's userspace path moved the streams" '^[1-9][0-9]{2,} [1-9][0-9]{2,}$' "$URX $UTX"
check_match "knob: the agent logged why" "guest g0: virtio-net on vhpc-hv's userspace back end \(the tuning profile says vhost_net: false\)" "$(cat "$T/knob.err")"
wait $pid
check_eq "knob: the job exits 0" 0 "$?"
done_testing
