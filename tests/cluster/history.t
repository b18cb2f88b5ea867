#!/usr/bin/env bash
# timeout: 200
# Accounting (issue 35, item 5): `vhpc history` on a 2-node test cluster.
# A job of known cost (each of its 2 guests burns 2 CPU-seconds by its own
# clock and touches 64 MiB) is recorded with its state, exit status, nodes,
# guests, elapsed time, and the CPU time and peak memory its guests'
# cgroups counted, reported by each node as it tears its guests down.
# Users see their own jobs and root all; --user for someone else is
# denied to users; --since filters; --json parses.  vhpc-ctld starts on a
# database of the schema before this one (2) and keeps its job, whose usage
# is unknown; so is the usage of a guest whose node died (NODE_FAIL).
. "$(dirname "$0")/../lib.sh"
need_cluster
BURN=$VHPC_TOP/$B/testbin/cpuburn
[ -x "$BURN" ] || skip_all "$BURN is not built (make tests)"
for p in jq sqlite3 useradd; do command -v $p >/dev/null || skip_all "$p is not installed"; done
CL=vch$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR
# step DESCRIPTION COMMAND...: what the checks stand on (set-up, the jobs
# running, nothing left): a failure is counted, success is no result of
# its own, since it was true before accounting too.
step() { local d=$1; shift; "$@" || fail "$d"; }
step_eq() { [ "$2" = "$3" ] || { fail "$1"; diag "expected: $2" "got:      $3"; }; }
N=2         # CPU-seconds per guest
MIB=64      # memory each guest touches
# What the guests run beside the burn (mpirun, orted, guestd, a shell),
# measured on this 2-core VM at 0.41-0.63 s per job: at most 1 s is allowed,
# and nothing below what was burned (the cgroups count all of it).
TOL_US=1000000

# -- a database of schema 2 (vhpc-ctld before accounting), with an ended job.
# Its id is large, so that this cluster's jobs, numbered after it, are not
# the jobs 1, 2, ... of test clusters running beside (a node's names for a
# job's cgroups and namespaces are machine-wide: <job>x<node>).
OLD=$((1000 + RANDOM % 30000))
now=$(date +%s)
mkdir -p "$T/ctld"
sqlite3 "$T/ctld/ctld.db" >/dev/null <<SQL
PRAGMA journal_mode=WAL;
CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL, name TEXT NOT NULL,
 state INTEGER NOT NULL, spec TEXT NOT NULL, alloc TEXT, net TEXT, submitted INTEGER NOT NULL, started INTEGER,
 ended INTEGER, exit_status INTEGER, reason TEXT, cleanup TEXT, attempts INTEGER NOT NULL DEFAULT 0);
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE nodes (name TEXT PRIMARY KEY, addr TEXT NOT NULL, up INTEGER NOT NULL, last_seen INTEGER NOT NULL, info TEXT);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
INSERT INTO meta VALUES ('schema', '2');
INSERT INTO jobs (id, uid, name, state, spec, alloc, submitted, started, ended, exit_status, reason, cleanup, attempts)
 VALUES ($OLD, 0, 'old-job', 3, '{"guests":1,"command":["true"]}', '[{"node":"n1","takes":[[0,1,67108864]]}]',
 $((now - 7300)), $((now - 7260)), $((now - 7200)), 0, '', '[]', 0);
SQL
step_eq "an old database (schema 2) with one ended job" "2 1" \
	"$(sqlite3 -separator ' ' "$T/ctld/ctld.db" "SELECT (SELECT value FROM meta WHERE key='schema'), COUNT(*) FROM jobs")"

cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; cat "$CL_DIR"/*.log; done_testing; exit 1; }
for i in 1 2; do cl_node_up $i || fail "node $i starts"; done
step "two nodes register" cl_wait_nodes_up 2
check_eq "vhpc-ctld migrated it to the current schema (4), keeping its job" "4 1" \
	"$(sqlite3 -separator ' ' "$T/ctld/ctld.db" "SELECT (SELECT value FROM meta WHERE key='schema'), COUNT(*) FROM jobs")"

# hist ID [vhpc history args]: the job's history record, one line of JSON
hist() { local id=$1; shift; vc history --json "$@" | jq -c ".[] | select(.id == $id)"; }
old=$(hist $OLD)
check_match "vhpc history lists the old database's job, usage unknown (null, not 0)" \
	'"id":'$OLD',.*"name":"old-job","state":"COMPLETED","exit_status":0,.*"guests":1,"nodes":\["n1"\],.*"elapsed":60,"cpu_usec":null,"cpu_guests":0,"mem_peak":null,"mem_guests":0' "$old"

# -- a job of known cost: N CPU-seconds and MIB MiB in each of its 2 guests
id=$(cd "$VHPC_TOP" && vc submit --json -N 2 -n 2 --vcpus 1 --mem 512M -- "$BURN" $N $MIB | jq -r .id)
step "a 2-guest job of known cost is submitted" test -n "$id"
vc wait "$id" >/dev/null 2>&1
step_eq "it completes" 0 "$?"
step_eq "each guest burned its $N CPU-seconds" 2 "$(vc output "$id" | grep -c "^cpuburn: $N\.[0-9]* s of CPU, $MIB MiB")"
have_usage() { [ "$(hist "$1" | jq -r .cpu_guests)" = "$2" ]; }
check "both nodes' reports of its usage arrive (teardown)" poll_until 30 have_usage "$id" 2
rec=$(hist "$id")
diag "record: $rec"
cpu=$(echo "$rec" | jq -r .cpu_usec)
want=$((N * 2 * 1000000))
diag "CPU time recorded: $cpu us, for $((N * 2)) s burned (container guests, 2-core VM)"
check "its CPU time is at least the $((N * 2)) s its 2 guests burned ($cpu us)" test "$cpu" -ge "$want"
check "... and at most $((TOL_US / 1000)) ms more (what else ran in the guests: $(( (cpu - want) / 1000 )) ms)" \
	test "$cpu" -le $((want + TOL_US))
peak=$(echo "$rec" | jq -r .mem_peak)
diag "peak memory recorded: $peak bytes, for $MIB MiB touched"
check "its peak memory is at least the $MIB MiB a guest touched ($((peak >> 20)) MiB)" test "$peak" -ge $((MIB << 20))
check "... and below the job's limit of 512 MiB" test "$peak" -lt $((512 << 20))
check_eq "both guests' numbers are in" "2 2" "$(echo "$rec" | jq -r '"\(.cpu_guests) \(.mem_guests)"')"
check_eq "user, state, exit status, guests, nodes" '0 COMPLETED 0 2 ["n1","n2"]' \
	"$(echo "$rec" | jq -c -r '"\(.uid) \(.state) \(.exit_status) \(.guests) \(.nodes)"')"
el=$(echo "$rec" | jq -r .elapsed)
check "its elapsed time is the job's ($el s: ended - started)" test "$el" -ge 1 -a "$el" -le 60
row=$(vc history | grep -E "^ +$id ")
check_match "the table shows it: user, state, exit, guests, nodes, elapsed, CPU, peak memory" \
	"^ +$id +root +job +COMPLETED +0 +2 +n1,n2 +0:00:[0-9]{2} +[4-5]\.[0-9]{2}s +[0-9.]+ MiB +[0-9]{4}-" "$row"

# -- users see their own jobs; root sees all
U=vhpch$$
chmod 755 "$T"
mkdir -p "$T/home"
useradd -m -d "$T/home/$U" -U -s /bin/sh "$U" || { fail "useradd $U"; done_testing; exit 1; }
at_exit_said "remove_user '$U'"
uid=$(id -u "$U") gid=$(id -g "$U") H=$T/home/$U
as() { (cd "$H" && cl_in "$CL_HUB" setpriv --reuid "$uid" --regid "$gid" --init-groups env -i PATH="$BIN:/usr/bin:/bin" \
	HOME="$H" VHPC_CONTROLLER="$VHPC_CONTROLLER" VHPC_MUNGE_SOCKET="$VHPC_MUNGE_SOCKET" "$BIN/vhpc" "$@"); }
uj=$(as submit --json -N 1 -- true | jq -r .id)
as wait "$uj" >/dev/null 2>&1
step_eq "user $U's own job completes" 0 "$?"
ids() { jq -r '[.[].id] | map(tostring) | join(" ")'; }
check_eq "the user's history is their job alone" "$uj" "$(as history --json | ids)"
check_match "... and the table shows it as theirs" "^ +$uj +$U +job +COMPLETED" "$(as history | tail -n +2)"
check_eq "the user's --user with their own name" "$uj" "$(as history --json --user "$U" | ids)"
out=$(as history --user root 2>&1)
rc=$?
check_eq "the user's --user root is refused" 125 "$rc"
check_match "... with cancel's denied wording" 'vhpc history: permission denied \(the jobs of uid 0' "$out"
out=$(as cancel "$id" 2>&1)
step_eq "(cancel says the same to them)" 1 "$(grep -c "permission denied" <<<"$out")"
check_eq "root's history: every job" "$OLD $id $uj" "$(vc history --json | ids)"
check_eq "root's --user $U: that user's" "$uj" "$(vc history --json --user "$U" | ids)"
check_eq "root's --user root: root's" "$OLD $id" "$(vc history --json --user 0 | ids)"
out=$(vc history --user nosuchuser$$ 2>&1)
check_match "an unknown user is named" "^vhpc history: --user 'nosuchuser$$': no such user" "$out"

# -- --since: ages, dates and times, unix time
check_eq "--since 1h leaves out the job that ended 2 h ago" "$id $uj" "$(vc history --json --since 1h | ids)"
check_eq "--since 3h takes it" "$OLD $id $uj" "$(vc history --json --since 3h | ids)"
iso=$(date -u -d @$((now - 5400)) +%Y-%m-%dT%H:%M:%SZ)
check_eq "--since $iso (UTC)" "$id $uj" "$(vc history --json --since "$iso" | ids)"
loc=$(date -d @$((now - 9000)) '+%Y-%m-%d %H:%M')
check_eq "--since '$loc' (local time)" "$OLD $id $uj" "$(vc history --json --since "$loc" | ids)"
check_eq "--since @UNIXTIME in the future: none" 0 "$(vc history --json --since @$((now + 86400)) | jq length)"
for bad in 5x 2026-02-30 2026-12-05T25:00 ''; do
	out=$(vc history --since "$bad" 2>&1)
	rc=$?
	check_match "--since '$bad' is refused, naming it" "^2 vhpc history: --since '$bad': " "$rc $out"
done
out=$(vc history --json)
check_eq "--json is a JSON array of the 3 records" true \
	"$(jq 'type == "array" and length == 3 and all(.[]; has("cpu_usec") and has("mem_peak"))' <<<"$out")"

# -- a node dies under a job: its guest's usage is unknown, the other's known
fid=$(vc submit --json -N 2 --vcpus 1 -- sleep 60 | jq -r .id)
step "a 2-node job runs" wait_state "$fid" RUNNING 30
cl_node_kill 2 KILL
step "node 2 is killed: the job ends NODE_FAIL" wait_state "$fid" NODE_FAIL 30
check "node 1's report arrives" poll_until 30 have_usage "$fid" 1
rec=$(hist "$fid")
check_match "the dead node's guest counts as unknown: 1 of 2 guests measured" '"cpu_guests":1,.*"mem_guests":1' "$rec"
check_match "the table says so" "^ +$fid +root +job +NODE_FAIL +125 +2 +n1,n2 .*s \(1/2\) .* MiB \(1/2\) " "$(vc history | grep -E "^ +$fid ")"
# Node 2 comes back, takes its part of the job over and removes it.
cl_node_up 2 || fail "node 2 restarts"
step "every node has removed every job" cl_wait_nodes_idle 30
# Test clusters of others may run beside: what is machine-wide is looked
# for by this cluster's job ids (base 36 in a node's names).
b36() { local n=$1 d=0123456789abcdefghijklmnopqrstuvwxyz s=; while [ "$n" -gt 0 ]; do s=${d:n%36:1}$s; n=$((n / 36)); done; echo "$s"; }
ours_left() {
	local j k
	for j in "$id" "$uj" "$fid"; do
		k=$(b36 "$j")
		ls /run/netns /dev/shm 2>/dev/null | grep -E "^vhpc-${k}x[0-9a-z]+(-|$)"
		find /sys/fs/cgroup -maxdepth 3 -type d -path "*/vhpc/${k}x*" 2>/dev/null
	done
	cl_leftovers | grep -E '^(n[0-9]|mounts)' | grep -vE '^n[0-9] (jobs 0 runc 0|vxlan 0)$|^mounts 0$'
}
step_eq "nothing of the jobs is left (netns, shm, cgroups, job dirs, runc, VXLANs, mounts)" "" "$(ours_left)"
done_testing
