#!/usr/bin/env bash
# needs: wireguard
# timeout: 300
# Underlay encryption (job_network.underlay_encryption): a job's VXLAN
# between its nodes rides over WireGuard.  Its guests reach each other;
# on the hub (the underlay) only WireGuard passes between the nodes, no
# VXLAN; a machine on the underlay that forges the source address of the
# job's other node (its WireGuard address) and sends VXLAN frames for the
# job in clear gets nothing to the guest, since the job's VNI is taken
# only from the WireGuard device; and the device goes with the job.
# Needs a kernel that makes WireGuard devices (tests/run sends it to the
# virtualization lab where this host's cannot).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/net-lib.sh"
command -v wg >/dev/null || skip_all "wireguard-tools is not installed"

net_encrypt || { fail "cluster file with underlay encryption"; done_testing; exit 1; }
net_job_up || { fail "cluster and job A up over WireGuard"; done_testing; exit 1; }
LA=$(ls "$CL_DIR/run-n$NA/jobs" | grep "^${A}x")
for n in "$NA" "$NB"; do
	check_match "n$n has the WireGuard device with its address" "inet $(wgaddr "$n")/16" \
		"$(ip -n "$CL-n$n" addr show vhpcwg 2>&1)"
done
check "n$NOUT, not in the job, has none" test -z "$(ip -n "$CL-n$NOUT" link show vhpcwg 2>/dev/null)"
check_match "n$NA's peer is n$NB, at its underlay address" "endpoint: $(ul "$NB"):51820" \
	"$(cl_in "$CL-n$NA" wg show vhpcwg)"
check_match "... greeted at once (a persistent keepalive), not at the job's first packet" \
	"persistent keepalive: every 25 seconds" "$(cl_in "$CL-n$NA" wg show vhpcwg)"
check_match "vxlan0 ends at n$NA's WireGuard address" "vxlan id $VNI local $(wgaddr "$NA") " \
	"$(ip -n "vhpc-$LA" -d link show vxlan0)"
check_match "the job's firewall takes its VNI only from the device" "@th,96,24 $(printf '0x%x' "$VNI") iifname != \"vhpcwg\"" \
	"$(cl_in "$CL-n$NA" nft list table ip "vhpc-$LA")"

# What crosses the hub between the nodes ("fwd" would be a keyword to nft)
check "the hub counts what crosses it" ip netns exec "$CL_HUB" nft -f - <<'NFT'
table bridge vhpctest {
	chain across { type filter hook forward priority 0; policy accept;
		udp dport 4789 counter
		udp dport 51820 counter
	}
}
NFT
# The first ping waits for WireGuard's handshake, which takes seconds in the lab.
poll_until 10 quiet ip netns exec "$G1NS" ping -c 1 -W 2 -q "$G0IP"
if quiet ip netns exec "$G1NS" ping -c 5 -i 0.2 -W 2 -q "$G0IP"; then
	ok "A's guests reach each other across the nodes"
else
	fail "A's guests reach each other across the nodes"
	diag "job $A: $(job_state "$A")" "$(vc output "$A" 2>&1 | tail -n 5)" "$(cl_in "$CL-n$NA" wg show vhpcwg 2>&1)"
fi
c=$(ip netns exec "$CL_HUB" nft list table bridge vhpctest | sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | tr '\n' ' ')
diag "hub: VXLAN packets, WireGuard packets: $c"
check "no VXLAN crosses the hub" test "$(echo $c | cut -d' ' -f1)" = 0
check "WireGuard does (at least the 10 pings)" test "$(echo $c | cut -d' ' -f2)" -ge 10

# The job must still be there for the attack to mean anything.
if job_state_is "$A" RUNNING; then
	ok "job A still runs"
else
	fail "job A still runs"
	diag "job $A: $(job_state "$A")" "$(vc output "$A" 2>&1 | tail -n 25)"
fi

# A machine on the underlay forges n$NB's WireGuard address as its source.
X=$CL-x
ip netns add "$X" && at_exit "ip netns del '$X' 2>/dev/null"
ip link add "${CL}vx" mtu 9000 netns "$CL_HUB" type veth peer name eth0 mtu 9000 netns "$X"
ip -n "$CL_HUB" link set "${CL}vx" master hub0 up
ip -n "$X" addr add 198.18.0.99/24 dev eth0
ip -n "$X" addr add "$(wgaddr "$NB")/32" dev eth0
ip -n "$X" link set eth0 up
ip -n "$X" route add "$(wgaddr "$NA")/32" via "$(ul "$NA")" src "$(wgaddr "$NB")"
got=$(net_count_at_g0 3 ip netns exec "$X" "$INJ" send "$(wgaddr "$NA")" "$VNI" "$G0MAC" "$G0IP" \
	02:00:00:00:00:94 "${G0IP%.*}.205" "$NET_PORT" 5 1000)
diag "attacker: $(cat "$CL_DIR/attack.out")"
check_eq "VXLAN in clear with n$NB's WireGuard address as its source reaches nothing (of 5)" 0 "$got"
drops=$(cl_in "$CL-n$NA" nft list table ip "vhpc-$LA" | grep iifname | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
check "... dropped for not coming through the device (11 frames)" test "${drops:-0}" -ge 11

vc cancel "$A" >/dev/null
check "job A ends" wait_state "$A" CANCELLED 30
for n in "$NA" "$NB"; do
	for _ in $(seq 50); do [ -z "$(ip -n "$CL-n$n" link show vhpcwg 2>/dev/null)" ] && break; sleep 0.1; done
	check "n$n's WireGuard device went with the last job over it" test -z "$(ip -n "$CL-n$n" link show vhpcwg 2>/dev/null)"
done
done_testing
