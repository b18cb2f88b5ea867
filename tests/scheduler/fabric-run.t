#!/usr/bin/env bash
# timeout: 60
# `vhpc run` on one machine (the embedded scheduler) claims the fabric and
# functions itself (lib/fabric_local.c): --rdma where this machine has no
# fabric, and --device for functions it does not have, are refused before
# anything of the job is made, saying what is missing and where to set it.
. "$(dirname "$0")/../lib.sh"
need_root
need_built vhpc

T=$(mktemp -d /tmp/vhpct-fabrun.XXXXXX)
at_exit "rm -rf '$T'"
export VHPC_RUN_DIR=$T/run VHPC_STATE_DIR=$T/state
printf 'name: t\njob_network:\n  pool: 10.213.0.0/16\n' >"$T/none.yaml"
cat >"$T/fab.yaml" <<EOF2
name: t
job_network:
  pool: 10.213.0.0/16
fabric:
  mode: roce
  link: vhpcnosuch0
  vlans: 100-101
  pool: 10.214.0.0/24
  prefix: 28
  nodes:
    - name: $(hostname)
      pci:
        - { addr: "0000:ff:1f.7", class: gpu }
EOF2
run() { (cd "$T" && VHPC_CLUSTER=$1 "$BIN/vhpc" run "${@:2}" -- true 2>&1; echo "rc=$?"); }

out=$(run "$T/none.yaml" --rdma)
check_match "--rdma on a cluster without a fabric is refused, naming fabric.mode" \
	"--rdma: node $(hostname) has no fabric \\(the cluster file's fabric.mode is none" "$out"
check_match "... with a failure status" 'rc=[1-9]' "$out"
out=$(run "$T/fab.yaml" --rdma)
check_match "--rdma where the cluster file's link does not exist here is refused" \
	"has no fabric \\(its fabric link does not exist here\\)" "$out"
out=$(run "$T/fab.yaml" --device gpu)
check_match "--device for a function this machine does not have is refused" \
	"1 gpu function per guest: node $(hostname) has too few that exist and are free" "$out"
out=$(run "$T/fab.yaml" --device ../../sys:1)
check_match "--device with path characters is refused naming the flag" "--device: device '../../sys:1': class" "$out"
check_eq "nothing of a job was made in the run dir" "" "$(find "$T/run" -mindepth 1 -not -path "$T/run/fabric*" 2>/dev/null)"
check "no fabric lock is held afterwards" sh -c "! fuser '$T'/run/fabric/* 2>/dev/null"
done_testing
