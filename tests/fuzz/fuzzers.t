#!/usr/bin/env bash
# timeout: 900
# Every fuzzer runs briefly in `make check` (FUZZ_SMOKE_SECONDS each,
# default 6: its seed corpus and a few hundred thousand mutations, enough
# to catch a parser that crashes on what it was fixed for; the suite has to
# stay under 30 minutes on 2 cores); `make fuzz` runs them for 300 s each.
cd "$(dirname "$0")/../.."
FUZZ_SECONDS=${FUZZ_SMOKE_SECONDS:-6} exec tests/fuzz/run-all
