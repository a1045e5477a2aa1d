#!/usr/bin/env bash
# visit.sh: a GPU visit in one device-tool call (docs/gpu.md, docs/gpu-checklist.md).
#
#   scripts/gpu/visit.sh A                      # call A: first light and the headline figure
#   VISIT_SECONDS=420 scripts/gpu/visit.sh B    # call B: the second set of figures
#
# (PHASE=A or PHASE=B in the environment works too.) On the GPU machine, from
# the repository root, with bin/ from `make gpu-bin` carried (the binaries and
# bin/kernels-nvcc12.tar.xz, the visit's kernels compiled here for sm_90a).
# GPU time comes in windows of 15 minutes in all, machine start included:
# call A with timeout_s 300; give the machine back; call B only if the
# budget left allows it, with VISIT_SECONDS = its timeout_s.
#
# VISIT_SECONDS is the command's time (A: 300): the visit ends its steps 30 s
# before, packs and prints. Every step is bounded (at most 90 s, less when
# the deadline is nearer), independent of the others, and ordered by what it
# tells; the archive $OUT/visit-PHASE.tar.gz is rewritten after every step,
# so a command killed at its limit still returns everything done so far.
# $OUT/kernels-device.tar.xz (or .gz) holds the kernels the device's nvcc
# built: put it into bin/ and call B (or a rerun of A) carries it.
#
# Call A, foreground (GPU steps in turn):
#   env             nvidia-smi, nvcc, libcuda resolution, cores, memory
#   eval-toy-32     first light: toy at position 32 against the reference VM
#   eval-llama-1b-32  the headline: llama-1b (bf16) at 32, the device default
#                   point: correctness (error as a share of the tolerance,
#                   top-1) and per-token time (median, p10, p90)
#   launch          launch.test: EMBED -> RMSNORM -> GEMV -> ARGMAX against host
#                   maths, the in-process watchdog demo
#   eval-small-32, eval-toy-2L-32
#   gpu             gpu.test: the trial pipeline through the supervised child,
#                   greedy decode, the watchdog ending a deadlocking program
#                   with a timeout verdict and the same child serving the next
#   eval-*-255      each model near max_seq (256)
# background, while those run: copy-bw, then the PyTorch eager and CUDA-graph
# baseline of llama-1b (amkctl export-weights -> torch_baseline.py ->
# amkctl check-baseline), each timing under the GPU lock; and the device's
# nvcc building the visit's kernels when none are carried (warmup-visit),
# then every one-knob variant (warmup-spot), on the CPUs.
#
# Call B, foreground: small and llama-1b at the device default and the fully
# fused point; roofline; small at the calibration points (tiles per SM 2 and
# 0, the streaming ring); ncu's DRAM bytes of one launch; tune-instruction
# gemv_tile; a short autoresearch; background: copy-bw and the PyTorch
# baselines of small and llama-1b again (the figures come from one run), the
# spot variants still missing.
#
# AMK_VISIT_DEVICE=emu rehearses the whole visit on a machine without a GPU:
# the evals run on the CPU emulator (--device emu), the models are toy and
# toy-2L (VISIT_MODELS), and every step that needs a GPU (python, ncu, the
# cuda tests) is recorded as "skipped: no GPU". VISIT_TINY=1 (the script
# test) runs env, one toy eval and the packing only. On the emulator the
# evals check position VISIT_EMU_POS (8), not POS (32).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
PHASE=${1:-${PHASE:-A}}
case "$PHASE" in
A | B) ;;
*)
	echo "visit.sh: want phase A or B, not '$PHASE'" >&2
	exit 2
	;;
esac
VISIT_SECONDS=${VISIT_SECONDS:-300}
if ! [ "$VISIT_SECONDS" -ge 60 ] 2>/dev/null; then
	echo "visit.sh: VISIT_SECONDS=$VISIT_SECONDS: want at least 60 (the command's time in seconds)" >&2
	exit 2
fi
DEVICE=${AMK_VISIT_DEVICE:-cuda}
case "$DEVICE" in cuda | emu) ;; *)
	echo "visit.sh: AMK_VISIT_DEVICE=$DEVICE: want cuda or emu" >&2
	exit 2
	;;
esac
export DEVICE
. scripts/gpu/lib.sh
visit_start "visit-$PHASE" $((VISIT_SECONDS - 30))
# Position 32 on the GPU (at 0, summation-order noise sits near the bf16
# tolerance); the emulator walks every position before it, slowly: 8 there.
POS=${POS:-32}
[ "$DEVICE" = emu ] && POS=${VISIT_EMU_POS:-8}
# Host-side bounds of the launcher's requests: a hang ends a step with a
# timeout verdict in tens of seconds (kernels/gpu OptionsFromEnv).
export AMK_LOAD_TIMEOUT=${AMK_LOAD_TIMEOUT:-80s} AMK_RUN_TIMEOUT=${AMK_RUN_TIMEOUT:-30s} AMK_TIME_TIMEOUT=${AMK_TIME_TIMEOUT:-40s}
case "$TARGET" in h200) HBM=4800 ;; *) HBM=3350 ;; esac
if [ "$DEVICE" = emu ]; then
	MODELS=${VISIT_MODELS:-toy toy-2L}
	HEADLINE=${MODELS##* }
else
	MODELS=${VISIT_MODELS:-toy llama-1b small toy-2L}
	HEADLINE=llama-1b
fi
POINTS=scripts/gpu/points

# gpu_step NAME LIMIT CMD...: a step that needs a GPU (skipped on the emulator).
gpu_step() {
	if [ "$DEVICE" = emu ]; then
		skip "$1" "no GPU"
		return 0
	fi
	step "$@"
}

# eval_step MODEL POS [POINT]: amkctl eval under the GPU lock, the verdict in
# $R/eval-MODEL-POS[-POINT].json.
eval_step() {
	local m=$1 p=$2 pt=${3:-} name="eval-$1-$2" sched=()
	if [ -n "$pt" ]; then
		name="$name-$pt"
		sched=(--schedule "$POINTS/$pt.json")
	fi
	step "$name" 90 flock -w 120 "$GPU_LOCK" bash -c 'out=$1; shift; amkctl "$@" >"$out"' _ "$R/$name.json" \
		eval "$m" --gpu "$TARGET" --device "$DEVICE" --pos "$p" "${sched[@]}"
}

# warmup SET: the device's nvcc compiles a variant set into AMK_KERNEL_CACHE
# (every variant published as it finishes; a compile that outlives the step
# is killed and reported as a timeout, not as an error), then the packing of
# what it built.
warmup() {
	local set=$1
	if [ -z "${AMK_NVCC:-}" ]; then
		skip "warmup-$set" "no nvcc on this machine"
		return 0
	fi
	step "warmup-$set" 90 env AMK_NVCC_ARCH="$ARCH" AMK_KERNEL_VARIANTS="$set" AMK_BUILD_JOBS="${VISIT_BUILD_JOBS:-$(nproc)}" \
		build.test -test.run '^TestKernelsCompileWithoutSpills$' -test.v -test.timeout 600s
	pack_kernels
}

# pack_kernels: the cubins this visit's nvcc built (AMK_KERNEL_CACHE), as one
# file for the next call to carry in bin/, kept under the device tool's 16 MiB
# a file (xz where there is one; newest modules dropped first past 15 MiB).
pack_kernels() {
	(
		flock -w 30 9 || exit 0
		cd "$AMK_KERNEL_CACHE" 2>/dev/null || exit 0
		mapfile -t mods < <(ls -t v1/obj/*.cubin 2>/dev/null | tac)
		[ ${#mods[@]} -gt 0 ] || exit 0
		local z=gz c=-czf
		command -v xz >/dev/null && z=xz c=-cJf
		while [ ${#mods[@]} -gt 0 ]; do
			local files=()
			for m in "${mods[@]}"; do files+=("$m" "${m%.cubin}.json"); done
			tar $c "$OUT/.kernels-device.tar.$z" "${files[@]}" 2>/dev/null
			[ "$(stat -c %s "$OUT/.kernels-device.tar.$z")" -le $((15 * 1048576)) ] && break
			unset 'mods[${#mods[@]}-1]'
		done
		mv -f "$OUT/.kernels-device.tar.$z" "$OUT/kernels-device.tar.$z"
		echo "kernels-device.tar.$z: ${#mods[@]} modules" >"$R/kernels-device.txt"
	) 9>"$(dirname "$R")/kernels.lock"
}

# torch_step MODEL: the PyTorch eager and CUDA-graph decode step on amk's
# exported weights at position $POS (the timing under the GPU lock), then
# the same model position by position (amkctl check-baseline). The baseline
# file of llama-1b is large (128256 logits a position): it stays here; the
# timing and the check report come back.
torch_step() {
	local m=$1
	gpu_step "torch-$m" 90 bash -c '
	  m=$1 pos=$2 r=$3
	  [ -d /tmp/hf-$m ] || amkctl export-weights $m --out /tmp/hf-$m || exit 1
	  flock -w 120 $GPU_LOCK python3 scripts/gpu/torch_baseline.py --model-dir /tmp/hf-$m --name $m --prompt 1,2,3 \
	    --new-tokens $((pos - 2)) --warmup 20 --replays 200 --out /tmp/baseline-$m.json || exit 1
	  python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))[\"timing\"], indent=1))" \
	    /tmp/baseline-$m.json >$r/torch-timing-$m.json
	  amkctl check-baseline $m --file /tmp/baseline-$m.json --json >$r/check-baseline-$m.json' _ "$m" "$POS" "$R"
}
VISIT_SUMMARY="python3 scripts/gpu/visit_summary.py $R --pos $POS --hbm-gbs $HBM"

if [ "${VISIT_TINY:-0}" = 1 ]; then
	step env 20 bash -c 'uname -a; nproc; command -v nvcc g++ python3 xz amkctl'
	gpu_step copy-bw 30 true
	eval_step toy "$POS"
	exit 0
fi

if [ "$DEVICE" = cuda ]; then
	step env 20 bash -c 'nvidia-smi; echo; nvcc --version | tail -2; echo; ldd $BIN/amkctl | grep -i cuda; nproc; free -g | head -2; df -h /tmp | tail -1; ncu --version 2>&1 | tail -1'
else
	step env 20 bash -c 'uname -a; nproc; free -g | head -2; echo "nvcc: ${AMK_NVCC:-none}"; ${AMK_NVCC:-false} --version 2>&1 | tail -2; g++ --version | head -1'
fi

# Background, on the CPUs: the device's nvcc. When the visit's kernels were
# carried (bin/kernels-*), it builds the one-knob variants only.
(
	if ! find "$AMK_KERNEL_PREBUILT" -name '*.cubin' | grep -q .; then
		warmup visit
	fi
	warmup spot
) >>"$R/background.txt" 2>&1 &
BG_PIDS+=($!)

# Background, on the GPU between the foreground's measurements: copy
# bandwidth and the PyTorch baselines.
(
	gpu_step copy-bw 30 flock -w 120 "$GPU_LOCK" bash -c "python3 scripts/gpu/copy_bw.py > $R/copy-bw.json"
	if [ "$PHASE" = A ]; then
		torch_step llama-1b
	else
		torch_step small
		torch_step llama-1b
	fi
) >>"$R/background.txt" 2>&1 &
BG_PIDS+=($!)

if [ "$PHASE" = A ]; then
	first=${MODELS%% *}
	eval_step "$first" "$POS"
	[ "$HEADLINE" != "$first" ] && eval_step "$HEADLINE" "$POS" device-default
	gpu_step launch 60 launch.test -test.run CUDA -test.v -test.timeout 55s
	for m in $MODELS; do
		[ "$m" = "$first" ] || [ "$m" = "$HEADLINE" ] || eval_step "$m" "$POS"
	done
	gpu_step gpu 90 gpu.test -test.run CUDA -test.v -test.timeout 85s
	for m in $MODELS; do
		if [ "$DEVICE" = emu ]; then
			skip "eval-$m-255" "the emulator walks every position up to 255 (minutes a model here)"
		else
			eval_step "$m" 255
		fi
	done
else
	for m in $MODELS; do
		[ "$DEVICE" = emu ] || [ "$m" = small ] || [ "$m" = llama-1b ] || continue
		eval_step "$m" "$POS" device-default
		eval_step "$m" "$POS" fully-fused
	done
	for pt in tiles-per-sm-2 tiles-per-sm-0 ring; do
		eval_step "${HEADLINE/llama-1b/small}" "$POS" "$pt"
	done
	gpu_step ncu-small 90 flock -w 120 "$GPU_LOCK" bash -c "ncu --clock-control none --target-processes all -k amk_megakernel -c 1 \
	  --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --csv \
	  amkctl eval small --gpu $TARGET --device cuda --pos $POS > $R/ncu-small.csv"
	gpu_step tune-gemv 90 flock -w 120 "$GPU_LOCK" bash -c "amkctl tune-instruction gemv_tile --gpu $TARGET --budget 6 --dtype bf16 \
	  --results $R/tune-results.tsv > $R/tune-gemv.json"
	workload=""
	[ "$DEVICE" = emu ] && workload="--prompt-len 16 --gen-len 4" # the emulator's launches are slow
	step autoresearch 90 flock -w 120 "$GPU_LOCK" bash -c "amkctl autoresearch ${HEADLINE/llama-1b/small} --gpu $TARGET --device $DEVICE --iters 4 --minutes 1.2 \
	  $workload --workspace /tmp/amk-ws-$PHASE --json > $R/autoresearch.json; rc=\$?; cp -r /tmp/amk-ws-$PHASE/campaigns $R/ 2>/dev/null; exit \$rc"
fi

bg_wait
pack_kernels
if [ "$PHASE" = B ]; then
	# verdicts/: the correct, measured verdicts, for amkctl calibrate here.
	mkdir -p "$R/verdicts"
	grep -l '"latency_kind": "measured-gpu"' "$R"/eval-*.json 2>/dev/null | xargs -r grep -l '"correct": true' | xargs -r cp -t "$R/verdicts/"
fi
