#!/usr/bin/env bash
# timeout: 120
# A container guest's network namespace is its own (issue 36): runc makes
# it inside the guest's user namespace and the agent moves the guest's
# eth0 in between `runc create` and `runc start`, so the user namespace
# owns every namespace of the guest, which CRIU needs to checkpoint it
# (on main the agent's netns belonged to the host's user namespace, and
# CRIU refused every guest).  On one machine, a job of two guests without
# vmshm (no pod):
#  - each guest's network namespace belongs to its own user namespace
#    (lsns, from the host), and is the one /run/netns names for the job;
#  - the guest sees what it saw before: eth0 with its address, the job's
#    MTU and MAC, lo, and nothing else in /sys/class/net (a sysfs of its
#    own namespace, mounted by runc);
#  - the guests reach each other (TCP to the other's agent, ping);
#  - guestd's stdout and stderr are a file it opened on the guest's own
#    mount /vhpc/out (a tmpfs of the job dir's), so CRIU can save them;
#  - a job of two guests with vmshm (a pod) still runs and talks;
#  - nothing is left afterwards.
. "$(dirname "$0")/common.sh"
need_root
[ -x "$BIN/vhpc" ] && [ -x "$BIN/vhpc-guestd" ] || skip_all "vhpc is not built"
command -v lsns >/dev/null || skip_all "lsns (util-linux) is not installed"
command -v runc >/dev/null || skip_all "runc is not installed"

before=$(resource_counts)
vhpc run -N 2 -n 2 --no-vmshm --driver container --oversubscribe --timeout 100 -- sh -c '
	echo "NET $(hostname) $(ls /sys/class/net | tr "\n" " ")mtu=$(cat /sys/class/net/eth0/mtu) mac=$(cat /sys/class/net/eth0/address)"
	[ "$OMPI_COMM_WORLD_RANK" = 0 ] || { sleep 60; exit 0; }
	nc -w 2 g1 7707 </dev/null && echo OWN=yes || echo OWN=no
	ping -c 1 -W 2 g1 >/dev/null 2>&1 && echo PING=yes || echo PING=no
	echo DONE
	sleep 60' >"$T/a.out" 2>"$T/a.err" &
apid=$!
at_exit "kill -INT $apid 2>/dev/null; wait $apid"
for _ in $(seq 150); do grep -q DONE "$T/a.out" && break; sleep 0.2; done
check "the job runs" grep -q DONE "$T/a.out"
[ -s "$T/a.out" ] || diag "$(tail -20 "$T/a.err")"

job=$(sed -n 's/.*job \([0-9a-z]*\) .*network.*/\1/p' "$T/a.err" | head -1)
[ -n "$job" ] || job=$(ls "$VHPC_RUN_DIR/jobs" 2>/dev/null | head -1)
for g in 0 1; do
	pid=$(runc --root "$VHPC_RUN_DIR/runc" state "$job-$g" 2>/dev/null | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
	user=$(lsns -n -o NS -t user -p "$pid" 2>/dev/null | tr -d ' ')
	owner=$(lsns -n -o ONS -t net -p "$pid" 2>/dev/null | tr -d ' ')
	check_match "guest $job-$g (pid $pid) has a user namespace of its own" '^[0-9]+$' "$user"
	check_eq "... which owns its network namespace" "$user" "$owner"
	check_eq "... the one /run/netns/vhpc-$job-$g names" \
		"$(stat -L -c %i "/proc/$pid/ns/net" 2>&1)" "$(stat -c %i "/run/netns/vhpc-$job-$g" 2>&1)"
done
# Its output is a file of its own mounts (guestd --stdio opens it in the
# guest), which CRIU can save; on main fds 1 and 2 were the agent's
# <job dir>/g<i>.log, on no mount of the guest ("Can't lookup mount").
for g in 0 1; do
	pid=$(runc --root "$VHPC_RUN_DIR/runc" state "$job-$g" 2>/dev/null | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
	for fd in 1 2; do
		mnt=$(sed -n 's/^mnt_id:[[:space:]]*//p' "/proc/$pid/fdinfo/$fd" 2>&1)
		check_eq "guest $job-$g: fd $fd of its init is /vhpc/out/guestd.log" \
			/vhpc/out/guestd.log "$(readlink "/proc/$pid/fd/$fd" 2>&1)"
		check_match "... on one of the guest's own mounts (mnt_id $mnt, /vhpc/out)" \
			"^$mnt [0-9]+ [^ ]+ / /vhpc/out " "$(grep "^$mnt " "/proc/$pid/mountinfo" 2>&1)"
	done
	check_eq "... its stdin is the guest's /dev/null" /dev/null "$(readlink "/proc/$pid/fd/0" 2>&1)"
	check "... and the agent's log of it has guestd's lines" \
		grep -q "g$g: ready" "$VHPC_RUN_DIR/jobs/$job/out$g/guestd.log"
done
mtu=$(ip netns exec "vhpc-$job" cat /sys/class/net/br0/mtu 2>&1)
for g in 0 1; do
	line=$(grep -a "NET g$g " "$T/a.out" | tr -d "\0\r")
	a=$((2 + g))
	check_match "g$g sees eth0 and lo only, the job's MTU ($mtu, its bridge's), its MAC" \
		"NET g$g eth0 lo mtu=$mtu mac=52:54:0a:[0-9a-f]{2}:[0-9a-f]{2}:0$a\$" "$line"
done
check "g0 reaches g1's agent over TCP" grep -q OWN=yes "$T/a.out"
check "g0 pings g1" grep -q PING=yes "$T/a.out"
kill -INT $apid
wait $apid
check_eq "the job, interrupted, exits 130" 130 "$?"

vhpc run -N 2 -n 2 --driver container --oversubscribe --timeout 60 -- sh -c '
	[ "$OMPI_COMM_WORLD_RANK" = 0 ] || exit 0
	nc -w 2 g1 7707 </dev/null && echo OWN=yes || echo OWN=no' >"$T/p.out" 2>"$T/p.err"
check_eq "a job with vmshm (its guests in a pod, in the agent's netns) runs" 0 "$?"
check "... and its g0 reaches g1" grep -q OWN=yes "$T/p.out"
[ -s "$T/p.out" ] || diag "$(tail -20 "$T/p.err")"
check_counts "nothing is left" "$before"
done_testing
