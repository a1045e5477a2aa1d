#!/usr/bin/env python3
"""Bandwidth figures of measured megakernel verdicts: for each
`--eval NAME=VERDICT.json:CONFIG.json[:POS]` it counts the bytes one decode
step really streams — every weight read once, except the embedding table of
which one row is read (unless it is tied to the lm_head, which reads it
whole), plus the K and V rows of positions 0..POS — and prints GB/s and the
percentage of the HBM bandwidth: the datasheet's (--hbm-gbs) and the copy
bandwidth measured in the same run (--copy COPY.json from copy_bw.py).
Median, p10 and p90 come from the verdict (latency_us and its notes). A
verdict that is not correct=true with a measured-gpu latency is reported, not
counted. Writes a Markdown table to stdout and JSON to --json."""
import argparse
import json
import re
import sys


def streamed_bytes(cfg, pos):
    dt = {"bfloat16": 2, "float16": 2, "float32": 4}[cfg.get("torch_dtype") or cfg.get("dtype")]
    h, inter, vocab, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    per_layer = 2 * h + q * h + 2 * kv * h + h * q + 3 * inter * h
    tied = cfg.get("tie_word_embeddings", False)
    weights = layers * per_layer + h + vocab * h  # layers, final norm, lm_head (the table itself when tied)
    if not tied:
        weights += h  # one embedding row
    kv_read = 2 * layers * (pos + 1) * kv
    return {"weights": weights * dt, "kv": kv_read * dt, "total": (weights + kv_read) * dt}


def percentiles(notes):
    for n in notes or []:
        m = re.search(r"median ([0-9.]+) us over (\d+) samples.*\(p10 ([0-9.]+), p90 ([0-9.]+)", n)
        if m:
            return float(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--eval", action="append", default=[], help="NAME=VERDICT.json:CONFIG.json[:POS]")
    p.add_argument("--copy", help="copy_bw.py output")
    p.add_argument("--hbm-gbs", type=float, required=True, help="the datasheet HBM bandwidth of the device, GB/s")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    copy = None
    if args.copy:
        try:
            copy = json.load(open(args.copy))["median_gbs"]
        except Exception as e:
            print(f"copy bandwidth unreadable: {e}", file=sys.stderr)
    rows = []
    print("| model | pos | median us | p10 | p90 | samples | streamed MB | GB/s | % of datasheet HBM | % of measured copy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for spec in args.eval:
        name, _, rest = spec.partition("=")
        parts = rest.split(":")
        try:
            v = json.load(open(parts[0]))
            cfg = json.load(open(parts[1]))
        except Exception as e:
            print(f"| {name} | | unreadable: {e} |")
            continue
        pos = int(parts[2]) if len(parts) > 2 else 0
        if not (v.get("correct") and v.get("latency_kind") == "measured-gpu" and v.get("latency_us")):
            print(f"| {name} | {pos} | no measured-gpu latency with a correctness PASS (correct={v.get('correct')}) |")
            continue
        b = streamed_bytes(cfg, pos)
        med = v["latency_us"]
        pct = percentiles(v.get("notes"))
        p10, p90, n = (pct[2], pct[3], pct[1]) if pct else (None, None, None)
        gbs = b["total"] / (med * 1e-6) / 1e9
        row = {"model": name, "pos": pos, "median_us": med, "p10_us": p10, "p90_us": p90, "samples": n,
               "streamed_bytes": b, "gbs": gbs, "pct_hbm_datasheet": 100 * gbs / args.hbm_gbs,
               "pct_copy": 100 * gbs / copy if copy else None, "copy_gbs": copy}
        rows.append(row)
        fmt = lambda x, f="%.1f": (f % x) if x is not None else "-"
        print(f"| {name} | {pos} | {med:.1f} | {fmt(p10)} | {fmt(p90)} | {fmt(n, '%d')} | {b['total'] / 1e6:.1f} | {gbs:.0f} | "
              f"{row['pct_hbm_datasheet']:.1f} | {fmt(row['pct_copy'])} |")
    if copy:
        print(f"\nmeasured copy bandwidth (read + write): {copy:.0f} GB/s; datasheet HBM: {args.hbm_gbs:.0f} GB/s")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
