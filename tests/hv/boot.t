#!/usr/bin/env bash
# timeout: 120
# needs: hardware-virtualization
# Boot information a PVH test guest receives: memory map equal to the
# configured layout (low RAM, the 32-bit hole with the PCI ECAM area
# reserved, RAM above 4 GiB), the command
# line, and an initrd that arrives intact (CRC32 checked in the guest).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

e820() { grep '^E820 ' "$OUT" | sed 's/^E820 //'; }

# 64 MiB: everything below the hole.
run_guest bootinfo --vcpus 1 --mem 64M --cmdline "marker=abc quiet x=1"
guest_ok "bootinfo guest, 64M"
check_eq "e820 for 64M: low RAM, EBDA/BIOS reserved, RAM from 1 MiB, ECAM reserved" \
	"0x0 0x9fc00 1
0x9fc00 0x60400 2
0x100000 0x3f00000 1
0xe0000000 0x10000000 2" "$(e820)"
check_eq "guest saw our command line" "CMDLINE marker=abc quiet x=1" "$(grep '^CMDLINE' "$OUT")"

# 3.5 GiB: 3 GiB below the hole, 512 MiB above 4 GiB (not prefaulted: the
# layout is what is tested here).
run_guest bootinfo --vcpus 1 --mem 3584M --no-prefault --cmdline marker=big
guest_ok "bootinfo guest, 3584M"
check_eq "e820 for 3584M: hole from 3 GiB to 4 GiB, 512 MiB above 4 GiB" \
	"0x0 0x9fc00 1
0x9fc00 0x60400 2
0x100000 0xbff00000 1
0xe0000000 0x10000000 2
0x100000000 0x20000000 1" "$(e820)"

# initrd: random bytes; gzip's trailer carries their CRC32.
head -c 12345 /dev/urandom >"$T/initrd"
crc=$(gzip -c "$T/initrd" | tail -c 8 | head -c 4 | od -An -tx4 | tr -d ' ')
run_guest bootinfo --vcpus 1 --mem 64M --initrd "$T/initrd" --cmdline "marker=rd initrd_size=12345 initrd_crc=0x$crc"
guest_ok "bootinfo guest with initrd"
guest_results "initrd"
check_match "initrd placed at the top of low RAM" '^INITRD 0x3ff[0-9a-f]{4} 12345 ' "$(grep '^INITRD' "$OUT")"

# A corrupted initrd must be noticed by the same guest (the check can fail).
run_guest bootinfo --vcpus 1 --mem 64M --initrd "$T/initrd" --cmdline "marker=rd initrd_size=12345 initrd_crc=0x12345678"
check "a wrong CRC makes the guest fail" [ "$RC" = 65 ]

# The same guest as a bzImage (a real setup header around it): the Linux
# 64-bit boot protocol path, zero page checked in milliseconds
# (linux-userspace.t boots a real kernel the same way, in the lab).
OUT=$T/bz.out ERR=$T/bz.err
timeout -k 5 60 "$HV" --kernel "$GUESTS/bootinfo.bz" --debug-exit --vcpus 1 --mem 64M --initrd "$T/initrd" \
	--cmdline "marker=bz initrd_size=12345 initrd_crc=0x$crc" >"$OUT" 2>"$ERR" </dev/null
RC=$?
guest_ok "bootinfo as a bzImage"
guest_results "bzImage"
check_match "loaded through the 64-bit boot protocol" "bzImage: boot protocol 2.15" "$(cat "$ERR")"
check_eq "bzImage: e820 in the zero page equals the layout" \
	"0x0 0x9fc00 1
0x9fc00 0x60400 2
0x100000 0x3f00000 1
0xe0000000 0x10000000 2" "$(e820)"
check_eq "bzImage: command line" "CMDLINE marker=bz initrd_size=12345 initrd_crc=0x$crc" "$(grep '^CMDLINE' "$OUT")"
done_testing
