#!/usr/bin/env bash
# Fetches Debian's linux-image-cloud-amd64 kernel into DIR (never into the
# repository) and extracts, next to the bzImage, the ELF vmlinux inside it
# for PVH boots.  Prints "BZIMAGE VMLINUX" paths, or a reason on stderr and
# exits 1.  Cached: a second call does no download.
set -u
dir=$1
mkdir -p "$dir" && cd "$dir" || exit 1
if [ ! -s vmlinuz ]; then
	rm -rf x ./*.deb
	if ! timeout 120 apt-get download linux-image-cloud-amd64 >apt.log 2>&1; then
		echo "apt-get download linux-image-cloud-amd64 failed: $(tail -n 1 apt.log)" >&2
		exit 1
	fi
	dep=$(dpkg-deb -f linux-image-cloud-amd64_*.deb Depends | sed 's/[ ,(].*//')
	case $dep in linux-image-*) ;; *) echo "unexpected dependency '$dep' of linux-image-cloud-amd64" >&2; exit 1 ;; esac
	if ! timeout 300 apt-get download "$dep" >>apt.log 2>&1; then
		echo "apt-get download $dep failed: $(tail -n 1 apt.log)" >&2
		exit 1
	fi
	dpkg-deb -x "$dep"_*.deb x || { echo "dpkg-deb -x failed" >&2; exit 1; }
	cp x/boot/vmlinuz-* vmlinuz.tmp && mv vmlinuz.tmp vmlinuz
	rm -rf x ./*.deb
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
