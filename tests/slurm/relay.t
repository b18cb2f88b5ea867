#!/usr/bin/env bash
# timeout: 180
# `vhpc-slurmjob task`, the relay that runs a Slurm task inside a guest
# that is a VM (a task cannot join a VM's namespaces), against a running
# job's container guest here (tests/slurm/slurm-lib.sh): as the job's user,
# the program runs in the guest, in the user's folder, with the caller's
# environment, stdin (to its end, megabytes of it), stdout, stderr, exit
# status and forwarded signals; a wrong key is refused.  The same relay
# through a VM's vsock bridge is tests/slurm/kvm.t (virtualization lab).
. "$(dirname "$0")/../lib.sh"
need_root
SL=vsr$$
. "$(dirname "$0")/slurm-lib.sh"
sl_need
T=$SL_DIR

sl_test_up 1
id=$(sl_user sbatch --parsable -N 1 -n 1 --vhpc-image=default -o /dev/null --wrap 'sleep 300' 2>"$T/err")
state=$SL_DIR/run-n1/slurm/$id.state
check "a job's guest is ready" sl_ready "$id" 1
sock=$(sed -n 's/^guest 0 [0-9]* [^ ]* [^ ]* [^ ]* [^ ]* \([^ ]*\) 0$/\1/p' "$state")
key=$(sed -n 's/^key //p' "$state")
relay() { sl_user env FOO=bar "$BIN/vhpc-slurmjob" task --sock "$sock" --key "$key" --guest g0 -- "$@"; }

out=$(echo from-stdin | relay sh -c 'cat; echo "$(hostname) $(pwd) $FOO"; touch made-in-g0; echo to-err >&2; exit 3' 2>"$T/err")
rc=$?
check_eq "the program's exit status is the relay's" 3 "$rc"
check_eq "it read the relay's stdin and ran in guest g0, in the user's folder, with the caller's environment" \
	"from-stdin|g0 $W bar" "$(echo "$out" | tr '\n' '|' | sed 's/|$//')"
check_eq "what it made there is the user's on the host (the guest's root is the user)" "$uid:$gid" \
	"$(stat -c %u:%g "$W/made-in-g0" 2>/dev/null)"
check_eq "its stderr is the relay's stderr" "to-err" "$(cat "$T/err")"
head -c 3000000 /dev/urandom >"$W/in"
chmod 644 "$W/in"
check_eq "3 MB through stdin and back out, intact" "$(sha256sum <"$W/in" | cut -c1-64)" \
	"$(relay cat <"$W/in" 2>/dev/null | sha256sum | cut -c1-64)"
relay sh -c 'trap "kill \$! 2>/dev/null; echo got-usr1; exit 4" USR1; (trap "" USR1; exec sleep 30) & wait' >"$T/sig" 2>/dev/null </dev/null &
for ((i = 0; i < 100; i++)); do
	p=$(pgrep -u "$U" -f 'vhpc-slurmjob task')
	[ -n "$p" ] && ps -eo user:32,comm | awk -v u="$U" '$1 == u && $2 == "sleep"' | grep -q . && break
	sleep 0.1
done
kill -USR1 $p
wait $!
check_eq "a signal to the relay reaches the program in the guest" "4 got-usr1" "$? $(cat "$T/sig")"
relay sh -c 'kill -TERM $$' </dev/null
check_eq "a program killed by SIGTERM ends the relay with 128+15" 143 "$?"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/wrong.key"
chown "$uid:$gid" "$W/wrong.key"
chmod 600 "$W/wrong.key"
out=$(sl_user "$BIN/vhpc-slurmjob" task --sock "$sock" --key "$W/wrong.key" --guest g0 -- true 2>&1 </dev/null)
check_eq "a wrong key: exit 255" 255 "$?"
check_match "and the relay says which guest refused it" "vhpc: guest g0: .*(wrong job key|closed)" "$out"

sl_in "$SL_HUB" scancel "$id"
sl_wait_empty 30
sleep 1
check_eq "nothing is left" "$before" "$(sl_leftovers)"
done_testing
