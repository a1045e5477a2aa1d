#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each (default 5s).
# Further arguments go to `go test` (the smoke run passes -fuzzminimizetime=0:
# minimising new interesting inputs as a 5 s budget runs out makes the engine
# stop with "context deadline exceeded"; a crasher is still written, just not
# minimised).
#
# FUZZ_JOBS targets run at once (default: the number of CPUs), each with one
# fuzzing worker (-parallel=1), so that the CPUs are busy either way but the
# run takes 1/FUZZ_JOBS of the time of one target after another.
#
# A failure that wrote no failing input ("context deadline exceeded" from the
# fuzzing engine itself when the machine is loaded as the time runs out) is a
# hiccup of the engine, not a finding: that target is run once more. A real
# finding always names its input under testdata/fuzz and fails the run.
set -euo pipefail
fuzztime=${1:-5s}
shift || true
cd "$(dirname "$0")/.."
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# run_one PKG TARGET: fuzzes one target, its log in $logs/PKG.TARGET.log,
# and leaves $logs/PKG.TARGET.failed when it failed.
run_one() {
	local pkg=$1 target=$2 log
	log="$logs/$(echo "${pkg#./}" | tr / _).$target"
	run() {
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" -parallel=1 ${extra[@]+"${extra[@]}"} "$pkg" >"$log.log" 2>&1
	}
	echo "fuzz $pkg $target ($fuzztime)"
	if run; then
		return 0
	fi
	if ! grep -q "Failing input written" "$log.log"; then
		echo "  engine hiccup without a failing input; running $target again"
		if run; then
			return 0
		fi
	fi
	touch "$log.failed"
}

extra=("$@")
targets=()
while IFS= read -r file; do
	pkg=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
		targets+=("$pkg $target")
	done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' . | sort)

running=0
for t in "${targets[@]}"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
	# shellcheck disable=SC2086
	run_one $t &
	running=$((running + 1))
done
wait

status=0
for failed in "$logs"/*.failed; do
	[ -e "$failed" ] || continue
	cat "${failed%.failed}.log"
	status=1
done
exit $status
