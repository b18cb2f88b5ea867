#!/usr/bin/env bash
# timeout: 300
# Batch jobs, cancel and crashes under Slurm with vhpc guests
# (tests/slurm/slurm-lib.sh): an sbatch job with two steps completes in
# the same guests; scancel mid-job leaves nothing on any node; a slurmd
# killed with -9 and restarted mid-job leaves the job running; when the
# node's Slurm and vhpc-slurmjob die together, what they left is swept by
# the node's next prolog or epilog.
. "$(dirname "$0")/../lib.sh"
need_root
SL=vsb$$
. "$(dirname "$0")/slurm-lib.sh"
sl_need
T=$SL_DIR

sl_test_up 3

# guest_inits JOB NODE: pids of the job's guest inits on node nNODE
guest_inits() { sed -n 's/^guest [0-9]* \([0-9]*\) .*/\1/p' "$SL_DIR/run-n$2/slurm/$1.state" 2>/dev/null; }
# alive LOCAL PID...: those still running (not zombies waiting for init to
# reap them) in the cgroups of the node agent's job LOCAL (a pid alone may
# have been reused)
alive() {
	local job=$1 p
	shift
	for p in "$@"; do
		grep -qs ":/vhpc/$job/" /proc/"$p"/cgroup && [ "$(awk '{print $3}' /proc/"$p"/stat 2>/dev/null)" != Z ] &&
			echo "$p"
	done
}

# -- an sbatch job with two steps
cat >"$W/two.sh" <<'EOF'
#!/bin/sh
srun sh -c 'echo "step 0: $(hostname) $(readlink /proc/self/ns/pid)"'
srun -n 2 sh -c 'echo "step 1: $(hostname) $(readlink /proc/self/ns/pid)"'
EOF
chmod 755 "$W/two.sh"
id=$(sl_user sbatch --parsable -N 2 -n 2 --vhpc-image=default -o "$W/two.out" "$W/two.sh" 2>"$T/err")
check_match "sbatch -N 2 --vhpc-image=default takes a two-step script" '^[0-9]+$' "$id"
sl_wait_empty 60
check_match "the job completed, exit code 0" "JobId=$id .*JobState=COMPLETED .*ExitCode=0:0" "$(cat "$SL_DIR/jobcomp.txt")"
check_eq "both steps ran in the job's guests g0 and g1" "step 0: g0|step 0: g1|step 1: g0|step 1: g1" \
	"$(sed 's/ pid:.*//' "$W/two.out" | sort | tr '\n' '|' | sed 's/|$//')"
check_eq "in the same guests for both steps (one pid namespace per guest)" 2 \
	"$(awk '{print $4}' "$W/two.out" | sort -u | wc -l)"
check_match "the batch script itself ran on the node, not in a guest" "^n[1-3]$" \
	"$(sl_user sbatch --parsable --wait -N 1 --vhpc-image=default -o "$W/host.out" --wrap hostname >/dev/null 2>&1; cat "$W/host.out")"

# -- a step asking for other guests than its job's is refused, with the job's
out=$(sl_user sbatch --parsable --wait -N 1 --vhpc-image=default -o "$W/other.out" \
	--wrap 'srun --vhpc-mem=1G hostname; echo "srun exit $?"' 2>&1)
check_match "an srun inside the job with another --vhpc-mem fails with the job's options" \
	"vhpc: this step's --vhpc-\* options differ from its job's \(image=default driver= vcpus=0 mem=0 vmshm=1 rdma=auto devices= single_copy=1\).*srun exit [1-9]" \
	"$(tr '\n' ' ' <"$W/other.out")"

# -- scancel mid-job
cat >"$W/long.sh" <<'EOF'
#!/bin/sh
srun sleep 300
EOF
chmod 755 "$W/long.sh"
id=$(sl_user sbatch --parsable -N 2 -n 4 -w n1,n2 --vhpc-image=default -o /dev/null "$W/long.sh" 2>"$T/err")
check "a long job's guests become ready on both nodes" sl_ready "$id" 1
sl_ready "$id" 2
inits="$(guest_inits "$id" 1) $(guest_inits "$id" 2)"
check_eq "two guests on each node" 4 "$(echo $inits | wc -w)"
# The job network knows where every guest is (the layout every node
# computes): static entries to the other node, and nothing learnt or
# flooded, so a frame for a MAC the job does not have goes nowhere.
for n in 1 2; do
	o=$((3 - n)) ns=vhpc-${id}s$((n - 1))
	fdb=$(ip netns exec "$ns" bridge fdb show dev vxlan0 2>&1)
	check_match "n$n: vxlan0 as a bridge port neither learns nor floods unknown unicast" "learning off .*flood off" \
		"$(ip netns exec "$ns" bridge -d link show dev vxlan0 2>&1)"
	check_eq "n$n: vxlan0 names the two guests of n$o, to n$o's address" 2 \
		"$(echo "$fdb" | grep -v '^00:00:00:00:00:00' | grep -c "dst 198.18.2.1$o .*permanent")"
	check_eq "n$n: and nothing it learnt (every entry is permanent or static)" 0 \
		"$(echo "$fdb" | grep -Evc ' (permanent|static)$|^$')"
	diag "n$n vxlan0: $(echo "$fdb" | tr '\n' ';')"
done
t0=$(date +%s%N)
sl_in "$SL_HUB" scancel "$id"
sl_wait_empty 30
sleep 1
diag "scancel to nothing left: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check_eq "scancel mid-job: nothing is left on any node" "$before" "$(sl_leftovers)"
check_eq "the guests' inits are gone" "" "$(alive "${id}s0" $inits; alive "${id}s1" $inits)"

# -- kill -9 of a slurmd mid-job: its steps run on; the job ends normally
id=$(sl_user sbatch --parsable -N 2 -n 4 -w n1,n2 --vhpc-image=default -o "$W/k1.out" --wrap \
	'srun sh -c "sleep 4; echo done \$(hostname)"' 2>"$T/err")
sl_ready "$id" 2
sl_node_kill 2
sleep 1
check "node n2's guests run on without its slurmd" test -n "$(alive "${id}s1" $(guest_inits "$id" 2))"
sl_node_up 2
sl_wait_empty 60
check_eq "the job finishes in all four guests after the restart" "done g0|done g1|done g2|done g3" \
	"$(sort "$W/k1.out" 2>/dev/null | tr '\n' '|' | sed 's/|$//')"
sleep 1
check_eq "and leaves nothing on any node" "$before" "$(sl_leftovers)"

# -- node n2's Slurm and vhpc-slurmjob die (kill -9 of everything in the
# node's namespace); its guests outlive them
id=$(sl_user sbatch --parsable -N 2 -n 4 -w n1,n2 --vhpc-image=default -o /dev/null "$W/long.sh" 2>"$T/err")
sl_ready "$id" 2
inits=$(guest_inits "$id" 2)
# All at once, as when the node's software crashes: stopped first, then
# killed.  Killed one by one, the holder could see its extern step end
# (the pidfd it polls) before its own SIGKILL came, and remove the guests
# itself as it should then: one of the two guests was gone in 3 of 14 runs.
procs=$(sl_node_procs 2)
kill -STOP $procs
kill -9 $procs
sleep 1
n=$(alive "${id}s1" $inits | wc -l)
check_eq "after kill -9 of node n2's slurmd, slurmstepds and vhpc-slurmjob its two guests still run" 2 "$n"
[ "$n" = 2 ] || for p in $inits; do
	diag "guest init $p: state and exit code $(awk '{print $3, $NF}' /proc/"$p"/stat 2>&1)"
done
check "and the job's dir is there, unlocked" test -d "$SL_DIR/run-n2/jobs/${id}s1"
sl_node_up 2
sl_wait_idle 1
sl_in "$SL_HUB" scancel "$id"
sl_wait_empty 60
# The job's epilog on n2, if Slurm still runs one, or the next job's
# prolog there sweeps what is left.
check_eq "the next job on node n2 runs" "g0" \
	"$(sl_user timeout 60 srun -N 1 -w n2 --vhpc-image=default hostname 2>/dev/null)"
sleep 1
check_eq "the dead job's guests are gone" "" "$(alive "${id}s1" $inits)"
check_eq "and nothing is left on any node" "$before" "$(sl_leftovers)"
[ "$before" = "$(sl_leftovers)" ] || diag "before:" "$before" "after:" "$(sl_leftovers)"
check_match "the sweep said what it removed" "job ${id}s1: removed network namespace vhpc-${id}s1" \
	"$(cat "$SL_DIR"/run-n2/slurm/*.log 2>/dev/null)"
done_testing
