#!/usr/bin/env bash
# timeout: 30
# The kvm guest's initramfs /init (guest/initramfs/init) cannot boot to
# userspace on this software KVM, so its logic is tested here in busybox's
# shell on fixture trees: the kernel command line the driver writes, disks
# found by virtio serial, the ivshmem device for the vmshm region, and the
# environment file taken line by line, never evaluated, and the tuning
# profile's sysctls.
. "$(dirname "$0")/../lib.sh"
BB=/bin/busybox
INIT=$VHPC_TOP/guest/initramfs/init
[ -x "$BB" ] || skip_all "no $BB (Debian package busybox-static)"
T=$(mktemp -d /tmp/vhpc-init-t.XXXXXX)
at_exit "rm -rf '$T'"

check "the init is valid busybox sh" "$BB" sh -n "$INIT"
lib() { VHPC_INIT_LIB=1 bb=$BB "$BB" sh -c ". '$INIT'; $1"; }
check_not() { local d=$1; shift; if "$@" >/dev/null 2>&1; then fail "$d"; else ok "$d"; fi; }

cl='console=ttyS0 earlyprintk=serial,ttyS0 panic=-1 vhpc.name=g1 vhpc.job=ab12 vhpc.index=1 vhpc.addr=10.213.0.3/24 vhpc.mtu=9000 vhpc.listen=vsock:7707 vhpc.listen=10.213.0.3:7707'
check_eq "the driver's command line gives name, job, index, address, MTU" "g1|ab12|1|10.213.0.3/24|9000" \
	"$(lib "parse_cmdline '$cl'; echo \"\$name|\$job|\$index|\$addr|\$mtu\"")"
check_eq "vhpc.scratch=1: a scratch disk to mount" "1" "$(lib "parse_cmdline '$cl vhpc.scratch=1'; echo \"\$scratch\"")"
check_eq "no vhpc.scratch: none" "" "$(lib "parse_cmdline '$cl'; echo \"\$scratch\"")"
check_eq "vhpc.rootfs=squashfs: the root disk is a compact image's squashfs" "squashfs" \
	"$(lib "parse_cmdline '$cl vhpc.rootfs=squashfs'; echo \"\$rootfs\"")"
check_eq "no vhpc.rootfs: an ext4 root disk" "ext4" "$(lib "parse_cmdline '$cl'; echo \"\$rootfs\"")"
check_eq "words without vhpc. are left alone" "||||" \
	"$(lib "parse_cmdline 'name=x addr=y BOOT_IMAGE=/vmlinuz'; echo \"\$name|\$job|\$index|\$addr|\$mtu\"")"

mkdir -p "$T/block/vda" "$T/block/vdb" "$T/block/vdc" "$T/block/sda"
echo vhpc-config >"$T/block/vda/serial"
echo vhpc-root >"$T/block/vdb/serial"
echo vhpc-root >"$T/block/sda/serial"
check_eq "the root disk by its serial, whatever its order" /dev/vdb "$(lib "disk_by_serial '$T/block' vhpc-root")"
check_eq "the config disk by its serial" /dev/vda "$(lib "disk_by_serial '$T/block' vhpc-config")"
check_not "a serial no disk has is not found" lib "disk_by_serial '$T/block' vhpc-scratch"

mkdir -p "$T/pci/0000:00:01.0" "$T/pci/0000:00:02.0" "$T/pci/0000:00:03.0"
printf '0x1af4\n' | tee "$T/pci/0000:00:01.0/vendor" "$T/pci/0000:00:03.0/vendor" >/dev/null
printf '0x1042\n' >"$T/pci/0000:00:01.0/device"    # virtio-blk
printf '0x8086\n' >"$T/pci/0000:00:02.0/vendor"
printf '0x1110\n' >"$T/pci/0000:00:02.0/device"    # not Red Hat's: not ivshmem
printf '0x1110\n' >"$T/pci/0000:00:03.0/device"
check_eq "the ivshmem device (1af4:1110)" 0000:00:03.0 "$(lib "find_ivshmem '$T/pci'")"
rm -r "$T/pci/0000:00:03.0"
check_not "no ivshmem device: none found" lib "find_ivshmem '$T/pci'"

# An ivshmem device's sysfs resource file: BAR0 registers, BAR1 unset, BAR2
# the 8 MiB region in the 64-bit window.
printf '%s\n' '0x00000000c0000000 0x00000000c00000ff 0x0000000000040200' \
	'0x0000000000000000 0x0000000000000000 0x0000000000000000' \
	'0x0000001000000000 0x00000010007fffff 0x000000000014220c' >"$T/resource"
check_eq "BAR2's physical address and size, for /dev/mem" "0x1000000000 8388608" "$(lib "bar_range '$T/resource' 2")"
check_eq "BAR0's" "0xc0000000 256" "$(lib "bar_range '$T/resource' 0")"
check_not "an unassigned BAR is no range" lib "bar_range '$T/resource' 1"
check_not "a BAR the file does not have is no range" lib "bar_range '$T/resource' 5"

cat >"$T/env" <<'E'
PATH=/usr/local/bin:/usr/bin:/bin
VHPC_JOB=ab12
VHPC_HOST_ID=$(touch /tmp/vhpc-init-pwned)
SPACED=a b  c
bad-name=1
no equals sign
E
printf 'LAST=no newline' >>"$T/env"
out=$(lib "export_env '$T/env'; echo \"\$VHPC_JOB|\$VHPC_HOST_ID|\$SPACED|\$LAST\"")
check_eq "env lines are exported as they are, the last one without a newline too" \
	'ab12|$(touch /tmp/vhpc-init-pwned)|a b  c|no newline' "$(printf '%s\n' "$out" | tail -n 1)"
check "a value is never evaluated" test ! -e /tmp/vhpc-init-pwned
check_match "lines that are not NAME=VALUE are reported and skipped" \
	"env: ignored 'bad-name=1'.*env: ignored 'no equals sign'" "$(printf '%s' "$out" | tr '\n' ' ')"
rm -f /tmp/vhpc-init-pwned

# The tuning profile's sysctls, written under the new root's /proc/sys (a
# fixture tree here), as the node agent's sysctl.conf spells them.
mkdir -p "$T/sys/net/ipv4" "$T/sys/net/core"
: >"$T/sys/net/ipv4/tcp_rmem"; : >"$T/sys/net/core/somaxconn"; : >"$T/sys/net/ipv4/tcp_no_metrics_save"
cat >"$T/sysctl.conf" <<'E'
# a comment
net.ipv4.tcp_rmem = 4096 1048576 67108864

net.core.somaxconn=4096
  net.ipv4.tcp_no_metrics_save =   1
E
check "a profile whose keys all exist is applied with status 0" lib "apply_sysctls '$T/sys' '$T/sysctl.conf'"
check_eq "values are written as given, blanks around them trimmed" "4096 1048576 67108864|4096|1" \
	"$(cat "$T/sys/net/ipv4/tcp_rmem")|$(cat "$T/sys/net/core/somaxconn")|$(cat "$T/sys/net/ipv4/tcp_no_metrics_save")"
printf '%s\n' 'net.ipv4.tcp_sack = 1' 'kernel.panic = 1' 'net.ipv4/../../x = 1' 'no equals sign' 'net.core.somaxconn = 512' >"$T/bad.conf"
out=$(lib "apply_sysctls '$T/sys' '$T/bad.conf'; echo status=\$?")
check_match "a key this kernel lacks is named" "sysctl net.ipv4.tcp_sack: this kernel has no such setting" "$out"
check_match "a key outside net.* is not written" "sysctl: ignored 'kernel.panic' \(only net.\* keys\)" "$out"
check_match "a key with a path in it is not written" "sysctl: ignored 'net.ipv4/../../x' \(not a key\)" "$out"
check_match "a line without '=' is named" "sysctl: ignored 'no equals sign'" "$out"
check_match "the status says some were not applied" "status=1" "$out"
check_eq "the good keys after bad ones are still applied" 512 "$(cat "$T/sys/net/core/somaxconn")"
check "nothing is written outside the tree" test ! -e "$T/x"

# The image's initramfs carries this very init (the image id covers it:
# an image built before the init changed is rebuilt here).
export VHPC_STATE_DIR=$VHPC_TOP/$B/state VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
if [ -e "$VHPC_KERNEL_CACHE/linux-image-cloud-amd64/.complete" ] && [ -x "$BIN/vhpc" ]; then
	"$BIN/vhpc" image build "$VHPC_TOP/configs/images/default.yaml" >"$T/build" 2>&1
	id=$(jq -r .id "$VHPC_STATE_DIR/images/refs/default.json")
	ird=$VHPC_STATE_DIR/images/$id/kvm/initramfs.img
	mkdir -p "$T/ird" && (cd "$T/ird" && zcat "$ird" | cpio -id --quiet init 2>/dev/null)
	check "the image's initramfs holds guest/initramfs/init" cmp -s "$T/ird/init" "$INIT"
else
	skip "no kernel package in $VHPC_KERNEL_CACHE: no kvm image to look into"
fi
done_testing
