#!/usr/bin/env bash
# timeout: 400
# Registry pulls (vhpc image import docker://...), from Debian's
# docker-registry on 127.0.0.1 with TLS (a CA made here) and basic auth,
# started and stopped by the test, holding images pushed here from OCI
# layouts of this host's Open MPI and an MPI program:
#  - by tag and by digest: the image's record keeps the manifest digest,
#    and a job runs from it;
#  - a second image sharing the first's layer fetches only its new layer
#    (counted in the registry's own access log);
#  - wrong credentials, an unknown tag, an untrusted certificate, a
#    manifest that does not match its pin, a registry killed while a large
#    layer is in flight, plain HTTP not asked for, and a blob longer than its manifest says: each
#    refused with a message saying which, nothing stored and no staging
#    or partial blob left; and a layer that is not a tar archive.
. "$(dirname "$0")/common.sh"
need_root
for p in vhpc vhpc-guestd vhpc-rsh vhpc-sysexec; do
	[ -x "$BIN/$p" ] || skip_all "$p is not built"
done
[ -f "$VHPC_TOP/$B/lib/vhpc/openmpi/mca_btl_vmshm.so" ] || skip_all "the vmshm BTL is not built"
command -v mpicc >/dev/null || skip_all "mpicc is not installed"
export VHPC_STATE_DIR=$T/state
. "$VHPC_TOP/tests/images/oci-lib.sh"
. "$VHPC_TOP/tests/images/registry-lib.sh"
why=$(reg_need) || skip_all "$why"
ref_field() { jq -r ".$2 // empty" "$VHPC_STATE_DIR/images/refs/$1.json" 2>/dev/null; }
cache=$VHPC_STATE_DIR/images/.layer-cache/sha256
nothing_left() {
	check "$1: nothing stored" test ! -e "$VHPC_STATE_DIR/images/refs/$2.json"
	check_eq "$1: no staging left" "" "$(ls -A "$VHPC_STATE_DIR/images" | grep '^\.build-')"
	check_eq "$1: only whole blobs in the layer cache" "" \
		"$(ls -A "$cache" 2>/dev/null | grep -Ev '^[0-9a-f]{64}$')"
}
imp() { vhpc image import "$@" --no-kvm --authfile "$REG_AUTH" --cert-dir "$REG_CERTS"; }

# -- images: hello (its one layer), hello-plus (that layer and one more)
root=$(oci_hello_rootfs) || { fail "a rootfs of Open MPI and hello"; done_testing; exit 1; }
check "an OCI layout of it" oci_layout "$T/oci" hello "$root" /usr/local/bin:/usr/bin:/bin
umoci unpack --image "$T/oci:hello" "$T/b" >/dev/null && head -c 1M /dev/urandom >"$T/b/rootfs/opt/app/extra" &&
	umoci repack --image "$T/oci:plus" "$T/b" && rm -rf "$T/b"
check "and one with a second layer on it" test $? = 0
reg_start || { fail "a registry on loopback starts"; done_testing; exit 1; }
ok "a registry on $REG (TLS, basic auth)"
check_eq "it listens on 127.0.0.1 only" "127.0.0.1:${REG#*:}" "$(ss -Htlnp | grep "pid=$REG_PID," | awk '{print $4}')"
D1=$(reg_push "$T/oci:hello" vhpc/hello:1) && D2=$(reg_push "$T/oci:plus" vhpc/hello-plus:1)
check_match "two images pushed" '^sha256:[0-9a-f]{64}$' "$D2"

# -- by tag
m=$(reg_mark)
imp "docker://$REG/vhpc/hello:1" >"$T/imp1" 2>&1
check_eq "import docker://REGISTRY/REPO:TAG" 0 "$?"
diag "$(grep -E 'fetched|elapsed' "$T/imp1")"
check_eq "the record keeps the digest the tag resolved to" "$D1" "$(ref_field hello digest)"
check_eq "... and the source" "docker://$REG/vhpc/hello:1" "$(ref_field hello spec)"
read -r n1 b1 blobs1 < <(reg_blobs "$m")
L1=$(jq -r '.layers[0].digest' "$T/oci/blobs/sha256/${D1#sha256:}")
check_eq "the registry sent its config and its layer" 2 "$n1"
check_match "... the layer among them" "$L1" "$blobs1"
check_match "vhpc says what it fetched" '1 of 1 layers fetched' "$(cat "$T/imp1")"
check "the layer is in the layer cache" test -f "$cache/${L1#sha256:}"
check_eq "the layer cache is root's alone" "700 root" "$(stat -c '%a %U' "$(dirname "$cache")")"
vhpc run --image hello -N 2 -n 2 --chdir /tmp -- /opt/app/hello >"$T/run.out" 2>"$T/run.err"
check_eq "a job runs from it" "hello from rank 0 of 2 on g0 hello from rank 1 of 2 on g1" \
	"$(sort "$T/run.out" | tr '\n' ' ' | sed 's/ $//')"
[ -s "$T/run.out" ] || diag "$(tail -5 "$T/run.err")"

# -- by digest
m=$(reg_mark)
imp "docker://$REG/vhpc/hello@$D1" --name hello-pinned >"$T/imp2" 2>&1
check_eq "import docker://REGISTRY/REPO@sha256:DIGEST" 0 "$?"
check_eq "its record keeps the pin" "$D1" "$(ref_field hello-pinned digest)"
check_eq "the same content, the same id" "$(ref_field hello id)" "$(ref_field hello-pinned id)"
read -r n2 b2 blobs2 < <(reg_blobs "$m")
check_eq "its layer came from the layer cache, not the registry (config only)" 1 "$n2"
check "it verifies" vhpc image verify hello-pinned
vhpc run --image hello-pinned -N 1 -n 1 --chdir /tmp -- /opt/app/hello >"$T/run2.out" 2>"$T/run2.err"
check_eq "a job runs from it" "hello from rank 0 of 1 on g0" "$(cat "$T/run2.out")"
[ -s "$T/run2.out" ] || diag "$(tail -5 "$T/run2.err")"

# -- a second image sharing the first's layer
m=$(reg_mark)
imp "docker://$REG/vhpc/hello-plus:1" >"$T/imp3" 2>&1
check_eq "import of an image that shares a layer" 0 "$?"
diag "$(grep -E 'fetched' "$T/imp3")"
read -r n3 b3 blobs3 < <(reg_blobs "$m")
L2=$(jq -r '.layers[1].digest' "$T/oci/blobs/sha256/${D2#sha256:}")
check_eq "the registry sent its config and one layer" 2 "$n3"
check_match "... the new one" "$L2" "$blobs3"
check "... not the shared one" sh -c "! echo '$blobs3' | grep -q '$L1'"
check_match "vhpc says so" '1 of 2 layers fetched .*, 1 from the layer cache' "$(cat "$T/imp3")"
diag "registry sent: first import $b1 bytes in $n1 blobs; second (1 shared layer) $b3 bytes in $n3 blobs"
check "the new layer is in the image" test -f "$VHPC_STATE_DIR/images/$(ref_field hello-plus id)/rootfs/opt/app/extra"

# -- refusals
printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$REG" "$(printf '%s:wrong' "$REG_USER" | base64)" >"$T/bad.json"
chmod 600 "$T/bad.json"
vhpc image import "docker://$REG/vhpc/hello:1" --name badcred --no-kvm --authfile "$T/bad.json" --cert-dir "$REG_CERTS" >"$T/e1" 2>&1
check_eq "wrong credentials are refused" 1 "$?"
check_match "... saying so" "docker://$REG/vhpc/hello:1: the registry refused the credentials" "$(cat "$T/e1")"
check_match "... skopeo's own words kept after it" 'unauthorized' "$(cat "$T/e1")"
nothing_left "wrong credentials" badcred
REGISTRY_AUTH_FILE=$T/bad.json vhpc image import "docker://$REG/vhpc/hello:1" --name badcred --no-kvm \
	--cert-dir "$REG_CERTS" >"$T/e1b" 2>&1
check_match "REGISTRY_AUTH_FILE is the credentials file when --authfile is not given" 'refused the credentials' "$(cat "$T/e1b")"

imp "docker://$REG/vhpc/hello:nope" >"$T/e2" 2>&1
check_eq "an unknown tag is refused" 1 "$?"
check_match "... saying so" ':nope: no such image in the registry: unknown tag' "$(cat "$T/e2")"
nothing_left "unknown tag" hello-nope

vhpc image import "docker://$REG/vhpc/hello:1" --name nocert --no-kvm --authfile "$REG_AUTH" >"$T/e3" 2>&1
check_match "a certificate from an unknown CA is refused (TLS is verified by default)" \
	"TLS certificate is not trusted .*x509: certificate signed by unknown authority" "$(tr '\n' ' ' <"$T/e3")"
check "a plain HTTP registry on the same storage" reg_start_plain
vhpc image import "docker://$PLAIN/vhpc/hello:nope" --no-kvm >"$T/e3b" 2>&1
check_match "plain HTTP is refused unless asked for" 'the registry speaks plain HTTP: vhpc uses HTTPS unless told --tls-verify=false' \
	"$(cat "$T/e3b")"
vhpc image import "docker://$PLAIN/vhpc/hello:nope" --no-kvm --tls-verify=false >"$T/e3c" 2>&1
check_match "... and taken with --tls-verify=false (the registry answers: no such tag)" 'no such image in the registry' \
	"$(cat "$T/e3c")"
kill $PLAIN_PID && wait $PLAIN_PID 2>/dev/null
check_match "a reference without a registry is refused, not sent to docker.io" 'name the registry' \
	"$(vhpc image import docker://library/debian:12 2>&1)"

# A manifest changed in the registry's storage: served under its old digest.
f=$(reg_blob_file "$D2")
cp "$f" "$T/manifest.orig"
jq -c '. + {annotations: {"tampered": "yes"}}' "$T/manifest.orig" >"$f"
imp "docker://$REG/vhpc/hello-plus@$D2" --name tampered >"$T/e4" 2>&1
check_eq "a manifest that does not match its pin is refused" 1 "$?"
check_match "... saying so" "manifest digest mismatch: the registry sent a manifest whose sha256 is sha256:[0-9a-f]{64}, not the pinned $D2" \
	"$(cat "$T/e4")"
nothing_left "digest mismatch" tampered
imp "docker://$REG/vhpc/hello-plus:1" --name tampered >"$T/e4b" 2>&1
check_match "... and by its tag, the manifest it sends is not served under its digest" \
	"hello-plus:1: manifest digest mismatch: the registry does not serve the manifest it sent for the tag" "$(cat "$T/e4b")"
nothing_left "digest mismatch by tag" tampered
cp "$T/manifest.orig" "$f"

# A blob longer than the manifest says (a sparse 4 GiB behind the small
# layer): skopeo stops at the largest size the manifest named.
f=$(reg_blob_file "$L2")
cp "$f" "$T/layer.orig"
rm -f "$cache/${L2#sha256:}"
truncate -s 4G "$f"
imp "docker://$REG/vhpc/hello-plus:1" --name toolong >"$T/e5" 2>&1
check_eq "a blob longer than its manifest says is refused" 1 "$?"
diag "$(cat "$T/e5")"
check_match "... saying so" "docker://$REG/vhpc/hello-plus:1: (a blob is larger than the manifest says|.*size)" "$(cat "$T/e5")"
nothing_left "a long blob" toolong
cp "$T/layer.orig" "$f"

# A layer that is not a tar archive.
head -c 100000 /dev/urandom >"$T/junk"
raw_layout "$T/junk-oci" junk "$T/junk" application/vnd.oci.image.layer.v1.tar+gzip && reg_push "$T/junk-oci:junk" vhpc/junk:1 >/dev/null
imp "docker://$REG/vhpc/junk:1" >"$T/e7" 2>&1
check_eq "a layer that is not a tar archive is refused" 1 "$?"
check_match "... saying so" "umoci could not unpack the image's layers \\(is one not a tar archive\\?\\)" "$(cat "$T/e7")"
diag "$(tail -1 "$T/e7" | cut -c1-300)"
nothing_left "not a tar" junk

# A manifest naming 257 layers (the same small blob again and again):
# refused before a layer is fetched.
mkdir -p "$T/many-oci" && cp -a "$T/junk-oci/." "$T/many-oci/"
mj=$(jq -r '.manifests[0].digest' "$T/many-oci/index.json")
jq -c '.layers = [range(257) as $i | .layers[0]]' "$T/many-oci/blobs/sha256/${mj#sha256:}" >"$T/many.man"
mm=$(sha256sum <"$T/many.man" | cut -d' ' -f1) && cp "$T/many.man" "$T/many-oci/blobs/sha256/$mm"
jq -c --arg d "sha256:$mm" --argjson n "$(stat -c %s "$T/many.man")" '.manifests[0].digest = $d | .manifests[0].size = $n' \
	"$T/junk-oci/index.json" >"$T/many-oci/index.json"
reg_push "$T/many-oci:junk" vhpc/many:1 >/dev/null
m=$(reg_mark)
imp "docker://$REG/vhpc/many:1" >"$T/e8" 2>&1
check_eq "a manifest of 257 layers is refused" 1 "$?"
check_match "... saying so" "the manifest lists 257 layers \\(1 to 256 taken\\)" "$(cat "$T/e8")"
check_eq "... before any blob is fetched" 0 "$(reg_blobs "$m" | cut -d' ' -f1)"
nothing_left "257 layers" many

# -- a registry killed while a large layer is in flight: behind a relay
# passing 8 MiB/s, so the layer takes seconds whatever the machine.
umoci unpack --image "$T/oci:hello" "$T/b" >/dev/null && head -c 64M /dev/urandom >"$T/b/rootfs/opt/app/big" &&
	umoci repack --image "$T/oci:big" "$T/b" && rm -rf "$T/b"
D3=$(reg_push "$T/oci:big" vhpc/big:1)
LB=$(jq -r '.layers[1].digest' "$T/oci/blobs/sha256/${D3#sha256:}")
check "a relay in front of the registry" reg_relay $((8 << 20))
m=$(reg_mark)
vhpc image import "docker://$RELAY/vhpc/big:1" --no-kvm --authfile "$REG_AUTH" --cert-dir "$REG_CERTS" >"$T/e6" 2>&1 &
ipid=$!
# Past 4 MiB through the relay, only the large layer can be flowing (the
# other is in the layer cache, manifest and config are small).
for i in $(seq 300); do
	passed=$(relay_bytes)
	[ "$passed" -gt $((4 << 20)) ] && break
	sleep 0.1
done
kill -KILL $REG_PID
wait $REG_PID 2>/dev/null
REG_PID=
check "the large layer was in flight when the registry was killed" \
	sh -c "! echo '$(reg_blobs "$m")' | grep -q '$LB' && [ '$passed' -gt $((4 << 20)) -a '$passed' -lt $((60 << 20)) ]"
diag "the relay had passed $passed bytes"
wait $ipid
check_eq "the import fails" 1 "$?"
check_match "... saying the registry stopped answering" "docker://$RELAY/vhpc/big:1: the registry stopped answering during the pull" \
	"$(cat "$T/e6")"
diag "$(cat "$T/e6")"
nothing_left "the registry stopped" big
check "the layer in flight is not in the layer cache" test ! -e "$cache/${LB#sha256:}"
check "the earlier layers still are" test -f "$cache/${L1#sha256:}"
check_eq "no registry is left running" "" "$(pgrep -f "docker-registry serve $T" || true)"
done_testing
