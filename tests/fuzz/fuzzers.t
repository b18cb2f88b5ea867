#!/usr/bin/env bash
# timeout: 900
# Every fuzzer runs briefly in `make check` (FUZZ_SMOKE_SECONDS each,
# default 15); `make fuzz` runs them longer.
cd "$(dirname "$0")/../.."
FUZZ_SECONDS=${FUZZ_SMOKE_SECONDS:-15} exec tests/fuzz/run-all
