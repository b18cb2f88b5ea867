#!/usr/bin/env bash
# timeout: 400
# The attack: a user's bind source is checked as the user, then mounted
# as root.  Between the two the user swaps a folder on the source's path
# for a symlink to a folder only root can reach (tests/security/swap-paths,
# renameat2 RENAME_EXCHANGE every 2 ms, half the time each way) while jobs
# start through the local service, each binding that path and printing
# the file it finds there.  A job may fail (the check met the symlink and
# the user could not read through it) or see the user's own file; it must
# never see root's.  Container guests (runc), as on these machines; the
# kvm driver shares the same checked descriptor (kvm/binds.t in the lab).
. "$(dirname "$0")/../integration/common.sh"
need_root
command -v useradd >/dev/null || skip_all "useradd is not installed (passwd)"
command -v munged >/dev/null || skip_all "munged is not installed"
SWAP=$VHPC_TOP/$B/testbin/swap-paths
[ -x "$SWAP" ] || skip_all "$SWAP is not built"
JOBS=${VHPC_SWAP_JOBS:-24}

service_setup
U=vhpcs$$
mkdir -p "$T/home"
useradd -m -d "$T/home/$U" -U -s /bin/sh "$U" || { fail "useradd $U"; done_testing; exit 1; }
at_exit_said "remove_user '$U'"
uid=$(id -u "$U") gid=$(id -g "$U") H=$T/home/$U

# Root's: a folder the user cannot pass (0700) holding a readable one.
nonce=r$$
mkdir -p "$T/locked/inner/data"
echo "ROOTONLY $nonce" >"$T/locked/inner/data/f"
chmod 755 "$T/locked/inner" "$T/locked/inner/data"
chmod 644 "$T/locked/inner/data/f"
chmod 700 "$T/locked"
# The user's: sw/data/f, and a symlink alt to root's folder.
asu mkdir -p "$H/sw/data" && echo PUBLIC | asu tee "$H/sw/data/f" >/dev/null && asu ln -s "$T/locked/inner" "$H/alt"
check "the user cannot read root's file through the symlink" bash -c "! asu cat '$H/alt/data/f' 2>/dev/null"

cat >"$T/cluster.yaml" <<EOF
name: swap-test
job_network:
  pool: 10.213.0.0/16
  prefix: 24
bind_home: false
bind_workdir: false
EOF
export VHPC_CLUSTER=$T/cluster.yaml
vhpc service start --port "$PORT" >"$T/start.out" 2>"$T/start.err"
rc=$?
check_eq "root starts the service" 0 "$rc"
[ "$rc" = 0 ] || diag "port $PORT; vhpc service start said:" "$(cat "$T/start.err")"
at_exit "vhpc service stop"

as() { (cd "$H" && setpriv --reuid "$uid" --regid "$gid" --init-groups env -i PATH="$BIN:/usr/bin:/bin" HOME="$H" \
	VHPC_SERVICE_DIR="$VHPC_SERVICE_DIR" VHPC_MUNGE_SOCKET="$VHPC_MUNGE_SOCKET" "$BIN/vhpc" "$@"); }
as run -N 1 --timeout 60 --bind "$H/sw/data:/data" -- cat /data/f >"$T/plain.out" 2>"$T/plain.err"
check_eq "without the attack the job sees the user's file" "PUBLIC" "$(cat "$T/plain.out")"

asu "$SWAP" "$H/sw" "$H/alt" 2000 3600 >"$T/swap.out" 2>&1 &
swapper=$!
at_exit "kill $swapper"
public=0 root=0 failed=0
for ((i = 1; i <= JOBS; i++)); do
	as run -N 1 --timeout 60 --bind "$H/sw/data:/data" -- cat /data/f >"$T/j.out" 2>"$T/j.err"
	case $(cat "$T/j.out") in
	PUBLIC) public=$((public + 1)) ;;
	"ROOTONLY $nonce") root=$((root + 1)) ;;
	*) failed=$((failed + 1)); tail -n 1 "$T/j.err" >>"$T/fails" ;;
	esac
done
kill "$swapper"
wait "$swapper" 2>/dev/null
diag "$JOBS jobs under the attack: $public saw the user's file, $root saw root's, $failed failed" \
	"$(sort "$T/fails" 2>/dev/null | uniq -c | sed 's/^ *//' | head -n 5)"
check_eq "no job saw root's file" 0 "$root"
check "jobs did start under the attack (the swap did not just make every start fail)" test "$public" -gt 0
check_eq "a failed start says the user cannot read the path" "" \
	"$(grep -v -e "bind source $H/sw/data: .*\(Permission denied\|cannot read\)" -e "No such file or directory" "$T/fails" 2>/dev/null)"
check_eq "each job's teardown unmounted its binds itself (no sweep by name)" "" \
	"$(grep -h 'removed .* still there by name' "$VHPC_SERVICE_DIR"/*.log 2>/dev/null)"
vhpc service stop >/dev/null 2>&1
check_eq "no job's bind or rootfs is left mounted" 0 "$(grep -c -e "$VHPC_SERVICE_DIR" -e vhpc-rootfs /proc/self/mountinfo)"
done_testing
