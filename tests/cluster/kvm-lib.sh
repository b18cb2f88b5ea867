# Shared set-up of the kvm cluster tests (tests/cluster/kvm*.t): source
# after tests/lib.sh with CL set.  Checks what they need, brings up a
# cluster of KVM_NODES nodes (default 2; cluster-lib.sh) and gives them
# the job's command line and its VMs' pids.
need_cluster vhpc-na vhpc-hv
export VHPC_KERNEL_CACHE=$VHPC_TOP/$B/kernels
[ -e "$VHPC_KERNEL_CACHE/linux-image-cloud-amd64/.complete" ] ||
	skip_all "no kernel package in $VHPC_KERNEL_CACHE (make kernels fetches it during set-up)"
# Where the set-up got to, and when: under TCG it can take most of a
# test's time-out, and a time-out alone (CI, 2026-12-03: kvm-vmshm.t
# printed nothing in 300 s) does not say which step it was in.
setup_t0=$SECONDS
setup_mark() { diag "set-up: $* after $((SECONDS - setup_t0)) s"; }
# The cluster's default image is the squashfs build of the default image,
# kvm parts included (tests/kvm/compact-images; "# lab-prepare:" has the
# lab build it on the host first): its one root file serves as the VMs'
# root disk, a third of the tree's size with its ext4 disk, and every test
# pushes it and both nodes pull it (under TCG: 25 s and 40 s for the tree).
img_dir=$(mktemp -d /tmp/vhpct-kvmimg.XXXXXX)
at_exit "rm -rf '$img_dir'"
# KVM_IMAGE_SCRIPT / KVM_PUSH_IMAGE (set before sourcing): another
# squashfs image of the same shape, e.g. with a test's own program in it.
"${KVM_IMAGE_SCRIPT:-$VHPC_TOP/tests/kvm/compact-images}" "$img_dir" | grep -q '^squashfs 0$' ||
	{ echo "Bail out! the squashfs image does not build: $(tail -n 3 "$img_dir/build-squashfs")"; exit 1; }
setup_mark "the squashfs image is there"
CL_PUSH_IMAGE=${KVM_PUSH_IMAGE:-kvmsquashfs}
. "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"
T=$CL_DIR
unset VHPC_KVM_ALLOW_EMULATION
lab_no_default_binds
# KVM_CLUSTER_EXTRA (set before sourcing): lines added to the cluster
# file the controller and both nodes read (e.g. checkpoints: ...).
if [ -n "${KVM_CLUSTER_EXTRA-}" ]; then
	{ cat "${VHPC_CLUSTER:-$VHPC_TOP/configs/cluster.yaml}"; printf '%s\n' "$KVM_CLUSTER_EXTRA"; } >"$T/cluster-kvm.yaml"
	export VHPC_CLUSTER=$T/cluster-kvm.yaml
fi

# Heartbeats: nodes may miss 8 s of them, not cluster-lib's 3 s.  Under the
# nested/TCG lab a restarted vhpcd taking its VMs over was seen to send none
# for 3.4 s, and the controller then failed a healthy node's job.
: "${CL_HB_MS:=1000}" "${CL_HB_MISSES:=8}"
# A kvm start that fails in the lab is TCG's passing slowness more often
# than what a test provokes: the controller's own pause between attempts.
: "${CL_RETRY_MS:=2000}"
KVM_NODES=${KVM_NODES:-2}
# The controller's store and the nodes' image caches are seeded with what
# an earlier test in the same L1 pushed and pulled, so that a push uploads
# and a node pulls only what is new: under TCG a push of the 90.8-MiB image
# took 11-14 s of every test's set-up, and each node's pull 13-19 s of its
# first job's start.  Objects are named by their sha256 and the store made
# them read-only; a cached image is what a node's pull checked file by file
# against its id.  Only in the lab: the seed lives in L1's own /tmp
# (tests/lab/inside) and goes with the L1; on a host it would be left
# behind.  Uploads and pulls are tested on the host (cluster/images.t,
# signed.t).  KVM_SEED_NODES (set before sourcing): the nodes seeded
# (default all; "none": no node), for a test that needs a node that never
# had the image.
kvm_seed=
[ -n "${VHPC_IN_LAB-}" ] && kvm_seed=/tmp/vhpct-imgseed
cl_net_up "$KVM_NODES" && cl_munge_up && CL_NO_PUSH=1 cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
setup_mark "network, munge and vhpc-ctld up"
[ -n "$kvm_seed" ] && [ -d "$kvm_seed/objects" ] && cp -al "$kvm_seed/objects/." "$CL_DIR/ctld/images/objects/" 2>/dev/null
cl_push_default || { fail "the cluster's image is pushed"; diag "$(tail -n 5 "$CL_DIR/push.log")"; done_testing; exit 1; }
[ -n "$kvm_seed" ] && mkdir -p -m 0700 "$kvm_seed/objects" "$kvm_seed/cache" &&
	cp -al -n "$CL_DIR/ctld/images/objects/." "$kvm_seed/objects/" 2>/dev/null
# kvm_seed_cache_from I: node I's cached images into the seed, at the
# test's end (its bookkeeping, .mnt, .used and .lock, left out: .mnt is
# where the node mounted the image).
kvm_seed_cache_from() {
	local d id e
	for d in "$CL_DIR/cache-n$1"/*; do
		id=${d##*/}
		[[ $id =~ ^[0-9a-f]{64}$ ]] && [ -d "$d" ] && [ ! -e "$kvm_seed/cache/$id" ] || continue
		mkdir -p "$kvm_seed/cache/.$id" &&
			for e in "$d"/*; do cp -al "$e" "$kvm_seed/cache/.$id/" || break; done &&
			mv "$kvm_seed/cache/.$id" "$kvm_seed/cache/$id"
		rm -rf "$kvm_seed/cache/.$id"
	done
}
setup_mark "the image pushed ($(grep -m 1 -o 'lacks [0-9]*[^,;]*' "$CL_DIR/push.log"))"
# Stopped at its time limit (tests/run's timeout sends TERM to the test's
# process group): say where the job was, from the logs the clean-up is
# about to remove.  CI on 2026-12-03 timed out cluster/kvm.t waiting for
# its job after the vhpcd takeover, with nothing to say why.
on_term() {
	diag "stopped at the time limit; the controller's jobs:" "$(vc queue --all 2>&1 | tail -n 4)"
	for f in "$CL_DIR"/ctld.log "$CL_DIR"/n[0-9]*.log; do
		[ -f "$f" ] && diag "--- ${f##*/}, last lines:" "$(tail -n 12 "$f")"
	done
	# The guests still running: their consoles go with the clean-up too
	# (a restored job that stood still until the limit, 2026-12-06, left
	# only "resumed on 2 nodes" to go on).
	for f in "$CL_DIR"/ctld-spool/*; do
		[ -f "$f" ] && diag "--- job output ${f##*/}, last lines:" "$(tail -n 6 "$f")"
	done
	for f in "$CL_DIR"/run-n*/jobs/*/kvm*/hv/serial; do
		[ -f "$f" ] && diag "--- ${f#"$CL_DIR"/}, last lines:" "$(tail -n 15 "$f" | tr -d '\r')"
	done
	exit 130
}
trap on_term TERM
# lab_crashed JOB: an L2 guest of JOB crashed the way only the lab's
# emulation makes it (tests/lab/README.md: TCG delivers an interrupt
# inside VMRUN's window; a triple fault of a guest that had just been
# resumed was seen twice in kvm-ckpt-more.t): stop now (the exit cleanup
# below says it is a lab failure), rather than let every later check fail
# and wait out its bound.
lab_crashed() {
	[ -n "${VHPC_IN_LAB-}" ] || return 0
	case $(job_json "$1") in
	*'triple fault or KVM internal error'*)
		done_testing
		# Not 0: cut short, it must not count as passed (tests/run
		# keeps a lab-failed test that passed all it planned).
		exit 1 ;;
	esac
	return 0
}
# Whatever the test itself looked at: a guest the emulation crashed
# anywhere in it is said so at its end (a time limit and lab_crashed
# included), while the logs are still there (CI's run of 1b45dd8:
# kvm-exec.t's job failed with a guest's triple fault, and its 5 failed
# checks counted as the test's).
at_exit_said 'lab_check "$CL_DIR"/*.log "$T"/*.out'
before=$(cl_leftovers)
# KVM_NODE_ARGS_<I> (set before sourcing): more vhpcd options for node I,
# e.g. more cpus so that two guests fit there.
for ((i = 1; i <= KVM_NODES; i++)); do
	if [ -n "$kvm_seed" ] && [[ " ${KVM_SEED_NODES:-$(seq -s ' ' "$KVM_NODES")} " == *" $i "* ]]; then
		mkdir -p -m 0700 "$CL_DIR/cache-n$i" && cp -al "$kvm_seed/cache/." "$CL_DIR/cache-n$i/" 2>/dev/null
	fi
	v=KVM_NODE_ARGS_$i; cl_node_up $i ${!v-} || fail "node $i starts"
done
[ -n "$kvm_seed" ] && at_exit "for i in \$(seq $KVM_NODES); do kvm_seed_cache_from \$i; done"
setup_mark "all $KVM_NODES vhpcd started"
# What the nodes' pulls of the image cost (part of a job's start).
at_exit_said "grep -h 'pulled image' '$CL_DIR'/n[0-9]*.log | sed 's/^/# /'"
# Starts that failed and were tried again: under TCG they, not the tests,
# are what makes a test's time swing.
at_exit_said "grep -hiE 'attempt|could not|failed' '$CL_DIR'/ctld.log | tail -n 8 | sed 's/^/# ctld: /'"
knodes=$([ "$KVM_NODES" = 2 ] && echo two || echo "$KVM_NODES")
if cl_wait_nodes_up "$KVM_NODES"; then
	ok "$knodes nodes register"
else
	fail "$knodes nodes register"
	diag "$(vc nodes 2>&1 | head -5)" "$(tail -n 8 "$CL_DIR"/n[0-9]*.log 2>&1)"
fi
setup_mark "the nodes registered"

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
KVM=(--driver kvm -N 2 -n 2 --vcpus 1 --mem 384M --timeout 600)
# hv_pids JOB: the job's vhpc-hv pids on every node; alive PIDS: those still running
hv_pids() { for f in "$CL_DIR"/run-n*/jobs/"$1"x*/kvm*/pid; do [ -f "$f" ] && echo "$(cat "$f")"; done | sort | tr '\n' ' '; }
alive() { for p in $1; do [ -d /proc/$p ] && echo -n "$p "; done; }
# restart_running NAME: cl_restart, then a lab crash of the new job
# ends the test (lab_crashed).
restart_running() {
	cl_restart "$1"
	lab_crashed "$R"
}
