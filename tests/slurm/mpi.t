#!/usr/bin/env bash
# timeout: 300
# MPI under Slurm in vhpc guests (tests/slurm/slurm-lib.sh): `srun
# --mpi=pmix -N 2 -n 4 vhpc-mpibench` with Debian's Open MPI, four ranks in
# four container guests, two per node, PMIx reaching Slurm's server from
# inside the guests, vmshm between the guests of a node; and an sbatch
# script whose `vhpc mpirun` runs mpirun in guest 0 with vhpc-rsh, for
# sites without PMIx, with nothing of Slurm's environment in the ranks.
. "$(dirname "$0")/../lib.sh"
need_root
SL=vsm$$
. "$(dirname "$0")/slurm-lib.sh"
sl_need
for p in vhpc-mpibench vhpc-imbcheck; do [ -x "$BIN/$p" ] || skip_all "$p is not built"; done
sl_in_list() { sl_in "$SL_HUB" srun --mpi=list 2>&1; }
T=$SL_DIR

sl_test_up 3
sl_in_list | grep -q pmix || skip_all "this Slurm has no PMIx plugin (srun --mpi=list)"
# Three nodes of two CPUs share this machine's cores: ranks that wait
# must yield, or they spin each other out.
export OMPI_MCA_mpi_yield_when_idle=1

# -- srun --mpi=pmix
t0=$(date +%s%N)
sl_user env OMPI_MCA_btl_vmshm_verbose=1 srun --mpi=pmix -N 2 -n 4 --vhpc-image=default \
	vhpc-mpibench -show-hosts -msglog 0:12 PingPong Sendrecv >"$T/out" 2>"$T/err"
rc=$?
diag "srun --mpi=pmix -N 2 -n 4 vhpc-mpibench: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check_eq "srun --mpi=pmix -N 2 -n 4 --vhpc-image=default vhpc-mpibench exits 0" 0 "$rc"
[ "$rc" = 0 ] || diag "$(tail -20 "$T/err")"
check "it prints IMB tables that parse (PingPong at 2, Sendrecv at 2 and 4)" \
	vhpc-imbcheck -expect PingPong@2 -expect Sendrecv@2 -expect Sendrecv@4 "$T/out"
grep '^# rank ' "$T/out" >"$T/ranks"
check_eq "four ranks report where they run" 4 "$(wc -l <"$T/ranks")"
check_eq "in four guests g0..g3" "g0 g1 g2 g3" "$(sed -n 's/.* host=\(g[0-9]*\) .*/\1/p' "$T/ranks" | sort -u | tr '\n' ' ' | sed 's/ $//')"
check_eq "each in a network namespace of its own" 4 "$(sed -n 's/.* netns=\([0-9]*\) .*/\1/p' "$T/ranks" | sort -u | wc -l)"
# Slurm's block distribution: ranks 0, 1 on the first node, 2, 3 on the
# second; guests g0, g1 are the first node's.
check_match "ranks 0 and 1 are in g0 and g1 (node 1), 2 and 3 in g2 and g3 (node 2)" \
	"rank 0: host=g0 .*rank 1: host=g1 .*rank 2: host=g2 .*rank 3: host=g3 " "$(tr '\n' ' ' <"$T/ranks")"
check_eq "the co-located guests talk through vmshm (both pairs, both ways)" 4 \
	"$(grep -c 'using vmshm for peer' "$T/err")"
check_match "the vmshm region is one per node, shared by its two guests" \
	"host '[^']*:n1' guest 'g[01]'.*host '[^']*:n1' guest 'g[01]'" "$(grep 'region /run/vhpc-vmshm' "$T/err" | sort | tr '\n' ' ')"

# The region has a slot for every rank of the job, on every node (the
# vmshm BTL's VHPC_VMSHM_SLOTS): until 2026-12-05 a Slurm job's counted
# only its node's guests, 2 here for 4 ranks.
sl_user srun -N 2 -n 4 --vhpc-image=default sh -c 'echo "SLOTS $VHPC_VMSHM_SLOTS"' >"$T/slots" 2>"$T/err"
check_eq "every task of a 2-node, 4-guest job sees 4 vmshm slots" "SLOTS 4 SLOTS 4 SLOTS 4 SLOTS 4" \
	"$(sort "$T/slots" | tr '\n' ' ' | sed 's/ $//')"

# glibc's memcpy off rep movsb where the node agent measures it slow at
# short distances (lib/vmshm/vmshm_copyprobe.h): Slurm tasks in vmshm guests
# get what `vhpc run`'s guests get on this machine.
tun='echo "TUN [$GLIBC_TUNABLES]"'
sl_user srun --mpi=pmix -N 1 -n 2 -w n1 --vhpc-image=default sh -c "$tun" >"$T/tun" 2>"$T/err"
exp=$(vhpc run -N 2 -n 2 -- sh -c "$tun" 2>"$T/tun-run.err" | sort -u)
check_match "vhpc run's two vmshm guests say what they got" '^TUN \[.*\]$' "$exp"
check_eq "Slurm tasks in two vmshm guests of a node got the same ($exp)" "$exp" "$(sort -u "$T/tun")"

# -- two ranks in one guest (vader there), and two guests without vmshm (TCP)
sl_user srun --mpi=pmix -N 1 -n 2 -w n1 --vhpc-vcpus=2 --vhpc-image=default \
	vhpc-mpibench -show-hosts -msglog 0:12 PingPong >"$T/one" 2>"$T/err"
check_eq "--vhpc-vcpus=2: two ranks in one guest, g0" "g0 g0" "$(sed -n 's/^# rank [01]: host=\(g[0-9]*\) .*/\1/p' "$T/one" | tr '\n' ' ' | sed 's/ $//')"
check "and their PingPong table parses" vhpc-imbcheck -expect PingPong@2 "$T/one"
sl_user env OMPI_MCA_btl_base_verbose=100 srun --mpi=pmix -N 1 -n 2 -w n1 --vhpc-no-vmshm --vhpc-image=default \
	vhpc-mpibench -show-hosts -msglog 0:12 PingPong >"$T/novm" 2>"$T/err"
check "--vhpc-no-vmshm: two guests of a node still run MPI (their table parses)" vhpc-imbcheck -expect PingPong@2 "$T/novm"
check_eq "over TCP: never vader, which cannot reach into another guest" "0 2" \
	"$(grep -c 'Using vader btl' "$T/err") $(grep -c 'Using tcp btl' "$T/err")"

# -- vhpc mpirun in an sbatch script
cat >"$W/mpirun.sh" <<EOF
#!/bin/sh
$BIN/vhpc mpirun -x OMPI_MCA_mpi_yield_when_idle=1 vhpc-mpibench -show-hosts -msglog 0:10 PingPong
echo "vhpc mpirun exit \$?"
$BIN/vhpc mpirun -n 4 sh -c 'echo "rank \$OMPI_COMM_WORLD_RANK on \$(hostname) slurm_vars=\$(env | grep -c ^SLURM_)"'
EOF
chmod 755 "$W/mpirun.sh"
id=$(sl_user sbatch --parsable -N 2 -n 4 --vhpc-image=default -o "$W/mpirun.out" "$W/mpirun.sh" 2>"$T/err")
check_match "sbatch takes the vhpc mpirun script" '^[0-9]+$' "$id"
sl_wait_empty 120
check_match "vhpc mpirun ran mpirun in guest 0 and exited 0" "vhpc mpirun exit 0" "$(cat "$W/mpirun.out" 2>/dev/null)"
check "its IMB table parses" vhpc-imbcheck -expect PingPong@2 "$W/mpirun.out"
check_eq "its ranks ran in the job's four guests" "g0 g1 g2 g3" \
	"$(sed -n 's/^rank [0-9] on \(g[0-9]\) .*/\1/p' "$W/mpirun.out" | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "with no SLURM_* variable in their environment" 4 "$(grep -c 'slurm_vars=0$' "$W/mpirun.out")"
[ "$(grep -c 'slurm_vars=0$' "$W/mpirun.out")" = 4 ] || diag "$(cat "$W/mpirun.out")"
out=$(cd "$W" && sl_in "$SL_HUB" setpriv --reuid "$uid" --regid "$gid" --init-groups env -u VHPC_SLURM_STATE "$BIN/vhpc" mpirun true 2>&1)
check_match "outside a vhpc Slurm job vhpc mpirun says so" "runs in the batch script of a Slurm job submitted with --vhpc-image" "$out"

sl_wait_empty 30
sleep 1
check_eq "nothing of the jobs is left on any node" "$before" "$(sl_leftovers)"
[ "$before" = "$(sl_leftovers)" ] || diag "before:" "$before" "after:" "$(sl_leftovers)"
done_testing
