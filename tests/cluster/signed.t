#!/usr/bin/env bash
# timeout: 300
# Signed images (images/README.md, "Signed images") on a cluster of this
# machine: vhpc-ctld's cluster file says nothing of signatures; node 1's
# own says require_signed with key K1 trusted, node 2's nothing.
#  - `vhpc image keygen`; `vhpc image sign` refuses a secret key others may
#    read, one of the wrong length, and a public key;
#  - node 2 (no require_signed) runs the unsigned image;
#  - on node 1 a job fails, naming the image and the reason, for an image
#    that is unsigned, signed by a key it does not trust (K2), carrying K1's
#    signature of another image's id, and K1's own signature tampered with
#    in the store; signed by K1 it runs; each refusal starts no guest;
#  - a file of the signed image replaced in the store: node 1's pull
#    refuses it; `vhpc image sign` refuses an image whose files changed;
#  - the signatures travel with `vhpc image push` into the store and on to
#    node 1's cache, byte for byte; the store refuses a push whose
#    signature is not of the image's id;
#  - `vhpc run` on one machine (the embedded node agent) is held to the
#    same policy through its cluster file;
#  - the check's cost at job start: node 1 (require_signed) beside node 2
#    starting the same 2-node jobs.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
CL=vsg$$
CL_NO_PUSH=1
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 2 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; done_testing; exit 1; }
before=$(cl_leftovers)
cl_ctr_image >"$T/build" 2>&1
check_eq "the container image builds on this machine" 0 "$?"
ID=$(sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/$CL_CTR_IMAGE.json")
# A state folder of the test's own holding a copy of it: signing writes
# beside the image, and the build tree's copy is other tests' too.
TS=$T/state
mkdir -p "$TS/images/refs"
cp -a "$VHPC_STATE_DIR/images/$ID" "$TS/images/" && rm -f "$TS/images/$ID/.signatures"
cp "$VHPC_STATE_DIR/images/refs/$CL_CTR_IMAGE.json" "$TS/images/refs/"
tv() { VHPC_STATE_DIR=$TS vc "$@"; }
SIGS=$TS/images/$ID/.signatures
STORE_SIGS=$CL_DIR/ctld/images/signatures/$ID
CACHE_SIGS=$CL_DIR/cache-n1/$ID/.signatures

# -- keys
out=$(vhpc image keygen "$T/k1")
check_match "vhpc image keygen writes a key pair and says how to trust it" \
	"public key: $T/k1.pub.*trusted_keys: \[ed25519:[0-9a-f]{64}\]" "$(echo "$out" | tr '\n' ' ')"
check_eq "its secret key is 0600" 600 "$(stat -c %a "$T/k1")"
check_match "its public key is the cluster file's line" '^ed25519:[0-9a-f]{64}$' "$(cat "$T/k1.pub")"
check_match "it never writes over a key" "cannot create $T/k1" "$(vhpc image keygen "$T/k1" 2>&1)"
vhpc image keygen "$T/k2" >/dev/null
chmod 644 "$T/k1"
check_match "a secret key others may read is refused" "key $T/k1 has mode 0644: others may read or change it" \
	"$(tv image sign "$CL_CTR_IMAGE" --key "$T/k1" 2>&1)"
chmod 600 "$T/k1"
head -c 40 "$T/k1" >"$T/short" && chmod 600 "$T/short"
check_match "a key of the wrong length is refused" "key $T/short: 40 bytes, not a vhpc image secret key" \
	"$(tv image sign "$CL_CTR_IMAGE" --key "$T/short" 2>&1)"
check_match "a public key is refused" "is a public key" "$(tv image sign "$CL_CTR_IMAGE" --key "$T/k1.pub" 2>&1)"
check "none of them signed anything" test ! -e "$SIGS"

sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }

# -- unsigned, on node 2, whose cluster file (the checkout's) requires nothing
cl_node_up 2 || fail "node 2 starts"
check "node 2 registers" cl_wait_nodes_up 1
tv image push "$CL_CTR_IMAGE" --as default >"$T/push" 2>&1
check_eq "the unsigned image is pushed" 0 "$?"
check "the store has no signatures for it" test ! -e "$STORE_SIGS"
J=$(sub -N 1 --vcpus 1 -- true)
check "node 2, without require_signed, runs the unsigned image" wait_state "$J" COMPLETED 60

# Node 1 requires K1's signature; vhpc-ctld's file is the checkout's too.
# From here every job spans both nodes: node 2 would run each of them.
{ cat "$VHPC_TOP/configs/cluster.yaml"; printf 'images:\n  require_signed: true\n  trusted_keys:\n    - %s\n' "$(cat "$T/k1.pub")"; } >"$T/strict.yaml"
VHPC_CLUSTER=$T/strict.yaml cl_node_up 1 || fail "node 1 starts"
check "node 1 registers" cl_wait_nodes_up 2

# refused J REASON_REGEX WHAT: job J failed on node 1 naming the image and
# the reason, and started no guest there
refused() {
	check "$3: the job fails" wait_state "$1" FAILED 60
	check_match "... naming node 1, the image and the reason" "node n1: image default \(${ID:0:12}\).*$2" "$(job_json "$1")"
	check_eq "... and never started" 0 "$(job_field "$1" started)"
	check_eq "... node 1 started no guest of it" 0 "$(grep -c "job $1 .*guest" "$CL_DIR/n1.log")"
}

# -- unsigned
J=$(sub -N 2 --vcpus 1 -- true)
refused "$J" "is not signed, and this node requires signed images \(images.require_signed in its cluster file\); refused" "unsigned"

# -- signed by a key node 1 does not trust
check_match "vhpc image sign with K2" "signed image $CL_CTR_IMAGE \(${ID:0:12}\) with key $(cat "$T/k2.pub") \(1 signature\)" \
	"$(tv image sign "$CL_CTR_IMAGE" --key "$T/k2")"
check_match "push sends the signature" "with its signatures" "$(tv image push "$CL_CTR_IMAGE" --as default 2>/dev/null)"
check "the store holds it byte for byte" cmp "$SIGS" "$STORE_SIGS"
J=$(sub -N 2 --vcpus 1 -- true)
refused "$J" "signed only by keys this node does not trust \($(cut -c1-24 "$T/k2.pub")\.\.\." "signed by an unknown key"
check "node 1 fetched the new signatures for its cached copy" cmp "$STORE_SIGS" "$CACHE_SIGS"

# -- K1's signature of another image: a tiny image of its own state folder
T2=$T/state2
mkdir -p "$T2/images/x/rootfs" && chmod 755 "$T2/images/x/rootfs"
printf 'd 0755 - - /rootfs\n' >"$T2/images/x/manifest"
ID2=$(sha256sum "$T2/images/x/manifest" | cut -d' ' -f1)
mv "$T2/images/x" "$T2/images/$ID2"
printf '{"name": "tiny", "format": "tree"}\n' >"$T2/images/$ID2/info.json"
check_match "K1 signs another image" "signed image tiny \(${ID2:0:12}\)" "$(VHPC_STATE_DIR=$T2 vhpc image sign "$ID2" --key "$T/k1" 2>&1)"
cp "$T2/images/$ID2/.signatures" "$T/other.sig"
# The store refuses it as this image's, whoever pushes it...
cp "$T/other.sig" "$SIGS"
check_match "a push with a signature of another id is refused by the store" \
	"signature 1 of image ${ID:0:12} does not verify for that id" "$(tv image push "$CL_CTR_IMAGE" --as default 2>&1)"
# ...so it is put there as a thief of the store would.
cp "$T/other.sig" "$STORE_SIGS"
J=$(sub -N 2 --vcpus 1 -- true)
refused "$J" "the signature by trusted key $(cut -c1-24 "$T/k1.pub")\.\.\. does not verify for this image's id" "K1's signature of another image"

# -- K1's signature, tampered with in the store
rm -f "$SIGS"
tv image sign "$CL_CTR_IMAGE" --key "$T/k2" >/dev/null && tv image sign "$CL_CTR_IMAGE" --key "$T/k1" >/dev/null
check_eq "the local image has both signatures" 2 "$(wc -l <"$SIGS")"
# flip one hex digit of the last line's signature
awk 'NR == 2 { c = substr($3, 5, 1); $3 = substr($3, 1, 4) (c == "0" ? "1" : "0") substr($3, 6) } { print }' "$SIGS" >"$STORE_SIGS"
check "the tampered file differs from the good one" sh -c "! cmp -s '$SIGS' '$STORE_SIGS'"
J=$(sub -N 2 --vcpus 1 -- true)
refused "$J" "does not verify for this image's id" "a tampered signature"

# -- a good one: pushed again, the store's file is right again
check_match "the push with K1's signature is taken" "with its signatures" "$(tv image push "$CL_CTR_IMAGE" --as default 2>&1)"
check "the store holds the signatures byte for byte" cmp "$SIGS" "$STORE_SIGS"
check_match "vhpc image list shows the image signed" "^default +${ID:0:12} .*signed \(2 signatures\)" "$(vc image list)"
check_match "... and --json how many signatures" '"signatures":2' "$(vc image list --json | tr -d ' \n')"
J=$(sub -N 2 --vcpus 1 -- cat /etc/vhpc-image)
check "signed by K1, the job runs on nodes 1 and 2" wait_state "$J" COMPLETED 60
check_match "node 1 says it checked the signature" "image default \(${ID:0:12}\) is signed by a key this node trusts" "$(cat "$CL_DIR/n1.log")"
check "the signatures reached node 1's cache byte for byte" cmp "$SIGS" "$CACHE_SIGS"
check_eq "the cached copy is no content of the image (its manifest names no such file)" 0 \
	"$(grep -c 'signatures' "$CL_DIR/cache-n1/$ID/manifest")"

# -- content replaced after signing: the signature is of the id, the id
# covers the manifest, and the manifest every file, so the pull refuses
# (node 1 starts again with an empty cache)
STORE=$CL_DIR/ctld/images
HOSTS_SHA=$(awk '$1 == "f" && $5 == "/rootfs/usr/local/bin/vhpc-rsh" {print $4}' "$TS/images/$ID/manifest")
OBJ=$STORE/objects/${HOSTS_SHA:0:2}/$HOSTS_SHA
cl_wait_nodes_idle
cl_node_kill 1
rm -rf "${CL_DIR:?}/cache-n1"
VHPC_CLUSTER=$T/strict.yaml cl_node_up 1 || fail "node 1 restarts with an empty cache"
check "node 1 registers again" cl_wait_nodes_up 2
cp "$OBJ" "$T/obj.orig" && chmod u+w "$OBJ"
printf 'X' | dd of="$OBJ" bs=1 seek=100 conv=notrunc 2>/dev/null
J=$(sub -N 2 --vcpus 1 -- true)
check "a file of the signed image replaced in the store: the job fails" wait_state "$J" FAILED 90
check_match "... node 1's pull refuses the file, whatever the signature" \
	"node n1: image ${ID:0:12}: /rootfs/usr/local/bin/vhpc-rsh: its content hashes to .*the store's copy was changed or damaged; refused" "$(job_json "$J")"
cp "$T/obj.orig" "$OBJ"
printf 'X' | dd of="$TS/images/$ID/rootfs/usr/local/bin/vhpc-rsh" bs=1 seek=100 conv=notrunc 2>/dev/null
out=$(tv image sign "$CL_CTR_IMAGE" --key "$T/k1" 2>&1); rc=$?
check_match "vhpc image sign refuses an image whose files no longer match its id" \
	"vhpc image sign: image ${ID:0:12} was modified: its content now hashes to" "$out"
check_eq "... exiting 1" 1 "$rc"
cp "$VHPC_STATE_DIR/images/$ID/rootfs/usr/local/bin/vhpc-rsh" "$TS/images/$ID/rootfs/usr/local/bin/vhpc-rsh"

# -- vhpc run on one machine: the embedded node agent, the same policy
rm -f "$SIGS"
er() { env -u VHPC_CONTROLLER VHPC_STATE_DIR=$TS VHPC_RUN_DIR=$T/run-emb VHPC_CLUSTER="$1" \
	timeout 60 "$BIN/vhpc" run --image "$CL_CTR_IMAGE" -N 1 --vcpus 1 -- true 2>&1; }
mkdir -p "$T/run-emb"
out=$(er "$T/strict.yaml")
check_match "vhpc run (embedded), unsigned image, require_signed: refused with the reason" \
	"image $CL_CTR_IMAGE \(${ID:0:12}\) is not signed, and this node requires signed images" "$out"
out=$(er "$VHPC_TOP/configs/cluster.yaml"); rc=$?
check_eq "vhpc run (embedded), unsigned image, no require_signed: runs" 0 "$rc"
[ "$rc" = 0 ] || diag "$out"
tv image sign "$CL_CTR_IMAGE" --key "$T/k1" >/dev/null
out=$(er "$T/strict.yaml"); rc=$?
check_eq "vhpc run (embedded), signed by K1, require_signed: runs" 0 "$rc"
[ "$rc" = 0 ] || diag "$out"
VHPC_RUN_DIR=$T/run-emb "$BIN/vhpc-na" cleanup >/dev/null 2>&1

# -- the check's cost at job start: node 1 with require_signed, then
# without, the same 2-node jobs from warm caches (one core each); what
# node 1 logs as ready (vjob_prepare)
jobs5() {
	local i J js=
	for i in 1 2 3 4 5; do
		J=$(sub -N 2 --vcpus 1 -- true)
		wait_state "$J" COMPLETED 60 >/dev/null
		js="$js $J"
	done
	echo "$js"
}
ready() { for j in $1; do grep -h "job $j (.*ready in" "$CL_DIR/n1.log" | sed -n 's/.* ready in \([0-9]*\) ms.*/\1/p'; done | sort -n | paste -sd' '; }
# node 1's cache is empty since its refused pull: one job fills it first
J=$(sub -N 2 --vcpus 1 -- true)
check "a job pulls the signed image into node 1's cache again" wait_state "$J" COMPLETED 60
JS_ON=$(jobs5)
us=$(grep -h 'is signed by a key this node trusts (checked in' "$CL_DIR/n1.log" | tail -5 | sed 's/.*checked in \([0-9]*\) us.*/\1/' | sort -n | paste -sd' ')
check_match "node 1 timed its check at each start" '^[0-9]+( [0-9]+){4}$' "$us"
cl_wait_nodes_idle
cl_node_kill 1
from=$(log_lines "$CL_DIR/n1.log")
cl_node_up 1 || fail "node 1 restarts without require_signed"
cl_wait_nodes_up 2
JS_OFF=$(jobs5)
check_eq "without require_signed node 1 checks nothing" 0 \
	"$(tail -n +"$((from + 1))" "$CL_DIR/n1.log" | grep -c 'is signed by a key')"
diag "signature check on node 1, 5 job starts (sorted): $us us" \
	"node 1's 1 container guest of a 2-node job ready (ms, sorted, 5 each): require_signed $(ready "$JS_ON"); without $(ready "$JS_OFF")"

check "nodes idle" cl_wait_nodes_idle
cl_node_kill 1
cl_node_kill 2
check_eq "nothing of the jobs is left" "$before" "$(cl_leftovers)"
done_testing
