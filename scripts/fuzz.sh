#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each (default 5s).
# Further arguments go to `go test` (the smoke run passes -fuzzminimizetime=0:
# minimising new interesting inputs as a 5 s budget runs out makes the engine
# stop with "context deadline exceeded"; a crasher is still written, just not
# minimised).
#
# A failure that wrote no failing input ("context deadline exceeded" from the
# fuzzing engine itself when the machine is loaded as the time runs out) is a
# hiccup of the engine, not a finding: that target is run once more. A real
# finding always names its input under testdata/fuzz and fails the run.
set -euo pipefail
fuzztime=${1:-5s}
shift || true
extra=("$@")
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
run_target() {
	go test -run='^$' -fuzz="^${2}\$" -fuzztime="$fuzztime" ${extra[@]+"${extra[@]}"} "$1" >"$log" 2>&1
}
while IFS= read -r file; do
	pkg=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
		echo "fuzz $pkg $target ($fuzztime)"
		if run_target "$pkg" "$target"; then
			continue
		fi
		if ! grep -q "Failing input written" "$log"; then
			echo "  engine hiccup without a failing input; running $target again"
			if run_target "$pkg" "$target"; then
				continue
			fi
		fi
		cat "$log"
		status=1
	done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' . | sort)
exit $status
