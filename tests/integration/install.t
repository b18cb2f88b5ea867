#!/usr/bin/env bash
# timeout: 300
# An installed vhpc works like the build tree (issue 35, item 7):
#  - `make install DESTDIR=$T/root PREFIX=/usr/local` puts in everything the
#    installed commands look for (vhpc-sysexec, the vmshm BTL, the kvm
#    initramfs init, the configs);
#  - then, in a mount namespace of the test's own where that tree *is*
#    /usr/local and /etc/vhpc, and the checkout is covered by an empty,
#    read-only tmpfs (so nothing can resolve into the build tree, by any
#    path), the installed vhpc imports an OCI image, runs a two-guest MPI
#    job of it, builds the default image from /etc/vhpc and runs
#    vhpc-mpibench in it, never reading /usr/local/bin/../../configs (a
#    build tree's programs read the checkout's configs/ there);
#  - a second install keeps an admin's changed config;
#  - nothing of the jobs is left behind, and nothing was written to the
#    host's /usr/local or /etc.
. "$(dirname "$0")/common.sh"
need_root
for p in vhpc vhpc-guestd vhpc-rsh vhpc-sysexec vhpc-mpibench; do
	[ -x "$BIN/$p" ] || skip_all "$p is not built"
done
for t in skopeo umoci mpicc unshare runc make; do
	command -v $t >/dev/null || skip_all "$t is not installed (make installs it)"
done
export VHPC_STATE_DIR=$T/state
. "$VHPC_TOP/tests/images/oci-lib.sh"

# The OCI layout is made with the build tree, before it is hidden: the
# import is what is tested, not how its input was made.
root=$(oci_hello_rootfs) || { fail "a rootfs of Open MPI and hello"; done_testing; exit 1; }
check "an OCI layout of it (umoci)" oci_layout "$T/oci" hello "$root" /usr/local/bin:/usr/bin:/bin
rm -rf "$VHPC_STATE_DIR"

D=$T/root
# What the host has of vhpc in the folders an install writes, to compare
# after: the run must not have written through to them.
host_vhpc() { ls -ld --time-style=+%s.%N /etc/vhpc /usr/local/lib/vhpc /usr/local/share/vhpc /usr/local/bin/vhpc* 2>/dev/null; }
before=$(host_vhpc)
make -C "$VHPC_TOP" --no-print-directory -s install B="$B" DESTDIR="$D" PREFIX=/usr/local >"$T/install.log" 2>&1
check_eq "make install DESTDIR=$D PREFIX=/usr/local" 0 "$?"
[ -s "$T/install.log" ] && diag "$(tail -5 "$T/install.log")"
for f in bin/vhpc bin/vhpcd bin/vhpc-ctld bin/vhpc-sysexec bin/vhpc-guestd bin/vhpc-rsh bin/vhpc-mpibench bin/vhpc-hv \
	share/vhpc/initramfs-init lib/vhpc/openmpi/mca_btl_vmshm.so; do
	check "it installs /usr/local/$f" test -f "$D/usr/local/$f"
done
check "... and /etc/vhpc's configs" test -f "$D/etc/vhpc/cluster.yaml" -a -f "$D/etc/vhpc/images/default.yaml"
# A /usr/local/lib/openmpi would be the component folder of an Open MPI
# built from source into /usr/local, which would then load the BTL.
check "nothing in /usr/local/lib/openmpi" test ! -e "$D/usr/local/lib/openmpi"
check_eq "no test helper is installed" "" "$(ls "$D/usr/local/bin" | grep -e vfio-job -e gprobe -e wireprobe)"
if [ -f "$VHPC_TOP/$B/lib/slurm/spank_vhpc.so" ]; then
	check "the SPANK plugin where slurm/README.md says" test -f "$D/usr/local/lib/vhpc/spank_vhpc.so"
fi

# /usr/local/bin/../../configs, which a build tree's programs would read
# as the checkout's configs/: broken, so a job fails if it is read.
mkdir -p "$T/usr/configs/images"
echo 'this: [is not yaml' | tee "$T/usr/configs/cluster.yaml" >"$T/usr/configs/images/default.yaml"

# The installed tree alone.  /etc gets the installed /etc/vhpc through a
# read-only overlay (the host has no /etc/vhpc to bind over, and making
# one would outlive the test); /usr/local is the installed one.
cat >"$T/alone.sh" <<'EOF'
set -e
mount -t tmpfs -o ro,size=64k,mode=0755 vhpc-hidden "$TOP"
mount -t overlay -o ro,lowerdir="$T/usr:/usr" vhpc-usr /usr
mount --bind "$D/usr/local" /usr/local
mount -t overlay -o ro,lowerdir="$D/etc:/etc" vhpc-etc /etc
set +e
echo "checkout: $(ls -A "$TOP" | wc -l) entries"
echo "vhpc: $(command -v vhpc)"
echo "decoy: $(ls /usr/configs | wc -l)"
vhpc image import "oci:$OCI:hello" --no-kvm >"$T/imp" 2>&1
echo "import: $?"
vhpc run --image hello -N 2 -n 2 --chdir /tmp -- /opt/app/hello >"$T/run.out" 2>"$T/run.err"
echo "run: $?"
vhpc run -N 2 -n 2 --chdir /tmp -- vhpc-mpibench -msglog 0:2 -iter 50 PingPong >"$T/def.out" 2>"$T/def.err"
echo "default: $?"
EOF
env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TOP="$VHPC_TOP" D="$D" T="$T" OCI="$T/oci" \
	VHPC_STATE_DIR="$VHPC_STATE_DIR" VHPC_RUN_DIR="$VHPC_RUN_DIR" \
	unshare -m --propagation private bash "$T/alone.sh" >"$T/alone" 2>&1
check_eq "the namespace is set up" 0 "$?"
said() { sed -n "s/^$1: //p" "$T/alone"; }
check_eq "the checkout cannot be seen there" "0 entries" "$(said checkout)"
check_eq "a broken /usr/configs is there" 2 "$(said decoy)"
check_eq "vhpc there is the installed one" /usr/local/bin/vhpc "$(said vhpc)"
check_eq "the installed vhpc imports oci:DIR:TAG" 0 "$(said import)"
[ "$(said import)" = 0 ] || diag "$(tail -3 "$T/imp")"
r=$VHPC_STATE_DIR/images/$(sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/hello.json")/rootfs
check "... with the installed vhpc-sysexec" cmp "$D/usr/local/bin/vhpc-sysexec" "$r/usr/local/bin/vhpc-guestd"
check "... and the installed vmshm BTL" cmp "$D/usr/local/lib/vhpc/openmpi/mca_btl_vmshm.so" \
	"$r/usr/local/lib/vhpc/openmpi/mca_btl_vmshm.so"
check_eq "it runs a job of the image in two guests" 0 "$(said run)"
check_eq "... whose two ranks say hello" "hello from rank 0 of 2 on g0 hello from rank 1 of 2 on g1" \
	"$(sort "$T/run.out" | tr '\n' ' ' | sed 's/ $//')"
[ "$(said run)" = 0 ] || diag "$(tail -5 "$T/run.err")"
check_eq "it builds the default image from /etc/vhpc and runs vhpc-mpibench in it" 0 "$(said default)"
check_match "... which prints PingPong's table" '^ +4 +50 ' "$(cat "$T/def.out")"
[ "$(said default)" = 0 ] || diag "$(tail -5 "$T/def.err")"
for j in $(job_id_of "$T/run.err") $(job_id_of "$T/def.err"); do
	check_eq "job $j left nothing behind" "" "$(job_leftovers "$j")"
done

# A second install keeps what the admin changed in /etc/vhpc.
echo '# the site changed this' >>"$D/etc/vhpc/cluster.yaml"
cp "$D/etc/vhpc/cluster.yaml" "$T/edited.yaml"
make -C "$VHPC_TOP" --no-print-directory -s install B="$B" DESTDIR="$D" PREFIX=/usr/local >"$T/install2.log" 2>&1
check_eq "make install again" 0 "$?"
check "... keeps the admin's /etc/vhpc/cluster.yaml" cmp "$T/edited.yaml" "$D/etc/vhpc/cluster.yaml"
check "... and puts vhpc's beside it" cmp "$VHPC_TOP/configs/cluster.yaml" "$D/etc/vhpc/cluster.yaml.new"
check_match "... saying so" "kept $D/etc/vhpc/cluster.yaml as it is; vhpc's new one is $D/etc/vhpc/cluster.yaml.new" \
	"$(cat "$T/install2.log")"
check_eq "the host's /etc/vhpc and /usr/local are as they were" "$before" "$(host_vhpc)"
grep -q -v -e '^checkout: ' -e '^vhpc: ' -e '^[a-z]*: [0-9]*$' "$T/alone" && diag "$(cat "$T/alone")"
done_testing
