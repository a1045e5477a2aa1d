#!/usr/bin/env bash
# run-2.sh: GPU visit 2, the figures (docs/gpu.md). On the GPU machine, from
# the repository root, with bin/ from `make gpu-bin` carried along:
#
#   scripts/gpu/run-2.sh        # about 9 minutes; writes $OUT/run-2.tar.gz
#
# In priority order, each step bounded (what does not fit is recorded as
# skipped):
#  compile      the default kernel variant alone; the visit stops here if it
#               does not build with the machine's nvcc (lib.sh compile_gate)
#  warmup       every spot kernel variant built in parallel (a fresh machine
#               has an empty AMK_KERNEL_CACHE)
#  copy-bw      the device's device-to-device copy bandwidth (copy_bw.py)
#  eval-*       per-token megakernel time of small and llama-1b at position
#               $POS (median, p10, p90 of interleaved CUDA-event samples,
#               correctness PASS first); roofline.md: GB/s and % of HBM on
#               the bytes a decode step streams (roofline.py)
#  torch-*      PyTorch eager and CUDA-graph decode step on the same weights
#               at the same position $POS (amkctl export-weights ->
#               torch_baseline.py: prompt 1,2,3 then greedy up to $POS), then
#               amkctl check-baseline: the same model, position by position
#  calib        small at the calibration points (scripts/gpu/points/*.json, the
#               ring last: it may need a kernel build); verdicts/ keeps every
#               correct measured verdict for amkctl calibrate
#  autoresearch 8 measured trials of `amkctl autoresearch small --device cuda`
#  tune-gemv    Loop 1 `tune-instruction gemv_tile` (bf16), per-SM bytes/s
#  ncu-small    DRAM bytes of one megakernel launch read by Nsight Compute
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. scripts/gpu/lib.sh
visit_start run-2 500
POS=${POS:-32}
case "$TARGET" in h200) HBM=4800 ;; *) HBM=3350 ;; esac

step env 30 bash -c 'nvidia-smi; nvcc --version | tail -2; ldd $BIN/amkctl | grep -i cuda'
compile_gate
step warmup 150 env AMK_NVCC_ARCH="$ARCH" AMK_KERNEL_VARIANTS=spot AMK_BUILD_JOBS="$(nproc)" \
	build.test -test.run TestKernelsCompileWithoutSpills -test.v -test.timeout 145s
step copy-bw 60 bash -c "python3 scripts/gpu/copy_bw.py > $R/copy-bw.json"
for m in small llama-1b; do
	step "eval-$m" 150 bash -c "amkctl eval $m --gpu $TARGET --device cuda --pos $POS > $R/eval-$m.json"
done
step roofline 20 bash -c "python3 scripts/gpu/roofline.py --hbm-gbs $HBM --copy $R/copy-bw.json \
	--eval small=$R/eval-small.json:$POS --eval llama-1b=$R/eval-llama-1b.json:$POS --json $R/roofline.json > $R/roofline.md"
for m in small llama-1b; do
	# The baseline file of llama-1b is large (128256 logits a position): it
	# stays on the machine; its check report comes back.
	step "torch-$m" 200 bash -c "amkctl export-weights $m --out /tmp/hf-$m &&
	  python3 scripts/gpu/torch_baseline.py --model-dir /tmp/hf-$m --name $m --prompt 1,2,3 --new-tokens $((POS - 2)) \
	    --warmup 20 --replays 200 --out /tmp/baseline-$m.json &&
	  amkctl check-baseline $m --file /tmp/baseline-$m.json --json > $R/check-baseline-$m.json;
	  rc=\$?; python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d[\"timing\"], indent=1))' \
	    /tmp/baseline-$m.json > $R/torch-timing-$m.json; exit \$rc"
done
step calib 90 bash -c "mkdir -p $R/verdicts; grep -l '\"latency_kind\": \"measured-gpu\"' $R/eval-*.json | xargs -r cp -t $R/verdicts/;
	for n in device-default fully-fused tiles-per-sm-2 tiles-per-sm-0 ring; do amkctl eval small --gpu $TARGET --device cuda --pos $POS \
	  --schedule scripts/gpu/points/\$n.json > /tmp/v.json && cp /tmp/v.json $R/verdicts/small-\$n.json; done"
step autoresearch 200 bash -c "amkctl autoresearch small --gpu $TARGET --device cuda --iters 8 --minutes 3.2 --workspace /tmp/amk-ws --json > $R/autoresearch.json;
	rc=\$?; cp -r /tmp/amk-ws/campaigns $R/ 2>/dev/null; exit \$rc"
step tune-gemv 150 bash -c "amkctl tune-instruction gemv_tile --gpu $TARGET --budget 6 --dtype bf16 --results $R/tune-results.tsv > $R/tune-gemv.json"
step ncu-small 150 bash -c "ncu --clock-control none --target-processes all -k amk_megakernel -c 1 \
	--metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --csv \
	amkctl eval small --gpu $TARGET --device cuda --pos 0 > $R/ncu-small.csv"

{
	echo "== roofline (position $POS)"
	cat "$R/roofline.md" 2>/dev/null
	for m in small llama-1b; do
		python3 - "$m" "$R" <<'PY' 2>&1
import json, sys
m, r = sys.argv[1], sys.argv[2]
try:
    t = json.load(open(f"{r}/torch-timing-{m}.json"))
    line = f"torch {m}: eager {t['eager']['median_us']:.1f} us"
    if "cuda_graph" in t:
        line += f", cuda graph {t['cuda_graph']['median_us']:.1f} us"
    c = json.load(open(f"{r}/check-baseline-{m}.json"))
    line += f"; same model: {'PASS' if c['pass'] else 'FAIL'} ({c['argmax_agree']}/{len(c['steps'])} argmax agree)"
    v = json.load(open(f"{r}/eval-{m}.json"))
    if v.get("latency_us") and "cuda_graph" in t:
        line += f"; amk / torch graph = {v['latency_us'] / t['cuda_graph']['median_us']:.3f}"
    print(line)
except Exception as e:
    print(f"torch {m}: {e}")
PY
	done
	python3 - "$R/tune-gemv.json" <<'PY' 2>&1
import json, sys
try:
    s = json.load(open(sys.argv[1]))
    us, b, n = s["best_us"], s["op_bytes"], s["blocks"]
    print(f"tune gemv_tile {s['dtype']}: best {s['best_variant']} {us:.2f} us, {b / us / 1e3:.0f} GB/s over {n} blocks = "
          f"{b / us / 1e3 / n:.2f} GB/s per SM; speedup over the default {s.get('speedup')}")
except Exception as e:
    print(f"tune gemv_tile: {e}")
PY
	grep -h 'dram__bytes\|gpu__time' "$R/ncu-small.csv" 2>/dev/null | tail -4
} >"$R/summary.txt"
visit_end
