#!/usr/bin/env bash
# timeout: 120
# needs: hardware-virtualization
# VM snapshots (hv/README.md, "Snapshots"): a guest computing over many
# rounds on two vCPUs is paused mid-run, saved through the control socket
# and killed; a new vhpc-hv (seccomp on, as every hv test) restored from
# the file finishes with the result of a run left alone, twice from the
# same file.  A snapshot of a running guest, a corrupted byte in each
# section, a truncated file and a command line describing another machine
# are refused, each naming what is wrong.  A guest with virtio-vsock is
# saved and restored with its listener back.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

ARGS=(--kernel "$GUESTS/snap.elf" --debug-exit --vcpus 2 --mem 64M --cmdline rounds=150)

# The result of a run left alone.
run_guest snap --vcpus 2 --mem 64M --cmdline rounds=150
guest_ok "uninterrupted run"
want=$(grep '^GUEST result' "$OUT")
check "uninterrupted run printed a result" [ -n "$want" ]

# wait_line FILE PATTERN: up to 120 s
wait_line() {
	for _ in $(seq 1200); do grep -q "$2" "$1" && return 0; sleep 0.1; done
	return 1
}

sock=$T/ctl.sock
"$HV" "${ARGS[@]}" --control "$sock" >"$T/orig.out" 2>"$T/orig.err" </dev/null &
pid=$!
at_exit kill -9 $pid
check "original run reached round 10" wait_line "$T/orig.out" '^GUEST round 10$'

"$HVCTL" "$sock" snapshot "$T/running.snap" >"$T/running.reply" 2>&1
check_eq "snapshot of a running guest refused" 1 "$?"
check_match "refusal says to pause first" "pause it first" "$(cat "$T/running.reply")"
check "the refused snapshot's file is removed" [ ! -e "$T/running.snap" ]

check_match "snapshot_check of a machine whose devices all save: ok, running" '"ok":true,"state":"running"' \
	"$("$HVCTL" "$sock" snapshot_check 2>&1)"
check "pause" "$HVCTL" "$sock" pause
"$HVCTL" "$sock" snapshot "$T/s.snap" >"$T/snap.reply" 2>&1
check_eq "snapshot of the paused guest" 0 "$?"
diag "$(cat "$T/snap.reply")"
check_match "reply has bytes, ram_bytes and ms" '"bytes":[0-9]+,"ram_bytes":[0-9]+,"ms":[0-9]+' "$(cat "$T/snap.reply")"
size=$(stat -c %s "$T/s.snap")
check "file of $size bytes holds what the guest touched, not its 64 MiB (sparse)" [ "$size" -lt $((8 << 20)) -a "$size" -gt $((1 << 20)) ]
check "snapshot file is 0600" [ "$(stat -c %a "$T/s.snap")" = 600 ]
check "kill the original" "$HVCTL" "$sock" kill
wait $pid
check_eq "original ended by kill" 5 "$?"
last=$(grep '^GUEST round' "$T/orig.out" | tail -n 1)
check "original stopped mid-run ($last)" [ -z "$(grep '^GUEST result' "$T/orig.out")" ]

# Restore 1: from the path, left to run.
timeout -k 5 120 "$HV" "${ARGS[@]}" --restore "$T/s.snap" >"$T/r1.out" 2>"$T/r1.err" </dev/null
rc=$?
check_eq "restored guest finished (debug exit 0)" 64 "$rc"
[ "$rc" = 64 ] || diag "$(tail -n 5 "$T/r1.err")"
check_eq "restored run's result is the uninterrupted run's" "$want" "$(grep '^GUEST result' "$T/r1.out")"
check "restored run went on where the snapshot was (no round 0)" [ -z "$(grep '^GUEST round 0$' "$T/r1.out")" ]
check_match "restore is logged" "restored from" "$(cat "$T/r1.err")"

# Restore 2: the same file again, as a descriptor, started paused.
sock2=$T/ctl2.sock
exec 7<"$T/s.snap"
"$HV" "${ARGS[@]}" --restore /dev/fd/7 --paused --control "$sock2" >"$T/r2.out" 2>"$T/r2.err" </dev/null &
pid2=$!
exec 7<&-
at_exit kill -9 $pid2
for _ in $(seq 300); do [ -S "$sock2" ] && break; sleep 0.1; done
check_match "second restore starts paused" '"state":"paused"' "$("$HVCTL" "$sock2" status)"
sleep 1
check "paused: no guest output yet" [ ! -s "$T/r2.out" ]
check "resume" "$HVCTL" "$sock2" resume
timeout 120 tail --pid=$pid2 -f /dev/null
wait $pid2
check_eq "second restore finished" 64 "$?"
check_eq "second restore's result is the same" "$want" "$(grep '^GUEST result' "$T/r2.out")"

# refused FILE PATTERN DESC STATUS [args...]: a restore that must fail at
# set-up with exit STATUS: 8 (HV_EXIT_SNAPSHOT) for a damaged file, 1 for
# one of another machine.
refused() {
	local f=$1 pat=$2 d=$3 want=$4; shift 4
	timeout -k 5 60 "$HV" "${ARGS[@]}" "$@" --restore "$f" >"$T/bad.out" 2>"$T/bad.err" </dev/null
	local rc=$?
	if [ "$rc" = "$want" ] && grep -qE "$pat" "$T/bad.err" && [ ! -s "$T/bad.out" ]; then
		ok "$d"
	else
		fail "$d (exit $rc, want $want)"
		diag "$(tail -n 3 "$T/bad.err")"
	fi
}

# A byte flipped in each section's payload (the end section has none: its
# tag), and one in the header.
flip() { # FILE OFFSET -> $T/bad.snap
	cp "$1" "$T/bad.snap"
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$T/bad.snap" | tr -d ' ')
	printf "$(printf '\\%03o' $(((b ^ 0x5a) & 255)))" | dd of="$T/bad.snap" bs=1 seek="$2" conv=notrunc status=none
}
u64() { od -An -tu8 -j "$2" -N8 "$1" | tr -d ' '; }
u32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }
flip "$T/s.snap" 100
refused "$T/bad.snap" "header: checksum mismatch" "corrupted header refused as damaged" 8
off=128
names=()
while [ "$off" -lt "$size" ]; do
	tag=$(u32 "$T/s.snap" "$off")
	idx=$(u32 "$T/s.snap" $((off + 4)))
	len=$(u64 "$T/s.snap" $((off + 8)))
	case $tag in
	1179537219) what=configuration ;;    # CONF
	1414745430) what=irqchip ;;          # VMST
	1431323478) what="vCPU $idx" ;;      # VCPU
	541933906) what=RAM ;;               # RAM
	542524740) what="device [a-z0-9_]+" ;; # DEV
	541347397) what=end ;;               # END
	*) what="unknown tag $tag" ;;
	esac
	names+=("$what")
	if [ "$len" -gt 0 ]; then
		flip "$T/s.snap" $((off + 24 + len / 2))
		refused "$T/bad.snap" "$what: (checksum mismatch|extent)" "corrupted byte in section '$what' refused as damaged" 8
	else
		flip "$T/s.snap" "$off"
		refused "$T/bad.snap" "$what: found a section tagged" "corrupted tag of section '$what' refused as damaged" 8
	fi
	off=$((off + 24 + len))
done
diag "sections: ${names[*]}"
check_eq "sections end at the file's end" "$size" "$off"
check "every kind of section was corrupted once" [ "${#names[@]}" -ge 8 ]

head -c $((size / 2)) "$T/s.snap" >"$T/bad.snap"
refused "$T/bad.snap" "truncated" "truncated snapshot refused as damaged" 8
head -c 100 "$T/s.snap" >"$T/bad.snap"
refused "$T/bad.snap" "header: .*truncated" "snapshot cut inside the header refused as damaged" 8
: >"$T/bad.snap"
refused "$T/bad.snap" "header" "empty file refused as damaged" 8

# Another machine on the command line.
refused "$T/s.snap" "snapshot's guest has 64 MiB of RAM; this command line gives 128 MiB" \
	"different --mem refused, naming both (status 1: not damaged)" 1 --mem 128M
refused "$T/s.snap" "snapshot has 'vcpus=2', command line 'vcpus=1'" "different --vcpus refused, naming both" 1 --vcpus 1
truncate -s 1M "$T/disk.img"
refused "$T/s.snap" "snapshot has '--blk=0', command line '--blk=1'" "a device more refused, naming it" 1 \
	--blk "path=$T/disk.img"

# A guest with virtio-vsock (hv/README.md, "Snapshots"): snapshot_check
# answers yes, the paused guest is saved, and the restored one (under
# --seccomp) has its host listener again and finishes with the same result.
"$HV" "${ARGS[@]}" --vsock "cid=3,uds=$T/vsock" --control "$T/dev.sock" >"$T/dev.out" 2>"$T/dev.err" </dev/null &
pid3=$!
at_exit kill -9 $pid3
wait_line "$T/dev.out" '^GUEST round 2$'
check_match "snapshot_check of a guest with vsock: ok" '"ok":true' "$("$HVCTL" "$T/dev.sock" snapshot_check 2>&1)"
"$HVCTL" "$T/dev.sock" pause >/dev/null
"$HVCTL" "$T/dev.sock" snapshot "$T/dev.snap" >"$T/dev.reply" 2>&1
check_eq "snapshot with a virtio-vsock device" 0 "$?"
"$HVCTL" "$T/dev.sock" kill >/dev/null
wait $pid3
rm -f "$T/vsock"
"$HV" "${ARGS[@]}" --vsock "cid=3,uds=$T/vsock" --restore "$T/dev.snap" --paused --control "$T/dev2.sock" \
	>"$T/dev2.out" 2>"$T/dev2.err" </dev/null &
pid4=$!
at_exit kill -9 $pid4
for _ in $(seq 300); do [ -S "$T/dev2.sock" ] && break; sleep 0.1; done
check "the restored guest's vsock listener is back" [ -S "$T/vsock" ]
check "resume" "$HVCTL" "$T/dev2.sock" resume
timeout 120 tail --pid=$pid4 -f /dev/null
wait $pid4
check_eq "the restored guest with vsock finished" 64 "$?"
check_eq "... with the uninterrupted run's result" "$want" "$(grep '^GUEST result' "$T/dev2.out")"
refused "$T/dev.snap" "the snapshot's guest CID is 3, this one's 4" "a vsock snapshot restored with another CID refused" 1 \
	--vsock "cid=4,uds=$T/vsock"
done_testing
