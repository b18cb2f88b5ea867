#!/usr/bin/env bash
# timeout: 400
# How tests/run reports a lab test that never got a whole L1 or L2: when
# every attempt ended with the lab failing the way the emulation makes it
# fail (here a hung L1, the RCU stall report lab.t also writes, and an L2
# triple fault a test's lab_check reported), the test is skipped, saying
# so; when an attempt ended with any other L1 crash (here a sysrq-triggered
# panic), it is a failure; and when more tests than VHPC_LAB_SKIP_MAX lost
# every attempt, each of them fails.  Two nested tests/run in a scratch
# tree, on four fixtures, with 2 attempts each (6 L1 boots); and a third on
# the users and groups a test leaves in the /etc L1 shares (3 L1 boots), and
# an L1 that triple-faults (2).
. "$(dirname "$0")/../lib.sh"
need_root
command -v qemu-system-x86_64 >/dev/null || skip_all "qemu-system-x86 is not installed (make deps installs it)"
ls "$VHPC_TOP/$B"/kernels/linux-image-cloud-amd64/x/boot/vmlinuz-* >/dev/null 2>&1 ||
	skip_all "no kernel package in $B/kernels (make kernels fetches it during set-up)"
# Where KVM has VT-x/AMD-V, tests/run runs these fixtures on the host, not
# in the lab: there is nothing of the lab to test.
if [ -c /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then
	skip_all "this host has hardware virtualization: tests/run uses no lab here"
fi

# Under /var/tmp, which L1 shares; L1's /tmp is its own.
W=$(mktemp -d /var/tmp/vhpc-runnertest.XXXXXX)
at_exit "rm -rf '$W'"
chmod 755 "$W"
mkdir -p "$W/tree/tests/labrunner" "$W/logs"
cp "$VHPC_TOP/tests/run" "$W/tree/tests/run"
ln -s "$VHPC_TOP/tests/lab" "$W/tree/tests/lab"
ln -s "$VHPC_TOP/$B" "$W/tree/build"
# Outside L1 (vhpclab.run= on its command line) a fixture does nothing.
fixture() {
	cat >"$W/tree/tests/labrunner/$1" <<EOF
#!/bin/sh
# needs: hardware-virtualization
# timeout: 60
grep -q 'vhpclab\.run=' /proc/cmdline || { echo "1..0 # SKIP not in L1"; exit 0; }
$2
sleep 50
EOF
	chmod +x "$W/tree/tests/labrunner/$1"
}
fixture hang.t 'echo "<3>rcu: INFO: rcu_preempt detected stalls on CPUs/tasks: (written by runner.t)" >/dev/kmsg'
fixture panic.t 'echo c >/proc/sysrq-trigger'
# A CPU reset by triple fault, as the emulation's (the kernel's reboot by
# triple fault, with no panic before it).
fixture triple.t 'echo triple >/sys/kernel/reboot/type && echo b >/proc/sysrq-trigger'
# What tests/lib.sh's lab_check prints for a guest that crashed or hung in
# L2; L1 goes on with the next test.
fixture l2crash.t 'echo "1..2"; echo "ok 1 - before"; echo "# lab failure: an L2 guest crashed: guest triple fault (written by runner.t)"; echo "not ok 2 - after"; exit 1'
fixture l2hang.t 'echo "1..1"; echo "# lab failure: an L2 guest hung at boot: guest g0 did not report ready within 57 s (written by runner.t)"; echo "not ok 1 - ran"; exit 1'
# user.t makes a user and its L1 panics; its second attempt, in a fresh
# L1, makes the same user again (as a test naming its user by its PID
# does).  leak.t makes one and leaves it.
fu=vhpcrun$$ fl=vhpcleak$$
at_exit "userdel $fu 2>/dev/null; groupdel $fu 2>/dev/null; userdel $fl 2>/dev/null; groupdel $fl 2>/dev/null"
fixture user.t "if [ -e $W/user.once ]; then echo 1..1; useradd -M -U $fu && echo 'ok 1 - useradd $fu' && userdel $fu && exit 0
echo 'not ok 1 - useradd $fu'; exit 1; fi
touch $W/user.once; useradd -M -U $fu; sync; echo c >/proc/sysrq-trigger"
fixture leak.t "echo 1..1; useradd -M -U $fl && echo 'ok 1 - useradd $fl'; exit 0"

outer_logs() { ls -l --time-style=+%s.%N "$VHPC_TOP/$B/test-logs" 2>/dev/null | grep labrunner; }
outer_before=$(outer_logs)
t0=$SECONDS
nested() {
	(cd "$W/tree" && B=build VHPC_TEST_LOGS=$W/logs VHPC_LAB_ATTEMPTS=2 VHPC_TEST_BUDGET=0 VHPC_TEST_LAB_IMAGE=0 \
		tests/run "$@") 2>&1
}
nested labrunner/hang.t labrunner/l2crash.t labrunner/panic.t >"$W/out"
rc=$?
diag "the nested run: $((SECONDS - t0)) s, status $rc"
out=$(cat "$W/out")
check_eq "a run with a failure exits 1" 1 "$rc"
check_eq "every test's first attempt before any test's second" \
	"hang.t l2crash.t panic.t hang.t l2crash.t panic.t" \
	"$(sed -n 's|^ *lab: running tests/labrunner/||p' "$W/out" | tr '\n' ' ' | sed 's/ $//')"
check_match "the second round says what it runs again" "lab: round 2, again: labrunner/hang.t labrunner/l2crash.t labrunner/panic.t" "$out"
check_match "the L1 hung under hang.t in both attempts" \
	"labrunner/hang.t: vhpc-lab: lab failure: L1 hung: .*attempt 2 of 2" "$out"
check_match "so hang.t is skipped, saying why" \
	"skip  labrunner/hang.t: not run: the lab failed under it in each of its 2 attempts, the emulation's way .*L1 hung" "$out"
check "and never reported as failed" bash -c "! grep -q '^FAIL  labrunner/hang.t' '$W/out'"
check_match "an L2 triple fault in both attempts of l2crash.t" \
	"labrunner/l2crash.t: lab failure: an L2 guest crashed: guest triple fault .*attempt 2 of 2" "$out"
check_match "so l2crash.t is skipped too, though it printed a failed check" \
	"skip  labrunner/l2crash.t: not run: the lab failed under it in each of its 2 attempts, the emulation's way .*L2 guest crashed" "$out"
check_match "panic.t, whose L1 panicked, is a failure" \
	"FAIL  labrunner/panic.t \(lab failure, not a test result: .*L1's kernel crashed" "$out"
check_match "its FAIL line is followed by each attempt's reason (CI shows only a run's tail)" \
	"^ +attempt 1: vhpc-lab: lab failure: L1's kernel crashed.* +attempt 2: vhpc-lab: lab failure: L1's kernel crashed" \
	"$(grep -A 2 '^FAIL  labrunner/panic.t' "$W/out" | tail -n 2 | tr '\n' ' ')"
check_match "the summary says why lab tests were skipped" \
	"lab: 2 test\(s\) skipped: the lab failed under them in every attempt" "$out"
check_eq "the last line counts the skips and the failure" "0 passed, 1 failed, 2 skipped" "$(tail -n 1 "$W/out")"

# Past the limit every such test fails: a change that breaks each guest's
# boot must not turn the lab's tests into skips.
VHPC_LAB_SKIP_MAX=1 nested labrunner/l2crash.t labrunner/l2hang.t >"$W/out2"
rc=$?
out=$(cat "$W/out2")
check_eq "a run past VHPC_LAB_SKIP_MAX exits 1" 1 "$rc"
check_match "its summary says how many lost every attempt, against the limit" \
	"lab: 2 lab tests lost every attempt to the emulation's failures, more than VHPC_LAB_SKIP_MAX=1" "$out"
check_match "l2hang.t fails" "FAIL  labrunner/l2hang.t \(lab failure, not a test result: lab failure: an L2 guest hung at boot" "$out"
check_eq "the last line counts both as failed" "0 passed, 2 failed" "$(tail -n 1 "$W/out2")"
check_eq "a bad VHPC_LAB_SKIP_MAX is refused, naming it" \
	"tests/run: VHPC_LAB_SKIP_MAX must be a whole number, got 'x'" "$(VHPC_LAB_SKIP_MAX=x nested labrunner/hang.t | head -n 1)"
# An L1 that triple-faults is the emulation's failure: skipped.
nested labrunner/triple.t >"$W/out4"
out=$(cat "$W/out4")
check_match "an L1 whose CPU reset says it triple-faulted" \
	"labrunner/triple.t: vhpc-lab: lab failure: L1 triple-faulted: its CPU reset without a word from its kernel .*attempt 2 of 2" "$out"
check_match "... and the test is skipped, as the emulation's failure" \
	"skip  labrunner/triple.t: not run: the lab failed under it in each of its 2 attempts, the emulation's way" "$out"
check_eq "... its run's last line" "0 passed, 0 failed, 1 skipped" "$(tail -n 1 "$W/out4")"

# What an L1 took with it from a test's cleanup does not reach the next.
nested labrunner/user.t labrunner/leak.t >"$W/out3"
rc=$?
out=$(cat "$W/out3")
check_match "user.t's L1 panicked in its first attempt" "labrunner/user.t: vhpc-lab: lab failure: L1's kernel crashed.*attempt 1 of 2" "$out"
check_match "what it made in /etc was removed when the L1 ended" "lab: removed what labrunner/user.t made in /etc before its L1 ended: users $fu, groups $fu$" "$out"
check_match "so its second attempt could make the same user, and passed" "^ok    labrunner/user.t \\(1 ok" "$out"
check_match "a user a test made and left is a failure of the run" \
	"FAIL  leftovers: users and groups made during this run, still there \\(now removed\\): users $fl, groups $fl" "$out"
check_eq "the last line counts it" "2 passed, 1 failed" "$(tail -n 1 "$W/out3")"
check_eq "neither user is left" "" "$(getent passwd $fu $fl; getent group $fu $fl)"
check_eq "the outer run's logs were not touched" "$outer_before" "$(outer_logs)"
check_eq "no QEMU or virtiofsd is left" "" \
	"$(pgrep -af 'qemu-system-x86_64 .*-name vhpc-lab|virtiofsd --socket-path=/var/tmp/vhpc-lab\.' | grep -F "$W" )"
done_testing
