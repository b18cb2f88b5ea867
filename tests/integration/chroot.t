#!/usr/bin/env bash
# timeout: 180
# vhpc run in another root, as an admin trying a fresh Debian root made with
# debootstrap would: entered with chroot, the kernel refuses the job's user
# namespace, and vhpc says that a chroot is the reason and what to do
# instead; the same root entered with pivot_root in a mount namespace of its
# own runs the job.  The root is this machine's /usr, /etc and dpkg's
# database (image builds read it) bound read-only, so nothing is installed;
# all of it lives in a mount namespace of the test's own and goes with it.
. "$(dirname "$0")/common.sh"
need_root
[ -x "$BIN/vhpc" ] && [ -x "$BIN/vhpc-guestd" ] || skip_all "vhpc is not built"
command -v unshare >/dev/null && command -v pivot_root >/dev/null || skip_all "needs unshare and pivot_root (util-linux)"

R=$T/root
mkdir -p "$R"/{usr,etc,proc,sys,dev,run,tmp,var/tmp,var/lib/dpkg} "$R$VHPC_TOP"
chmod 1777 "$R/tmp" "$R/var/tmp"
# Debian 12 has merged /usr: /bin, /lib, ... are links into it.
for l in bin sbin lib lib32 lib64 libx32; do
	[ -L "/$l" ] && ln -s "$(readlink "/$l")" "$R/$l"
done
run_dir=/run/vhpc-chroot-t
job=(env -i PATH="$BIN:/usr/sbin:/usr/bin:/sbin:/bin" VHPC_RUN_DIR=$run_dir VHPC_STATE_DIR="$VHPC_STATE_DIR"
	"$BIN/vhpc" run -N 1 --oversubscribe --timeout 60 -- echo ran-in-guest)
unshare -m --propagation private /bin/bash -s -- "$R" "$VHPC_TOP" "${job[@]}" >"$T/out" 2>"$T/err" <<'EOF'
R=$1 top=$2
shift 2
mount --bind -o ro /usr "$R/usr" && mount --bind -o ro /etc "$R/etc" && mount --bind -o ro /var/lib/dpkg "$R/var/lib/dpkg" && mount --bind "$top" "$R$top" &&
	mount -t proc proc "$R/proc" && mount --rbind /sys "$R/sys" && mount --rbind /dev "$R/dev" &&
	mount -t tmpfs tmpfs "$R/run" || { echo "SETUP FAILED"; exit 1; }
echo "== chroot"
chroot "$R" "$@" 2>&1
echo "== chroot exit $?"
mount --rbind "$R" "$R" && cd "$R" && mkdir -p .old && pivot_root . .old && cd / && umount -l /.old ||
	{ echo "PIVOT FAILED"; exit 1; }
echo "== pivot_root"
"$@" 2>&1
echo "== pivot_root exit $?"
EOF
setup_rc=$?
check_eq "the test's own root is set up" 0 "$setup_rc"
[ "$setup_rc" = 0 ] || diag "$(tail -n 5 "$T/out" "$T/err")"
chroot_out=$(sed -n '/^== chroot$/,/^== chroot exit/p' "$T/out")
check_match "in a chroot: vhpc run fails with 125 (vhpc itself failed)" "== chroot exit 125" "$chroot_out"
check_match "and says the kernel refuses a user namespace in a chroot" \
	"vhpc: error: driver container: this process is in a chroot, where the kernel refuses the user namespaces guests need; run vhpc in the machine's own root, or in a container or after pivot_root in a mount namespace of its own" \
	"$chroot_out"
pivot_out=$(sed -n '/^== pivot_root$/,/^== pivot_root exit/p' "$T/out")
check_match "after pivot_root into the same root the job runs" "ran-in-guest" "$pivot_out"
check_match "and exits 0" "== pivot_root exit 0" "$pivot_out"
jobs=$(sed -n 's/^vhpc: job \([0-9a-z]*\):.*/\1/p' "$T/out" | sort -u)
check_eq "the chroot's job was refused before it started; the other ran" 1 "$(echo $jobs | wc -w)"
left=
for j in $jobs; do left+=$(VHPC_RUN_DIR=$run_dir job_leftovers "$j"); done
check_eq "nothing of either job is left (cgroups, processes, shm files)" "" "$left"
done_testing
