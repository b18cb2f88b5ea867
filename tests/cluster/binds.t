#!/usr/bin/env bash
# timeout: 200
# Users' own programs through vhpc-ctld on the 3-node test cluster (issue
# 15): a user with a home compiles an MPI hello world in a folder of their
# own and `vhpc run -N 2 -n 4 -- ./hello` from there runs 4 ranks on two
# nodes, each writing a file in that folder, owned by the user.  Node 3
# runs in a mount namespace of its own where a site folder is missing: a
# job that binds it and lands on node 3 fails its start naming n3 and the
# path, and leaves nothing on any node.
. "$(dirname "$0")/../lib.sh"
need_cluster
command -v mpicc >/dev/null || skip_all "mpicc is not installed (libopenmpi-dev)"
command -v useradd >/dev/null || skip_all "useradd is not installed (passwd)"
CL=vcb$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

hello_user vhpcc$$
# A site folder that node 3 lacks: its vhpcd has a mount namespace of its
# own (a slave, so nothing it mounts reaches the host) with a tmpfs over
# the folder's parent.
SITEP=$(mktemp -d /tmp/vhpct-site.XXXXXX)
at_exit "rm -rf '$SITEP'"
mkdir -p "$SITEP/apps" && chmod 755 "$SITEP" "$SITEP/apps"

cl_net_up 3 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; cat "$CL_DIR"/*.log; done_testing; exit 1; }
for i in 1 2; do cl_node_up $i || fail "node $i starts"; done
mkdir -p "$CL_DIR/run-n3"
VHPC_RUN_DIR=$CL_DIR/run-n3 unshare -m --propagation slave sh -c 'mount -t tmpfs -o size=1m vhpct-hide "$0" && exec "$@"' \
	"$SITEP" nsenter --net=/run/netns/"$CL-n3" -- "$BIN/vhpcd" --name n3 \
	--listen 198.18.0.13:6818 --log "$CL_DIR/n3.log" --cpus $((2 % $(nproc))) &
n3=$!
at_exit "kill -9 $n3 2>/dev/null; wait $n3 2>/dev/null; VHPC_RUN_DIR='$CL_DIR/run-n3' '$BIN/vhpc-na' cleanup >/dev/null 2>&1"
wait_log "$CL_DIR/n3.log" "node n3 ready" 20 || fail "node 3 starts"
check "three nodes register" cl_wait_nodes_up 3
before=$(cl_leftovers)

# as ARGS: the user's vhpc in the hub, from the user's folder.
as() { (cd "$W" && cl_in "$CL_HUB" setpriv --reuid "$uid" --regid "$gid" --init-groups env -i PATH="$BIN:/usr/bin:/bin" \
	HOME="$H" VHPC_CONTROLLER="$VHPC_CONTROLLER" VHPC_MUNGE_SOCKET="$VHPC_MUNGE_SOCKET" "$BIN/vhpc" "$@"); }

t0=$(date +%s%N)
as run -N 2 -n 4 --vcpus 1 --timeout 100 -- ./hello >"$T/h.out" 2>"$T/h.err"
rc=$?
diag "vhpc run -N 2 -n 4 -- ./hello through vhpc-ctld: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check_eq "the user's vhpc run -N 2 -n 4 -- ./hello through vhpc-ctld exits 0" 0 "$rc"
[ $rc = 0 ] || diag "$(tail -n 20 "$T/h.err")" "$(tail -n 20 "$CL_DIR/ctld.log")"
check_eq "four ranks say hello" 4 "$(grep -c '^hello from rank [0-3] of 4 on g[01]$' "$T/h.out")"
hello_outputs 4
id=$(sed -n 's/^vhpc: job \([0-9]*\) submitted.*/\1/p' "$T/h.err")
check_eq "the job ran on two nodes" 2 "$(grep -lE "job $id \($id"x"[0-9]+\): 1 guest here .*ready in" "$CL_DIR"/n[123].log | wc -l)"

# Three guests on three nodes, binding the folder node 3 lacks.
as run -N 3 -n 3 --vcpus 1 --timeout 60 --bind "$SITEP/apps:/apps:ro" -- true >"$T/m.out" 2>"$T/m.err"
rc=$?
check_eq "a job binding a folder that node 3 lacks fails" 125 "$rc"
check_match "... naming the node and the path" "node n3: bind source $SITEP/apps: No such file or directory" "$(cat "$T/m.err")"
sleep 1
check_eq "... and nothing of it is left on any node" "$before" "$(cl_leftovers)"
check_eq "no rootfs overlay is left mounted" 0 "$(grep -c vhpc-rootfs /proc/self/mountinfo)"
done_testing
