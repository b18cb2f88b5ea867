#!/usr/bin/env bash
# timeout: 400
# needs: hardware-virtualization
# lab-prepare: tests/kvm/compact-images
# kvm guests whose root disk is a compact image's file system: the default
# image built as squashfs and as erofs (one file, which is both the
# container rootfs and the kvm root disk), each booted as a 2-VM job whose
# guests find / on that file system, read-only.  (The ext4 tree root is
# every other kvm test's; bench/scripts/image-formats compares the three.)
. "$(dirname "$0")/kvmlib.sh"
kvm_setup kvmc
unset VHPC_KVM_ALLOW_EMULATION
for t in mksquashfs mkfs.erofs; do
	command -v $t >/dev/null || skip_all "$t is not installed (make installs it)"
done

built=$("$VHPC_TOP/tests/kvm/compact-images" "$T")
for f in squashfs erofs; do
	check_match "the default image builds as $f, with its kvm parts" "^$f 0\$" "$(echo "$built" | grep "^$f ")"
	img=$(vhpc image list --local --json | tr -d ' \n' | grep -o "{\"name\":\"kvm$f\"[^}]*}" | head -n 1)
	check_match "... one $f file is its rootfs and its root disk" "\"kvm\":true,\"format\":\"$f\",\"blob\":\"[^\"]*/rootfs\.$f\".*\"disk\":\"[^\"]*/rootfs\.$f\"" "$img"
done
for i in squashfs erofs; do
	image=kvm$i
	t0=$(date +%s.%N)
	# Bounded well inside the test's limit (a whole job takes 20-40 s in
	# the lab): a clean-clone run on 2026-12-06 hung here until the 400-s
	# limit, saying nothing; now the guests' consoles say where they were.
	RUN=(vhpc run --driver kvm --image $image -N 2 -n 2 --mem 512M --timeout 400)
	"${RUN[@]}" -- sh -c 'echo "$(hostname) root: $(grep " / " /proc/mounts | cut -d" " -f3,4 | cut -d, -f1)"' \
		>"$T/$i.out" 2>"$T/$i.err" &
	pid=$!
	if poll_until 35 sh -c "! kill -0 $pid 2>/dev/null"; then
		wait $pid; rc=$?
	else
		diag "$i: still running after 35 s (x4 in the lab); vhpc said:" "$(tail -n 10 "$T/$i.err")" \
			"the guests' consoles:" "$(tail -n 30 "$VHPC_RUN_DIR"/jobs/*/kvm*/hv/serial 2>/dev/null)"
		lab_check "$VHPC_RUN_DIR"/jobs/*/kvm*/hv/serial
		# TERM: vhpc run tears its job down, as for a user's Ctrl-C.
		kill -TERM $pid; poll_until 10 sh -c "! kill -0 $pid 2>/dev/null" || kill -9 $pid
		wait $pid; rc=timeout
	fi
	check_eq "a 2-VM job of the $i image exits 0" 0 "$rc"
	[ $rc = 0 ] || diag "$(tail -n 30 "$T/$i.err")"
	want=$i
	check_eq "... both guests' / is $want, read-only" "g0 root: $want ro g1 root: $want ro" \
		"$(sort "$T/$i.out" | tr '\n' ' ' | sed 's/ $//')"
	diag "$i: $(grep -o '2 guests ready in [0-9.]* s' "$T/$i.err"), whole job $(echo "$(date +%s.%N) - $t0" | bc) s (nested/TCG)"
	job=$(job_id_of "$T/$i.err")
	nothing_left "$i"
done
for f in squashfs erofs; do
	id=$(sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' "$VHPC_STATE_DIR/images/refs/kvm$f.json")
	diag "root disk: $f $(stat -c %s "$VHPC_STATE_DIR/images/$id/rootfs.$f") bytes"
done
lab_check "$T"/* "$VHPC_RUN_DIR"/jobs/*/kvm*/hv/serial
done_testing
