# A registry on loopback for the registry-pull tests and benchmark:
# Debian's docker-registry (the CNCF distribution registry) with TLS (a CA
# and a certificate made here with openssl) and basic auth (an htpasswd
# bcrypt entry), listening on 127.0.0.1 only, on a port of its own, its
# storage and logs under $T.  Source after tests/lib.sh with T set.
#
# reg_start sets REG (127.0.0.1:PORT), REG_CERTS (the CA, for --cert-dir),
# REG_AUTH (an auth.json for it, as skopeo login writes), REG_DATA (its
# storage), REG_LOG and REG_PID; the registry is stopped at exit.

# The registry program: make check's set-up takes it out of Debian's
# package into $B/tools (Makefile, "tools": installing the package would
# start a registry on every address); one on the PATH does as well.
REG_BIN=${VHPC_TOP:-${top:-.}}/${B:-build}/tools/docker-registry
[ -x "$REG_BIN" ] || REG_BIN=$(command -v docker-registry || true)

reg_need() {
	local t
	[ -n "$REG_BIN" ] || { echo "docker-registry is not here: make tools takes it out of Debian's package"; return 1; }
	for t in htpasswd openssl skopeo umoci jq; do
		command -v $t >/dev/null || { echo "$t is not installed (make deps installs it)"; return 1; }
	done
}

reg_start() {
	local d=$T/registry port i
	mkdir -p "$d/certs" "$d/data" || return 1
	openssl req -x509 -newkey ed25519 -nodes -keyout "$d/ca.key" -out "$d/certs/ca.crt" -days 1 \
		-subj /CN=vhpc-test-ca 2>/dev/null || return 1
	openssl req -newkey ed25519 -nodes -keyout "$d/srv.key" -out "$d/srv.csr" -subj /CN=127.0.0.1 2>/dev/null &&
		printf 'subjectAltName=IP:127.0.0.1\n' >"$d/ext" &&
		openssl x509 -req -in "$d/srv.csr" -CA "$d/certs/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
			-out "$d/srv.crt" -days 1 -extfile "$d/ext" 2>/dev/null || return 1
	REG_USER=vhpc-test REG_PASS=$(openssl rand -hex 12)
	# The password goes in on stdin: a command line is anyone's to read.
	printf '%s\n' "$REG_PASS" | htpasswd -iBc "$d/htpasswd" "$REG_USER" 2>/dev/null || return 1
	for i in $(seq 20); do
		port=$((20000 + RANDOM % 30000))
		[ -z "$(ss -Htln "sport = :$port")" ] && break
	done
	cat >"$d/config.yml" <<EOF
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $d/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  secret: $(openssl rand -hex 16)
  tls:
    certificate: $d/srv.crt
    key: $d/srv.key
auth:
  htpasswd:
    realm: vhpc-test
    path: $d/htpasswd
EOF
	REG=127.0.0.1:$port REG_CERTS=$d/certs REG_AUTH=$d/auth.json REG_DATA=$d/data/docker/registry/v2 REG_LOG=$d/log
	"$REG_BIN" serve "$d/config.yml" >"$REG_LOG" 2>&1 &
	REG_PID=$!
	at_exit "reg_stop"
	for i in $(seq 100); do
		grep -q "listening on $REG" "$REG_LOG" && break
		kill -0 $REG_PID 2>/dev/null || break
		sleep 0.05
	done
	grep -q "listening on $REG" "$REG_LOG" || { tail -5 "$REG_LOG" >&2; return 1; }
	( umask 077; printf '%s\n' "$REG_PASS" | skopeo login --authfile "$REG_AUTH" --cert-dir "$REG_CERTS" \
		--password-stdin -u "$REG_USER" "$REG" >/dev/null )
}

# reg_start_plain: a second registry on the same storage, plain HTTP and
# no auth (a site's unprotected mirror); sets PLAIN and PLAIN_PID.
reg_start_plain() {
	local d=$T/registry port i
	for i in $(seq 20); do
		port=$((20000 + RANDOM % 30000))
		[ -z "$(ss -Htln "sport = :$port")" ] && break
	done
	printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n  secret: %s\n' \
		"$d/data" "$port" "$(openssl rand -hex 16)" >"$d/plain.yml"
	PLAIN=127.0.0.1:$port
	"$REG_BIN" serve "$d/plain.yml" >"$d/plain.log" 2>&1 &
	PLAIN_PID=$!
	at_exit "kill $PLAIN_PID 2>/dev/null; wait $PLAIN_PID 2>/dev/null"
	for i in $(seq 100); do
		grep -q "listening on $PLAIN" "$d/plain.log" && return 0
		kill -0 $PLAIN_PID 2>/dev/null || break
		sleep 0.05
	done
	tail -5 "$d/plain.log" >&2
	return 1
}

reg_stop() {
	[ -n "${REG_PID-}" ] || return 0
	kill -CONT $REG_PID 2>/dev/null
	kill $REG_PID 2>/dev/null
	wait $REG_PID 2>/dev/null
	REG_PID=
}

# reg_relay RATE: the relay (tests/images/relay.c) in front of the
# registry, passing at most RATE bytes a second per connection (0: no
# limit) and counting them; sets RELAY (127.0.0.1:PORT, logged in too),
# RELAY_PID, RELAY_COUNTS.  relay_bytes: what it passed to clients so far.
reg_relay() {
	local i
	rm -f "$T/relay.port"
	"$VHPC_TOP/$B/testbin/relay" "$T/relay.port" "${REG#*:}" "$1" "$T/relay.counts" &
	RELAY_PID=$! RELAY_COUNTS=$T/relay.counts
	at_exit "kill $RELAY_PID 2>/dev/null; wait $RELAY_PID 2>/dev/null"
	for i in $(seq 100); do [ -s "$T/relay.port" ] && break; sleep 0.05; done
	RELAY=127.0.0.1:$(cat "$T/relay.port") || return 1
	( umask 077; printf '%s\n' "$REG_PASS" | skopeo login --authfile "$REG_AUTH" --cert-dir "$REG_CERTS" \
		--password-stdin -u "$REG_USER" "$RELAY" >/dev/null )
}
relay_bytes() {
	local i
	rm -f "$RELAY_COUNTS"
	kill -USR1 $RELAY_PID
	for i in $(seq 100); do [ -s "$RELAY_COUNTS" ] && break; sleep 0.02; done
	cut -d' ' -f1 "$RELAY_COUNTS"
}

# reg_push LAYOUT:TAG REPO:TAG: pushed; prints the manifest's digest.
reg_push() {
	skopeo --policy <(echo '{"default":[{"type":"insecureAcceptAnything"}]}') copy --quiet \
		--authfile "$REG_AUTH" --dest-cert-dir "$REG_CERTS" --digestfile "$T/pushed.digest" \
		"oci:$1" "docker://$REG/$2" >&2 && cat "$T/pushed.digest"
}

# reg_mark: where the access log is now; reg_blobs MARK: "COUNT BYTES DIGESTS..."
# of the blobs the registry sent whole since (200 answers to GET .../blobs/).
reg_mark() { wc -l <"$REG_LOG"; }
reg_blobs() {
	tail -n +$(($1 + 1)) "$REG_LOG" | awk '$6 == "\"GET" && $7 ~ /\/blobs\/sha256:/ && $9 == 200 {
		n++; b += $10; split($7, p, "/blobs/"); d = d " " p[2] } END { print n + 0, b + 0 d }'
}

# raw_layout DIR TAG FILE MEDIATYPE: an OCI layout by hand whose one layer
# is FILE as it is, labelled MEDIATYPE (for layers umoci would not make).
raw_layout() {
	local d=$1 l c m
	mkdir -p "$d/blobs/sha256" && echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout" || return 1
	l=$(sha256sum <"$3" | cut -d' ' -f1) && cp "$3" "$d/blobs/sha256/$l"
	printf '{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$l" >"$T/raw.cfg"
	c=$(sha256sum <"$T/raw.cfg" | cut -d' ' -f1) && cp "$T/raw.cfg" "$d/blobs/sha256/$c"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"%s","digest":"sha256:%s","size":%d}]}' \
		"$c" "$(stat -c %s "$T/raw.cfg")" "$4" "$l" "$(stat -c %s "$3")" >"$T/raw.man"
	m=$(sha256sum <"$T/raw.man" | cut -d' ' -f1) && cp "$T/raw.man" "$d/blobs/sha256/$m"
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
		"$m" "$(stat -c %s "$T/raw.man")" "$2" >"$d/index.json"
}

# reg_blob_file DIGEST: where the registry stores it.
reg_blob_file() { local h=${1#sha256:}; echo "$REG_DATA/blobs/sha256/${h:0:2}/$h/data"; }
