#!/usr/bin/env bash
# Cold autoresearch campaigns before and after the device-design search, run
# through the real CLI (amkctl autoresearch on the embedded runner: every trial
# lowered, validated, checked against the eager model on the reference VM and
# timed by the cost model, latencies labelled predicted), one per seed and arm,
# and a table of what they reached (docs/results/search.md).
#
#   scripts/search-before-after.sh [SEED ...]          (default: seeds 1 to 10)
#
# Arms:
#   before  amkctl built from BEFORE_REV (default 813a5dd, the last commit before
#           the search space took in the device lowering and the decode
#           workload): its campaigns tune one decode step at position 0 over the
#           reference's knobs (560 points on small/h200/cpu).
#   after   amkctl built from this working tree, on the same objective (one
#           step at position 0: --prompt-len 0 --gen-len 1) over today's space
#           (the device lowering's and the ring's knobs too).
#   after-workload (only when ARMS names it) today's default workload
#           (512-token prompt, 128 generated tokens, batch 1; three KV lengths
#           checked and timed per trial).
#
# Every other setting is the CLI's default (model proposer, scaled plateau,
# speedup target 3), so the arms differ only in the code and, for "after", the
# flags that keep the objective at position 0. A campaign stops on its own
# plateau or after ITERS experiments (the default's trial included).
#
# Environment: MODEL (small), GPU (h200), ITERS (24), WORKERS (1: one trial at a
# time, so a seed's campaign is the same on every run), ARMS ("before after"),
# BEFORE_REV (813a5dd), OUT (a new temporary directory: the builds, one
# workspace per campaign, results.tsv files and the table), NICE (10),
# TABLE_ONLY (1: no builds or campaigns, only the table from an earlier OUT).
set -euo pipefail

MODEL=${MODEL:-small}
GPU=${GPU:-h200}
ITERS=${ITERS:-24}
WORKERS=${WORKERS:-1}
ARMS=${ARMS:-before after}
BEFORE_REV=${BEFORE_REV:-813a5dd}
NICE=${NICE:-10}
if [ "$#" -gt 0 ]; then seeds=("$@"); else seeds=(1 2 3 4 5 6 7 8 9 10); fi
for s in "${seeds[@]}"; do
	case "$s" in '' | *[!0-9]*) echo "seed $s is not a non-negative integer" >&2; exit 2 ;; esac
done
for a in $ARMS; do
	case "$a" in before | after | after-workload) ;; *) echo "unknown arm $a (before, after, after-workload)" >&2; exit 2 ;; esac
done
case "$ITERS" in '' | *[!0-9]* | 0) echo "ITERS=$ITERS is not a positive integer" >&2; exit 2 ;; esac

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
OUT=${OUT:-$(mktemp -d -t amk-search-before-after.XXXXXX)}
mkdir -p "$OUT/bin"
echo "output: $OUT" >&2

# Builds: "before" from the revision's tree, "after" from the working tree.
if [ "${TABLE_ONLY:-}" = 1 ]; then
	:
elif [[ " $ARMS " == *" before "* ]]; then
	rm -rf "$OUT/src-before"
	mkdir -p "$OUT/src-before"
	git -C "$repo" archive "$BEFORE_REV" | tar -x -C "$OUT/src-before"
	(cd "$OUT/src-before" && nice -n "$NICE" go build -o "$OUT/bin/amkctl-before" ./cmd/amkctl)
fi
if [ "${TABLE_ONLY:-}" != 1 ]; then
	(cd "$repo" && nice -n "$NICE" go build -o "$OUT/bin/amkctl-after" ./cmd/amkctl)
fi

# run_arm ARM SEED: one cold campaign in its own workspace.
run_arm() {
	local arm=$1 seed=$2 bin flags=()
	case "$arm" in
	before) bin="$OUT/bin/amkctl-before" ;;
	after) bin="$OUT/bin/amkctl-after" flags=(--prompt-len 0 --gen-len 1) ;;
	after-workload) bin="$OUT/bin/amkctl-after" ;;
	esac
	local ws="$OUT/$arm/seed-$seed"
	rm -rf "$ws"
	mkdir -p "$ws"
	local start=$SECONDS
	nice -n "$NICE" "$bin" autoresearch "$MODEL" --gpu "$GPU" --device cpu --cold --seed "$seed" \
		--iters "$ITERS" --workers "$WORKERS" "${flags[@]}" --workspace "$ws" >"$ws/stdout.txt" 2>"$ws/stderr.txt"
	echo "$arm seed $seed: $((SECONDS - start)) s" >&2
	cp "$ws"/campaigns/*/results.tsv "$OUT/$arm/seed-$seed.tsv"
}

if [ "${TABLE_ONLY:-}" != 1 ]; then
	for seed in "${seeds[@]}"; do
		for arm in $ARMS; do run_arm "$arm" "$seed"; done
	done
fi

# summarise ARM: one line per seed (best predicted latency among the correct
# trials, the experiment that first reached it, correct/total), then the
# median and worst over the seeds.
summarise() {
	local arm=$1
	for seed in "${seeds[@]}"; do
		awk -F'\t' -v seed="$seed" 'NR > 1 {
			n++
			if ($7 == "PASS") { ok++; if (best == "" || $8 + 0 < best + 0) { best = $8; at = $1 } }
		} END { printf "%s\t%s\t%s\t%d\t%d\n", seed, best, at, ok, n }' "$OUT/$arm/seed-$seed.tsv"
	done
}

{
	echo "| arm | seed | experiments | correct | best (predicted, µs) | experiment that reached it |"
	echo "|---|---:|---:|---:|---:|---:|"
	for arm in $ARMS; do
		summarise "$arm" | while IFS=$'\t' read -r seed best at ok n; do
			echo "| $arm | $seed | $n | $ok/$n | $best | $at |"
		done
	done
	echo
	echo "| arm | campaigns | correct trials | best (predicted, µs): median / worst / best | experiments to the campaign's best: median / max | within 1% of the arm's best (runs) | experiments to within 1%: median / max |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for arm in $ARMS; do
		# the first experiment of each campaign within 1% of the best any
		# campaign of the arm reached ("-" when it never got there)
		armbest=$(summarise "$arm" | sort -t$'\t' -k2,2g | head -1 | cut -f2)
		within=$(for seed in "${seeds[@]}"; do
			awk -F'\t' -v lim="$armbest" 'NR > 1 && $7 == "PASS" && $8 + 0 <= 1.01 * lim { print $1; found = 1; exit }
				END { if (!found) print "-" }' "$OUT/$arm/seed-$seed.tsv"
		done | tr '\n' ' ')
		summarise "$arm" | sort -t$'\t' -k2,2g | awk -F'\t' -v arm="$arm" -v within="$within" '
			{ b[NR] = $2; a[NR] = $3; ok += $4; n += $5 }
			END {
				nw = split(within, w, " "); k = 0
				for (i = 1; i <= nw; i++) if (w[i] != "-") wt[++k] = w[i] + 0
				for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (wt[j] < wt[i]) { t = wt[i]; wt[i] = wt[j]; wt[j] = t }
				wm = "-"; wx = "-"
				if (k > 0) { wm = (k % 2) ? wt[(k + 1) / 2] : (wt[k / 2] + wt[k / 2 + 1]) / 2; wx = wt[k] }
				m = (NR % 2) ? b[(NR + 1) / 2] : (b[NR / 2] + b[NR / 2 + 1]) / 2
				for (i = 1; i <= NR; i++) at[i] = a[i] + 0
				# median and max of the experiments to the best
				for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) if (at[j] < at[i]) { t = at[i]; at[i] = at[j]; at[j] = t }
				ma = (NR % 2) ? at[(NR + 1) / 2] : (at[NR / 2] + at[NR / 2 + 1]) / 2
				printf "| %s | %d | %d/%d (%.1f%%) | %.1f / %.1f / %.1f | %g / %d | %d/%d | %s / %s |\n", arm, NR, ok, n, 100 * ok / n, m, b[NR], b[1], ma, at[NR], k, NR, wm, wx
			}'
	done
} | tee "$OUT/table.md"
