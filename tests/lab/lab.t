#!/usr/bin/env bash
# timeout: 240
# The virtualization lab itself: a command runs in an L1 VM with AMD-V, in
# the caller's directory and environment, on the host's files; its output
# streams back, its status is the lab's; a crashed L1 and a command over
# its time are lab failures (125) that say so, and so is a hung L1 (an RCU
# stall report), at once; bad options start nothing;
# and after every run no QEMU, virtiofsd or scratch folder is left.
. "$(dirname "$0")/../lib.sh"
need_root
LAB=$VHPC_TOP/tests/lab/vhpc-lab
command -v qemu-system-x86_64 >/dev/null || skip_all "qemu-system-x86 is not installed (make deps installs it)"
ls "$VHPC_TOP/$B"/kernels/linux-image-cloud-amd64/x/boot/vmlinuz-* >/dev/null 2>&1 ||
	skip_all "no kernel package in $B/kernels (make kernels fetches it during set-up)"

# The scratch folders are under /var/tmp, shared with L1; L1's /tmp is its own.
W=$(mktemp -d /var/tmp/vhpc-labtest.XXXXXX)
at_exit "rm -rf '$W'"
leftovers() {
	pgrep -af 'qemu-system-x86_64 .*-name vhpc-lab|virtiofsd --socket-path=/var/tmp/vhpc-lab\.' | sed 's/^/process /'
	comm -13 "$W/dirs.before" <(ls -d /var/tmp/vhpc-lab.* 2>/dev/null | sort) | sed 's/^/folder /'
}
ls -d /var/tmp/vhpc-lab.* 2>/dev/null | sort >"$W/dirs.before"

cat >"$W/cmd" <<'EOF'
#!/bin/bash
echo "cwd=$PWD"
echo "env=$LABTEST_VALUE"
echo "to stderr" >&2
grep -qw svm /proc/cpuinfo && echo "cpu has svm"
[ -c /dev/kvm ] && [ -d /sys/module/kvm_amd ] && echo "kvm_amd is loaded"
echo "written in L1" >"$LABTEST_DIR/from-l1"
hostname
exit 7
EOF
chmod +x "$W/cmd"
mkdir -p "$W/cwd"
t0=$(date +%s.%N)
(cd "$W/cwd" && LABTEST_VALUE='a b  c' LABTEST_DIR=$W VHPC_LAB_PULSE_LOG=$W/pulse "$LAB" -- sh -c "sleep 11; exec $W/cmd") >"$W/out" 2>"$W/err"
rc=$?
diag "one lab run: $(echo "$(date +%s.%N) - $t0" | bc) s wall"
check_eq "the command's exit status is the lab's" 7 "$rc"
check_match "it ran in the caller's directory" "cwd=$W/cwd" "$(cat "$W/out")"
check_match "with the caller's environment, as it was" "env=a b  c" "$(cat "$W/out")"
check_match "its stderr streams back too" "to stderr" "$(cat "$W/out")"
check_match "L1's CPU has AMD-V" "cpu has svm" "$(cat "$W/out")"
check_match "kvm_amd is loaded in L1 and /dev/kvm is there" "kvm_amd is loaded" "$(cat "$W/out")"
check_match "L1 has a name of its own" "^vhpc-lab$" "$(cat "$W/out")"
check_eq "a file written in L1 is on the host" "written in L1" "$(cat "$W/from-l1" 2>/dev/null)"
check_eq "nothing is left after a run" "" "$(leftovers)"
check_match "the longest silence between L1's pulses is logged (5 s apart)" '^([5-9]|[1-9][0-9])$' "$(cat "$W/pulse" 2>/dev/null)"

# L1's kernel crashing is the lab's failure, not the command's.
"$LAB" -- sh -c 'echo c >/proc/sysrq-trigger; sleep 60' >"$W/out" 2>"$W/err"
rc=$?
check_eq "a crashed L1 ends the lab with 125" 125 "$rc"
check_match "and it says L1's kernel crashed" "lab failure: L1's kernel crashed" "$(cat "$W/err")"
check_eq "nothing is left after a crash" "" "$(leftovers)"

# A hung L1 CPU (RCU stall report on the console) ends the lab at once,
# not at the time-out: here the report is written by hand, at error level.
t0=$SECONDS
"$LAB" --timeout 300 -- sh -c 'echo "<3>rcu: INFO: rcu_preempt detected stalls on CPUs/tasks: (written by lab.t)" >/dev/kmsg; sleep 280' \
	>"$W/out" 2>"$W/err"
rc=$?
check_eq "a hung L1 ends the lab with 125" 125 "$rc"
check_match "and it says L1 hung" "lab failure: L1 hung: .*rcu_preempt detected stalls" "$(cat "$W/err")"
check "long before the time-out ($((SECONDS - t0)) s of 300)" test $((SECONDS - t0)) -lt 120
check_eq "nothing is left after a hang" "" "$(leftovers)"

# An L1 that stops without a word: here its pulse file is made a folder,
# so the 5-second writer in L1 can no longer change it.
t0=$SECONDS
VHPC_LAB_FROZEN_AFTER=8 "$LAB" --timeout 300 -- sh -c \
	'run=$(sed -n "s/.*vhpclab.run=\([^ ]*\).*/\1/p" /proc/cmdline); rm -f "$run/alive"; mkdir "$run/alive"; sleep 280' \
	>"$W/out" 2>"$W/err"
rc=$?
check_eq "a frozen L1 ends the lab with 125" 125 "$rc"
check_match "and it says for how long and how much CPU QEMU used meanwhile" \
	"lab failure: L1 froze: no pulse for (8|9|1[0-9]) s, QEMU used [0-9.]+ s of CPU meanwhile" "$(cat "$W/err")"
check "long before the time-out ($((SECONDS - t0)) s of 300)" test $((SECONDS - t0)) -lt 120
check_eq "nothing is left after a freeze" "" "$(leftovers)"
# An L1 that never comes up: no L1 reaches its command within 2 s.
t0=$SECONDS
VHPC_LAB_BOOT_AFTER=2 "$LAB" --timeout 300 -- true >"$W/out" 2>"$W/err"
rc=$?
check_eq "an L1 that does not come up ends the lab with 125" 125 "$rc"
check_match "and it says so, with QEMU's CPU time" "lab failure: L1 did not come up: no pulse [2-9] s after QEMU started, QEMU used [0-9.]+ s of CPU" "$(cat "$W/err")"
check "long before the time-out ($((SECONDS - t0)) s of 300)" test $((SECONDS - t0)) -lt 60
check_eq "nothing is left after it" "" "$(leftovers)"
VHPC_LAB_FROZEN_AFTER=1.5 "$LAB" -- true >"$W/out" 2>"$W/err"
check_match "a limit that is not whole seconds is refused by name" "VHPC_LAB_FROZEN_AFTER must be whole seconds, got '1.5'" "$(cat "$W/err")"

"$LAB" --timeout 12 -- sleep 600 >"$W/out" 2>"$W/err"
rc=$?
check_eq "a command over its time ends the lab with 125" 125 "$rc"
check_match "and it says the command did not finish" "lab failure: the command did not finish within 12s" "$(cat "$W/err")"
check_eq "nothing is left after a time-out" "" "$(leftovers)"

for bad in "--smp x -- true" "--mem 4 -- true" "--timeout -1 -- true" "--frobnicate -- true" "--"; do
	# shellcheck disable=SC2086
	"$LAB" $bad >"$W/out" 2>"$W/err"
	rc=$?
	check_eq "vhpc-lab $bad: refused with 2" 2 "$rc"
	check_match "vhpc-lab $bad: says what is wrong" "vhpc-lab: (--smp needs|--mem needs|--timeout needs|unknown option|no command)" "$(cat "$W/err")"
done
check_eq "bad options started nothing" "" "$(leftovers)"
done_testing
