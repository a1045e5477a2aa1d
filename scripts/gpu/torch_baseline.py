#!/usr/bin/env python3
"""PyTorch baseline of an amk model on the same weights: HuggingFace
LlamaForCausalLM in bf16 with a static KV cache, one decode step timed eager
and replayed as a CUDA graph.

Input: a directory that `amkctl export-weights MODEL --out DIR` wrote
(config.json + model.safetensors, amk's seeded weights under HF key names).

Output (--out): an amk-baseline-v1 JSON file (package baseline): the token fed
at every position from 0 (the prompt, then this implementation's greedy
choices) with the logits there, and the timing report. `amkctl check-baseline
MODEL --file OUT` replays the same inputs through amk's eager oracle and
compares the logits, so the timing is known to be of the same model.

Timing: after the decode, one step at the next position is timed eager
(--warmup launches, then --replays steps, each between two CUDA events) and
then captured as a CUDA graph and replayed the same way; median, p10, p90.
Every timed step writes the same KV row, so the state stays the same.

Needs torch and transformers (the GPU machine's image has both); no network.
"""
import argparse
import json
import math
import statistics
import sys
import time
import traceback


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", required=True, help="directory written by amkctl export-weights")
    p.add_argument("--name", required=True, help="the amk model name (recorded in the file)")
    p.add_argument("--prompt", default="1,2,3", help="comma-separated prompt token ids")
    p.add_argument("--new-tokens", type=int, default=16, help="greedy tokens to generate")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--replays", type=int, default=200)
    p.add_argument("--out", required=True, help="the amk-baseline-v1 JSON file to write")
    return p.parse_args()


def percentile(xs, q):
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(us):
    return {"n": len(us), "median_us": statistics.median(us), "p10_us": percentile(us, 0.10),
            "p90_us": percentile(us, 0.90), "mean_us": statistics.fmean(us), "min_us": min(us)}


def make_static_cache(transformers, model, max_len, device, dtype):
    """StaticCache's constructor changed across transformers versions: try the known forms."""
    StaticCache = transformers.StaticCache
    attempts = [
        dict(config=model.config, max_batch_size=1, max_cache_len=max_len, device=device, dtype=dtype),
        dict(config=model.config, max_cache_len=max_len),
        dict(config=model.config, batch_size=1, max_cache_len=max_len, device=device, dtype=dtype),
    ]
    errors = []
    for kw in attempts:
        try:
            return StaticCache(**kw)
        except TypeError as e:
            errors.append(str(e))
    raise RuntimeError("no StaticCache signature fits: " + " | ".join(errors))


def main():
    args = parse_args()
    import torch
    import transformers

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    prompt = [int(t) for t in args.prompt.split(",") if t.strip()]
    if not prompt or args.new_tokens < 1:
        sys.exit("want a prompt and --new-tokens >= 1")

    report = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "transformers": transformers.__version__, "errors": []}
    t0 = time.time()
    try:
        model = transformers.LlamaForCausalLM.from_pretrained(args.model_dir, dtype=torch.bfloat16)
    except TypeError:  # transformers before `dtype=`
        model = transformers.LlamaForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.bfloat16)
    model = model.to(dev).eval()
    cfg = model.config
    report["load_s"] = time.time() - t0
    max_len = int(cfg.max_position_embeddings)
    n_pos = len(prompt) + args.new_tokens - 1
    if n_pos + 1 > max_len:
        sys.exit(f"prompt + new tokens need {n_pos + 1} positions, max_position_embeddings is {max_len}")
    cache = make_static_cache(transformers, model, max_len, dev, torch.bfloat16)

    ids = torch.zeros((1, 1), dtype=torch.long, device=dev)
    pos = torch.zeros((1, 1), dtype=torch.long, device=dev)
    cpos = torch.zeros((1,), dtype=torch.long, device=dev)

    def step():
        out = model(input_ids=ids, position_ids=pos, cache_position=cpos, past_key_values=cache, use_cache=True)
        return out.logits[0, -1]

    def set_inputs(token, p):
        ids.fill_(token)
        pos.fill_(p)
        cpos.fill_(p)

    inputs, logits = [], []
    with torch.inference_mode():
        token = prompt[0]
        for p in range(n_pos):
            if p < len(prompt):
                token = prompt[p]
            set_inputs(token, p)
            row = step().float()
            inputs.append(token)
            logits.append(row.cpu())
            token = int(torch.argmax(row).item())
        generated = [int(torch.argmax(r).item()) for r in logits[len(prompt) - 1:]]
        report["greedy_tokens"] = generated

        # Timing: one step at the next position, eager then as a CUDA graph.
        timed_pos = n_pos
        report["timed_position"] = timed_pos
        set_inputs(token, timed_pos)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def time_it(fn):
            for _ in range(args.warmup):
                fn()
            torch.cuda.synchronize()
            us = []
            for _ in range(args.replays):
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                us.append(start.elapsed_time(stop) * 1000.0)
            return us

        eager_ref = step().float().clone()
        report["eager"] = summary(time_it(step))
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                graph_out = step()
            graph.replay()
            torch.cuda.synchronize()
            diff = (graph_out.float() - eager_ref).abs().max().item()
            report["cuda_graph_vs_eager_max_abs_diff"] = diff
            report["cuda_graph"] = summary(time_it(graph.replay))
        except Exception as e:  # recorded, the eager figures stand
            report["errors"].append("cuda graph: " + "".join(traceback.format_exception_only(type(e), e)).strip())
        if "cuda_graph" in report:
            report["ratio_eager_over_graph"] = report["eager"]["median_us"] / report["cuda_graph"]["median_us"]

    out = {"format": "amk-baseline-v1", "model": args.name,
           "implementation": f"transformers {transformers.__version__} LlamaForCausalLM, bfloat16, StaticCache, torch {torch.__version__}",
           "dtype": "bf16", "prompt": prompt, "inputs": inputs,
           # 8 significant digits: far below the bf16 tolerance, half the bytes of a float64 repr
           "logits": [[float(f"{v:.8g}") for v in r.tolist()] for r in logits], "timing": report}
    with open(args.out, "w") as f:
        json.dump(out, f, allow_nan=False)
    line = {k: report.get(k) for k in ("device", "timed_position", "eager", "cuda_graph", "ratio_eager_over_graph", "errors")}
    print(json.dumps(line, indent=1))


if __name__ == "__main__":
    main()
