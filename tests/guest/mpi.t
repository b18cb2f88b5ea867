#!/usr/bin/env bash
# timeout: 90
# The real thing: two "guests" made of network, UTS, mount and PID
# namespaces joined by a veth pair, each running vhpc-guestd --init as its
# PID 1.  mpirun runs in guest A (started through A's control socket, as the
# node agent does) with plm_rsh_agent=vhpc-rsh; its ranks must run in both
# guests, talk over the TCP BTL, and a failing rank must fail mpirun.  Then
# guestd's init duties: orphans reaped, SIGTERM stops commands, clean exit.
. "$(dirname "$0")/../lib.sh"
need_root
for c in ip unshare mpirun mount; do
	command -v $c >/dev/null || skip_all "needs $c"
done

GD=$BIN/vhpc-guestd
RSH=$BIN/vhpc-rsh
MW=$VHPC_TOP/$B/testbin/mpi-where
for p in "$GD" "$RSH" "$MW" "$VHPC_TOP/$B/testbin/gprobe"; do
	[ -x "$p" ] || { echo "Bail out! $p is not built (make tests)"; exit 1; }
done

# wait_for PID SECONDS: wait for a child, but not forever (124 if it lingers).
wait_for() {
	for _ in $(seq $(($2 * 20))); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
	kill -0 "$1" 2>/dev/null && return 124
	wait "$1"
}

id=vhpct-$$
mark=$$$RANDOM   # in long sleeps, so that no one else's pattern matches them
GA=$id-a GB=$id-b
# 198.18.0.0/15 is reserved for network tests (RFC 2544); these addresses
# exist only inside the two namespaces below.
NET=198.18.0
tmp=$(mktemp -d /tmp/vhpct-mpi-XXXXXX)
at_exit "rm -rf $tmp"
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key"
printf '127.0.0.1 localhost\n%s.1 %s\n%s.2 %s\n' $NET $GA $NET $GB >"$tmp/hosts"
chmod 644 "$tmp/hosts"

at_exit "ip netns del $GA"
at_exit "ip netns del $GB"
at_exit 'for p in $(ip netns pids '$GA' 2>/dev/null) $(ip netns pids '$GB' 2>/dev/null); do kill -9 $p; done; sleep 0.2'
ip netns add $GA && ip netns add $GB &&
ip link add vg$$a netns $GA type veth peer name vg$$b netns $GB &&
ip -n $GA addr add $NET.1/24 dev vg$$a && ip -n $GB addr add $NET.2/24 dev vg$$b &&
ip -n $GA link set lo up && ip -n $GB link set lo up &&
ip -n $GA link set vg$$a up && ip -n $GB link set vg$$b up
check_eq "two namespaces joined by a veth pair" 0 $?

# A guest: its own network, UTS (hostname), mount (/etc/hosts) and PID
# namespaces, vhpc-guestd as PID 1.  unshare stays in front of it and
# kills it if unshare itself dies.
export VHPC_JOB_KEY=$tmp/key
declare -A upid
for n in a b; do
	ns=$id-$n
	ip netns exec $ns unshare --uts --mount --pid --kill-child --mount-proc sh -c \
		"mount --bind $tmp/hosts /etc/hosts && hostname $ns && exec $GD --init --name $n \
		 --key $tmp/key --listen 0.0.0.0:7707 --control $tmp/$n.sock --log $tmp/$n.log \
		 --kill-grace 500" </dev/null >"$tmp/$n.out" 2>&1 &
	upid[$n]=$!
done
for _ in $(seq 100); do
	grep -qs ready "$tmp/a.log" && grep -qs ready "$tmp/b.log" && break
	sleep 0.05
done
ha=$("$RSH" --hello "$tmp/a.sock")
hb=$("$RSH" --hello "$tmp/b.sock")
ino_a=$(stat -L -c %i /run/netns/$GA) ino_b=$(stat -L -c %i /run/netns/$GB)
check_match "guest A's guestd is PID 1 in its namespaces" "\"hostname\":\"$GA\",.*\"pid\":1,\"init\":true,.*\"netns\":$ino_a," "$ha"
check_match "guest B's guestd is PID 1 in its namespaces" "\"hostname\":\"$GB\",.*\"pid\":1,\"init\":true,.*\"netns\":$ino_b," "$hb"
check_match "guest B reports its job address" "\"addr\":\"$NET.2/24\"" "$hb"
check_eq "guest A reaches guest B by name through vhpc-rsh" "$GB" "$("$RSH" "$tmp/a.sock" "$RSH" $GB hostname)"

# Inside a guest, where no resolver is reachable, so nothing leaves the machine.
out=$("$RSH" "$tmp/a.sock" "$RSH no-such-host.invalid true" 2>&1); rc=$?
check_eq "unknown host: vhpc-rsh exits 255" 255 $rc
check_match "... naming the host" "cannot resolve guest 'no-such-host.invalid'" "$out"

MPIRUN="mpirun --allow-run-as-root -np 2 --host $GA:1,$GB:1 --mca plm_rsh_agent $RSH \
--mca plm_rsh_no_tree_spawn 1 --mca btl self,tcp --mca btl_tcp_if_include $NET.0/24 \
--mca oob_tcp_if_include $NET.0/24"

t0=$(date +%s%N)
out=$("$RSH" "$tmp/a.sock" "$MPIRUN $MW" 2>"$tmp/mpi.err"); rc=$?
t1=$(date +%s%N)
diag "mpirun -np 2 across the two guests: $(( (t1 - t0) / 1000000 )) ms"
check_eq "mpirun across two guests succeeds" 0 $rc
[ $rc = 0 ] || diag "$(cat "$tmp/mpi.err")"
check_match "rank 0 ran in guest A (hostname, netns inode)" "^rank 0 of 2 host $GA netns $ino_a " "$out"
check_match "rank 1 ran in guest B (hostname, netns inode)" "rank 1 of 2 host $GB netns $ino_b " "$out"
check_match "guest B's guestd started orted for mpirun" "$NET.1:[0-9]+: exec pid [0-9]+: /bin/sh" "$(cat "$tmp/b.log")"

out=$("$RSH" "$tmp/a.sock" "$MPIRUN $MW fail 1 7" 2>&1); rc=$?
check_eq "a rank in guest B exiting 7 makes mpirun exit 7" 7 $rc
check_match "... and mpirun names it" "Exit code: +7" "$out"

# Nothing of either job is left: each namespace holds unshare and guestd.
sleep 0.3
for n in a b; do
	ns=$id-$n
	gd=$(pgrep -P ${upid[$n]})
	left=$(ip netns pids $ns | grep -vxE "${upid[$n]}|$gd" | tr '\n' ' ')
	check_eq "guest $n: no process left besides guestd" "" "$left"
done

# -- init duties, in guest B.  An orphan that left the command's session
#    outlives it; guestd, as PID 1, must reap it.
gdb=$(pgrep -P ${upid[b]})
"$RSH" "$tmp/b.sock" "setsid sleep 0.3 </dev/null >/dev/null 2>&1 & echo started" >/dev/null
sleep 0.8
zombies=$(for p in $(ip netns pids $GB); do ps -o stat= -p $p; done | grep -c Z)
check_eq "orphans are reaped by guestd as PID 1" 0 "$zombies"

# SIGTERM to guestd: the running command is told, its status still comes
# back, and guestd exits 0.
"$RSH" "$tmp/b.sock" "trap 'echo got TERM; exit 3' TERM; sleep 30$mark & wait" >"$tmp/term.out" &
rsh=$!
sleep 0.4
kill -TERM "$gdb"
wait_for $rsh 5; rc=$?
check_eq "SIGTERM to guestd reaches the command" "got TERM" "$(cat "$tmp/term.out")"
check_eq "... whose status is relayed" 3 $rc
wait_for ${upid[b]} 5; rc=$?
check_eq "guestd (PID 1) exits 0 after SIGTERM" 0 $rc
check_eq "guest B's namespace is empty" "" "$(ip netns pids $GB)"

# The remaining guest stops when the node agent asks, over the control
# socket, even while a session cannot end: a process that left the
# command's process group (setsid) keeps its output open.  guestd kills
# that session after grace + 3 s; as PID 1 its exit ends the rest.
"$RSH" "$tmp/a.sock" "setsid sleep 60$mark & echo started" >"$tmp/held.out" 2>&1 &
held=$!
for _ in $(seq 40); do grep -q started "$tmp/held.out" && break; sleep 0.05; done
"$VHPC_TOP/$B/testbin/gprobe" --unix "$tmp/a.sock" --key "$tmp/key" shutdown
check_eq "guest A accepts a shutdown request" 0 $?
wait_for $held 10; rc=$?
check_eq "the held session's client sees the guest go (255)" 255 $rc
[ $rc = 255 ] || diag "$(cat "$tmp/held.out")" "$(tail -5 "$tmp/a.log")"
wait_for ${upid[a]} 10; rc=$?
check_eq "... and its guestd exits 0" 0 $rc
check_eq "guest A's namespace is empty" "" "$(ip netns pids $GA)"
done_testing
