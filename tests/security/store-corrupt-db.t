#!/usr/bin/env bash
# timeout: 180
# Attack on durability: the controller's database is damaged while it is
# down (a disk error, a bad copy, a stray write).  Damage in a page that
# start-up does not read (here the AUTOINCREMENT counter's), and a file
# that is no database at all: vhpc-ctld refuses to start on either, exits
# with status 1 (not a signal), and says which file is damaged, what
# SQLite's quick_check found, and what to do.  The undamaged copy starts
# and has its queue.  (main: it started on the damaged file, and ...)
. "$(dirname "$0")/ctld-lib.sh"
need_built vhpc-ctld
command -v sqlite3 >/dev/null || skip_all "the sqlite3 program is not installed"
ctld_cluster_up 0
DB=$T/ctld/ctld.db
ids=$(for i in 1 2 3; do nb_sub -N 1 -- echo queued; done | tr '\n' ' ')
check_match "three jobs wait in the queue (no node is up)" '^[0-9]+ [0-9]+ [0-9]+ $' "$ids"
cl_ctld_kill KILL
sqlite3 "$DB" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
cp "$DB" "$T/good.db"
page=$(sqlite3 "$DB" "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_sequence'")
size=$(sqlite3 "$DB" 'PRAGMA page_size')

# start_on_damage: vhpc-ctld on the file as it is now; its exit status, or
# 124 if it still runs after 10 s (then what a submit gets is said).
start_on_damage() {
	local from pid rc
	from=$(log_lines "$T/ctld.log")
	nsenter --net=/run/netns/"$CL_HUB" -- "$BIN/vhpc-ctld" --listen "$CL_CTL" --state "$T/ctld" --log "$T/ctld.log" &
	pid=$!
	for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	if kill -0 $pid 2>/dev/null; then
		diag "it runs on it; a submit gets: $(nb submit -N 1 -- echo x)"
		kill -9 $pid
		wait $pid 2>/dev/null
		rc=124
	else
		wait $pid
		rc=$?
	fi
	LOG=$(tail -n +"$((from + 1))" "$T/ctld.log")
	return $rc
}

# from its cell pointers on (its first 8 bytes are the page's header)
printf 'Z%.0s' $(seq 64) | dd of="$DB" bs=1 seek=$(( (page - 1) * size + 8 )) conv=notrunc 2>/dev/null
start_on_damage
check_eq "on a page of the database overwritten, vhpc-ctld exits with status 1" 1 "$?"
check_match "... saying which file is damaged and what the check found" \
	"state store $DB is damaged \(On tree page $page cell [0-9]+: [^)]*\); vhpc-ctld does not start on it: restore it from a backup, or move $DB and its -wal and -shm files aside" "$LOG"
check "... and nothing else it would have done: no 'ready'" test -z "$(echo "$LOG" | grep -w ready)"

head -c 4096 /dev/urandom >"$DB"
start_on_damage
check_eq "on a file that is no database, it exits with status 1" 1 "$?"
check_match "... saying so" "state store $DB is damaged \(file is not a database\)" "$LOG"

cp "$T/good.db" "$DB"
CL_NO_PUSH=1 ctld_up_or_quit
check_eq "the undamaged copy starts, with its queue" "PENDING PENDING PENDING" \
	"$(for id in $ids; do job_state "$id"; done | tr '\n' ' ' | sed 's/ $//')"
done_testing
