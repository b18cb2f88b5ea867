#!/usr/bin/env bash
# timeout: 300
# What a job of an imported image runs (issue 35, item 8):
#  - the import puts vhpc's own benchmark programs in the image, and
#    `vhpc run --image IMG -- vhpc-mpibench PingPong` runs it on the image's
#    Open MPI across two guests;
#  - a program the image does not have ends the job before mpirun starts
#    any rank, with "vhpc: PROG: not found in image IMG (PATH=...)" and exit
#    status 127 (as a shell's), not mpirun's "N total processes failed to
#    start"; the same for a path with a slash, named where it was looked
#    for, and a file that is not executable is said to be so (126);
#  - programs in the job's own folders are found as the ranks find them: by
#    a path from the working folder, and along a PATH the job gives (-x).
. "$(dirname "$0")/common.sh"
need_root
for p in vhpc vhpc-guestd vhpc-rsh vhpc-sysexec vhpc-mpibench vhpc-netbench vhpc-sysbench; do
	[ -x "$BIN/$p" ] || skip_all "$p is not built"
done
for t in skopeo umoci mpicc; do
	command -v $t >/dev/null || skip_all "$t is not installed (make installs it)"
done
export VHPC_STATE_DIR=$T/state
. "$VHPC_TOP/tests/images/oci-lib.sh"

root=$(oci_hello_rootfs) || { fail "a rootfs of Open MPI and hello"; done_testing; exit 1; }
check "the source image has no vhpc-mpibench" test ! -e "$root/usr/local/bin/vhpc-mpibench"
check "an OCI layout of it (umoci)" oci_layout "$T/oci" hello "$root" /usr/local/bin:/usr/bin:/bin
vhpc image import "oci:$T/oci:hello" --no-kvm >"$T/imp" 2>&1
check_eq "vhpc image import" 0 "$?"
[ -s "$T/imp" ] && diag "$(tail -3 "$T/imp")"
ID=$(sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/hello.json")
r=$VHPC_STATE_DIR/images/$ID/rootfs
for p in vhpc-mpibench vhpc-netbench vhpc-sysbench; do
	check "the import puts vhpc's $p in the image" cmp "$BIN/$p" "$r/usr/local/bin/$p"
done
check_eq "... none is left out" "" "$(grep 'left out' "$T/imp")"
check "the image still verifies" vhpc image verify hello

# -- vhpc-mpibench runs on the image's Open MPI, in two guests
vhpc run --image hello -N 2 -n 2 --chdir /tmp -- vhpc-mpibench -msglog 0:2 -iter 50 PingPong >"$T/mb.out" 2>"$T/mb.err"
check_eq "vhpc run --image hello -- vhpc-mpibench PingPong" 0 "$?"
check_match "... prints PingPong's table" '^ +4 +50 ' "$(cat "$T/mb.out")"
check_match "... between two processes" '# #processes = 2' "$(cat "$T/mb.out")"
[ -s "$T/mb.out" ] || diag "$(tail -5 "$T/mb.err")"

# -- a program the image does not have
vhpc run --image hello -N 2 -n 2 --chdir /tmp -- no-such-prog --flag >"$T/nf.out" 2>"$T/nf.err"
check_eq "a program not in the image: exit status 127" 127 "$?"
check_match "... saying so, with the image and the PATH looked along" \
	'^vhpc: no-such-prog: not found in image hello \(PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin\)$' "$(cat "$T/nf.err")"
check_eq "... before mpirun starts anything" "" "$(grep -i -e 'failed to start' -e 'mpirun' "$T/nf.err")"
j=$(job_id_of "$T/nf.err")
check_eq "... and the job left nothing behind" "" "$(job_leftovers "$j")"
vhpc run --image hello -N 1 -n 1 --chdir /tmp -x PATH=/opt/tools -- no-such-prog 2>"$T/nf2.err"
check_match "the job's own PATH is looked along too, and shown" \
	'^vhpc: no-such-prog: not found in image hello \(PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin:/opt/tools\)$' \
	"$(cat "$T/nf2.err")"
vhpc run --image hello -N 1 -n 1 --chdir /tmp -- /opt/app/nothere 2>"$T/nf3.err"
check_eq "an absolute path not in the image: 127" 127 "$?"
check_match "... named, with where it was looked for" \
	"^vhpc: /opt/app/nothere: not found in image hello or the job's folders$" "$(cat "$T/nf3.err")"

# -- programs in the job's folders: a path from the working folder, a PATH
w=$T/work
mkdir -p "$w/bin"
chmod 755 "$T" "$w" "$w/bin"
printf '#!/bin/sh\necho "tool ran: $*"\n' >"$w/bin/mytool"
printf 'not a program\n' >"$w/notes"
chmod 755 "$w/bin/mytool"
(cd "$w" && vhpc run --image hello -N 1 -n 1 -- ./nothere) 2>"$T/nf4.err"
check_eq "a relative path not in the working folder: 127" 127 "$?"
check_match "... named, with the folder" "^vhpc: \./nothere: not found in $w \(the job's working folder\)$" "$(cat "$T/nf4.err")"
(cd "$w" && vhpc run --image hello -N 1 -n 1 -- ./notes) 2>"$T/nx.err"
check_eq "a file that is not executable: 126" 126 "$?"
check_match "... saying so" '^vhpc: \./notes: not an executable file$' "$(cat "$T/nx.err")"
(cd "$w" && vhpc run --image hello -N 2 -n 2 -- ./bin/mytool a b) >"$T/t1.out" 2>"$T/t1.err"
check_eq "a program in the working folder runs" 0 "$?"
check_eq "... on both ranks" "tool ran: a b tool ran: a b" "$(tr '\n' ' ' <"$T/t1.out" | sed 's/ $//')"
(cd "$w" && vhpc run --image hello -N 1 -n 1 -x PATH="$w/bin" -- mytool c) >"$T/t2.out" 2>"$T/t2.err"
check_eq "a program along the job's PATH runs" 0 "$?"
check_eq "... as itself" "tool ran: c" "$(cat "$T/t2.out")"
[ -s "$T/t2.out" ] || diag "$(tail -3 "$T/t2.err")"
done_testing
