#!/usr/bin/env bash
# timeout: 500
# needs: hardware-virtualization
# Users' own programs in kvm guests (issue 15): a test user compiles an MPI
# hello world on the host in a folder of their own, and `vhpc run --driver
# kvm --user U -N 2 -n 4 -- ./hello` from there runs it in two VMs, which
# reach that folder and the user's home through virtio-fs (one virtiofsd
# per folder and guest, as the user, in a user namespace of its own) and
# write an output file per rank back to the host, owned by the user.  A
# --bind :ro folder is read-only in the guests, even to their root; after
# the job no virtiofsd is left.  Speeds here are nested/TCG.
. "$(dirname "$0")/kvmlib.sh"
KVM_DEFAULT_BINDS=1
kvm_setup kvmb
unset VHPC_KVM_ALLOW_EMULATION
command -v useradd >/dev/null || skip_all "useradd is not installed (passwd)"
command -v mpicc >/dev/null || skip_all "mpicc is not installed (libopenmpi-dev)"
[ -x "${VHPC_VIRTIOFSD:-/usr/lib/qemu/virtiofsd}" ] || skip_all "virtiofsd is not installed (qemu-system-common)"

hello_user vhpck$$
mkdir -p "$T/ro" && echo "read only" >"$T/ro/f"

# One 2-VM job for both (each costs 30-40 s under the lab): the ranks say
# hello, then rank 0 tries the read-only bind and the home.
t0=$(date +%s.%N)
(cd "$W" && vhpc run --driver kvm --user "$U" -N 2 -n 4 --mem 384M --timeout 240 --bind "$T/ro:/data:ro" -- sh -c \
	'./hello || exit; [ "$OMPI_COMM_WORLD_RANK" = 0 ] || exit 0
	 echo "DATA=$(cat /data/f)"; (echo x >/data/g) 2>/dev/null && echo DATAW=yes || echo DATAW=no
	 (mount -o remount,rw /data && echo y >/data/g) 2>/dev/null && echo REMOUNTW=yes || echo REMOUNTW=no
	 echo "HOME=$HOME PWD=$(pwd)"; echo z >"$HOME/from-vm" && echo HOMEW=yes') >"$T/h.out" 2>"$T/h.err"
rc=$?
diag "kvm job with the home, the folder and a read-only folder shared: $(echo "$(date +%s.%N) - $t0" | bc) s (nested/TCG)"
check_eq "vhpc run --driver kvm -N 2 -n 4 --bind DIR:/data:ro -- ./hello from the user's folder exits 0" 0 "$rc"
[ $rc = 0 ] || diag "$(tail -n 30 "$T/h.err")"
check_eq "four ranks say hello" 4 "$(grep -c '^hello from rank [0-3] of 4 on g[01]$' "$T/h.out")"
hello_outputs 4
check_eq "the read-only folder's file is there" "DATA=read only" "$(grep '^DATA=' "$T/h.out")"
check_eq "... and cannot be written" "DATAW=no" "$(grep '^DATAW=' "$T/h.out")"
check_eq "... not even after the guest's root remounts it read-write" "REMOUNTW=no" "$(grep '^REMOUNTW=' "$T/h.out")"
check "... and nothing was written to the host's folder" test ! -e "$T/ro/g"
check_eq "\$HOME and the working directory are the user's" "HOME=$H PWD=$W" "$(grep '^HOME=' "$T/h.out")"
check_eq "what the VM writes in the home is the user's on the host" "$uid:$gid" "$(stat -c %u:%g "$H/from-vm" 2>/dev/null)"
check_eq "no virtiofsd is left" "" "$(pgrep -af "$(basename "${VHPC_VIRTIOFSD:-virtiofsd}").*source=$T")"
done_testing
