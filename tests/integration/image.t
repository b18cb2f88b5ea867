#!/usr/bin/env bash
# timeout: 180
# The default image: content-addressed (same sha256 from two builds), holds
# the MPI runtime and vhpc's guest programs, and tampering is detected.
. "$(dirname "$0")/common.sh"
for p in vhpc vhpc-guestd vhpc-rsh vhpc-mpibench; do
	[ -x "$BIN/$p" ] || skip_all "$p is not built"
done
export VHPC_STATE_DIR=$T/state

vhpc image build "$VHPC_TOP/configs/images/default.yaml" >"$T/b1" 2>&1
check_eq "the default image builds" 0 "$?"
id1=$(vhpc image list --json | sed -n 's/.*"id": *"\([0-9a-f]\{64\}\)".*/\1/p' | head -1)
vhpc image build --force "$VHPC_TOP/configs/images/default.yaml" >"$T/b2" 2>&1
id2=$(vhpc image list --json | sed -n 's/.*"id": *"\([0-9a-f]\{64\}\)".*/\1/p' | head -1)
check "its id is a sha256" test ${#id1} = 64
check_eq "a second build has the same id" "$id1" "$id2"
check_eq "one image is stored, not two" 1 "$(vhpc image list --json | grep -c '"id"')"
root=$VHPC_STATE_DIR/images/$id1/rootfs
for f in usr/bin/mpirun usr/bin/orted usr/local/bin/vhpc-guestd usr/local/bin/vhpc-rsh \
	usr/local/bin/vhpc-mpibench bin/sh usr/share/openmpi/help-btl-vader.txt; do
	check "the image has /$f" test -e "$root/$f"
done
check "libmpi and its libraries are there" sh -c "ls '$root'/usr/lib/x86_64-linux-gnu/libmpi.so.40* >/dev/null"
check "mpirun runs from the image" chroot "$root" /usr/bin/mpirun --version
check "vhpc-mpibench's libraries resolve in the image" sh -c "chroot '$root' /usr/local/bin/vhpc-mpibench --help >/dev/null 2>&1; test \$? -le 2"
check "verify passes on the stored image" vhpc image verify default
chmod u+w "$root/usr/local/bin/vhpc-rsh"
echo tampered >>"$root/usr/local/bin/vhpc-rsh"
vhpc image verify default >"$T/v" 2>&1
check_eq "verify fails after a file changed" 1 "$?"
check_match "and says so" "was modified" "$(cat "$T/v")"
done_testing
