#!/usr/bin/env bash
# timeout: 600
# Symlinks where a node keeps its own files.  A node writes `manifest` and
# `info.json` into an image's folder in its cache, touches `.used`, locks
# `.lock` and mounts a compact image on `.mnt`.  Root imported an OCI image
# for a user and pushed it; it carries symlinks named like those entries
# (pointing at canaries in this test's folder, standing in for
# /etc/ld.so.preload and a system folder) and a manifest the user wrote
# that puts them at the top of an image, beside a squashfs rootfs that is
# in the store.
#  - nobody submits a job whose image_id is that manifest's hash: refused
#    at submit, naming the id, and no canary changes;
#  - the same job queued all the same (its row put into ctld.db while the
#    controller is down): no node takes it as an image, the job fails
#    saying why, and no canary changes;
#  - nothing is left.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/image-lib.sh"

check "root imports and pushes an image in squashfs" ia_push base-sq "$OMPI_ROOT" --format squashfs
BLOB=$(grep ' /rootfs\.squashfs$' "$VHPC_STATE_DIR/images/$(ia_id base-sq)/manifest")
check_match "its squashfs file is an object of the store" '^f 0644 [0-9]+ [0-9a-f]{64} /rootfs.squashfs$' "$BLOB"

# entry of the node's own -> what root would write, create or mount through it
PLANT="manifest:ld.so.preload info.json:config.json .used:created-by-root .lock:locked-by-root .mnt:system-folder"
R=$(ia_attack_root planted)
{ echo "$BLOB"
  for p in $PLANT; do
	ln -s "$C/${p#*:}" "$R/${p%%:*}"
	echo "l 0777 - $C/${p#*:} /${p%%:*}"
  done
} >"$R/opt/user/manifest"
FORGED=$(ia_sha "$R/opt/user/manifest")
check "root imports and pushes the user's image, symlinks and all" ia_push planted "$R"
check "the store holds the user's manifest as an object named by its sha256" test -f "$(ia_obj "$FORGED")"
check_match "the imported image has the symlinks inside its rootfs, where they are the guest's" \
	"^l 0777 - $C/ld.so.preload /rootfs/manifest$" "$(cat "$VHPC_STATE_DIR/images/$(ia_id planted)/manifest")"

# attack: what the canaries look like after a job of the hash started (or
# failed) on both nodes; diag says what changed
attack() {
	local j=$1 i
	[ -n "$j" ] || return 0
	for ((i = 0; i < 300; i++)); do
		[[ $(job_state "$j") =~ ^(RUNNING|COMPLETED|FAILED)$ ]] && break
		poll_pause
	done
	diag "the attack: job $j $(job_state "$j"); the canaries changed:"
	diff <(echo "$was") <(ia_canaries) | grep '^[<>]' | while read -r l; do diag "  $l"; done
	diag "  $C/ld.so.preload now begins: $(head -c 60 "$C/ld.so.preload" | tr '\n' ' ')"
	vc cancel "$j" >/dev/null 2>&1
}

# -- named at submit
ia_canaries_reset
was=$(ia_canaries)
out=$(ia_submit "$FORGED" true)
check_match "nobody's job naming that hash as its image is refused, naming the id" \
	"image_id $FORGED: the cluster's image store holds no image with this id" "$out"
diag "$out"
attack "$(ia_job_of "$out")"
check_eq "no canary was written, created or mounted over" "$was" "$(ia_canaries)"

# -- queued with the hash all the same
out=$(ia_submit "$DEF_ID" true)
JD=$(ia_job_of "$out")
check "a job of nobody's naming the default image by id completes" wait_state "$JD" COMPLETED 120
ia_canaries_reset
for i in 1 2; do umount "$CL_DIR/cache-n$i/$FORGED/.mnt" 2>/dev/null; rm -rf "${CL_DIR:?}/cache-n$i/$FORGED"; done
was=$(ia_canaries)
ia_requeue "$JD" "$FORGED" || fail "a job queued with the hash (ctld.db)"
check "the job queued with the hash fails" wait_state "$IA_JOB" 'FAILED' 120
check_match "... on the nodes: the store hands out no file as an image's manifest" \
	"image $FORGED is not an image of the cluster's store" "$(job_json "$IA_JOB")"
diag "job $IA_JOB: $(job_json "$IA_JOB" | grep -o '"reason":"[^"]*"')"
[ "$(job_state "$IA_JOB")" = FAILED ] || attack "$IA_JOB"
check_eq "no canary was written, created or mounted over" "$was" "$(ia_canaries)"
check "no node's cache holds it" test ! -e "$CL_DIR/cache-n1/$FORGED" -a ! -e "$CL_DIR/cache-n2/$FORGED"

ia_end
done_testing
