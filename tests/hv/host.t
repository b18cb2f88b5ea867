#!/usr/bin/env bash
# timeout: 120
# needs: hardware-virtualization
# Host-side placement: each vCPU thread runs only on its assigned CPU, guest
# RAM is bound to (and sits on) the requested host NUMA node, the control
# socket reports both, pause/resume really stop the vCPUs, kill ends the
# process, and hugepages come from the pool with a clear error when it is
# short.  This machine has one NUMA node: two guest nodes both bound to host
# node 0 exercise the per-node binding code.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

ncpu=$(nproc)
a0=$((ncpu > 1 ? 1 : 0)) a1=0
sock=$T/ctl.sock
"$HV" --kernel "$GUESTS/power.elf" --debug-exit --vcpus 2 --mem 64M --cmdline mode=spin \
	--cpu-affinity $a0,$a1 --numa mem=32M,host-node=0 --numa mem=32M,host-node=0 \
	--control "$sock" >"$T/spin.out" 2>"$T/spin.err" </dev/null &
pid=$!
at_exit kill -9 $pid
for i in $(seq 100); do grep -q 'GUEST spinning' "$T/spin.out" && break; sleep 0.05; done
check "spinning guest started" grep -q 'GUEST spinning' "$T/spin.out"

tid_of() { grep -l "^$1\$" /proc/$pid/task/*/comm 2>/dev/null | head -1 | sed 's|/proc/[0-9]*/task/\([0-9]*\)/comm|\1|'; }
t0=$(tid_of vcpu0) t1=$(tid_of vcpu1)
check "vCPU threads are named vcpu0 and vcpu1" [ -n "$t0" ] && [ -n "$t1" ]
allowed() { awk '/^Cpus_allowed_list/ {print $2}' /proc/$pid/task/$1/status; }
ran_on() { sed 's/.*) //' /proc/$pid/task/$1/stat | awk '{print $37}'; }
state_of() { sed 's/.*) //' /proc/$pid/task/$1/stat | awk '{print $1}'; }
check_eq "vcpu0 may run only on CPU $a0" "$a0" "$(allowed $t0)"
check_eq "vcpu1 may run only on CPU $a1" "$a1" "$(allowed $t1)"
sleep 0.2
check_eq "vcpu0 last ran on CPU $a0" "$a0" "$(ran_on $t0)"
check_eq "vcpu1 last ran on CPU $a1" "$a1" "$(ran_on $t1)"

st=$("$HVCTL" "$sock" status)
check_match "status: running" '"state":"running"' "$st"
check_match "status: vcpu0 thread, affinity and host CPU" "\"id\":0,\"apic_id\":0,\"guest_node\":0,\"tid\":$t0,\"affinity\":\"$a0\",\"pinned\":$a0,\"host_cpu\":$a0" "$st"
check_match "status: vcpu1 in guest node 1" "\"id\":1,\"apic_id\":1,\"guest_node\":1,\"tid\":$t1,\"affinity\":\"$a1\"" "$st"
check_match "status: both guest nodes bound to host node 0, pages there" \
	'"guest_node":0,"gpa_ranges":\[\[0,33554432\]\],"size":33554432,"host_node":0,"hugepages":false,"pages_on_host_node":\{"0":[0-9]+\}.*"guest_node":1,"gpa_ranges":\[\[33554432,67108864\]\].*"host_node":0' "$st"

maps=$(grep 'vhpc-guest-ram' /proc/$pid/numa_maps)
check_eq "numa_maps: every range of guest RAM is bound to node 0" "" "$(printf '%s\n' "$maps" | grep -v ' bind:0 ')"
check_eq "numa_maps: all 16384 prefaulted 4K pages on node 0" 16384 \
	"$(printf '%s\n' "$maps" | grep -o ' N0=[0-9]*' | cut -d= -f2 | awk '{s += $1} END {print s}')"
check "numa_maps: no page on another node" sh -c "! printf '%s\n' \"$maps\" | grep -q ' N[1-9][0-9]*='"

check "control: pause" "$HVCTL" "$sock" pause
sleep 0.2
check_eq "paused vCPU threads sleep" "S S" "$(state_of $t0) $(state_of $t1)"
c0=$(sed 's/.*) //' /proc/$pid/task/$t0/stat | awk '{print $12+$13}')
sleep 0.3
check_eq "paused vCPU 0 uses no CPU time" "$c0" "$(sed 's/.*) //' /proc/$pid/task/$t0/stat | awk '{print $12+$13}')"
check_match "status: paused" '"state":"paused"' "$("$HVCTL" "$sock" status)"
check "control: resume" "$HVCTL" "$sock" resume
sleep 0.3
check "resumed vCPU 0 uses CPU time again" [ "$(sed 's/.*) //' /proc/$pid/task/$t0/stat | awk '{print $12+$13}')" -gt "$c0" ]
check_match "control: bad request is refused with a reason" '"ok":false,"error":"request is not a JSON object"' \
	"$("$HVCTL" "$sock" --raw '[1,2')"
check "control: kill" "$HVCTL" "$sock" kill
timeout 10 tail --pid=$pid -f /dev/null
wait $pid
check_eq "killed guest: exit status 5" 5 "$?"

# Binding is per guest node: node 0 bound, node 1 left to the default
# policy shows up as two ranges with different policies.
"$HV" --kernel "$GUESTS/power.elf" --debug-exit --vcpus 2 --mem 64M --cmdline mode=button \
	--numa mem=32M,host-node=0 --numa mem=32M --control "$sock" >"$T/b.out" 2>"$T/b.err" </dev/null &
pid=$!
at_exit kill -9 $pid
for i in $(seq 100); do grep -q 'waiting for the power button' "$T/b.out" && break; sleep 0.05; done
maps=$(grep 'vhpc-guest-ram' /proc/$pid/numa_maps)
check_eq "numa_maps: guest node 0 bound to host node 0, guest node 1 default" "bind:0 N0=8192
default N0=8192" "$(printf '%s\n' "$maps" | awk '{print $2, $0}' | grep -o '^[a-z:0-9]* \| N0=[0-9]*' | paste -d' ' - - | sed 's/  */ /g')"
check_match "status: node 1 has no host node" '"guest_node":1,.*"host_node":null' "$("$HVCTL" "$sock" status)"
"$HVCTL" "$sock" kill >/dev/null
wait $pid

run_guest bootinfo --vcpus 1 --mem 32M --host-node 7 --cmdline marker=x
check_eq "binding to a missing host node fails" "1 host NUMA node 7 does not exist" \
	"$RC $(grep -o 'host NUMA node 7 does not exist' "$ERR")"
run_guest bootinfo --vcpus 1 --mem 32M --cpu-affinity 999 --cmdline marker=x
check_match "pinning to a missing CPU fails with a reason" "pinning vCPU 0 to host CPU 999" "$RC $(cat "$ERR")"

# Hugepages: a pool too small is an error at start...
hp=/sys/kernel/mm/hugepages/hugepages-2048kB
if [ -w $hp/nr_hugepages ]; then
	free=$(cat $hp/free_hugepages)
	run_guest bootinfo --vcpus 1 --mem $(( (free + 8) * 2 ))M --hugepages --cmdline marker=x
	check_match "short hugepage pool: exit 1 with the numbers" "^1 .*hugepage pool too small: guest needs $((free + 8)) pages of 2048 KiB, $free free" \
		"$RC $(tr '\n' ' ' <"$ERR")"
	# ...and a pool that is large enough is used and given back.
	nr=$(cat $hp/nr_hugepages)
	at_exit "echo $nr > $hp/nr_hugepages"
	echo $((nr + 16)) >$hp/nr_hugepages
	if [ "$(cat $hp/free_hugepages)" -ge $((free + 16)) ]; then
		run_guest bootinfo --vcpus 1 --mem 32M --hugepages --host-node 0 --cmdline marker=hp
		guest_ok "guest on 16 hugepages bound to node 0"
		check_match "log says hugepages" "in 1 node\(s\) on hugepages" "$(cat "$ERR")"
		check_eq "hugepages returned to the pool" "$((free + 16))" "$(cat $hp/free_hugepages)"
	else
		skip "could not add 16 hugepages to the pool"
	fi
	echo $nr >$hp/nr_hugepages
else
	skip "no writable hugepage pool"
fi
done_testing
