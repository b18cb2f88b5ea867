#!/usr/bin/env bash
# timeout: 300
# vhpc-ctld --metrics: a cluster of one real node (n1) and two simulated
# ones (vhpcd --simulate in the hub: sfab-0 with one core and a fabric its
# own cluster file disagrees with, sdown-0 with four cores), and what the
# Prometheus page says of what happened there:
#  - a job completes on n1, which pulls the image from the controller's
#    store for it (one pull, the store's bytes);
#  - a --rdma job goes to sfab-0, which refuses each of its 3 starts
#    (node_refused), and fails;
#  - a job asking for a device no node has stays pending;
#  - a job runs on sdown-0 (its cores and memory used), and sdown-0 is
#    killed: down, and the job ends NODE_FAIL;
#  - `promtool check metrics` (Debian's prometheus package) finds nothing
#    wrong in the page, and the page holds no command, user or path;
#  - idle connections from many addresses and scrapes in a loop: the
#    server holds at most its 32 connections, closes idle ones, and the
#    controller answers and runs a job meanwhile; an oversized request,
#    another method or path are refused;
#  - --metrics-token: a token file others may read is refused at start;
#    without the token or with a wrong one, 401; with it, the page.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-na
# make check's set-up takes promtool out of Debian's prometheus package
# (Makefile, "tools"); one on the PATH does as well.
PROMTOOL=$VHPC_TOP/$B/tools/promtool
[ -x "$PROMTOOL" ] || PROMTOOL=$(command -v promtool) || skip_all "promtool is not here: make tools takes it out of Debian's prometheus package (it needs apt's package lists and the network)"
command -v curl >/dev/null || skip_all "curl is not installed"
CL=vcm$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR
M=198.18.0.1:9464
FLOOD=$VHPC_TOP/$B/testbin/connflood

# The controller's (and n1's) cluster file: the default one, and a RoCE
# fabric on sfab-0 only.  sfab's own file says InfiniBand, so it refuses
# what the controller sends it.
{ cat "$VHPC_TOP/configs/cluster.yaml"
  printf '%s\n' 'fabric:' '  mode: roce' '  vlans: 100-101' '  pool: 10.214.0.0/24' '  prefix: 28' \
	'  nodes:' '    - name: sfab-0' '      link: eth9'; } >"$T/cluster.yaml"
{ cat "$VHPC_TOP/configs/cluster.yaml"
  printf '%s\n' 'fabric:' '  mode: ib' '  pkeys: 0x0100-0x01ff' '  pool: 10.214.0.0/24' '  prefix: 28' \
	'  nodes:' '    - name: sfab-0' '      link: eth9'; } >"$T/sfab.yaml"
export VHPC_CLUSTER=$T/cluster.yaml

cl_net_up 1 && cl_munge_up && cl_ctld_up --metrics "$M" || { fail "cluster set-up"; done_testing; exit 1; }
cl_node_up 1 || fail "node 1 starts"
check "node 1 registers" cl_wait_nodes_up 1

scrape() { cl_in "$CL_HUB" curl -sS --max-time 5 "$@" "http://$M/metrics"; }
# value NAME{LABELS}: the sample's value in the last scrape ($T/page)
value() { awk -v k="$1" '$1 == k {print $2}' "$T/page"; }
# page_has NAME{LABELS} VALUE: a fresh scrape shows it (the page is made
# at most once a second)
page_has() { scrape >"$T/page" 2>/dev/null && [ "$(value "$1")" = "$2" ]; }
wait_page() {
	poll_until "${3:-10}" page_has "$1" "$2" && return 0
	echo "# $1 is '$(value "$1")', not '$2'"
	return 1
}
sub() { vc submit --json "$@" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }

check "the page is served at once" page_has 'vhpc_nodes{state="up"}' 1
check_eq "... its content type is the text format's" 'text/plain; version=0.0.4; charset=utf-8' \
	"$(cl_in "$CL_HUB" curl -sS -o /dev/null -w '%{content_type}' "http://$M/metrics")"

# -- a job completes on n1, pulling the image
A=$(sub -N 1 --vcpus 1 -- sh -c 'echo metrics-secret-command')
check "job A completes on n1" wait_state "$A" COMPLETED 90
check "vhpc_jobs_ended_total{state=completed} is 1" wait_page 'vhpc_jobs_ended_total{state="completed"}' 1
check_eq "vhpc_image_pulls_total: n1 pulled once" 1 "$(value vhpc_image_pulls_total)"
store_bytes=$(find "$T/ctld/images/objects" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
check_eq "vhpc_image_pull_bytes_total: the bytes of the store's objects, each sent once" \
	"$store_bytes" "$(value vhpc_image_pull_bytes_total)"
check_eq "the queue wait of A is in the histogram (+Inf bucket)" 1 "$(value 'vhpc_job_queue_wait_seconds_bucket{le="+Inf"}')"
check_eq "... and its count" 1 "$(value vhpc_job_queue_wait_seconds_count)"
ncores=$(vc nodes --json | tr -d ' \n' | grep -o '"name":"n1".*' | grep -o '"cores":[0-9]*' | head -1 | cut -d: -f2)
# (a job's cores stay used until its node has torn it down)
check "n1's free cores: all it reported ($ncores), once A is torn down" wait_page 'vhpc_node_cores{node="n1",state="free"}' "$ncores"
check_eq "n1's used cores: none" 0 "$(value 'vhpc_node_cores{node="n1",state="used"}')"

# -- simulated nodes in the hub
sim_up() {  # NAME TOPOLOGY PORT [CLUSTER FILE]
	# nsenter execs the daemon: $! is its pid
	VHPC_CLUSTER=${4:-$VHPC_CLUSTER} nsenter --net=/run/netns/"$CL_HUB" -- "$BIN/vhpcd" --simulate 1 --name "$1" \
		--listen "198.18.0.1:$3" --controller "$CL_CTL" --topology "$2" --sim-runtime 600000 \
		--log "$T/$1.log" &
	eval "SIM_$1=$!"
	at_exit "kill -9 $! 2>/dev/null"
}
sim_up sfab "synthetic:numa:1 core:1 pu:1" 6901 "$T/sfab.yaml"
sim_up sdown "synthetic:numa:1 core:4 pu:1" 6902
check "both simulated nodes register" cl_wait_nodes_up 3
check "vhpc_nodes{state=up}: 3" wait_page 'vhpc_nodes{state="up"}' 3

D=$(sub -N 1 --vcpus 2 --mem 256M -- true)
check "job D (2 cores) runs on sdown-0, the one node with 2 free" wait_state "$D" RUNNING 30
check_match "... there" '"nodes":\["sdown-0"\]' "$(job_json "$D")"
check "vhpc_jobs{state=running}: 1" wait_page 'vhpc_jobs{state="running"}' 1
check_eq "sdown-0's used cores: 2" 2 "$(value 'vhpc_node_cores{node="sdown-0",state="used"}')"
check_eq "... free: 2" 2 "$(value 'vhpc_node_cores{node="sdown-0",state="free"}')"
check_eq "sdown-0's used memory: D's 256 MiB" $((256 << 20)) "$(value 'vhpc_node_memory_bytes{node="sdown-0",state="used"}')"
check_eq "vhpc_job_queue_wait_seconds_count: A and D started" 2 "$(value vhpc_job_queue_wait_seconds_count)"

JB=$(sub -N 1 --vcpus 1 --rdma -- true)
check "job B (--rdma, only sfab-0 has the fabric) fails after its 3 starts" wait_state "$JB" FAILED 40
check_match "... sfab-0 refused it" "could not start \(3 attempts\); last: node sfab-0: the job's fabric is roce" "$(job_field "$JB" reason)"
check "vhpc_job_start_failures_total{reason=node_refused}: 3" \
	wait_page 'vhpc_job_start_failures_total{reason="node_refused"}' 3
check_eq "vhpc_jobs_ended_total{state=failed}: 1" 1 "$(value 'vhpc_jobs_ended_total{state="failed"}')"
check_eq "no other reason counted" 0 "$(awk '/^vhpc_job_start_failures_total\{/ && !/node_refused/ {s += $2} END {print s + 0}' "$T/page")"

C=$(sub -N 1 --vcpus 1 --device fpga -- true)
check "job C (a device no node has) stays pending" wait_state "$C" PENDING 10
check "vhpc_jobs{state=pending}: 1" wait_page 'vhpc_jobs{state="pending"}' 1
check "the oldest pending job has waited 2 s or more" poll_until 10 \
	cl_in "$CL_HUB" sh -c "curl -sS --max-time 5 http://$M/metrics | awk '\$1 == \"vhpc_job_queue_oldest_wait_seconds\" && \$2 >= 2 {f = 1} END {exit !f}'"

# -- a node goes down
kill -9 "$SIM_sdown"
wait "$SIM_sdown" 2>/dev/null
check "sdown-0 killed: vhpc_nodes{state=down} 1" wait_page 'vhpc_nodes{state="down"}' 1 20
check_eq "vhpc_node_up{node=sdown-0}: 0" 0 "$(value 'vhpc_node_up{node="sdown-0"}')"
check_eq "vhpc_node_up{node=n1}: 1" 1 "$(value 'vhpc_node_up{node="n1"}')"
check "D ended NODE_FAIL" wait_state "$D" NODE_FAIL 10
check "vhpc_jobs_ended_total{state=node_fail}: 1" wait_page 'vhpc_jobs_ended_total{state="node_fail"}' 1
check_eq "a down node has no free cores" 0 "$(value 'vhpc_node_cores{node="sdown-0",state="free"}')"

# -- the page as a whole
scrape >"$T/page"
out=$("$PROMTOOL" check metrics <"$T/page" 2>&1)
check_eq "promtool check metrics finds nothing wrong (rc)" 0 "$?"
check_eq "... and says nothing" "" "$out"
check "the page holds no job's command" sh -c "! grep -q metrics-secret-command '$T/page'"
samples=$(grep -v '^#' "$T/page")
check "... no user, uid, job name or path" sh -c "! echo '$samples' | grep -qiE 'user|uid|name=|/'"
diag "$(grep -v '^#' "$T/page" | grep -E 'vhpc_jobs|failures|pull|node_up' | head -30)"

# -- a flood: idle connections from 6 addresses (more than the 32 the
# server holds), and scrapes in a loop, while users go on
# vhpc queue's time, the median of 5, before and during the flood
queue_ms() {
	local i t0 v=()
	for i in 1 2 3 4 5; do
		t0=$(date +%s%N)
		vc queue >/dev/null 2>&1
		v+=($(( ($(date +%s%N) - t0) / 1000000 )))
	done
	printf '%s\n' "${v[@]}" | sort -n | sed -n 3p
}
q_before=$(queue_ms)
for i in 1 2 3 4 5 6; do ip -n "$CL_HUB" addr add "198.18.0.$((200 + i))/24" dev hub0; done
fds() { ls /proc/"$CTLD_PID"/fd | wc -l; }
fd0=$(fds)
cl_in "$CL_HUB" "$FLOOD" idle "$M" 300 14 198.18.0.201 198.18.0.202 198.18.0.203 198.18.0.204 198.18.0.205 \
	198.18.0.206 >"$T/flood" 2>&1 &
fpid=$!
at_exit "kill $fpid 2>/dev/null"
( end=$((SECONDS + 12)); while [ $SECONDS -lt $end ]; do cl_in "$CL_HUB" curl -s --max-time 2 -o /dev/null "http://$M/metrics"; done ) &
spid=$!
at_exit "kill $spid 2>/dev/null"
wait_log "$T/flood" '^connected' 10
sleep 1
fd1=$(fds)
diag "$(head -1 "$T/flood"); the controller's descriptors: $fd0 before, $fd1 during"
check "the metrics server holds at most 32 of them (descriptors +$((fd1 - fd0)))" test $((fd1 - fd0)) -le 34
t0=$(date +%s%N)
q=$(vc queue 2>&1)
q_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check_match "vhpc queue answers during the flood" "$C" "$q"
check "... within 2 s" test "$q_ms" -lt 2000
diag "vhpc queue, median of 5: $q_before ms before the flood, $(queue_ms) ms during it"
E=$(sub -N 1 --vcpus 1 -- true)
check "a job submitted during the flood completes on n1" wait_state "$E" COMPLETED 60
wait "$fpid"
wait "$spid"
diag "$(tail -1 "$T/flood")"
check_match "idle connections were closed by the server (10 s idle)" 'closed by the daemon [1-9][0-9]*' "$(tail -1 "$T/flood")"
check "after the flood a scrape is answered again" poll_until 15 page_has 'vhpc_jobs_ended_total{state="completed"}' 2

# -- requests that are not a scrape
code() { cl_in "$CL_HUB" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
check_eq "a request with 20 KiB of headers: 431" 431 \
	"$(code -H "X-Pad: $(head -c 20000 /dev/zero | tr '\0' a)" "http://$M/metrics")"
check_eq "POST: 405" 405 "$(code -X POST -d x=1 "http://$M/metrics")"
check_eq "another path: 404" 404 "$(code "http://$M/etc/passwd")"

# -- --metrics-token, on a second controller (no nodes)
M2=198.18.0.1:9465
ctld2() {  # TOKEN FILE
	nsenter --net=/run/netns/"$CL_HUB" -- "$BIN/vhpc-ctld" --listen 198.18.0.1:6827 --state "$T/ctld2" --metrics "$M2" \
		--metrics-token "$1" --log "$T/ctld2.log" &
	CTLD2=$!
	at_exit "kill -9 $CTLD2 2>/dev/null"
}
echo 'tok-0123456789abcdef-metrics' >"$T/token"
chmod 644 "$T/token"
ctld2 "$T/token"
wait "$CTLD2"
check_eq "a token file others may read: vhpc-ctld exits 1" 1 "$?"
check_match "... saying so" "metrics-token $T/token: group or others may read it \(mode 0644\)" "$(cat "$T/ctld2.log")"
chmod 600 "$T/token"
ctld2 "$T/token"
wait_log "$T/ctld2.log" ready 10
check_eq "with a token: no Authorization, 401" 401 "$(code "http://$M2/metrics")"
check_eq "... a wrong token, 401" 401 "$(code -H 'Authorization: Bearer tok-0123456789abcdef-metricX' "http://$M2/metrics")"
check_eq "... the token as basic auth, 401" 401 "$(code -u 'a:tok-0123456789abcdef-metrics' "http://$M2/metrics")"
check_eq "... the token, 200" 200 "$(code -H 'Authorization: Bearer tok-0123456789abcdef-metrics' "http://$M2/metrics")"
kill -9 "$CTLD2"
wait "$CTLD2" 2>/dev/null
done_testing
