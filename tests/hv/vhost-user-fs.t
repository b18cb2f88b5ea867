#!/usr/bin/env bash
# timeout: 300
# needs: hardware-virtualization
# vhost-user-fs (--fs) against QEMU's C virtiofsd, with a test guest that
# speaks FUSE over the rings vhpc-hv handed to it: it reads a file the test
# put in the shared folder and writes one the test checks here, through
# the kick eventfds (KVM ioeventfd) and call eventfds (KVM irqfd); then it
# resets the device and sets it up again.  RAM above 4 GiB (a second
# memory-table region), a socket passed as /dev/fd/N, a back-end killed
# while the guest runs (the device asks for a reset, vhpc-hv goes on), and
# virtiofsd gone once vhpc-hv is.  A recording back-end (hvt vhu-backend)
# checks the message order, acks, descriptors, the memory table and the
# ring addresses; a misbehaving one each way a reply can be wrong.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
need_root
need_virtiofsd

# state PID: the process's state letter, empty once it is reaped or gone.
pstate() { sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null; }
# exited_within SECONDS PID: the process ended by itself (a zombie counts:
# the helpers are disowned, so nobody reaps them before the test ends).
exited_within() {
	local i
	for ((i = 0; i < $1 * 20; i++)); do
		case $(pstate "$2") in ''|Z|X) return 0 ;; esac
		sleep 0.05
	done
	return 1
}
# start_vfsd NAME DIR: virtiofsd on $T/NAME.sock sharing DIR; sets VFSD_PID.
start_vfsd() {
	rm -f "$T/$1.sock"
	"$VFSD" --socket-path="$T/$1.sock" -o source="$2" -o sandbox=chroot -o cache=none \
		-o log_level=debug >"$T/$1.vfsd.log" 2>&1 </dev/null &
	VFSD_PID=$!
	disown $VFSD_PID   # killing it is part of the test: no job notices
	at_exit kill -9 $VFSD_PID
	for i in $(seq 100); do [ -S "$T/$1.sock" ] && return 0; sleep 0.05; done
	return 1
}
# backend MODE NAME: the scripted back-end on $T/NAME.sock, log $T/NAME.log.
backend() {
	rm -f "$T/$2.sock"
	"$HVT" vhu-backend "$1" "$T/$2.sock" "$T/$2.log" </dev/null &
	BE_PID=$!
	disown $BE_PID
	at_exit kill -9 $BE_PID
	for i in $(seq 100); do [ -S "$T/$2.sock" ] && return 0; sleep 0.05; done
	return 1
}

share=$T/share
mkdir -p "$share"
"$HVT" pattern "$share/hello.bin" 12288 7
FS_ARGS="size=12288 seed=7 wsize=8192 wseed=9"

# --- the real back-end --------------------------------------------------
start_vfsd a "$share" || fail "virtiofsd did not create its socket"
run_guest vfs -v --vcpus 1 --mem 32M --fs "tag=hostshare,socket=$T/a.sock" --cmdline "tag=hostshare $FS_ARGS"
guest_ok "vfs guest against virtiofsd"
guest_results "virtiofsd"
check "the file the guest wrote is on the host" test -f "$share/fromguest.bin"
check_eq "... 8192 bytes long" 8192 "$(stat -c %s "$share/fromguest.bin" 2>/dev/null)"
check "... holding the guest's bytes (pattern seed 9)" "$HVT" checkpat "$share/fromguest.bin" 0 8192 9
check "the host's file is unchanged" "$HVT" checkpat "$share/hello.bin" 0 12288 7
check_match "set-up: features and protocol features from virtiofsd (REPLY_ACK and MQ, 2 queues)" \
	"vfs0: tag 'hostshare', vhost-user back-end .*a.sock: features 0x1[0-9a-f]*, protocol features 0x9 \(acks, back-end serves 2 queues\)" \
	"$(cat "$ERR")"
check_match "completions go to the guest by KVM irqfd" "vfs0: queue 1 completions through KVM irqfd \(MSI-X vector 2\)" "$(cat "$ERR")"
check "notifications reach the back-end by ioeventfd (no vCPU exit)" \
	bash -c "! grep -q 'notified through a vCPU exit' '$ERR'"
check_match "the reset stopped the rings (GET_VRING_BASE)" "vfs0: ring 1 stopped at [1-9]" "$(cat "$ERR")"
vlog=$(cat "$T/a.vfsd.log")
check_match "virtiofsd: took the connection" "Received vhost-user socket connection" "$vlog"
check_match "virtiofsd: request queue started" "fv_queue_set_started: qidx=1 started=1" "$vlog"
check_match "virtiofsd: ... stopped by the reset" "fv_queue_set_started: qidx=1 started=0" "$vlog"
check_eq "virtiofsd: started twice (before and after the reset)" 2 "$(grep -c 'qidx=1 started=1' "$T/a.vfsd.log")"
check "virtiofsd exits once vhpc-hv is gone" exited_within 10 $VFSD_PID

# RAM above 4 GiB: two regions of the memory table, one memfd; a READ
# into a buffer up there.  And a tag of the full 36 bytes (no NUL).
rm -f "$share/fromguest.bin"
start_vfsd b "$share" || fail "virtiofsd did not create its socket"
tag36=abcdefghijklmnopqrstuvwxyz0123456789
run_guest vfs --vcpus 1 --mem 3584M --no-prefault --fs "tag=$tag36,socket=$T/b.sock" \
	--cmdline "tag=$tag36 $FS_ARGS high=1"
guest_ok "vfs guest with 3.5 GiB (RAM above 4 GiB) and a 36-byte tag"
check_match "... its READ into a buffer above 4 GiB arrived" "GUEST ok - READ into a buffer above 4 GiB" "$(cat "$OUT")"
check "virtiofsd exits once vhpc-hv is gone" exited_within 10 $VFSD_PID

# A socket connected by the starter, passed as /dev/fd/5.
rm -f "$share/fromguest.bin"
start_vfsd c "$share" || fail "virtiofsd did not create its socket"
OUT=$T/fd.out ERR=$T/fd.err
timeout -k 5 60 "$HVT" connect-exec "$T/c.sock" 5 "$HV" --kernel "$GUESTS/vfs.elf" --debug-exit --vcpus 1 \
	--mem 32M --fs "tag=fdshare,socket=/dev/fd/5" --cmdline "tag=fdshare $FS_ARGS" >"$OUT" 2>"$ERR" </dev/null
RC=$?
guest_ok "vfs guest with the back-end's socket passed as /dev/fd/5"
check "... and the guest's file arrived" "$HVT" checkpat "$share/fromguest.bin" 0 8192 9
check "virtiofsd exits once vhpc-hv is gone" exited_within 10 $VFSD_PID

# The back-end dies under a running guest: the device asks for a reset,
# the guest carries on and ends normally.  (The file goes first: this
# virtiofsd aborts on a FUSE_CREATE of an existing file, which a Linux
# guest, looking up first, does not send.)
rm -f "$share/fromguest.bin"
start_vfsd d "$share" || fail "virtiofsd did not create its socket"
OUT=$T/die.out ERR=$T/die.err
timeout -k 5 60 "$HV" --kernel "$GUESTS/vfs.elf" --debug-exit --vcpus 1 --mem 32M \
	--fs "tag=dying,socket=$T/d.sock" --cmdline "tag=dying $FS_ARGS mode=die" >"$OUT" 2>"$ERR" </dev/null &
hv=$!
at_exit kill -9 $hv
for i in $(seq 400); do grep -q 'waiting for the back-end to go' "$OUT" && break; sleep 0.05; done
kill -9 $VFSD_PID
wait $hv
RC=$?
guest_ok "virtiofsd killed under a running guest: the guest still ends normally"
guest_results "backend killed"
check_match "... and the log says the back-end was lost" \
	"vfs0: vhost-user back-end lost \(the back-end closed the connection\)" "$(cat "$ERR")"

# --- the recording back-end ---------------------------------------------
backend record rec || fail "hvt vhu-backend did not listen"
run_guest vfs -v --vcpus 1 --mem 32M --fs "tag=rec,socket=$T/rec.sock" --cmdline "tag=rec mode=record"
guest_ok "vfs guest against the recording back-end"
guest_results "recorded"
exited_within 10 $BE_PID
rlog=$(cat "$T/rec.log")
check "no message the recording back-end found malformed" bash -c "! grep '^BAD' '$T/rec.log'"
grep -q '^BAD' "$T/rec.log" && diag "$(grep '^BAD' "$T/rec.log")"
want="GET_FEATURES GET_PROTOCOL_FEATURES SET_PROTOCOL_FEATURES GET_QUEUE_NUM SET_OWNER SET_FEATURES SET_MEM_TABLE"
for q in 0 1; do want="$want SET_VRING_NUM SET_VRING_BASE SET_VRING_ADDR SET_VRING_CALL SET_VRING_KICK"; done
want="$want SET_VRING_ENABLE SET_VRING_ENABLE GET_VRING_BASE GET_VRING_BASE EOF"
check_eq "message order: handshake, start, reset, close" "$want" \
	"$(grep -E '^[A-Z_]+( |$)' "$T/rec.log" | grep -v '^BAD' | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//')"
check_match "protocol features: only REPLY_ACK and MQ taken of those offered" "^SET_PROTOCOL_FEATURES 0x9$" "$rlog"
check_match "SET_FEATURES: VERSION_1, the ring features and PROTOCOL_FEATURES, nothing vhost-only" \
	"^SET_FEATURES 0x170000000 \(ack asked\)" "$rlog"
check_match "acks asked on every request without a reply of its own" "^SET_OWNER \(ack asked\)" "$rlog"
check_match "memory table: one region, guest RAM's memfd at offset 0, mappable" \
	"^SET_MEM_TABLE 1 region; gpa 0x0 size 0x2000000 offset 0x0 fd memfd:vhpc-guest-ram mapped" "$rlog"
check_match "kick and call descriptors are eventfds" "SET_VRING_KICK ring 1 fd eventfd" "$rlog"
check_match "... both of them" "SET_VRING_CALL ring 1 fd eventfd" "$rlog"
check_match "ring size as the driver set it" "SET_VRING_NUM ring 1 num 64" "$rlog"
for q in 0 1; do
	g=$(sed -n "s/^GUEST ring $q desc \(0x[0-9a-f]*\) avail \(0x[0-9a-f]*\) used \(0x[0-9a-f]*\)$/desc \1 avail \2 used \3/p" "$OUT")
	check_match "ring $q: the user addresses sent translate, through the table, to the driver's ring ($g)" \
		"SET_VRING_ADDR ring $q flags 0 $g" "$rlog"
done
check_match "the back-end reads the driver's buffer through the memory it was given" \
	"ring 1: avail idx 1, first buffer 'VHPC-VHU-MARKER'" "$rlog"
check_match "the driver's notify writes reached the kick eventfd" "ring 1: kick eventfd count [12]" "$rlog"
check "... by ioeventfd (no vCPU exit)" bash -c "! grep -q 'notified through a vCPU exit' '$ERR'"

# Two regions when RAM reaches above 4 GiB, the same memfd at 3 GiB.
backend record rec2 || fail "hvt vhu-backend did not listen"
run_guest vfs --vcpus 1 --mem 3584M --no-prefault --fs "tag=rec,socket=$T/rec2.sock" --cmdline "tag=rec mode=record"
exited_within 10 $BE_PID
check_match "memory table with 3.5 GiB: below the hole and above 4 GiB, offsets into one memfd" \
	"^SET_MEM_TABLE 2 regions; gpa 0x0 size 0xc0000000 offset 0x0 fd memfd:vhpc-guest-ram mapped; gpa 0x100000000 size 0x20000000 offset 0xc0000000 fd memfd:vhpc-guest-ram mapped" \
	"$(cat "$T/rec2.log")"

# --- misbehaving back-ends ----------------------------------------------
# At set-up each is a start-up error that says what the back-end did,
# within the time limit, and vhpc-hv leaves nothing behind.
hostile() {   # MODE REGEX
	backend "$1" evil || { fail "hvt vhu-backend did not listen"; return; }
	local t0=$SECONDS
	run_guest vfs --vcpus 1 --mem 32M --fs "tag=x,socket=$T/evil.sock,timeout=500" --cmdline "tag=x"
	check_eq "back-end '$1' at set-up: start-up error" 1 "$RC"
	check_match "... saying: $2" "error: .*--fs tag=x,socket=.*evil.sock,timeout=500: .*$2" "$(cat "$ERR")"
	check "... within 5 s ($((SECONDS - t0)) s)" test $((SECONDS - t0)) -le 5
	kill -9 $BE_PID 2>/dev/null
}
hostile close:GET_FEATURES "GET_FEATURES: the back-end closed the connection"
hostile wrong:GET_FEATURES "GET_FEATURES: the back-end answered request 2 \(SET_FEATURES\) instead"
hostile short:GET_PROTOCOL_FEATURES "GET_PROTOCOL_FEATURES: reply cut short \(15 of 20 bytes within 500 ms\)"
hostile silent:SET_OWNER "SET_OWNER: no reply within 500 ms"
hostile huge:GET_QUEUE_NUM "GET_QUEUE_NUM: reply payload of 4294967295 bytes, expected 8"
hostile request:GET_FEATURES "GET_FEATURES: the back-end sent a request \(flags 0x1\) where a reply was due"
hostile version:GET_FEATURES "GET_FEATURES: reply in protocol version 2"
hostile nack:SET_OWNER "SET_OWNER: the back-end refused it \(status 1\)"
hostile nov1 "does not offer VIRTIO_F_VERSION_1"
# A stray message where none was due puts the stream out of step: caught
# at the next reply.
hostile version:SET_PROTOCOL_FEATURES "GET_QUEUE_NUM: the back-end answered request 16"

# Failing the start (DRIVER_OK): the device asks for a reset, the guest
# sees it, vhpc-hv carries on.
refused() {   # MODE REGEX
	backend "$1" evil || { fail "hvt vhu-backend did not listen"; return; }
	run_guest vfs --vcpus 1 --mem 32M --fs "tag=x,socket=$T/evil.sock,timeout=500" --cmdline "tag=x mode=refused"
	guest_ok "back-end '$1' at DRIVER_OK: the guest sees NEEDS_RESET and ends normally"
	check_match "... the log names the device and the message" "vfs0: vhost-user back-end lost \($2\)" "$(cat "$ERR")"
	kill -9 $BE_PID 2>/dev/null
}
refused nack:SET_MEM_TABLE "SET_MEM_TABLE: the back-end refused it \(status 1\)"
refused close:SET_VRING_KICK "SET_VRING_KICK: the back-end closed the connection"
refused silent:SET_VRING_ADDR "SET_VRING_ADDR: no reply within 500 ms"

# Descriptors sent with a reply are closed: were the one sent here (the
# back-end's own end of the socket) kept, vhpc-hv would never see the
# back-end close.
backend fds:GET_FEATURES evil || fail "hvt vhu-backend did not listen"
OUT=$T/fds.out ERR=$T/fds.err
timeout -k 5 60 "$HV" --kernel "$GUESTS/vfs.elf" --debug-exit --vcpus 1 --mem 32M \
	--fs "tag=x,socket=$T/evil.sock,timeout=500" --cmdline "tag=x mode=refused" >"$OUT" 2>"$ERR" </dev/null &
hv=$!
for i in $(seq 200); do grep -q 'SET_VRING_KICK ring 1' "$T/evil.log" 2>/dev/null && break; sleep 0.05; done
kill -9 $BE_PID
wait $hv
RC=$?
guest_ok "a descriptor sent with a reply is closed: the back-end's exit is seen"
check_match "... as a lost back-end" "vfs0: vhost-user back-end lost \(the back-end closed the connection\)" "$(cat "$ERR")"

# --- options --------------------------------------------------------------
run_guest vfs --vcpus 1 --mem 32M --fs "socket=$T/none.sock"
check_eq "--fs without tag: usage error" 2 "$RC"
check_match "... saying tag= is required" "tag= \(the name the guest mounts\) is required" "$(cat "$ERR")"
run_guest vfs --vcpus 1 --mem 32M --fs "tag=${tag36}x,socket=$T/none.sock"
check_match "a 37-byte tag is refused" "tag= is at most 36 bytes" "$(cat "$ERR")"
run_guest vfs --vcpus 1 --mem 32M --fs "tag=x"
check_match "--fs without socket: refused" "socket= \(the vhost-user back-end's socket\) is required" "$(cat "$ERR")"
run_guest vfs --vcpus 1 --mem 32M --fs "tag=x,socket=$T/none.sock,queue-size=100"
check_match "queue-size not a power of two: refused" "queue-size=100 is not a power of two" "$(cat "$ERR")"
run_guest vfs --vcpus 1 --mem 32M --fs "tag=x,socket=$T/none.sock"
check_eq "no back-end listening: start-up error" 1 "$RC"
check_match "... naming the socket" "connecting to .*none.sock: No such file or directory" "$(cat "$ERR")"
start_vfsd q "$share" || fail "virtiofsd did not create its socket"
run_guest vfs --vcpus 1 --mem 32M --fs "tag=x,socket=$T/q.sock,queues=2"
check_eq "queues=2 with a back-end that serves 2 queues: start-up error" 1 "$RC"
check_match "... saying how many it serves" "back-end serves at most 2 queues; queues=2 needs 3" "$(cat "$ERR")"
check "virtiofsd exits once vhpc-hv gave up" exited_within 10 $VFSD_PID
run_guest vfs --vcpus 1 --mem 32M --fs "tag=x,socket=/dev/fd/9"
check_match "/dev/fd/9 not open: refused" "/dev/fd/9: Bad file descriptor" "$(cat "$ERR")"
exec 8<>"$share/hello.bin"
run_guest vfs --vcpus 1 --mem 32M --fs "tag=x,socket=/dev/fd/8"
check_match "/dev/fd/8 a file, not a socket: refused" "/dev/fd/8 is not a unix stream socket" "$(cat "$ERR")"
exec 8<&-
printf 'kernel: %s\nvcpus: 1\nmem: 32M\nfs:\n  - {tag: x, socket: %s, queues: 9}\n' "$GUESTS/vfs.elf" "$T/none.sock" >"$T/fs.yaml"
run_guest vfs --config "$T/fs.yaml"
check_match "YAML: queues out of range reported with file:line:column" "fs.yaml:5:[0-9]+: .*queues" "$(cat "$ERR")"
done_testing
