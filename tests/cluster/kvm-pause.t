#!/usr/bin/env bash
# timeout: 400
# needs: hardware-virtualization
# lab-prepare: tests/kvm/compact-images
# The kvm driver's checkpoint ops on a 2-node cluster (issue 36; in the
# virtualization lab, nested/TCG), the messages sent to the nodes as
# vhpc-ctld sends them (scheduler/PROTOCOL.md):
#  - job_pause stops both guests' vCPUs (vhpc-hv says "paused"; no output
#    arrives while they are), again is no error;
#  - job_checkpoint check, asked while the guests run: checkable (vhpc-hv's
#    snapshot_check: every device of a guest, its NIC and vsock too, can
#    be saved), and the guests still run (a refusal needs a device vhpc-hv
#    cannot save: a shared folder's virtio-fs or a --vfio function, which
#    this job has not; hv/snapshot.t and tests/kvm/test_kvm_ckpt.c cover
#    refusals);
#  - job_resume lets them run on: the job ends with every line of both
#    guests once, and nothing of it is left.
# Saving and restoring a guest is not run here: tests/kvm/test_kvm_ckpt.c
# covers the driver's side of both, tests/hv/snapshot*.t vhpc-hv's.
. "$(dirname "$0")/../lib.sh"
CL=vck$$
. "$(dirname "$0")/kvm-lib.sh"
WP=$VHPC_TOP/$B/testbin/wireprobe
HVCTL=$VHPC_TOP/$B/bin/vhpc-hvctl
[ -x "$WP" ] || { echo "Bail out! $WP is not built (make tests)"; exit 1; }
TICKS='for i in $(seq 12); do echo "$(hostname) tick $i"; sleep 1; done'
wp() { cl_in "$CL_HUB" "$WP" "$@" 2>&1; }
msg() {  # TYPE NODE JOB [EXTRA JSON FIELDS]
	wp send "198.18.0.1$2:6818" "{\"v\":3,\"type\":\"$1\",\"node\":\"n$2\",\"job\":$3${4:+,$4}}"
}
has_output() { [ "$(job_field "$1" output_bytes)" -gt 0 ] 2>/dev/null; }
# vhpc-hv's state of every guest of job J: "paused paused "
hv_states() {
	local c
	for c in "$CL_DIR"/run-n*/jobs/"$1"x*/kvm*/hv/ctl; do
		"$HVCTL" "$c" status 2>&1 | grep -o '"state": *"[a-z]*"' | sed 's/.*"\([a-z]*\)"$/\1 /' | tr -d '\n'
	done
}

J=$(sub "${KVM[@]}" -- sh -c "$TICKS")
check_match "the job is accepted" '^[0-9]+$' "$J"
check "job $J runs" wait_state "$J" RUNNING 200
check "some of its output has arrived" poll_until 60 has_output "$J"

check_match "job_checkpoint check: checkable (NIC and vsock saved by vhpc-hv)" \
	'"type":"checkable"' \
	"$(msg job_checkpoint 1 "$J" '"ckpt":"'"$J"'.1","check":true')"
check_eq "... and nothing was paused by it" "running running " "$(hv_states "$J")"

check_match "job_pause on node 1: paused" '"type":"paused"' "$(msg job_pause 1 "$J")"
check_match "job_pause on node 2: paused" '"type":"paused"' "$(msg job_pause 2 "$J")"
check_eq "vhpc-hv says both guests are paused" "paused paused " "$(hv_states "$J")"
b0=$(job_field "$J" output_bytes)
sleep 3
check_eq "no output while paused" "$b0" "$(job_field "$J" output_bytes)"
check_match "job_pause again: paused (idempotent)" '"type":"paused"' "$(msg job_pause 1 "$J")"

check_match "job_resume on node 1: resumed" '"type":"resumed"' "$(msg job_resume 1 "$J")"
check_match "job_resume on node 2: resumed" '"type":"resumed"' "$(msg job_resume 2 "$J")"
check_eq "vhpc-hv says both guests run" "running running " "$(hv_states "$J")"
vc wait "$J"
check_eq "the job completes with exit status 0" 0 "$?"
vc output "$J" >"$T/j1.out"
check "its output is whole: every line of both guests, each once" cl_ticks_ok "$T/j1.out"
for i in 1 2; do
	for _ in $(seq 100); do [ -z "$(ls "$CL_DIR/run-n$i/jobs" 2>/dev/null)" ] && break; sleep 0.1; done
done
check_eq "nothing is left of the job" "$before" "$(cl_leftovers)"
done_testing
