#!/usr/bin/env bash
# timeout: 240
# needs: hardware-virtualization
# Snapshots of virtio devices (hv/README.md, "Snapshots"): a guest writing
# and reading its virtio-blk disk in bursts and sending a line per round
# through virtio-console is paused mid-run, saved and killed; restored on
# the disk as it was, it finishes with the result of a run left alone, the
# two disks are byte for byte the same, the ivshmem region the guest had
# moved is mapped where it put it (its file ends as the run left alone
# left its own), and the console goes on where it was.  A restore onto a disk of another size is refused naming the
# device; a guest whose device threads were busy when it was paused
# comes back with its queues working (every request completed).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

ARGS=(--kernel "$GUESTS/snapdev.elf" --debug-exit --vcpus 1 --mem 32M --cmdline "rounds=24 sectors=64")

wait_line() {
	for _ in $(seq 1200); do grep -q "$2" "$1" && return 0; sleep 0.1; done
	return 1
}

truncate -s 32K "$T/a.img" "$T/b.img"
truncate -s 64K "$T/a.shm" "$T/b.shm"
timeout -k 5 120 "$HV" "${ARGS[@]}" --shm "path=$T/a.shm" --blk "path=$T/a.img" --console "file:$T/a.cons" >"$T/a.out" 2>"$T/a.err" </dev/null
rc=$?
check_eq "uninterrupted run finished" 64 "$rc"
[ "$rc" = 64 ] || diag "$(tail -n 5 "$T/a.out")" "$(tail -n 5 "$T/a.err")"
check "uninterrupted run: every guest check passed" bash -c "! grep -q '^GUEST not ok' '$T/a.out'"
want=$(grep '^GUEST result' "$T/a.out")
check "uninterrupted run printed a result" [ -n "$want" ]
check_match "its console carried every round" "console round 23" "$(cat "$T/a.cons")"

sock=$T/ctl.sock
"$HV" "${ARGS[@]}" --shm "path=$T/b.shm" --blk "path=$T/b.img" --console "file:$T/b.cons" --control "$sock" \
	>"$T/b.out" 2>"$T/b.err" </dev/null &
pid=$!
at_exit kill -9 $pid
check "original run reached round 6" wait_line "$T/b.out" '^GUEST round 6$'
check "pause" "$HVCTL" "$sock" pause
"$HVCTL" "$sock" snapshot "$T/s.snap" >"$T/snap.reply" 2>&1
check_eq "snapshot of the guest with virtio-blk and virtio-console" 0 "$?"
diag "$(cat "$T/snap.reply")" "$(grep -c '^GUEST round' "$T/b.out") rounds before the pause"
"$HVCTL" "$sock" kill >/dev/null
wait $pid
check "original stopped mid-run" [ -z "$(grep '^GUEST result' "$T/b.out")" ]
last=$(grep '^console round' "$T/b.cons" | tail -n 1)
cp "$T/b.img" "$T/b-at-snapshot.img"

# A disk of another size: refused naming the device, before the guest runs.
truncate -s 64K "$T/c.img"
timeout -k 5 60 "$HV" "${ARGS[@]}" --shm "path=$T/b.shm" --blk "path=$T/c.img" --console none --restore "$T/s.snap" \
	>"$T/c.out" 2>"$T/c.err" </dev/null
check_eq "restore onto a disk of another size: set-up error" 1 "$?"
check_match "... naming the device and both sizes" "device virtio_blk: vblk0: the snapshot's disk has 64 sectors, this one 128" \
	"$(cat "$T/c.err")"

truncate -s 128K "$T/c.shm"
timeout -k 5 60 "$HV" "${ARGS[@]}" --shm "path=$T/c.shm" --blk "path=$T/b.img" --console none --restore "$T/s.snap" \
	>"$T/c.out" 2>"$T/c.err" </dev/null
check_eq "restore with an ivshmem region of another size: set-up error" 1 "$?"
check_match "... naming the device and both sizes" "device ivshmem: ivshmem0: the snapshot's region has 65536 bytes, this one 131072" \
	"$(cat "$T/c.err")"

timeout -k 5 120 "$HV" "${ARGS[@]}" --shm "path=$T/b.shm" --blk "path=$T/b.img" --console "file:$T/r.cons" --restore "$T/s.snap" \
	>"$T/r.out" 2>"$T/r.err" </dev/null
rc=$?
check_eq "restored guest finished" 64 "$rc"
[ "$rc" = 64 ] || diag "$(tail -n 5 "$T/r.out")" "$(tail -n 5 "$T/r.err")"
check "restored run: every guest check passed (each request completed)" bash -c "! grep -q '^GUEST not ok' '$T/r.out'"
[ -z "$(grep '^GUEST not ok' "$T/r.out")" ] || diag "$(grep '^GUEST not ok' "$T/r.out" | head -n 3)"
check_eq "restored run's result is the uninterrupted run's" "$want" "$(grep '^GUEST result' "$T/r.out")"
check "the restored disk equals the uninterrupted run's" cmp "$T/a.img" "$T/b.img"
check "the restored ivshmem region equals the uninterrupted run's" cmp "$T/a.shm" "$T/b.shm"
check "the guest wrote its region" [ -n "$(tr -d '\0' <"$T/a.shm" | head -c 1)" ]
check_match "restored console goes on ($last before)" "console round 23" "$(cat "$T/r.cons" 2>/dev/null)"
check "restored console did not start over" bash -c "! grep -q '^console round 0$' '$T/r.cons'"
done_testing
