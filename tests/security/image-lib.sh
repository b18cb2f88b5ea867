# The stage of the image attacks (tests/security/image-*.t): the tests'
# 2-node cluster (tests/cluster/cluster-lib.sh) whose store holds the
# default image, and OCI images that root imported and pushed for a user,
# carrying files the user wrote.  A file's object in the store is named by
# its sha256, as an image is by its manifest's: the user then names such a
# file as a job's image_id.  Source after tests/lib.sh; sets T, C (the
# canaries' folder) and DEF_ID / DEF_MF (the default image and its manifest).
need_cluster vhpc-na vhpc-sysexec
for t in skopeo umoci mksquashfs sqlite3 sha256sum; do
	command -v $t >/dev/null || skip_all "$t is not installed (make installs it)"
done
CL=vsi$$
. "$VHPC_TOP/tests/cluster/cluster-lib.sh"
T=$CL_DIR
# What root would write through a planted symlink lands here, never in a
# real system file: /etc/ld.so.preload and the like stand in as canaries.
C=$T/canary
mkdir -p "$C"

cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
BEFORE=$(cl_leftovers)
for i in 1 2; do cl_node_up $i || fail "node $i starts"; done
cl_wait_nodes_up 2 || fail "two nodes register"
DEF_ID=$(sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/$CL_CTR_IMAGE.json")
DEF_MF=$VHPC_STATE_DIR/images/$DEF_ID/manifest
[ -s "$DEF_MF" ] || { fail "the default image is pushed ($DEF_MF)"; done_testing; exit 1; }
CL_NO_PUSH=1   # a restarted controller finds it in its store

# The imports are the test's own, away from the shared build state.
export VHPC_STATE_DIR=$T/state
. "$VHPC_TOP/tests/images/oci-lib.sh"
OMPI_ROOT=$(oci_rootfs ompi "$OCI_OMPI_YAML") || { fail "a rootfs with Open MPI"; done_testing; exit 1; }

# ia_push NAME ROOT [IMPORT OPTIONS]: ROOT as an OCI image, imported by
# root as NAME (without kvm parts) and pushed.
ia_push() {
	local n=$1 r=$2
	shift 2
	oci_layout "$T/oci" "$n" "$r" /usr/local/bin:/usr/bin:/bin &&
		"$BIN/vhpc" image import "oci:$T/oci:$n" --name "$n" --no-kvm "$@" >"$T/import-$n" 2>&1 &&
		vc image push "$n" >"$T/push-$n" 2>&1 || { cat "$T/import-$n" "$T/push-$n" >&2; return 1; }
}
# ia_attack_root NAME: a copy of the Open MPI rootfs for a user's files
ia_attack_root() { rm -rf "$T/$1" && cp -a "$OMPI_ROOT" "$T/$1" && mkdir -p "$T/$1/opt/user" && echo "$T/$1"; }
ia_id() { sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/$1.json"; }
ia_sha() { sha256sum "$1" | cut -d' ' -f1; }
ia_obj() { echo "$CL_DIR/ctld/images/objects/${1:0:2}/$1"; }

# ia_submit ID COMMAND...: a job of IA_GUESTS guests (default 2, one on
# each node) naming image_id ID, submitted by nobody from a job file;
# prints what vhpc said
ia_submit() {
	local id=$1 f=$T/job-$RANDOM.yaml
	shift
	{ echo "guests: ${IA_GUESTS:-2}"; echo "vcpus: 1"; echo "image_id: $id"
	  printf 'command: ['; printf '"%s", ' "$@" | sed 's/, $//'; echo ']'; } >"$f"
	chmod 644 "$f"
	(cd "$T" && as_nobody "$BIN/vhpc" submit "$f" 2>&1)
}
ia_job_of() { sed -n 's/^Submitted job \([0-9]*\).*/\1/p' <<<"$1"; }

# ia_requeue JOB ID: JOB again, as if it had been queued with image_id ID
# before the store kept a record of its images (a job from before that
# change, or any other way a controller could come to ask a node for an id
# that is no image): a copy of its row with that id, put into ctld.db while
# the controller is down.  IA_JOB gets the new job's number.
ia_requeue() {
	local old
	old=$(sqlite3 "$CL_DIR/ctld/ctld.db" "SELECT spec FROM jobs WHERE id=$1" | sed -n 's/.*"image_id":"\([0-9a-f]*\)".*/\1/p')
	[ -n "$old" ] || return 1
	cl_ctld_kill TERM
	IA_JOB=$(sqlite3 "$CL_DIR/ctld/ctld.db" "INSERT INTO jobs (uid, name, state, spec, submitted, attempts)
		SELECT uid, name, 0, replace(spec, '$old', '$2'), submitted, 0 FROM jobs WHERE id=$1;
		SELECT max(id) FROM jobs;") || return 1
	cl_ctld_up && cl_wait_nodes_up 2
}

# ia_canary_umount: what an attack mounted over a canary goes.
ia_canary_umount() {
	local m
	for m in $(awk -v d="$C" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo); do umount "$m"; done
}
# ia_canaries_reset: the canaries as they were (after an attack got them):
# nothing mounted on them, their content put back.
ia_canaries_reset() {
	ia_canary_umount
	rm -rf "$C" && mkdir -p "$C/system-folder" && echo "a system file" >"$C/ld.so.preload" &&
		echo "a system file" >"$C/config.json" && echo "a system file" >"$C/system-folder/file"
}
# ia_canaries: every canary file with its content and mode, and every
# mount on one: what must read the same before and after an attack.
ia_canaries() {
	(cd "$C" && find . -xdev -printf '%p %y %m %s\n' | sort && find . -xdev -type f -exec sha256sum {} + | sort)
	echo "mounts: $(grep " $C/" /proc/self/mountinfo | cut -d' ' -f5,10 | tr '\n' ' ')"
}
at_exit ia_canary_umount

# ia_end: the nodes stop and leave nothing (but what an attack mounted on
# a canary, which the test has reported).
ia_end() {
	local i
	ia_canary_umount
	for i in 1 2; do cl_node_kill $i; done
	for i in 1 2; do cl_unmount_cache $i; VHPC_RUN_DIR=$CL_DIR/run-n$i "$BIN/vhpc-na" cleanup >/dev/null 2>&1; done
	check_eq "nothing is left" "$BEFORE" "$(cl_leftovers)"
}
