#!/usr/bin/env bash
# Takes Debian's linux-image-cloud-amd64 kernel from the cache `make kernels`
# fills during set-up ($B/kernels; tests never download) into DIR and
# extracts, next to the bzImage, the ELF vmlinux inside it for PVH boots.
# Prints "BZIMAGE VMLINUX" paths, or a reason on stderr and exits 1.
set -u
dir=$1
cache=${VHPC_KERNEL_CACHE:-$(cd "$(dirname "$0")/../.." && pwd)/${B:-build}/kernels}
mkdir -p "$dir" && cd "$dir" || exit 1
if [ ! -s vmlinuz ]; then
	src=$(ls "$cache"/linux-image-cloud-amd64/x/boot/vmlinuz-* 2>/dev/null | head -n 1)
	if [ -z "$src" ]; then
		echo "no kernel in $cache (make kernels fetches linux-image-cloud-amd64 during set-up)" >&2
		exit 1
	fi
	cp "$src" vmlinuz.tmp && mv vmlinuz.tmp vmlinuz
fi
if [ ! -s vmlinux ]; then
	# The compressed ELF sits at payload_offset after the setup sectors.
	ss=$(od -An -tu1 -j $((0x1f1)) -N1 vmlinuz | tr -d ' ')
	po=$(od -An -tu4 -j $((0x248)) -N4 vmlinuz | tr -d ' ')
	pl=$(od -An -tu4 -j $((0x24c)) -N4 vmlinuz | tr -d ' ')
	tail -c +$(( (ss + 1) * 512 + po + 1 )) vmlinuz | head -c "$pl" >payload
	case $(od -An -tx1 -N4 payload | tr -d ' ') in
	02214c18) tool="lz4 -dc" ;;
	1f8b*) tool="gzip -dc" ;;
	fd377a58) tool="xz -dc" ;;
	28b52ffd) tool="zstd -dc" ;;
	*) echo "unknown kernel compression" >&2; exit 1 ;;
	esac
	command -v ${tool%% *} >/dev/null || { echo "${tool%% *} is not installed" >&2; exit 1; }
	# The payload ends with the uncompressed size, which some tools call
	# trailing garbage: judge by the result.
	$tool payload >vmlinux.tmp 2>/dev/null
	rm -f payload
	if [ "$(head -c 4 vmlinux.tmp | od -An -tx1 | tr -d ' ')" != 7f454c46 ]; then
		echo "could not extract vmlinux from the bzImage" >&2
		rm -f vmlinux.tmp
		exit 1
	fi
	mv vmlinux.tmp vmlinux
fi
echo "$dir/vmlinuz $dir/vmlinux"
