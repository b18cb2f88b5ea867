#!/usr/bin/env bash
# timeout: 90
# Container guests (runc): hostname, namespaces, cgroup cpuset/mems/memory
# from placement, read-only rootfs with writable tmpfs, host protection,
# graceful stop, kill on timeout, nothing left after.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/na-lib.sh"
need_root
[ -x /usr/sbin/runc ] || command -v runc >/dev/null || skip_all "runc is not installed"

na_run_dir
rootfs=$VHPC_RUN_DIR/rootfs
"$(dirname "$0")/mkrootfs.sh" "$rootfs" || { fail "build a test rootfs"; done_testing; exit 1; }
J=ct$$a K=ct$$b
before=$(leftovers $J $K)

# The guest's init reports what it sees, then waits for SIGTERM (as PID 1
# it only gets the signal because it installs a handler).
init='echo host=$(hostname)
echo mtu=$(cat /sys/class/net/eth0/mtu)
touch /etc/x 2>/dev/null && echo etc=writable || echo etc=readonly
touch /tmp/x /run/x /var/tmp/x && echo tmpfs=writable
echo 1 >/proc/sys/net/ipv4/ip_forward 2>/dev/null && echo procsys=writable || echo procsys=readonly
echo 1 >/proc/sysrq-trigger 2>/dev/null && echo sysrq=writable || echo sysrq=readonly
echo x >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null && echo sys=writable || echo sys=readonly
cat /run/shared/hello
echo pid1=$$
trap "echo got-term; exit 0" TERM
echo waiting
while :; do sleep 0.2 & wait; done'
mkdir -p "$VHPC_RUN_DIR/shared" "$VHPC_RUN_DIR/logs-j" "$VHPC_RUN_DIR/logs-k"
echo from-host >"$VHPC_RUN_DIR/shared/hello"

check "job with 2 container guests starts" \
	up J --job $J -N 2 --mem 192M --tmpfs 16M --grace 3000 --rootfs "$rootfs" --log-dir "$VHPC_RUN_DIR/logs-j" \
	--bind "$VHPC_RUN_DIR/shared:/run/shared:ro" -- /bin/sh -c "$init"
diag "$(out_of J)"
for g in 0 1; do
	log=$(field J "guest $g pid [0-9]+ log")
	pid=$(field J "guest $g pid")
	cpus=$(field J "guest $g cpus")
	for i in $(seq 50); do grep -q waiting "$log" 2>/dev/null && break; sleep 0.05; done
	out=$(cat "$log")
	check_match "guest $g: own hostname" "^host=$J-$g\$" "$out"
	check_match "guest $g: sees its job network (eth0 MTU 9000)" '^mtu=9000$' "$out"
	check_match "guest $g: rootfs is read-only" '^etc=readonly$' "$out"
	check_match "guest $g: /tmp, /run, /var/tmp are writable" '^tmpfs=writable$' "$out"
	check_match "guest $g: /proc/sys is read-only" '^procsys=readonly$' "$out"
	check_match "guest $g: /proc/sysrq-trigger is read-only" '^sysrq=readonly$' "$out"
	check_match "guest $g: /sys is read-only" '^sys=readonly$' "$out"
	check_match "guest $g: bind mount from the host" '^from-host$' "$out"
	check_match "guest $g: its init is PID 1" '^pid1=1$' "$out"
	for ns in pid mnt uts ipc net; do
		[ "$(readlink /proc/$pid/ns/$ns)" != "$(readlink /proc/self/ns/$ns)" ] &&
			ok "guest $g: own $ns namespace" || fail "guest $g: shares the host's $ns namespace"
	done
	check_eq "guest $g: the network namespace is vhpc-$J-$g" \
		"net:[$(stat -L -c %i /run/netns/vhpc-$J-$g)]" "$(readlink /proc/$pid/ns/net)"
	check_eq "guest $g: cpuset.cpus as placed" "$cpus" "$(cat /sys/fs/cgroup/cpuset/vhpc/$J/$g/cpuset.cpus)"
	check_eq "guest $g: cpuset.mems as placed" "$(field J "guest $g cpus [^ ]+ mems")" \
		"$(cat /sys/fs/cgroup/cpuset/vhpc/$J/$g/cpuset.mems)"
	check_eq "guest $g: memory limit" $((192 << 20)) "$(cat /sys/fs/cgroup/memory/vhpc/$J/$g/memory.limit_in_bytes)"
	check_match "guest $g: init runs on its cpus only" "list: $cpus\$" "$(taskset -pc $pid)"
	check_match "guest $g: init is in cgroup vhpc/$J/$g" "cpuset:/vhpc/$J/$g\$" "$(cat /proc/$pid/cgroup)"
done
check "the two guests got different cores" [ "$(field J "guest 0 cpus")" != "$(field J "guest 1 cpus")" ]
check_match "the image was not written to" '^$' "$(ls "$rootfs/tmp" "$rootfs/run" "$rootfs/etc/x" 2>/dev/null)"

pid0=$(field J "guest 0 pid")
down J
check_match "SIGTERM stopped the guests within the grace period" \
	'^ctr_stop_ms [0-9]{1,3}\.' "$(out_of J)"
check_match "the guest's init saw SIGTERM" '^got-term$' "$(cat "$VHPC_RUN_DIR/logs-j/g0.log")"
check "init of guest 0 is gone" gone $pid0
check_eq "nothing left of the job" "$before" "$(leftovers $J $K)"

# An init that ignores SIGTERM (sleep as PID 1 has no handler) is killed
# when the grace period ends.
check "job whose init ignores SIGTERM starts" \
	up K --job $K -N 1 --grace 600 --rootfs "$rootfs" --log-dir "$VHPC_RUN_DIR/logs-k" -- /bin/sleep 1000
pidk=$(field K "guest 0 pid")
t0=$(date +%s%N)
down K
dt=$(( ($(date +%s%N) - t0) / 1000000 ))
stop=$(field K "ctr_stop_ms")
check "stop waited the grace period, then killed (${stop} ms)" \
	[ "${stop%.*}" -ge 600 ] && [ "${stop%.*}" -lt 3000 ]
check_match "it says it killed it" 'still running 600 ms after SIGTERM; killing it' "$(out_of K)"
check "init of K is gone" gone $pidk
check_eq "nothing left of either job" "$before" "$(leftovers $J $K)"
diag "K down in ${dt} ms"
diag "start latency: $(grep -h ctr_start_ms "$VHPC_RUN_DIR"/J.out "$VHPC_RUN_DIR"/K.out | sed 's/.*ctr_start_ms/ctr_start_ms/' | tr '\n' ' ')"

# Bad specs fail before anything is made, and say why.
out=$("$NA" up --job ct$$c -N 1 --rootfs /nonexistent -- /bin/sh 2>&1)
check_match "missing rootfs named" "rootfs '/nonexistent' is not an existing directory" "$out"
out=$("$NA" up --job ct$$c -N 1 --rootfs "$rootfs" --bind /etc:/usr/share/x -- /bin/sh 2>&1)
check_match "bind target outside tmpfs and image refused" "does not exist in the read-only rootfs" "$out"
check_eq "failed starts left nothing" "$before" "$(leftovers $J $K)"
done_testing
