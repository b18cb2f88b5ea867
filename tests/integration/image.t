#!/usr/bin/env bash
# timeout: 180
# The default image: content-addressed (same sha256 from two builds), holds
# the MPI runtime and vhpc's guest programs, and tampering is detected.  Its
# kvm parts: the kernel, an initramfs with the virtio modules and every
# module they need (loaded after what they need), an ext4 root made by
# mke2fs -d with the same content as the container rootfs.
. "$(dirname "$0")/common.sh"
for p in vhpc vhpc-guestd vhpc-rsh vhpc-mpibench; do
	[ -x "$BIN/$p" ] || skip_all "$p is not built"
done
export VHPC_STATE_DIR=$T/state
export VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
kvm=1
ls "$VHPC_KERNEL_CACHE"/linux-image-cloud-amd64/.complete >/dev/null 2>&1 || kvm=0
if [ $kvm = 0 ]; then
	# Without the kernel package (fetched by `make kernels`), the kvm
	# parts cannot be built: test the container image alone.
	diag "no kernel package in $VHPC_KERNEL_CACHE: building without the kvm parts"
	sed '/^kvm:/,$d' "$VHPC_TOP/configs/images/default.yaml" >"$T/default.yaml"
	yaml=$T/default.yaml
else
	yaml=$VHPC_TOP/configs/images/default.yaml
fi

vhpc image build "$yaml" >"$T/b1" 2>&1
check_eq "the default image builds" 0 "$?"
id1=$(vhpc image list --local --json | sed -n 's/.*"id": *"\([0-9a-f]\{64\}\)".*/\1/p' | head -1)
vhpc image build --force "$yaml" >"$T/b2" 2>&1
id2=$(vhpc image list --local --json | sed -n 's/.*"id": *"\([0-9a-f]\{64\}\)".*/\1/p' | head -1)
check "its id is a sha256" test ${#id1} = 64
check_eq "a second build has the same id" "$id1" "$id2"
check_eq "one image is stored, not two" 1 "$(vhpc image list --local --json | grep -c '"id"')"
vhpc image build "$yaml" >"$T/b3" 2>&1
check_eq "a build its fingerprint makes unnecessary leaves no staging folder" "" \
	"$(ls -A "$VHPC_STATE_DIR/images" | grep '^\.build-')"
root=$VHPC_STATE_DIR/images/$id1/rootfs
for f in usr/bin/mpirun usr/bin/orted usr/local/bin/vhpc-guestd usr/local/bin/vhpc-rsh \
	usr/local/bin/vhpc-mpibench bin/sh usr/share/openmpi/help-btl-vader.txt; do
	check "the image has /$f" test -e "$root/$f"
done
check "libmpi and its libraries are there" sh -c "ls '$root'/usr/lib/x86_64-linux-gnu/libmpi.so.40* >/dev/null"
check "mpirun runs from the image" chroot "$root" /usr/bin/mpirun --version
check "vhpc-mpibench's libraries resolve in the image" sh -c "chroot '$root' /usr/local/bin/vhpc-mpibench --help >/dev/null 2>&1; test \$? -le 2"
if [ $kvm = 1 ]; then
	k=$VHPC_STATE_DIR/images/$id1/kvm
	check_match "the image lists its kernel" '"kernel_release": *"6\.[0-9.]+-[0-9]+-cloud-amd64"' "$(vhpc image list --local --json)"
	check "the kernel is a bzImage" sh -c "head -c 520 '$k/vmlinuz' | tail -c 6 | grep -q HdrS"
	check "the PVH kernel is an ELF file" sh -c "head -c 4 '$k/vmlinux' | grep -q ELF"
	zcat "$k/initramfs.img" | cpio -t --quiet 2>/dev/null >"$T/initrd.list"
	for m in virtio_pci virtio_net virtio_blk virtio_console vmw_vsock_virtio_transport \
		virtio virtio_ring virtio_pci_modern_dev vsock vmw_vsock_virtio_transport_common net_failover failover; do
		check "the initramfs has $m.ko" grep -q "/$m\.ko\$" "$T/initrd.list"
	done
	check "the initramfs has busybox and its /init" sh -c "grep -qx bin/busybox '$T/initrd.list' && grep -qx init '$T/initrd.list'"
	zcat "$k/initramfs.img" | (cd "$T" && mkdir -p ird && cd ird && cpio -id --quiet 2>/dev/null)
	pos() { grep -n "/$1\.ko\$" "$T/ird/lib/modules/load-order" | cut -d: -f1; }
	check "virtio_ring loads before virtio_pci and virtio_net" test "$(pos virtio_ring)" -lt "$(pos virtio_pci)" -a "$(pos virtio_ring)" -lt "$(pos virtio_net)"
	check "vsock loads before its virtio transport" test "$(pos vsock)" -lt "$(pos vmw_vsock_virtio_transport)"
	check "the ext4 root is a clean file system" e2fsck -fn "$k/rootfs.ext4"
	for f in /usr/bin/mpirun /usr/local/bin/vhpc-guestd /usr/local/bin/vhpc-mpibench /usr/lib/x86_64-linux-gnu/libmpi.so.40; do
		check "the ext4 root holds $f" sh -c "debugfs -R 'stat $f' '$k/rootfs.ext4' 2>/dev/null | grep -q 'Inode:'"
	done
	mkdir -p "$T/ext"
	debugfs -R "rdump / $T/ext" "$k/rootfs.ext4" >/dev/null 2>&1
	rmdir "$T/ext/lost+found"
	check "the ext4 root holds exactly the container rootfs" diff -r --no-dereference "$root" "$T/ext/"
	check "and the guest agent there is runnable (mode kept)" test -x "$T/ext/usr/local/bin/vhpc-guestd"
	# A container-only build is asked for: the stored build with kvm parts
	# does not do (every node would pull and check them for nothing).
	vhpc image build --no-kvm "$yaml" >"$T/nk" 2>&1
	check_eq "--no-kvm after a build with kvm parts builds again" 0 "$?"
	nk=$(sed -n 's/.*"id": *"\([0-9a-f]\{64\}\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/default.json")
	check "... an image without them, under another id" \
		test -n "$nk" -a "$nk" != "$id1" -a ! -e "$VHPC_STATE_DIR/images/$nk/kvm"
	vhpc image build --no-kvm "$yaml" >"$T/nk2" 2>&1
	check_eq "... which the next --no-kvm build reuses" "$nk" \
		"$(sed -n 's/.*"id": *"\([0-9a-f]\{64\}\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/default.json")"
	check "... without building" test "$(grep -c 'building image' "$T/nk2")" = 0
	vhpc image build "$yaml" >"$T/k2" 2>&1
	check_eq "a build with kvm parts then gives the first id again" "$id1" \
		"$(sed -n 's/.*"id": *"\([0-9a-f]\{64\}\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/default.json")"
fi
check "verify passes on the stored image" vhpc image verify default
chmod u+w "$root/usr/local/bin/vhpc-rsh"
echo tampered >>"$root/usr/local/bin/vhpc-rsh"
vhpc image verify default >"$T/v" 2>&1
check_eq "verify fails after a file changed" 1 "$?"
check_match "and says so" "was modified" "$(cat "$T/v")"
done_testing
