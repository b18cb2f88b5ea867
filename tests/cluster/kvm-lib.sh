# Shared set-up of the kvm cluster tests (tests/cluster/kvm*.t): source
# after tests/lib.sh with CL set.  Checks what they need, brings up a
# 2-node cluster (cluster-lib.sh) and gives them the job's command line
# and its VMs' pids.
need_root
for p in vhpc vhpc-ctld vhpcd vhpc-guestd vhpc-na vhpc-hv; do
	[ -x "$BIN/$p" ] || skip_all "$p is not built"
done
command -v munged >/dev/null || skip_all "munged is not installed"
export VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
# The default image goes into the store with its kvm parts.
CL_KVM=1
[ -e "$VHPC_KERNEL_CACHE/linux-image-cloud-amd64/.complete" ] ||
	skip_all "no kernel package in $VHPC_KERNEL_CACHE (make kernels fetches it during set-up)"
. "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"
T=$CL_DIR
unset VHPC_KVM_ALLOW_EMULATION
lab_no_default_binds

# Heartbeats: nodes may miss 8 s of them, not cluster-lib's 3 s.  Under the
# nested/TCG lab a restarted vhpcd taking its VMs over was seen to send none
# for 3.4 s, and the controller then failed a healthy node's job.
: "${CL_HB_MS:=1000}" "${CL_HB_MISSES:=8}"
cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
# KVM_NODE_ARGS_<I> (set before sourcing): more vhpcd options for node I,
# e.g. more cpus so that two guests fit there.
for i in 1 2; do v=KVM_NODE_ARGS_$i; cl_node_up $i ${!v-} || fail "node $i starts"; done
check "two nodes register" cl_wait_nodes_up 2

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
KVM=(--driver kvm -N 2 -n 2 --vcpus 1 --mem 384M --timeout 600)
# hv_pids JOB: the job's vhpc-hv pids on every node; alive PIDS: those still running
hv_pids() { for f in "$CL_DIR"/run-n*/jobs/"$1"x*/kvm*/pid; do [ -f "$f" ] && echo "$(cat "$f")"; done | sort | tr '\n' ' '; }
alive() { for p in $1; do [ -d /proc/$p ] && echo -n "$p "; done; }
