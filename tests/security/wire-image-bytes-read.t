#!/usr/bin/env bash
# timeout: 180
# Attack: a machine on the path between an admin and the controller (or a
# node and the controller: the same code) reads the files of the images
# that cross it.  A user's image, imported and pushed for them, is theirs
# to keep from other users; the wire sealed every message's JSON but sent
# the bulk bytes after it in clear (lib/wire.c).  Now the bytes are sealed
# with the message's own key, so the relay's copy holds none of them.
. "$(dirname "$0")/../lib.sh"
CL=vib$$
. "$(dirname "$0")/wire-lib.sh"
T=$CL_DIR
wl_up 1
RELAYED=198.18.0.1:7004

cl_ctr_image >"$T/build.log" 2>&1
check_eq "a local image to push" 0 $?
id=$(sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/$CL_CTR_IMAGE.json")
# The image's largest file (manifest: TYPE MODE SIZE HASH PATH), and three
# 64-byte pieces of it, from its start, middle and end.
big=$(awk '$1 == "f" { print $3, $5 }' "$VHPC_STATE_DIR/images/$id/manifest" | sort -n | tail -n 1)
size=${big%% *} f=$VHPC_STATE_DIR/images/$id${big#* }
check "... its largest file is there (${big#* }, $size bytes)" test -s "$f" -a "${size:-0}" -gt 65536
hexof() { od -An -tx1 -v | tr -d ' \n'; }
needles=
for off in 4096 $((size / 2)) $((size - 8192)); do
	needles="$needles $(dd if="$f" bs=1 skip="$off" count=64 status=none | hexof)"
done

mkdir "$T/r"
wl_bg "$CL_HUB" "$T/relay.log" "$RELAY" "$RELAYED" "$CL_CTL" "$T/r" passall
wait_log "$T/relay.log" listening 5
out=$(VHPC_CONTROLLER=$RELAYED vc image push "$CL_CTR_IMAGE" --as userapp 2>&1)
rc=$?
check_eq "the push through the relay succeeds" 0 "$rc"
[ "$rc" = 0 ] || diag "$out"
check_match "the controller has the image" 'userapp' "$(vc image list 2>&1)"
n=$(cat "$T"/r/*.req 2>/dev/null | wc -c)
diag "the relay saw $(ls "$T"/r/*.req 2>/dev/null | wc -l) requests, $n bytes"
check "... and the file crossed the relay ($size bytes)" test "$n" -gt "$size"
cat "$T"/r/*.req | hexof >"$T/seen.hex"
found=0
for nd in $needles; do grep -qF "$nd" "$T/seen.hex" && found=$((found + 1)); done
check_eq "none of 3 pieces of that file is in the relay's copy" 0 "$found"
done_testing
