# OCI images made on this machine for the import tests (nothing can be
# pulled from outside): a rootfs of this host's own files, as the image
# builder makes them, put into an OCI layout with umoci.  Source after
# tests/lib.sh with T (a scratch folder) and VHPC_STATE_DIR set.

# oci_rootfs NAME YAML_BODY: builds a node image NAME from YAML_BODY with
# `vhpc image build`; prints its rootfs folder.
oci_rootfs() {
	printf 'name: %s\n%s\n' "$1" "$2" >"$T/$1.yaml"
	"$BIN/vhpc" image build "$T/$1.yaml" >"$T/$1.build" 2>&1 || { cat "$T/$1.build" >&2; return 1; }
	echo "$VHPC_STATE_DIR/images/$(sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/$1.json")/rootfs"
}

# oci_layout DIR TAG ROOTFS [PATH]: an OCI layout in DIR holding ROOTFS as
# image TAG (one layer), its config's PATH set when given.
oci_layout() {
	local dir=$1 tag=$2 root=$3 b=$T/bundle-$2
	[ -d "$dir" ] || umoci init --layout "$dir" || return 1
	umoci new --image "$dir:$tag" && umoci unpack --image "$dir:$tag" "$b" >/dev/null &&
		cp -a "$root/." "$b/rootfs/" && umoci repack --image "$dir:$tag" "$b" || return 1
	rm -rf "$b"
	[ -z "${4-}" ] || umoci config --image "$dir:$tag" --config.env "PATH=$4"
}

# The Open MPI runtime of this host and an MPI program of the test's,
# /opt/app/hello (tests/integration/hello.c), in a rootfs of their own.
OCI_OMPI_YAML="packages: [openmpi-bin, openmpi-common, libopenmpi3, libpmix2, libhwloc15, libhwloc-plugins, dash, busybox-static]
files: [/usr/bin/mpirun, /usr/bin/mpiexec, /bin/sh]
exclude: [/usr/share/doc, /usr/share/man, /usr/share/locale, /usr/share/lintian]
busybox: true"
oci_hello_rootfs() {
	mpicc -o "$T/hello" "$VHPC_TOP/tests/integration/hello.c" || return 1
	oci_rootfs "${1:-ocihello}" "$OCI_OMPI_YAML
copy:
  /opt/app/hello: $T/hello"
}
