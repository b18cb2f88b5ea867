#!/usr/bin/env bash
# mkrootfs.sh DIR: a tiny guest rootfs for container tests, made of this
# host's binaries and the shared libraries they need (the real image
# builder is `vhpc image build`).
set -eu
dir=$1
progs=(sh cat hostname sleep touch ls readlink mkdir rm grep sed stat head wc id)
mkdir -p "$dir"/{proc,sys,dev,tmp,run,var/tmp,etc,root,usr/bin,usr/lib,usr/lib64}
# merged /usr, as on Debian 12
for l in bin lib lib64 sbin; do [ -e "$dir/$l" ] || ln -s usr/${l/sbin/bin} "$dir/$l"; done
copy() {   # copy a file to the same path under DIR, resolving symlinks
	local src=$1 real
	real=$(readlink -f "$src")
	mkdir -p "$dir$(dirname "$src")"
	[ -e "$dir$src" ] || cp "$real" "$dir$src"
}
for p in "${progs[@]}"; do
	path=$(command -v "$p" || true)
	case $path in /*) ;; *) path=$(PATH=/usr/bin:/bin command -v "$p") ;; esac
	path=/usr/bin/$(basename "$path")
	copy "$path"
	ldd "$path" 2>/dev/null | grep -oE '/[^ ]+' | while read -r lib; do
		lib=${lib#/usr}; copy "/usr$lib"
	done
done
echo "root:x:0:0:root:/root:/bin/sh" > "$dir/etc/passwd"
echo "root:x:0:" > "$dir/etc/group"
