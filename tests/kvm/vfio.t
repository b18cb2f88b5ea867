#!/usr/bin/env bash
# timeout: 900
# needs: hardware-virtualization
# lab-devices: vfio
# PCI passthrough: the lab's VFIO L1 (tests/lab/README.md) has an Intel
# IOMMU and, on one QEMU hub, 01:00.0 (a PCI Express virtio-net behind
# the IOMMU, to pass through) and 00:06.0 (L1's own NIC, the far end); 00:07.0/07.1 are
# two functions in one IOMMU group.  The node agent moves 00:05.0 to
# vfio-pci, vhpc-hv gives it to an L2 guest, whose own virtio_net brings
# it up and moves TCP to L1 over it; after the job, after kill -9 of
# vhpc-hv, after a guest panic and after the agent itself died (`vhpc
# cleanup`), the function is back on its own driver; `vhpc run --device
# nic` gets it through the embedded scheduler.  Refused with a
# clear message: an address not on the admin's list, path-like addresses,
# a function in a group it shares, one that does not exist.
# Figures are nested/TCG: they prove nothing about hardware.
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmv
unset VHPC_KVM_ALLOW_EMULATION
NIC=0000:01:00.0 PEER=0000:00:06.0 SHARED=0000:00:07.0 ABSENT=0000:00:1e.0
MAC=52:54:00:34:00:05 PEER_MAC=52:54:00:34:00:06
VJ=$BIN/vfio-job
dev=/sys/bus/pci/devices
[ -x "$VJ" ] || skip_all "vfio-job is not built"
[ -e "$dev/$NIC/iommu_group" ] && [ "$(cat "$dev/$NIC/vendor" "$dev/$NIC/device" 2>/dev/null | tr '\n' ' ')" = "0x1af4 0x1041 " ] ||
	skip_all "no virtio-net with an IOMMU group at $NIC: this test needs the lab's VFIO L1 (# lab-devices: vfio)"
[ -d /sys/bus/pci/drivers/vfio-pci ] || modprobe vfio-pci 2>/dev/null
[ -d /sys/bus/pci/drivers/vfio-pci ] || skip_all "no vfio-pci driver in this kernel"

driver_of() { basename "$(readlink "$dev/$1/driver" 2>/dev/null)" 2>/dev/null; }
netdev_of() { local m; for m in /sys/class/net/*/address; do [ "$(cat "$m")" = "$1" ] && { basename "${m%/address}"; return; }; done; }
own_driver=$(driver_of $NIC)
check_eq "the NIC starts on its own driver" virtio-pci "$own_driver"

# The admin's list: this node's entry in the cluster file (fabric.nodes,
# by the host's name, as `vhpc run` finds it), in a copy of the checkout's
# config dir.
export VHPC_CONFIG_DIR=$T/etc
mkdir -p "$VHPC_CONFIG_DIR" && cp -r "$VHPC_TOP/configs/." "$VHPC_CONFIG_DIR/"
# (In the lab kvmlib.sh has VHPC_CLUSTER name a copy of its own.)
cat >>"${VHPC_CLUSTER:-$VHPC_CONFIG_DIR/cluster.yaml}" <<EOF
fabric:
  nodes:
    - name: $(hostname)
      pci: [{addr: $NIC, class: nic}, {addr: $SHARED, class: nic}, {addr: $ABSENT, class: nic}]
EOF

# L1's end of the hub, in a namespace of the test's own.
ns=vfiot-$$
ip netns add $ns
at_exit "ip netns del $ns 2>/dev/null"
peer_if=$(netdev_of $PEER_MAC)
check_match "L1's own NIC is there" '^eth[0-9]+$' "$peer_if"
ip link set "$peer_if" netns $ns
ip -n $ns addr add 10.77.0.1/24 dev "$peer_if"
ip -n $ns link set "$peer_if" up
ip -n $ns link set lo up

# -- refused, before anything changes ---------------------------------------
refused() {   # WHAT ADDR REGEX
	"$VJ" --pci "$2" >"$T/r.out" 2>"$T/r.err"
	local rc=$?
	check_eq "$1: refused" 1 "$rc"
	check_match "$1: says why" "$3" "$(cat "$T/r.err")"
}
refused "an address not on the list" $PEER "$PEER is not on this node's list of functions that may be passed through \\(the cluster file's fabric.nodes: $(hostname)\\)"
refused "a path as an address" "../../../../dev/sda" "'../../../../dev/sda' is not a PCI address"
refused "an address with a path after it" "$NIC/../../../0000:00:06.0" "is not a PCI address"
refused "an upper-case address" "0000:00:05.A" "'0000:00:05.A' is not a PCI address"
refused "a function in a shared IOMMU group" $SHARED "$SHARED shares IOMMU group [0-9]+ with 0000:00:07.1"
refused "a function that does not exist" $ABSENT "$ABSENT does not exist on this node"
check_eq "after the refusals the NIC is on its own driver" "$own_driver" "$(driver_of $NIC)"

# -- the NIC in an L2 guest: its own driver, TCP to L1 ---------------------
ip netns exec $ns vhpc-netbench -serve 0.0.0.0:5201 -idle 400 >"$T/srv.out" 2>&1 &
srv=$!
at_exit "kill $srv 2>/dev/null"
guest_cmd='for m in /sys/class/net/*/address; do [ "$(cat $m)" = '$MAC' ] && i=${m%/address} && i=${i##*/}; done
[ -n "$i" ] || { echo "no interface with '$MAC'"; ls -l /sys/class/net; exit 9; }
echo "guest: $i driver $(basename $(readlink /sys/class/net/$i/device/driver))"
ip addr add 10.77.0.2/24 dev $i && ip link set $i up || exit 8
vhpc-netbench -connect 10.77.0.1:5201 -wait 60 -sizes 64K -time 3 stream maerts || exit
v=$(basename $(readlink /sys/class/net/$i/device))
grep "$v-input" /proc/interrupts | sed "s/^/guest: irq /"'
(while :; do driver_of $NIC >>"$T/during"; sleep 1; done) &
watch=$!
"$VJ" --mem 384M --pci $NIC -- sh -c "$guest_cmd" >"$T/job.out" 2>"$T/job.err"
check_eq "the job with the NIC exits 0" 0 "$?"
kill $watch; wait $watch 2>/dev/null
[ "$(grep -c . "$T/job.out")" -gt 2 ] || diag "$(tail -n 20 "$T/job.err" "$T/job.out")" "$(tail -n 30 "$VHPC_RUN_DIR"/jobs/*/kvm*/hv/serial 2>/dev/null)"
check_match "in the guest, the NIC is on virtio_net (its own Linux driver)" "guest: eth[0-9]+ driver virtio_net" "$(cat "$T/job.out")"
irqs=$(sed -n 's/^guest: irq *[0-9]*: *//p' "$T/job.out" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i } END { print s + 0 }')
check_match "in the guest, the NIC's receive queue took MSI-X interrupts" '^[1-9][0-9]*$' "$irqs"
check_match "while the job ran, the NIC was on vfio-pci" "vfio-pci" "$(sort -u "$T/during" | tr '\n' ' ')"
fig() { sed -n "s/^vhpc-bench {\"test\":\"$1\",\"size\":65536,\"value\":\([0-9.]*\),.*/\1/p" "$2" | head -n 1; }
l2_up=$(fig stream "$T/job.out") l2_down=$(fig maerts "$T/job.out")
check_match "L2 to L1 over the NIC: TCP measured" '^[0-9]+\.[0-9]+$' "$l2_up"
check_match "L1 to L2 over the NIC: TCP measured" '^[0-9]+\.[0-9]+$' "$l2_down"
check_eq "after the job the NIC is back on its own driver" "$own_driver" "$(driver_of $NIC)"
check_match "after the job L1 has its interface again" '^eth[0-9]+$' "$(netdev_of $MAC)"
check_match "vhpc-hv mapped the guest's RAM for DMA" "vfio0 $NIC: [0-9]+ MiB of guest RAM mapped for DMA in [0-9.]+ ms" "$(cat "$T/job.err")"
check_match "vhpc-hv mapped a BAR into the guest" "vfio0 $NIC: BAR[0-5] [0-9]+ KiB at 0x[0-9a-f]+, mapped" "$(cat "$T/job.err")"
check_match "vhpc-hv trapped the MSI-X BAR" "vfio0 $NIC: BAR[0-5] [0-9]+ KiB at 0x[0-9a-f]+, trapped \\(MSI-X\\)" "$(cat "$T/job.err")"
check_match "vhpc-hv reset the NIC at its end" "vfio0 $NIC: reset in [0-9.]+ ms" "$(cat "$T/job.err")"
check_match "the agent moved the NIC to vfio-pci" "1 PCI function moved to vfio-pci in [0-9.]+ ms" "$(cat "$T/job.err")"

# The same NIC used by L1 itself, side by side: from a second namespace.
ns2=vfiot2-$$
ip netns add $ns2
at_exit "ip netns del $ns2 2>/dev/null"
nic_if=$(netdev_of $MAC)
ip link set "$nic_if" netns $ns2 && ip -n $ns2 addr add 10.77.0.3/24 dev "$nic_if" && ip -n $ns2 link set "$nic_if" up
ip netns exec $ns2 vhpc-netbench -connect 10.77.0.1:5201 -wait 60 -sizes 64K -time 3 -stop stream maerts >"$T/l1.out" 2>&1
check_eq "L1 over the same NIC: vhpc-netbench exits 0" 0 "$?"
l1_up=$(fig stream "$T/l1.out") l1_down=$(fig maerts "$T/l1.out")
ip netns del $ns2
wait $srv 2>/dev/null
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }'; }
diag "TCP over the passed-through NIC, 64 KiB writes (nested/TCG, this machine): L2 to L1 ${l2_up:-?} Mbit/s," \
	"L1 to L2 ${l2_down:-?} Mbit/s; the same NIC in L1: ${l1_up:-?} and ${l1_down:-?} Mbit/s;" \
	"L2/L1 $(ratio "$l2_up" "$l1_up") and $(ratio "$l2_down" "$l1_down")"
diag "start-up costs: $(grep -oE '(PCI functions? moved to vfio-pci in [0-9.]+ ms|VFIO container, group and device of [0-9]+ PCI functions? opened in [0-9.]+ ms|[0-9]+ MiB of guest RAM mapped for DMA in [0-9.]+ ms|reset in [0-9.]+ ms)' \
	"$T/job.err" | tr '\n' ';')"

# The same guest without the NIC, for what the NIC adds to its start.
"$VJ" --mem 384M -- true >"$T/plain.out" 2>"$T/plain.err"
check_eq "the same guest without a NIC starts and exits 0" 0 "$?"
up_of() { sed -n 's/.*vhpc-hv pid [0-9]* up in \([0-9]*\) ms.*/\1/p' "$1" | head -n 1; }
up_nic=$(up_of "$T/job.err") up_plain=$(up_of "$T/plain.err")
diag "vhpc-hv up (nested/TCG, 384 MiB, prefault off): with the NIC ${up_nic:-?} ms, without ${up_plain:-?} ms," \
	"ratio $(ratio "$up_nic" "$up_plain")"

# -- `vhpc run --device nic`: from the command line to the guest ----------
# The embedded scheduler picks a free function of the class from the
# admin's list (lib/fabric_local.c), the agent checks it against the same
# list and moves it, and the guest's own driver takes it.
run_cmd='for m in /sys/class/net/*/address; do [ "$(cat $m)" = '$MAC' ] && i=${m%/address} && i=${i##*/}; done
[ -n "$i" ] || { echo "no interface with '$MAC'"; exit 9; }
echo "guest: $i driver $(basename $(readlink /sys/class/net/$i/device/driver))"'
out=$(timeout 400 vhpc run --driver kvm -N 1 -n 1 --mem 384M --timeout 300 --device nic -- sh -c "$run_cmd" 2>"$T/run.err")
rc=$?
check_eq "vhpc run --driver kvm --device nic exits 0" 0 "$rc"
[ "$rc" = 0 ] || diag "$(tail -n 20 "$T/run.err")"
check_match "... and its guest has the NIC on virtio_net" "guest: eth[0-9]+ driver virtio_net" "$out"
check_match "... which the agent moved to vfio-pci for it" "1 PCI function moved to vfio-pci in [0-9.]+ ms" "$(cat "$T/run.err")"
check_eq "... and gave back after it" "$own_driver" "$(driver_of $NIC)"
out=$(timeout 60 vhpc run --driver kvm -N 1 -n 1 --device gpu -- true 2>&1)
check_match "vhpc run --device gpu, a class this node does not have: refused, saying so" "1 gpu function per guest: node .* has too few" "$out"
check_eq "... and the NIC stayed on its own driver" "$own_driver" "$(driver_of $NIC)"

# -- kill -9 of vhpc-hv ----------------------------------------------------
held() {   # NAME: a held job, ready or gone
	"$VJ" --mem 256M --hold --pci $NIC >"$T/$1.out" 2>"$T/$1.err" &
	pid=$!
	poll_until 300 sh -c "grep -q 'ready\$' '$T/$1.out' || ! kill -0 $pid 2>/dev/null"
	job=$(sed -n 's/^vfio-job: job \([a-z0-9]*\) ready$/\1/p' "$T/$1.out")
	check_match "$1: the job is up" '^[a-z0-9]+$' "$job"
	[ -n "$job" ] || diag "$(tail -n 15 "$T/$1.err")"
}
held kill9
check_eq "kill -9: while the guest runs the NIC is on vfio-pci" vfio-pci "$(driver_of $NIC)"
hv=$(pgrep -f "vhpc-hv .*/jobs/$job/kvm0/" | head -n 1)
check_match "kill -9: vhpc-hv found" '^[0-9]+$' "$hv"
kill -9 "$hv"
poll_until 120 sh -c "! kill -0 $pid 2>/dev/null"
wait $pid
check_eq "kill -9: the agent saw the guest go" 3 "$?"
check_match "kill -9: and said so" "guest gone: .*(killed|signal 9|SIGKILL)" "$(cat "$T/kill9.out")"
check_eq "kill -9: the NIC is back on its own driver" "$own_driver" "$(driver_of $NIC)"
nothing_left "kill -9"

# -- a guest that panics ---------------------------------------------------
"$VJ" --mem 256M --pci $NIC -- sh -c 'echo 1 >/proc/sys/kernel/sysrq; echo c >/proc/sysrq-trigger' >"$T/panic.out" 2>"$T/panic.err"
check_eq "panic: the job fails" 1 "$?"
check_match "panic: the agent says the guest's kernel panicked" "panicked|rebooted|has exited|gone" "$(cat "$T/panic.err")"
check_eq "panic: the NIC is back on its own driver" "$own_driver" "$(driver_of $NIC)"

# -- the agent itself dies: `vhpc cleanup` gives the NIC back --------------
held crash
kill -9 $pid
wait $pid 2>/dev/null
check_eq "agent killed: the guest holds the NIC still" vfio-pci "$(driver_of $NIC)"
vhpc cleanup >"$T/c.out" 2>&1
check_match "vhpc cleanup says it gave the NIC back" "PCI function $NIC given back to its driver" "$(cat "$T/c.out")"
check_eq "agent killed: after cleanup the NIC is back on its own driver" "$own_driver" "$(driver_of $NIC)"
nothing_left "agent killed"
check_eq "no VFIO group is held open" "" "$(ls -l /proc/[0-9]*/fd 2>/dev/null | grep -E -- '-> /dev/vfio/[0-9]+$')"
done_testing
