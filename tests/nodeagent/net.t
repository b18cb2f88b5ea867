#!/usr/bin/env bash
# timeout: 60
# Job networks: reachability inside a job, isolation between two jobs,
# MTU, offloads and sysctls inside guest namespaces, and nothing left after.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/na-lib.sh"
need_root
command -v ping >/dev/null || skip_all "ping (iputils-ping) is not installed"
command -v ethtool >/dev/null && have_ethtool=1 || have_ethtool=

na_run_dir
A=nt$$a B=nt$$b C=nt$$c
before=$(leftovers $A $B $C)

check "job A comes up with 2 guests" up A --job $A -N 2 --tuning hpc
check "job B comes up beside it (cores shared)" up B --job $B -N 2 --oversubscribe --tuning hpc
diag "$(out_of A)"
a0=$(field A "guest 0 netns [^ ]+ addr"); a1=$(field A "guest 1 netns [^ ]+ addr")
b0=$(field B "guest 0 netns [^ ]+ addr"); b1=$(field B "guest 1 netns [^ ]+ addr")
check_match "A's guests get subnet+2, +3" '^10\.213\.[0-9]+\.2/24 10\.213\.[0-9]+\.3/24$' "$a0 $a1"
[ "${a0%.*}" != "${b0%.*}" ] && ok "concurrent jobs get distinct subnets (${a0%.*}.0, ${b0%.*}.0)" || fail "jobs share subnet ${a0%.*}"

# Within a job, guests reach each other (both directions, large frames too).
check "A guest 0 pings A guest 1" ip netns exec vhpc-$A-0 ping -c1 -W2 -q "${a1%/*}"
check "A guest 1 pings A guest 0 with 8000-byte frames (no fragmentation)" \
	ip netns exec vhpc-$A-1 ping -c1 -W2 -q -M do -s 8000 "${a0%/*}"
check "B guest 1 pings B guest 0" ip netns exec vhpc-$B-1 ping -c1 -W2 -q "${b0%/*}"

# Across jobs: nothing, even when A's guest is told the way to B's subnet
# on its own link (so no routing decision hides a shared wire).
if ip netns exec vhpc-$A-0 ping -c1 -W1 -q "${b0%/*}" >/dev/null 2>&1; then
	fail "A guest reaches B guest"
else ok "A guest cannot reach B guest (no route)"; fi
ip netns exec vhpc-$A-0 ip route add "${b0%.*}.0/24" dev eth0
if ip netns exec vhpc-$A-0 ping -c2 -W1 -q "${b0%/*}" >/dev/null 2>&1; then
	fail "A guest reaches B guest over its link"
else ok "A guest cannot reach B guest over its own link (separate bridges)"; fi
check_eq "A's ARP for B's guest went unanswered" "" \
	"$(ip netns exec vhpc-$A-0 ip neigh show "${b0%/*}" | grep -E 'REACHABLE|STALE|DELAY')"
check "nothing of either job is in the host's namespace" \
	[ "$(ip -o link | grep -cE "link-netns vhpc-($A|$B)")" = 0 ]

# Tuning inside a guest namespace.
check_eq "eth0 MTU from the profile" 9000 "$(ip netns exec vhpc-$A-0 cat /sys/class/net/eth0/mtu)"
check_eq "bridge MTU from the profile" 9000 "$(ip netns exec vhpc-$A cat /sys/class/net/br0/mtu)"
check_match "lo is up in the guest" '<LOOPBACK,UP' "$(ip -n vhpc-$A-0 -o link show lo)"
check_eq "tcp_rmem applied in the guest" "4096 1048576 67108864" \
	"$(ip netns exec vhpc-$A-1 cat /proc/sys/net/ipv4/tcp_rmem | tr '\t' ' ')"
check_eq "tcp_slow_start_after_idle applied in the guest" 0 \
	"$(ip netns exec vhpc-$A-1 cat /proc/sys/net/ipv4/tcp_slow_start_after_idle)"
[ "$(tr '\t' ' ' </proc/sys/net/ipv4/tcp_rmem)" != "4096 1048576 67108864" ] &&
	ok "host tcp_rmem differs from the guest's" || skip "host already has the profile's tcp_rmem"

# A profile with offloads off and another MTU (checked with ethtool, not
# with our own code).
tun=$VHPC_RUN_DIR/offload-test.yaml
cat >"$tun" <<'EOF'
name: offload-test
mtu: 4000
offload: { tso: false, gso: false, gro: false, sg: true, tx_csum: true, rx_csum: true }
sysctl:
  net.ipv4.tcp_adv_win_scale: "2"
EOF
check "job C comes up with a custom profile" up C --job $C -N 1 --oversubscribe --tuning "$tun"
check_eq "C eth0 MTU 4000" 4000 "$(ip netns exec vhpc-$C-0 cat /sys/class/net/eth0/mtu)"
check_eq "C tcp_adv_win_scale 2" 2 "$(ip netns exec vhpc-$C-0 cat /proc/sys/net/ipv4/tcp_adv_win_scale)"
if [ -n "$have_ethtool" ]; then
	k=$(ip netns exec vhpc-$C-0 ethtool -k eth0)
	check_match "C eth0 TSO off" '^tcp-segmentation-offload: off' "$k"
	check_match "C eth0 GRO off" '^generic-receive-offload: off' "$k"
	check_match "C eth0 scatter-gather on" '^scatter-gather: on' "$k"
	check_match "C bridge port TSO off" '^tcp-segmentation-offload: off' "$(ip netns exec vhpc-$C ethtool -k v0)"
	check_match "A eth0 TSO on" '^tcp-segmentation-offload: on' "$(ip netns exec vhpc-$A-0 ethtool -k eth0)"
else
	skip "ethtool not installed: offloads not checked"
fi
down C

# Teardown: every namespace and mount goes, and the namespaces themselves
# are freed (no mount or process keeps them).
ino=$(stat -L -c %i /run/netns/vhpc-$A-0)
down A; down B
check_match "A tore down" '^down$' "$(out_of A)"
check_eq "nothing left of jobs A, B, C" "$before" "$(leftovers $A $B $C)"
check_eq "no mount holds A guest 0's namespace" 0 "$(grep -c "net:\[$ino\]" /proc/self/mountinfo)"
check_eq "no process is in it" "" "$(for p in /proc/[0-9]*; do [ "$(readlink $p/ns/net 2>/dev/null)" = "net:[$ino]" ] && echo $p; done)"

# Timing of one 2-guest network, as measured by vhpc-na itself.
diag "A: $(grep -E 'net_(create|destroy)_ms' "$VHPC_RUN_DIR/A.out" | tr '\n' ' ')"

# Bad tuning: a read-only sysctl is refused with the reason, and the failed
# job leaves nothing.
cat >"$tun" <<'EOF'
name: readonly-test
sysctl:
  net.core.rmem_max: "67108864"
EOF
D=nt$$d
before_d=$(leftovers $D)
out=$("$NA" up --job $D -N 1 --tuning "$tun" 2>&1)
check_match "read-only sysctl named in the error" "net.core.rmem_max is read-only inside a network namespace" "$out"
check_eq "the failed job left nothing" "$before_d" "$(leftovers $D)"
done_testing
