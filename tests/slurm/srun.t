#!/usr/bin/env bash
# timeout: 240
# vhpc under a real Slurm (Debian's slurmctld and slurmd, three nodes in
# network namespaces, a munged of the test's own; tests/slurm/slurm-lib.sh):
# `srun --vhpc-image=IMG` runs each task in a vhpc container guest of its
# node, as the job's user in its folder, with Slurm's exit codes, signals,
# stdin and output files; placement stays on the CPUs Slurm gave the job;
# a bad image or option fails at srun with the reason; nothing is left.
. "$(dirname "$0")/../lib.sh"
need_root
SL=vss$$
. "$(dirname "$0")/slurm-lib.sh"
sl_need
T=$SL_DIR

t0=$(date +%s%N)
sl_test_up 3
ok "the test's user and a Slurm cluster of 3 nodes come up ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"

# -- the guests' names, not the nodes'
out=$(sl_user srun -N 2 --vhpc-image=default hostname 2>"$T/err")
rc=$?
check_eq "srun -N 2 --vhpc-image=default hostname exits 0" 0 "$rc"
[ "$rc" = 0 ] || diag "$(cat "$T/err")"
check_eq "it prints the guests' names, one per node, not the nodes'" "g0 g1" "$(echo "$out" | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "the same srun without --vhpc-image prints the nodes'" "n1 n2" \
	"$(sl_user srun -N 2 -w n1,n2 hostname 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//')"

# -- the job's user, its folder, its environment, its network
out=$(sl_user srun -N 2 -n 4 --vhpc-image=default sh -c \
	'echo "$SLURM_PROCID $(hostname) $(id -u):$(id -g) $(pwd) $(cat /proc/self/ns/net | wc -c) $(ip -4 -o addr show eth0 2>/dev/null | awk "{print \$4}")"' 2>"$T/err")
check_eq "four tasks on two nodes run" 4 "$(echo "$out" | grep -c .)"
check_eq "each runs as the job's user ($uid:$gid)" 4 "$(echo "$out" | grep -c " $uid:$gid ")"
check_eq "each runs in the job's folder" 4 "$(echo "$out" | awk -v w="$W" '$4 == w' | wc -l)"
check_eq "the tasks are in four guests g0..g3" "g0 g1 g2 g3" "$(echo "$out" | awk '{print $2}' | sort -u | tr '\n' ' ' | sed 's/ $//')"
sl_user srun -N 2 -n 4 --vhpc-image=default sh -c 'echo $(hostname) $(readlink /proc/self/ns/net) $(readlink /proc/self/ns/uts)' \
	>"$T/ns" 2>/dev/null
check_eq "each guest has a network and UTS namespace of its own" 4 "$(awk '{print $2}' "$T/ns" | sort -u | wc -l)"
check_eq "and none is the node's" 0 "$(grep -c "$(readlink /proc/self/ns/net)" "$T/ns")"
out=$(sl_user srun -N 2 -n 2 --vhpc-image=default sh -c 'ping -c 1 -W 2 g1 >/dev/null && echo reach' 2>/dev/null)
check_eq "guests on two nodes reach each other over the job network (VXLAN)" "reach reach" "$(echo $out)"

# -- exit codes, signals, stdin, output files
sl_user srun -N 1 --vhpc-image=default sh -c 'exit 7' 2>/dev/null
check_eq "a task's exit code is srun's" 7 "$?"
sl_user srun -N 1 --vhpc-image=default sh -c 'kill -USR1 $$' 2>"$T/err"
check_eq "a task killed by a signal ends srun as Slurm says (128+10)" 138 "$?"
check_match "and Slurm names the signal" "User defined signal 1" "$(cat "$T/err")"
check_eq "stdin reaches the task, and its end too" "hello" "$(echo hello | sl_user timeout 30 srun -N 1 --vhpc-image=default cat 2>/dev/null)"
sl_user srun -N 2 -n 2 --vhpc-image=default -o "out.%t" -e "err.%t" sh -c 'echo to-out $(hostname); echo to-err >&2' 2>/dev/null
check_eq "srun -o out.%t: each task's output lands in its file" "to-out g0|to-out g1" "$(cat "$W/out.0" "$W/out.1" 2>/dev/null | tr '\n' '|' | sed 's/|$//')"
check_eq "and its stderr in err.%t" "to-err to-err" "$(cat "$W/err.0" "$W/err.1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
check_eq "the files are the user's" "$uid:$gid" "$(stat -c %u:%g "$W/out.0" 2>/dev/null)"
# The signal goes once the task says its trap is set (a user's sleep seen
# in ps could be a task of an earlier srun still going away).  Slurm signals
# every process of the step, the sleep too: one that died of it first let
# the shell's wait end 0 before its own signal came (srun ended 0 with no
# output, in a clean-clone run and in CI), so the sleep ignores USR1 and
# the trap ends it.
sl_user srun -N 1 --vhpc-image=default sh -c 'trap "kill \$! 2>/dev/null; echo got-usr1; exit 3" USR1; echo trap-set; (trap "" USR1; exec sleep 30) & wait' >"$T/sig" 2>/dev/null &
spid=$!
for ((i = 0; i < 300; i++)); do grep -q '^trap-set$' "$T/sig" 2>/dev/null && break; sleep 0.1; done
t0=$(date +%s%N)
kill -USR1 $(pgrep -u "$U" -x srun)
wait $spid
check_eq "a signal srun forwards (USR1) reaches the task in its guest, whose exit code comes back" "3 got-usr1" "$? $(grep -v '^trap-set$' "$T/sig")"
diag "srun ended $(( ($(date +%s%N) - t0) / 1000000 )) ms after SIGUSR1"

# -- placement: within the CPUs Slurm gave the job
sl_user srun -N 1 -n 1 -w n3 --vhpc-image=default sleep 20 >/dev/null 2>&1 &
hold=$!
for ((i = 0; i < 100; i++)); do [ -n "$(ls "$SL_DIR/run-n3/jobs" 2>/dev/null)" ] && [ -f "$SL_DIR"/run-n3/slurm/*.state ] && grep -q 'status ready' "$SL_DIR"/run-n3/slurm/*.state && break; sleep 0.1; done
out=$(sl_user srun -N 1 -n 1 -w n3 --vhpc-image=default sh -c 'grep Cpus_allowed_list /proc/self/status' 2>/dev/null | awk '{print $2}')
first=$(sed -n 's/^guest [0-9]* [0-9]* [^ ]* \([0-9,-]*\) .*/\1/p' "$SL_DIR"/run-n3/slurm/*.state 2>/dev/null | head -1)
check "a second job on node n3 runs on the other core than the first ($first, $out)" test -n "$first" -a -n "$out" -a "$first" != "$out"
# Killing srun leaves the job's step running to its end: cancel the job.
sl_user scancel -n sleep 2>/dev/null
kill $hold 2>/dev/null; wait $hold 2>/dev/null

# -- a bad image or option fails at srun, before any job exists
jobs_before=$(grep -c . "$SL_DIR/jobcomp.txt" 2>/dev/null)
sl_user srun -N 1 --vhpc-image=nosuch hostname >/dev/null 2>"$T/err"
rc=$?
check "srun --vhpc-image=nosuch fails" test "$rc" != 0
check_match "it says the image is unknown and where to look" "vhpc: no image 'nosuch' \(.vhpc image list" "$(cat "$T/err")"
sl_user srun -N 1 --vhpc-image=default --vhpc-mem=3X hostname >/dev/null 2>"$T/err"
check_match "--vhpc-mem=3X fails with what is expected" "vhpc: --vhpc-mem '3X': expected memory per guest from 64M to 4T" "$(cat "$T/err")"
sl_user env SLURM_VHPC_DRIVER=xen srun -N 1 --vhpc-image=default hostname >/dev/null 2>"$T/err"
check_match "a bad default from the environment names its variable" "vhpc: SLURM_VHPC_DRIVER 'xen': expected auto, container or kvm" "$(cat "$T/err")"
sl_user sbatch --vhpc-image=nosuch --wrap hostname >/dev/null 2>"$T/err"
check_match "sbatch --vhpc-image=nosuch is refused the same way" "vhpc: no image 'nosuch'" "$(cat "$T/err")"
check_eq "none of them made a job" "$jobs_before" "$(grep -c . "$SL_DIR/jobcomp.txt" 2>/dev/null)"
out=$(sl_user env SLURM_VHPC_IMAGE=default srun -N 1 hostname 2>/dev/null)
check_eq "SLURM_VHPC_IMAGE=default makes srun's tasks run in guests" "g0" "$out"
check_match "srun --help lists the options" "--vhpc-image=IMG.*--vhpc-driver=NAME.*--vhpc-vcpus=N.*--vhpc-mem=SIZE.*--vhpc-no-vmshm.*--vhpc-no-single-copy.*--vhpc-rdma.*--vhpc-no-rdma.*--vhpc-device=CLASS\[:N\]" \
	"$(sl_in "$SL_HUB" srun --help 2>&1 | tr '\n' ' ')"

# -- the fabric and devices (this cluster has neither)
sl_user srun -N 1 --vhpc-image=default --vhpc-device=../../dev/mem hostname >/dev/null 2>"$T/err"
check_match "--vhpc-device with a path fails at srun, naming the option" "vhpc: --vhpc-device: device '../../dev/mem'" "$(cat "$T/err")"
sl_user srun -N 1 --vhpc-image=default --vhpc-device=gpu:99 hostname >/dev/null 2>"$T/err"
check_match "--vhpc-device=gpu:99 fails at srun with the range" "vhpc: --vhpc-device: device 'gpu:99': expected a count of 1..16" "$(cat "$T/err")"
out=$(sl_user srun -N 1 --vhpc-image=default --vhpc-no-rdma hostname 2>/dev/null)
check_eq "--vhpc-no-rdma runs over TCP" "g0" "$out"
sl_user srun -N 1 --vhpc-image=default --vhpc-rdma hostname >/dev/null 2>"$T/err"
rc=$?
check "--vhpc-rdma on nodes without a fabric fails" test "$rc" != 0
check_match "... saying the node has none" "rdma: node n[0-9] has no fabric" "$(cat "$T/err")"
sl_user srun -N 1 --vhpc-image=default --vhpc-device=gpu hostname >/dev/null 2>"$T/err"
check "--vhpc-device=gpu on nodes without functions fails" test "$?" != 0
check_match "... saying so" "1 gpu function per guest: node n[0-9] has too few" "$(cat "$T/err")"

# -- nothing is left
sl_wait_empty 30
sleep 1
check_eq "nothing of the jobs is left on any node" "$before" "$(sl_leftovers)"
[ "$before" = "$(sl_leftovers)" ] || diag "before:" "$before" "after:" "$(sl_leftovers)"
done_testing
