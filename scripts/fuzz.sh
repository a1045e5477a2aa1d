#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each (default 5s).
set -euo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
status=0
while IFS= read -r file; do
	pkg=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
		echo "fuzz $pkg $target ($fuzztime)"
		if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" >/tmp/amk-fuzz.$$.log 2>&1; then
			cat /tmp/amk-fuzz.$$.log
			status=1
		fi
	done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' . | sort)
rm -f /tmp/amk-fuzz.$$.log
exit $status
