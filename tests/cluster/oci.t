#!/usr/bin/env bash
# timeout: 300
# An imported OCI image on a 2-node cluster: made here with umoci from this
# host's Open MPI and an MPI program of the test's, imported (vhpc image
# import), pushed, and run as a 2-node job whose ranks run the program
# that lives in the image; its squashfs and erofs imports likewise, each
# node mounting them once for all of its jobs; nothing is left.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na vhpc-sysexec
for t in skopeo umoci mpicc mksquashfs; do
	command -v $t >/dev/null || skip_all "$t is not installed (make installs it)"
done
CL=vco$$
CL_NO_PUSH=1
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR
# Imports of the test's own, away from the shared build state.
export VHPC_STATE_DIR=$T/state
. "$VHPC_TOP/tests/images/oci-lib.sh"

root=$(oci_hello_rootfs) || { fail "a rootfs of Open MPI and hello"; done_testing; exit 1; }
check "an OCI layout of it (umoci)" oci_layout "$T/oci" hello "$root" /usr/local/bin:/usr/bin:/bin
"$BIN/vhpc" image import "oci:$T/oci:hello" --no-kvm >"$T/imp" 2>&1
check_eq "it imports" 0 "$?"
for f in squashfs erofs; do
	"$BIN/vhpc" image import "oci:$T/oci:hello" --name hello-$f --format $f --no-kvm >"$T/imp-$f" 2>&1
	check_eq "and as $f" 0 "$?"
done

cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
for i in 1 2; do cl_node_up $i || fail "node $i starts"; done
check "two nodes register" cl_wait_nodes_up 2
for n in hello hello-squashfs hello-erofs; do
	vc image push "$n" >"$T/push-$n" 2>&1
	check_eq "root pushes $n" 0 "$?"
done

run() { timeout 120 nsenter --net=/run/netns/$CL_HUB -- "$BIN/vhpc" run "$@"; }
run --image hello -N 2 -n 2 --vcpus 1 --chdir /tmp -- /opt/app/hello >"$T/out" 2>"$T/err"
check_eq "a 2-node job of the imported image runs its MPI program" 0 "$?"
[ -s "$T/out" ] || diag "$(tail -5 "$T/err")"
# Only the ranks' lines: Open MPI's launcher may warn on the same stream
# ("plm:rsh: Warning: setpgid(13,13) failed in parent", a race of its own
# with the child's exec), which says nothing of where the ranks ran.
check_eq "its ranks ran on both nodes' guests" "hello from rank 0 of 2 on g0 hello from rank 1 of 2 on g1" \
	"$(grep '^hello from rank' "$T/out" | sort | tr '\n' ' ' | sed 's/ $//')"
job=$(vc queue --all --json | tr -d ' \n')
check_match "... which were on two nodes" '"alloc":\[\{"guest":0,"node":"n[12]"\},\{"guest":1,"node":"n[12]"\}\]' "$job"
check "both nodes pulled it" sh -c "grep -q 'pulled image hello ' '$CL_DIR/n1.log' && grep -q 'pulled image hello ' '$CL_DIR/n2.log'"

ready() { grep -o 'ready in [0-9]* ms' "$CL_DIR/ctld.log" | sed -n "${1}p" | tr -dc 0-9; }
id_of() { sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/$1.json"; }
for f in squashfs erofs; do
	SQ=$(id_of hello-$f)
	for k in 1 2; do
		run --image hello-$f -N 2 -n 2 --vcpus 1 --chdir /tmp -- /opt/app/hello >"$T/$f$k" 2>"$T/${f}err$k"
		check_eq "job $k of the $f image runs on both nodes" 2 "$(grep -c '^hello from rank' "$T/$f$k")"
		for i in 1 2; do
			check_eq "... node $i has it mounted once" 1 "$(grep -c " $CL_DIR/cache-n$i/$SQ/.mnt " /proc/self/mountinfo)"
		done
	done
	check_match "vhpc image list shows the $f image cached on both nodes" \
		"\"node\":\"n1\".*\"id\":\"$SQ\".*\"node\":\"n2\".*\"id\":\"$SQ\"" "$(vc image list --json | tr -d ' \n')"
done
# What each format cost: the pull, the node's cache, the start (job 1 of
# each pulls on both nodes, job 2 finds it cached).
for f in tree squashfs erofs; do
	n=hello-$f
	[ $f = tree ] && n=hello
	k=$(( $( [ $f = tree ] && echo 1 || ([ $f = squashfs ] && echo 2 || echo 4)) ))
	diag "$f: pull $(grep -h "pulled image $n " "$CL_DIR/n1.log" | sed 's/.* in \([0-9.]* s\): \([^,]*\) fetched.*/\1 (\2)/'), cache $(du -sbx "$CL_DIR/cache-n1/$(id_of $n)" | cut -f1) bytes, 2-guest job on 2 nodes ready in $(ready $k) ms cold$([ $f = tree ] || echo ", $(ready $((k + 1))) ms warm")"
done

cl_wait_nodes_idle
for i in 1 2; do cl_node_kill $i; done
for i in 1 2; do cl_unmount_cache $i; done
check_eq "no mount of the squashfs image is left once the nodes' caches are unmounted" 0 \
	"$(grep -c " $CL_DIR/cache-n" /proc/self/mountinfo)"
check_eq "nothing else is left" "$before" "$(cl_leftovers)"
done_testing
