#!/usr/bin/env bash
# timeout: 240
# The attack: another user of a node reads a Slurm job's state file.  It
# sits in <run dir>/slurm, a folder every user may pass through (the job's
# own `vhpc mpirun` reads its state there), under a name anyone can guess
# (the job id), and it names the guests' agent sockets, their init pids,
# the job key's path and the environment the tasks get.  On the 1-node
# Slurm of tests/slurm/slurm-lib.sh the job's user runs a batch job; a
# second user tries to read its state and the user's copy of it; the job's
# user reads theirs; both go with the job.
. "$(dirname "$0")/../lib.sh"
need_root
SL=vst$$
. "$(dirname "$0")/../slurm/slurm-lib.sh"
sl_need
T=$SL_DIR

sl_test_up 1
O=${SL}o
useradd -M -d /nonexistent -U -s /bin/sh "$O" || { fail "useradd $O"; done_testing; exit 1; }
at_exit_said "remove_user '$O'"
as_other() { setpriv --reuid "$(id -u "$O")" --regid "$(id -g "$O")" --clear-groups "$@"; }

id=$(sl_user sbatch --parsable -N 1 -n 1 --vhpc-image=default -o /dev/null --wrap 'sleep 300' 2>"$T/err")
check_match "the job's user submits a batch job" '^[0-9]+$' "$id"
check "its guest is ready" sl_ready "$id" 1
state=$SL_DIR/run-n1/slurm/$id.state
user=$SL_DIR/run-n1/slurm/$id.user
got=$(as_other cat "$state" 2>/dev/null)
check_eq "another user cannot read the job's state" "" "$got"
[ -z "$got" ] || diag "what they read:" "$(grep -E '^(key|guest|env OMPI_MCA_btl=)' <<<"$got")"
check_eq "nor the user's copy of it" "" "$(as_other cat "$user" 2>/dev/null)"
check_eq "the state is root's, mode 0600" "0:0 600" "$(stat -c '%u:%g %a' "$state")"
check_eq "the copy is the job's user's, mode 0600" "$uid:$gid 600" "$(stat -c '%u:%g %a' "$user" 2>/dev/null)"
check_match "the job's user reads their copy: the guests, ready" "status ready" \
	"$(sl_in "$SL_HUB" setpriv --reuid "$uid" --regid "$gid" --init-groups cat "$user" 2>&1)"
check_eq "no file of the folder is another user's to read" "" \
	"$(find "$SL_DIR/run-n1/slurm" -type f \( -perm -o+r -o -perm -g+r \) 2>/dev/null)"
sl_in "$SL_HUB" scancel "$id"
sl_wait_empty 60
sleep 1
check "both go with the job" test ! -e "$state" -a ! -e "$user"
check_eq "nothing of the job is left" "$before" "$(sl_leftovers)"
done_testing
