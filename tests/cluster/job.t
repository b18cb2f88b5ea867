#!/usr/bin/env bash
# timeout: 150
# A 3-node cluster of network namespaces on this machine (vhpc-ctld in a
# hub namespace, one vhpcd per node namespace, one munged): the nodes
# register; `vhpc run` goes through the controller and runs a 2-node,
# 4-rank vhpc-mpibench job whose ranks are on two nodes; exit statuses,
# output, job files, time limits and cancel work through submit, queue,
# wait, output and cancel, with --json for scripts; nothing is left.
. "$(dirname "$0")/../lib.sh"
need_cluster vhpc-mpibench vhpc-imbcheck
CL=vcj$$
. "$(dirname "$0")/cluster-lib.sh"
T=$CL_DIR

cl_net_up 3 && cl_munge_up && cl_ctld_up || { fail "cluster set-up"; cat "$CL_DIR"/*.log; done_testing; exit 1; }
before=$(cl_leftovers)
for i in 1 2 3; do cl_node_up $i || fail "node $i starts"; done
check "three nodes register" cl_wait_nodes_up 3
nodes=$(vc nodes --json | tr -d ' \n')
check_match "nodes report NUMA capacity (one core each here)" '"name":"n1".*"numa":\[\{"os_index":0,"cores":1,"mem":[1-9]' "$nodes"
check_match "nodes report their RDMA devices (none here: an empty list)" '"rdma":\[\]' "$nodes"
check_match "and their underlay address" '"underlay":"198.18.0.12"' "$nodes"
check_match "vhpc nodes prints a table" 'n3 +up +198.18.0.13:6818' "$(vc nodes)"

# -- the main path: vhpc run through the controller, across two nodes
t0=$(date +%s%N)
timeout 100 nsenter --net=/run/netns/$CL_HUB -- vhpc run -N 2 -n 4 --vcpus 1 -- \
	vhpc-mpibench -show-hosts -msglog 0:16 PingPong Sendrecv >"$T/out" 2>"$T/err"
rc=$?
diag "vhpc run -N 2 -n 4 through vhpc-ctld: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check_eq "vhpc run -N 2 -n 4 exits with the job's status" 0 "$rc"
[ $rc = 0 ] || diag "$(tail -20 "$T/err")" "$(tail -20 "$CL_DIR/ctld.log")"
check_match "it says which job it submitted" 'job 1 submitted to vhpc-ctld' "$(cat "$T/err")"
grep '^# rank ' "$T/out" >"$T/ranks"
check_eq "four ranks report where they run" 4 "$(wc -l <"$T/ranks")"
check_eq "two ranks in guest g0" 2 "$(grep -c 'host=g0 ' "$T/ranks")"
check_eq "two ranks in guest g1" 2 "$(grep -c 'host=g1 ' "$T/ranks")"
job=$(vc queue --all --json | tr -d ' \n')
n0=$(echo "$job" | grep -o '"alloc":\[[^]]*' | sed -n 's/.*"guest":0,"node":"\(n[0-9]\)".*/\1/p')
n1=$(echo "$job" | grep -o '"alloc":\[[^]]*' | sed -n 's/.*"guest":1,"node":"\(n[0-9]\)".*/\1/p')
check "the job's guests were on two different nodes ($n0, $n1)" test -n "$n0" -a -n "$n1" -a "$n0" != "$n1"
# Node i owns cpu (i-1) mod 2: each guest's ranks ran on its node's core.
for g in 0 1; do
	eval "node=\$n$g"
	want=$(( (${node#n} - 1) % $(nproc) ))
	check_eq "ranks of g$g run on the core of their node $node" "$want" \
		"$(sed -n "s/.*host=g$g .* cpus=\([0-9,-]*\) .*/\1/p" "$T/ranks" | sort -u)"
done
ns0=$(sed -n 's/.*host=g0 netns=\([0-9]*\).*/\1/p' "$T/ranks" | sort -u)
ns1=$(sed -n 's/.*host=g1 netns=\([0-9]*\).*/\1/p' "$T/ranks" | sort -u)
check "g0 and g1 are in network namespaces of their own" test -n "$ns0" -a -n "$ns1" -a "$ns0" != "$ns1"
check "the IMB tables parse and are sane (PingPong at 2, Sendrecv at 2 and 4)" \
	vhpc-imbcheck -expect PingPong@2 -expect Sendrecv@2 -expect Sendrecv@4 "$T/out"
check_match "the job record says COMPLETED, exit 0, VNI and subnet" \
	'"state":"COMPLETED".*"exit_status":0.*"vni":[0-9]+,"subnet":"10\.213\.' "$job"
check_eq "vhpc output gives the same output again" "$(cat "$T/out")" "$(vc output 1)"

# -- exit status and stderr of a failing command
nsenter --net=/run/netns/$CL_HUB -- vhpc run -N 2 -n 2 --vcpus 1 -- sh -c 'echo to-out; echo to-err >&2; exit 7' \
	>"$T/out" 2>"$T/err"
check_eq "a failing job's exit status is vhpc run's" 7 "$?"
check_match "its stdout and stderr both come back (as one stream)" 'to-out.*to-err|to-err.*to-out' "$(tr '\n' ' ' <"$T/out")"

# -- submit a job file, wait, output, queue, --json
cat >"$T/job.yaml" <<'EOF'
name: hello
guests: 2
ranks: 2
vcpus: 1
timeout: 60
command: [sh, -c, 'echo "hello from $(hostname)"; exit 3']
EOF
id=$(vc submit --json "$T/job.yaml" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
check_match "vhpc submit --json FILE.yaml prints the job id" '^[0-9]+$' "$id"
vc wait "$id"
check_eq "vhpc wait exits with the job's exit status" 3 "$?"
out=$(vc output "$id" | grep '^hello from' | sort)
check_eq "vhpc output: both ranks' lines" "hello from g0 hello from g1" "$(echo $out)"
q=$(vc queue)
check_match "vhpc queue shows the job by name, COMPLETED, exit 3" "^ +$id +root +hello +COMPLETED +2 +2 .*exit 3" "$q"
check_match "vhpc queue --json is a list of job records" "^\[" "$(vc queue --json)"
check_match "vhpc wait --json prints the record" "\"name\":\"hello\"" "$(vc wait --json "$id" | tr -d ' \n')"
check_match "vhpc output --json" "\"output\":\"hello from g" "$(vc output --json "$id" | tr -d '\n')"

# -- time limits
t0=$(date +%s)
id=$(vc submit --json -N 1 --vcpus 1 --timeout 2 -- sleep 60 | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
vc wait "$id" 2>"$T/err"
rc=$? dt=$(( $(date +%s) - t0 ))
check_eq "a job over its time limit: vhpc wait exits 124" 124 "$rc"
check "... stopped within seconds of its limit (${dt}s)" test "$dt" -lt 15
check_eq "... state TIMEOUT" TIMEOUT "$(job_state "$id")"
check_match "... the reason names the limit" 'time limit' "$(cat "$T/err")"

# -- cancel a running job
id=$(vc submit --json -N 2 --vcpus 1 -- sleep 60 | sed -n 's/.*"id": *\([0-9]*\).*/\1/p')
check "a long job runs" wait_state "$id" RUNNING 30
check_match "vhpc cancel" "job $id cancelled" "$(vc cancel "$id")"
vc wait "$id" 2>/dev/null
check_eq "a cancelled job: vhpc wait exits 143" 143 "$?"
check_match "cancelling it again says it has ended" "already ended \(CANCELLED\)" "$(vc cancel "$id" 2>&1)"
for i in 1 2 3; do
	for _ in $(seq 50); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "every node removed the cancelled job's guests" "$before" "$(cl_leftovers)"

# -- bad input to every command gets a clear error
r() { "$@" >"$T/o" 2>&1; echo "$? $(tr '\n' ' ' <"$T/o")"; }
check_match "submit without a command" '^2 .*no command' "$(r vc submit -N 2)"
check_match "submit with a bad guest count" "^2 .*-N: expected a number of guests" "$(r vc submit -N x -- true)"
check_match "submit of a missing job file" '^2 .*nothere.yaml' "$(r vc submit "$T/nothere.yaml")"
check_match "submit with --topology" '^2 .*--topology' "$(r vc submit --topology synthetic:core:2 -- true)"
check_match "cancel of a non-number" "^2 .*'abc' is not a job id" "$(r vc cancel abc)"
check_match "wait without an id" '^2 .*which job' "$(r vc wait)"
check_match "output of two jobs" '^2 .*one job at a time' "$(r vc output 1 2)"
check_match "output of an unknown job" '^125 .*no job 9999' "$(r vc output 9999)"
check_match "cancel of an unknown job" '^125 .*no job 9999' "$(r vc cancel 9999)"
check_match "wait of an unknown job" '^125 .*no job 9999' "$(r vc wait 9999)"
check_match "queue with an unknown flag" "^2 .*unknown argument '--bogus'" "$(r vc queue --bogus)"
check_match "nodes with an argument" "^2 .*unknown argument 'x'" "$(r vc nodes x)"
check_match "a malformed VHPC_CONTROLLER" '^2 .*VHPC_CONTROLLER .*HOST:PORT' "$(VHPC_CONTROLLER=nocolon r vc queue)"
check_match "an unreachable controller" '^125 .*cannot connect to 198.18.0.1:1' "$(VHPC_CONTROLLER=198.18.0.1:1 r vc queue)"
printf 'name: c\njob_network: { pool: 10.213.0.0/16 }\n' >"$T/nocontroller.yaml"
check_match "no cluster configured: queue says how to configure one" '^2 .*no cluster is configured' \
	"$(VHPC_CONTROLLER= VHPC_CLUSTER=$T/nocontroller.yaml r vc queue)"
check_match "vhpc-ctld with a bad option value" '^2 .*heartbeat-interval.*100\.\.600000' "$(r vhpc-ctld --heartbeat-interval 5)"
check_match "vhpc-ctld without a listen address" '^2 .*--listen' "$(VHPC_CLUSTER=$T/nocontroller.yaml r vhpc-ctld --state "$T/x")"
check_match "vhpcd without --listen" '^2 .*--listen' "$(r vhpcd)"
check_match "vhpcd --topology without --simulate" '^2 .*only with --simulate' "$(r vhpcd --listen 198.18.0.1:9 --topology synthetic:core:4)"
check_match "vhpcd --cpus with a cpu the machine lacks" 'not in this topology' "$(r vhpcd --listen 198.18.0.1:9 --controller 1.2.3.4:5 --cpus 4000)"

check "the controller is still up" kill -0 "$CTLD_PID"
for i in 1 2 3; do cl_node_kill $i; done
cl_ctld_kill
check_eq "nothing is left of any job" "$before" "$(cl_leftovers)"
done_testing
