#!/usr/bin/env bash
# timeout: 300
# The vmshm BTL across two real container guests of one `vhpc run` job:
# data verified for 0..4 MiB, many-to-one, ring wrap-around, 4 ranks in 2
# guests where vader carries same-guest pairs and vmshm cross-guest pairs
# (the component's counters and Open MPI's bml output prove which), a peer
# killed mid-message ends the job without a hang, --no-vmshm falls back to
# TCP, and the region file is gone after every job.  With vmshm the guests
# share the job's pod (one user and PID namespace, their own network, UTS
# and mount namespaces) and large messages cross in one copy; without it
# each guest has its own; no pod init outlives its job.  --no-single-copy
# keeps vmshm without the pod: each guest its own namespaces, no
# VHPC_VMSHM_SINGLE_COPY, every large message through the rings.
. "$(dirname "$0")/../integration/common.sh"
need_root
for f in "$BIN/vhpc" "$BIN/vhpc-guestd" "$VHPC_TOP/$B/vmshm/bin/vmshm-test" "$VHPC_TOP/$B/lib/vhpc/openmpi/mca_btl_vmshm.so"; do
	[ -e "$f" ] || skip_all "$f is not built"
done
# A test image: the default one plus the BTL's test program.
mkdir -p "$T/conf/images"
cp -r "$VHPC_TOP/configs/tuning" "$VHPC_TOP/configs/cluster.yaml" "$T/conf/"
sed -e 's/^name: default/name: vmshm-test/' \
    -e 's|^build_files:|build_files:\n  /usr/local/bin/vmshm-test: vmshm/bin/vmshm-test|' \
    "$VHPC_TOP/configs/images/default.yaml" >"$T/conf/images/vmshm-test.yaml"
export VHPC_CONFIG_DIR=$T/conf

job() {  # NAME VHPC-RUN-ARGS... -- COMMAND...
	local name=$1; shift
	timeout -k 5 120 vhpc run --image vmshm-test --timeout 90 -x OMPI_MCA_btl_vmshm_stats=1 "$@" \
		>"$T/$name.out" 2>"$T/$name.err"
	rc=$?
	# Regions live in a tmpfs of their own under the job dir (older
	# versions: /dev/shm); neither may outlive the job.
	leftover=$( (ls /dev/shm | grep '^vhpc-.*-vmshm$'; awk '$2 ~ /\/jobs\/[^/]*\/vmshm$/' /proc/mounts) | grep -c .)
}
show() { diag "exit $rc; stderr:"; tail -25 "$T/$1.err" | while IFS= read -r l; do diag "$l"; done; }
counter() {  # NAME RANK PEER FIELD
	sed -n "s/.*rank $2\] vmshm-stats: peer $3 slot [0-9]* .*$4 \([0-9]*\).*/\1/p" "$T/$1.out" "$T/$1.err" | head -1
}

job sizes -N 2 -n 2 -- vmshm-test sizes
if [ $rc = 0 ] && grep -q '^OK sizes' "$T/sizes.out"; then ok "0..4 MiB across two guests, every byte verified"; else fail "sizes"; show sizes; fi
# The two guests share the job's pod here (one user and PID namespace), so
# rank 1 reads large messages straight out of rank 0 (single copy); the
# rest goes through the ring.
tx=$(counter sizes 0 1 tx_bytes); rx=$(counter sizes 1 0 rx_bytes); g=$(counter sizes 1 0 get_bytes)
check "rank 1 in g1 read large messages out of rank 0's memory in g0 (${g:-0} bytes, single copy)" \
	test "${g:-0}" -gt 8000000
check "and the smaller ones came through rank 0's ring to it (${tx:-0} bytes)" test "${tx:-0}" -gt 100000
check_eq "rank 1 received from the ring exactly what rank 0 put there" "$tx" "$rx"
check_eq "the region file is removed after the job" 0 "$leftover"
check_eq "no pod init is left after the job" "" "$(pgrep -x vhpc-pod)"

ns='echo NS $(hostname) $(readlink /proc/self/ns/pid) $(readlink /proc/self/ns/user) $(readlink /proc/self/ns/net) $(readlink /proc/self/ns/uts) $(readlink /proc/self/ns/mnt) $(id -u)'
sc='echo SC $(hostname) [${VHPC_VMSHM_SINGLE_COPY-unset}]'
job ns -N 2 -n 2 -- sh -c "$ns; $sc"
read -r _ h0 pid0 user0 net0 uts0 mnt0 id0 < <(grep '^NS g0 ' "$T/ns.out")
read -r _ h1 pid1 user1 net1 uts1 mnt1 id1 < <(grep '^NS g1 ' "$T/ns.out")
check "with vmshm, g0 and g1 share one PID and one user namespace ($pid0, $user0)" \
	test -n "$pid0" -a "$pid0" = "$pid1" -a "$user0" = "$user1"
check "and keep their own network, UTS and mount namespaces" \
	test -n "$net0" -a "$net0" != "$net1" -a "$uts0" != "$uts1" -a "$mnt0" != "$mnt1"
check_eq "their processes run as root of that namespace (the job's user outside)" "0 0" "$id0 $id1"
check_eq "and their ranks are told to copy once" "SC g0 [1] SC g1 [1]" "$(grep '^SC ' "$T/ns.out" | sort | paste -sd' ')"
job ns-nosc -N 2 -n 2 --no-single-copy -- sh -c "$ns; $sc"
read -r _ _ pid0 user0 net0 _ < <(grep '^NS g0 ' "$T/ns-nosc.out")
read -r _ _ pid1 user1 net1 _ < <(grep '^NS g1 ' "$T/ns-nosc.out")
check "--no-single-copy: each guest has a PID, user and network namespace of its own (no pod)" \
	test -n "$pid0" -a "$pid0" != "$pid1" -a "$user0" != "$user1" -a "$net0" != "$net1"
check_eq "... its ranks are not told to copy once" "SC g0 [unset] SC g1 [unset]" \
	"$(grep '^SC ' "$T/ns-nosc.out" | sort | paste -sd' ')"
check "... and the job still has its vmshm region" grep -q 'vmshm region' "$T/ns-nosc.err"
job sizes-nosc -N 2 -n 2 --no-single-copy -x OMPI_MCA_btl_base_verbose=1 -- vmshm-test sizes
if [ $rc = 0 ] && grep -q '^OK sizes' "$T/sizes-nosc.out"; then ok "--no-single-copy: 0..4 MiB across two guests, every byte verified"; else fail "sizes --no-single-copy"; show sizes-nosc; fi
check "... through vmshm" grep -qE 'Using vmshm btl for send to \[\[[0-9]+,1\],1\]' "$T/sizes-nosc.out" "$T/sizes-nosc.err"
tx=$(counter sizes-nosc 0 1 tx_bytes); rx=$(counter sizes-nosc 1 0 rx_bytes)
check_eq "... every byte through the rings (${tx:-0} sent), none by single copy" "$tx 0" "$rx $(counter sizes-nosc 1 0 get_bytes)"
check_eq "... no pod init is left either" "" "$(pgrep -x vhpc-pod)"
job ns-novmshm -N 2 -n 2 --no-vmshm -- sh -c "$ns"
read -r _ _ pid0 user0 _ < <(grep '^NS g0 ' "$T/ns-novmshm.out")
read -r _ _ pid1 user1 _ < <(grep '^NS g1 ' "$T/ns-novmshm.out")
check "without vmshm each guest has a PID and user namespace of its own" \
	test -n "$pid0" -a "$pid0" != "$pid1" -a "$user0" != "$user1"

job many2one -N 2 -n 4 -- vmshm-test many2one
if [ $rc = 0 ] && grep -q '^OK many2one' "$T/many2one.out"; then ok "many-to-one, 4 ranks in 2 guests"; else fail "many2one"; show many2one; fi

job wrap -N 2 -n 2 -x OMPI_MCA_btl_vmshm_ring_size=16384 -x VHPC_VMSHM_SLOTS=2 -- vmshm-test wrap 20000
full=$(counter wrap 0 1 ring_full); rx=$(counter wrap 1 0 rx_bytes)
if [ $rc = 0 ] && grep -q '^OK wrap' "$T/wrap.out"; then ok "20000 messages wrap the rings, in order and intact"; else fail "wrap"; show wrap; fi
diag "receiver got ${rx:-?} bytes; sender found its ring full ${full:-?} times"

# map-by node: ranks 0,2 in g0 and 1,3 in g1.
job mix -N 2 -n 4 -x OMPI_MCA_btl_base_verbose=1 -- vmshm-test alltoall
if [ $rc = 0 ] && grep -q '^OK alltoall' "$T/mix.out"; then ok "all-to-all, 4 ranks in 2 guests"; else fail "alltoall"; show mix; fi
all=$(cat "$T/mix.out" "$T/mix.err")
check "rank 0 reaches rank 2 (same guest) with vader" grep -qE 'Using vader btl for send to \[\[[0-9]+,1\],2\]' <<<"$all"
check "rank 0 reaches ranks 1 and 3 (other guest) with vmshm" \
	grep -qE 'Using vmshm btl for send to \[\[[0-9]+,1\],[13]\]' <<<"$all"
check "no vmshm counters between ranks of one guest" test -z "$(counter mix 0 2 tx_bytes)"
check "vmshm counters between the guests" test "$(counter mix 0 1 tx_bytes)" -gt 0 -a "$(counter mix 2 3 tx_bytes)" -gt 0
check "no pair used tcp" sh -c "! grep -q 'Using tcp btl' '$T/mix.out' '$T/mix.err'"

t0=$SECONDS
job killmid -N 2 -n 2 -- vmshm-test killmid
dt=$((SECONDS - t0))
check "a rank killed mid-message ends the job with an error ($rc) and no hang (${dt}s)" test "$rc" != 0 -a "$dt" -lt 60
check_eq "and its region is removed" 0 "$leftover"

# glibc's memcpy off `rep movsb` (lib/vmshm/vmshm_copyprobe.h): measured
# by the node agent unless VHPC_AVOID_MOVSB says; only for vmshm guests.
tun='echo "TUN $OMPI_COMM_WORLD_RANK [$GLIBC_TUNABLES]"'
want='[glibc.cpu.x86_rep_movsb_threshold=1073741824]'
VHPC_AVOID_MOVSB=1 job movsb1 -N 2 -n 2 -- sh -c "$tun"
check_eq "VHPC_AVOID_MOVSB=1: both ranks get the tunable" "TUN 0 $want TUN 1 $want" \
	"$(grep '^TUN' "$T/movsb1.out" | sort | tr '\n' ' ' | sed 's/ $//')"
VHPC_AVOID_MOVSB=0 job movsb0 -N 2 -n 2 -- sh -c "$tun"
check_eq "VHPC_AVOID_MOVSB=0: neither does" "TUN 0 [] TUN 1 []" \
	"$(grep '^TUN' "$T/movsb0.out" | sort | tr '\n' ' ' | sed 's/ $//')"
VHPC_AVOID_MOVSB= job movsb -N 2 -n 2 -- sh -c "$tun"
said=$(grep -oE 'memcpy of 64 KiB here: 16 bytes past its source [0-9.]+x the time of 2 KiB past, so guests (get|keep)' "$T/movsb.err")
check "unset: the agent measures and says what it found (${said##*: })" test -n "$said"
case $said in
*get) exp="TUN 0 $want TUN 1 $want" ;;
*) exp="TUN 0 [] TUN 1 []" ;;
esac
check_eq "... and the ranks have what it said" "$exp" \
	"$(grep '^TUN' "$T/movsb.out" | sort | tr '\n' ' ' | sed 's/ $//')"
VHPC_AVOID_MOVSB=yes job movsb-bad -N 2 -n 2 -- true
check "VHPC_AVOID_MOVSB=yes is refused by name" \
	sh -c "test $rc != 0 && grep -q \"VHPC_AVOID_MOVSB: expected 0 or 1 (unset: measure), got 'yes'\" '$T/movsb-bad.err'"
VHPC_AVOID_MOVSB=1 job movsb-novmshm -N 2 -n 2 --no-vmshm -- sh -c "$tun"
check_eq "without vmshm the guests keep glibc's default" "TUN 0 [] TUN 1 []" \
	"$(grep '^TUN' "$T/movsb-novmshm.out" | sort | tr '\n' ' ' | sed 's/ $//')"

job novmshm -N 2 -n 2 --no-vmshm -x OMPI_MCA_btl_base_verbose=1 -- vmshm-test sizes
if [ $rc = 0 ] && grep -q '^OK sizes' "$T/novmshm.out"; then ok "--no-vmshm: the same job over TCP"; else fail "--no-vmshm"; show novmshm; fi
check "--no-vmshm really used tcp and no vmshm" sh -c "grep -q 'Using tcp btl' '$T/novmshm.out' '$T/novmshm.err' && ! grep -q 'vmshm-stats' '$T/novmshm.out' '$T/novmshm.err'"
check "--no-vmshm creates no region" sh -c "! grep -q 'vmshm region' '$T/novmshm.err'"
done_testing
