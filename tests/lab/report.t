#!/usr/bin/env bash
# timeout: 60
# What tests/run's report says of a failed check on the host: its line,
# then the diagnostics the test printed right after it (at most 8), since
# CI shows only the report and a log's last lines may be far past them;
# a passing check's diagnostics stay in the log.  A nested tests/run in a
# scratch tree on one fixture.
. "$(dirname "$0")/../lib.sh"

W=$(mktemp -d)
at_exit "rm -rf '$W'"
chmod 755 "$W"
mkdir -p "$W/tree/tests/report" "$W/logs"
cp "$VHPC_TOP/tests/run" "$W/tree/tests/run"
ln -s "$VHPC_TOP/tests/lab" "$W/tree/tests/lab"
ln -s "$VHPC_TOP/$B" "$W/tree/build"
cat >"$W/tree/tests/report/fails.t" <<'EOF'
#!/bin/sh
echo 1..3
echo "ok 1 - first"
echo "# said after a passing check"
echo "not ok 2 - second"
echo "# no match for /panicked/ in:"
echo "# vfio-job: guest g0: channel handshake: receive: Broken pipe"
i=0; while [ $i -lt 12 ]; do echo "# line $i"; i=$((i+1)); done
echo "ok 3 - third"
echo "# after the third"
EOF
chmod +x "$W/tree/tests/report/fails.t"
out=$(cd "$W/tree" && B=build VHPC_TEST_LOGS=$W/logs VHPC_TEST_BUDGET=0 tests/run report/fails.t 2>&1)
check_eq "the run fails" 1 "$?"
block=$(printf '%s\n' "$out" | sed -n '/^  FAIL  report\/fails.t: 2 - second$/,/^FAIL  /p')
check_match "the failed check's line is in the report" "^  FAIL  report/fails.t: 2 - second" "$block"
check_match "... followed by what the test said after it" \
	"^        # no match for /panicked/ in:
        # vfio-job: guest g0: channel handshake: receive: Broken pipe
        # line 0" "$block"
check_eq "... at most 8 lines of it" 8 "$(printf '%s\n' "$block" | grep -c '^        # ')"
check_eq "a passing check's diagnostics are not in the report" "" \
	"$(printf '%s\n' "$out" | grep -E '^        # (said after a passing check|after the third)')"
check_eq "the last line" "2 passed, 1 failed" "$(printf '%s\n' "$out" | tail -n 1)"
done_testing
