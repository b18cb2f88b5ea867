#!/usr/bin/env bash
# timeout: 300
# The local service (issue 14): an ordinary user's `vhpc run` on one machine.
# Without it the error names the admin step; `vhpc service start` (root
# only) brings up vhpc-ctld and a vhpcd on loopback; the user's
# `vhpc run -N 2 -n 4 -- vhpc-mpibench PingPong` then prints its table and
# the guests ran as that user (uid map, no capability, seccomp); a second
# user cannot cancel the first one's job; `vhpc service stop` leaves nothing.
# The user, munged and the service folder are this test's own.
. "$(dirname "$0")/common.sh"
need_root
command -v useradd >/dev/null || skip_all "useradd is not installed (passwd)"
command -v munged >/dev/null || skip_all "munged is not installed"

service_setup

U=vhpcs$$ U2=vhpct$$
for u in "$U" "$U2"; do
	useradd -M -U -s /usr/sbin/nologin "$u" || { fail "useradd $u"; done_testing; exit 1; }
	at_exit_said "remove_user '$u'"
done
uid=$(id -u "$U")
as() { local u=$1; shift; setpriv --reuid "$(id -u "$u")" --regid "$(id -g "$u")" --clear-groups env VHPC_SERVICE_DIR="$VHPC_SERVICE_DIR" VHPC_MUNGE_SOCKET="$VHPC_MUNGE_SOCKET" VHPC_CONFIG_DIR="${VHPC_CONFIG_DIR:-}" "$BIN/vhpc" "$@"; }
before=$(resource_counts)

as "$U" run -N 1 -- true >"$T/no.out" 2>"$T/no.err"
check_eq "without the service, a user's vhpc run fails" 125 "$?"
check_match "... saying which admin step is missing" "needs the local vhpc service.*vhpc service start" "$(cat "$T/no.err")"
as "$U" service start >/dev/null 2>"$T/u.err"
check_eq "an ordinary user cannot start the service" 2 "$?"
check_match "... told it needs root" "needs root" "$(cat "$T/u.err")"
check_eq "vhpc service start --port 80: usage error" 2 "$(vhpc service start --port 80 >/dev/null 2>&1; echo $?)"

vhpc service start --port "$PORT" >"$T/start.out" 2>"$T/start.err"
rc=$?
check_eq "root starts the service" 0 "$rc"
[ "$rc" = 0 ] || diag "port $PORT; vhpc service start said:" "$(cat "$T/start.err")"
at_exit "vhpc service stop"
diag "$(cat "$T/start.out" "$T/start.err")"
check_match "it says where it runs" "running: vhpc-ctld on 127.0.0.1:$PORT" "$(cat "$T/start.out")"
check_eq "a second start is refused" 2 "$(vhpc service start --port "$PORT" >/dev/null 2>&1; echo $?)"
check "vhpc service status: running" bash -c "vhpc service status | grep -q 'running: vhpc-ctld pid'"

t0=$(date +%s.%N)
as "$U" run -N 2 -n 4 --timeout 120 -- vhpc-mpibench PingPong >"$T/pp.out" 2>"$T/pp.err"
rc=$?
check_eq "the user's vhpc run -N 2 -n 4 -- vhpc-mpibench PingPong exits 0" 0 "$rc"
[ $rc = 0 ] || diag "$(tail -n 20 "$T/pp.err")"
diag "the user's job through the service: $(echo "$(date +%s.%N) - $t0" | bc) s"
check "its IMB table parses (PingPong takes 2 of the 4 ranks)" vhpc-imbcheck -expect PingPong@2 "$T/pp.out"
check_match "it went through the service's vhpc-ctld" "submitted to vhpc-ctld at 127.0.0.1:$PORT" "$(cat "$T/pp.err")"

as "$U" run -N 2 -n 2 --oversubscribe --timeout 60 -- sh -c \
	'[ $OMPI_COMM_WORLD_RANK = 0 ] || exit 0; echo "MAP=$(tr -s " " <"/proc/self/uid_map" | sed "s/^ //")"; grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status | tr -d "\t"' \
	>"$T/id.out" 2>"$T/id.err"
check_eq "the user's guests: root inside is the user outside" "MAP=0 $uid 1" "$(grep '^MAP=' "$T/id.out")"
check_eq "... with no capability, no_new_privs and seccomp" "CapEff:0000000000000000
NoNewPrivs:1
Seccomp:2" "$(grep -E '^(CapEff|NoNewPrivs|Seccomp):' "$T/id.out")"
check_eq "the service's queue shows the user's jobs under their name" 2 \
	"$(vhpc queue --all 2>/dev/null | awk -v u="$U" '$2 == u && $4 == "COMPLETED"' | wc -l)"

# Two users' jobs side by side through vhpc-ctld: what the first user's
# guests and commands reach of the second's.
# One guest on one core, so that the first user's job fits beside it on a
# 2-core machine: it runs until its owner cancels it.  (Two jobs' guests
# across nodes, each reaching its own and not the other's: cluster/isolation.t.)
as "$U2" run -N 1 -n 1 --timeout 120 -- sh -c \
	'sed -n "s/^\\([0-9.]*\\) g0\$/B=\\1 g0/p" /etc/hosts; sleep 110' \
	>"$T/b.out" 2>"$T/b.err" &
bpid=$!
at_exit "kill $bpid 2>/dev/null"
for _ in $(seq 300); do grep -q '^B=' "$T/b.out" && break; sleep 0.1; done
baddr=$(sed -n 's/^B=\([0-9.]*\) .*/\1/p' "$T/b.out" | head -n 1)
bj=$(sed -n 's/^vhpc: job \([0-9]*\) submitted.*/\1/p' "$T/b.err")
check "the second user's job runs (its guest g0 is $baddr)" test -n "$baddr"
# A root-only file of the host that the guests see (their /sys is the
# host's, read-only); reading it has no side effect.
secret=$(find /sys/kernel/mm/damon /sys/kernel/slab -maxdepth 3 -type f -perm 0400 -user root 2>/dev/null | head -1)
as "$U" run -N 1 -n 1 --timeout 60 -- sh -c \
	'cat '"${secret:-/nonexistent}"' >/dev/null 2>&1 && echo SECRET=yes || echo SECRET=no
	 own=$(sed -n "s/^\\([0-9.]*\\) g0\$/\\1/p" /etc/hosts)
	 ping -c 1 -W 2 "$own" >/dev/null 2>&1 && echo OWN=yes || echo OWN=no
	 ping -c 2 -W 2 '"$baddr"' >/dev/null 2>&1 && echo OTHER=yes || echo OTHER=no
	 ps -e -o user= | sort -u | tr "\n" " " | sed "s/^/PS=/"; echo
	 echo "SUID=$(find / -xdev -type f -perm /6000 2>/dev/null | wc -l) FILES=$(find /usr/bin -type f 2>/dev/null | wc -l)"
	 mount -t tmpfs t /mnt >/dev/null 2>&1 && echo MOUNT=yes || echo MOUNT=no
	 (echo 1 >/proc/sys/net/ipv4/ip_forward) 2>/dev/null && echo SYSCTL=yes || echo SYSCTL=no' >"$T/a.out" 2>"$T/a.err"
check "the first user's job ran while the second's still ran" kill -0 "$bpid"
check_eq "the first user's job reaches its own guest's address" "OWN=yes" "$(grep '^OWN=' "$T/a.out")"
check_eq "... but not the second user's guest $baddr (another job's network)" "OTHER=no" "$(grep '^OTHER=' "$T/a.out")"
if [ -n "$secret" ]; then
	check_eq "... cannot read a root-only host file ($secret)" "SECRET=no" "$(grep '^SECRET=' "$T/a.out")"
else
	skip "cannot read a root-only host file: this kernel has none under /sys/kernel/mm/damon or /sys/kernel/slab"
fi
check_eq "... and sees only its own processes (as its root)" "PS=root " "$(grep '^PS=' "$T/a.out")"
check_match "... finds no setuid or setgid file among its image's files (the image builder strips those bits)" \
	"^SUID=0 FILES=[1-9][0-9]+$" "$(grep '^SUID=' "$T/a.out")"
check_eq "... cannot mount nor write /proc/sys through vhpc-ctld either" "MOUNT=no SYSCTL=no" \
	"$(grep -E '^(MOUNT|SYSCTL)=' "$T/a.out" | tr '\n' ' ' | sed 's/ $//')"
as "$U" output "$bj" >"$T/o2.out" 2>"$T/o2.err"
check "the first user cannot read the second's output (spool)" test $? -ne 0 -a ! -s "$T/o2.out"
diag "$(head -c 300 "$T/o2.err")"
as "$U2" output "$bj" >"$T/o3.out" 2>/dev/null
check "which its owner can" grep -q '^B=' "$T/o3.out"
as "$U2" cancel "$bj" >/dev/null 2>"$T/c1.err"
check "its owner cancels it" test $? -eq 0
wait $bpid
for _ in $(seq 100); do vhpc queue --all 2>/dev/null | grep -qE "^ *$bj .*CANCELLED" && break; sleep 0.1; done
check_match "... and it ends CANCELLED" "CANCELLED" "$(vhpc queue --all 2>/dev/null | grep -E "^ *$bj ")"

as "$U" run -N 1 --timeout 60 -- sleep 50 >"$T/long.out" 2>"$T/long.err" &
lpid=$!
at_exit "kill $lpid 2>/dev/null"
for _ in $(seq 100); do grep -q 'submitted' "$T/long.err" && break; sleep 0.1; done
lj=$(sed -n 's/^vhpc: job \([0-9]*\) submitted.*/\1/p' "$T/long.err")
as "$U2" cancel "$lj" >/dev/null 2>"$T/c2.err"
check "another user cannot cancel it" test $? -ne 0
# The vhpc process itself: bash leaves SIGINT ignored in what it starts in the background.
kill -INT "$(pgrep -u "$U" -f 'vhpc run -N 1 --timeout 60 -- sleep 50' | head -n 1)"
wait $lpid
check_eq "Ctrl-C of the user's vhpc run cancels the job" 130 "$?"
for _ in $(seq 100); do vhpc queue --all 2>/dev/null | grep -qE "^ *$lj .*CANCELLED" && break; sleep 0.1; done
check_match "... which ends CANCELLED" "CANCELLED" "$(vhpc queue --all 2>/dev/null | grep -E "^ *$lj ")"

vhpc service stop >"$T/stop.out" 2>&1
check_eq "vhpc service stop" "vhpc service: stopped" "$(cat "$T/stop.out")"
check_eq "no daemon of the service is left" "" "$(pgrep -af "vhpc-ctld --listen 127.0.0.1:$PORT|vhpcd --listen 127.0.0.1:$((PORT + 1))")"
check "its folder is gone" test ! -e "$VHPC_SERVICE_DIR"
check_counts "nothing of the jobs is left (netns, links, cgroups, mounts, shm, processes)" "$before"
as "$U" run -N 1 -- true >/dev/null 2>"$T/after.err"
check_match "after stop, the user's vhpc run names the admin step again" "vhpc service start" "$(cat "$T/after.err")"
done_testing
