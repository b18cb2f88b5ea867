#!/usr/bin/env bash
# timeout: 480
# needs: hardware-virtualization
# virtio-fs with a Linux guest: Debian's cloud kernel boots with a tiny
# /init (tests/hv/init-virtiofs.c) that loads virtio-pci, fuse and virtiofs
# (modules in that kernel; built-in ones are skipped), mounts the --fs
# device by its tag from QEMU's virtiofsd, reads the file this test put in
# the shared folder and a 1 MiB pattern file, writes a small file and a
# 1 MiB pattern file, unmounts and powers off.  This test checks what the
# guest read and what arrived on the host, and that vhpc-hv (under
# --seccomp, as it is deployed) and virtiofsd both end.  Needs hardware
# virtualization: tests/run runs it in the virtualization lab here.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
need_root
need_virtiofsd

paths=$("$VHPC_TOP/tests/hv/fetch-kernel.sh" "$VHPC_TOP/$B/hv-kernel" 2>"$T/fetch.err") ||
	skip_all "kernel not available: $(cat "$T/fetch.err")"
read -r BZ VMLINUX <<<"$paths"
ktree=${VHPC_KERNEL_CACHE:-$VHPC_TOP/$B/kernels}/linux-image-cloud-amd64/x
kfile=$(ls "$ktree"/boot/vmlinuz-* 2>/dev/null | head -n 1)
rel=${kfile##*/vmlinuz-}
mdir=$ktree/lib/modules/$rel
[ -n "$kfile" ] && [ -f "$mdir/modules.dep" ] || skip_all "no modules for the cached kernel in $ktree"
cmp -s "$BZ" "$kfile" || skip_all "$BZ is not the cached $kfile whose modules would be loaded"

# A module's dependencies first, from modules.dep; built-in ones need
# nothing.
closure() {
	local m line d
	for m in "$@"; do
		line=$(grep -E "(^|/)${m//_/[_-]}\.ko(\.[a-z]+)?:" "$mdir/modules.dep" | head -n 1)
		if [ -z "$line" ]; then
			grep -qE "/${m//_/[_-]}\.ko" "$mdir/modules.builtin" && continue
			echo "module $m is neither in modules.dep nor built in" >&2
			return 1
		fi
		for d in ${line#*:}; do d=${d##*/}; closure "${d%%.ko*}" || return 1; done
		echo "${line%%:*}"
	done
}
stage=$T/initramfs
mkdir -p "$stage/modules" "$stage/dev" "$stage/proc" "$stage/mnt"
cc -static -O2 -o "$stage/init" "$VHPC_TOP/tests/hv/init-virtiofs.c" ||
	{ fail "building /init"; done_testing; exit 1; }
mods=$(closure virtio_pci virtiofs) || { fail "module closure: $mods"; done_testing; exit 1; }
i=10
for m in $(printf '%s\n' $mods | awk '!seen[$0]++'); do
	name=${m##*/}
	out=$stage/modules/$i-${name%%.ko*}.ko
	case $name in
	*.ko.xz) xz -dc "$mdir/$m" >"$out" ;;
	*.ko.zst) zstd -qdc "$mdir/$m" >"$out" ;;
	*.ko.gz) gzip -dc "$mdir/$m" >"$out" ;;
	*) cp "$mdir/$m" "$out" ;;
	esac || fail "unpacking $m"
	i=$((i + 1))
done
diag "kernel $rel; modules in the initramfs: $(ls "$stage/modules" | tr '\n' ' ')"
(cd "$stage" && find . | cpio -o -H newc --quiet) >"$T/initrd.cpio" || fail "making the initramfs"

share=$T/share
mkdir -p "$share"
hello="hello from the host, run $$ at $(date +%s)"
echo "$hello" >"$share/hello.txt"
"$HVT" pattern "$share/big.bin" 1048576 11

rm -f "$T/vfs.sock"
"$VFSD" --socket-path="$T/vfs.sock" -o source="$share" -o sandbox=chroot -o cache=none \
	-o log_level=info >"$T/vfsd.log" 2>&1 </dev/null &
vfsd=$!
at_exit kill -9 $vfsd
for i in $(seq 200); do [ -S "$T/vfs.sock" ] && break; sleep 0.05; done
check "virtiofsd is listening" test -S "$T/vfs.sock"

OUT=$T/linux.out ERR=$T/linux.err
timeout -k 10 400 "$HV" -v --kernel "$BZ" --initrd "$T/initrd.cpio" --vcpus 2 --mem 512M --require-hw --seccomp \
	--fs "tag=hostshare,socket=$T/vfs.sock" \
	--cmdline "console=ttyS0 rdinit=/init panic=-1 vfs.tag=hostshare" >"$OUT" 2>"$ERR" </dev/null
rc=$?
lab_check "$OUT" "$ERR"
con=$(tr -d '\r' <"$OUT")
check_eq "vhpc-hv ends by itself with the guest's power-off (status 0)" 0 "$rc"
nmods=$(ls "$stage/modules" | wc -l)
check_eq "all $nmods modules loaded" "$nmods" "$(grep -ac '^VFS-MODULE ' "$OUT")"
check_match "the guest mounted the tag with -t virtiofs" "^VFS-MOUNTED hostshare$" "$con"
check_eq "the guest read the host's file" "VFS-READ $hello" "$(grep -a '^VFS-READ' <<<"$con")"
check_match "the guest read a 1 MiB pattern file intact" "^VFS-BIG-READ ok \(1048576 bytes" "$con"
check_match "the guest wrote its files and unmounted" "^VFS-DONE$" "$con"
check_eq "the file the guest wrote is on the host, with its bytes" "guest saw [$hello]" "$(cat "$share/fromguest.txt" 2>/dev/null)"
check_eq "... exactly (no trailing bytes)" $(( ${#hello} + 13 )) "$(stat -c %s "$share/fromguest.txt" 2>/dev/null)"
check_eq "the 1 MiB file the guest wrote has its size" 1048576 "$(stat -c %s "$share/big-out.bin" 2>/dev/null)"
check "... and the guest's pattern" "$HVT" checkpat "$share/big-out.bin" 0 1048576 12
check_match "completions reach the guest through KVM irqfd" "vfs0: queue 1 completions through KVM irqfd" "$(cat "$ERR")"
check "notifications reach virtiofsd through ioeventfds (no vCPU exit)" \
	bash -c "! grep -q 'notified through a vCPU exit' '$ERR'"
check "no device reset was asked for" bash -c "! grep -q 'vfs0: .*needs a reset' '$ERR'"
# ended SECONDS PID: the process is gone (or a zombie) within SECONDS.
ended() {
	local i
	for ((i = 0; i < $1 * 20; i++)); do
		case $(sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' "/proc/$2/stat" 2>/dev/null) in ''|Z|X) return 0 ;; esac
		sleep 0.05
	done
	return 1
}
check "virtiofsd ends once vhpc-hv is gone" ended 10 $vfsd
grep -a -E '^VFS-BIG-(READ|WROTE)' <<<"$con" | sed 's/^/nested\/TCG timing: /' | while IFS= read -r l; do diag "$l"; done
if [ "$rc" != 0 ] || ! grep -q '^VFS-DONE' <<<"$con"; then
	diag "console, last lines:" "$(tail -n 25 <<<"$con")" "vhpc-hv log, last lines:" "$(tail -n 15 "$ERR")" \
		"virtiofsd log, last lines:" "$(tail -n 10 "$T/vfsd.log")"
fi
done_testing
