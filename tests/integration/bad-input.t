#!/usr/bin/env bash
# timeout: 120
# Bad CLI arguments and bad config files give clear errors (exit 2 for
# usage, the file:line:column for configs) and never start anything.
. "$(dirname "$0")/common.sh"
[ -x "$BIN/vhpc" ] || skip_all "vhpc is not built"

expect_error() {  # DESC STATUS REGEX CMD...
	local desc=$1 want=$2 re=$3; shift 3
	local out rc
	out=$("$@" 2>&1); rc=$?
	if [ "$rc" = "$want" ] && printf '%s' "$out" | grep -qE -- "$re"; then ok "$desc"
	else fail "$desc"; diag "status $rc (want $want), output:" "$out"; fi
}

expect_error "-N not a number" 2 "-N: expected a number of guests in 1..4096, got 'two'" vhpc run -N two -- true
expect_error "-N zero" 2 "-N: expected a number of guests" vhpc run -N 0 -- true
expect_error "-n below -N" 2 "3 ranks cannot fill 4 guests" vhpc run -N 4 -n 3 -- true
expect_error "--mem junk" 2 "--mem: expected a size" vhpc run --mem lots -- true
expect_error "--mem too small" 2 "--mem: expected a size from 64M" vhpc run --mem 1M -- true
expect_error "--driver unknown" 2 "--driver: expected auto, container or kvm, got 'xen'" vhpc run --driver xen -- true
expect_error "--timeout junk" 2 "--timeout: expected seconds or a duration" vhpc run --timeout 5x -- true
expect_error "--map-by unknown" 2 "--map-by: expected node or slot" vhpc run --map-by core -- true
expect_error "--image path traversal" 2 "--image: '../etc' is not an image name" vhpc run --image ../etc -- true
expect_error "no command" 2 "no command" vhpc run -N 2
expect_error "unknown option" 2 "unknown option '--frobnicate'" vhpc run --frobnicate -- true
expect_error "an option without its value says so" 2 "--mem needs a value" vhpc run --mem
expect_error "--user without a value says so" 2 "--user needs a value" vhpc run --user
expect_error "--user with an empty name" 125 "--user: expected a user name or uid, got an empty string" vhpc run --user '' -- true
expect_error "-x NAME of an unset variable" 2 "-x VHPC_TEST_UNSET_$$: VHPC_TEST_UNSET_$$ is not set in your environment" \
	env -u "VHPC_TEST_UNSET_$$" vhpc run -x "VHPC_TEST_UNSET_$$" -- true
expect_error "-x =VALUE" 2 "-x: expected NAME or NAME=VALUE, got '=v'" vhpc run -x =v -- true
expect_error "--bind relative" 2 "--bind: bind source 'data' is not an absolute path" vhpc run --bind data -- true
expect_error "--bind over /usr" 2 "would cover the image's /usr" vhpc run --bind /srv:/usr/x -- true
expect_error "--chdir relative" 2 "--chdir 'x' is not an absolute path" vhpc run --chdir x -- true
expect_error "unknown command" 2 "unknown command 'launch'" vhpc launch
expect_error "huge -N" 2 "-N: expected a number of guests in 1..4096" vhpc run -N 99999999999999999999 -- true

cat >"$T/job.yaml" <<'Y'
name: j
guests: 2
ranks: four
command: [true]
Y
expect_error "job file: wrong type names file:line:col" 2 "job.yaml:3:8: ranks: expected an integer" vhpc run --job "$T/job.yaml"
printf 'name: j\nguests: 2\ncommand: true\n' >"$T/job2.yaml"
expect_error "job file: scalar where a list belongs" 2 "job2.yaml:3:10: command: expected a list of strings" vhpc run --job "$T/job2.yaml"
printf 'name: j\nguests: 2\ncomand: [true]\n' >"$T/job3.yaml"
expect_error "job file: misspelt key" 2 "job3.yaml:3:1: unknown key 'comand'" vhpc run --job "$T/job3.yaml"
printf 'name: j\n  guests: 2\n' >"$T/job4.yaml"
expect_error "job file: YAML syntax" 2 "job4.yaml:2:9: YAML syntax error" vhpc run --job "$T/job4.yaml"
expect_error "job file: missing" 2 "$T/nope.yaml: No such file" vhpc run --job "$T/nope.yaml"

mkdir -p "$T/conf/tuning" "$T/conf/images"
cp "$VHPC_TOP/configs/tuning/hpc.yaml" "$T/conf/tuning/"
printf 'name: c\njob_network:\n  pool: 10.213.0.1/16\n' >"$T/conf/cluster.yaml"
expect_error "cluster file: host bits in pool" 125 "cluster.yaml:3:9: job_network.pool: expected an IPv4 network" \
	env VHPC_CONFIG_DIR="$T/conf" vhpc run -- true
printf 'name: c\njob_network:\n  pool: 10.213.0.0/16\n  prefix: 12\n' >"$T/conf/cluster.yaml"
expect_error "cluster file: prefix out of range" 125 "cluster.yaml:4:11: job_network.prefix: expected an integer in 16..29" \
	env VHPC_CONFIG_DIR="$T/conf" vhpc run -- true
printf 'name: c\njob_network: {pool: 10.213.0.0/16}\ndefaults: {tuning: evil}\n' >"$T/conf/cluster.yaml"
printf 'name: evil\nsysctl:\n  kernel.panic: "1"\n' >"$T/conf/tuning/evil.yaml"
expect_error "tuning: non-network sysctl refused" 125 "sysctl 'kernel.panic': only per-network-namespace keys" \
	env VHPC_CONFIG_DIR="$T/conf" VHPC_RUN_DIR="$T/run" vhpc run --driver container -- true
printf 'name: evil\nsysctl:\n  net.ipv4.tcp_rmem: "1; reboot"\n' >"$T/conf/tuning/evil.yaml"
expect_error "tuning: value that is not numbers refused" 125 "value '1; reboot' is not one or more integers" \
	env VHPC_CONFIG_DIR="$T/conf" VHPC_RUN_DIR="$T/run" vhpc run --driver container -- true

printf 'name: x\npackages: [../../etc]\n' >"$T/img.yaml"
expect_error "image: bad package name" 1 "packages\[0\] '../../etc' is not a Debian package name" vhpc image build "$T/img.yaml"
printf 'name: x\nfiles: [etc/passwd]\n' >"$T/img.yaml"
expect_error "image: relative file" 1 "files\[0\] 'etc/passwd' is not a plain absolute path" vhpc image build "$T/img.yaml"
printf 'name: x\npackages: [no-such-package-vhpc]\n' >"$T/img.yaml"
expect_error "image: package not installed" 1 "no-such-package-vhpc is not installed" vhpc image build "$T/img.yaml"
expect_error "image build without file" 2 "which image file" vhpc image build
# An ordinary user on one machine is told what is missing, not "Permission denied".
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	expect_error "vhpc run by an ordinary user says the local service is missing, and the ways out" 125 \
		'needs the local vhpc service.*vhpc service start.*vhpc-ctld' \
		env VHPC_SERVICE_DIR=/nonexistent setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/vhpc" run -- true
	expect_error "--user by an ordinary user is refused by name" 2 "--user is root's" \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/vhpc" run --user root -- true
else
	skip "vhpc run by an ordinary user: needs root and setpriv to become one"
fi
done_testing
