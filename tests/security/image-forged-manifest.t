#!/usr/bin/env bash
# timeout: 600
# A user's file named as a job's image.  Root imported an OCI image for a
# user and pushed it; it carries a manifest the user wrote (the default
# image's, and a file of the user's at /etc/vhpc-forged), which is then an
# object of the store named by its sha256, as an image is by its id.
#  - nobody submits a job whose image_id is that hash: refused at submit,
#    naming the id, and no node pulls it;
#  - the same job queued all the same (its row put into ctld.db while the
#    controller is down, as a job queued before the store kept its record
#    of images would be): no node gets the file as a manifest, the job
#    fails saying why, and no cache holds it;
#  - an image pushed and tagged may be named by its id; once `vhpc image
#    rm` removed it, a new job naming its id is refused, while the job
#    that held it keeps it;
#  - nothing is left.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/image-lib.sh"

R=$(ia_attack_root forged)
echo "written by the user" >"$R/opt/user/payload"
{ cat "$DEF_MF"
  printf 'f 0644 %s %s /rootfs/etc/vhpc-forged\n' "$(stat -c %s "$R/opt/user/payload")" "$(ia_sha "$R/opt/user/payload")"
} >"$R/opt/user/manifest"
FORGED=$(ia_sha "$R/opt/user/manifest")
check "root imports and pushes the user's image" ia_push userapp "$R"
check "the store holds the user's manifest as an object named by its sha256" test -f "$(ia_obj "$FORGED")"

# -- named at submit
out=$(ia_submit "$FORGED" cat /etc/vhpc-forged)
check_match "nobody's job naming that hash as its image is refused, naming the id" \
	"image_id $FORGED: the cluster's image store holds no image with this id" "$out"
diag "$out"
J=$(ia_job_of "$out")
if [ -n "$J" ]; then
	wait_state "$J" 'COMPLETED|FAILED' 120
	diag "the attack: job $J $(job_state "$J"); its guests printed: $(vc output "$J" | sort -u | tr '\n' ' ')"
fi
check "no node pulled it" test ! -e "$CL_DIR/cache-n1/$FORGED" -a ! -e "$CL_DIR/cache-n2/$FORGED"

# -- an image pushed and tagged, by its id
out=$(ia_submit "$DEF_ID" cat /etc/vhpc-image)
JD=$(ia_job_of "$out")
check "an image pushed and tagged may be named by its id" wait_state "$JD" COMPLETED 120
check_match "... and its record names the image" "\"image\":\"default\",\"image_id\":\"$DEF_ID\"" "$(job_json "$JD")"

# -- queued with the hash all the same: the node asks the store for an image
ia_requeue "$JD" "$FORGED" || fail "a job queued with the hash (ctld.db)"
check "the job queued with the hash fails" wait_state "$IA_JOB" 'FAILED' 120
check_match "... on the nodes: the store hands out no file as an image's manifest" \
	"image $FORGED is not an image of the cluster's store" "$(job_json "$IA_JOB")"
diag "job $IA_JOB: $(job_json "$IA_JOB" | grep -o '"reason":"[^"]*"')"
if [ "$(job_state "$IA_JOB")" = COMPLETED ]; then
	diag "the attack: queued job $IA_JOB COMPLETED; its guests printed: $(vc output "$IA_JOB" | sort -u | tr '\n' ' ')"
fi
check "no node's cache holds it" test ! -e "$CL_DIR/cache-n1/$FORGED" -a ! -e "$CL_DIR/cache-n2/$FORGED"

# -- removed: the job holding it keeps it, new jobs cannot name it
APP=$(ia_id userapp)
out=$(IA_GUESTS=4 ia_submit "$APP" true)
JH=$(ia_job_of "$out")
check "a job naming the user's image by id is queued (4 guests: it waits)" wait_state "$JH" PENDING 10
check_match "root removes the image; the job still holds it" '1 job not yet ended still holds it' "$(vc image rm userapp)"
out=$(ia_submit "$APP" true)
check_match "a new job naming the removed image's id is refused" "image_id $APP: image userapp was removed" "$out"
diag "$out"
J=$(ia_job_of "$out")
[ -z "$J" ] || diag "the attack: job $J was queued: the removed image is held ($(vc image list --json | tr -d ' \n' | grep -o '"held":\[[^]]*\]'))"
check_match "the queued job still holds it" "\"held\":\[\{\"id\":\"$APP\"" "$(vc image list --json | tr -d ' \n')"
vc cancel "$JH" >/dev/null
[ -z "$J" ] || vc cancel "$J" >/dev/null

ia_end
done_testing
