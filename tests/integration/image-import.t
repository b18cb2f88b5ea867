#!/usr/bin/env bash
# timeout: 400
# OCI images as node images (vhpc image import), from an OCI layout made
# here with umoci out of this host's Open MPI and an MPI program of the
# test's:
#  - the import holds the image's files, vhpc's guest programs (through
#    vhpc-sysexec, with their own libraries and loader) and the vmshm BTL,
#    verifies, and leaves no staging behind; a Docker archive of the same
#    image imports to the same id;
#  - `vhpc run --image` runs the MPI program that lives in the image, in
#    two guests;
#  - an image without Open MPI, and one whose Open MPI is another version,
#    are refused saying why, and nothing is stored;
#  - with a base image's kvm parts: the same kernel and initramfs, and a
#    root disk holding the image's files;
#  - a squashfs import is one file, mounted once for the jobs that use it.
. "$(dirname "$0")/common.sh"
need_root
for p in vhpc vhpc-guestd vhpc-rsh vhpc-sysexec; do
	[ -x "$BIN/$p" ] || skip_all "$p is not built"
done
for t in skopeo umoci mpicc mksquashfs; do
	command -v $t >/dev/null || skip_all "$t is not installed (make installs it)"
done
[ -f "$VHPC_TOP/$B/lib/vhpc/openmpi/mca_btl_vmshm.so" ] || skip_all "the vmshm BTL is not built"
export VHPC_STATE_DIR=$T/state
. "$VHPC_TOP/tests/images/oci-lib.sh"
id_of() { sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/$1.json"; }

root=$(oci_hello_rootfs) || { fail "a rootfs of Open MPI and hello"; done_testing; exit 1; }
check "an OCI layout of it (umoci)" oci_layout "$T/oci" hello "$root" /usr/local/bin:/usr/bin:/bin
vhpc image import "oci:$T/oci:hello" --no-kvm >"$T/imp" 2>&1
check_eq "vhpc image import oci:DIR:TAG" 0 "$?"
[ -s "$T/imp" ] && diag "$(tail -3 "$T/imp")"
ID=$(id_of hello)
check_match "it is named after its tag" '^[0-9a-f]{64}$' "$ID"
r=$VHPC_STATE_DIR/images/$ID/rootfs
check "it holds the image's program" test -x "$r/opt/app/hello"
check "and its Open MPI" test -x "$r/usr/bin/orted" -a -e "$r/usr/lib/x86_64-linux-gnu/libmpi.so.40"
check "the vmshm BTL" cmp "$VHPC_TOP/$B/lib/vhpc/openmpi/mca_btl_vmshm.so" "$r/usr/local/lib/vhpc/openmpi/mca_btl_vmshm.so"
for p in vhpc-guestd vhpc-rsh; do
	check "$p runs through vhpc-sysexec" cmp "$BIN/vhpc-sysexec" "$r/usr/local/bin/$p"
	check "... from its own folder" cmp "$BIN/$p" "$r/usr/local/lib/vhpc/sys/$p"
done
check "with this host's loader and C library" test -x "$r/usr/local/lib/vhpc/sys/ld.so" -a -e "$r/usr/local/lib/vhpc/sys/libc.so.6"
check_match "the guest agent starts in the image" 'vhpc-guestd' "$(chroot "$r" /usr/local/bin/vhpc-guestd --version 2>&1)"
check "guests have their mount points" test -d "$r/vhpc" -a -d "$r/proc" -a -f "$r/etc/hosts" -a -d "$r/scratch"
check_eq "everything belongs to root" "" "$(find "$r" ! -user root | head -3)"
check "it verifies" vhpc image verify hello
check_eq "no staging is left" "" "$(ls -A "$VHPC_STATE_DIR/images" | grep '^\.build-')"
skopeo --policy <(echo '{"default":[{"type":"insecureAcceptAnything"}]}') copy --quiet "oci:$T/oci:hello" \
	"docker-archive:$T/hello.tar:hello:latest"
vhpc image import "docker-archive:$T/hello.tar" --name hello-docker --no-kvm >"$T/imp2" 2>&1
check_eq "vhpc image import docker-archive:FILE.tar" 0 "$?"
check_eq "the same image through a Docker archive has the same id" "$ID" "$(id_of hello-docker)"

# -- the MPI program in the image runs in two guests
vhpc run --image hello -N 2 -n 2 --chdir /tmp -- /opt/app/hello >"$T/run.out" 2>"$T/run.err"
check_eq "vhpc run --image hello runs /opt/app/hello, which lives in the image" 0 "$?"
check_eq "its two ranks, one per guest" "hello from rank 0 of 2 on g0 hello from rank 1 of 2 on g1" \
	"$(sort "$T/run.out" | tr '\n' ' ' | sed 's/ $//')"
[ -s "$T/run.out" ] || diag "$(tail -5 "$T/run.err")"

# -- refusals
nompi=$(oci_rootfs src-nompi "packages: [busybox-static]
busybox: true") && oci_layout "$T/oci" nompi "$nompi"
vhpc image import "oci:$T/oci:nompi" --no-kvm >"$T/imp3" 2>&1
check_eq "an image without Open MPI is refused" 1 "$?"
check_match "... saying why" 'the image has no Open MPI: ompi_info is not on its PATH' "$(cat "$T/imp3")"
# An Open MPI of another version, as its ompi_info says.
printf '#!/bin/sh\ncase "$*" in *pkglibdir*) echo path:pkglibdir:/usr/lib/openmpi;; *) echo ompi:version:full:3.1.6;; esac\n' >"$T/ompi_info"
printf '#!/bin/sh\nexit 0\n' >"$T/noop"
chmod 755 "$T/ompi_info" "$T/noop"
old=$(oci_rootfs src-oldompi "packages: [busybox-static]
busybox: true
copy:
  /usr/bin/ompi_info: $T/ompi_info
  /usr/bin/mpirun: $T/noop
  /usr/bin/orted: $T/noop") && oci_layout "$T/oci" oldompi "$old"
vhpc image import "oci:$T/oci:oldompi" --no-kvm >"$T/imp4" 2>&1
check_eq "an image whose Open MPI is 3.1 is refused" 1 "$?"
check_match "... saying its Open MPI cannot load the BTL" \
	"the image's Open MPI is 3\.1\.6; vhpc's vmshm BTL is built for Open MPI 4\.1\.[0-9]+.*this image's Open MPI cannot load the BTL" \
	"$(cat "$T/imp4")"
check "neither is stored" test ! -e "$VHPC_STATE_DIR/images/refs/nompi.json" -a ! -e "$VHPC_STATE_DIR/images/refs/oldompi.json"
check_eq "... nor left half made" "" "$(ls -A "$VHPC_STATE_DIR/images" | grep '^\.build-')"
check_match "a registry reference without a registry is refused" 'expected docker://REGISTRY/REPO:TAG' "$(vhpc image import docker://debian 2>&1)"
check_match "a missing folder is named" 'is not an OCI layout folder' "$(vhpc image import oci:$T/nothere 2>&1)"

# -- kvm parts from a base image
export VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
if [ -e "$VHPC_KERNEL_CACHE/linux-image-cloud-amd64/.complete" ]; then
	vhpc image build "$VHPC_TOP/configs/images/default.yaml" >"$T/def" 2>&1
	check_eq "a base image with kvm parts builds" 0 "$?"
	vhpc image import "oci:$T/oci:hello" --name hellokvm --base default >"$T/imp5" 2>&1
	check_eq "the import with --base default" 0 "$?"
	b=$VHPC_STATE_DIR/images/$(id_of default)/kvm k=$VHPC_STATE_DIR/images/$(id_of hellokvm)/kvm
	for f in vmlinuz vmlinux initramfs.img kernel.version; do
		check "its kvm/$f is the base's" cmp "$b/$f" "$k/$f"
	done
	check "its root disk is a clean ext4" e2fsck -fn "$k/rootfs.ext4"
	check "... holding the image's program" sh -c "debugfs -R 'stat /opt/app/hello' '$k/rootfs.ext4' 2>/dev/null | grep -q Inode:"
	check "... and the guest agent" sh -c "debugfs -R 'stat /usr/local/lib/vhpc/sys/vhpc-guestd' '$k/rootfs.ext4' 2>/dev/null | grep -q Inode:"
	check_match "vhpc image list says it has kvm parts" '"name": *"hellokvm",[^}]*"kvm": *true' "$(vhpc image list --local --json | tr -d '\n')"
else
	skip "kvm parts from a base: no kernel package in $VHPC_KERNEL_CACHE (make kernels)"
fi

# -- a squashfs import: one file, mounted once for the jobs that use it
vhpc image import "oci:$T/oci:hello" --name hellosq --format squashfs --no-kvm >"$T/imp6" 2>&1
check_eq "an import as squashfs" 0 "$?"
sq=$VHPC_STATE_DIR/images/$(id_of hellosq)
at_exit "umount '$sq/.mnt' 2>/dev/null"
check "is one squashfs file" sh -c "test -f '$sq/rootfs.squashfs' && ! test -e '$sq/rootfs' && [ \$(awk '\$1 == \"f\"' '$sq/manifest' | wc -l) = 1 ]"
diag "image size: tree $(du -sb "$r" | cut -f1) bytes, squashfs $(stat -c %s "$sq/rootfs.squashfs") bytes"
for i in 1 2; do
	vhpc run --image hellosq -N 2 -n 2 --chdir /tmp -- /opt/app/hello >"$T/sq$i.out" 2>"$T/sq$i.err"
	check_eq "job $i of the squashfs image runs" 2 "$(grep -c '^hello from rank' "$T/sq$i.out")"
	check_eq "... and it is mounted once" 1 "$(grep -c " $sq/.mnt " /proc/self/mountinfo)"
done
check_match "read-only" ' ro[, ]' "$(grep " $sq/.mnt " /proc/self/mountinfo)"
done_testing
