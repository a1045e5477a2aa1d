#!/usr/bin/env python3
"""The summary of a GPU visit (scripts/gpu/visit.sh), printed last: read the
visit's results folder and print, for every `amkctl eval` verdict, whether the
device's logits matched the reference VM, the worst error as a share of the
dtype's tolerance and the top-1 agreement (from the verdict's notes), the
per-token time (median, p10, p90) with GB/s and the share of the device's HBM
bandwidth on the bytes a step streams (the datasheet's, and the copy
bandwidth measured in the same run); the PyTorch eager and CUDA-graph times
with the ratio amk / CUDA graph; and every step that failed, timed out or was
skipped. Standard library only."""
import argparse
import csv
import glob
import json
import os
import re
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception:
        return None


def device_check(notes):
    """(error share of the tolerance in %, top1) of the device check, or None."""
    for n in notes or []:
        m = re.search(r"logits match the reference VM at pos \d+ \(\w+\): max_abs_err ([^,]+), ([0-9.]+)% of the tolerance, top1 ([0-9.]+)", n)
        if m:
            return float(m.group(2)), float(m.group(3))
    for n in notes or []:
        m = re.search(r"([0-9.]+|Inf|inf)% of the tolerance, top1 ([0-9.]+)", n)
        if m:
            return float(m.group(1)), float(m.group(2))
    return None


def percentiles(notes):
    for n in notes or []:
        m = re.search(r"median ([0-9.]+) us over (\d+) samples.*\(p10 ([0-9.]+), p90 ([0-9.]+)", n)
        if m:
            return float(m.group(3)), float(m.group(4))
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("results", help="the visit's results folder ($R)")
    p.add_argument("--pos", type=int, default=32)
    p.add_argument("--hbm-gbs", type=float, default=4800, help="the device's datasheet HBM bandwidth, GB/s")
    args = p.parse_args()
    r = args.results
    copy = load(os.path.join(r, "copy-bw.json"))
    copy_gbs = copy.get("median_gbs") if copy else None
    print(f"== summary ({os.path.basename(r)}): correctness first, then time")
    if copy_gbs:
        print(f"copy bandwidth (read + write): {copy_gbs:.0f} GB/s")
    measured = {}
    for f in sorted(glob.glob(os.path.join(r, "eval-*.json"))):
        name = os.path.basename(f)[len("eval-"):-len(".json")]
        v = load(f)
        if not v:
            print(f"{name}: no verdict (see eval-{name}.log)")
            continue
        check = device_check(v.get("notes"))
        line = f"{name}: "
        if not v.get("valid"):
            line += f"INVALID ({v.get('rejected_reason')})"
        elif v.get("correct"):
            line += "PASS"
        else:
            line += "FAIL"
        if check:
            line += f", error {check[0]:.1f}% of the tolerance, top-1 {check[1]:.4f}"
        elif v.get("valid"):
            reason = [n for n in v.get("notes") or [] if "differs" in n or "timeout" in n.lower() or "crash" in n.lower()]
            if reason:
                line += f" ({reason[0][:300]})"
        lat, kind = v.get("latency_us"), v.get("latency_kind")
        if lat is not None and v.get("correct"):
            line += f"; {lat:.2f} us {kind}"
            pp = percentiles(v.get("notes"))
            if pp:
                line += f" (p10 {pp[0]:.2f}, p90 {pp[1]:.2f})"
            mb = v.get("streamed_mb") or 0
            if kind == "measured-gpu" and mb > 0:
                gbs = mb * 1e6 / (lat * 1e-6) / 1e9
                line += f", {gbs:.0f} GB/s on {mb:.1f} MB streamed = {100 * gbs / args.hbm_gbs:.1f}% of datasheet HBM"
                if copy_gbs:
                    line += f", {100 * gbs / copy_gbs:.1f}% of the measured copy"
                measured[name] = lat
        print(line)
    for t in sorted(glob.glob(os.path.join(r, "torch-timing-*.json"))):
        m = os.path.basename(t)[len("torch-timing-"):-len(".json")]
        tim = load(t) or {}
        line = f"torch {m}:"
        if "eager" in tim:
            line += f" eager {tim['eager']['median_us']:.1f} us"
        graph = tim.get("cuda_graph", {}).get("median_us")
        if graph:
            line += f", CUDA graph {graph:.1f} us"
        c = load(os.path.join(r, f"check-baseline-{m}.json"))
        if c:
            line += f"; same model as amk's: {'PASS' if c.get('pass') else 'FAIL'} ({c.get('argmax_agree')}/{len(c.get('steps', []))} argmax agree)"
        for point in ("device-default", "fully-fused"):
            amk = measured.get(f"{m}-{args.pos}-{point}")
            if amk and graph:
                line += f"; amk {point} / CUDA graph = {amk / graph:.3f}"
        print(line)
    ncu = os.path.join(r, "ncu-small.csv")
    if os.path.exists(ncu):
        with open(ncu) as f:
            rows = [row for row in csv.reader(f) if any("dram__bytes" in x or "gpu__time" in x for x in row)]
        for row in rows[-3:]:
            print("ncu small: " + " ".join(x for x in row if x)[:200])
    tune = load(os.path.join(r, "tune-gemv.json"))
    if tune and "best_us" in tune:
        print(f"tune gemv_tile {tune.get('dtype')}: best {tune.get('best_variant')} {tune['best_us']:.2f} us, speedup {tune.get('speedup')}")
    try:
        with open(os.path.join(r, "steps.tsv")) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    except OSError:
        rows = []
    bad = [s for s in rows if s["rc"] not in ("0",)]
    for s in bad:
        why = s["note"] or f"exit {s['rc']}"
        print(f"step {s['step']}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
