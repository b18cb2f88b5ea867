#!/usr/bin/env bash
# timeout: 170
# The vmshm BTL between real MPI ranks on this host, no guests needed:
# vmshm is forced between local ranks (vader left out), or guests are
# simulated - by VHPC_GUEST_ID under one orted, or by two orteds started
# through a stand-in for vhpc-rsh - so that vader and vmshm carry
# different pairs of one job.  Open MPI's own bml verbose output and the
# component's counters (btl_vmshm_stats) prove which BTL carried what.
. "$(dirname "$0")/../lib.sh"

command -v mpirun >/dev/null || skip_all "mpirun not installed"
so=$VHPC_TOP/$B/lib/vhpc/openmpi/mca_btl_vmshm.so
prog=$VHPC_TOP/$B/vmshm/bin/vmshm-test
scribble=$VHPC_TOP/$B/vmshm/bin/vmshm-scribble
bcastloop=$VHPC_TOP/$B/vmshm/bin/vmshm-bcastloop
here=$VHPC_TOP/tests/mpi-plugins
for f in "$so" "$prog" "$scribble" "$bcastloop"; do
	[ -e "$f" ] || { echo "Bail out! $f not built (make first)"; exit 1; }
done
sysdir=$(dirname "$(find /usr/lib -name mca_btl_vader.so -path '*openmpi*' 2>/dev/null | head -1)")
[ -d "$sysdir" ] || skip_all "Open MPI's component directory not found"

T=$(mktemp -d /tmp/vmshm-t.XXXXXX)
export VMSHM_T_DIR=$T
at_exit "rm -rf '$T'"
at_exit "rm -f /dev/shm/vmshm-t.$$.*"
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
n=0

# mpi NAME NP [mpirun args...] -- PROGRAM ARGS...: runs one job with a fresh
# region (created here, as the platform would), output in $T/NAME.out,
# exit status in $rc, wall time in $secs.
mpi() {
	local name=$1 np=$2; shift 2
	local args=()
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	n=$((n + 1))
	region=/dev/shm/vmshm-t.$$.$n
	rm -f "$region"
	truncate -s 32M "$region"
	local t0=$SECONDS
	timeout -k 5 60 mpirun "${root[@]}" -np "$np" --oversubscribe \
		--mca mca_base_component_path "$sysdir:$VHPC_TOP/$B/lib/vhpc/openmpi" \
		--mca btl_vmshm_host_id testhost --mca btl_vmshm_region "$region" \
		--mca btl_vmshm_stats 1 "${args[@]}" "$@" >"$T/$name.out" 2>&1
	rc=$?
	secs=$((SECONDS - t0))
	rm -f "$region"
	out=$(cat "$T/$name.out")
}
show() { diag "exit $rc after ${secs}s; output:"; sed 's/^/    /' "$T/$1.out" | head -40 | while IFS= read -r l; do diag "$l"; done; }
# counter RANK PEER FIELD: a counter from rank RANK's vmshm-stats line for PEER
counter() {
	sed -n "s/.*rank $1\] vmshm-stats: peer $2 slot [0-9]* .*$3 \([0-9]*\).*/\1/p" "$T/$name.out" | head -1
}
ok_run() { # NAME DESCRIPTION REGEX
	if [ $rc -eq 0 ] && grep -qE -- "$3" "$T/$1.out"; then ok "$2"; else fail "$2"; show "$1"; fi
}

# -- 1. every size from 0 to 4 MiB, vmshm forced between local ranks ----------
name=sizes
mpi $name 2 --mca btl self,vmshm,tcp --mca btl_base_verbose 1 -- "$prog" sizes
ok_run $name "sizes 0..4 MiB, contiguous and strided, verified both ways" "^OK sizes"
check_match "Open MPI routed rank 0 -> 1 through vmshm" \
	"Using vmshm btl for send to \[\[[0-9]+,1\],1\]" "$out"
tx=$(counter 0 1 tx_bytes)
if [ "${tx:-0}" -ge 20000000 ]; then ok "vmshm counted ${tx} bytes from rank 0 to 1"
else fail "vmshm carried the traffic (tx_bytes=${tx:-none})"; show $name; fi

# -- 2. many-to-one --------------------------------------------------------------
name=many2one
mpi $name 4 --mca btl self,vmshm,tcp -- "$prog" many2one
ok_run $name "many-to-one: 3 ranks x 200 messages, per-source order kept" "^OK many2one"
good=0
for p in 1 2 3; do [ "$(counter 0 $p rx_frags)" -ge 200 ] 2>/dev/null && good=$((good + 1)); done
check_eq "rank 0 received at least 200 fragments over vmshm from each sender" 3 $good

# -- 3. wrap-around: 16 KiB rings, 20000 messages -------------------------------
name=wrap
mpi $name 2 --mca btl self,vmshm --mca btl_vmshm_ring_size 16384 -- "$prog" wrap 20000
ok_run $name "20000 messages through a 16 KiB ring, in order and intact" "^OK wrap"
rx=$(counter 1 0 rx_bytes)
full=$(counter 0 1 ring_full)
if [ "${rx:-0}" -gt $((1000 * 16384)) ] && [ "${full:-0}" -gt 0 ]; then
	ok "the ring wrapped $((rx / 16384)) times and was full $full times"
else fail "ring wrapped and filled up (rx_bytes=${rx:-none}, ring_full=${full:-none})"; show $name; fi

# -- 4. ordering of eager, rendezvous and fragmented messages -------------------
name=order
mpi $name 2 --mca btl self,vmshm -- "$prog" order
ok_run $name "eager/rendezvous/fragmented messages on one tag arrive in order" "^OK order"

name=threads
mpi $name 2 --mca btl self,vmshm -- "$prog" threads
ok_run $name "MPI_THREAD_MULTIPLE: 4 threads per rank exchange at once, verified" "^OK threads"

# -- 5. two guests under one orted (VHPC_GUEST_ID) -------------------------------
name=mix1
mpi $name 4 --mca btl self,vader,vmshm,tcp --mca btl_base_verbose 1 -- "$here/as-guest" "$prog" alltoall
ok_run $name "2 guests x 2 ranks under one orted: every pair verified" "^OK alltoall"
check_eq "vader carries the 4 same-guest directions" 4 "$(grep -c 'Using vader btl for send' "$T/$name.out")"
check_eq "vmshm carries the 8 cross-guest directions" 8 "$(grep -c 'Using vmshm btl for send' "$T/$name.out")"
if [ "$(counter 0 2 tx_bytes)" -gt 1000000 ] 2>/dev/null && [ -z "$(counter 0 1 tx_bytes)" ]; then
	ok "rank 0 sent over vmshm to rank 2 (other guest) and not to rank 1 (its guest)"
else fail "vmshm counters follow the guests"; show $name; fi

# -- 6. two guests, two orteds (as vhpc run will launch them) -------------------
name=mix2
mpi $name 4 --mca plm_rsh_agent "$here/fake-guest-rsh" -host 127.0.0.2:2,127.0.0.3:2 \
	--mca btl self,vader,vmshm,tcp --mca btl_base_verbose 1 -- "$prog" alltoall
ok_run $name "2 guests x 2 ranks, one orted per guest: every pair verified" "^OK alltoall"
check_eq "vader carries the 4 same-guest directions" 4 "$(grep -c 'Using vader btl for send' "$T/$name.out")"
check_eq "vmshm carries the 8 cross-guest directions" 8 "$(grep -c 'Using vmshm btl for send' "$T/$name.out")"
check_eq "tcp carries none" 0 "$(grep -c 'Using tcp btl for send' "$T/$name.out")"

name=lazy
mpi $name 2 --mca plm_rsh_agent "$here/fake-guest-rsh" -host 127.0.0.2:1,127.0.0.3:1 \
	--mca btl self,vader,vmshm,tcp --mca btl_vmshm_verbose 2 -- "$prog" lazy
ok_run $name "first contact by receive across guests, then a reply" "^OK lazy"
# Rank 1 hears rank 0's ring before Open MPI adds rank 0 to it (for the reply).
order=$(grep -E 'rank 1\] (slot [0-9]+ started sending to us|using vmshm for peer)' "$T/$name.out" |
	sed -E 's/.*(started|using).*/\1/' | tr '\n' ' ')
check_eq "rank 1 polled the new ring before adding its sender" "started using " "$order"

name=onesided
mpi $name 4 --mca plm_rsh_agent "$here/fake-guest-rsh" -host 127.0.0.2:2,127.0.0.3:2 \
	--mca pml ob1 --mca btl self,vader,vmshm,tcp --mca osc ^rdma -- "$prog" onesided
ok_run $name "one-sided put/accumulate/get across guests (osc ^rdma, as vhpc run passes)" "^OK onesided"
if [ -n "$(counter 0 2 tx_bytes)" ]; then ok "and the cross-guest part went through vmshm"
else fail "one-sided traffic went through vmshm"; show $name; fi

# -- 6b. vmshm-bcastloop (the BTL README's "IMB's Bcast, timed whole"): IMB's
# Bcast loop across two guests, timed three ways; the loop's messages went
# through vmshm, and each rank's iteration holds its Bcast and its barrier.
name=bcastloop
mpi $name 2 --mca plm_rsh_agent "$here/fake-guest-rsh" -host 127.0.0.2:1,127.0.0.3:1 \
	--bind-to none --mca pml ob1 --mca btl self,vader,vmshm,tcp -- "$bcastloop" 3000 4 1
ok_run $name "vmshm-bcastloop across guests: one line per rank" "^RESULT rank 1 bytes 4 iterations 3000 bcast"
check_eq "... both ranks, each with its Bcast, barrier and iteration time" 2 \
	"$(grep -cE '^RESULT rank [01] bytes 4 iterations 3000 bcast [0-9]+\.[0-9]{4} barrier [0-9]+\.[0-9]{4} iteration [0-9]+\.[0-9]{4}$' "$T/$name.out")"
check "... an iteration takes at least its Bcast and barrier, and they are not 0" awk '
	/^RESULT/ { n++; if ($8 <= 0 || $10 <= 0 || $12 + 0.0002 < $8 + $10) bad = 1 }
	END { exit !(n == 2 && !bad) }' "$T/$name.out"
rx=$(counter 1 0 rx_frags)
if [ "${rx:-0}" -ge 6000 ]; then ok "vmshm carried the Bcasts and barriers to rank 1 ($rx fragments)"
else fail "the loop went through vmshm (rx_frags=${rx:-none})"; show $name; fi
mpi bcastloop-bad 2 -- "$bcastloop" 12x
check_match "a bad iteration count is refused by name" "ITERATIONS: expected a whole number from 1 to [0-9]+, got '12x'" "$out"

# -- 7. region created by the first rank (test option) --------------------------
name=create
region=/dev/shm/vmshm-t.$$.create
rm -f "$region"
n=$((n + 1))
timeout -k 5 60 mpirun "${root[@]}" -np 2 --mca mca_base_component_path "$sysdir:$VHPC_TOP/$B/lib/vhpc/openmpi" \
	--mca btl self,vmshm --mca btl_vmshm_host_id testhost --mca btl_vmshm_region "$region" \
	--mca btl_vmshm_create 1 --mca btl_vmshm_region_size 8388608 --mca btl_vmshm_stats 1 \
	"$prog" lazy >"$T/$name.out" 2>&1
rc=$?
ok_run $name "btl_vmshm_create: the first rank creates and sizes a missing region" "^OK lazy"
check_eq "created region is 8 MiB, mode 0600" "8388608 600" "$(stat -c '%s %a' "$region" 2>&1)"
rm -f "$region"

# -- 8. a region that is not one: fall back, say why ---------------------------
name=badmagic
n=$((n + 1))
region=/dev/shm/vmshm-t.$$.$n
truncate -s 32M "$region"
"$scribble" "$region" format >/dev/null && "$scribble" "$region" magic
timeout -k 5 60 mpirun "${root[@]}" -np 2 --mca mca_base_component_path "$sysdir:$VHPC_TOP/$B/lib/vhpc/openmpi" \
	--mca btl self,vmshm,tcp --mca btl_vmshm_host_id testhost --mca btl_vmshm_region "$region" \
	--mca btl_vmshm_stats 1 "$prog" order >"$T/$name.out" 2>&1
rc=$?
rm -f "$region"
ok_run $name "damaged header: the job still runs (over tcp)" "^OK order"
check_match "and each rank says why vmshm is off" "not a vmshm region.*vmshm disabled" "$(cat "$T/$name.out")"
check_eq "no traffic went through vmshm" 0 "$(grep -c vmshm-stats "$T/$name.out")"

# -- 9. a guest damages records and tails while the job runs --------------------
for what in reclen rectype tail; do
	name=corrupt-$what
	n=$((n + 1))
	region=/dev/shm/vmshm-t.$$.$n
	truncate -s 32M "$region"
	t0=$SECONDS
	VMSHM_SCRIBBLE=$scribble VMSHM_REGION=$region timeout -k 5 60 mpirun "${root[@]}" -np 2 \
		--mca mca_base_component_path "$sysdir:$VHPC_TOP/$B/lib/vhpc/openmpi" \
		--mca btl self,vmshm --mca btl_vmshm_host_id testhost --mca btl_vmshm_region "$region" \
		-x VMSHM_SCRIBBLE -x VMSHM_REGION "$prog" corrupt $what >"$T/$name.out" 2>&1
	rc=$? secs=$((SECONDS - t0))
	rm -f "$region"
	case $what in
	reclen) want="corrupt ring from slot [0-9]+: (pad )?record at offset [0-9]+ claims 4294967280 bytes" ;;
	rectype) want="corrupt ring from slot [0-9]+: record at offset [0-9]+ has unknown type 0x42" ;;
	tail) want="sending to slot [0-9]+: the peer's tail in the region is impossible" ;;
	esac
	if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && grep -qE "$want" "$T/$name.out" &&
	   ! grep -qiE "segmentation fault|signal 11|went unnoticed|was delivered" "$T/$name.out"; then
		ok "damaged $what: detected, reported, job ended in ${secs}s without a crash"
	else fail "damaged $what is detected and ends the job"; show $name; fi
done

# -- 10. the sender dies in the middle of a 64 MiB message ----------------------
name=killmid
mpi $name 2 --mca btl self,vmshm -- "$prog" killmid
# mpirun itself exits 137 when a rank was SIGKILLed; the bound is the time.
if [ $rc -ne 0 ] && [ $secs -lt 30 ] &&
   grep -q "killing itself mid-message (done=0)" "$T/$name.out" && ! grep -q "whole message arrived" "$T/$name.out"; then
	ok "peer killed mid-message: the job ends in ${secs}s, the receiver does not hang"
else fail "peer killed mid-message ends the job"; show $name; fi

# -- 11. single copy: large messages read straight out of the sender --------------
# (btl_vmshm_single_copy: ob1's RGET over process_vm_readv, for ranks that
# share a PID namespace; the counters say how many bytes went that way)
rs_bytes=$(name=sizes counter 1 0 get_bytes)
name=sc-sizes
mpi $name 2 --mca btl self,vmshm,tcp --mca btl_vmshm_single_copy 1 --mca btl_vmshm_verbose 1 -- "$prog" sizes
ok_run $name "single copy: sizes 0..4 MiB, contiguous and strided, verified both ways" "^OK sizes"
check_match "each rank says it reads its peer's messages in one copy" "using vmshm for peer .*single copy" "$out"
g=$(counter 1 0 get_bytes)
if [ "${g:-0}" -ge 16000000 ] && [ "${rs_bytes:-x}" = 0 ]; then
	ok "rank 1 read $g bytes in $(counter 1 0 gets) messages out of rank 0's memory (0 without single copy)"
else fail "large messages went by single copy (get_bytes ${g:-none}, ${rs_bytes:-none} without)"; show $name; fi

# Ranks that share cores yield when idle (vhpc then passes
# mpi_yield_when_idle): they keep the ring.
name=sc-yield
mpi $name 2 --mca btl self,vmshm,tcp --mca btl_vmshm_single_copy 1 --mca mpi_yield_when_idle 1 -- "$prog" sizes
ok_run $name "single copy with mpi_yield_when_idle: every size still verified both ways" "^OK sizes"
check_eq "and large messages went through the ring, none by single copy" "0 0" \
	"$(counter 1 0 get_bytes) $(counter 0 1 get_bytes)"

# Only the sender offers it: its RGET headers reach a receiver that will not
# read, and ob1 falls back to sending those messages through the ring.
name=sc-half
mpi $name 2 --mca btl self,vmshm,tcp -- \
	sh -c '[ "$OMPI_COMM_WORLD_RANK" = 0 ] && export OMPI_MCA_btl_vmshm_single_copy=1; exec "$0" "$@"' "$prog" sizes
ok_run $name "single copy on the sender's side only: every size still verified both ways" "^OK sizes"
check_eq "nothing was read by single copy either way" "0 0" "$(counter 1 0 get_bytes) $(counter 0 1 get_bytes)"

# A peer in another PID namespace (a container guest of its own): its pid
# means nothing here; the probe read at connect time says so.
name=sc-pidns
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	VMSHM_FAKE_PIDNS=127.0.0.3 mpi $name 4 --mca plm_rsh_agent "$here/fake-guest-rsh" \
		-host 127.0.0.2:2,127.0.0.3:2 --mca btl self,vader,vmshm,tcp \
		--mca btl_vmshm_single_copy 1 --mca btl_vmshm_verbose 1 -- "$prog" alltoall
	ok_run $name "single copy on, guests in two PID namespaces: every pair verified" "^OK alltoall"
	check_match "a rank says its peer is in another PID namespace" "is in another PID namespace: no single copy" "$out"
	check_eq "and no byte crossed by single copy" "0 0" "$(counter 0 2 get_bytes) $(counter 2 0 get_bytes)"
else
	for _ in 1 2 3; do skip "a rank in a PID namespace of its own needs root and unshare"; done
fi

# The sender dies while its peer reads its memory: the job still ends.
name=sc-killmid
mpi $name 2 --mca btl self,vmshm --mca btl_vmshm_single_copy 1 -- "$prog" killmid
if [ $rc -ne 0 ] && [ $secs -lt 30 ] && grep -q "killing itself mid-message (done=0)" "$T/$name.out"; then
	ok "single copy, sender killed mid-message: the job ends in ${secs}s"
else fail "single copy: a sender killed mid-message ends the job"; show $name; fi

# -- 12. not configured, or on another host: never used --------------------------
name=unconfigured
n=$((n + 1))
timeout -k 5 60 mpirun "${root[@]}" -np 2 --mca mca_base_component_path "$sysdir:$VHPC_TOP/$B/lib/vhpc/openmpi" \
	--mca btl self,vmshm,tcp --mca btl_base_verbose 1 --mca btl_vmshm_stats 1 \
	-x VHPC_HOST_ID= -x VHPC_VMSHM_PATH= "$prog" order >"$T/$name.out" 2>&1
rc=$?
ok_run $name "no host id or region: the job runs without vmshm" "^OK order"
check_eq "and vmshm reached nobody" 0 "$(grep -cE 'Using vmshm btl|vmshm-stats' "$T/$name.out")"

name=otherhost
n=$((n + 1))
region=/dev/shm/vmshm-t.$$.$n
truncate -s 32M "$region"
VHPC_VMSHM_PATH=$region timeout -k 5 60 mpirun "${root[@]}" -np 2 \
	--mca mca_base_component_path "$sysdir:$VHPC_TOP/$B/lib/vhpc/openmpi" \
	--mca btl self,vmshm,tcp --mca btl_base_verbose 1 -x VHPC_VMSHM_PATH \
	sh -c 'VHPC_HOST_ID=host$OMPI_COMM_WORLD_RANK exec "$0" "$@"' "$prog" order >"$T/$name.out" 2>&1
rc=$?
rm -f "$region"
ok_run $name "ranks on different physical hosts (VHPC_HOST_ID) still talk" "^OK order"
check_eq "over tcp, not vmshm" "0 2" \
	"$(grep -c 'Using vmshm btl' "$T/$name.out") $(grep -c 'Using tcp btl' "$T/$name.out")"

# -- nothing left behind ---------------------------------------------------------
sleep 1
left=$(pgrep -f "$prog" || true)
check_eq "no test rank is left running" "" "$left"
check_eq "no region file is left in /dev/shm" "" "$(ls /dev/shm | grep "vmshm-t.$$" || true)"
done_testing
