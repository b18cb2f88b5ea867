#!/usr/bin/env bash
# timeout: 60
# needs: hardware-virtualization
# ivshmem-plain: two vhpc-hv processes map one file in /dev/shm as BAR2 of
# their guests; each guest sees the other's writes, and the host sees both
# in the file.  BAR2 moved by the guest keeps the memory.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
SHM=/dev/shm/vhpc-hvt-shm-$$
at_exit rm -f "$SHM"
nonce=s$$

for r in a b; do
	"$HV" --kernel "$GUESTS/shm.elf" --debug-exit --vcpus 1 --mem 32M --shm "path=$SHM,size=2M" \
		--cmdline "role=$r size=2097152 nonce=$nonce" >"$T/$r.out" 2>"$T/$r.err" </dev/null &
	eval "pid_$r=$!"
	at_exit kill -9 $!
done
for r in a b; do
	eval "p=\$pid_$r"
	timeout 60 tail --pid=$p -f /dev/null
	wait $p
	RC=$?
	OUT=$T/$r.out ERR=$T/$r.err
	guest_ok "guest $r"
	guest_results "$r"
done
check "the file is 2 MiB" [ "$(stat -c %s "$SHM")" = 2097152 ]
check "the host sees guest a's text in the file" grep -qa "A:$nonce" "$SHM"
check "the host sees guest b's text in the file" grep -qa "B:$nonce" "$SHM"
check "the file's mode is 0600" [ "$(stat -c %a "$SHM")" = 600 ]

# Guests started together on a new file: each must find it at its size,
# never half made (one found 0 bytes in CI when the file was created in place).
for round in 1 2; do
	F=$SHM-race$round
	at_exit rm -f "$F"
	pids=
	for g in 1 2 3 4; do
		"$HV" --kernel "$GUESTS/shm.elf" --debug-exit --vcpus 1 --mem 16M --shm "path=$F,size=1M" \
			--cmdline "role=c size=1048576" >"$T/race$g.out" 2>"$T/race$g.err" </dev/null &
		pids="$pids $!"
		at_exit kill -9 $!
	done
	g=0
	for p in $pids; do
		g=$((g + 1))
		timeout 60 tail --pid=$p -f /dev/null
		wait $p
		RC=$?
		OUT=$T/race$g.out ERR=$T/race$g.err
		guest_ok "round $round: guest $g of 4 started together"
	done
	check "round $round: the file is 1 MiB" [ "$(stat -c %s "$F")" = 1048576 ]
	check "round $round: no temporary file is left beside it" [ -z "$(ls -d "$F".* 2>/dev/null)" ]
done

run_guest shm --vcpus 1 --mem 32M --shm "path=$SHM,size=4M"
check_match "a size other than the file's is refused" "is 2097152 bytes, not size=4194304" "$(cat "$ERR")"
run_guest shm --vcpus 1 --mem 32M --shm "path=$SHM-none"
check_match "a missing file without size= is refused" "does not exist; give size= to create it" "$(cat "$ERR")"
run_guest shm --vcpus 1 --mem 32M --shm "path=$SHM-x,size=3M"
check_match "a size that is no power of two is refused" "size=3145728 is not a power of two" "$(cat "$ERR")"
check "... and creates nothing" [ ! -e "$SHM-x" ]
run_guest shm --vcpus 1 --mem 32M --shm "path=$T/no-such-folder/r,size=1M"
check_match "a file in a folder that does not exist is refused by name" \
	"creating $T/no-such-folder/r with 1048576 bytes: No such file or directory" "$(cat "$ERR")"
done_testing
