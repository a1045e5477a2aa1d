#!/usr/bin/env bash
# run-1.sh: GPU visit 1, first light (docs/gpu.md). On the GPU machine, from
# the repository root, with bin/ from `make gpu-bin` carried along:
#
#   scripts/gpu/run-1.sh        # about 9 minutes; writes $OUT/run-1.tar.gz
#
# 1. env: nvidia-smi, nvcc, libcuda.so.1 resolution (ldd), tool versions.
#    compile: the default kernel variant alone with the machine's nvcc; if it
#    does not build, the visit stops here (about a minute in) with nvcc's
#    errors printed last (lib.sh compile_gate).
# 2. warmup: every spot variant of the kernels built in parallel on all
#    cores into the visit's AMK_KERNEL_CACHE (nvcc's resource report; a
#    spill or a C++ error with the device's nvcc fails this step only).
# 3. launch: EMBED -> RMSNORM -> GEMV -> ARGMAX against host math (fp32,
#    bf16) and the in-process watchdog demo (kernels/launch).
# 4. gpu: the trial pipeline through the supervised child: toy, toy-2L,
#    small at positions 0 and 5 against the reference VM; greedy decode of 16
#    tokens against the eager oracle (whole-window and split-KV); the
#    watchdog demo through the child (timeout verdict, then the same child
#    serves the next trial) (kernels/gpu).
# 5. eval-*: llama-1b at 0 and 5, and position 255 (max_seq 256) for every
#    model, each an `amkctl eval --device cuda` verdict (JSON in the archive).
# 6. generate-llama-1b: 16 greedy tokens on the GPU, --verify against eager.
# Steps run in this order, each bounded; what does not fit is recorded as
# skipped. The step table prints last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. scripts/gpu/lib.sh
visit_start run-1 500

step env 60 bash -c 'nvidia-smi; echo; nvcc --version; echo; ldd $BIN/amkctl $BIN/gpu.test; echo; nproc; free -g; df -h /tmp;
  python3 -c "import torch, transformers; print(\"torch\", torch.__version__, \"transformers\", transformers.__version__)";
  ncu --version | tail -1'
compile_gate
step warmup 200 env AMK_NVCC_ARCH="$ARCH" AMK_KERNEL_VARIANTS=spot AMK_BUILD_JOBS="$(nproc)" \
	build.test -test.run TestKernelsCompileWithoutSpills -test.v -test.timeout 195s
step launch 90 launch.test -test.run CUDA -test.v -test.timeout 85s
step gpu 240 gpu.test -test.run CUDA -test.v -test.timeout 235s
for mp in llama-1b:0 llama-1b:5 toy:255 toy-2L:255 small:255 llama-1b:255; do
	m=${mp%:*} p=${mp#*:}
	step "eval-$m-$p" 150 bash -c "amkctl eval $m --gpu $TARGET --device cuda --pos $p > $R/eval-$m-$p.json"
done
step generate-llama-1b 150 amkctl generate llama-1b --gpu "$TARGET" --device cuda --prompt-ids 1,2,3 --max-tokens 16 --verify

# Summary: each verdict's correctness and latency.
for f in "$R"/eval-*.json; do
	[ -s "$f" ] || continue
	python3 - "$f" >>"$R/summary.txt" 2>&1 <<'PY'
import json, sys, os
v = json.load(open(sys.argv[1]))
print(f"{os.path.basename(sys.argv[1])}: valid={v.get('valid')} correct={v.get('correct')} "
      f"latency_us={v.get('latency_us')} kind={v.get('latency_kind')} max_abs_err={v.get('max_abs_err')}")
PY
done
grep -hE '^(--- |ok|FAIL|PASS)' "$R"/launch.log "$R"/gpu.log "$R"/warmup.log 2>/dev/null >>"$R/summary.txt"
visit_end
