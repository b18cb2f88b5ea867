#!/usr/bin/env bash
# timeout: 60
# vmshm-copybench, the program behind the copy limits in the BTL's README:
# every mode moves real data between the two cores (each checks the last
# buffer it received against the sender's pattern) and prints a positive
# rate; bad options are refused by name.
. "$(dirname "$0")/../lib.sh"

prog=$VHPC_TOP/$B/vmshm/bin/vmshm-copybench
[ -x "$prog" ] || { echo "Bail out! $prog not built (make first)"; exit 1; }
[ "$(nproc)" -ge 2 ] || skip_all "needs 2 CPUs (one worker pinned to each), this machine has $(nproc)"

out=$(timeout 30 "$prog" -r 2 -t 0.01 64K 1M 2>&1)
check_eq "it runs to the end" 0 "$?"
for m in memcpy cma ring splice cma-bi ring-bi splice-bi; do
	for s in 65536 1048576; do
		check_match "$m at $s bytes: a positive GB/s with its range" \
			"^  $m +$s +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+\$" "$(echo "$out" | grep -E "^  $m +$s ")"
		check "... that is not zero" sh -c "echo '$out' | awk '\$1 == \"$m\" && \$2 == $s && \$3 > 0 {f=1} END {exit !f}'"
	done
done
out=$(timeout 30 "$prog" -r 1 -t 0.01 -f 16K -R 64K 200K 3M 2>&1)
check_match "a message of several fragments through a small ring, not a multiple of one" \
	"^  ring-bi +204800 +[0-9.]+ " "$(echo "$out" | grep ring-bi)"
check_match "a message larger than a pipe goes through it in pieces, both ways" \
	"^  splice-bi +3145728 +[0-9.]+ " "$(echo "$out" | grep splice-bi)"

# -d: one core's memcpy at every distance modulo 4 KiB the ring can give
# its copies; each copy's bytes are compared with the source.
out=$(timeout 30 "$prog" -d -r 1 -t 0.0005 8K 2>&1)
check_eq "-d runs to the end" 0 "$?"
check_eq "... with one line per distance: 0-63, then every 64 to 4032" 127 \
	"$(echo "$out" | grep -cE '^  distance +8192 +[0-9]+ +[0-9]+\.[0-9]+$')"
check "... each a positive rate, the last at 4032" sh -c "echo '$out' |
	awk '\$1 == \"distance\" { n++; if (\$4 <= 0) bad = 1; last = \$3 } END { exit bad || last != 4032 }'"
err=$("$prog" -r 0 2>&1); rc=$?
check_eq "-r 0 is refused" 2 "$rc"
check_match "naming the option" "-r: repetitions must be 1..1000, not '0'" "$err"
err=$("$prog" 12Q 2>&1); rc=$?
check_eq "a bad size is refused" 2 "$rc"
check_match "naming it" "not a message size .*'12Q'" "$err"
err=$("$prog" -f 1M -R 64K 2>&1); rc=$?
check_eq "a ring smaller than a fragment is refused" 2 "$rc"

# vmshm-holes: the time the machine takes from a running core (README).
holes=$VHPC_TOP/$B/vmshm/bin/vmshm-holes
out=$(timeout 20 "$holes" -t 0.2 2>&1)
check_eq "vmshm-holes runs to the end" 0 "$?"
check_eq "... with one line per CPU of this process" "$(nproc)" \
	"$(echo "$out" | grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+\.[0-9]+% +[0-9]+\.[0-9]+( +[0-9]+){6}$')"
err=$("$holes" -t 0 2>&1); rc=$?
check_eq "vmshm-holes -t 0 is refused" 2 "$rc"
check_match "naming the option" "-t 0: seconds between 0 and 600" "$err"
err=$("$holes" -T 99999999999999999999 2>&1); rc=$?
check_eq "an out-of-range threshold is refused" 2 "$rc"
check_match "naming it" "-T 99999999999999999999: nanoseconds, 100 to 1000000000" "$err"
err=$("$holes" surplus 2>&1); rc=$?
check_eq "a stray argument is refused" 2 "$rc"
check_match "naming it" "unexpected argument 'surplus'" "$err"
done_testing
