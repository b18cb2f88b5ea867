#!/usr/bin/env bash
# timeout: 300
# Users run their own programs on their own files (issue 15), container
# guests through the local service (vhpc-ctld and vhpcd): a user with a
# home compiles an MPI hello world in a folder of their own and runs
# `vhpc run -N 2 -n 4 -- ./hello` from there; 4 ranks in 2 guests each
# write a file in that folder, owned by the user.  The job runs in the
# submission folder with $HOME the user's home, -x passes variables (the
# image's folders first in PATH), --bind adds paths (ro is read-only),
# site paths come from the cluster file, and bad or forbidden binds are
# refused by name, before any guest starts; a program that is not there is
# named (exit 127).  The user, munged and the
# service are the test's own.
. "$(dirname "$0")/common.sh"
need_root
command -v useradd >/dev/null || skip_all "useradd is not installed (passwd)"
command -v munged >/dev/null || skip_all "munged is not installed"
command -v mpicc >/dev/null || skip_all "mpicc is not installed (libopenmpi-dev)"

service_setup

# The user's program, compiled by the user in a folder of their own.
hello_user vhpcb$$
mkdir -p "$T/site/apps" "$T/other"
# as DIR ARGS: the user's vhpc, started from DIR.
as() {
	local d=$1; shift
	(cd "$d" && setpriv --reuid "$uid" --regid "$gid" --init-groups env -i PATH="$BIN:/usr/bin:/bin" \
		HOME="$H" FOO=from-the-shell VHPC_SERVICE_DIR="$VHPC_SERVICE_DIR" VHPC_MUNGE_SOCKET="$VHPC_MUNGE_SOCKET" \
		VHPC_CONFIG_DIR="${VHPC_CONFIG_DIR:-}" "$BIN/vhpc" "$@")
}

# The site's paths: an app folder, read-only in the guests.
echo "site tool" >"$T/site/apps/README"
cat >"$T/cluster.yaml" <<EOF
name: binds-test
job_network:
  pool: 10.213.0.0/16
  prefix: 24
binds: [$T/site/apps:/opt/apps:ro]
bind_allow: [$T/home, $T/other, /tmp]
EOF
export VHPC_CLUSTER=$T/cluster.yaml

vhpc service start --port "$PORT" >"$T/start.out" 2>"$T/start.err"
rc=$?
check_eq "root starts the service (with the test's cluster file)" 0 "$rc"
[ "$rc" = 0 ] || diag "port $PORT; vhpc service start said:" "$(cat "$T/start.err")"
at_exit "vhpc service stop"
before=$(grep -c -e "$VHPC_SERVICE_DIR" -e vhpc-rootfs /proc/self/mountinfo)

t0=$(date +%s%N)
as "$W" run -N 2 -n 4 --timeout 120 -- ./hello >"$T/h.out" 2>"$T/h.err"
rc=$?
diag "vhpc run -N 2 -n 4 -- ./hello through the service: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check_eq "vhpc run -N 2 -n 4 -- ./hello from the user's folder exits 0" 0 "$rc"
[ $rc = 0 ] || diag "$(tail -n 20 "$T/h.err")"
check_eq "four ranks say hello" 4 "$(grep -c '^hello from rank [0-3] of 4 on g[01]$' "$T/h.out")"
hello_outputs 4
# A program that is not there: said by guest 0 before mpirun starts, also
# where vhpcd starts mpirun (in /tmp, not the job's folder).
as "$W" run -N 1 -n 1 --timeout 60 -- ./nothere >"$T/nf.out" 2>"$T/nf.err"
check_eq "through the service, a program not in the user's folder: exit 127" 127 "$?"
check_match "... named, with the folder" "vhpc: \./nothere: not found in $W \(the job's working folder\)" \
	"$(cat "$T/nf.out" "$T/nf.err")"

# The environment and the paths seen from inside.
mkdir -p "$T/other/in" && echo data >"$T/other/in/f" && chown -R "$uid:$gid" "$T/other/in"
as "$W" run -N 1 --timeout 60 -x FOO -x BAR=two -x PATH=/own/bin -x LD_LIBRARY_PATH=/own/lib \
	--bind "$T/other/in:/data:ro" -- sh -c \
	'echo "PWD=$(pwd)"; echo "HOME=$HOME"; echo "ENV=$FOO $BAR"; echo "PATH=$PATH"; echo "LD=$LD_LIBRARY_PATH"
	 echo x >"$HOME/from-guest" && echo HOMEW=yes
	 echo "DATA=$(cat /data/f)"; (echo y >/data/g) 2>/dev/null && echo DATAW=yes || echo DATAW=no
	 echo "APPS=$(cat /opt/apps/README)"; (echo y >/opt/apps/x) 2>/dev/null && echo APPSW=yes || echo APPSW=no
	 grep -E " (/data|/opt/apps|'"$W"') " /proc/mounts | sed "s/^/MNT=/"' >"$T/e.out" 2>"$T/e.err"
check_eq "a job with -x and --bind exits 0" 0 "$?"
check_eq "it runs in the submission folder" "PWD=$W" "$(grep '^PWD=' "$T/e.out")"
check_eq "... with \$HOME the user's home" "HOME=$H" "$(grep '^HOME=' "$T/e.out")"
check_eq "-x FOO passes the shell's value, -x BAR=two the given one" "ENV=from-the-shell two" "$(grep '^ENV=' "$T/e.out")"
check_match "-x PATH: the image's folders first, the user's after" "^PATH=/usr/local/bin:/usr/bin:.*:/own/bin\$" "$(grep '^PATH=' "$T/e.out")"
check_match "-x LD_LIBRARY_PATH: likewise" "^LD=/usr/lib/x86_64-linux-gnu:.*:/own/lib\$" "$(grep '^LD=' "$T/e.out")"
check_eq "the home is writable, and what the guest writes there is the user's" "$uid:$gid" \
	"$(grep -q HOMEW=yes "$T/e.out" && stat -c %u:%g "$H/from-guest")"
check_eq "--bind SRC:/data:ro shows the host's files" "DATA=data" "$(grep '^DATA=' "$T/e.out")"
check_eq "... read-only" "DATAW=no" "$(grep '^DATAW=' "$T/e.out")"
check_eq "the cluster file's site path is there, read-only" "APPS=site tool APPSW=no" \
	"$(grep -E '^APPS(W)?=' "$T/e.out" | tr '\n' ' ' | sed 's/ $//')"
check_match "binds are nosuid and nodev" "^MNT=[^ ]+ /data [^ ]+ ro,nosuid,nodev" "$(grep '^MNT=' "$T/e.out")"
[ -s "$T/e.err" ] && diag "$(tail -n 5 "$T/e.err")"

# A path the user cannot read stays out, even though the agent is root.
mkdir -p "$T/other/secret" && echo s >"$T/other/secret/f" && chmod 700 "$T/other/secret"
as "$W" run -N 1 --timeout 60 --bind "$T/other/secret:/s" -- cat /s/f >"$T/s.out" 2>"$T/s.err"
check_eq "a bind of a folder only root can read fails the job" 125 "$?"
check_match "... saying the user cannot read it" "bind source $T/other/secret: .*(cannot read|Permission denied)" "$(cat "$T/s.err")"
check_eq "... and nothing of it was read" "" "$(cat "$T/s.out")"

# Bad binds, refused by name before anything starts.
bad() {   # NAME REGEX ARGS...
	local name=$1 re=$2; shift 2
	as "$W" run -N 1 --timeout 30 "$@" -- true >"$T/b.out" 2>"$T/b.err"
	local rc=$?
	check "$name: refused (exit $rc)" test "$rc" -ne 0
	check_match "$name: the error says why" "$re" "$(cat "$T/b.err")"
}
bad "a relative source" "not an absolute path" --bind data:/data
bad "a path with .." '"\.\."' --bind "$T/other/../home:/x"
bad "a destination over /usr" "would cover the image's /usr" --bind "$T/other/in:/usr/local/in"
bad "a destination of /etc" "would cover the image's /etc" --bind "$T/other/in:/etc"
bad "a missing source" "bind source $T/other/none: No such file or directory" --bind "$T/other/none:/x"
bad "a source the cluster file does not allow" "allows binds only from below" --bind /var/lib:/x
bad "a mode that is neither ro nor rw" "must be ro or rw" --bind "$T/other/in:/x:rx"
bad "-x of a variable the shell does not have" "NOPE is not set in your environment" -x NOPE

after=$(grep -c -e "$VHPC_SERVICE_DIR" -e vhpc-rootfs /proc/self/mountinfo)
check_eq "no job's rootfs overlay or bind is left mounted" "$before" "$after"
vhpc service stop >/dev/null 2>&1
check_eq "no overlay is left after the service stops" 0 "$(grep -c vhpc-rootfs /proc/self/mountinfo)"
done_testing
