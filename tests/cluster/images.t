#!/usr/bin/env bash
# timeout: 420
# Node images deployed through the controller's store on a 3-node cluster:
#  - no image in the store: a job is refused at submit, saying what to do;
#    only root pushes; `vhpc image push` sends the store what it lacks;
#  - node 1 pulls the image for its first job; node 2, which has no copy,
#    pulls it for a job across both, node 1 does not again; the copies are
#    byte for byte the pushed image, and `vhpc image list` shows the store
#    and each node's cache;
#  - a file changed in the store, and one truncated: node 3 refuses the
#    image naming the file, starts nothing, keeps nothing, and the job fails
#    with that reason; once the file is right again the job runs there;
#  - a pull killed midway (kill -9 of node 3's vhpcd): nothing under the
#    image's id, and after a restart a job pulls it whole and runs;
#  - a job submitted before a push of a new version and one submitted
#    after each run the content their id names; `vhpc image rm` while a job
#    holds the image: the job runs on, new jobs are refused, and the
#    content goes from the store once the job has ended;
#  - a node's cache keeps to its size limit by evicting the least recently
#    used image, never one a running job uses;
#  - nothing is left.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
CL=vci$$
CL_NO_PUSH=1
# A job refused while the cache is full must still be retrying when the
# job holding the cache ends (about 5 s later): the controller's own pause.
CL_RETRY_MS=2000
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 3 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
cl_node_up 1 || fail "node 1 starts"
check "node 1 registers" cl_wait_nodes_up 1

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
STORE=$CL_DIR/ctld/images
obj() { echo "$STORE/objects/${1:0:2}/$1"; }
# sha256 of a file of an image, by its path in the manifest
sha_of() { awk -v p="$2" '$1 == "f" && $5 == p {print $4}' "$VHPC_STATE_DIR/images/$1/manifest"; }
ready_ms() { grep -E "job $1: .* ready in [0-9]+ ms" "$CL_DIR/ctld.log" | sed -n 's/.* ready in \([0-9]*\) ms.*/\1/p' | tail -1; }
pull_line() { grep -h "pulled image" "$CL_DIR/n$1.log" | tail -1; }

# -- an empty store: jobs are refused at submit, and only root pushes
cl_ctr_image >"$T/build" 2>&1
check_eq "the default image builds on this machine" 0 "$?"
ID=$(sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/$CL_CTR_IMAGE.json")
check_match "its id" '^[0-9a-f]{64}$' "$ID"
out=$(vc submit -N 1 --vcpus 1 -- true 2>&1)
check_match "a job before any push is refused, saying what to do" "no image named 'default' in the cluster's image store.*vhpc image push default" "$out"
check_match "vhpc image list: an empty store" 'the store holds 0 objects' "$(vc image list)"
chmod -R o+rX "$VHPC_STATE_DIR/images" 2>/dev/null
check_match "a push by another user than root is refused" 'only root may send it' \
	"$(as_nobody env VHPC_STATE_DIR="$VHPC_STATE_DIR" "$BIN/vhpc" image push "$CL_CTR_IMAGE" --as default 2>&1)"
t0=$(date +%s%N)
vc image push "$CL_CTR_IMAGE" --as default >"$T/push" 2>&1
rc=$? push_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check_eq "root pushes it" 0 "$rc"
check_match "and says what the store lacked" 'the store lacks [0-9]+ of its [0-9]+ objects' "$(cat "$T/push")"
diag "push of the default image ($(du -sh "$VHPC_STATE_DIR/images/$ID" | cut -f1), without kvm parts): $push_ms ms"
check "the store holds its manifest, which hashes to its id" \
	sh -c "[ \"\$(sha256sum '$(obj "$ID")' | cut -d' ' -f1)\" = $ID ]"
vc image push "$CL_CTR_IMAGE" --as default >"$T/push2" 2>&1
check_match "a second push sends nothing" 'lacks 0 of its' "$(cat "$T/push2")"
list=$(vc image list --json | tr -d ' \n')
check_match "vhpc image list --json: the store has it" "\"images\":\[\{\"name\":\"default\",\"id\":\"$ID\"" "$list"
check_match "... and node 1 has nothing cached" '"node":"n1","state":"up","images":\[\]' "$list"

# -- node 1 pulls on its first job; node 2 has no copy and pulls it for a job on both
J1=$(sub -N 1 --vcpus 1 -- cat /etc/vhpc-image)
check "a 1-guest job completes on node 1" wait_state "$J1" COMPLETED 60
check_match "its record names the id it was resolved to" "\"image\":\"default\",\"image_id\":\"$ID\"" "$(job_json "$J1")"
check_match "node 1 pulled the image" "pulled image default \(${ID:0:12}\)" "$(pull_line 1)"
diag "node 1, cold cache: $(pull_line 1 | sed 's/.*: pulled/pulled/')"
check "node 1's copy is complete under its id" test -d "$CL_DIR/cache-n1/$ID/rootfs"
cl_node_up 2 || fail "node 2 starts"
check "node 2 registers" cl_wait_nodes_up 2
check "node 2 has no copy" test ! -e "$CL_DIR/cache-n2/$ID"
J2=$(sub -N 2 --vcpus 1 -- sh -c 'echo $(hostname) $(md5sum /usr/local/bin/vhpc-guestd | cut -c1-32)')
check "a 2-guest job on nodes 1 and 2 completes" wait_state "$J2" COMPLETED 60
check_eq "node 2 pulled it" 1 "$(grep -c "pulled image default (${ID:0:12})" "$CL_DIR/n2.log")"
check_eq "node 1 did not pull it again" 1 "$(grep -c "pulled image default" "$CL_DIR/n1.log")"
want=$(md5sum "$VHPC_STATE_DIR/images/$ID/rootfs/usr/local/bin/vhpc-guestd" | cut -c1-32)
# Only the guests' lines: Open MPI's launcher may warn on the same stream
# (its setpgid race with the child's exec, as in oci.t).
check_eq "both guests ran the pushed program" "g0 $want g1 $want" \
	"$(vc output "$J2" | grep -E '^g[0-9]+ ' | sort | tr '\n' ' ' | sed 's/ $//')"
check "node 2's copy is the pushed image, byte for byte" diff -r --no-dereference "$VHPC_STATE_DIR/images/$ID/rootfs" "$CL_DIR/cache-n2/$ID/rootfs"
check_eq "... and its manifest hashes to the id" "$ID" "$(sha256sum "$CL_DIR/cache-n2/$ID/manifest" | cut -d' ' -f1)"
diag "node 2, cold cache: $(pull_line 2 | sed 's/.*: pulled/pulled/'); cache size $(du -sbx "$CL_DIR/cache-n2" | cut -f1) bytes"
J3=$(sub -N 2 --vcpus 1 -- true)
check "the same job again (warm caches) completes" wait_state "$J3" COMPLETED 60
diag "2-guest job ready: cold cache (node 2 pulling) $(ready_ms "$J2") ms, warm $(ready_ms "$J3") ms"
# in use until the node has removed the job, a moment after it ended
for _ in $(seq 50); do grep -q '"node":"n2","state":"up","images":\[{[^]]*"in_use":false' <<<"$(vc image list --json | tr -d ' \n')" && break; sleep 0.2; done
list=$(vc image list --json | tr -d ' \n')
check_match "vhpc image list: node 2's cache holds it, not in use" "\"node\":\"n2\",\"state\":\"up\",\"images\":\[\{\"id\":\"$ID\",\"name\":\"default\",\"bytes\":[0-9]+,\"used\":[0-9]+,\"in_use\":false" "$list"
check_match "vhpc image list prints a table of nodes' caches" "n2 +default +${ID:0:12} " "$(vc image list)"

# -- a changed file and a truncated one in the store: node 3 refuses them
cl_node_up 3 || fail "node 3 starts"
check "node 3 registers" cl_wait_nodes_up 3
RSH=$(sha_of "$ID" /rootfs/usr/local/bin/vhpc-rsh)
cp "$(obj "$RSH")" "$T/rsh.orig"
chmod u+w "$(obj "$RSH")"
printf 'X' | dd of="$(obj "$RSH")" bs=1 seek=100 conv=notrunc 2>/dev/null
J4=$(sub -N 3 --vcpus 1 -- true)
check "a job needing node 3 fails: its image's file was changed in the store" wait_state "$J4" FAILED 90
check_match "the reason names the node, the file and the refusal" \
	"node n3: image ${ID:0:12}: /rootfs/usr/local/bin/vhpc-rsh: its content hashes to [0-9a-f]{12}, the manifest says ${RSH:0:12}: the store's copy was changed or damaged; refused" \
	"$(job_json "$J4")"
check "node 3 kept nothing of it" test ! -e "$CL_DIR/cache-n3/$ID"
check_eq "... not even a partial pull" "" "$(ls -A "$CL_DIR/cache-n3" | grep -v '^\.lock$')"
check_eq "the job never started" 0 "$(job_field "$J4" started)"
check_eq "node 3 started no guest of it" 0 "$(grep -c "job $J4 .*guest" "$CL_DIR/n3.log")"
head -c 1000 "$T/rsh.orig" >"$(obj "$RSH")"
J5=$(sub -N 3 --vcpus 1 -- true)
check "a truncated file: refused too" wait_state "$J5" FAILED 90
check_match "... saying how many bytes the store holds" "vhpc-rsh: the store holds 1000 bytes of it where the manifest says $(stat -c %s "$T/rsh.orig"): the store's copy was changed or damaged; refused" \
	"$(job_json "$J5")"
cp "$T/rsh.orig" "$(obj "$RSH")"
J6=$(sub -N 3 --vcpus 1 -- true)
check "once the store's file is right again, the job runs on node 3 too" wait_state "$J6" COMPLETED 90

# -- a pull killed midway leaves nothing a job could use
cl_node_kill 3 KILL
rm -rf "${CL_DIR:?}/cache-n3"
cl_node_up 3 || fail "node 3 restarts with an empty cache"
cl_wait_nodes_up 3
J7=$(sub -N 3 --vcpus 1 -- true)
killed=0
for _ in $(seq 3000); do
	# kill it while its pull folder holds some files but not all
	n=$(find "$CL_DIR/cache-n3" -path '*/.pull-*' -type f 2>/dev/null | wc -l)
	if [ "$n" -gt 20 ]; then cl_node_kill 3 KILL; killed=1; break; fi
	sleep 0.005
done
check "node 3's vhpcd was killed in the middle of its pull" test "$killed" = 1
check "nothing is under the image's id" test ! -e "$CL_DIR/cache-n3/$ID"
check_match "what it had fetched is in a pull folder only" '^\.pull-' "$(ls -A "$CL_DIR/cache-n3" | grep -v '^\.lock$')"
cl_node_up 3 || fail "node 3 restarts"
check_match "the restarted node removed the interrupted pull" 'removed \.pull-.*interrupted pull' "$(cat "$CL_DIR/n3.log")"
check "the job then completes on all three nodes" wait_state "$J7" COMPLETED 120
check "node 3's copy is whole" diff -r --no-dereference "$VHPC_STATE_DIR/images/$ID/rootfs" "$CL_DIR/cache-n3/$ID/rootfs"

# -- jobs keep the id they were submitted with across a push of a new version
# the default image and a file that says which version it is
{ sed -e '/^kvm:/,$d' -e 's/^name: default/name: vtest/' "$VHPC_TOP/configs/images/default.yaml"
  printf 'copy:\n  /etc/vtest: %s\n' "$T/vt"; } >"$T/vtest.yaml"
echo v1 >"$T/vt"
"$BIN/vhpc" image build "$T/vtest.yaml" >"$T/b1" 2>&1 && vc image push vtest >"$T/p1" 2>&1
check_eq "version 1 of another image is pushed" 0 "$?"
V1=$(sed -n 's/.*as vtest: \([0-9a-f]*\),.*/\1/p' "$T/p1")
BLOCK=$(sub -N 3 --vcpus 1 -- sleep 4)
check "a job occupies every node" wait_state "$BLOCK" RUNNING 60
JA=$(sub --image vtest -N 1 --vcpus 1 -- cat /etc/vtest)
echo v2 >"$T/vt"
"$BIN/vhpc" image build "$T/vtest.yaml" >"$T/b2" 2>&1 && vc image push vtest >"$T/p2" 2>&1
check_eq "version 2 is pushed while a job of version 1 waits" 0 "$?"
V2=$(sed -n 's/.*as vtest: \([0-9a-f]*\),.*/\1/p' "$T/p2")
check "the two versions have different ids" test -n "$V1" -a -n "$V2" -a "$V1" != "$V2"
JB=$(sub --image vtest -N 1 --vcpus 1 -- cat /etc/vtest)
check "both complete" wait_state "$JA" COMPLETED 60 && wait_state "$JB" COMPLETED 60
check_eq "the job submitted before the push ran version 1" v1 "$(vc output "$JA")"
check_eq "the job submitted after it ran version 2" v2 "$(vc output "$JB")"
check_match "their records name those ids" "\"image_id\":\"$V1[0-9a-f]*\".*\"image_id\":\"$V2" \
	"$(job_json "$JA" | grep -o '"image_id":"[0-9a-f]*"')$(job_json "$JB" | grep -o '"image_id":"[0-9a-f]*"')"
check_match "the store remembers what the name meant before" "\"name\":\"vtest\",\"id\":\"$V2[0-9a-f]*\".*\"previous\":\[\"$V1" "$(vc image list --json | tr -d ' \n')"

# -- one earlier version retired (vhpc image rm NAME@VERSION): say version 1
# turned out to be bad; a job file naming its id must not run it again
V1FULL=$(vc image list --json | tr -d ' \n' | grep -o "\"previous\":\[\"$V1[0-9a-f]*" | grep -o "$V1[0-9a-f]*")
jobfile() { printf 'guests: 1\nvcpus: 1\nimage: vtest\nimage_id: %s\ncommand: [cat, /etc/vtest]\n' "$1" >"$T/byid.yaml"; }
jobfile "$V1FULL"
JV=$( (cd "$T" && vc submit --json byid.yaml) | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
check "before: a job file may still name version 1 by its id" wait_state "$JV" COMPLETED 60
check_eq "... and runs version 1" v1 "$(vc output "$JV")"
check_match "rm of the version the name has now is refused, saying what to do" \
	"$V2 is the version image vtest names now: vhpc image rm vtest removes the name" "$(vc image rm "vtest@$V2" 2>&1)"
check_match "rm of a version the name never had is refused" "image vtest had no earlier version 000000000000" \
	"$(vc image rm vtest@000000000000 2>&1)"
check_match "a version of fewer than 12 digits is refused at the command line" "at least 12 and at most 64 lowercase hex digits" \
	"$(vc image rm "vtest@${V1:0:6}" 2>&1)"
check_match "vhpc image rm vtest@VERSION retires version 1" "removed version $V1 of image vtest: no new job may name it" \
	"$(vc image rm "vtest@$V1" 2>&1)"
# (no job held it, so the store's collection took it at once: the words
# are those for an id it never had)
check_match "after: a job file naming its id is refused" \
	"image_id $V1FULL: (image vtest was removed|the cluster's image store holds no image with this id)" \
	"$(cd "$T" && vc submit byid.yaml 2>&1)"
check "the name's history forgets it" test -z "$(vc image list --json | tr -d ' \n' | grep -o "\"previous\":\[[^]]*$V1")"
check_match "vtest still names version 2" "\"name\":\"vtest\",\"id\":\"$V2" "$(vc image list --json | tr -d ' \n')"

# -- rm while a job holds the image: the job keeps it
objs_before=$(vc image list --json | tr -d ' \n' | sed -n 's/.*"store_objects":\([0-9]*\).*/\1/p')
JR=$(sub --image vtest -N 1 --vcpus 1 -- sh -c 'sleep 3; cat /etc/vtest')
check "a job of vtest runs" wait_state "$JR" RUNNING 60
check_match "vhpc image rm while it runs says the job holds it" 'removed image vtest .*1 job not yet ended still holds it' "$(vc image rm vtest)"
check_match "a new job naming vtest is refused" "no image named 'vtest'" "$(vc submit --image vtest -N 1 -- true 2>&1)"
check_match "vhpc image list shows the id as held by the job" "\"held\":\[\{\"id\":\"$V2[0-9a-f]*\",\"name\":\"vtest\",\"job\":$JR\}" "$(vc image list --json | tr -d ' \n')"
check "the running job completes" wait_state "$JR" COMPLETED 60
check_eq "with its image's content" v2 "$(vc output "$JR")"
gone=0
for _ in $(seq 100); do
	n=$(vc image list --json | tr -d ' \n' | sed -n 's/.*"store_objects":\([0-9]*\).*/\1/p')
	[ "$n" -lt "$objs_before" ] 2>/dev/null && [ ! -e "$(obj "$V2")" ] && { gone=1; break; }
	sleep 0.2
done
check "once it ended, the store dropped what only vtest needed ($objs_before -> $n objects)" test "$gone" = 1
check "... and kept the default image whole" test -e "$(obj "$ID")" -a -e "$(obj "$RSH")"
check_match "a non-root rm is refused" 'only root may send it' "$(as_nobody "$BIN/vhpc" image rm default 2>&1)"
check_match "rm of an unknown name says so" "no image named 'nothere'" "$(vc image rm nothere 2>&1)"

# -- the cache keeps to its limit: least recently used first, never in use
echo v3 >"$T/vt"
"$BIN/vhpc" image build "$T/vtest.yaml" >"$T/b3" 2>&1 && vc image push vtest >"$T/p3" 2>&1
V3=$(sed -n 's/.*as vtest: \([0-9a-f]*\),.*/\1/p' "$T/p3")
for i in 2 3; do cl_node_kill $i KILL; done
cl_node_kill 1
down() { [ "$(vc nodes --json | tr -d ' \n' | grep -o '"state":"down"' | wc -l)" = 3 ]; }
for _ in $(seq 100); do down && break; sleep 0.1; done
check "the controller has all three nodes down" down
# Room for either image, not for both: what default and vtest hold, less a byte.
bytes_of() { vc image list --json | tr -d ' \n' | grep -o "{\"name\":\"$1\",[^}]*" | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p'; }
lim=$(( $(bytes_of default) + $(bytes_of vtest) - 1 ))
cl_node_up 1 --cpus 0-$(( $(nproc) > 1 ? 1 : 0 )) --image-cache-size "$lim" || fail "node 1 restarts with a cache limit"
JX=$(sub -N 1 --vcpus 1 -- sh -c 'sleep 3; echo x-done')
check "a job of the default image runs on node 1" wait_state "$JX" RUNNING 60
JY=$(sub --image vtest -N 1 --vcpus 1 -- cat /etc/vtest)
check "a job of vtest meanwhile completes too, after JX" wait_state "$JY" COMPLETED 120
check_match "its first start was refused: the image in use could not be evicted" \
	"cannot hold .* more: .* of images in use by jobs" "$(grep -h "job $JY" "$CL_DIR/ctld.log" "$CL_DIR/n1.log")"
check "the running job completes" wait_state "$JX" COMPLETED 30
check_eq "... undisturbed" "x-done" "$(vc output "$JX")"
check_match "node 1 evicted the default image, least recently used, once it was free" \
	"evicted ${ID:0:12} \(default, .*\), least recently used" "$(cat "$CL_DIR/n1.log")"
check "and holds vtest now, not default" test -d "$(echo "$CL_DIR/cache-n1/$V3"*)" -a ! -e "$CL_DIR/cache-n1/$ID"
check_eq "vtest ran its newest version" v3 "$(vc output "$JY")"

cl_node_kill 1
for i in 1 2 3; do VHPC_RUN_DIR=$CL_DIR/run-n$i "$BIN/vhpc-na" cleanup >/dev/null 2>&1; done
check_eq "nothing is left" "$before" "$(cl_leftovers)"
done_testing
