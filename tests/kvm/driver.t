#!/usr/bin/env bash
# timeout: 250
# needs: hardware-virtualization
# The kvm driver runs the real vhpc-hv from a built image.  Where KVM is
# software-only (the lab's nested kvm_amd), --allow-emulated-kvm starts
# the guests anyway: their early kernel console (the serial log the driver
# collects) must show our command line and the CPU count placement gave
# them.  While they run: each vhpc-hv is pinned as placed (vCPU threads
# and its cpuset cgroup), boots the PVH vmlinux, has its tap on the job
# bridge, its vsock socket, the config disk (the job key on no command
# line) and the vmshm region. Ctrl-C tears everything down; after a
# SIGKILLed `vhpc run`, `vhpc cleanup` does, and hugepages a guest took
# are back in the pool.  (With hardware virtualization the same checks
# hold: the guests then boot for real and run the job's `sleep`.)
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmt
[ -c /dev/kvm ] || skip_all "no /dev/kvm on this host"

job_of() { sed -n 's/^vhpc: job \([a-z0-9]*\): .*/\1/p' "$1" | head -n 1; }
hv_pids() { pgrep -f "vhpc-hv .*$VHPC_RUN_DIR/jobs/$1/" || true; }
wait_log() {  # wait_log FILE REGEX SECONDS (wall time, 4x in the lab: poll_until)
	poll_until "$3" grep -sqE "$2" "$1"
}
# Every resource of job $1, one per line (empty when all are gone).
leftovers() {
	local j=$1
	[ -n "$j" ] || return 0
	hv_pids "$j" | sed 's/^/process /'
	ip netns list 2>/dev/null | grep -o "^vhpc-$j[-0-9]*" | sed 's/^/netns /'
	find /sys/fs/cgroup -maxdepth 3 -type d -path "*/vhpc/$j" 2>/dev/null | sed 's/^/cgroup /'
	ls /dev/shm 2>/dev/null | grep "^vhpc-$j-" | sed 's/^/shm /'
	grep -o " $VHPC_RUN_DIR/[^ ]*" /proc/self/mountinfo | sed 's/^/mount/'
	[ -e "$VHPC_RUN_DIR/jobs/$j" ] && echo "job dir $VHPC_RUN_DIR/jobs/$j"
}

t0=$(date +%s.%N)
# loglevel=7: guests that boot for real are quiet, and this test reads the
# kernel's early lines.
VHPC_KVM_APPEND=loglevel=7 vhpc run --driver kvm --allow-emulated-kvm -N 2 -n 2 --mem 256M --timeout 180 -- sleep 100 \
	>"$T/run.out" 2>"$T/run.err" &
rpid=$!
at_exit "kill -9 $rpid"
if ! wait_log "$T/run.err" 'guest consoles in' 50; then
	fail "the guests start"
	diag "$(tail -n 20 "$T/run.err")"
	done_testing
	exit 0
fi
ok "the guests start"
t_up=$(date +%s.%N)
job=$(job_of "$T/run.err")
jd=$VHPC_RUN_DIR/jobs/$job
check_match "it says the guests will not finish booting (or KVM has hardware virtualization)" \
	"will not finish booting|kvm, as asked: KVM with" "$(cat "$T/run.err")"
for i in 0 1; do
	cpus[$i]=$(sed -n "s/^vhpc:   g$i: cpus \([0-9,-]*\),.*/\1/p" "$T/run.err")
	ncpus[$i]=$(echo "${cpus[$i]}" | tr ',' '\n' | wc -l)
	diag "g$i: $(grep -o "guest g$i: vhpc-hv pid .*" "$T/run.err")"
done
pids=$(hv_pids "$job")
check_eq "one vhpc-hv per guest" 2 "$(echo "$pids" | grep -c .)"
for i in 0 1; do
	pid=$(pgrep -f "vhpc-hv .*$jd/kvm$i/" | head -n 1)
	cl=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)
	kfd=$(sed -n 's|.*--kernel /dev/fd/\([0-9]*\) .*|\1|p' <<<"$cl")
	check_match "g$i boots the PVH vmlinux (passed open: --kernel /dev/fd/$kfd)" "/kvm/vmlinux\$" \
		"$(readlink "/proc/$pid/fd/$kfd" 2>&1)"
	# Confined: nobody (a root job's guests), no capabilities, no_new_privs,
	# the seccomp filter, a mount namespace of its own that holds only the
	# jail, and no descriptor but its own.
	st=$(cat "/proc/$pid/status")
	check_eq "g$i: vhpc-hv runs as nobody" "$(id -u nobody) $(id -u nobody) $(id -u nobody) $(id -u nobody)" \
		"$(awk '/^Uid:/ {print $2, $3, $4, $5}' <<<"$st")"
	check_eq "g$i: no capabilities, no_new_privs, seccomp filter (mode 2)" "0000000000000000 0000000000000000 1 2" \
		"$(awk '/^CapEff:/ {e=$2} /^CapPrm:/ {p=$2} /^NoNewPrivs:/ {n=$2} /^Seccomp:/ {s=$2} END {print e, p, n, s}' <<<"$st")"
	check "g$i: its own mount namespace" test "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)"
	jail=$(printf '%s\n' dev etc lib lib64 proc sys usr "$(cut -d/ -f2 <<<"$BIN")" "$(cut -d/ -f2 <<<"$VHPC_RUN_DIR")" |
		LC_ALL=C sort -u | tr '\n' ' ')
	check_eq "g$i: its root holds only the jail (/usr, libraries, vhpc-hv, its guest folder)" "$jail" \
		"$(ls -A "/proc/$pid/root/" 2>&1 | LC_ALL=C sort | tr '\n' ' ')"
	check_eq "g$i: the host's /etc is not there, only ld.so.cache" "ld.so.cache" "$(ls -A "/proc/$pid/root/etc" 2>&1)"
	check_eq "g$i: of the host's /dev only kvm and null" "kvm null" \
		"$(ls "/proc/$pid/root/dev" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
	fds=$(for f in /proc/$pid/fd/*; do readlink "$f"; done | grep -v -E '^(anon_inode:|socket:|/dev/kvm$|/dev/null$|/dev/net/tun$|/memfd:)' |
		sed -e "s|^$jd/kvm$i/hv/.*|HVDIR|" -e "s|^$jd/kvm$i/hv.log|HVLOG|" -e "s|^$jd/config.ext4|CONFIG|" \
		    -e "s|^$jd/vmshm/region$|VMSHM|" -e 's|.*/kvm/.*|IMAGE|' -e 's|^/dev/vhost-net$|VHOST|' | sort -u | tr '\n' ' ')
	# /dev/vhost-net where the node has it: the agent passes it for the NIC.
	vh=; [ -c /dev/vhost-net ] && vh="VHOST "
	check_eq "g$i: vhpc-hv holds only its guest's files" "CONFIG HVDIR HVLOG IMAGE ${vh}VMSHM " "$fds"
	check_match "g$i: --cpu-affinity is the placement (${cpus[$i]})" "--cpu-affinity ${cpus[$i]} " "$cl"
	vcpu=$(grep -l '^vcpu0$' /proc/"$pid"/task/*/comm 2>/dev/null | head -n 1)
	check_eq "g$i: its vCPU thread runs only on CPU ${cpus[$i]}" "${cpus[$i]}" \
		"$(sed -n 's/^Cpus_allowed_list:\t//p' "${vcpu%/comm}/status" 2>/dev/null)"
	check_eq "g$i: vhpc-hv is in the cpuset cgroup vhpc/$job/$i" "cpuset:/vhpc/$job/$i" \
		"$(grep -o "cpuset:.*" "/proc/$pid/cgroup")"
	check_eq "g$i: whose CPUs are the placed ones" "${cpus[$i]}" \
		"$(cat "/sys/fs/cgroup/cpuset/vhpc/$job/$i/cpuset.cpus" 2>/dev/null)"
	check "g$i: its vsock socket is there" test -S "$jd/kvm$i/hv/vsock"
	check "g$i: its control socket is there" test -S "$jd/kvm$i/hv/ctl"
	check_match "g$i: vhpc-hv's control socket reports the pinning" "\"affinity\": *\"${cpus[$i]}\"" \
		"$("$BIN/vhpc-hvctl" "$jd/kvm$i/hv/ctl" status 2>&1)"
	key=$(debugfs -R 'cat /job.key' "$jd/config.ext4" 2>/dev/null)
	check "g$i: the job key is on no command line" test -n "$key" -a "${cl/$key/}" = "$cl"
done
links=$(ip -n "vhpc-$job" -o link show master br0 2>/dev/null)
check_match "tap t0 is on the job bridge" "t0: .*mtu 9000 .*master br0 state (UNKNOWN|UP)" "$links"
check_match "tap t1 is on the job bridge" "t1: .*mtu 9000 .*master br0 state (UNKNOWN|UP)" "$links"
check_eq "no other ports: no guest namespaces or veths for kvm guests" 2 "$(echo "$links" | grep -c .)"
check_eq "no guest network namespaces" "" "$(ip netns list | grep -o "^vhpc-$job-[0-9]*")"
check_eq "the config disk is private" 600 "$(stat -c %a "$jd/config.ext4")"
check_match "the config disk holds key, hosts, hostfile, env, sysctl.conf" \
	"env.*hostfile.*hosts.*job\.key.*sysctl\.conf" "$(debugfs -R 'ls' "$jd/config.ext4" 2>/dev/null | tr -s ' \n' ' ')"
sz=$(stat -c %s "$jd/vmshm/region" 2>/dev/null || echo 0)
check "the vmshm region is a power of two (a PCI BAR): $sz bytes" test "$sz" -gt 0 -a $((sz & (sz - 1))) = 0

# The early console: our command line, then SMP set-up with placement's count.
for i in 0 1; do
	wait_log "$jd/kvm$i/hv/serial" 'Allowing [0-9]+ CPUs' 50
	con=$(tr -d '\r' <"$jd/kvm$i/hv/serial" 2>/dev/null)
	check_match "g$i's console shows our command line" \
		"Command line: console=ttyS0 .*vhpc\.name=g$i vhpc\.job=$job vhpc\.index=$i vhpc\.addr=10\.[0-9.]+/[0-9]+ vhpc\.mtu=9000 vhpc\.listen=vsock:7707" "$con"
	check_match "g$i's kernel allows the ${ncpus[$i]} CPU(s) placement gave it" \
		"smpboot: Allowing ${ncpus[$i]} CPUs, 0 hotplug CPUs" "$con"
done
t_allow=$(date +%s.%N)
diag "from vhpc run to both vhpc-hv up: $(echo "$t_up - $t0" | bc) s; to both kernels' 'Allowing N CPUs': $(echo "$t_allow - $t0" | bc) s"

kill -INT $rpid
wait $rpid
check_eq "Ctrl-C: vhpc run exits 130" 130 "$?"
check_eq "after Ctrl-C nothing of the job is left (processes, taps, netns, cgroups, shm, mounts, sockets, config disk)" \
	"" "$(leftovers "$job")"

# SIGKILL: the guest outlives vhpc run until `vhpc cleanup`.  With 64 more
# pages in the 2 MiB pool, its 128 MiB come from hugepages, and go back.
hp=/sys/kernel/mm/hugepages/hugepages-2048kB
huge=0
if [ -w $hp/nr_hugepages ]; then
	nr=$(cat $hp/nr_hugepages)
	at_exit "echo $nr >$hp/nr_hugepages"
	echo $((nr + 64)) >$hp/nr_hugepages
	free0=$(cat $hp/free_hugepages)
	[ "$free0" -ge 64 ] && huge=1
fi
vhpc run --driver kvm --allow-emulated-kvm -N 1 --mem 128M --timeout 180 -- sleep 100 \
	>"$T/k.out" 2>"$T/k.err" &
kpid=$!
at_exit "kill -9 $kpid"
if wait_log "$T/k.err" 'guest consoles in' 50; then
	kjob=$(job_of "$T/k.err")
	if [ $huge = 1 ]; then
		check_match "the pool holds the guest: it gets hugepages" "g0: cpus [0-9]+, memory on node [0-9]+ in hugepages" "$(cat "$T/k.err")"
		check_match "vhpc-hv is asked for them" "--hugepages=2M" "$(tr '\0' ' ' <"/proc/$(hv_pids "$kjob" | head -n 1)/cmdline")"
		check_eq "and takes 64 pages from the pool" $((free0 - 64)) "$(cat $hp/free_hugepages)"
	else
		skip "hugepages: cannot add 64 pages to the 2 MiB pool here"
		skip "hugepages: cannot add 64 pages to the 2 MiB pool here"
		skip "hugepages: cannot add 64 pages to the 2 MiB pool here"
	fi
	kill -KILL $kpid
	wait $kpid 2>/dev/null
	sleep 0.3
	check_match "after SIGKILL the guest and its resources are still there" "process .*netns vhpc-$kjob" \
		"$(leftovers "$kjob" | tr '\n' ' ')"
	vhpc cleanup >"$T/c.out" 2>&1
	check_match "vhpc cleanup says what it removed" "removed [1-9][0-9]* leftover" "$(cat "$T/c.out")"
	check_eq "after cleanup nothing of the killed job is left" "" "$(leftovers "$kjob")"
	[ $huge = 1 ] && check_eq "its hugepages are back in the pool" "$free0" "$(cat $hp/free_hugepages)"
else
	fail "a second job starts"
	diag "$(tail -n 20 "$T/k.err")"
fi
done_testing
