#!/usr/bin/env bash
# timeout: 240
# A container job runs as its user (issue 14): what runs in the guests is
# that uid on the host, with no capability, no new privileges and the
# seccomp allowlist, in a user namespace whose root is the user; the files
# the guests use belong to the user; what needs root or a way out fails.
# The user is made here and removed at the end.
. "$(dirname "$0")/common.sh"
need_root
[ -x "$BIN/vhpc" ] && [ -x "$BIN/vhpc-guestd" ] || skip_all "vhpc is not built"
command -v useradd >/dev/null || skip_all "useradd is not installed (passwd)"

U=vhpcu$$
useradd -M -U -s /usr/sbin/nologin "$U" || { fail "useradd $U"; done_testing; exit 1; }
at_exit_said "remove_user '$U'"
uid=$(id -u "$U") gid=$(id -g "$U")
diag "test user $U: uid $uid gid $gid"
# A second user with a job of its own, running beside the first one's.
U2=vhpcv$$
useradd -M -U -s /usr/sbin/nologin "$U2" || { fail "useradd $U2"; done_testing; exit 1; }
at_exit_said "remove_user '$U2'"
vhpc run --user "$U2" -N 2 -n 2 --oversubscribe --timeout 120 -- sleep 100 >"$T/b.out" 2>"$T/b.err" &
bpid=$!
at_exit "kill -INT $bpid 2>/dev/null; wait $bpid 2>/dev/null"
for _ in $(seq 300); do grep -q 'ready in' "$T/b.err" && break; sleep 0.2; done
check "the second user's job starts" grep -q 'ready in' "$T/b.err"
bjob=$(job_id_of "$T/b.err")

# A root-only file of the host that the guests see (their /sys is the
# host's, read-only); reading it has no side effect.
secret=$(find /sys/kernel/mm/damon /sys/kernel/slab -maxdepth 3 -type f -perm 0400 -user root 2>/dev/null | head -1)
[ -n "$secret" ] || secret=$(find /sys/kernel/mm/damon -maxdepth 3 -type f -perm 0600 -user root 2>/dev/null | head -1)
diag "root-only host file: ${secret:-none found}"

# Every try prints NAME=yes when the guest managed, NAME=no when it was refused.
try='t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=yes"; else echo "$n=no"; fi; }'
vhpc run --user "$U" -N 2 -n 2 --oversubscribe --timeout 180 -- sh -c "$try"'
	[ $OMPI_COMM_WORLD_RANK = 0 ] || { sleep 8; exit 0; }
	echo "ID=$(id -u)"
	echo "MAP=$(cat /proc/self/uid_map | tr -s " " | sed "s/^ //")"
	grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp):" /proc/self/status | tr -d "\t" | sed "s/:/=/"
	t SECRET cat "'"${secret:-/nonexistent}"'"
	t MOUNT mount -t tmpfs t /mnt
	t MKNOD mknod /tmp/mem c 1 1
	t SYSCTL sh -c "echo 1 >/proc/sys/net/ipv4/ip_forward"
	t SYSFS sh -c "echo 1 >/sys/kernel/mm/transparent_hugepage/khugepaged/defrag"
	t UNSHARE unshare -U true
	t INSMOD insmod /nonexistent.ko
	t CHOWN chown 1:1 /tmp
	touch /dev/shm/ok && echo TMPFS=yes
	sleep 8
' >"$T/out" 2>"$T/err" &
pid=$!
at_exit "kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null"
for _ in $(seq 300); do grep -q 'ready in' "$T/err" && break; sleep 0.2; done
check "the job's guests start" grep -q 'ready in' "$T/err"
job=$(job_id_of "$T/err")
sleep 1
# The host's view while it runs: every process in the job's cgroups.
host_uids=$(for f in $(grep -l ":/vhpc/$job/" /proc/[0-9]*/cgroup 2>/dev/null); do
	awk '/^Uid:/ {print $2, $3, $4, $5}' "${f%/cgroup}/status" 2>/dev/null
done | sort -u)
diag "uids of the job's processes on the host: $(echo "$host_uids" | tr '\n' ';')"
check "the job has processes on the host" test -n "$host_uids"
check_eq "every one of them is the user's uid on the host (real, effective, saved, fs)" "$uid $uid $uid $uid" "$host_uids"
host_caps=$(for f in $(grep -l ":/vhpc/$job/" /proc/[0-9]*/cgroup 2>/dev/null); do
	awk '/^CapEff:/ {print $2}' "${f%/cgroup}/status" 2>/dev/null
done | sort -u)
check_eq "and holds no capability" 0000000000000000 "$host_caps"
region=$VHPC_RUN_DIR/jobs/$job/vmshm/region
check_eq "the job's vmshm region belongs to the user" "$uid" "$(stat -c %u "$region" 2>/dev/null)"
regfs=$(awk -v d="$VHPC_RUN_DIR/jobs/$job/vmshm" '$2 == d && $3 == "tmpfs" {print $4}' /proc/mounts)
check_match "it is alone in a tmpfs with huge pages, bound to the guests' NUMA node ($regfs)" \
	'(^|,)huge=always(,.*)?,mpol=bind:[0-9]' "$regfs"
check_match "which holds at most the region rounded up to a power of two" '(^|,)size=8192k(,|$)' "$regfs"
check_eq "the job key belongs to the user" "$uid" "$(stat -c %u "$VHPC_RUN_DIR/jobs/$job/shared/job.key" 2>/dev/null)"
check "another user cannot enter the job's dir" sh -c "! setpriv --reuid=65534 --regid=65534 --clear-groups ls '$VHPC_RUN_DIR/jobs/$job' >/dev/null 2>&1"
# What the first user could do to the second's job from a shell on the
# host: nothing.
u_denied() { ! setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@" >/dev/null 2>&1; }
bproc=$(grep -l ":/vhpc/$bjob/" /proc/[0-9]*/cgroup 2>/dev/null | head -1 | cut -d/ -f3)
check "the second job has a process on the host" test -n "$bproc"
check "the first user cannot signal it" u_denied kill -0 $bproc
check "nor read its memory" u_denied head -c 1 /proc/$bproc/mem
check "nor open its vmshm region" u_denied head -c 1 "$VHPC_RUN_DIR/jobs/$bjob/vmshm/region"
check "nor enter its job dir" u_denied ls "$VHPC_RUN_DIR/jobs/$bjob"
check "the region exists and is the second user's" test "$(stat -c %u "$VHPC_RUN_DIR/jobs/$bjob/vmshm/region" 2>/dev/null)" = "$(id -u "$U2")"
kill -INT $bpid; wait $bpid
check_eq "the second job, interrupted, exits 130" 130 "$?"
check_eq "nothing is left of it" "" "$(job_leftovers "$bjob")"
wait $pid
check_eq "the job ran to the end" 0 "$?"
o=$T/out
check "inside, the user is the guest's root" grep -qx 'ID=0' "$o"
check "mapped from the user's uid and nothing else" grep -qx "MAP=0 $uid 1" "$o"
check "no effective capability" grep -qx 'CapEff=0000000000000000' "$o"
check "an empty bounding set" grep -qx 'CapBnd=0000000000000000' "$o"
check "no new privileges (setuid binaries give nothing)" grep -qx 'NoNewPrivs=1' "$o"
check "a seccomp filter" grep -qx 'Seccomp=2' "$o"
if [ -n "$secret" ]; then
	check "cannot read a root-only host file ($secret)" grep -qx 'SECRET=no' "$o"
	check "which root on the host can" cat "$secret"
else
	skip "cannot read a root-only host file: this kernel has no root-only file under /sys/kernel/mm/damon or /sys/kernel/slab"
fi
check "cannot mount" grep -qx 'MOUNT=no' "$o"
check "cannot create devices" grep -qx 'MKNOD=no' "$o"
check "cannot write /proc/sys" grep -qx 'SYSCTL=no' "$o"
check "cannot write /sys" grep -qx 'SYSFS=no' "$o"
check "cannot make namespaces (unshare)" grep -qx 'UNSHARE=no' "$o"
check "cannot load modules" grep -qx 'INSMOD=no' "$o"
check "cannot chown" grep -qx 'CHOWN=no' "$o"
check "but writes its own tmpfs" grep -qx 'TMPFS=yes' "$o"
[ -s "$o" ] || diag "$(tail -20 "$T/err")"
check_eq "nothing of the job is left" "" "$(job_leftovers "$job")"

vhpc run --user nosuchuser$$ -- true >/dev/null 2>"$T/e2"
check_eq "--user with an unknown user: vhpc fails (125) before making anything" 125 "$?"
check "that names the user" grep -q "nosuchuser$$: no such user" "$T/e2"
setpriv --reuid="$uid" --regid="$gid" --clear-groups "$BIN/vhpc" run --user root -- true >/dev/null 2>"$T/e3"
check "--user from a non-root caller is refused by name" grep -q -- "--user is root's" "$T/e3"
done_testing
