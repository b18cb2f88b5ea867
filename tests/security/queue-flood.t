#!/usr/bin/env bash
# timeout: 240
# Attack: a user submits more jobs than the cluster lets one user have
# waiting or running (ctld.max_jobs_per_user, 5 here): the rest are
# refused with a message saying why, the controller answers, and another
# user's job still runs with its output whole.  Ended jobs leave the
# controller's memory after ctld.keep_ended (2 s here) and stay in SQLite:
# `vhpc queue --all`, `vhpc wait` and `vhpc output` still find them, for
# their owner only.  (main: every one of the jobs was taken, and ended
# jobs stayed in memory for as long as the controller ran.)
. "$(dirname "$0")/ctld-lib.sh"
ctld_cluster_file max_jobs_per_user=5 keep_ended=2
ctld_cluster_up 1

ids=() refused=0
for i in $(seq 12); do
	out=$(as_nobody "$BIN/vhpc" submit --json -N 1 --vcpus 1 -- sleep 600 2>&1)
	id=$(echo "$out" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
	if [ -n "$id" ]; then ids+=("$id"); else refused=$((refused + 1)) last=$out; fi
done
check_eq "of 12 jobs a user submits, 5 are taken" 5 "${#ids[@]}"
check_eq "... and 7 refused" 7 "$refused"
check_match "... saying why" 'uid 65534 has 5 jobs waiting or running, the cluster.s limit per user \(ctld\.max_jobs_per_user in the cluster file\)' "$last"
check "vhpc-ctld answers" ctld_answers
B=$(sub -N 1 --vcpus 1 -- sh -c "$OTHER_JOB")
check_match "another user's job is taken ($B)" '^[0-9]+$' "$B"
for id in "${ids[@]}"; do nb cancel "$id" >/dev/null; done
check "the user cancels theirs: the other job runs" wait_state "$B" COMPLETED 60
check_eq "... with its output whole" "$(other_output)" "$(vc output "$B")"
C=$(nb_sub -N 1 --vcpus 1 -- echo again)
check_match "with its jobs ended, the user may submit again" '^[0-9]+$' "$C"
check "... and it runs" wait_state "$C" COMPLETED 60

# Ended jobs leave memory after keep_ended; the store keeps them.  `vhpc
# queue` without --all lists ended jobs only while the controller holds
# them (those of the last 5 minutes, at most keep_ended).
in_memory() { vc queue --json | tr -d ' \n' | grep -q "\"id\":$1,"; }
left_memory() { ! in_memory "$1"; }
for _ in $(seq 100); do in_memory "$C" || break; sleep 0.1; done
check "an ended job leaves memory after keep_ended: plain vhpc queue no longer lists it" left_memory "$C"
check_match "vhpc-ctld says so" "[0-9]+ jobs? ended over 2 s ago: out of memory, kept in the store" "$(cat "$T/ctld.log")"
for id in "${ids[@]}" "$B" "$C"; do
	check_match "vhpc queue --all still lists job $id, from the store" "\"id\":$id,.*\"state\":\"(CANCELLED|COMPLETED)\"" "$(job_json "$id")"
done
check_eq "the user's queue --all: the user's 6 jobs, not the other's" "${ids[*]} $C" \
	"$(nb queue --all --json | tr -d ' \n' | grep -o '"id":[0-9]*' | cut -d: -f2 | tr '\n' ' ' | sed 's/ $//')"
nb wait "$C" >/dev/null
check_eq "vhpc wait of an ended job that left memory: its exit status" 0 "$?"
check_match "vhpc wait of a cancelled one says so" "CANCELLED" "$(nb wait "${ids[0]}")"
check_eq "vhpc output of one: whole" "$(other_output)" "$(vc output "$B")"
check_match "... and still the owner's only" "job $B: permission denied" "$(nb output "$B")"
check_match "a job that never was: not found" "no job 999" "$(nb wait 999)"
done_testing
