#!/usr/bin/env bash
# timeout: 300
# The product's main path: `vhpc run -N 2 -n 4` runs vhpc-mpibench with its
# ranks in two container guests (own hostnames and network namespaces) on the
# cores placement gave them, the IMB tables are sane, and the job's exit
# status, stderr and time limit reach the user.
. "$(dirname "$0")/common.sh"
need_root
for p in vhpc vhpc-guestd vhpc-rsh vhpc-mpibench vhpc-imbcheck; do
	[ -x "$BIN/$p" ] || skip_all "$p is not built"
done

vhpc run -N 2 -n 4 -- vhpc-mpibench -show-hosts -msglog 0:16 PingPong Sendrecv >"$T/out" 2>"$T/err"
rc=$?
check_eq "vhpc run -N 2 -n 4 exits with the job's status" 0 "$rc"
[ $rc = 0 ] || diag "$(tail -30 "$T/err")"

hostns=$(stat -L -c %i /proc/self/ns/net)
grep '^# rank ' "$T/out" >"$T/ranks"
check_eq "four ranks report where they run" 4 "$(wc -l <"$T/ranks")"
check_eq "two ranks in guest g0" 2 "$(grep -c 'host=g0 ' "$T/ranks")"
check_eq "two ranks in guest g1" 2 "$(grep -c 'host=g1 ' "$T/ranks")"
ns0=$(sed -n 's/.*host=g0 netns=\([0-9]*\).*/\1/p' "$T/ranks" | sort -u)
ns1=$(sed -n 's/.*host=g1 netns=\([0-9]*\).*/\1/p' "$T/ranks" | sort -u)
check "ranks of one guest share its network namespace" test "$(echo "$ns0" | wc -w)" = 1 -a "$(echo "$ns1" | wc -w)" = 1
check "the guests' network namespaces differ from each other and the host's" \
	test -n "$ns0" -a -n "$ns1" -a "$ns0" != "$ns1" -a "$ns0" != "$hostns" -a "$ns1" != "$hostns"
# Placement as vhpc reported it ("  g0: cpus 0, ...") is what ranks see.
for g in g0 g1; do
	placed=$(sed -n "s/.*  $g: cpus \([0-9,-]*\),.*/\1/p" "$T/err")
	seen=$(sed -n "s/.*host=$g .* cpus=\([0-9,-]*\) .*/\1/p" "$T/ranks" | sort -u)
	check_eq "ranks in $g run on the cores placement gave it" "$placed" "$seen"
done
check "the IMB tables parse and are sane (PingPong at 2, Sendrecv at 2 and 4)" \
	vhpc-imbcheck -expect PingPong@2 -expect Sendrecv@2 -expect Sendrecv@4 "$T/out"
check_match "ready time is reported" "2 guests ready in [0-9.]+ s" "$(cat "$T/err")"

# --scratch: each container guest gets a private tmpfs of that size.
vhpc run -N 2 -n 2 --scratch 32M -- sh -c 'r=$OMPI_COMM_WORLD_RANK
echo "rank=$r mount $(grep " /scratch " /proc/mounts)"
echo "rank=$r mode $(stat -c %a /scratch)"
echo "data of $r" >/scratch/f$r && echo "rank=$r read $(cat /scratch/f$r)"
sleep 1
echo "rank=$r ls $(ls /scratch | tr "\n" " ")"
dd if=/dev/zero of=/scratch/big bs=1M count=40 2>/dev/null; echo "rank=$r dd rc=$?"' >"$T/out" 2>"$T/err"
check_eq "--scratch 32M: the job exits 0" 0 "$?"
o=$(cat "$T/out")
for r in 0 1; do
	check_match "rank $r: /scratch is a 32 MiB tmpfs, nosuid and nodev" "rank=$r mount tmpfs /scratch tmpfs rw,nosuid,nodev,.*size=32768k" "$o"
	check_match "rank $r: writable by every user, sticky" "rank=$r mode 1777" "$o"
	check_match "rank $r: what it wrote reads back" "rank=$r read data of $r" "$o"
	check_match "rank $r: its guest's /scratch holds its file only" "rank=$r ls (big )?f$r \$" "$o"
	check_match "rank $r: 40 MiB do not fit" "rank=$r dd rc=1" "$o"
done
vhpc run -N 1 -- sh -c 'grep -c " /scratch " /proc/mounts' >"$T/out" 2>"$T/err"
check_eq "without --scratch there is no /scratch mount" 0 "$(cat "$T/out")"
vhpc run --scratch 4K -N 1 -- true >"$T/out" 2>"$T/err"
check_eq "--scratch 4K is refused with 2" 2 "$?"
check_match "and named" "--scratch: expected a size from 16M to 64T" "$(cat "$T/err")"

# Verbs pins what it registers against RLIMIT_MEMLOCK: a guest may pin up
# to its memory, above the 8 MiB a daemon inherits (a larger pool than that
# hung rxd over a 4096-byte MTU).  Only root with CAP_SYS_RESOURCE (bit 24)
# can raise the hard limit it inherits (this sandbox's root cannot):
# without it the guest gets that hard limit, never more.  The soft limit is
# lowered first, so an inherited one cannot pass.
hard=$(ulimit -H -l) want=268435456
sysres=$(( 0x$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status) >> 24 & 1 ))
[ "$hard" != unlimited ] && [ $((hard * 1024)) -lt $want ] && [ $sysres = 0 ] && want=$((hard * 1024))
(ulimit -S -l 1024; vhpc run -N 1 --mem 256M -- sh -c 'grep "^Max locked memory" /proc/self/limits') >"$T/out" 2>"$T/err"
check_match "a guest may lock (pin) its memory: RLIMIT_MEMLOCK is --mem 256M, or this agent's hard limit (here $want)" \
	"^Max locked memory +$want +$want +bytes" "$(cat "$T/out")"

vhpc run -N 2 -n 2 -- sh -c 'echo to-stderr >&2; exit 7' >"$T/out" 2>"$T/err"
check_eq "a failing command's exit status is the job's" 7 "$?"
check "its stderr reaches the user" grep -q to-stderr "$T/err"

t0=$(date +%s)
vhpc run -N 1 --timeout 3 -- sleep 60 >"$T/out" 2>"$T/err"
rc=$? dt=$(( $(date +%s) - t0 ))
check_eq "a job over its time limit exits 124" 124 "$rc"
check "and is stopped promptly (${dt}s)" test "$dt" -lt 20
check_match "the time limit is named" "time limit" "$(cat "$T/err")"
check_eq "no job dir is left" 0 "$(ls "$VHPC_RUN_DIR/jobs" 2>/dev/null | wc -l)"
done_testing
