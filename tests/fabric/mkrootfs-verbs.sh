#!/usr/bin/env bash
# mkrootfs-verbs.sh DIR: the container tests' tiny rootfs
# (tests/nodeagent/mkrootfs.sh) with what a guest on the fabric runs:
# libibverbs with its soft-RoCE provider, ibv_devices and perftest.
set -eu
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
"$here/../nodeagent/mkrootfs.sh" "$dir"
copy() {   # copy a file to the same path under DIR, resolving symlinks
	local src=$1
	mkdir -p "$dir$(dirname "$src")"
	[ -e "$dir$src" ] || cp "$(readlink -f "$src")" "$dir$src"
}
libs_of() { ldd "$1" 2>/dev/null | grep -oE '/[^ ]+' || true; }
for p in ibv_devices ibv_devinfo ib_send_lat ib_write_bw ib_send_bw timeout cut tr mknod sort uniq setpriv; do
	path=/usr/bin/$p
	[ -x "$path" ] || { echo "mkrootfs-verbs: $path is missing" >&2; exit 1; }
	copy "$path"
	for lib in $(libs_of "$path"); do lib=${lib#/usr}; copy "/usr$lib"; done
done
# libibverbs finds its providers through /etc/libibverbs.d.
mkdir -p "$dir/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$dir/etc/libibverbs.d/"
for f in /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so; do
	copy "$f"
	for lib in $(libs_of "$f"); do lib=${lib#/usr}; copy "/usr$lib"; done
done
