#!/usr/bin/env bash
# timeout: 600
# lab-kernel: 7.3.4+deb13-amd64
# Slurm jobs on the fabric, by counters (slurm/README.md, "The fabric
# under Slurm"): a Slurm node (tests/slurm/slurm-lib.sh) whose cluster
# file gives it a soft-RoCE fabric on a dummy link of the test's own in the
# node's network namespace (where its vhpc-slurmjob holder runs and makes
# the job's VLAN; jumbo frames, so rxe's MTU is 4096), and `srun
# --mpi=pmix -N 1 -n 2 --vhpc-no-vmshm`, two tasks in two container guests
# doing PingPong (rank-counters.sh):
#   --vhpc-rdma:    the bml takes the ofi BTL, each guest's fab0 sent at
#                   least its rank's PingPong bytes, its rxe device a packet
#                   per 4 KiB or more, the job network (eth0) a small part;
#                   the task may pin its guest's memory (RLIMIT_MEMLOCK);
#   the default:    rdma=auto, on a node whose fabric link exists: the same
#                   (lib/fabric_local.c takes the fabric where the link is);
#   --vhpc-no-rdma: tcp, no fab0 and no RDMA device in the guests.
# Nothing of the jobs is left: no RDMA link, VLAN, netns, holder.
. "$(dirname "$0")/../lib.sh"
need_root
SL=vsf$$
. "$(dirname "$0")/../slurm/slurm-lib.sh"
. "$(dirname "$0")/fabric-lib.sh"
fab_need
sl_need
command -v runc >/dev/null || skip_all "runc is not installed"
[ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] || skip_all "needs cgroup2 alone on /sys/fs/cgroup (the lab's 7.3.4 L1 has it)"
[ -x "$BIN/vhpc-mpibench" ] || skip_all "vhpc-mpibench is not built"
T=$SL_DIR
LINK=vfab$$
# The plugin's config dir (plugstack.conf's config_dir): the fabric on
# LINK, the same name on every node, which only n1 has.
mkdir -p "$T/configs"
cp -r "$VHPC_TOP/configs/." "$T/configs/"
cat >>"$T/configs/cluster.yaml" <<EOF
fabric:
  mode: soft-roce
  link: $LINK
  vlans: 330-339
  pool: 10.216.0.0/16
  prefix: 24
EOF
export VHPC_CONFIG_DIR=$T/configs

sl_test_up 1
sl_in "$SL_HUB" srun --mpi=list 2>&1 | grep -q pmix || skip_all "this Slurm has no PMIx plugin (srun --mpi=list)"
N1=$SL-n1
# The fabric link is the node's: in its network namespace, where its
# holder makes the job's VLAN (the initial namespace's /sys does not see it).
check "node n1 gets its fabric link $LINK (dummy, mtu 9000) in its namespace" \
	sh -c "ip -n $N1 link add $LINK mtu 9000 type dummy && ip -n $N1 link set $LINK up"
at_exit "ip -n $N1 link del $LINK 2>/dev/null"
cp "$FAB_RANK_DIR/rank-counters.sh" "$W/" && chown "$uid:$gid" "$W/rank-counters.sh"
rdma_before=$(rdma link show 2>/dev/null | grep -c 'vhpc-')
node_vlans() { ip -n "$N1" -d link show 2>/dev/null | grep -c 'vlan protocol'; }
vlans_before=$(node_vlans)
# Two ranks of a node share its 2 cores with the lab's daemons.
export OMPI_MCA_mpi_yield_when_idle=1

# job NAME OPTIONS...: two tasks in two guests of n1, PingPong; srun's
# output in $T/NAME.  Under srun the shell has no OMPI_COMM_WORLD_RANK
# (MPI_Init sets it in the rank): the script prints Slurm's task id.
job() {
	local name=$1; shift
	sl_user timeout -k 5 150 env OMPI_MCA_btl_base_verbose=1 srun --mpi=pmix -N 1 -n 2 --vhpc-image=default \
		--vhpc-mem=512M --vhpc-no-vmshm "$@" \
		sh -c 'OMPI_COMM_WORLD_RANK=$SLURM_PROCID; export OMPI_COMM_WORLD_RANK; echo "rank $SLURM_PROCID btl $OMPI_MCA_btl"; exec sh ./rank-counters.sh' \
		>"$T/$name" 2>&1
	rc=$?
	[ $rc = 0 ] || diag "$(tail -n 25 "$T/$name")" "holder.log:" "$(tail -n 15 "$SL_DIR"/run-n1/slurm/holder.log 2>/dev/null)"
}

# fabric_job NAME WHAT OPTIONS...: the job, and the counters of a job on
# the fabric.
fabric_job() {
	local name=$1 what=$2 r f e p m b; shift 2
	job "$name" "$@"
	check_eq "$what: srun -N 1 -n 2 ends well" 0 $rc
	b=$(pingpong_bytes "$T/$name")
	diag "PingPong over verbs between the guests (nested/TCG): $(awk '$1 ~ /^[0-9]+$/ && NF == 4 { printf "%s B %s us %s MB/s; ", $1, $3, $4 }' "$T/$name")"
	check_eq "... both tasks were given the ofi BTL" 2 "$(grep -c '^rank [01] btl .*ofi' "$T/$name")"
	check_match "... the bml took it" 'Using ofi btl' "$(cat "$T/$name")"
	check "... and never tcp" sh -c "! grep -q 'Using tcp btl' '$T/$name'"
	for r in 0 1; do
		f=$(rank_field "$T/$name" $r fab0) e=$(rank_field "$T/$name" $r eth0) p=$(rank_field "$T/$name" $r rxe-pkts)
		diag "rank $r: fab0 $f B, eth0 $e B, rxe $p packets sent; PingPong $b B a rank"
		check "... rank $r's fabric interface sent at least its PingPong bytes (${f:-none} >= $b)" \
			test "$b" -gt 0 -a "${f:--}" != - -a "${f:-0}" -ge "$b"
		check "... its rxe device a packet per 4 KiB or more (${p:-none})" test "${p:--}" != - -a "${p:-0}" -ge $((b / 4096))
		check "... its job network (TCP) a small part (${e:-none} B)" test "${e:-0}" -lt $((b / 10 + 1))
		m=$(sed -n "s/^rank $r memlock //p" "$T/$name" | head -1)
		check_eq "... it may pin its guest's memory (RLIMIT_MEMLOCK = --vhpc-mem)" 536870912 "$m"
	done
}

fabric_job rdma "--vhpc-rdma" --vhpc-rdma --vhpc-driver=container
# No --vhpc-driver either: where kvm could run (the lab), the auto driver
# takes container guests for a job on the fabric (kvm guests get none).
fabric_job auto "the default (rdma=auto, the node has the fabric; driver auto)"
check_match "... whose guests are containers, for the fabric" 'auto picked container: the job uses the RDMA fabric' \
	"$(grep 'job 2s0' "$SL_DIR"/run-n1/slurm/holder.log 2>/dev/null)"

job tcp --vhpc-no-rdma --vhpc-driver=container
check_eq "--vhpc-no-rdma: srun -N 1 -n 2 ends well" 0 $rc
check_eq "... neither task was given the ofi BTL" "0 2" \
	"$(grep -c '^rank [01] btl .*ofi' "$T/tcp") $(grep -c '^rank [01] btl ' "$T/tcp")"
check_match "... the bml took tcp" 'Using tcp btl' "$(cat "$T/tcp")"
for r in 0 1; do
	check_eq "... rank $r's guest has no fabric interface and no RDMA device" "- -" \
		"$(rank_field "$T/tcp" $r fab0) $(rank_field "$T/tcp" $r rxe-pkts)"
done
check "... the job network carried the bytes" test "$(rank_field "$T/tcp" 0 eth0)" -ge "$(pingpong_bytes "$T/tcp")"

sl_wait_empty 60
sleep 1
check_eq "nothing of the jobs is left (netns, run dirs, holders, mounts, cgroups)" "$before" "$(sl_leftovers)"
check_eq "... no RDMA link" "$rdma_before" "$(rdma link show 2>/dev/null | grep -c 'vhpc-')"
check_eq "... no VLAN on the node's fabric link" "$vlans_before" "$(node_vlans)"
done_testing
